"""The one prompt schedule of both group envs: seeded draws, options, difficulty, and exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env import EpisodeGroupEnv, GroupVectorEnv
from dapo_env.schedule import PromptSchedule, num_prompts_of
from dapo_env.tasks import get_task

PROBLEMS = get_task("Arithmetic-v0").load(size=30)


def _run(schedule: PromptSchedule, counts: list[list[int]]) -> list[list[int]]:
    """Advance once per entry of ``counts`` (``[]``: no counts); the indices shown after each step."""
    return [schedule.advance(c or None).tolist() for c in counts]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), num_prompts=st.integers(1, 8), group_size=st.integers(1, 4),
       difficulty=st.booleans(), before=st.integers(0, 5), after=st.integers(1, 5), data=st.data())
def test_a_resumed_schedule_shows_the_same_prompts_as_an_uninterrupted_one(
        seed: int, num_prompts: int, group_size: int, difficulty: bool, before: int, after: int,
        data: st.DataObject) -> None:
    counts = data.draw(st.lists(st.lists(st.integers(0, group_size), min_size=num_prompts, max_size=num_prompts),
                                min_size=before + after, max_size=before + after))
    whole = PromptSchedule(PROBLEMS, num_prompts, group_size, difficulty=difficulty)
    first = whole.reset(seed=seed).tolist()
    shown = _run(whole, counts)

    saved = PromptSchedule(PROBLEMS, num_prompts, group_size, difficulty=difficulty)
    assert saved.reset(seed=seed).tolist() == first
    assert _run(saved, counts[:before]) == shown[:before]
    state = json.loads(json.dumps(saved.state_dict()))  # what a checkpoint stores
    resumed = PromptSchedule(PROBLEMS, num_prompts, group_size, difficulty=difficulty)
    resumed.load_state_dict(state)
    assert resumed.problem_ids() == saved.problem_ids()
    assert _run(resumed, counts[before:]) == shown[before:]
    if difficulty:
        np.testing.assert_array_equal(resumed.difficulty.alpha, whole.difficulty.alpha)


def test_options_pick_problems_and_errors_name_the_fix() -> None:
    schedule = PromptSchedule(PROBLEMS, 2, 3)
    assert schedule.needs_reset and schedule.indices is None and schedule.problem_ids() == ()
    with pytest.raises(RuntimeError, match="reset"):
        schedule.advance()
    assert schedule.reset(options={"indices": [4, 1]}).tolist() == [4, 1]
    assert schedule.problem_ids() == (PROBLEMS[4].id, PROBLEMS[1].id)
    assert schedule.reset(options={"ids": [PROBLEMS[7].id, PROBLEMS[0].id]}).tolist() == [7, 0]
    assert [p.id for p in schedule.current()] == [PROBLEMS[7].id, PROBLEMS[0].id]
    with pytest.raises(ValueError, match="indices"):
        schedule.reset(options={"indices": [1]})
    with pytest.raises(ValueError, match="num_prompts"):
        PromptSchedule(PROBLEMS, 0, 3)
    assert num_prompts_of(12, 4) == 3
    with pytest.raises(ValueError, match="multiple of group_size"):
        num_prompts_of(10, 4)


def test_both_group_envs_draw_from_the_same_schedule() -> None:
    """Same task, seed and sizes: the vector env and the episode env show the same problems, step after step,
    and their state is the schedule's."""
    vector = GroupVectorEnv("Arithmetic-v0", num_envs=6, group_size=2, size=30)
    episodes = EpisodeGroupEnv("Arithmetic-v0", num_envs=6, group_size=2, size=30)
    _, v_info = vector.reset(seed=5)
    _, e_info = episodes.reset(seed=5)
    assert list(v_info["problem_id"]) == list(e_info["problem_id"])
    for _ in range(3):
        vector.rollout(lambda prompts: ["Answer: 0"] * len(prompts))
        episodes.rollout(lambda requests: ["Answer: 0"] * len(requests))
        assert vector.schedule.problem_ids() == episodes.schedule.problem_ids()
    assert vector.state_dict() == vector.schedule.state_dict()
    assert {k: v for k, v in episodes.state_dict().items() if k != "rounds"} == episodes.schedule.state_dict()
    vector.close()
    episodes.close()
