"""Per-turn credit for multi-turn episodes: a pure advantage estimator over turns (docs/losses.md, "Per-turn
credit").

The episode-return estimator (:func:`~dapo_env.learners.algo.losses.group_advantages`) gives every sampled token of an
episode the same advantage. Here each turn ``t`` of episode ``i`` gets

    A[i, t] = G[i, t] - mean_{j != i} G[j, t]            (optionally / std of the group's episode returns)

where ``G[i, t] = r[i, t] + r[i, t+1] + ...`` is the episode's reward-to-go from turn ``t`` (0 after its last
turn) and the baseline is the leave-one-out mean of the other episodes of the group at the same turn index.
Reward-to-go keeps the consequences of a turn (a tool call rewarded only at the answer two turns later); the
leave-one-out baseline depends on the other episodes only, so it adds no bias. The naive alternative,
normalising each turn's own reward across the group, is biased (tested): it ignores what a turn causes later
and compares a turn only with the episodes that happened to reach it.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check(rewards: Tensor, group_size: int, turn_rewards: Tensor, turn_mask: Tensor) -> None:
    if group_size < 1 or rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be 1-D with a length divisible by group_size={group_size}, got shape "
                         f"{tuple(rewards.shape)}")
    if turn_rewards.dim() != 2 or turn_rewards.shape[0] != rewards.shape[0] or turn_mask.shape != turn_rewards.shape:
        raise ValueError(f"turn_rewards and turn_mask must both be (N, T) with N = {rewards.shape[0]}, got "
                         f"{tuple(turn_rewards.shape)} and {tuple(turn_mask.shape)}")
    mask = turn_mask.bool()
    if not mask[:, 0].all():
        raise ValueError("every episode has at least one turn: turn_mask[:, 0] must be True")
    if (mask[:, 1:] & ~mask[:, :-1]).any():
        raise ValueError("turn_mask must mark a prefix of turns per episode (True ... True False ... False)")


def turn_credit_advantages(rewards: Tensor, group_size: int, *, turn_rewards: Tensor, turn_mask: Tensor,
                           scale_by_std: bool = True, eps: float = 1e-6) -> Tensor:
    """Per-turn advantages: reward-to-go minus the leave-one-out mean of the group's reward-to-go at that turn.

    Episode-level shaping is kept: the difference between ``rewards`` (the shaped episode returns the group
    estimator reads) and the sum of a row's turn rewards (a reward map's offset, an overlong penalty) counts as
    a reward at the episode's last turn, so ``G[i, 0] == rewards[i]``.

    Args:
        rewards: (N,) episode returns, group-major (``group_size`` consecutive episodes per prompt).
        group_size: G.
        turn_rewards: (N, T) each turn's reward (``Trajectory.turns[t].reward``), any value past the last turn.
        turn_mask: (N, T) True for the turns an episode has (a prefix; at least the first).
        scale_by_std: divide a group's advantages by the unbiased std of its episode returns (+ ``eps``), as
            :func:`~dapo_env.learners.algo.losses.group_advantages` does; a group whose returns are all equal is not
            scaled.
        eps: added to the standard deviation.

    Returns:
        (N, T) advantages, 0.0 past each episode's last turn; all 0.0 for a group of one (no baseline).

    Example:
        >>> rewards = torch.tensor([1.0, 0.0])       # a tool call then a right answer; a wrong direct answer
        >>> turn_rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
        >>> mask = torch.tensor([[True, True], [True, False]])
        >>> turn_credit_advantages(rewards, 2, turn_rewards=turn_rewards, turn_mask=mask, scale_by_std=False)
        tensor([[ 1.,  1.],
                [-1.,  0.]])
    """
    _check(rewards, group_size, turn_rewards, turn_mask)
    n, t = turn_rewards.shape
    mask = turn_mask.to(rewards.dtype)  # (N, T)
    r = turn_rewards.to(rewards.dtype) * mask
    last = turn_mask.bool().sum(dim=1) - 1  # (N,) index of each episode's last turn
    r = r.index_put((torch.arange(n), last), rewards - r.sum(dim=1), accumulate=True)  # shaping at the last turn
    to_go = r.flip(1).cumsum(1).flip(1) * mask  # (N, T) reward-to-go, 0 past the end
    if group_size == 1:
        return torch.zeros_like(to_go)
    g = to_go.reshape(-1, group_size, t)  # (N/G, G, T)
    baseline = (g.sum(dim=1, keepdim=True) - g) / (group_size - 1)  # leave-one-out mean at each turn index
    advantages = g - baseline
    if scale_by_std:
        returns = rewards.reshape(-1, group_size)  # (N/G, G)
        std = returns.std(dim=1, keepdim=True)
        scale = torch.where(std > 0, std + eps, torch.ones_like(std))  # (N/G, 1)
        advantages = advantages / scale.unsqueeze(-1)
    advantages = advantages.reshape(n, t)
    return torch.where(turn_mask.bool(), advantages, torch.zeros_like(advantages))


def naive_turn_advantages(rewards: Tensor, group_size: int, *, turn_rewards: Tensor, turn_mask: Tensor,
                          scale_by_std: bool = True, eps: float = 1e-6) -> Tensor:
    """The naive per-turn normalisation (for comparison only; biased, see the module docstring): each turn's
    own reward minus the mean (and over the std) of that turn's rewards across the group's episodes that have
    it. ``rewards`` is unused (same signature as :func:`turn_credit_advantages`).

    Example:
        >>> naive_turn_advantages(torch.tensor([1.0, 0.0]), 2, turn_rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]),
        ...                       turn_mask=torch.tensor([[True, True], [True, False]]), scale_by_std=False)
        tensor([[0., 0.],
                [0., 0.]])
    """
    _check(rewards, group_size, turn_rewards, turn_mask)
    n, t = turn_rewards.shape
    mask = turn_mask.to(rewards.dtype).reshape(-1, group_size, t)
    r = turn_rewards.to(rewards.dtype).reshape(-1, group_size, t) * mask
    count = mask.sum(dim=1, keepdim=True)  # (N/G, 1, T) episodes that reached each turn
    mean = r.sum(dim=1, keepdim=True) / count.clamp(min=1)
    centred = (r - mean) * mask
    if scale_by_std:
        var = (centred ** 2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)
        centred = centred / (var.sqrt() + eps)
    centred = centred.reshape(n, t)
    return torch.where(turn_mask.bool(), centred, torch.zeros_like(centred))


def per_token(advantages: Tensor, token_turns: Tensor) -> Tensor:
    """Spread per-turn advantages onto tokens: token ``k`` of row ``i`` gets ``advantages[i, token_turns[i, k]]``
    (0.0 where ``token_turns`` is -1: prompt, environment and padding tokens).

    Args:
        advantages: (N, T) per-turn advantages.
        token_turns: (N, L) int, the turn each token belongs to (-1 for none).

    Returns:
        (N, L) per-token advantages.

    Example:
        >>> per_token(torch.tensor([[2.0, -1.0]]), torch.tensor([[-1, 0, 0, -1, 1]]))
        tensor([[ 0.,  2.,  2.,  0., -1.]])
    """
    index = token_turns.clamp(min=0).long()
    return torch.where(token_turns >= 0, advantages.gather(1, index), torch.zeros((), dtype=advantages.dtype))


__all__ = ["naive_turn_advantages", "per_token", "turn_credit_advantages"]
