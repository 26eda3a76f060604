"""``MathVerifier(extraction="lenient")``: evaluation-style extraction, on its own labelled table."""

from __future__ import annotations

import pytest

from dapo_env.verifiers import MathVerifier
from dapo_env.verifiers.math_extract import extract_answer, lenient_answer
from dapo_env.verifiers.math_symbolic import warm_up

from math_lenient_cases import LENIENT_CASES, ROUND4_CASES  # noqa: E402 - pytest puts this folder on sys.path

LENIENT = MathVerifier(extraction="lenient")
STRICT = MathVerifier()


@pytest.fixture(scope="module", autouse=True)
def _started_helper() -> None:
    warm_up(120.0)


@pytest.mark.parametrize("case", LENIENT_CASES, ids=[f"{i}-{c.category}" for i, c in enumerate(LENIENT_CASES)])
def test_lenient_table(case) -> None:
    result = LENIENT(case.prediction, case.gold)
    assert result.correct is case.expected, (result, case.gold)


@pytest.mark.parametrize("case", ROUND4_CASES, ids=[f"{i}-{c.category}" for i, c in enumerate(ROUND4_CASES)])
def test_round4_table(case) -> None:
    result = LENIENT(case.prediction, case.gold)
    assert result.correct is case.expected, (result, case.gold)


def test_round4_table_covers_its_categories_with_near_misses() -> None:
    by_category: dict[str, list] = {}
    for case in ROUND4_CASES:
        by_category.setdefault(case.category, []).append(case)
    assert set(by_category) == {"units", "truncation", "choice", "typography", "mixed", "times", "base_n", "percent"}
    assert len(ROUND4_CASES) >= 150
    for category, cases in by_category.items():
        assert sum(c.expected for c in cases) >= 3 and sum(not c.expected for c in cases) >= 3, category


def test_round4_leaves_strict_mode_alone() -> None:
    """Units, cut-off responses, choices and typography are lenient habits: strict verdicts do not move."""
    assert STRICT("Answer: 5 m", "5\\text{ km}").correct  # strict drops units on both sides, as before
    assert STRICT("Answer: 0.25", "25\\%").correct
    assert STRICT("Answer: b", "B").reason == "not_equal"
    assert not LENIENT("Answer: 5 m", "5\\text{ km}").correct and not LENIENT("Answer: 0.25", "25\\%").correct


@pytest.mark.parametrize(
    "choices", [["12", "15", "18", "21"], {"A": "12", "B": "15", "C": "18", "D": "21"}, "(A) 12 (B) 15 (C) 18 (D) 21"])
def test_a_reference_names_its_options_in_any_of_three_forms(choices) -> None:
    for gold in ("B", "15", "(B)"):
        reference = {"ground_truth": gold, "choices": choices}
        assert LENIENT("Answer: 15", reference).correct and LENIENT("The answer is (b).", reference).correct
        assert not LENIENT("Answer: 18", reference).correct and not LENIENT("Answer: (C) 15", reference).correct
    assert STRICT("Answer: 15", {"ground_truth": "B", "choices": choices}).reason == "not_equal"  # strict: as before


@pytest.mark.parametrize(
    "response",
    [" " * 100_000 + "x", "1 " * 50_000, "$" * 20_000, "one and " * 20_000, "5 m " * 20_000, "3:30 " * 20_000,
     "A B " * 20_000, "{" * 20_000, "<think> " + "so 5. " * 20_000, "  <|im_end|>" * 2_000 + " user", "(B) " * 20_000],
    ids=lambda text: f"{text[:10]!r}x{len(text)}",
)
def test_round4_readings_stay_fast_on_hostile_text(response: str) -> None:
    import time

    for gold in ("5", "5 \\text{ km}", "B", "3:30 p.m.", "1011_2", {"ground_truth": "B", "choices": ["1", "2"]}):
        start = time.perf_counter()
        LENIENT(response, gold)
        assert time.perf_counter() - start < 2.0, (response[:20], gold)


def test_lenient_table_covers_its_categories() -> None:
    categories = {c.category for c in LENIENT_CASES}
    assert categories == {"short", "prose", "commit", "gold_form", "near_miss", "solution_gold", "labelled", "lists",
                          "sentences"}
    assert len(LENIENT_CASES) >= 90 and sum(not c.expected for c in LENIENT_CASES) >= 20


def test_lenient_reads_uncommitted_text_that_strict_refuses() -> None:
    """The reason lenient is for evaluation only: it rewards text that never commits."""
    for text in ("I believe it's $5$.", "The answer is probably 5", "Hmm, 5 maybe?", "we compute 2 + 3 = 5"):
        assert STRICT(text, "5").reason == "no_answer"
        assert LENIENT(text, "5").correct
    prose = [c for c in LENIENT_CASES if c.category == "prose"]
    assert sum(STRICT(c.prediction, c.gold).correct for c in prose) < sum(LENIENT(c.prediction, c.gold).correct for c in prose)


def test_lenient_keeps_the_strict_answer_when_there_is_one() -> None:
    text = "The answer is $\\boxed{6}$, since 2 + 4 = 6 and 6 > 5"
    assert extract_answer(text, extraction="lenient") == extract_answer(text) == "6"
    assert extract_answer("\\boxed{12} and then 3 + 4 = 7", extraction="lenient") == "12"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("I believe it's $\\frac{1}{2}$, roughly 0.5", "0.5"), ("we get $x = 3$ for the first case", "x = 3"),
     ("value: \\(\\sqrt{2}\\) end", "\\sqrt{2}"), ("no maths here", None), ("a total of 1,250 people", "1,250"),
     ("ratio \\frac{3}{4} overall", "\\frac{3}{4}")],
)
def test_last_math_span_or_number(text: str, expected: str | None) -> None:
    found = lenient_answer(text)
    assert (found.value if found is not None else None) == expected


def test_a_cut_off_box_is_no_answer_even_when_lenient() -> None:
    assert LENIENT("Therefore the answer is $\\boxed{\\frac{14}{3", "\\frac{14}{3}").reason == "no_answer"


def test_the_peer_graders_suite_where_a_local_copy_is_given() -> None:
    """Math-Verify's and verl's own grader tests (``$DAPO_ENV_PEER_TESTS``: a folder with copies of their test
    files, see ``peer_cases.py``; not shipped here): lenient agrees on >= 0.90 with <= 3 false positives."""
    import os

    from peer_cases import peer_cases

    folder = os.environ.get("DAPO_ENV_PEER_TESTS")
    if not folder:
        pytest.skip("set DAPO_ENV_PEER_TESTS to a folder holding Math-Verify's tests/*.py and verl's "
                    "tests/utils/reward_score/test_sandbox_on_cpu.py")
    cases = peer_cases(folder)
    verdicts = [(LENIENT(c.prediction, c.gold).correct, c.expected) for c in cases]
    false_positives = sum(got and not want for got, want in verdicts)
    accuracy = sum(got == want for got, want in verdicts) / len(cases)
    assert len(cases) >= 250 and accuracy >= 0.90 and false_positives <= 3, (accuracy, false_positives)
