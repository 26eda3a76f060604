"""Per-turn credit through the advantage registry: the batch's turn layout, the registered ``turn`` estimator
against hand-worked values, and a multi-turn run that trains with ``advantage="turn"``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from dapo_env.learners.algo.batch import build_sequence_batch
from dapo_env.learners.algo.losses import TurnRewards, get_advantage, group_advantages
from dapo_env.learners.models.tiny import build_tokenizer
from dapo_env.learners.trainer import train

sys.path.insert(0, str(Path(__file__).parent))
from test_multiturn_trainer import guess_config, rollout_groups  # noqa: E402


@pytest.fixture(scope="module")
def tok() -> Any:
    return build_tokenizer(model_max_length=512)


def test_turn_layout_marks_exactly_the_sampled_tokens_with_their_turn(tok: Any) -> None:
    _, groups = rollout_groups(tok)
    batch = build_sequence_batch(groups, pad_id=tok.pad_token_id)
    trajectories = [t for g in groups for t in g.completions]
    assert any(t.num_turns > 1 for t in trajectories)
    assert torch.equal(batch.token_turns >= 0, batch.sampled_mask)  # env tokens and padding: -1
    for row, t in enumerate(trajectories):
        assert batch.turn_mask[row].sum().item() == t.num_turns
        assert batch.turn_rewards[row, :t.num_turns].tolist() == pytest.approx([turn.reward for turn in t.turns])
        counts = torch.bincount(batch.token_turns[row][batch.token_turns[row] >= 0], minlength=t.num_turns)
        assert counts.tolist() == [turn.num_tokens for turn in t.turns]  # each turn's sampled tokens, in order
        turns = batch.token_turns[row][batch.token_turns[row] >= 0].tolist()
        assert turns == sorted(turns)


def test_turn_estimator_hand_worked() -> None:
    """Two episodes of one group: a tool call (turn 0, reward 0) then a right answer (turn 1, reward 1), against a
    wrong direct answer. Reward-to-go: [[1, 1], [0, -]]; leave-one-out baselines at turn 0: 0 and 1, at turn 1: the
    other episode has no turn 1 (reward-to-go 0). Advantages (unscaled): [[1, 1], [-1, 0]], spread over tokens."""
    rewards = torch.tensor([1.0, 0.0])
    turns = TurnRewards(rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]), mask=torch.tensor([[True, True], [True, False]]),
                        token_turns=torch.tensor([[0, 0, -1, 1, -1], [0, 0, 0, -1, -1]]))
    mask = (turns.token_turns >= 0).float()
    out = get_advantage("turn")(rewards, mask, group_size=2, scale_by_std=False, turns=turns)
    assert out.tolist() == [[1.0, 1.0, 0.0, 1.0, 0.0], [-1.0, -1.0, -1.0, 0.0, 0.0]]
    # the group estimator ignores the turns: one value per episode
    group = get_advantage("group")(rewards, mask, group_size=2, scale_by_std=False, turns=turns)
    assert torch.equal(group, group_advantages(rewards, 2, scale_by_std=False))


def test_turn_estimator_needs_the_turns() -> None:
    with pytest.raises(ValueError, match="needs the batch's turns"):
        get_advantage("turn")(torch.zeros(2), torch.ones(2, 3), group_size=2, scale_by_std=True)


def test_a_multi_turn_run_trains_with_per_turn_credit(tmp_path: Path) -> None:
    result = train(guess_config(tmp_path, max_steps=2, advantage="turn"))
    steps = [r for r in result.metrics if r["step"] > 0]
    assert any(r["optim/steps"] for r in steps)
    trained = [r for r in steps if r["loss/policy"] is not None]
    assert trained and all(torch.isfinite(torch.tensor(r["loss/policy"])) for r in trained)
    assert result.metrics[-1]["policy/drift_from_init"] > 0  # the weights moved
