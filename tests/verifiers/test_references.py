"""References in JSON-serialisable form reach the verifiers intact; a wrong form fails loudly."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from dapo_env.types import CodeTests, InvalidReference
from dapo_env.verifiers import CodeVerifier, MathVerifier, verify_batch
from dapo_env.verifiers.references import code_tests, math_gold
from dapo_env.verifiers.sandbox import SandboxLimits

SOLUTION = "```python\ndef add(a, b):\n    return a + b\n```"
TESTS = CodeTests(tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0"), entry_point="add")


@pytest.mark.parametrize("reference", [
    TESTS,
    TESTS.to_dict(),
    json.dumps(TESTS.to_dict()),
    ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
    json.dumps(["assert add(1, 2) == 3", "assert add(0, 0) == 0"]),
    "assert add(1, 2) == 3\nassert add(0, 0) == 0",
])
def test_every_serialisable_code_reference_scores_a_correct_solution(reference) -> None:
    result = CodeVerifier(limits=SandboxLimits(wall_s=10.0))(SOLUTION, reference)
    assert result.correct, result.reason
    assert result.reason == "passed:2/2"


def test_code_tests_round_trip_through_json() -> None:
    tests = CodeTests(tests=("assert f(1) == 1",), stdio=(("1\n", "2\n"),), setup="import math", prefix="def g():\n  pass\n",
                      entry_point="f")
    assert code_tests(json.loads(json.dumps(tests.to_dict()))) == tests


@pytest.mark.parametrize("reference", [42, None, {"test_list": ["assert 1"]}, "{not json", "def (:", [1, 2],
                                       {"tests": "assert 1"}, {"stdio": [["only one"]]}])
def test_a_wrong_code_reference_raises_naming_the_accepted_forms(reference) -> None:
    with pytest.raises(InvalidReference):
        CodeVerifier()(SOLUTION, reference)


@pytest.mark.parametrize(("reference", "gold"), [
    ("34", "34"), (34, "34"), (0.5, "0.5"), (2.0, "2"), (Fraction(3, 4), "3/4"), ({"ground_truth": "34"}, "34"),
    ({"style": "rule", "ground_truth": 34}, "34"),
])
def test_math_references(reference, gold) -> None:
    assert math_gold(reference) == gold
    assert MathVerifier()(f"Answer: {gold}", reference).correct


@pytest.mark.parametrize("reference", [True, None, {"answer": "3"}, ["3"], float("nan")])
def test_a_wrong_math_reference_raises(reference) -> None:
    with pytest.raises(InvalidReference):
        MathVerifier()("Answer: 3", reference)


@pytest.mark.parametrize("backend", ["inline", "process"])
def test_verify_batch_raises_on_a_wrong_reference_naming_its_index(backend) -> None:
    with pytest.raises(InvalidReference, match="reference 1"):
        verify_batch(MathVerifier(), ["Answer: 1", "Answer: 2"], ["1", {"gold": "2"}], backend=backend, workers=1)


def test_verify_batch_prepares_json_references_for_workers() -> None:
    results = verify_batch(CodeVerifier(limits=SandboxLimits(wall_s=10.0)), [SOLUTION], [json.dumps(TESTS.to_dict())], workers=1)
    assert results[0].correct, results[0].reason


SOLUTION_TEXT = "She sells 16 - 3 - 4 = 9 eggs.\nShe makes 9 * 2 = $18 every day at the market.\n#### 18"


@pytest.mark.parametrize(("reference", "gold"), [
    (SOLUTION_TEXT, "18"), ("Half of 2,400 is 1,200.\n#### 1,200", "1200"),
    ("Adding the two parts gives $\\frac12+\\frac14=\\boxed{\\frac34}$, which is what we wanted to show here.",
     "\\frac34"),
    ("$f(0)+f(1)=1+2=\\boxed{3}$", "3"), ("\\text{Monday and Tuesday}", "\\text{Monday and Tuesday}"),
    ("x = 5", "x = 5"),
])
def test_a_worked_solution_gold_is_read_as_its_final_answer(reference, gold) -> None:
    assert MathVerifier().prepare_reference(reference) == gold
    assert MathVerifier()(f"Answer: {gold}", reference).correct
    assert not MathVerifier()("Answer: 17", reference).correct


@pytest.mark.parametrize("reference", [
    "We count the pairs first.\nThen we double the number of pairs, and that gives the socks we wanted to find.",
    "The text after the marks is empty here, as you can see in this long sentence. ####   ",
])
def test_a_worked_solution_with_no_final_answer_raises(reference) -> None:
    with pytest.raises(InvalidReference, match="final|####"):
        MathVerifier()("Answer: 3", reference)
    assert MathVerifier(extraction="lenient").prepare_reference(reference) == reference  # read when grading


def test_test_code_that_never_calls_its_checker_raises() -> None:
    humaneval_test = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n"
    with pytest.raises(InvalidReference, match="never calls"):
        code_tests(humaneval_test)
    assert code_tests(humaneval_test + "\ncheck(f)\n").num_tests == 3
    assert code_tests("def helper():\n    return 2\nassert helper() == 2").num_tests == 2
