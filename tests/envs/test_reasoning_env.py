from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from env_helpers import SHARED_FILES, fixture_kwargs, write_jsonl
from gymnasium.utils.env_checker import check_env

import dapo_env
from dapo_env import Completion, ReasoningEnv
from dapo_env.tasks import TaskDataError, list_tasks

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env_id", list_tasks("single-turn"))
def test_check_env_passes_without_warnings_on_every_id(env_id: str, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(env_id, **fixture_kwargs(env_id, tmp_path))
        check_env(env.unwrapped)
        obs, info = env.reset(seed=3)  # through gym.make's own checker wrappers too
        assert isinstance(obs, str) and obs
        _, reward, terminated, truncated, info = env.step("no idea")
        assert (reward, terminated, truncated, info["correct"]) == (0.0, True, False, False)
        env.close()


@pytest.mark.parametrize("env_id", sorted(set(SHARED_FILES) & set(list_tasks())))
def test_check_env_on_the_real_data(env_id: str, shared_data: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(env_id, data_files=str(shared_data / SHARED_FILES[env_id]))
        check_env(env.unwrapped)
    assert len(env.unwrapped.problems) >= 30


def test_every_builtin_id_is_registered() -> None:
    expected = {"DAPOMath-v0", "MATH500-v0", "AIME24-v0", "AIME25-v0", "GSM8K-v0", "Arithmetic-v0", "Countdown-v0"}
    assert expected <= set(list_tasks())
    for env_id in list_tasks("single-turn"):
        spec = gym.spec(env_id)
        assert spec.entry_point == "dapo_env.envs:ReasoningEnv"
        assert spec.vector_entry_point == "dapo_env.vector:GroupVectorEnv"


def test_render_modes(toy_task, capsys) -> None:
    env = ReasoningEnv("EnvToy", render_mode="ansi")
    prompt, _ = env.reset(seed=0)
    assert env.render() == prompt
    env.step("Answer: 3")
    assert env.render().endswith("Answer: 3")
    human = ReasoningEnv("EnvToy", render_mode="human")
    human.reset(seed=0)
    human.render()
    assert "Solve:" in capsys.readouterr().out
    with pytest.raises(ValueError, match="render_mode"):
        ReasoningEnv("EnvToy", render_mode="rgb_array")


def test_step_verifies_and_reports_every_info_key(toy_task) -> None:
    env = ReasoningEnv(toy_task)
    prompt, info = env.reset(options={"id": "toy-4"})
    assert prompt == "Solve: What is 4 + 5?\nEnd with 'Answer: N'." and info == {"problem_id": "toy-4", "task": "EnvToy-v0"}
    obs, reward, terminated, truncated, info = env.step(Completion("4 + 5 = 9.\nAnswer: 9", num_tokens=12))
    assert (obs, reward, terminated, truncated) == (prompt, 1.0, True, False)
    assert info == {
        "correct": True, "score": 1.0, "extracted": "9", "reason": info["reason"], "response_length": 12,
        "response_truncated": False, "reward_terms": {"verifier": 1.0}, "loss_mask": True,
        "problem_id": "toy-4", "task": "EnvToy-v0",
    }
    env.reset(options={"index": 4})
    info = env.step("Answer: 10")[-1]
    assert not info["correct"] and info["response_length"] is None and info["extracted"] == "10"


def test_answer_never_in_observation_or_reset_info(tmp_path: Path) -> None:
    env = gym.make("DAPOMath-v0", **fixture_kwargs("DAPOMath-v0", tmp_path)).unwrapped
    for index in range(len(env.problems)):
        prompt, info = env.reset(options={"index": index})
        answer = env.problem.answer
        assert answer not in prompt  # the fixture's answers (a*b - i) never occur in its questions
        assert all("answer" not in key for key in info) and answer not in map(str, info.values())


def test_truncation_comes_from_finish_reason_or_token_cap_never_from_text(toy_task) -> None:
    env = ReasoningEnv(toy_task, max_response_tokens=100)
    cases = [
        (Completion("Answer: 1", num_tokens=5, finish_reason="length"), True),
        (Completion("Answer: 1", num_tokens=100), True),
        (Completion("Answer: 1", num_tokens=99), False),
        (Completion("Answer: 1", token_ids=tuple(range(100))), True),
        (Completion("an unfinished senten", num_tokens=20), False),
        ("an unfinished senten", False),
    ]
    for action, truncated in cases:
        env.reset(seed=0)
        info = env.step(action)[-1]
        assert info["response_truncated"] is truncated, action
    env_uncapped = ReasoningEnv(toy_task)
    env_uncapped.reset(seed=0)
    assert env_uncapped.step(Completion("x", num_tokens=10**6))[-1]["response_truncated"] is False


def test_deterministic_under_seed(tmp_path: Path) -> None:
    kwargs = fixture_kwargs("DAPOMath-v0", tmp_path)

    def prompts(seed: int) -> list[str]:
        env = gym.make("DAPOMath-v0", **kwargs)
        out = [env.reset(seed=seed)[0]]
        for _ in range(5):
            env.step("Answer: 0")
            out.append(env.reset()[0])
        return out

    assert prompts(7) == prompts(7)
    assert prompts(7) != prompts(8)


def test_step_before_reset_and_second_step_raise(toy_task) -> None:
    env = ReasoningEnv(toy_task)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("Answer: 1")
    env.reset(seed=0)
    env.step("Answer: 1")
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("Answer: 1")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="str or a dapo_env.Completion"):
        env.step(42)


def test_bad_options_and_arguments(toy_task) -> None:
    env = ReasoningEnv(toy_task)
    with pytest.raises(IndexError, match="options\\['index'\\]"):
        env.reset(options={"index": 12})
    with pytest.raises(KeyError, match="toy-0"):
        env.reset(options={"id": "nope"})
    with pytest.raises(ValueError, match="max_response_tokens"):
        ReasoningEnv(toy_task, max_response_tokens=0)
    with pytest.raises(KeyError, match="EnvToy-v0"):
        ReasoningEnv("NoSuchTask")


def test_prompt_template_and_task_kwargs() -> None:
    env = ReasoningEnv("Arithmetic-v0", prompt_template="Q: {question}", size=5)
    assert len(env.problems) == 5
    assert env.reset(seed=0)[0].startswith("Q: ")


def test_malformed_data_row_error_surfaces_through_gym_make(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"problem": "1+1?", "answer": "2"}, {"problem": "2+2?", "answer": "four"}])
    with pytest.raises(TaskDataError, match="row 2"):
        gym.make("DAPOMath-v0", data_files=str(path))
    missing = write_jsonl(tmp_path / "missing.jsonl", [{"question_text": "1+1?"}])
    with pytest.raises(TaskDataError):
        gym.make("MATH500-v0", data_files=str(missing))


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_gym_make_with_module_prefix_needs_no_prior_import(tmp_path: Path) -> None:
    data = fixture_kwargs("DAPOMath-v0", tmp_path)["data_files"]
    out = _run(
        "import sys, gymnasium as gym\n"
        "assert 'dapo_env' not in sys.modules\n"
        f"env = gym.make('dapo_env:DAPOMath-v0', data_files={data!r})\n"
        "obs, info = env.reset(seed=0)\n"
        "print(type(env.unwrapped).__name__, info['task'])\n"
    )
    assert out.split() == ["ReasoningEnv", "DAPOMath-v0"]


def test_import_never_loads_torch_or_learners() -> None:
    out = _run(
        "import sys, dapo_env, dapo_env.envs, dapo_env.vector, dapo_env.sampler, dapo_env.wrappers, dapo_env.shaping\n"
        "import dapo_env.interop, dapo_env.verifiers.callable\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('dapo_env.learners') or m == 'transformers'))\n"
    )
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "module", ["dapo_env.verifiers.math", "dapo_env.tasks", "dapo_env.wrappers", "dapo_env.vector", "dapo_env.interop"]
)
def test_any_module_can_be_imported_first(module: str) -> None:
    out = _run(f"import {module}, gymnasium as gym\nprint(gym.spec('DAPOMath-v0').entry_point)\n")
    assert out.strip() == "dapo_env.envs:ReasoningEnv"


def test_public_names() -> None:
    for name in ("ReasoningEnv", "GroupVectorEnv", "DynamicSampler", "SoftOverlongPenalty", "OverlongFilter",
                 "ChatTemplate", "RewardMap", "UnicodeText", "Completion"):
        assert hasattr(dapo_env, name), name


def test_a_plain_function_verifier_is_wrapped(toy_task) -> None:
    import dataclasses

    def score_by_length(response: str, reference: str) -> float:
        return len(response) / 10

    env = ReasoningEnv(dataclasses.replace(toy_task, verifier=score_by_length))
    env.reset(seed=0)
    _, reward, *_, info = env.step("12345")
    assert (reward, info["correct"], info["reason"]) == (0.5, False, "custom:score")
