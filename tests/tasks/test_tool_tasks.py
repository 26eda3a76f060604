"""Tool tasks in every format: scripted policies in hermes, llama3, mistral and fenced solve them; malformed calls
get their status and a tool message and the episode goes on within its budget; HiddenTable's tool-blind bound;
check_env on every tool id and format."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from dapo_env import EpisodeGroupEnv, MultiTurnEnv
from dapo_env.tasks import get_task
from dapo_env.tools import format_tool_call, tool_use_stats

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
DATA = {"GSM8KTool-v0": str(SAMPLES / "gsm8k_sample.jsonl"), "DAPOMathTool-v0": str(SAMPLES / "dapo_math_17k_sample.jsonl"),
        "MBPPFeedback-v0": str(SAMPLES / "mbpp_sample.jsonl")}
NATIVE = ("hermes", "llama3", "mistral")


def _key(prompt: str) -> str:
    return re.search(r"under the key (\w+)", prompt).group(1)


def _call(fmt: str, name: str, **arguments) -> str:
    return format_tool_call(fmt, [(name, arguments)])


# --- HiddenTable-v0 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", NATIVE)
def test_a_scripted_policy_solves_hidden_table_in_each_format(fmt: str) -> None:
    env = gym.make("HiddenTable-v0", tool_format=fmt)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        reply, reward, terminated, truncated, info = env.step(_call(fmt, "lookup", key=_key(obs)))
        assert not terminated and info["tool_calls"][0]["status"] == "ok" and reply.isdigit()
        reply2, reward, terminated, truncated, info = env.step(reply)
        assert terminated and reward == 1.0 and info["solved"] and info["tool_calls"] == []
    env.close()


@pytest.mark.parametrize("fmt", NATIVE)
def test_malformed_calls_are_answered_and_the_episode_goes_on(fmt: str) -> None:
    """Each kind of failure gets its status and a tool message that says what was wrong; the budget still ends
    the episode; a later good call and answer still solve it."""
    bad = {"hermes": '<tool_call>{"name": "lookup", "arguments": {"key": }</tool_call>',
           "llama3": '{"name": "lookup", "parameters": {"key": ',
           "mistral": '[TOOL_CALLS][{"name": "lookup", "arguments": {"key"'}[fmt]
    turns = [(bad, "invalid_json", "not valid JSON"),
             (_call(fmt, "search", key="x"), "unknown_tool", "no tool named 'search'; the tools are: lookup"),
             (_call(fmt, "lookup", k="x"), "bad_arguments", "missing required argument 'key'"),
             (_call(fmt, "lookup", key=7), "bad_arguments", "argument 'key' must be of type string, got integer")]
    env = MultiTurnEnv("HiddenTable-v0", tool_format=fmt, max_tool_calls=5)
    obs, _ = env.reset(seed=1)
    for text, status, words in turns:
        reply, reward, terminated, truncated, info = env.step(text)
        assert [c["status"] for c in info["tool_calls"]] == [status]
        assert reply.startswith(f"Error ({status}): ") and words in reply
        assert not terminated and not truncated and reward == 0.0
    reply, *_ = env.step(_call(fmt, "lookup", key=_key(obs)))
    _, reward, terminated, _, info = env.step(f"It is {reply}")
    assert terminated and info["solved"] and info["num_turns"] == 6
    # the budget: a tool turn after max_tool_calls of them ends the episode unsolved (its calls checked, not run)
    env = MultiTurnEnv("HiddenTable-v0", tool_format=fmt, max_tool_calls=1)
    obs, _ = env.reset(seed=1)
    env.step(_call(fmt, "lookup", key="x"))
    reply, reward, terminated, _, info = env.step(_call(fmt, "lookup", key=_key(obs)))
    assert terminated and not info["solved"] and reward == 0.0
    assert info["tool_calls"][0]["status"] == "ok" and info["tool_calls"][0]["result"] is None


def test_several_calls_in_one_turn_are_answered_in_order() -> None:
    env = MultiTurnEnv("HiddenTable-v0", tool_format="mistral")
    obs, _ = env.reset(seed=2)
    text = format_tool_call("mistral", [("lookup", {"key": "zzz"}), ("lookup", {"key": _key(obs)}), ("nope", {})])
    reply, _, _, _, info = env.step(text)
    statuses = [c["status"] for c in info["tool_calls"]]
    assert statuses == ["ok", "ok", "unknown_tool"]
    assert reply.split("\n\n") == ["no key 'zzz' in the table", info["tool_calls"][1]["result"],
                                   "Error (unknown_tool): no tool named 'nope'; the tools are: lookup"]
    assert [m["role"] for m in env.episode.messages[2:]] == ["tool", "tool", "tool"]


def test_a_tool_blind_policy_succeeds_at_most_one_in_n() -> None:
    """Whatever a policy answers from the prompt alone, each block of n_values problems shares one prompt and
    runs through every answer once: a tool-blind policy is right on exactly 1 of each block."""
    n = 7
    problems = get_task("HiddenTable-v0").load("train", n_values=n, size=20 * n)
    by_prompt: dict[str, list[str]] = {}
    for p in problems:
        by_prompt.setdefault(p.question, []).append(p.answer)
    for answers in by_prompt.values():  # blocks that ask the same key add whole permutations: still balanced
        assert sorted(answers, key=int) == sorted([str(v) for v in range(n)] * (len(answers) // n), key=int)
    env = MultiTurnEnv("HiddenTable-v0", n_values=n, size=20 * n)
    for guess_of in (lambda prompt: "3", lambda prompt: str(len(prompt) % n), lambda prompt: "0 1 2 3 4 5 6"):
        solved = 0
        for i in range(20 * n):
            obs, _ = env.reset(options={"index": i})
            *_, info = env.step(guess_of(obs))
            solved += info["solved"]
        assert solved == 20  # exactly 1/n


def test_hidden_table_knobs_and_group_env_tool_stats() -> None:
    with pytest.raises(ValueError, match="tool_format='fenced' is not available here"):
        get_task("HiddenTable-v0").load("train", tool_format="fenced")
    with pytest.raises(TypeError, match="unknown option"):
        get_task("HiddenTable-v0").load("train", colour="red")
    env = EpisodeGroupEnv("HiddenTable-v0", num_envs=2 * 3, group_size=3)
    env.reset(seed=0)

    def policy(requests):
        out = []
        for r in requests:
            if r.turn == 0 and r.group == 0:
                out.append(_call("hermes", "lookup", key=_key(r.messages[0]["content"])))
            elif r.turn == 0:
                out.append("5")  # tool-blind
            else:
                out.append(r.messages[-1]["content"])
        return out

    groups = env.rollout(policy).groups
    env.close()
    assert all(groups[0].correct) and groups[0].infos[0]["tool_calls"][0]["status"] == "ok"
    stats = tool_use_stats([info for g in groups for info in g.infos])
    assert stats["tool/no_call_share"] == 0.5 and stats["tool/calls_per_episode"] == 0.5
    assert stats["tool/failed_share"] == 0.0


@pytest.mark.parametrize("fmt", ["hermes", "llama3", "mistral", "auto"])
def test_check_env_on_hidden_table(fmt: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("HiddenTable-v0", tool_format=fmt)
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", sorted(DATA))
@pytest.mark.parametrize("fmt", ["fenced", "hermes"])
def test_check_env_on_the_data_tool_tasks(env_id: str, fmt: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(env_id, tool_format=fmt, data_files=DATA[env_id])
        check_env(env.unwrapped)
    env.close()


def test_sync_and_async_vector_envs_play_hidden_table() -> None:
    for mode in ("sync", "async"):
        envs = gym.make_vec("HiddenTable-v0", num_envs=2, vectorization_mode=mode)
        obs, _ = envs.reset(seed=0)
        obs, rewards, terminated, truncated, infos = envs.step(tuple(_call("hermes", "lookup", key=_key(o)) for o in obs))
        assert not terminated.any() and all(o.isdigit() for o in obs)
        obs, rewards, terminated, truncated, infos = envs.step(tuple(obs))
        assert terminated.all() and rewards.tolist() == [1.0, 1.0]
        envs.close()


# --- the math and code tool tasks in native formats ------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fenced", *NATIVE])
def test_a_scripted_policy_solves_gsm8k_tool_in_each_format(fmt: str) -> None:
    """Janet's ducks (the sample's first problem): compute with the python tool, then answer from its output."""
    env = MultiTurnEnv("GSM8KTool-v0", tool_format=fmt, data_files=DATA["GSM8KTool-v0"])
    obs, _ = env.reset(options={"index": 0})
    assert ("python tool" in obs) == (fmt != "fenced")
    code = "print((16 - 3 - 4) * 2)"
    reply, _, terminated, _, info = env.step(_call(fmt, "python", code=code) if fmt != "fenced" else
                                             f"Let me compute.\n```python\n{code}\n```")
    assert not terminated and "18" in reply
    assert [(c["name"], c["status"], c["arguments"]) for c in info["tool_calls"]] == [("python", "ok", {"code": code})]
    _, reward, terminated, _, info = env.step("The program printed 18, so the answer is \\boxed{18}.")
    assert terminated and reward == 1.0 and info["solved"]


@pytest.mark.parametrize("fmt", NATIVE)
def test_dapo_math_tool_in_native_formats(fmt: str) -> None:
    env = MultiTurnEnv("DAPOMathTool-v0", tool_format=fmt, data_files=DATA["DAPOMathTool-v0"])
    obs, _ = env.reset(options={"index": 0})
    assert 'after "Answer:"' in obs and "without a tool call" in obs
    reply, _, terminated, _, info = env.step(_call(fmt, "python", code="print(1 +)"))  # a program that fails
    assert not terminated and "SyntaxError" in reply and info["tool_calls"][0]["status"] == "ok"
    answer = env.episode.problem.answer
    _, reward, terminated, _, info = env.step(f"Answer: {answer}")
    assert terminated and reward == 1.0


@pytest.mark.parametrize("fmt", NATIVE)
def test_mbpp_feedback_with_the_run_tests_tool(fmt: str) -> None:
    env = MultiTurnEnv("MBPPFeedback-v0", tool_format=fmt, data_files=DATA["MBPPFeedback-v0"])
    obs, _ = env.reset(options={"id": "11"})
    assert "run_tests tool" in obs
    wrong = "def remove_Occ(s, ch):\n    return s[1:]"
    reply, _, terminated, _, info = env.step(_call(fmt, "run_tests", code=wrong))
    assert not terminated and "returned 'ello'" in reply and info["tool_calls"][0]["status"] == "ok"
    right = ("def remove_Occ(s, ch):\n    s = s.replace(ch, '', 1)\n    i = s.rfind(ch)\n"
             "    return s if i < 0 else s[:i] + s[i + 1:]")
    reply, _, terminated, _, _ = env.step(_call(fmt, "run_tests", code=right))
    assert reply == "All tests passed." and not terminated
    _, reward, terminated, _, info = env.step(f"```python\n{right}\n```")
    assert terminated and info["solved"] and reward == pytest.approx(1.0 - 0.1 * 2)


_PIECES = ['{"name": "lookup", "parameters": {"key": "a"}}', '<tool_call>', '</tool_call>', '[TOOL_CALLS]', '[', ']',
           '{', '}', '"', ':', ',', "<think>", "</think>", "```", "lookup", "key", "7", " ", "\n", "<|python_tag|>",
           '{"name": "lookup", "arguments": {"key": "apple"}}', "\x00", "é"]


@pytest.mark.parametrize("fmt", NATIVE)
def test_no_text_crashes_an_episode(fmt: str) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from dapo_env.tools import TOOL_STATUSES

    env = MultiTurnEnv("HiddenTable-v0", tool_format=fmt, max_tool_calls=2)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), min_size=1, max_size=3))
    def play(turns: list[str]) -> None:
        env.reset(seed=0)
        for text in turns:
            reply, reward, terminated, truncated, info = env.step(text)
            assert isinstance(reply, str) and all(c["status"] in TOOL_STATUSES for c in info["tool_calls"])
            if terminated or truncated:
                break

    play()
