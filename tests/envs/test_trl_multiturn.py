"""trl_environment_factory: our multi-turn tasks through TRL 1.16's own ``GRPOTrainer(environment_factory=...)``.

The harness below re-enacts, from reading ``trl/trainer/grpo_trainer.py``, what the trainer does with an
environment factory: probe one instance, take every public function of its class but ``reset``/``get_reward`` as
a tool (schema from ``transformers.utils.get_json_schema``), draw one instance per rollout, ``reset(**row)`` and
append a returned string to the last user message, call the tools with the parsed arguments until the model
answers without a tool call, then call the reward functions with ``environments=``. The real trainer runs two
steps in ``test_real_grpo_trainer_two_multi_turn_steps`` (slow: a warm start of the tiny model comes first).
"""

from __future__ import annotations

import inspect
import pickle
import re
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from multiturn_helpers import OFFLINE_DATA, Bisection

from dapo_env.interop import EpisodeReward, TRLEnvironment, ToolSpec, trl_environment_factory
from dapo_env.tools import tool

ROOT = Path(__file__).resolve().parents[2]


def guess(number: str) -> str:
    """Submit one guess.

    Args:
        number: an integer from 1 to 16
    """
    return f"Answer: {number}"


GUESS = tool(guess)

# A scripted model turn: ("tool", {arguments}) calls the environment's one tool; ("final", text) answers.
Policy = Callable[[list[dict[str, Any]]], tuple[str, Any]]


def tools_like_grpo_trainer(instance: Any) -> list[Callable[..., str]]:
    """The tools TRL takes from an environment instance (its class's public functions but reset/get_reward)."""
    names = [name for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)]
    assert "reset" in names
    return [getattr(instance, n) for n in names if n not in ("reset", "get_reward") and not n.startswith("_")]


def roll_out_like_grpo_trainer(factory: Any, rows: list[dict[str, Any]], policy: Policy, *,
                               max_iterations: int = 8) -> tuple[list[Any], list[list[dict[str, Any]]], list[float]]:
    """One batch as GRPOTrainer drives it: environments, completions (message lists) and the rewards."""
    environments = [factory() for _ in rows]
    completions = []
    for environment, row in zip(environments, rows):
        tools = {tool.__name__: tool for tool in tools_like_grpo_trainer(environment)}
        prompt = list(row["prompt"])
        observation = environment.reset(**row)
        if observation is not None:
            prompt = prompt[:-1] + [{**prompt[-1], "content": prompt[-1]["content"] + observation}]
        completion: list[dict[str, Any]] = []
        for _ in range(max_iterations):
            kind, value = policy(prompt + completion)
            if kind == "final":
                completion.append({"role": "assistant", "content": value})
                break
            name, arguments = value
            completion.append({"role": "assistant", "content": "",
                               "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]})
            completion.append({"role": "tool", "name": name, "content": tools[name](**arguments)})
        completions.append(completion)
    logged: dict[str, float] = {}
    rewards = factory.reward(prompts=[r["prompt"] for r in rows], completions=completions, completion_ids=None,
                             environments=environments, trainer_state=None, log_extra=None,
                             log_metric=logged.__setitem__, **{k: [r[k] for r in rows] for k in rows[0] if k != "prompt"})
    factory.logged = logged
    return environments, completions, rewards


def tool_replies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


# --- the contract -------------------------------------------------------------------------------------------
def test_instances_offer_reset_and_the_tasks_real_tools_with_a_json_schema() -> None:
    from transformers.utils import get_json_schema

    for task_id, name, argument in (("GuessNumber-v0", "respond", "message"), ("MBPPFeedback-v0", "run_tests", "code"),
                                    ("GSM8KTool-v0", "python", "code"), ("DAPOMathTool-v0", "python", "code"),
                                    ("HiddenTable-v0", "lookup", "key")):
        factory = trl_environment_factory(task_id, **OFFLINE_DATA.get(task_id, {}))
        tools = tools_like_grpo_trainer(factory())
        assert [t.__name__ for t in tools] == [name]
        schema = get_json_schema(tools[0])["function"]
        assert schema["name"] == name and schema["description"]
        assert schema["parameters"]["required"] == [argument]
        assert schema["parameters"]["properties"][argument]["type"] == "string"
        assert schema["parameters"]["properties"][argument]["description"]
        # the schema TRL derives from the method is the tool's own spec
        own = factory.tools[0].spec
        assert schema["description"] == own.description
        assert schema["parameters"]["properties"][argument]["description"] == \
            own.parameters["properties"][argument]["description"]
    custom = trl_environment_factory("GuessNumber-v0", tool=GUESS)
    assert [t.__name__ for t in tools_like_grpo_trainer(custom())] == ["guess"]
    assert isinstance(custom(), TRLEnvironment) and isinstance(custom.reward, EpisodeReward)


def test_rows_pick_the_problem_and_the_prompt_is_not_appended_twice() -> None:
    factory = trl_environment_factory("MBPPFeedback-v0", **OFFLINE_DATA["MBPPFeedback-v0"])
    rows = factory.dataset(limit=3, system_prompt="You write Python.")
    assert rows[0]["prompt"][0] == {"role": "system", "content": "You write Python."}
    for row in rows:
        envs = [factory(), factory()]  # two rollouts of one row play the same problem
        assert [e.reset(**row) for e in envs] == [None, None]
        assert {e.episode.problem.id for e in envs} == {str(row["problem_id"])}
        assert envs[0].episode.messages[0]["content"] == row["prompt"][-1]["content"]
    # a row without problem_id: the environment draws a problem and returns its prompt for TRL to append
    # (GuessNumber's prompts are all alike, so only a task whose prompts differ warns that a group mixes problems)
    observation = trl_environment_factory("GuessNumber-v0", seed=3)().reset(prompt=[{"role": "user", "content": ""}])
    assert observation.startswith("I am thinking of an integer")
    with pytest.warns(UserWarning, match="factory.dataset"):
        observation = factory().reset(prompt=[{"role": "user", "content": "Solve: "}])
    assert observation.startswith("You are an expert Python programmer")
    with pytest.raises(ValueError, match="factory.dataset"):
        factory().reset(**{**rows[0], "data_source": "GSM8K-v0"})


# --- episodes through the harness ---------------------------------------------------------------------------
def bisection_by_tool(messages: list[dict[str, Any]]) -> tuple[str, Any]:
    replies = tool_replies(messages)
    if replies and replies[-1].startswith("correct"):
        return "final", "I found it."
    guesses = [int(m["tool_calls"][0]["function"]["arguments"]["number"]) for m in messages if m.get("tool_calls")]
    return "tool", ("guess", {"number": str(Bisection(16).guess(guesses, replies))})


def test_guess_number_bisection_through_the_tool_is_rewarded() -> None:
    factory = trl_environment_factory("GuessNumber-v0", tool=GUESS, reward_map=(-1.0, 1.0), size=32)
    rows = [factory.dataset(limit=4)[i] for i in (0, 0, 1, 2)]
    environments, completions, rewards = roll_out_like_grpo_trainer(factory, rows, bisection_by_tool)
    assert rewards == [1.0] * 4 and all(e.solved and e.done for e in environments)
    assert all(e.episode.turns[0].text == "Answer: 8" for e in environments)
    assert [len(e.episode.turns) for e in environments] == [len(tool_replies(c)) for c in completions]
    assert factory.logged["rewards/GuessNumber_episode_reward/solved"] == 1.0
    assert factory.logged["rewards/GuessNumber_episode_reward/turns"] == pytest.approx(
        sum(len(e.episode.turns) for e in environments) / 4)


def test_a_policy_ignoring_the_tool_gets_its_final_message_graded() -> None:
    factory = trl_environment_factory("GuessNumber-v0", reward_map=(-1.0, 1.0), size=8)
    rows = list(factory.dataset(limit=2))
    environments, _, rewards = roll_out_like_grpo_trainer(factory, rows, lambda m: ("final", "Answer: 99"))
    assert rewards == [-1.0, -1.0] and all(len(e.episode.turns) == 1 for e in environments)
    # the final message (no tool call) is the episode's last turn: a right guess in it solves the game
    target = environments[0].episode.problem.answer
    environments, _, rewards = roll_out_like_grpo_trainer(factory, rows[:1], lambda m: ("final", f"Answer: {target}"))
    assert rewards == [1.0] and environments[0].solved


def test_mbpp_feedback_fix_after_feedback_through_run_tests() -> None:
    factory = trl_environment_factory("MBPPFeedback-v0", attempt_penalty=0.2, **OFFLINE_DATA["MBPPFeedback-v0"])
    rows = [r for r in factory.dataset() if str(r["problem_id"]) == "11"]

    def programmer(messages: list[dict[str, Any]]) -> tuple[str, Any]:
        replies = tool_replies(messages)
        if not replies:
            return "tool", ("run_tests", {"code": "def remove_Occ(s, ch):\n    return s.replace(ch, '', 1)"})
        if "All tests passed" in replies[-1]:
            return "final", "Done: the solution passes."
        assert "returned 'helo'" in replies[-1] and "heo" not in replies[-1].replace('"heo"', "")
        fixed = "def remove_Occ(s, ch):\n    s = s.replace(ch, '', 1)\n    i = s.rfind(ch)\n    return s if i < 0 else s[:i] + s[i + 1:]"
        return "tool", ("run_tests", {"code": fixed})

    environments, completions, rewards = roll_out_like_grpo_trainer(factory, rows, programmer)
    assert rewards == [pytest.approx(0.8)] and environments[0].solved and len(environments[0].episode.turns) == 2
    assert tool_replies(completions[0])[-1].startswith("All tests passed.") and "episode is over" in tool_replies(
        completions[0])[-1]


def test_math_tool_prints_then_answers_in_the_final_message() -> None:
    factory = trl_environment_factory("GSM8KTool-v0", **OFFLINE_DATA["GSM8KTool-v0"])
    rows = [factory.dataset()[0]] * 2  # Janet's ducks: 18

    def solver(messages: list[dict[str, Any]]) -> tuple[str, Any]:
        replies = tool_replies(messages)
        if not replies:
            return "tool", ("python", {"code": "print((16 - 3 - 4) * 2)"})
        printed = re.search(r"```output\n(.*?)\n```", replies[-1], re.DOTALL).group(1)
        return "final", f"The program printed {printed}, so the answer is \\boxed{{{printed}}}."

    environments, completions, rewards = roll_out_like_grpo_trainer(factory, rows, solver)
    assert rewards == [1.0, 1.0] and all(e.solved for e in environments)
    assert tool_replies(completions[0]) == ["```output\n18\n```\nYou may run code 2 more times."]
    hostile = lambda m: ("tool", ("python", {"code": "import os\nos.kill(os.getppid(), 9)"})) if not tool_replies(m) \
        else ("final", "\\boxed{18}")  # noqa: E731
    environments, completions, rewards = roll_out_like_grpo_trainer(factory, rows[:1], hostile)
    assert rewards == [1.0]  # the hostile program was contained; the episode went on


def test_an_unreadable_reference_scores_none_for_its_episode_and_the_rest_are_scored(tmp_path: Path) -> None:
    """GRPOTrainer's flow over a batch where one problem's reference cannot be read: its tool call is answered
    with an error (the model is told), its reward is None (TRL's unscorable row), the other episode is scored."""
    import json
    import warnings

    from dapo_env.interop import InteropWarning

    unreadable = "We first count the pairs of socks.\nThen we multiply the pairs by two, which gives the total."
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"problem": "3 + 4?", "answer": "7"},
                                                       {"problem": "2 + 2?", "answer": unreadable}]))
    factory = trl_environment_factory("GSM8KTool-v0", data_files=str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InteropWarning)  # "1 of 2 references cannot be read" (once per process)
        rows = list(factory.dataset())

    def solver(messages: list[dict[str, Any]]) -> tuple[str, Any]:
        return ("tool", ("python", {"code": "print(3 + 4)"})) if not tool_replies(messages) else ("final", "\\boxed{7}")

    with pytest.warns(InteropWarning, match=r"unscorable \(invalid_reference\): problem 1"):
        environments, completions, rewards = roll_out_like_grpo_trainer(factory, rows, solver)
    assert rewards == [1.0, None] and factory.reward.unscorable == {"invalid_reference": 1}
    assert tool_replies(completions[1])[0].startswith("Error (unscorable)")
    assert factory.logged["rewards/GSM8KTool_episode_reward/unscorable"] == 0.5


def test_hidden_table_through_its_lookup_tool() -> None:
    """TRL's loop calls lookup(key) on the environment; the call is played in the episode's format (hermes) and
    read back by the training parser, with its status in the step info; the final message answers."""
    factory = trl_environment_factory("HiddenTable-v0", size=20)
    rows = list(factory.dataset(limit=2))

    def reader(messages: list[dict[str, Any]]) -> tuple[str, Any]:
        replies = tool_replies(messages)
        if not replies:
            key = re.search(r"under the key (\w+)", messages[-1]["content"]).group(1)
            return "tool", ("lookup", {"key": key})
        return "final", replies[-1]

    environments, completions, rewards = roll_out_like_grpo_trainer(factory, rows, reader)
    assert rewards == [1.0, 1.0] and all(e.solved for e in environments)
    assert environments[0].episode.turns[0].text.startswith("<tool_call>")
    assert [c.status for c in environments[0].episode.tool_calls] == ["ok"]


def test_tool_calls_after_the_end_and_bad_calls_are_answered_not_raised() -> None:
    factory = trl_environment_factory("GuessNumber-v0", tool=GUESS, size=4)
    env = factory()
    env.reset(**factory.dataset(limit=1)[0])
    assert env.guess() == "Error (bad_arguments): missing required argument 'number'"  # a call without its argument
    assert env.guess(number=3).startswith("Error (bad_arguments): argument 'number' must be of type string")
    assert len(env.episode.turns) == 0  # answered, not played
    target = env.episode.problem.answer
    assert env.guess(number=target).startswith("correct") and env.done
    assert env.guess(number="1").startswith("The episode is over")
    with pytest.raises(RuntimeError, match="reset"):
        factory().guess(number="3")


def test_factory_validation_pickling_and_reward_errors() -> None:
    factory = trl_environment_factory("GuessNumber-v0", tool=GUESS, reward_map=(-1.0, 1.0), size=4)
    clone = pickle.loads(pickle.dumps(factory))
    assert clone().reset(**clone.dataset(limit=1)[0]) is None and clone.reward.reward_map == (-1.0, 1.0)
    with pytest.raises(TypeError, match="completions="):
        factory.reward(environments=[factory()])
    with pytest.raises(ValueError, match=r"without 'problem_id'.*factory.dataset\(\)"):
        factory.reward(completions=["x"])  # no environments= (the async worker): replaying needs the row's problem
    with pytest.raises(ValueError, match="2 completions but 1 environments"):
        factory.reward(completions=["x", "y"], environments=[factory()])
    with pytest.raises(TypeError, match="trl_environment_factory"):
        factory.reward(completions=["x"], environments=[object()])
    with pytest.raises(ValueError, match="ToolSpec.name"):
        ToolSpec(name="not a name", description="")

    def reset(message: str) -> str:
        """Reset.

        Args:
            message: m
        """
        return message

    with pytest.raises(ValueError, match="must not be one of"):
        trl_environment_factory("GuessNumber-v0", tool=reset)
    with pytest.raises(ValueError, match="offers its own tools"):
        trl_environment_factory("HiddenTable-v0", tool=guess)
    with pytest.raises(ValueError, match="max_turns"):
        trl_environment_factory("GuessNumber-v0", max_turns=0)
    with pytest.raises(ValueError, match="seed"):
        trl_environment_factory("GuessNumber-v0", seed=-1)
    with pytest.raises(TypeError, match="valid options"):
        trl_environment_factory("GuessNumber-v0", N=3)


# --- the real thing: TRL's GRPOTrainer, two multi-turn steps on a tiny local model ------------------------------
@pytest.mark.slow
def test_real_grpo_trainer_two_multi_turn_steps() -> None:
    pytest.importorskip("trl")
    example = runpy.run_path(str(ROOT / "examples" / "trl_multiturn.py"))
    result = example["main"](["--steps", "2", "--num-generations", "4"])
    assert result["global_step"] == 2 and len(result["logged"]) == 2
    name = result["reward_name"]
    environments = result["environments"]  # the last batch's environments, as TRL passed them to the reward
    assert len(environments) == 4 and all(isinstance(e, TRLEnvironment) for e in environments)
    # TRL's tool loop called our tool: games with guesses played through it
    assert any(e.episode is not None and e.episode.turns and e.episode.turns[0].text.startswith("Answer: ")
               for e in environments)
    assert max(entry.get("tools/call_frequency", 0.0) for entry in result["logged"]) > 0
    # the logged reward of the last step is the mean of the episodes' returns mapped onto [-1, 1]
    mapped = [-1.0 + 2.0 * e.episode_return for e in environments]
    assert result["logged"][-1][f"rewards/{name}/mean"] == pytest.approx(sum(mapped) / len(mapped), abs=1e-6)
    assert result["warm_losses"][-1] < result["warm_losses"][0] / 4
