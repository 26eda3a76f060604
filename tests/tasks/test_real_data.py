"""Each real loader on the matching file in ../shared/data (row counts and fields from its README)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo_env.tasks import get_task

MATH_FILES = [
    # env_id, file, rows, first id, first answer
    ("DAPOMath-v0", "dapo_math_17k/dapo_math_17k.jsonl.gz", 17_917, "0", "34"),
    ("AIME24-v0", "aime_2024/aime_2024.jsonl", 30, "2024-I-1", "204"),
    ("AIME25-v0", "aime_2025/aime_2025.jsonl", 30, "2025-I-1", "70"),
    ("MATH500-v0", "math_500/math500_test.jsonl", 500, "test/precalculus/807.json", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("GSM8K-v0", "gsm8k/gsm8k_test.jsonl", 1_319, "0", "18"),
    ("GSM8K-v0", "gsm8k/gsm8k_train.jsonl", 7_473, "0", "72"),
]


@pytest.mark.parametrize(("env_id", "file", "rows", "first_id", "first_answer"), MATH_FILES)
def test_math_loaders_on_shared_data(
    shared_data: Path, env_id: str, file: str, rows: int, first_id: str, first_answer: str
) -> None:
    task = get_task(env_id)
    problems = task.load(data_files=str(shared_data / file))
    assert len(problems) == rows
    first = problems[0]
    assert (first.id, first.answer) == (first_id, first_answer)
    assert first.question.strip() and "{question}" not in task.format_prompt(first)
    assert len({p.id for p in problems}) == rows  # ids are unique within the file
    for problem in problems[:3]:
        assert task.verifier(f"Work.\nAnswer: {problem.answer}", problem.answer).correct


def test_dapo_rows_match_the_readme(shared_data: Path) -> None:
    problems = get_task("DAPOMath-v0").load(data_files=str(shared_data / "dapo_math_17k/dapo_math_17k.jsonl.gz"))
    assert all(re.fullmatch(r"-?\d+", p.answer) for p in problems)
    assert [p.id for p in problems[:3]] == ["0", "1", "2"] and problems[-1].id == "17916"
    assert sum(p.metadata["lang"] == "zh" for p in problems) == 3_432
    assert not any(p.question.startswith("Solve the following math problem") for p in problems[:100])
    prompt = get_task("DAPOMath-v0").format_prompt(problems[0])
    assert prompt.startswith("Solve the following math problem step by step.")
    assert prompt.endswith('Remember to put your answer on its own line after "Answer:".')


def test_aime_and_gsm8k_details(shared_data: Path) -> None:
    aime24 = get_task("AIME24-v0").load(data_files=str(shared_data / "aime_2024/aime_2024.jsonl"))
    assert aime24[-1].id == "2024-II-15" and all(p.answer.isdigit() and not p.answer.startswith("0") for p in aime24)
    assert aime24[0].metadata["contest"] == "AIME 2024 I"
    gsm = get_task("GSM8K-v0").load(data_files=str(shared_data / "gsm8k/gsm8k_test.jsonl"))
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", p.answer) for p in gsm)
    assert "####" in gsm[0].metadata["solution"]
    math500 = get_task("MATH500-v0").load(data_files=str(shared_data / "math_500/math500_test.jsonl"))
    assert {p.metadata["level"] for p in math500} == {1, 2, 3, 4, 5}
