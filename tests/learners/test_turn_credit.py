"""Per-turn credit: on a constructed two-turn problem whose expected policy gradient is known in closed form, the
estimator's expectation (exact: every outcome of a group enumerated) equals the true gradient, while the naive
per-turn normalisation points the wrong way. Plus shapes, the single-turn reduction, and a loop reference."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from dapo_env.learners.algo.losses import group_advantages
from dapo_env.learners.algo.turn_credit import naive_turn_advantages, per_token, turn_credit_advantages

# The problem (HiddenTable in miniature). Turn 0: call the tool (prob p) or answer at once. A direct answer is
# right with prob q (reward 1 at turn 0, episode over). A tool call earns 0 at turn 0; turn 1 then answers right
# (reward 1). J(theta) = p * 1 + (1 - p) * q with p = sigmoid(theta), so dJ/dtheta = p (1 - p) (1 - q) > 0.
P, Q, G = 0.3, 0.4, 4
OUTCOMES = {  # outcome: (probability, score d log pi(turn-0 action) / d theta, turn rewards, number of turns)
    "tool": (P, 1 - P, (0.0, 1.0), 2),
    "right": ((1 - P) * Q, -P, (1.0, 0.0), 1),
    "wrong": ((1 - P) * (1 - Q), -P, (0.0, 0.0), 1),
}
TRUE_GRADIENT = P * (1 - P) * (1 - Q)  # per episode


def expected_gradient(estimator, **kwargs) -> float:
    """E[sum over the group's episodes and turns of A[i, t] * d log pi(a[i, t]) / d theta] / G, exactly: the turn-1
    answer does not depend on theta, so only turn 0 carries a score."""
    total = 0.0
    for combo in itertools.product(OUTCOMES, repeat=G):
        prob = math.prod(OUTCOMES[o][0] for o in combo)
        turn_rewards = torch.tensor([OUTCOMES[o][2] for o in combo], dtype=torch.float64)
        mask = torch.tensor([[True, OUTCOMES[o][3] > 1] for o in combo])
        rewards = (turn_rewards * mask).sum(dim=1)
        advantages = estimator(rewards, G, turn_rewards=turn_rewards, turn_mask=mask, **kwargs)
        total += prob * sum(float(advantages[i, 0]) * OUTCOMES[o][1] for i, o in enumerate(combo))
    return total / G


def test_turn_credit_is_unbiased_where_naive_per_turn_normalisation_is_not() -> None:
    ours = expected_gradient(turn_credit_advantages, scale_by_std=False)
    assert ours == pytest.approx(TRUE_GRADIENT, rel=1e-12)  # exactly the policy gradient
    naive = expected_gradient(naive_turn_advantages, scale_by_std=False)
    assert naive < 0 < TRUE_GRADIENT  # the naive estimator would teach the policy to stop calling the tool
    # with std scaling both keep their sign (a positive per-group scale), so the naive one still points the wrong way
    assert expected_gradient(turn_credit_advantages) > 0 > expected_gradient(naive_turn_advantages)


def test_one_turn_episodes_reduce_to_leave_one_out_group_advantages() -> None:
    torch.manual_seed(0)
    rewards = torch.randn(12)
    ours = turn_credit_advantages(rewards, 4, turn_rewards=rewards[:, None], turn_mask=torch.ones(12, 1, dtype=torch.bool),
                                  scale_by_std=False)
    assert torch.allclose(ours[:, 0], group_advantages(rewards, 4, scale_by_std=False) * 4 / 3)
    scaled = turn_credit_advantages(rewards, 4, turn_rewards=rewards[:, None],
                                    turn_mask=torch.ones(12, 1, dtype=torch.bool))
    assert torch.allclose(scaled[:, 0], group_advantages(rewards, 4) * 4 / 3, atol=1e-5)


def loop_reference(rewards, group_size, turn_rewards, turn_mask):
    n, t = turn_rewards.shape
    lengths = [int(turn_mask[i].sum()) for i in range(n)]
    r = [[float(turn_rewards[i, k]) if k < lengths[i] else 0.0 for k in range(t)] for i in range(n)]
    for i in range(n):
        r[i][lengths[i] - 1] += float(rewards[i]) - sum(r[i])
    to_go = [[sum(r[i][k:]) if k < lengths[i] else 0.0 for k in range(t)] for i in range(n)]
    out = torch.zeros(n, t, dtype=torch.float64)
    for i in range(n):
        group = range(i // group_size * group_size, (i // group_size + 1) * group_size)
        for k in range(lengths[i]):
            others = [to_go[j][k] for j in group if j != i]
            out[i, k] = to_go[i][k] - sum(others) / len(others)
    return out


def test_vectorised_estimator_matches_a_plain_loop() -> None:
    gen = torch.Generator().manual_seed(3)
    n, t, g = 12, 5, 3
    lengths = torch.randint(1, t + 1, (n,), generator=gen)
    mask = torch.arange(t)[None, :] < lengths[:, None]
    turn_rewards = torch.randn(n, t, generator=gen, dtype=torch.float64)
    rewards = (turn_rewards * mask).sum(1) * 2 - 1 + torch.randn(n, generator=gen, dtype=torch.float64) * 0.1  # shaped
    ours = turn_credit_advantages(rewards, g, turn_rewards=turn_rewards, turn_mask=mask, scale_by_std=False)
    assert torch.allclose(ours, loop_reference(rewards, g, turn_rewards, mask))
    # the first turn's reward-to-go is the shaped return: its column sums to zero within each group
    assert torch.allclose(ours[:, 0].reshape(-1, g).sum(1), torch.zeros(n // g, dtype=torch.float64), atol=1e-12)


def test_validation_groups_of_one_and_per_token() -> None:
    mask = torch.tensor([[True, False]])
    assert turn_credit_advantages(torch.tensor([1.0]), 1, turn_rewards=torch.tensor([[1.0, 0.0]]),
                                  turn_mask=mask).abs().sum() == 0
    with pytest.raises(ValueError, match="prefix"):
        turn_credit_advantages(torch.zeros(2), 2, turn_rewards=torch.zeros(2, 3),
                               turn_mask=torch.tensor([[True, True, True], [True, False, True]]))
    with pytest.raises(ValueError, match="at least one turn"):
        turn_credit_advantages(torch.zeros(2), 2, turn_rewards=torch.zeros(2, 2),
                               turn_mask=torch.tensor([[True, True], [False, True]]))
    with pytest.raises(ValueError, match="divisible"):
        turn_credit_advantages(torch.zeros(3), 2, turn_rewards=torch.zeros(3, 1), turn_mask=torch.ones(3, 1))
    with pytest.raises(ValueError, match=r"\(N, T\)"):
        turn_credit_advantages(torch.zeros(2), 2, turn_rewards=torch.zeros(2), turn_mask=torch.ones(2))
    adv = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert per_token(adv, torch.tensor([[-1, 0, 1, 1], [0, 0, -1, -1]])).tolist() == [[0, 1, 2, 2], [3, 3, 0, 0]]
