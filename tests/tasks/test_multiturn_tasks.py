"""MBPPFeedback-v0, GSM8KTool-v0 and DAPOMathTool-v0 through Gymnasium with scripted policies: fix after
feedback, print then answer, hostile tool code contained, no expected values leaked, budgets, knobs, vector
envs; offline on the shipped samples, and on the real files where ``$DAPO_ENV_DATA`` has them."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import dapo_env  # noqa: F401  (registers the ids)
from dapo_env import MultiTurnEnv
from dapo_env.tasks import TaskDataError, get_task, list_tasks
from dapo_env.tasks.multiturn_tasks import (CodeFeedback, FeedbackRules, PythonTool, ToolRules,
                                            outside_code)
from dapo_env.types import CodeTests, Completion, History, Problem
from dapo_env.verifiers import CodeVerifier, SandboxLimits

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
DATA = {
    "MBPPFeedback-v0": str(SAMPLES / "mbpp_sample.jsonl"),
    "GSM8KTool-v0": str(SAMPLES / "gsm8k_sample.jsonl"),
    "DAPOMathTool-v0": str(SAMPLES / "dapo_math_17k_sample.jsonl"),
}
NEW_IDS = sorted(DATA)


def _make(env_id: str, **kwargs) -> gym.Env:
    return gym.make(env_id, data_files=DATA[env_id], **kwargs)


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# --- registration, check_env, vector envs -----------------------------------------------------------------
def test_the_ids_are_registered_multi_turn_tasks() -> None:
    for env_id in NEW_IDS:
        task = get_task(env_id)
        assert env_id in list_tasks("multi-turn") and env_id not in list_tasks("single-turn")
        assert task.turns == "multi-turn" and gym.spec(env_id).entry_point == "dapo_env.multiturn:MultiTurnEnv"
    # each one reuses its single-turn twin's loading (the same hub dataset)
    assert get_task("MBPPFeedback-v0").source.hub_id == get_task("MBPP-v0").source.hub_id
    assert get_task("GSM8KTool-v0").source.hub_id == get_task("GSM8K-v0").source.hub_id
    assert get_task("DAPOMathTool-v0").source.hub_id == get_task("DAPOMath-v0").source.hub_id


@pytest.mark.parametrize("env_id", NEW_IDS)
def test_check_env_and_a_gymnasium_episode(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = _make(env_id)
        check_env(env.unwrapped)
        obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and "```python" in obs
    assert not {"answer", "metadata", "solution", "code"} & set(info)  # no reference reaches the policy
    steps = 0
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step("no idea")
        steps += 1
        assert isinstance(obs, str) and reward == 0.0 and {"turn", "reward_terms", "verifier", "solved"} <= set(info)
    assert terminated and not truncated and not info["solved"]
    assert steps == (3 if env_id == "MBPPFeedback-v0" else 4)  # max_attempts=3; max_tool_calls=3, then one answer
    assert info["episode_return"] == 0.0 and info["num_turns"] == steps
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("again")
    env.close()


@pytest.mark.parametrize("env_id", NEW_IDS)
def test_make_vec_plays_whole_episodes(env_id: str) -> None:
    turns = 3 if env_id == "MBPPFeedback-v0" else 4
    for mode in ("sync", "async"):
        envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, data_files=DATA[env_id])
        obs, _ = envs.reset(seed=0)
        prompts = tuple(obs)
        for step in range(turns):
            obs, rewards, terminated, truncated, infos = envs.step(("no idea", "no idea"))
            assert terminated.tolist() == [step == turns - 1] * 2 and not truncated.any()
        assert rewards.tolist() == [0.0, 0.0] and infos["_final_obs"].all()
        assert all("```python" in o and o != f for o, f in zip(obs, infos["final_obs"]))  # autoreset: next prompts
        assert prompts[0] != prompts[1] or len(envs.call("problems")[0]) == 1
        envs.close()


@pytest.mark.parametrize("env_id", NEW_IDS)
def test_episodes_are_deterministic_given_the_seed(env_id: str) -> None:
    actions = ["```python\nprint(sum(range(10)))\n```", "```python\ndef f(x):\n    return x\n```"]

    def play(seed: int) -> list:
        env = _make(env_id)
        out = [env.reset(seed=seed)[0]]
        for action in actions:
            obs, reward, terminated, truncated, _ = env.step(action)
            out.append((obs, reward, terminated, truncated))
        return out

    first = play(5)
    assert play(5) == first
    assert any(play(s)[0] != first[0] for s in (6, 7, 8))


# --- MBPPFeedback-v0 ----------------------------------------------------------------------------------------
_REMOVE_OCC_BUGGY = "def remove_Occ(s, ch):\n    return s.replace(ch, '', 1)"  # removes the first occurrence only
_REMOVE_OCC_FIXED = ("def remove_Occ(s, ch):\n    s = s.replace(ch, '', 1)\n    i = s.rfind(ch)\n"
                     "    return s if i < 0 else s[:i] + s[i + 1:]")


def fix_after_feedback(observation: str, attempt: int) -> str:
    """A scripted programmer: a first attempt with a bug (it drops the first occurrence only); on feedback it
    reads the candidate's own values from the reply and, seeing that the last occurrence survived, fixes it."""
    if attempt == 0:
        return f"Here is my solution.\n{_fenced(_REMOVE_OCC_BUGGY)}"
    returned = dict(re.findall(r"remove_Occ\((.*?)\) returned (.+)", observation))
    assert returned, observation
    kept_last = all(eval(args)[1] in eval(value) for args, value in returned.items())  # noqa: S307 (test data)
    assert kept_last
    return f"The last occurrence survived; fixed:\n{_fenced(_REMOVE_OCC_FIXED)}"


def test_fix_after_feedback_solves_on_the_second_attempt() -> None:
    env = _make("MBPPFeedback-v0", attempt_penalty=0.25)
    obs, _ = env.reset(options={"id": "11"})
    assert "remove_Occ" in obs and "You have 3 attempts" in obs
    rewards = []
    for attempt in range(3):
        obs, reward, terminated, truncated, info = env.step(fix_after_feedback(obs, attempt))
        rewards.append(reward)
        if attempt == 0:
            assert not terminated and info["verifier"]["reason"] == "tests_failed:3/3"
            # the feedback: each failing test's source (shown in the prompt) and the candidate's own value
            assert 'assert remove_Occ("hello","l") == "heo"' in obs and "returned 'helo'" in obs
            assert "3 of 3 tests failed" in obs and "2 attempts left" in obs
            assert info["turn_info"] == {"attempt": 1, "attempts_left": 2}
        if terminated:
            break
    assert rewards == [0.0, 0.75] and terminated and not truncated and info["solved"]
    assert info["reward_terms"] == {"pass": 1.0, "attempt_penalty": -0.25} and obs == "All tests passed."
    assert info["episode_return"] == 0.75 and info["num_turns"] == 2


def test_every_sample_problem_fixed_after_feedback() -> None:
    """On every shipped MBPP problem: a stub returning None fails, the feedback names the stub's value, and the
    reference solution then passes on attempt 2."""
    env = _make("MBPPFeedback-v0")
    for index in range(len(env.unwrapped.problems)):
        obs, _ = env.reset(options={"index": index})
        problem = env.unwrapped.episode.problem
        name = problem.answer.entry_point
        obs, reward, terminated, _, info = env.step(_fenced(f"def {name}(*args, **kwargs):\n    return None"))
        assert not terminated and reward == 0.0 and "returned None" in obs, (problem.id, obs)
        for test in problem.answer.tests:
            assert test in env.unwrapped.episode.messages[0]["content"]  # what the feedback shows was in the prompt
        obs, reward, terminated, _, info = env.step(_fenced(problem.metadata["code"]))
        assert terminated and info["solved"] and reward == pytest.approx(0.9), (problem.id, obs)


def test_out_of_attempts_and_every_kind_of_failure_is_said() -> None:
    env = _make("MBPPFeedback-v0", max_attempts=4, attempt_penalty=0.2)
    obs, _ = env.reset(options={"id": "11"})
    assert "You have 4 attempts" in obs
    obs, *_ = env.step("I would loop over the string.")
    assert obs.startswith("No Python code found")
    obs, *_ = env.step(_fenced("def remove_Occ(s, ch)\n    return s"))
    assert obs.startswith("Your code does not compile: SyntaxError") and "(line 1)" in obs
    obs, *_ = env.step(_fenced("def remove_Occ(s, ch):\n    raise KeyError('boom')"))
    assert "KeyError" in obs and "1 attempt left" in obs
    obs, reward, terminated, truncated, info = env.step(_fenced("def remove_Occ(s, ch):\n    return 0"))
    assert terminated and not truncated and reward == 0.0 and not info["solved"] and obs.startswith("Out of attempts")
    assert info["episode_return"] == 0.0 and info["num_turns"] == 4


def test_feedback_never_shows_an_expected_value_of_a_hidden_test() -> None:
    """A test the prompt does not show is reported as "a hidden test" with the candidate's own value only."""
    tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(20, 22) == 4242"), entry_point="add")
    problem = Problem("7", "Add.", tests, {"max_attempts": 3, "attempt_penalty": 0.1})
    history = History(problem, ({"role": "user", "content": "Write add. Tests:\nassert add(1, 2) == 3"},))
    verifier = CodeVerifier()
    code = _fenced("def add(a, b):\n    return a * b")
    turn = CodeFeedback(verifier=verifier).respond(history, Completion(code), verifier(code, tests))
    assert not turn.done and "2 of 2 tests failed" in turn.reply
    assert "assert add(1, 2) == 3" in turn.reply and "returned 2" in turn.reply  # shown in the prompt already
    assert "a hidden test" in turn.reply and "returned 440" in turn.reply
    assert "4242" not in turn.reply and "add(20, 22) ==" not in turn.reply


def test_a_slow_attempt_is_said_to_time_out() -> None:
    verifier = CodeVerifier(limits=SandboxLimits(wall_s=1.0, cpu_s=1))
    tests = CodeTests(tests=("assert f() == 1",), entry_point="f")
    problem = Problem("0", "f", tests, {"max_attempts": 2, "attempt_penalty": 0.1})
    history = History(problem, ({"role": "user", "content": "assert f() == 1"},))
    code = _fenced("def f():\n    while True:\n        pass")
    turn = CodeFeedback(verifier=verifier).respond(history, Completion(code), verifier(code, tests))
    assert "did not finish within the time limit" in turn.reply and not turn.done


def test_feedback_knobs_are_validated_with_the_fix() -> None:
    task = get_task("MBPPFeedback-v0")
    assert FeedbackRules().max_attempts == 3
    with pytest.raises(ValueError, match="max_attempts must be an int >= 1"):
        task.load(data_files=DATA["MBPPFeedback-v0"], max_attempts=0)
    with pytest.raises(ValueError, match="lower attempt_penalty below 0.5"):
        task.load(data_files=DATA["MBPPFeedback-v0"], attempt_penalty=0.5)
    with pytest.raises(TypeError, match="valid options"):
        task.load(data_files=DATA["MBPPFeedback-v0"], max_attempt=2)
    with pytest.raises(TaskDataError):
        task.load(data_files=str(SAMPLES / "no_such_file.jsonl"))
    one = _make("MBPPFeedback-v0", max_attempts=1)
    one.reset(options={"id": "11"})
    assert one.step("pass")[2]  # one attempt: the first failure ends the episode


# --- GSM8KTool-v0 and DAPOMathTool-v0 -----------------------------------------------------------------------
def _last_calculation(solution: str) -> str:
    """The expression of a GSM8K solution's last calculator annotation (``<<9*2=18>>`` -> ``9*2``)."""
    return re.findall(r"<<([^=<>]+)=[^<>]*>>", solution)[-1]


def tool_then_answer(env: gym.Env, program: str, answer_line: str) -> tuple[list[str], list[float], dict]:
    """A scripted tool user: runs ``program``, then writes ``answer_line`` with what the tool printed."""
    obs, reward, terminated, truncated, info = env.step(f"Let me compute it.\n{_fenced(program)}")
    assert not (terminated or truncated), obs
    printed = re.search(r"```output\n(.*?)\n```", obs, re.DOTALL).group(1).strip()
    final = env.step(f"The program printed {printed}.\n{answer_line.format(printed)}")
    return [obs, final[0]], [reward, final[1]], final[4]


def test_gsm8k_tool_script_prints_then_boxes_every_sample_problem() -> None:
    env = _make("GSM8KTool-v0")
    solved = 0
    for index in range(len(env.unwrapped.problems)):
        obs, _ = env.reset(options={"index": index})
        assert "\\boxed{}" in obs and "at most 3 times" in obs
        problem = env.unwrapped.episode.problem
        program = f"result = {_last_calculation(problem.metadata['solution'])}\nprint(round(result, 6))"
        (tool_reply, final_reply), rewards, info = tool_then_answer(env, program, "\\boxed{{{}}}")
        assert tool_reply.startswith("```output\n") and "2 more times" in tool_reply
        assert final_reply == "Final answer recorded." and info["num_turns"] == 2
        assert rewards[0] == 0.0 and rewards[1] == float(info["solved"])
        solved += info["solved"]
    assert solved == len(env.unwrapped.problems)  # the last annotation of each sample solution is its answer


def test_dapo_math_tool_script_answers_on_an_answer_line() -> None:
    env = _make("DAPOMathTool-v0")
    obs, _ = env.reset(options={"index": 0})
    assert obs.startswith("Solve the following math problem") and '"Answer:"' in obs
    answer = env.unwrapped.episode.problem.answer
    assert answer == "34"  # the sample's first answer; the scripted program prints it (the tool round trip is
    program = "print(30 + 4)"  # what is tested, not the maths)
    replies, rewards, info = tool_then_answer(env, program, "Answer: {}")
    assert rewards == [0.0, 1.0] and info["solved"] and info["verifier"]["extracted"] == "34"
    env.reset(options={"index": 0})
    *_, info = env.step("I think the answer is 35.\nAnswer: 35")
    assert info["num_turns"] == 1 and not info["solved"]  # a wrong committed answer ends the episode unsolved


def test_code_and_its_output_are_not_answers() -> None:
    env = _make("GSM8KTool-v0")
    env.reset(options={"index": 0})  # Janet's ducks: 18
    obs, reward, terminated, *_ = env.step(_fenced("print('\\\\boxed{18}')") + "\n```output\n\\boxed{18}\n```")
    assert not terminated and "\\boxed{18}" in obs and reward == 0.0  # the program ran; nothing was committed
    obs, reward, terminated, _, info = env.step("\\boxed{18}\n" + _fenced("print(1)"))  # answered: code not run
    assert terminated and reward == 1.0 and info["turn_info"]["action"] == "answer" and obs == "Final answer recorded."
    assert outside_code("a ```python\nx\n``` b ```py\nunclosed") == "a  b "


def test_tool_budget_ends_the_episode_and_max_turns_truncates() -> None:
    env = _make("GSM8KTool-v0", max_tool_calls=1)
    obs, _ = env.reset(options={"index": 0})
    assert "at most 1 times" in obs or "at most 1 time" in obs
    obs, _, terminated, *_ = env.step(_fenced("print(16 - 3 - 4)"))
    assert not terminated and "No code runs left" in obs and "\\boxed{}" in obs
    obs, reward, terminated, truncated, info = env.step(_fenced("print((16 - 3 - 4) * 2)"))
    assert terminated and not truncated and reward == 0.0 and "episode is over" in obs
    env = MultiTurnEnv("GSM8KTool-v0", data_files=DATA["GSM8KTool-v0"], max_turns=2)
    env.reset(options={"index": 0})
    env.step("Let me think step by step.")
    obs, reward, terminated, truncated, info = env.step("I need to check my work.")
    assert truncated and not terminated and info["truncated_by"] == "max_turns"
    with pytest.raises(ValueError, match="max_tool_calls must be an int >= 0"):
        get_task("GSM8KTool-v0").load(data_files=DATA["GSM8KTool-v0"], max_tool_calls=-1)
    zero = _make("GSM8KTool-v0", max_tool_calls=0)
    zero.reset(options={"index": 0})
    assert zero.step("\\boxed{18}")[1] == 1.0  # no tool calls: one answer turn


def test_tool_output_is_capped_and_errors_show_stderrs_last_lines() -> None:
    tool = PythonTool(output_chars=200, error_lines=2, limits=SandboxLimits(wall_s=10.0))
    reply, info = tool.run("print('x' * 50_000)")
    assert len(reply) < 400 and "characters cut" in reply and info["exit_code"] == 0
    reply, info = tool.run("print('partial')\nimport sys\ndef f(n):\n    return 1 / n\nf(0)")
    assert "partial" in reply and "ZeroDivisionError: division by zero" in reply and info["exit_code"] == 1
    assert reply.count("\n") <= 6  # stdout + the last 2 stderr lines inside the fence
    reply, _ = tool.run("x = 1")
    assert "printed nothing" in reply
    with pytest.raises(ValueError, match="output_chars"):
        PythonTool(output_chars=10)


# --- hostile tool code --------------------------------------------------------------------------------------
HOSTILE = {
    "reads the host": "import os\nprint(open({secret!r}).read())\nprint(sorted(os.listdir({folder!r})))",
    "uses the network": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\nprint('CONNECTED')",
    "kills its parent": ("import os, signal\nfor pid in (os.getppid(), 1, {pid}):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
                         "    except Exception as e:\n        print(type(e).__name__)\nprint('after kill')"),
    "forks without end": "import os\nwhile True:\n    os.fork()",
    "eats memory": "x = bytearray(8 * 1024 ** 3)\nprint(len(x))",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_tool_code_is_contained_and_the_episode_continues(name: str, tmp_path: Path) -> None:
    secret = tmp_path / "host_secret.txt"
    secret.write_text("HOST-SECRET-7f3a\n")
    program = HOSTILE[name].format(secret=str(secret), folder=str(tmp_path), pid=os.getpid())
    env = _make("GSM8KTool-v0")
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step(_fenced(program))
    assert not (terminated or truncated) and reward == 0.0 and info["turn_info"]["action"] == "code"
    assert "HOST-SECRET" not in obs and "host_secret.txt'" not in obs.replace(repr(str(secret)), "")
    assert "CONNECTED" not in obs
    assert secret.read_text() == "HOST-SECRET-7f3a\n" and os.getpid() > 0
    # the episode goes on: the next program runs and the answer is graded
    obs, *_ = env.step(_fenced("print((16 - 3 - 4) * 2)"))
    assert "```output\n18\n```" in obs
    obs, reward, terminated, _, info = env.step("\\boxed{18}")
    assert terminated and reward == 1.0 and info["solved"]


# --- pieces -------------------------------------------------------------------------------------------------
def test_final_answer_verifier_follows_the_math_verifiers_commit_policy() -> None:
    gsm, dapo = get_task("GSM8KTool-v0").verifier, get_task("DAPOMathTool-v0").verifier
    assert gsm("Let me compute 6 * 7 first.\n" + _fenced("print(6 * 7)"), "42").extracted is None
    assert gsm("The answer is \\boxed{42}.", "42").correct and not gsm("\\boxed{41}", "42").correct
    # without code, every commitment GSM8K-v0 accepts ends the episode
    for text in ("Answer: 42", "The answer is 42.", "42", "So she makes 6 * 7 = 42 dollars."):
        assert gsm(text, "42").correct, text
    assert gsm("I need to check my work.", "42").extracted is None
    # beside code, only a box: a calculation stated before the program that checks it is not an answer
    for text in ("So she makes 6 * 7 = 42 dollars.", "The answer is 42.", "Answer: 42"):
        assert gsm(text + "\n" + _fenced("print(6 * 7)"), "42").extracted is None, text
    assert gsm("\\boxed{42}\n" + _fenced("print(6 * 7)"), "42").correct
    assert dapo("Answer: 42", "42").correct and dapo("\\boxed{42}", "42").extracted is None
    assert dapo(_fenced("print('Answer: 42')"), "42").extracted is None
    assert dapo(None, "42").reason == "error:TypeError"  # type: ignore[arg-type]
    assert ToolRules(max_tool_calls=0).max_tool_calls == 0


def test_real_data_episodes(shared_data: Path) -> None:
    """On the real MBPP and GSM8K files: a stub fails, the feedback names its value, the reference then passes;
    the print-then-box script solves GSM8K problems through the tool."""
    mbpp = MultiTurnEnv("MBPPFeedback-v0", data_files=str(shared_data / "mbpp" / "mbpp.jsonl"))
    for index in (0, 57, 199):
        mbpp.reset(options={"index": index})
        problem = mbpp.episode.problem
        obs, _, terminated, *_ = mbpp.step(_fenced(f"def {problem.answer.entry_point}(*a, **k):\n    return None"))
        assert not terminated and "returned None" in obs
        _, reward, terminated, _, info = mbpp.step(_fenced(problem.metadata["code"]))
        assert terminated and info["solved"], problem.id
    gsm = MultiTurnEnv("GSM8KTool-v0", data_files=str(shared_data / "gsm8k" / "gsm8k_test.jsonl"))
    for index in (0, 100, 1000):
        gsm.reset(options={"index": index})
        problem = gsm.episode.problem
        program = f"print(round({_last_calculation(problem.metadata['solution'])}, 6))"
        _, rewards, info = tool_then_answer(gsm, program, "\\boxed{{{}}}")
        assert info["num_turns"] == 2 and rewards == [0.0, 1.0] and info["solved"], problem.id


def test_group_env_plays_feedback_episodes_with_pooled_verification_and_threads() -> None:
    """B x G MBPPFeedback episodes through EpisodeGroupEnv, verified in a worker process and answered in two
    threads: a stub first, the reference after the feedback; groups carry the shaped episode returns."""
    from dapo_env import EpisodeGroupEnv

    env = EpisodeGroupEnv("MBPPFeedback-v0", num_envs=4, group_size=2, workers=1, threads=2,
                          reward_map=(-1.0, 1.0), data_files=DATA["MBPPFeedback-v0"])
    env.reset(seed=0)
    problems = {p.id: p for p in env.problems}

    def generate(requests):
        out = []
        for r in requests:
            prompt = r.messages[-1 if r.turn == 0 else 0]["content"]
            problem = next(p for p in problems.values() if p.answer.tests[0] in prompt)
            out.append(_fenced(f"def {problem.answer.entry_point}(*a, **k):\n    return None") if r.turn == 0
                       else _fenced(problem.metadata["code"]))
        return out

    groups = env.rollout(generate).groups
    env.close()
    assert len(groups) == 2 and all(g.size == 2 for g in groups)
    for group in groups:
        assert all(group.correct) and [t.num_turns for t in group.completions] == [2, 2]
        assert group.rewards == pytest.approx([-1.0 + 2 * 0.9] * 2)
        assert "returned None" in group.completions[0].turns[0].reply
