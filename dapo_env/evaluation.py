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

The verifier's equivalence comes from :func:`answer_equivalence`, and :func:`summarize_records` computes
every metric from per-sample records (the lines ``dapo-env eval`` and the trainer write).

Confidence intervals are percentile bootstrap intervals over problems (a fixed seed, so reports are
reproducible), the right notion when problems are the unit that varies between benchmarks.

Example:
    >>> pass_at_k(n=4, c=1, k=2)
    0.5
    >>> round(summarize([(4, 1), (4, 4)], ks=(1, 2))["pass@2"], 4)
    0.75
"""

from __future__ import annotations

import ast
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


# --- answer equivalence and per-sample records ------------------------------------------------------------------------
def answer_equivalence(verifier: Any) -> Callable[[str, str], bool]:
    """Whether two extracted answers are the same answer, as ``verifier`` sees it (maj@k groups by this).

    - a verifier with a ``same_answer(a, b) -> bool`` method decides itself (a task's own equivalence);
    - :class:`~dapo_env.verifiers.MathVerifier`: its own grading of ``a`` (as a boxed answer) against
      ``b`` as the gold answer, so ``\\frac12`` and ``0.5`` are one answer (the ``dapo`` format
      compares its normalised strings, as its scorer does);
    - :class:`~dapo_env.verifiers.CodeVerifier`: equal programs after normalisation (parsed and
      unparsed: comments, blank lines and formatting do not count);
    - anything else: equal text up to surrounding and repeated whitespace.

    Example:
        >>> from dapo_env.verifiers import CodeVerifier
        >>> answer_equivalence(CodeVerifier())("def f(x):\\n    return x+1  # add", "def f(x): return (x + 1)")
        True
    """
    from dapo_env.verifiers import CodeVerifier, MathVerifier

    own = getattr(verifier, "same_answer", None)
    if callable(own):
        return lambda a, b: bool(own(a, b))
    if isinstance(verifier, MathVerifier) and getattr(verifier, "answer_format", None) != "dapo":
        return lambda a, b: _same_text(a, b) or bool(verifier(f"\\boxed{{{a}}}", b).correct)
    if isinstance(verifier, CodeVerifier):
        return lambda a, b: _normal_program(a) == _normal_program(b)
    return _same_text


def _same_text(a: str, b: str) -> bool:
    return " ".join(str(a).split()) == " ".join(str(b).split())


def _normal_program(code: str) -> str:
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "\n".join(line.rstrip() for line in str(code).strip().splitlines() if line.strip())


def _memoized(same: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
    """``same`` with a fast path for identical strings and a cache (maj@k compares each answer to each group)."""
    memo: dict[tuple[str, str], bool] = {}

    def check(a: str, b: str) -> bool:
        if a == b:
            return True
        if (a, b) not in memo:
            memo[(a, b)] = bool(same(a, b))
        return memo[(a, b)]

    return check


# --- summary from records ----------------------------------------------------------------------------
def summarize_records(records: Sequence[Mapping[str, Any]], *, same: Callable[[str, str], bool] | None = None,
                      level: float = 0.95) -> dict[str, Any]:
    """The metrics of an eval from its per-sample records (the lines of ``samples.jsonl``).

    Problems are grouped by ``index`` (``problem_id`` when absent). Sampled records give pass@k for
    k = 1, 2, 4, ..., n (:func:`~dapo_env.evaluation.pass_at_k`, unbiased), ``avg@n`` and ``maj@n``
    (majority of the extracted answers, grouped by ``same``); greedy records give ``greedy``.

    Returns:
        ``{"metrics": {name: {"value", "ci95"}}, "problems", "n", "notes"}``; ``maj@n`` is left out (with a
        note) when the verifier extracted no answer at all.

    Example:
        >>> recs = [{"index": 0, "greedy": False, "sample": s, "correct": c, "extracted": e}
        ...         for s, (c, e) in enumerate([(True, "1"), (False, "2"), (True, "1")])]
        >>> m = summarize_records(recs)["metrics"]
        >>> round(m["pass@2"]["value"], 4), round(m["avg@3"]["value"], 4), m["maj@3"]["value"]
        (1.0, 0.6667, 1.0)
    """
    sampled: dict[Any, list[Mapping[str, Any]]] = {}
    greedy: dict[Any, bool] = {}
    for r in records:
        key = r.get("index", r.get("problem_id"))
        if r.get("greedy"):
            greedy[key] = bool(r["correct"])
        else:
            sampled.setdefault(key, []).append(r)
    notes: list[str] = []
    metrics: dict[str, dict[str, Any]] = {}
    if sampled:
        problems = list(sampled)
        groups = [sorted(sampled[p], key=lambda r: r.get("sample", 0)) for p in problems]
        counts = [(len(g), sum(bool(r["correct"]) for r in g)) for g in groups]
        n = min(c for c, _ in counts)
        answered = any(r.get("extracted") is not None for g in groups for r in g)
        check = _memoized(same or _same_text)
        majority = ([majority_correct([r.get("extracted") for r in g], [bool(r["correct"]) for r in g], same=check)
                     for g in groups] if answered else None)
        if not answered:
            notes.append(f"maj@{n} left out: the verifier extracted no answer from any sample")
        with_greedy = [greedy[p] for p in problems] if greedy and all(p in greedy for p in problems) else None
        out = summarize(counts, ks=default_ks(n), majority=majority, greedy=with_greedy, level=level)
        names = [k for k in out if k.startswith(("pass@", "avg@", "maj@")) or k == "greedy"]
        metrics = {k: {"value": out[k], "ci95": list(out["ci"][k])} for k in names}
    if greedy and "greedy" not in metrics:
        values = [float(v) for v in greedy.values()]
        metrics["greedy"] = {"value": sum(values) / len(values), "ci95": list(bootstrap_ci(values, level=level))}
    return {"metrics": metrics, "problems": len(set(sampled) | set(greedy)),
            "n": min((len(g) for g in sampled.values()), default=0), "notes": notes}



__all__ = ["answer_equivalence", "bootstrap_ci", "default_ks", "group_counts", "majority_correct", "pass_at_k",
           "summarize", "summarize_records"]
