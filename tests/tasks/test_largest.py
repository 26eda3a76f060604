"""Largest-v0: the oracle answer verifies, the question parses back to the list, knobs are validated."""

from __future__ import annotations

import re
from collections import Counter

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.tasks import LargestConfig, get_task
from dapo_env.tasks.procedural import split_of

LARGEST = get_task("Largest-v0")
FAST = settings(max_examples=40, deadline=None)


def _numbers(question: str) -> list[int]:
    """The list a question shows, parsed back from its text."""
    match = re.fullmatch(r"(Largest|Smallest) of (-?\d+(?: -?\d+)*)\?", question)
    assert match is not None, question
    return [int(v) for v in match.group(2).split()]


def test_default_prompt_and_answer_format() -> None:
    for problem in LARGEST.load(size=20):
        prompt = LARGEST.format_prompt(problem)
        assert prompt == problem.question and prompt.startswith("Largest of ")
        numbers = _numbers(prompt)
        assert len(numbers) == 4 and all(10 <= v <= 99 for v in numbers)
        assert problem.answer == str(max(numbers)) and list(problem.metadata["numbers"]) == numbers
        assert LARGEST.verifier(f"Answer: {problem.answer}", problem.answer).correct
        wrong = next(v for v in (*numbers, int(problem.answer) + 1) if str(v) != problem.answer)
        assert not LARGEST.verifier(f"Answer: {wrong}", problem.answer).correct


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    index=st.integers(0, 5_000),
    split=st.sampled_from(["train", "validation", "test"]),
    counts=st.tuples(st.integers(2, 6), st.integers(0, 3)),
    values=st.tuples(st.integers(-500, 500), st.integers(20, 1000)),
    smallest=st.booleans(),
    uniform=st.booleans(),
)
def test_oracle_verifies(seed, index, split, counts, values, smallest, uniform) -> None:
    knobs = dict(min_count=counts[0], max_count=counts[0] + counts[1], min_value=values[0],
                 max_value=values[0] + values[1], smallest=smallest, uniform_answer=uniform, seed=seed,
                 size=index + 1)
    problem = LARGEST.load(split=split, **knobs)[index]
    numbers = _numbers(problem.question)
    assert counts[0] <= len(numbers) <= counts[0] + counts[1]
    assert all(values[0] <= v <= values[0] + values[1] for v in numbers)
    assert problem.answer == str(min(numbers) if smallest else max(numbers))
    assert split_of(problem.question) == split
    assert LARGEST.verifier(f"Let me compare.\nAnswer: {problem.answer}", problem.answer).correct


@pytest.mark.parametrize("smallest", [False, True])
def test_uniform_answer_spreads_answers_evenly(smallest: bool) -> None:
    knobs = dict(min_value=0, max_value=9, min_count=5, max_count=6, smallest=smallest)
    skewed = Counter(p.answer for p in LARGEST.load(split="train", size=2000, **knobs))
    even = Counter(p.answer for p in LARGEST.load(split="train", size=2000, uniform_answer=True, **knobs))
    extreme = "0" if smallest else "9"
    assert skewed[extreme] > 0.35 * 2000  # independent digits: the extreme is in most lists
    # every answer but possibly the opposite extreme (its only lists, all 9s or all 0s, may hash to another split)
    assert len(even) >= 9 and set(even) <= {str(d) for d in range(10)} and max(even.values()) < 0.15 * 2000


def test_held_out_lists_are_new_but_their_numbers_are_seen_in_training() -> None:
    train = LARGEST.load(split="train", size=2000)
    test = LARGEST.load(split="test", size=200)
    train_questions = {p.question for p in train}
    seen_numbers = {v for p in train for v in p.metadata["numbers"]}
    assert not train_questions & {p.question for p in test}
    assert all(set(p.metadata["numbers"]) <= seen_numbers for p in test)


def test_gym_make_passes_knobs() -> None:
    env = gym.make("Largest-v0", smallest=True, min_count=3, max_count=3, size=5)
    observation, info = env.reset(seed=0)
    assert "Smallest of " in str(observation) or "Smallest of " in str(info)
    env.close()


@pytest.mark.parametrize("knobs, message", [
    ({"min_count": 1}, "min_count"),
    ({"min_count": 4, "max_count": 3}, "max_count"),
    ({"min_value": 5, "max_value": 4}, "max_value"),
    ({"smallest": 1}, "smallest"),
    ({"uniform_answer": "yes"}, "uniform_answer"),
])
def test_config_validation(knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LargestConfig(**knobs)
