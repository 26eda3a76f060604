"""The warm start's loss weighting: ``turn_weights`` on hand-worked rows, its invariants, and both weightings
running for real."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.warmstart import turn_weights, warm_start
from dapo_env.tasks import get_task


def test_turn_weights_hand_worked() -> None:
    # turn 0: a 3-token call and a 1-token answer (4 tokens, 1/4 each); turn 1: one 2-token answer (1/2 each)
    assert turn_weights([[-100, 5, 6, 7, -100, 9, 2], [-100, 3]]) == [[0.0, 0.25, 0.25, 0.25, 0.0, 0.5, 0.5],
                                                                     [0.0, 0.25]]
    assert turn_weights([[-100, -100]]) == [[0.0, 0.0]]
    assert turn_weights([[4, -100, 4, -100, 4]]) == [[1.0, 0.0, 1.0, 0.0, 1.0]]


rows = st.lists(st.lists(st.one_of(st.just(-100), st.integers(0, 50)), max_size=20), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_every_turn_index_weighs_one_and_its_tokens_the_same(labels: list[list[int]]) -> None:
    weights = turn_weights(labels)
    by_turn: dict[int, list[float]] = {}
    for row, w in zip(labels, weights):
        assert len(w) == len(row)
        assert all((x == -100) == (v == 0.0) for x, v in zip(row, w))
        turn, inside = -1, False
        for x, v in zip(row, w):
            if x != -100 and not inside:
                turn += 1
            inside = x != -100
            if inside:
                by_turn.setdefault(turn, []).append(v)
    for values in by_turn.values():  # one weight per turn index, whatever the branch: the data's branch shares
        assert len(set(values)) == 1 and math.isclose(sum(values), 1.0)


def test_turn_weighting_runs_on_a_multi_turn_task_and_a_bad_name_is_refused() -> None:
    tok = build_tokenizer()
    model = build_tiny_model(tok, seed=0)
    stats = warm_start(model, tok, get_task("GuessNumber-v0"), steps=2, batch_size=4, task_kwargs={"n": 3, "k": 2},
                       max_episode_tokens=96, weighting="turn", probe_size=4)
    assert stats["steps"] == 2 and math.isfinite(stats["final_loss"])
    with pytest.raises(ValueError, match="weighting must be 'token' or 'turn'"):
        warm_start(model, tok, get_task("Arithmetic-v0"), steps=1, weighting="sequence")
