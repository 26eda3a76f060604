"""pass@k / avg@k / maj@k against brute force and hand-worked values."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.evaluation import bootstrap_ci, default_ks, group_counts, majority_correct, pass_at_k, summarize


def brute_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """The share of k-subsets of n samples (c correct) holding a correct one, by enumeration."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in s) for s in subsets), len(subsets))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_enumeration(args: tuple[int, int, int]) -> None:
    n, c, k = args
    assert pass_at_k(n, c, k) == pytest.approx(float(brute_pass_at_k(n, c, k)), abs=1e-12)


def test_pass_at_k_hand_worked() -> None:
    assert pass_at_k(4, 1, 2) == 0.5  # 3 of the 6 pairs hold the one correct sample
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(200, 10, 100) == pytest.approx(1 - math.comb(190, 100) / math.comb(200, 100))
    assert pass_at_k(3, 3, 3) == 1.0 and pass_at_k(3, 0, 3) == 0.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 4), (3, 1, 0)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_default_ks() -> None:
    assert default_ks(1) == (1,) and default_ks(16) == (1, 2, 4, 8, 16) and default_ks(10) == (1, 2, 4, 8, 10)


def test_majority_uses_the_given_equivalence_and_ignores_missing_answers() -> None:
    same = lambda a, b: Fraction(a) == Fraction(b)  # noqa: E731
    assert majority_correct(["1/2", "0.5", "2", "2"], [True, True, False, False], same=same)  # tie: first group wins
    assert not majority_correct(["1/2", "2", "2"], [True, False, False], same=same)
    assert not majority_correct([None, None, "3"], [False, False, False])
    assert majority_correct([None, None, "3"], [False, False, True])
    assert majority_correct(["0.5", "1/2", "1/2"], [False, True, True])  # the larger group wins
    assert not majority_correct(["1/2", "0.5", "0.5"], [True, False, False])  # string equality: "0.5" x2 wins
    assert not majority_correct([], [])


def test_an_equivalence_that_raises_counts_as_different() -> None:
    def boom(a, b):
        raise ValueError
    assert not majority_correct(["x", "x", "y"], [False, False, True], same=boom)  # 3 singletons: the first wins
    assert majority_correct(["x", "x", "y"], [True, False, False], same=boom)


def test_summarize_matches_an_independent_computation() -> None:
    counts = [(4, 0), (4, 1), (4, 4), (4, 2)]
    out = summarize(counts, majority=[False, False, True, True], greedy=[False, True, True, False])
    assert out["problems"] == 4 and out["n"] == 4
    assert out["pass@1"] == pytest.approx((0 + 0.25 + 1 + 0.5) / 4)
    assert out["pass@2"] == pytest.approx((0 + 0.5 + 1 + 5 / 6) / 4)
    assert out["pass@4"] == pytest.approx(0.75)
    assert out["avg@4"] == pytest.approx(out["pass@1"])
    assert out["maj@4"] == 0.5 and out["greedy"] == 0.5
    low, high = out["ci"]["pass@4"]
    assert 0.0 <= low <= 0.75 <= high <= 1.0


def test_bootstrap_interval_is_reproducible_and_narrows() -> None:
    wide = bootstrap_ci([0.0, 1.0] * 5)
    narrow = bootstrap_ci([0.0, 1.0] * 500)
    assert wide == bootstrap_ci([0.0, 1.0] * 5)
    assert (narrow[1] - narrow[0]) < (wide[1] - wide[0])


def test_group_counts() -> None:
    records = [{"problem_id": p, "correct": c} for p, c in [("a", True), ("b", False), ("a", False), ("b", False)]]
    assert group_counts(records) == {"a": (2, 1), "b": (2, 0)}
