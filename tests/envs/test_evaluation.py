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


# --- answer_equivalence and summarize_records --------------------------------------------------------
from dapo_env.evaluation import answer_equivalence, summarize_records  # noqa: E402
from dapo_env.verifiers import CodeVerifier, MathVerifier  # noqa: E402


def test_math_equivalence_is_the_verifiers_own_grading() -> None:
    same = answer_equivalence(MathVerifier())
    assert same("\\frac{1}{2}", "0.5") and same("0.5", "\\frac12") and same("1/2", "\\dfrac{1}{2}")
    assert same("(x+1)^2", "x^2+2x+1")  # decided by the symbolic stage
    assert not same("2", "3") and not same("\\frac{1}{2}", "0.25")
    dapo = answer_equivalence(MathVerifier(answer_format="dapo"))  # its scorer compares normalised strings
    assert dapo("12", "12") and not dapo("0.5", "1/2")


def test_code_equivalence_ignores_formatting_and_comments_not_behaviour() -> None:
    same = answer_equivalence(CodeVerifier(isolation="weak"))
    assert same("def f(x):\n    # add one\n    return x+1\n", "def f(x): return (x + 1)")
    assert not same("def f(x): return x + 1", "def f(x): return x + 2")
    assert same("  return x\n", "  return x")  # not parseable alone: compared as trimmed text


def test_a_verifiers_own_same_answer_wins_and_the_fallback_is_whitespace_insensitive_text() -> None:
    class Mod7:
        def __call__(self, response, reference):  # pragma: no cover - only its equivalence is used
            raise AssertionError

        def same_answer(self, a: str, b: str) -> bool:
            return int(a) % 7 == int(b) % 7

    assert answer_equivalence(Mod7())("1", "8") and not answer_equivalence(Mod7())("1", "9")
    text = answer_equivalence(lambda response, reference: None)
    assert text(" 2  3 5", "2 3 5") and not text("2 3 5", "2 35")


def _records(extracted: list, correct: list[bool], index: int = 0) -> list[dict]:
    return [{"index": index, "greedy": False, "sample": s, "extracted": e, "correct": c}
            for s, (e, c) in enumerate(zip(extracted, correct))]


def test_maj_at_k_groups_answers_by_the_verifiers_equivalence_not_strings() -> None:
    recs = _records(["3", "3", "0.5", "\\frac12", "1/2"], [False, False, True, True, True])
    assert summarize_records(recs)["metrics"]["maj@5"]["value"] == 0.0  # by strings "3" wins, 2 votes to 1 each
    assert summarize_records(recs, same=answer_equivalence(MathVerifier()))["metrics"]["maj@5"]["value"] == 1.0


def test_summarize_records_by_hand() -> None:
    recs = (_records(["1", "2", "1", None], [True, False, True, False], index=0)
            + _records([None, "5", "6", "6"], [False, True, False, False], index=1)
            + [{"index": 0, "greedy": True, "sample": 0, "extracted": "1", "correct": True},
               {"index": 1, "greedy": True, "sample": 0, "extracted": "6", "correct": False}])
    out = summarize_records(recs)
    m = {k: v["value"] for k, v in out["metrics"].items()}
    # problem 0: c=2 of 4 -> pass@2 = 1 - C(2,2)/C(4,2) = 5/6; problem 1: c=1 -> pass@2 = 1 - C(3,2)/C(4,2) = 1/2
    assert m["pass@1"] == pytest.approx((0.5 + 0.25) / 2) and m["pass@2"] == pytest.approx((5 / 6 + 0.5) / 2)
    assert m["pass@4"] == 1.0 and m["avg@4"] == pytest.approx(0.375)
    assert m["maj@4"] == 0.5 and m["greedy"] == 0.5  # majority "1" (right) and "6" (wrong)
    assert (out["problems"], out["n"], out["notes"]) == (2, 4, [])


def test_summarize_records_greedy_only_and_no_extracted_answers() -> None:
    greedy = [{"index": i, "greedy": True, "sample": 0, "extracted": None, "correct": i < 3} for i in range(4)]
    out = summarize_records(greedy)
    assert list(out["metrics"]) == ["greedy"] and out["metrics"]["greedy"]["value"] == 0.75 and out["n"] == 0
    out = summarize_records(_records([None, None], [True, False]))
    assert "maj@2" not in out["metrics"] and "maj@2" in out["notes"][0]
