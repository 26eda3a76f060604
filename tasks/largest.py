"""Largest-v0: pick the largest (or smallest) of a short list of integers, generated offline.

A procedural task whose unseen questions are new combinations of parts that are all seen in
training: every number and every position occurs in the train split, only the lists are new. A
tiny model that learns the skill (compare, then copy the winner) answers held-out lists as well as
training ones, which is what the CPU default run needs to show RL raising *held-out* accuracy.
Copying a random number of the list is right about ``1 / count`` of the time, so a model that has
only learned the answer format starts low and has real work left for RL.

The prompt is just the question, e.g. ``"Largest of 47 12 85 30?"``; the verifier is
``MathVerifier(answer_format="dapo")``, which reads the final ``Answer: 85`` line (exact integers).

    gym.make("Largest-v0", min_count=3, max_count=6, max_value=999, smallest=True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Task
from .procedural import ProceduralSource, check_list_knobs, check_size_and_seed
from .registry import register_task
from dapo_env.verifiers import MathVerifier


@dataclass(frozen=True, kw_only=True)
class LargestConfig:
    """Difficulty knobs of :func:`generate_largest`.

    Attributes:
        min_count: the fewest numbers in a list (>= 2).
        max_count: the most numbers; the count is drawn uniformly in between.
        min_value: the smallest number that may appear (negative numbers are allowed).
        max_value: the largest number that may appear.
        smallest: ask for the smallest number instead of the largest.
        uniform_answer: draw the answer uniformly from the value range first and the other numbers at
            or below it (at or above it with ``smallest``), so every answer is equally likely and a
            constant guess is right only ``1 / (max_value - min_value + 1)`` of the time (with
            independent draws the maximum of single digits is 9 in a third of 4-number lists).
        size: the number of problems a split has (what ``len()`` reports).
        seed: the generator seed; the split is mixed in, so splits never share a stream.

    Example:
        >>> LargestConfig(min_count=3, max_count=5).max_count
        5
    """

    min_count: int = 4
    max_count: int = 4
    min_value: int = 10
    max_value: int = 99
    smallest: bool = False
    uniform_answer: bool = False
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        check_list_knobs(self.min_count, self.max_count, self.min_value, self.max_value)
        for name in ("smallest", "uniform_answer"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        check_size_and_seed(self.size, self.seed)


def generate_largest(config: LargestConfig, rng: np.random.Generator) -> tuple[str, str, Mapping[str, Any]]:
    """One problem: ``("Largest of 47 12 85 30?", "85", {"numbers": (47, 12, 85, 30), ...})``."""
    count = int(rng.integers(config.min_count, config.max_count + 1))
    if config.uniform_answer:
        answer = int(rng.integers(config.min_value, config.max_value + 1))
        low, high = (answer, config.max_value) if config.smallest else (config.min_value, answer)
        others = [int(v) for v in rng.integers(low, high + 1, size=count - 1)]
        others.insert(int(rng.integers(count)), answer)  # the answer at a uniform position
        numbers = tuple(others)
    else:
        numbers = tuple(int(v) for v in rng.integers(config.min_value, config.max_value + 1, size=count))
    answer = min(numbers) if config.smallest else max(numbers)
    word = "Smallest" if config.smallest else "Largest"
    question = f"{word} of {' '.join(str(v) for v in numbers)}?"
    return question, str(answer), {"numbers": numbers, "count": count, "position": numbers.index(answer)}


LARGEST = Task(
    name="Largest",
    source=ProceduralSource(default=LargestConfig(), generate=generate_largest),
    verifier=MathVerifier(answer_format="dapo"),
    prompt_template="{question}",
    split="train",
    version=0,
    description="Procedural: the largest (or smallest) of a short list of integers (knobs: count, value range).",
)
register_task(LARGEST)

__all__ = ["LARGEST", "LargestConfig", "generate_largest"]
