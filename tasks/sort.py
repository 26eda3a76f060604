"""Sort-v0: sort a short list of integers, generated offline; the answer's length grows with the list.

A procedural task whose responses vary in length with the difficulty: a list of ``count`` numbers
is answered by ``Answer: `` and the same ``count`` numbers in order, so short lists are easy and short,
long lists hard and long. That is the regime the DAPO paper's length mechanisms are about (token-level
loss weighs long responses' tokens like short ones'; the overlong penalty and filter act on responses
that run past the limit), at a size a tiny model can learn on a CPU. Held-out lists are new
combinations of numbers that all occur in training, so a learned skill transfers to the test split.

The prompt is just the question, e.g. ``"Sort 3 7 2 7 5"``; the verifier (:class:`SortVerifier`)
reads the last ``Answer:`` line and wants exactly the sorted list (same numbers, same multiplicities,
in order; spaces or commas between them).

    gym.make("Sort-v0", min_count=2, max_count=10, max_value=99, descending=True)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Task
from .procedural import ProceduralSource, check_list_knobs, check_size_and_seed
from .registry import register_task
from dapo_env.types import VerifyResult

_ANSWER_RE = re.compile(r"(?i)answer\s*:[ \t]*([^\n]*)")
_LIST_RE = re.compile(r"-?\d+(?:\s*[,\s]\s*-?\d+)*")


def parse_list(text: str) -> tuple[int, ...] | None:
    """The integers of ``"2 3 5"`` / ``"2, 3, 5"`` / ``"[2, 3, 5]."``; ``None`` if it is not such a list."""
    body = text.strip().rstrip(".").strip()
    if body.startswith(("[", "(")) and body.endswith(("]", ")")):
        body = body[1:-1].strip()
    if not _LIST_RE.fullmatch(body):
        return None
    return tuple(int(v) for v in re.findall(r"-?\d+", body))


@dataclass(frozen=True)
class SortVerifier:
    """Checks a Sort response: its last ``Answer:`` line is exactly the sorted list.

    Called as ``verifier(response, reference)`` with the reference list as a string (``"2 3 5"``, what
    Sort-v0's problems carry) or a sequence of integers. Never raises on model output. Reasons:
    ``"equal:sorted"``, ``"no_answer"``, ``"parse_error"``, ``"wrong_length"``, ``"wrong_numbers"``
    (other numbers or multiplicities), ``"wrong_order"`` (the right numbers out of order).

    Example:
        >>> SortVerifier()("Answer: 2 3 5 7 7", "2 3 5 7 7").correct
        True
        >>> SortVerifier()("Answer: 2 3 7 5 7", "2 3 5 7 7").reason
        'wrong_order'
    """

    def __call__(self, response: str, reference: Any, /) -> VerifyResult:
        expected = parse_list(reference) if isinstance(reference, str) else tuple(int(v) for v in reference)
        if expected is None:
            raise ValueError(f"Sort reference {reference!r} is not a list of integers such as '2 3 5'")
        matches = _ANSWER_RE.findall(response) if isinstance(response, str) else []
        if not matches:
            return VerifyResult(False, 0.0, None, "no_answer")
        extracted = matches[-1].strip()
        got = parse_list(extracted)
        if got is None:
            return VerifyResult(False, 0.0, extracted, "parse_error")
        if got == expected:
            return VerifyResult(True, 1.0, extracted, "equal:sorted")
        if len(got) != len(expected):
            return VerifyResult(False, 0.0, extracted, "wrong_length")
        reason = "wrong_order" if sorted(got) == sorted(expected) else "wrong_numbers"
        return VerifyResult(False, 0.0, extracted, reason)


@dataclass(frozen=True, kw_only=True)
class SortConfig:
    """Difficulty knobs of :func:`generate_sort`.

    Attributes:
        min_count: the fewest numbers in a list (>= 2).
        max_count: the most numbers; the count is drawn uniformly in between.
        min_value: the smallest number that may appear (negative numbers are allowed).
        max_value: the largest number that may appear.
        descending: ask for the list from largest to smallest.
        size: the number of problems a split has (what ``len()`` reports).
        seed: the generator seed; the split is mixed in, so splits never share a stream.

    Example:
        >>> SortConfig(min_count=3, max_count=8).max_count
        8
    """

    min_count: int = 2
    max_count: int = 8
    min_value: int = 0
    max_value: int = 9
    descending: bool = False
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        check_list_knobs(self.min_count, self.max_count, self.min_value, self.max_value)
        if not isinstance(self.descending, bool):
            raise ValueError(f"descending must be True or False, got {self.descending!r}")
        check_size_and_seed(self.size, self.seed)


def generate_sort(config: SortConfig, rng: np.random.Generator) -> tuple[str, str, Mapping[str, Any]]:
    """One problem: ``("Sort 3 7 2 7 5", "2 3 5 7 7", {"numbers": (3, 7, 2, 7, 5), "count": 5})``."""
    count = int(rng.integers(config.min_count, config.max_count + 1))
    numbers = tuple(int(v) for v in rng.integers(config.min_value, config.max_value + 1, size=count))
    ordered: Sequence[int] = sorted(numbers, reverse=config.descending)
    word = "Sort descending" if config.descending else "Sort"
    question = f"{word} {' '.join(str(v) for v in numbers)}"
    return question, " ".join(str(v) for v in ordered), {"numbers": numbers, "count": count}


SORT = Task(
    name="Sort",
    source=ProceduralSource(default=SortConfig(), generate=generate_sort),
    verifier=SortVerifier(),
    prompt_template="{question}",
    split="train",
    version=0,
    description="Procedural: sort a short list of integers; the answer is as long as the list (knobs: count, "
                "value range, order).",
)
register_task(SORT)

__all__ = ["SORT", "SortConfig", "SortVerifier", "generate_sort", "parse_list"]
