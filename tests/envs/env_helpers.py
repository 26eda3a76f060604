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


# Minimal rows for every built-in data task, in the schema of the real files in ../shared/data.
FIXTURE_ROWS: dict[str, list[dict[str, Any]]] = {
    "MATH500-v0": [
        {"problem": "Simplify $\\frac{6}{8}$.", "answer": "\\frac{3}{4}", "unique_id": "test/a/1.json"},
        {"problem": "What is $2^{10}$?", "answer": "1024", "unique_id": "test/a/2.json"},
    ],
    "AIME24-v0": [{"problem": "Find $x$ if $x+1=26$.", "answer": "025", "id": "2024-I-1"},
                  {"problem": "Find $y$ if $2y=14$.", "answer": "7", "id": "2024-I-2"}],
    "AIME25-v0": [{"problem": "Find $x$ if $x-1=69$.", "answer": "70", "id": "2025-I-1"},
                  {"problem": "Find $z$ if $z/2=8$.", "answer": "16", "id": "2025-I-2"}],
    "GSM8K-v0": [{"problem": "Tom has 3 apples and buys 4. How many?", "answer": "7"},
                 {"problem": "A box holds 1,000 pens; 1 is lost. How many are left?", "answer": "999"}],
    "MBPP-v0": [{"task_id": 11, "prompt": "Write a function add(a, b) returning the sum.",
                 "code": "def add(a, b):\n    return a + b", "test_list": ["assert add(1, 2) == 3"]},
                {"task_id": 12, "prompt": "Write a function neg(a) returning -a.",
                 "code": "def neg(a):\n    return -a", "test_list": ["assert neg(2) == -2"]}],
    "HumanEval-v0": [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n",
                      "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add",
                      "canonical_solution": "    return a + b\n"}],
}

# The real file of each data task in ../shared/data (see its README).
SHARED_FILES: dict[str, str] = {
    "DAPOMath-v0": "dapo_math_17k/dapo_math_17k.jsonl.gz",
    "MATH500-v0": "math_500/math500_test.jsonl",
    "AIME24-v0": "aime_2024/aime_2024.jsonl",
    "AIME25-v0": "aime_2025/aime_2025.jsonl",
    "GSM8K-v0": "gsm8k/gsm8k_test.jsonl",
    "MBPP-v0": "mbpp/mbpp.jsonl",
    "HumanEval-v0": "humaneval/humaneval.jsonl",
}


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


# the multi-turn tasks that load their single-turn twin's data
MULTI_TURN_TWINS = {"MBPPFeedback-v0": "MBPP-v0", "GSM8KTool-v0": "GSM8K-v0", "DAPOMathTool-v0": "DAPOMath-v0"}


#: the program tasks (tasks/program_tasks.py and their feedback twins): procedural, verified with g++/node
PROGRAM_TASKS = ("CppPick-v0", "CppPickFeedback-v0", "JSFunctions-v0", "JSFunctionsFeedback-v0")


def fixture_kwargs(env_id: str, directory: Path) -> dict[str, Any]:
    """``gym.make`` kwargs that give ``env_id`` a small local data file (procedural tasks need none)."""
    env_id = MULTI_TURN_TWINS.get(env_id, env_id)  # a multi-turn task reads its single-turn twin's rows
    if env_id == "DAPOMath-v0":
        return {"data_files": str(write_dapo_jsonl(directory / "dapo.jsonl", n=8))}
    if env_id in FIXTURE_ROWS:
        return {"data_files": str(write_jsonl(directory / f"{env_id}.jsonl", FIXTURE_ROWS[env_id]))}
    if env_id in PROGRAM_TASKS:  # every problem is verified in the sandbox: a few
        return {"size": 4}
    return {"size": 50} if env_id in ("Arithmetic-v0", "Countdown-v0") else {}
