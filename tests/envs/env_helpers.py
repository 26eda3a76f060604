"""Helpers for the environment-layer tests: a list-backed source, DAPO-style files, scripted policies."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dapo_env.tasks import Task
from dapo_env.types import Completion, Problem


@dataclass(frozen=True)
class ListSource:
    """A problem source backed by a fixed list (test-only)."""

    problems: tuple[Problem, ...]

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Problem]:
        return self.problems


def toy_problems(n: int) -> tuple[Problem, ...]:
    return tuple(Problem(id=f"toy-{i}", question=f"What is {i} + {i + 1}?", answer=str(2 * i + 1)) for i in range(n))


def write_dapo_jsonl(path: Path, n: int = 40, seed: int = 0) -> Path:
    """A DAPO-Math-style JSONL file (``problem``, ``answer``, ``index``) with integer answers."""
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            a, b = (int(x) for x in rng.integers(1, 1000, size=2))
            row = {"problem": f"Compute ${a} \\times {b}$ — then subtract {i}.", "answer": str(a * b - i), "index": i}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def answer_book(task: Task, problems: Sequence[Problem], transform: Callable[[str], str] | None = None) -> dict[str, str]:
    """Prompt -> reference answer, so a scripted policy can answer right on purpose."""
    transform = transform or (lambda s: s)
    return {transform(task.format_prompt(p)): str(p.answer) for p in problems}


class ScriptedPolicy:
    """Answers right with probability ``p_correct`` (seeded); returns Completions with token counts."""

    def __init__(self, book: dict[str, str], p_correct: float, seed: int = 0, num_tokens: int = 10) -> None:
        self.book, self.p_correct, self.num_tokens = book, p_correct, num_tokens
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def answer(self, prompt: str) -> Completion:
        gold = self.book[prompt]
        right = self.rng.random() < self.p_correct
        text = f"Let me think.\nAnswer: {gold if right else _wrong(gold)}"
        return Completion(text, num_tokens=self.num_tokens)

    def __call__(self, prompts: list[str]) -> list[Completion]:
        self.calls += 1
        return [self.answer(p) for p in prompts]


def _wrong(gold: str) -> str:
    return str(int(gold) + 1) if re.fullmatch(r"-?\d+", gold) else gold + "1"
