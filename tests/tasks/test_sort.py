"""Sort-v0: the oracle answer verifies, the verifier is exact and total, lengths track the list, knobs
are validated."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.tasks import SortConfig, SortVerifier, get_task
from dapo_env.tasks.base import TaskDataError
from dapo_env.tasks.procedural import split_of
from dapo_env.tasks.sort import parse_list

SORT = get_task("Sort-v0")
VERIFY = SortVerifier()
FAST = settings(max_examples=40, deadline=None)


def _numbers(question: str) -> list[int]:
    match = re.fullmatch(r"Sort(?: descending)? (-?\d+(?: -?\d+)*)", question)
    assert match is not None, question
    return [int(v) for v in match.group(1).split()]


def test_default_prompt_answer_and_lengths() -> None:
    problems = SORT.load(size=200)
    for problem in problems:
        numbers = _numbers(SORT.format_prompt(problem))
        assert 2 <= len(numbers) <= 8 and all(0 <= v <= 9 for v in numbers)
        assert problem.answer == " ".join(map(str, sorted(numbers)))
        assert VERIFY(f"Answer: {problem.answer}", problem.answer).correct
    # the answer grows with the list: difficulty and response length go together
    lengths = {p.metadata["count"]: len(f"Answer: {p.answer}") for p in problems}
    assert [lengths[c] for c in sorted(lengths)] == [8 + 2 * c - 1 for c in sorted(lengths)]


@pytest.mark.parametrize("response, reference, correct, reason", [
    ("Answer: 2 3 5 7 7", "2 3 5 7 7", True, "equal:sorted"),
    ("Answer: 2, 3, 5, 7, 7.", "2 3 5 7 7", True, "equal:sorted"),
    ("Answer: [2, 3, 5, 7, 7]", (2, 3, 5, 7, 7), True, "equal:sorted"),
    ("first 7 3\nAnswer: 1 2\nAnswer: 2 3 5 7 7", "2 3 5 7 7", True, "equal:sorted"),  # the last line counts
    ("answer:-3 -1 4", "-3 -1 4", True, "equal:sorted"),
    ("Answer: 2 3 7 5 7", "2 3 5 7 7", False, "wrong_order"),
    ("Answer: 2 3 5 7", "2 3 5 7 7", False, "wrong_length"),
    ("Answer: 2 3 5 7 7 7", "2 3 5 7 7", False, "wrong_length"),
    ("Answer: 2 3 5 5 7", "2 3 5 7 7", False, "wrong_numbers"),  # same length, other multiplicities
    ("Answer: 23577", "2 3 5 7 7", False, "wrong_length"),  # digits must be separated
    ("2 3 5 7 7", "2 3 5 7 7", False, "no_answer"),  # the format is required, not guessed
    ("Answer: 2 3 five", "2 3 5", False, "parse_error"),
    ("Answer:", "2 3", False, "parse_error"),
])
def test_verifier_table(response: str, reference, correct: bool, reason: str) -> None:  # noqa: ANN001
    result = VERIFY(response, reference)
    assert (result.correct, result.reason) == (correct, reason)
    assert result.score == (1.0 if correct else 0.0)


@FAST
@given(st.text(max_size=80))
def test_verifier_never_raises_on_model_output(response: str) -> None:
    result = VERIFY(response, "1 2 3")
    assert result.correct == (parse_list(result.extracted or "x") == (1, 2, 3))


def test_bad_reference_names_the_problem() -> None:
    with pytest.raises(ValueError, match="not a list of integers"):
        VERIFY("Answer: 1 2", "one two")


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    index=st.integers(0, 5_000),
    split=st.sampled_from(["train", "validation", "test"]),
    counts=st.tuples(st.integers(2, 6), st.integers(0, 4)),
    values=st.tuples(st.integers(-50, 50), st.integers(5, 100)),
    descending=st.booleans(),
)
def test_oracle_verifies(seed, index, split, counts, values, descending) -> None:  # noqa: ANN001
    knobs = dict(min_count=counts[0], max_count=counts[0] + counts[1], min_value=values[0],
                 max_value=values[0] + values[1], descending=descending, seed=seed, size=index + 1)
    try:
        problem = SORT.load(split=split, **knobs)[index]
    except TaskDataError as err:  # a tiny space (e.g. 2 numbers from 6 values) may hold no problem of a split
        assert "too small to split" in str(err) and (values[1] + 1) ** (counts[0] + counts[1]) < 100_000, err
        return
    numbers = _numbers(problem.question)
    assert problem.question.startswith("Sort descending" if descending else "Sort ")
    assert counts[0] <= len(numbers) <= counts[0] + counts[1]
    assert problem.answer == " ".join(map(str, sorted(numbers, reverse=descending)))
    assert split_of(problem.question) == split
    assert VERIFY(f"Let me order them.\nAnswer: {problem.answer}", problem.answer).correct


def test_held_out_lists_are_new_but_their_numbers_are_seen_in_training() -> None:
    train = SORT.load(split="train", size=2000)
    test = SORT.load(split="test", size=200)
    seen_numbers = {v for p in train for v in p.metadata["numbers"]}
    assert not {p.question for p in train} & {p.question for p in test}
    assert all(set(p.metadata["numbers"]) <= seen_numbers for p in test)


def test_env_passes_check_env_and_rewards_the_sorted_list() -> None:
    env = gym.make("Sort-v0", min_count=3, max_count=5)
    check_env(env.unwrapped, skip_render_check=True)
    _, info = env.reset(seed=0)
    problem = SORT.load(split="train", min_count=3, max_count=5)[int(info["problem_id"].split("-")[1])]
    _, reward, terminated, _, step_info = env.step(f"Answer: {problem.answer}")
    assert terminated and reward == 1.0 and step_info["correct"]
    env.close()


@pytest.mark.parametrize("knobs, message", [
    ({"min_count": 1}, "min_count"),
    ({"min_count": 4, "max_count": 3}, "max_count"),
    ({"min_value": 5, "max_value": 4}, "max_value"),
    ({"descending": 1}, "descending"),
])
def test_config_validation(knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SortConfig(**knobs)
