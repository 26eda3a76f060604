"""Small spec files and data for the spec tests: a math task (GSM8K-style answers) and a code task."""

from __future__ import annotations

import json
from pathlib import Path

MATH_ROWS = [
    {"id": "sq", "question": "What is $3^2$?", "solution": "3 * 3 = 9\n#### 9", "level": 1},
    {"id": "sum", "question": "What is 1,000 + 234?", "solution": "1000 + 234\n#### 1,234", "level": 2},
]
CODE_ROWS = [
    {"task_id": "add", "prompt": "Write add(a, b).", "tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
     "entry_point": "add", "solution": "def add(a, b):\n    return a + b"},
]


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def math_spec(folder: Path, name: str = "SpecMath", *, extra: str = "", data: str = "rows.jsonl") -> Path:
    """A math spec beside its data; ``extra`` is appended YAML."""
    if not (folder / data).exists():
        write_rows(folder / data, MATH_ROWS)
    spec = folder / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\nkind: math\ndata: {{files: {data}}}\n"
        "fields: {question: question, answer: solution, id: id}\nanswer_transform: gsm8k\n"
        "prompt: {template: '{question} (level {level})', system: Be brief.}\n"
        "verifier: {name: math, options: {extraction: strict}}\n"
        "reward: {correct: 1.0, wrong: 0.0}\n"
        "fixtures:\n"
        "  - {response: 'So \\boxed{9}.', problem: sq, reward: 1}\n"
        "  - {response: 'So \\boxed{8}.', problem: sq, reward: 0}\n"
        "  - {response: 'No idea.', problem: sq, reward: 0, reason: no_answer}\n" + extra, encoding="utf-8")
    return spec


def code_spec(folder: Path, name: str = "SpecCode", rows: list[dict] | None = None) -> Path:
    write_rows(folder / "code.jsonl", rows or CODE_ROWS)
    spec = folder / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\nkind: code\ndata: {{files: code.jsonl}}\n"
        "fields: {question: prompt, tests: tests, entry_point: entry_point, solution: solution, id: task_id}\n"
        "fixtures:\n  - {response: 'no code here', problem: add, reward: 0, reason: no_code}\n", encoding="utf-8")
    return spec
