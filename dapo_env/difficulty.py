"""Difficulty-aware problem sampling: draw less often the problems whose next group is likely to carry no
gradient (all G responses right, or all wrong), never starving any problem.

The rule. Each problem keeps a Beta(a, b) belief about the policy's pass rate p on it, starting from the
prior Beta(a0, b0) and updated after each of its groups with the group's counts (a += #correct,
b += #wrong). Older evidence fades: before an update the counts above the prior are multiplied by
``decay``, because the policy that produced them has moved on. A group of G responses is informative when
0 < #correct < G, which for a pass rate p has probability ``q(p) = 1 - p^G - (1 - p)^G``; under the belief
its expectation has a closed form,

    E[q] = 1 - prod_{i<G} (a + i) / (a + b + i) - prod_{i<G} (b + i) / (a + b + i),

which stays high for problems never seen (under a uniform Beta(1, 1): (G - 1) / (G + 1)) and in the middle,
and falls for problems seen solved (or failed) by every sample. A problem is drawn with probability
proportional to ``max(floor, E[q])``: the floor keeps every problem's chance at least ``floor`` times that of
the most informative one, so nothing starves and a problem the policy has left behind is still revisited.

The sampler is algorithm-agnostic (it only sees counts), lives in the env layer, and combines with DAPO's
dynamic sampling: dynamic sampling still filters the groups that turn out uninformative; this sampler
makes fewer of them. Its state (the counts) goes into checkpoints through ``state_dict``.

Example:
    >>> sampler = DifficultySampler(num_problems=3, group_size=4)
    >>> sampler.update([0, 1], [4, 2])  # problem 0: all right; problem 1: half right
    >>> w = sampler.weights()
    >>> bool(w[0] < w[1]) and bool(w[2] > w[0])
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class DifficultySampler:
    """Per-problem pass-rate beliefs and draws weighted by the chance that a group is informative.

    Args:
        num_problems: how many problems there are (indices ``0..num_problems-1``).
        group_size: G, responses per problem per draw.
        prior: ``(a0, b0)`` of the Beta prior on each pass rate (default Jeffreys' ``(0.5, 0.5)``: one
            all-right group already moves a problem's weight well down, which a uniform prior does not).
        floor: the least weight a problem gets, relative to 1 (the most informative); in ``(0, 1]``.
        decay: how much of a problem's earlier evidence (above the prior) survives each new group, in ``(0, 1]``.
    """

    def __init__(self, num_problems: int, group_size: int, *, prior: tuple[float, float] = (0.5, 0.5),
                 floor: float = 0.05, decay: float = 0.9) -> None:
        if not isinstance(num_problems, int) or num_problems < 1:
            raise ValueError(f"num_problems must be a positive int, got {num_problems!r}")
        if not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        if len(prior) != 2 or min(prior) <= 0:
            raise ValueError(f"prior must be a pair (a0, b0) of positive numbers, got {prior!r}")
        if not 0 < floor <= 1:
            raise ValueError(f"floor must be in (0, 1]: the least relative weight a problem keeps, got {floor!r}")
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be in (0, 1]: the share of old evidence kept per new group, got {decay!r}")
        self.num_problems, self.group_size = num_problems, group_size
        self.prior = (float(prior[0]), float(prior[1]))
        self.floor, self.decay = float(floor), float(decay)
        self.alpha = np.full(num_problems, self.prior[0])  # (P,)
        self.beta = np.full(num_problems, self.prior[1])  # (P,)
        self.seen = np.zeros(num_problems, dtype=np.int64)  # (P,) groups observed per problem

    def informative_probability(self) -> np.ndarray:
        """``E[q]`` per problem under its belief (see the module docstring). Shape (P,)."""
        steps = np.arange(self.group_size, dtype=np.float64)[None, :]  # (1, G)
        total = (self.alpha + self.beta)[:, None] + steps  # (P, G)
        all_right = np.prod((self.alpha[:, None] + steps) / total, axis=1)  # (P,) E[p^G]
        all_wrong = np.prod((self.beta[:, None] + steps) / total, axis=1)  # (P,) E[(1-p)^G]
        return np.clip(1.0 - all_right - all_wrong, 0.0, 1.0)

    def weights(self) -> np.ndarray:
        """Draw weights ``max(floor, E[q])``, not normalised. Shape (P,)."""
        return np.maximum(self.floor, self.informative_probability())

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` problem indices drawn with probability proportional to :meth:`weights` (without
        replacement while there are enough problems)."""
        weights = self.weights()
        return rng.choice(self.num_problems, size=size, replace=size > self.num_problems, p=weights / weights.sum())

    def update(self, indices: Sequence[int] | np.ndarray, num_correct: Sequence[int] | np.ndarray) -> None:
        """Record one group per entry: problem ``indices[i]`` got ``num_correct[i]`` of G right."""
        indices = np.asarray(indices, dtype=np.int64)
        correct = np.asarray(num_correct, dtype=np.float64)
        if indices.shape != correct.shape:
            raise ValueError(f"{indices.size} problem indices but {correct.size} counts")
        if indices.size and (indices.min() < 0 or indices.max() >= self.num_problems):
            raise ValueError(f"problem indices must be in [0, {self.num_problems})")
        if correct.size and (correct.min() < 0 or correct.max() > self.group_size):
            raise ValueError(f"num_correct must be in [0, {self.group_size}]")
        for index, right in zip(indices, correct):  # sequential: a problem drawn twice decays twice
            a0, b0 = self.prior
            self.alpha[index] = a0 + self.decay * (self.alpha[index] - a0) + right
            self.beta[index] = b0 + self.decay * (self.beta[index] - b0) + (self.group_size - right)
            self.seen[index] += 1

    def stats(self) -> dict[str, float]:
        """Summary for metrics: mean E[q], share of problems seen, share weighted at the floor."""
        q = self.informative_probability()
        return {"difficulty/expected_informative": float(q.mean()),
                "difficulty/seen_share": float((self.seen > 0).mean()),
                "difficulty/at_floor_share": float((q <= self.floor).mean())}

    def state_dict(self) -> dict[str, Any]:
        """The beliefs (JSON-serialisable) for exact resume."""
        return {"alpha": self.alpha.tolist(), "beta": self.beta.tolist(), "seen": self.seen.tolist()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the problem count must match."""
        alpha = np.asarray(state["alpha"], dtype=np.float64)
        if alpha.shape != (self.num_problems,):
            raise ValueError(f"saved difficulty state has {alpha.size} problems, this task has {self.num_problems}")
        self.alpha = alpha
        self.beta = np.asarray(state["beta"], dtype=np.float64)
        self.seen = np.asarray(state["seen"], dtype=np.int64)


def resolve_difficulty(value: DifficultySampler | bool | None, num_problems: int,
                       group_size: int) -> DifficultySampler | None:
    """A group env's ``difficulty=`` argument as a sampler: ``True`` builds one with the defaults, ``None`` or
    ``False`` turns it off, a :class:`DifficultySampler` is checked against the env's problems and G."""
    if value is None or value is False:
        return None
    if value is True:
        return DifficultySampler(num_problems, group_size)
    if not isinstance(value, DifficultySampler):
        raise TypeError(f"difficulty must be a DifficultySampler, True or None, got {type(value).__name__}")
    if (value.num_problems, value.group_size) != (num_problems, group_size):
        raise ValueError(f"the DifficultySampler was built for {value.num_problems} problems and G={value.group_size}; "
                         f"this env has {num_problems} problems and G={group_size}: build it with those")
    return value


__all__ = ["DifficultySampler", "resolve_difficulty"]
