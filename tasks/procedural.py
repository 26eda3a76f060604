"""Shared machinery for procedural tasks: problems as a pure function of (seed, split, index).

Each problem is drawn from ``numpy.random.default_rng([seed, split_code, index, attempt])``. The splits
are disjoint by construction: a problem belongs to exactly one split, decided by a stable hash (SHA-256)
of its question text (``test`` 10 %, ``validation`` 10 %, ``train`` the rest). A draw that lands in
another split's share is redrawn with the next ``attempt``, so the test split never repeats a train
problem, whatever the seeds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Generic, TypeVar, overload

import numpy as np

from .base import DataFiles, TaskDataError
from dapo_env.types import Problem

SPLITS: tuple[str, ...] = ("train", "validation", "test")
_SPLIT_CODE = {name: code for code, name in enumerate(SPLITS)}
_BUCKETS = 10  # hash buckets: 0 -> test, 1 -> validation, 2..9 -> train
MAX_ATTEMPTS = 2000

C = TypeVar("C")
# A generator maps (config, rng) to (question, answer, metadata).
Generator = Callable[[Any, np.random.Generator], tuple[str, Any, Mapping[str, Any]]]


def split_of(question: str) -> str:
    """The split a question belongs to, from a stable hash of its text."""
    bucket = int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big") % _BUCKETS
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def generate_problem(generate: Generator, config: Any, seed: int, split: str, index: int) -> Problem:
    """The problem at ``index`` of ``split``: a pure function of its arguments."""
    code = _SPLIT_CODE[split]
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([seed, code, index, attempt])
        question, answer, metadata = generate(config, rng)
        if split_of(question) == split:
            return Problem(id=f"{split}-{index}", question=question, answer=answer, metadata=metadata)
    raise TaskDataError(
        f"no {split!r} problem found in {MAX_ATTEMPTS} draws: the configured problem space is too small to "
        "split into train/validation/test; widen it (more operands, a larger value range or more operators)"
    )


class ProceduralProblems(Sequence[Problem]):
    """A lazily generated, immutable sequence of ``size`` problems (each built on access)."""

    def __init__(self, generate: Generator, config: Any, *, split: str, seed: int, size: int) -> None:
        self._generate = generate
        self.config = config
        self.split = split
        self.seed = seed
        self._size = size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Problem: ...
    @overload
    def __getitem__(self, index: slice) -> list[Problem]: ...
    def __getitem__(self, index: int | slice) -> Problem | list[Problem]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"problem index must be an int, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(f"problem index {index} out of range for {self._size} problems")
        return generate_problem(self._generate, self.config, self.seed, self.split, index)

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(self._size))

    def __repr__(self) -> str:
        return f"ProceduralProblems(split={self.split!r}, seed={self.seed}, size={self._size}, config={self.config})"


@dataclass(frozen=True)
class ProceduralSource(Generic[C]):
    """A :class:`~dapo_env.tasks.base.ProblemSource` that generates problems from a config dataclass.

    ``load(split, **knobs)`` builds the config from ``default`` with ``knobs`` replaced (any config
    field, including ``size`` and ``seed``), so ``gym.make("Arithmetic-v0", max_value=99)`` works.

    Attributes:
        default: the default config (a frozen dataclass with ``size`` and ``seed`` fields).
        generate: ``generate(config, rng) -> (question, answer, metadata)``, a module-level function.

    Example:
        >>> from dapo_env.tasks.arithmetic import ArithmeticConfig, generate_arithmetic
        >>> source = ProceduralSource(default=ArithmeticConfig(), generate=generate_arithmetic)
        >>> problems = source.load("test", size=5, max_value=99)
        >>> len(problems), problems[0].id
        (5, 'test-0')
    """

    default: C
    generate: Generator

    def config(self, **knobs: Any) -> C:
        """The default config with ``knobs`` replaced; unknown knobs raise listing the valid ones."""
        valid = {f.name for f in fields(self.default)}  # type: ignore[arg-type]
        unknown = sorted(set(knobs) - valid)
        if unknown:
            raise TypeError(
                f"unknown option(s) {unknown} for {type(self.default).__name__}; valid options: {sorted(valid)}"
            )
        return replace(self.default, **knobs)  # type: ignore[type-var]

    def load(self, split: str, data_files: DataFiles | None = None, **knobs: Any) -> ProceduralProblems:
        if data_files is not None:
            raise TaskDataError(
                f"{type(self.default).__name__} tasks are generated procedurally and read no data_files; "
                "drop data_files and pass generator options instead (e.g. size=..., seed=...)",
                cli_message=f"{type(self.default).__name__} tasks are generated procedurally and read no data_files; "
                "drop data_files and set generator options instead (e.g. --set size=N task_kwargs.seed=S)",
            )
        if split not in _SPLIT_CODE:
            raise ValueError(f"unknown split {split!r} for a procedural task; choose one of {list(SPLITS)}")
        config = self.config(**knobs)
        return ProceduralProblems(
            self.generate, config, split=split, seed=config.seed, size=config.size  # type: ignore[attr-defined]
        )


def configured(default: Any, split: str, data_files: DataFiles | None, knobs: Mapping[str, Any], *, what: str,
               hint: str) -> Any:
    """``default`` (a config dataclass) with ``knobs`` applied, after the checks every procedural ``load`` makes:
    no ``data_files`` (``what`` is generated, ``hint`` names the knobs to pass instead), a known split, only
    the config's own fields as knobs.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Knobs:
        ...     n: int = 3
        >>> configured(Knobs(), "train", None, {"n": 5}, what="Games", hint="n=...")
        Knobs(n=5)
    """
    if data_files is not None:
        raise TaskDataError(f"{what} are generated procedurally and read no data_files; drop data_files and pass "
                            f"knobs instead ({hint})", cli_message=f"{what} are generated procedurally and read no "
                            f"data_files; drop data_files and set knobs instead (--set {hint.split(',')[0].strip()})")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for a procedural task; choose one of {list(SPLITS)}")
    valid = sorted(f.name for f in fields(default))
    unknown = sorted(set(knobs) - set(valid))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for {type(default).__name__}; valid options: {valid}")
    return replace(default, **knobs)


def check_size_and_seed(size: int, seed: int) -> None:
    """Validation shared by procedural configs."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be a positive integer (the number of problems len() reports), got {size!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")


def check_list_knobs(min_count: int, max_count: int, min_value: int, max_value: int) -> None:
    """Validation shared by the list tasks (Largest, Sort): lists of 2+ numbers, a non-empty value range."""
    if not isinstance(min_count, int) or min_count < 2:
        raise ValueError(f"min_count must be an integer >= 2, got {min_count!r}")
    if not isinstance(max_count, int) or max_count < min_count:
        raise ValueError(f"max_count must be an integer >= min_count={min_count}, got {max_count!r}")
    if not isinstance(min_value, int) or not isinstance(max_value, int):
        raise ValueError(f"min_value and max_value must be integers, got {min_value!r}, {max_value!r}")
    if max_value < min_value:
        raise ValueError(f"max_value ({max_value}) must be >= min_value ({min_value})")


__all__ = ["SPLITS", "ProceduralProblems", "ProceduralSource", "check_list_knobs", "check_size_and_seed",
           "generate_problem", "split_of"]
