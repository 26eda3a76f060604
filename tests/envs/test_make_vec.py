"""gym.make_vec on our ids with Gymnasium's standard vector envs: same-step autoreset by default (no wasted
generation), AsyncVectorEnv with its default shared memory, and the SharedText buffer behind it."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from env_helpers import ListSource, fixture_kwargs
from gymnasium.vector import AutoresetMode

import dapo_env  # noqa: F401  (registers the ids)
from dapo_env.spaces import SHARED_SLOT_BYTES, SharedText, SharedTextBatch, UnicodeText
from dapo_env.tasks import Task, get_task, list_tasks, register_task, unregister_task
from dapo_env.tasks.registry import SpecKwargs
from dapo_env.types import Problem
from dapo_env.verifiers import MathVerifier


def _answers(env_id: str, **kwargs: Any) -> dict[str, str]:
    return {p.id: str(p.answer) for p in get_task(env_id).load(**kwargs)}


def _run(env: Any, answers: dict[str, str], steps: int) -> tuple[int, int]:
    """Answer every prompt right for ``steps`` steps; returns (responses verified, responses right)."""
    task = get_task("Arithmetic-v0")
    problems = {p.id: p for p in task.load(size=50)}
    obs, info = env.reset(seed=0)
    verified = right = 0
    for _ in range(steps):
        ids = list(info["problem_id"])
        assert tuple(obs) == tuple(task.format_prompt(problems[i]) for i in ids)  # current, never stale strings
        obs, rewards, terminated, truncated, info = env.step(tuple(f"Answer: {answers[i]}" for i in ids))
        assert terminated.all() and not truncated.any()
        final = info["final_info"]
        assert list(final["problem_id"]) == ids and list(info["final_obs"]) == [task.format_prompt(problems[i]) for i in ids]
        verified += int(final["_correct"].sum())
        right += int(final["correct"].sum())
        assert rewards.tolist() == [1.0] * len(ids)
    return verified, right


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_standard_vector_envs_default_to_same_step_autoreset(mode: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make_vec("Arithmetic-v0", num_envs=3, vectorization_mode=mode, size=50)  # Gymnasium's defaults
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    if mode == "async":
        assert env.shared_memory  # AsyncVectorEnv's default, now supported
    assert _run(env, _answers("Arithmetic-v0", size=50), steps=4) == (12, 12)  # every step verifies all 3
    assert env.spec.kwargs["vector_kwargs"] == {"autoreset_mode": AutoresetMode.SAME_STEP}  # make_vec(env.spec) redoes it
    env.close()


def test_callers_choices_win_and_other_modes_are_untouched(dapo_file: Path) -> None:
    next_step = gym.make_vec("Arithmetic-v0", num_envs=2, vectorization_mode="sync",
                             vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP}, size=20)
    assert next_step.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    next_step.close()
    merged = gym.make_vec("Arithmetic-v0", num_envs=2, vectorization_mode=gym.VectorizeMode.SYNC,
                          vector_kwargs={"copy": False}, size=20)
    assert merged.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP and merged.copy is False
    merged.close()
    group = gym.make_vec("DAPOMath-v0", num_envs=4, group_size=2, data_files=str(dapo_file))  # vector_entry_point
    assert type(group).__name__ == "GroupVectorEnv"
    group.close()
    single = gym.make("Arithmetic-v0", size=20)
    assert single.spec.kwargs == {"task": "Arithmetic-v0", "size": 20}
    spec = gym.spec("Arithmetic-v0")
    assert isinstance(spec.kwargs, SpecKwargs) and spec.kwargs == {"task": "Arithmetic-v0"}
    assert pickle.loads(pickle.dumps(spec)).kwargs == copy.deepcopy(spec).kwargs == {"task": "Arithmetic-v0"}


def test_async_shared_memory_copy_false_is_a_live_view() -> None:
    env = gym.make_vec("Arithmetic-v0", num_envs=2, vectorization_mode="async", vector_kwargs={"copy": False},
                       size=50)
    obs, info = env.reset(seed=1)
    assert isinstance(obs, SharedTextBatch) and len(obs) == 2 and obs == tuple(obs)
    first = tuple(obs)
    new_obs, *_ = env.step(("Answer: 0", "Answer: 0"))
    assert new_obs is obs and tuple(obs) != first  # like a numpy view of shared memory: updated in place
    assert copy.deepcopy(obs) == tuple(obs) and isinstance(copy.deepcopy(obs), tuple)
    assert obs[-1] == obs[1] and obs[:1] == (obs[0],)
    with pytest.raises(IndexError):
        obs[2]
    env.close()


@pytest.fixture
def long_prompt_task() -> Any:
    """Prompts of ~100k characters (beyond a shared-memory slot), with non-ASCII text."""
    problems = tuple(Problem(id=f"long-{i}", question=f"{i} ∑ " + "x" * (100_000 + i), answer=str(i)) for i in range(6))
    task = Task(name="EnvLongPrompt", source=ListSource(problems), verifier=MathVerifier())
    register_task(task, overwrite=True)
    yield task
    unregister_task(task.env_id)


def test_async_shared_memory_carries_prompts_of_any_length(long_prompt_task: Task) -> None:
    env = gym.make_vec(long_prompt_task.env_id, num_envs=2, vectorization_mode="async")
    obs, info = env.reset(seed=0)
    problems = {p.id: p for p in long_prompt_task.load("train")}
    for _ in range(3):
        assert [len(o.encode()) > SHARED_SLOT_BYTES for o in obs] == [True, True]
        assert tuple(obs) == tuple(problems[i].question for i in info["problem_id"])
        obs, rewards, _, _, info = env.step(tuple(f"Answer: {problems[i].answer}" for i in info["problem_id"]))
        assert rewards.tolist() == [1.0, 1.0]
    env.close()


def test_async_with_spawned_workers(tmp_path: Path) -> None:
    env = gym.make_vec("MBPP-v0", num_envs=2, vectorization_mode="async", vector_kwargs={"context": "spawn"},
                       **fixture_kwargs("MBPP-v0", tmp_path))
    obs, info = env.reset(seed=0)
    assert all(isinstance(o, str) and "Your code should pass these tests" in o for o in obs)
    env.close()


def test_shared_text_buffer() -> None:
    buffer = SharedText(3, slot_bytes=16)
    buffer.write(0, "")
    buffer.write(1, "exactly 16 bytes")
    buffer.write(2, "ü" * 9)  # 18 bytes: the overflow file
    assert [buffer.read(i) for i in range(3)] == ["", "exactly 16 bytes", "ü" * 9]
    buffer.write(2, "short again")
    assert buffer.read(2) == "short again"
    directory = buffer.directory
    assert os.path.isdir(directory)
    view = SharedTextBatch(buffer, 3)
    assert list(view) == ["", "exactly 16 bytes", "short again"] and view != ["x"] and view != "abc"
    del buffer, view
    gc.collect()
    assert not os.path.exists(directory)  # the overflow folder goes with the buffer


def test_space_hooks_are_registered() -> None:
    from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

    space = UnicodeText(max_length=10)
    memory = create_shared_memory(space, n=2)
    write_to_shared_memory(space, 1, "$x^2$ 答", memory)
    batch = read_from_shared_memory(space, memory, n=2)
    assert tuple(batch) == ("", "$x^2$ 答")
    assert np.array_equal(np.array(tuple(batch), dtype=object), np.array(["", "$x^2$ 答"], dtype=object))


@pytest.mark.parametrize("env_id", list_tasks("single-turn"))
def test_every_id_with_gymnasiums_defaults(env_id: str, tmp_path: Path) -> None:
    kwargs = fixture_kwargs(env_id, tmp_path)
    task = get_task(env_id)
    prompts = {p.id: task.format_prompt(p) for p in task.load(**kwargs)}
    for mode in ("sync", "async"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            env = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **kwargs)
        obs, info = env.reset(seed=3)
        for _ in range(2):
            assert tuple(obs) == tuple(prompts[i] for i in info["problem_id"])
            obs, _, terminated, _, info = env.step(("Answer: 0", "Answer: 0"))
            assert terminated.all() and info["_final_info"].all()  # every step verified both responses
        env.close()
