"""Evaluation metrics over K samples per problem: pass@k (unbiased), avg@k, maj@k, with confidence intervals.

Pure functions on per-problem counts, torch-free, for any evaluation loop (``dapo-env eval`` uses them):

- **pass@k**: the probability that at least one of k samples drawn without replacement from the n
  generated ones is correct, estimated without bias from n >= k samples with c correct (Chen et al. 2021,
  "Evaluating Large Language Models Trained on Code", Eq. 1): ``1 - C(n - c, k) / C(n, k)``, averaged over
  problems;
- **avg@k**: the mean per-sample accuracy (pass@1 estimated from k samples);
- **maj@k**: the share of problems whose most frequent final answer among k samples is correct, where
  "same answer" is the verifier's own equivalence (``\\frac12`` and ``0.5`` are one answer for a math
  verifier), not string equality.

Confidence intervals are percentile bootstrap intervals over problems (a fixed seed, so reports are
reproducible), the right notion when problems are the unit that varies between benchmarks.

Example:
    >>> pass_at_k(n=4, c=1, k=2)
    0.5
    >>> round(summarize([(4, 1), (4, 4)], ks=(1, 2))["pass@2"], 4)
    0.75
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem from ``n`` samples of which ``c`` are correct (Chen et al. 2021, Eq. 1).

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``, exact and stable for large n.

    Example:
        >>> pass_at_k(10, 0, 5), pass_at_k(10, 10, 1), round(pass_at_k(10, 3, 1), 3)
        (0.0, 1.0, 0.3)
    """
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError(f"pass_at_k takes integers, got n={n!r}, c={c!r}, k={k!r}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs at least k samples per problem (n={n}): pass k <= n")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def default_ks(n: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``n`` (and ``n`` itself).

    Example:
        >>> default_ks(8), default_ks(6)
        ((1, 2, 4, 8), (1, 2, 4, 6))
    """
    ks = [k for k in (2 ** i for i in range(n.bit_length())) if k <= n]
    return tuple(ks + ([n] if ks[-1] != n else []))


def majority_correct(answers: Sequence[Any], correct: Sequence[bool],
                     same: Callable[[Any, Any], bool] | None = None) -> bool:
    """Whether the most frequent answer is correct, answers grouped by ``same`` (the verifier's equivalence;
    default ``==``). ``None`` answers (nothing extracted) never form the majority. Ties go to the group whose
    first member came first (deterministic).

    Example:
        >>> majority_correct(["1/2", "0.5", "3"], [True, True, False], same=lambda a, b: float(eval(a)) == float(eval(b)))
        True
    """
    if len(answers) != len(correct):
        raise ValueError(f"{len(answers)} answers but {len(correct)} verdicts")
    same = same or (lambda a, b: a == b)
    groups: list[list[int]] = []  # indices, each group headed by its first member
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for group in groups:
            if _equivalent(same, answers[group[0]], answer):
                group.append(i)
                break
        else:
            groups.append([i])
    if not groups:
        return False
    best = max(groups, key=lambda g: (len(g), -g[0]))
    return bool(correct[best[0]])


def _equivalent(same: Callable[[Any, Any], bool], a: Any, b: Any) -> bool:
    try:
        return bool(same(a, b))
    except Exception:  # noqa: BLE001 - an equivalence that cannot decide says "different"
        return False


def bootstrap_ci(values: Sequence[float], *, level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-problem ``values`` (problems resampled).

    Example:
        >>> bootstrap_ci([1.0] * 10)
        (1.0, 1.0)
    """
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)  # (resamples,)
    alpha = (1.0 - level) / 2
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))


def summarize(counts: Sequence[tuple[int, int]], *, ks: Sequence[int] | None = None,
              majority: Sequence[bool] | None = None, greedy: Sequence[bool] | None = None,
              level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """pass@k for each k, avg@n, maj@n and greedy accuracy over problems, each with a bootstrap interval.

    Args:
        counts: per problem, ``(n, c)``: samples generated and correct.
        ks: the k of pass@k (default :func:`default_ks` of the smallest n).
        majority: per problem, :func:`majority_correct` of its samples (gives ``maj@n``).
        greedy: per problem, whether the greedy answer is correct (gives ``greedy``).

    Returns:
        ``{"problems", "n", "pass@k", ..., "avg@n", "maj@n", "greedy", "ci": {metric: (low, high)}}``.
    """
    if not counts:
        raise ValueError("summarize needs at least one problem")
    n = min(count for count, _ in counts)
    ks = tuple(ks) if ks is not None else default_ks(n)
    per_problem: dict[str, list[float]] = {}
    for k in ks:
        per_problem[f"pass@{k}"] = [pass_at_k(total, right, k) for total, right in counts]
    per_problem[f"avg@{n}"] = [right / total for total, right in counts]
    if majority is not None:
        per_problem[f"maj@{n}"] = [float(m) for m in _aligned(majority, counts, "majority")]
    if greedy is not None:
        per_problem["greedy"] = [float(g) for g in _aligned(greedy, counts, "greedy")]
    out: dict[str, Any] = {"problems": len(counts), "n": n}
    out.update({name: float(np.mean(values)) for name, values in per_problem.items()})
    out["ci"] = {name: bootstrap_ci(values, level=level, seed=seed) for name, values in per_problem.items()}
    return out


def _aligned(values: Sequence[bool], counts: Sequence[tuple[int, int]], name: str) -> Sequence[bool]:
    if len(values) != len(counts):
        raise ValueError(f"{name} has {len(values)} entries for {len(counts)} problems")
    return values


def group_counts(records: Sequence[Mapping[str, Any]], *, key: str = "problem_id") -> dict[Hashable, tuple[int, int]]:
    """Per-problem ``(n, c)`` from per-sample records (dicts with ``key`` and ``correct``), in first-seen order.

    Example:
        >>> group_counts([{"problem_id": "a", "correct": True}, {"problem_id": "a", "correct": False}])
        {'a': (2, 1)}
    """
    out: dict[Hashable, list[int]] = {}
    for record in records:
        entry = out.setdefault(record[key], [0, 0])
        entry[0] += 1
        entry[1] += bool(record["correct"])
    return {problem: (n, c) for problem, (n, c) in out.items()}


__all__ = ["bootstrap_ci", "default_ks", "group_counts", "majority_correct", "pass_at_k", "summarize"]
