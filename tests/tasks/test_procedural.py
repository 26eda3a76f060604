from __future__ import annotations

import pickle

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dapo_env.tasks import TaskDataError, get_task
from dapo_env.tasks.arithmetic import ArithmeticConfig, evaluate, generate_arithmetic, render
from dapo_env.tasks.countdown import (
    CountdownAnswer,
    CountdownConfig,
    CountdownVerifier,
    evaluate_expression,
    extract_expression,
)
from dapo_env.tasks.procedural import ProceduralSource, split_of

ARITHMETIC = get_task("Arithmetic-v0")
COUNTDOWN = get_task("Countdown-v0")
FAST = settings(max_examples=40, deadline=None)


def test_arithmetic_default_prompt_and_answer_format() -> None:
    problems = ARITHMETIC.load(size=20)
    for problem in problems:
        prompt = ARITHMETIC.format_prompt(problem)
        assert prompt == problem.question and prompt.startswith("Compute ") and prompt.endswith(".")
        assert int(problem.answer) == eval(problem.metadata["expression"])  # trusted generator output
        assert ARITHMETIC.verifier(f"Some work.\nAnswer: {problem.answer}", problem.answer).correct
        assert not ARITHMETIC.verifier(f"Answer: {int(problem.answer) + 1}", problem.answer).correct


def test_procedural_problems_are_pure_functions_of_seed_split_index() -> None:
    a = ARITHMETIC.load(size=50, seed=3)
    b = ARITHMETIC.load(size=50, seed=3)
    assert list(a) == list(b)
    assert a[7] == b[7] == a[-43]
    assert a[2:5] == [a[2], a[3], a[4]]
    assert [p.question for p in ARITHMETIC.load(size=50, seed=4)] != [p.question for p in a]
    # a problem does not depend on the size of the split
    assert ARITHMETIC.load(size=1000, seed=3)[10] == a[10]
    with pytest.raises(IndexError):
        a[50]


def test_splits_are_disjoint() -> None:
    knobs = dict(size=300, max_value=9)
    train = {p.question for p in ARITHMETIC.load(split="train", **knobs)}
    test = {p.question for p in ARITHMETIC.load(split="test", **knobs)}
    validation = {p.question for p in ARITHMETIC.load(split="validation", **knobs)}
    assert train and test and validation
    assert not train & test and not train & validation and not test & validation
    assert all(split_of(q) == "test" for q in test)


def test_unknown_split_knob_and_data_files_are_errors() -> None:
    with pytest.raises(ValueError, match="train"):
        ARITHMETIC.load(split="dev")
    with pytest.raises(TypeError, match="max_value"):
        ARITHMETIC.load(max_valeu=3)
    with pytest.raises(TaskDataError, match="data_files"):
        ARITHMETIC.load(data_files="x.jsonl")


@pytest.mark.parametrize(
    "knobs",
    [
        dict(min_operands=1),
        dict(max_operands=1),
        dict(min_value=5, max_value=4),
        dict(operators=()),
        dict(operators=("/",)),
        dict(size=0),
        dict(seed=-1),
    ],
)
def test_arithmetic_config_validation(knobs: dict) -> None:
    with pytest.raises(ValueError):
        ArithmeticConfig(**knobs)


def test_tiny_problem_space_cannot_fill_every_split() -> None:
    with pytest.raises(TaskDataError, match="too small"):
        ARITHMETIC.load(split="test", min_value=1, max_value=1, operators=("+",), size=1)[0]


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    index=st.integers(0, 10_000),
    split=st.sampled_from(["train", "validation", "test"]),
    operands=st.tuples(st.integers(2, 5), st.integers(0, 3)),
    values=st.tuples(st.integers(-50, 50), st.integers(0, 1000)),
    operators=st.lists(st.sampled_from(["+", "-", "*"]), min_size=1, max_size=3, unique=True),
    parentheses=st.booleans(),
)
def test_arithmetic_oracle_verifies(seed, index, split, operands, values, operators, parentheses) -> None:
    knobs = dict(
        min_operands=operands[0],
        max_operands=operands[0] + operands[1],
        min_value=values[0],
        max_value=values[0] + values[1] + 20,  # >= 21 values: every split gets its share of the space
        operators=tuple(operators),
        parentheses=parentheses,
        seed=seed,
        size=index + 1,
    )
    problem = ARITHMETIC.load(split=split, **knobs)[index]
    assert problem.answer == str(eval(problem.metadata["expression"]))  # our own generated text
    assert ARITHMETIC.verifier(f"Answer: {problem.answer}", problem.answer).correct


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    index=st.integers(0, 10_000),
    split=st.sampled_from(["train", "validation", "test"]),
    num_numbers=st.integers(2, 6),
    max_value=st.integers(3, 100),
    operators=st.lists(st.sampled_from(["+", "-", "*", "/"]), min_size=1, max_size=4, unique=True),
)
def test_countdown_oracle_verifies(seed, index, split, num_numbers, max_value, operators) -> None:
    knobs = dict(num_numbers=num_numbers, max_value=max_value, operators=tuple(operators), seed=seed)
    try:
        problem = COUNTDOWN.load(split=split, size=index + 1, max_target=1000, **knobs)[index]
    except TaskDataError:  # e.g. two numbers <= 3 with only "/": the documented "too small to split" error
        assume(False)
    answer = problem.answer
    assert len(answer.numbers) == num_numbers and 1 <= answer.target <= 1000
    result = COUNTDOWN.verifier(f"Let me think.\nAnswer: {problem.metadata['solution']}", answer)
    assert result.correct, (problem, result)
    assert COUNTDOWN.verifier(f"\\boxed{{{problem.metadata['solution']}}}", answer.to_json()).correct


def test_render_parenthesises_only_where_needed() -> None:
    assert render(("*", ("+", 3, 4), 5)) == "(3+4)*5"
    assert render(("-", 3, ("+", 4, 5))) == "3-(4+5)"
    assert render(("+", ("-", 3, 4), 5)) == "3-4+5"
    assert render(("+", -2, 5)) == "(-2)+5"
    assert evaluate(("-", 3, ("+", 4, 5))) == -6
    question, answer, _ = generate_arithmetic(ArithmeticConfig(), __import__("numpy").random.default_rng(0))
    assert question.startswith("Compute ") and answer.lstrip("-").isdigit()


REF = CountdownAnswer(numbers=(3, 5, 7, 7), target=20)


@pytest.mark.parametrize(
    ("response", "correct", "reason"),
    [
        ("Answer: (7-3)*5", True, "equal:countdown"),
        ("so \\boxed{(7 - 3) \\times 5}", True, "equal:countdown"),
        ("Answer: $(7-3)\\cdot 5 = 20$.", True, "equal:countdown"),
        ("Answer: 7+7+3+3", False, "numbers_not_allowed"),  # 3 used twice
        ("Answer: 7+7+5+1", False, "numbers_not_allowed"),  # 1 not given
        ("Answer: 7+7+5", False, "wrong_value"),
        ("Answer: 5/(7-7)", False, "division_by_zero"),
        ("Answer: __import__('os').system('echo hi')", False, "parse_error"),
        ("Answer: 5**3", False, "parse_error"),
        ("Answer: -5+25", False, "parse_error"),
        ("Answer: x*5", False, "parse_error"),
        ("Answer: " + "(" * 300 + "5" + ")" * 300, False, "parse_error"),
        ("I give up.", False, "no_answer"),
    ],
)
def test_countdown_verifier_cases(response: str, correct: bool, reason: str) -> None:
    result = CountdownVerifier()(response, REF)
    assert (result.correct, result.reason) == (correct, reason)
    assert result.score == float(correct)


def test_countdown_exact_fractions_and_reference_forms() -> None:
    ref = CountdownAnswer(numbers=(1, 3, 4, 6), target=24)
    assert CountdownVerifier()("Answer: 6/(1-3/4)", ref).correct
    assert CountdownVerifier()("Answer: 6/(1-3/4)", {"numbers": [1, 3, 4, 6], "target": 24}).correct
    assert evaluate_expression("6/(1-3/4)")[1] == [6, 1, 3, 4]
    assert extract_expression("Answer: 1\nmore text\nAnswer: 2+2") == "2+2"
    with pytest.raises(TypeError):
        CountdownVerifier()("Answer: 1", 24)


def test_countdown_config_and_pickling() -> None:
    with pytest.raises(ValueError):
        CountdownConfig(num_numbers=1)
    with pytest.raises(ValueError):
        CountdownConfig(operators=("^",))
    with pytest.raises(TaskDataError, match="max_target"):
        COUNTDOWN.load(min_value=50, max_value=60, operators=("+", "*"), max_target=10, size=1)[0]
    problem = COUNTDOWN.load(size=1)[0]
    assert pickle.loads(pickle.dumps(problem)) == problem
    assert pickle.loads(pickle.dumps(COUNTDOWN)).env_id == "Countdown-v0"
    assert isinstance(COUNTDOWN.source, ProceduralSource)
