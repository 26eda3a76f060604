"""The pieces added for round 2: numbers in words, exact power towers, unicode folding, grading rules."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.verifiers.math import grade
from dapo_env.verifiers.math_normalize import canonical, fold_unicode
from dapo_env.verifiers.math_towers import Tower, equal, power, read_tower, tower_equal
from dapo_env.verifiers.math_words import words_to_number


# --- numbers in words -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [("thirty-one", "31"), ("Twelve", "12"), ("one hundred and five", "105"), ("two thousand twenty-four", "2024"),
     ("a hundred", "100"), ("negative seven", "-7"), ("minus 3", "-3"), ("zero", "0"), ("two thirds", "\\frac{2}{3}"),
     ("one half", "\\frac{1}{2}"), ("three million two hundred thousand", "3200000"), ("A", None), ("an", None),
     ("five six", None), ("twelve three", None), ("seven apples", None), ("thousand million", None), ("first", None),
     ("five and", None), ("", None)],
)
def test_words_to_number(text: str, value: str | None) -> None:
    assert words_to_number(text) == value


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 999_999))
def test_words_round_trip(n: int) -> None:
    ones = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen " \
           "sixteen seventeen eighteen nineteen".split()
    tens = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()

    def say(k: int) -> str:  # an independent writer of English numbers below a million
        if k < 20:
            return ones[k]
        if k < 100:
            return tens[k // 10] + ("-" + ones[k % 10] if k % 10 else "")
        if k < 1000:
            return ones[k // 100] + " hundred" + (" and " + say(k % 100) if k % 100 else "")
        return say(k // 1000) + " thousand" + (" " + say(k % 1000) if k % 1000 else "")

    assert words_to_number(say(n)) == str(n)


# --- power towers --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("10^{10000000000}", "10^{10^{10}}", True), ("10^10^10", "10^{10^{10}}", True), ("1^{10^{10^{10}}}", "1", True),
     ("0^{10^{10}}", "0", True), ("2^{2^{2^{2}}}", "65536", True), ("4^{2^{100}}", "2^{2^{101}}", True),
     ("100^{5\\cdot10^{9}}", "10^{10^{10}}", True), ("9^{9^{9}}", "3^{2\\cdot9^{9}}", True), ("(2^{3})^{4}", "4096", True),
     ("(10^{10})^{10}", "10^{10^{10}}", False), ("10^{100}", "10^{10^{10}}", False), ("10^{10^{11}}", "10^{10^{10}}", False),
     ("2^{2^{2^{2}}}", "65537", False), ("1^{10^{10}}", "10", False), ("2^{" * 100 + "2" + "}" * 100, "3", False),
     ("10^{10^{10}}", "10^{10^{10}}+1", None), ("x^{10}", "10", None), ("6^{10^{10}}", "2^{10^{10}}\\cdot3^{10^{10}}", None)],
)
def test_tower_equal(a: str, b: str, expected: bool | None) -> None:
    start = time.monotonic()
    assert tower_equal(a, b) is expected
    assert tower_equal(b, a) is expected
    assert time.monotonic() - start < 0.5


def test_towers_are_stored_with_primitive_bases() -> None:
    assert read_tower("8^{10^{10}}") == Tower(2, 3 * 10**10)
    assert power(4, Tower(2, 100)) == Tower(2, Tower(2, 101)) or equal(power(4, Tower(2, 100)), Tower(2, Tower(2, 101)))


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 40), st.integers(1, 6), st.integers(1, 30))
def test_small_towers_agree_with_python_integers(base: int, k: int, exponent: int) -> None:
    value = read_tower(f"{base}^{{{k}\\cdot{exponent}}}")
    assert equal(value, base ** (k * exponent))
    assert not equal(value, base ** (k * exponent) + 1)


# --- unicode and canonical forms ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "folded"),
    [("√12", "\\sqrt{12}"), ("3√2", "3\\sqrt{2}"), ("√(x+1)", "\\sqrt{x+1}"), ("∛27", "\\sqrt[3]{27}"), ("10⁻³", "10^{-3}"),
     ("x²", "x^2"), ("⅓", "\\frac{1}{3}"), ("−5", "-5")],
)
def test_fold_unicode(text: str, folded: str) -> None:
    assert fold_unicode(text) == folded


@pytest.mark.parametrize(
    ("text", "form"),
    [("\\left. \\frac{1}{2} \\right.", "\\frac{1}{2}"), ("9\\pi \\text{ m}^2", "9\\pi"), ("(-\\infty,+\\infty)", "(-\\infty,\\infty)"),
     ("negative 7", "-7"), ("thirty-one", "31"), ("\\boxed{\\boxed{5}}", "5"), ("{{{5}}}", "5"), ("\\approx 3.14", "3.14"),
     ("x \\text{ is even}", "xiseven"), ("\\text{Evelyn}", "Evelyn"), ("sqrt(2)", "\\sqrt(2)"), ("2pi", "2\\pi"),
     ("pie", "pie"), ("12 times 11", "12\\times11"), ("5 times", "5"), ("\\log_2 8", "\\log_{2}8")],
)
def test_canonical_forms(text: str, form: str) -> None:
    assert canonical(text) == form


# --- grading rules ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pred", "gold", "verdict"),
    [("0", "x + 2y = 0", False), ("x = -2y", "x + 2y = 0", True), ("3", "x = 3", True), ("3+4=7", "7", True),
     ("m+n=33", "33", True), ("(C) 40", "40", True), ("(C) 40", "C", True), ("(B) 40", "C", False),
     ("2, 3", "(2,3)", True), ("3, 2", "(2,3)", False), ("2, 3", "\\{3,2\\}", True),
     ("15\\frac{39}{40}, \\frac{639}{40}", "\\frac{639}{40}", True), ("5, 6", "5", False),
     ("an even function", "\\text{even}", True), ("odd", "\\text{even}", False), ("Yes", "7", False),
     ("2^10", "1024", True), ("4!", "24", True), ("4!", "4", False),
     ("(-\\infty, 0) \\cup (0, \\infty)", "\\mathbb{R}\\setminus\\{0\\}", True),
     ("(-\\infty, 0] \\cup (0, \\infty)", "\\mathbb{R}\\setminus\\{0\\}", False), ("[0,2]\\setminus\\{1\\}", "[0,1)\\cup(1,2]", True),
     ("(-\\infty,1)\\cup(1,2)\\cup(2,\\infty)", "\\mathbb{R}\\setminus\\{1,2\\}", True), ("x \\neq 5", "5", False)],
)
def test_grading_rules(pred: str, gold: str, verdict: bool) -> None:
    result, _ = grade(pred, gold)
    assert result is verdict
