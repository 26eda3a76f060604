from __future__ import annotations

import time
from fractions import Fraction

import pytest

from dapo_env.verifiers.math_eval import evaluate, identity, proportional
from dapo_env.verifiers.math_normalize import canonical, fold_unicode, parse_number


@pytest.mark.parametrize(
    ("text", "value"),
    [("\\frac{1}{2}+\\frac{1}{3}", Fraction(5, 6)), ("2^{10}", Fraction(1024)), ("\\sqrt{16}", Fraction(4)),
     ("\\binom{5}{2}", Fraction(10)), ("5!", Fraction(120)), ("3(2+1)", Fraction(9)), ("0.25", Fraction(1, 4)),
     ("\\frac12", Fraction(1, 2)), ("-2^2", Fraction(-4))],
)
def test_exact_evaluation(text: str, value: Fraction) -> None:
    assert evaluate(text) == value


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("(x+1)^2", "x^2+2x+1", True), ("(x+1)^2", "x^2+1", False), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True),
     ("2^{100}", "2^{100}+1", False), ("\\sin^2x+\\cos^2x", "1", True), ("e^{i\\pi}", "-1", True),
     ("a_1+a_2", "a_2+a_1", True), ("a_1", "a_2", False), ("\\log_2 8", "3", True), ("X", "x", False)],
)
def test_identity(a: str, b: str, expected: bool) -> None:
    assert identity(a, b) is expected


def test_approximations_are_not_identities_when_exact_only() -> None:
    assert identity("1.4142", "\\sqrt{2}") is False  # differs beyond 1e-6 relative
    assert identity("1.4142135623730951", "\\sqrt{2}", exact_only=True) is False


def test_unknown_or_huge_input_is_undecided_and_fast() -> None:
    start = time.monotonic()
    for text in ("10^{10^{10}}", "(10^{10})!", "9" * 5000, "\\int_0^1 x dx", "{" * 500, "2^{2^{2^{2^{2}}}}"):
        assert evaluate(text) is None
        assert identity(text, "1") is None
    assert time.monotonic() - start < 0.5


def test_equations_up_to_a_factor() -> None:
    assert proportional("(y)-(2x+3)", "(2y)-(4x+6)") is True
    assert proportional("(y)-(2x+3)", "(y)-(2x-3)") is False


def test_unicode_and_canonical_forms() -> None:
    assert fold_unicode("\uff14\uff12") == "42"
    assert canonical("\u22125") == "-5"
    assert canonical("$\\dfrac{1}{2}$ cm.") == "\\frac{1}{2}"
    assert canonical("10,\\!080") == "10080"
    assert canonical("\\pi r^2") == "\\pi r^2"
    assert parse_number(canonical("\u00bd")).value == Fraction(1, 2)
    assert parse_number("1e999999") is None


@pytest.mark.parametrize("module", ["math", "math_extract", "math_statements", "math_conclusions", "math_normalize", "math_eval",
                                    "math_symbolic", "math_words", "math_towers"])
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"dapo_env.verifiers.{module}"))
    assert result.failed == 0
