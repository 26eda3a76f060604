"""Reference solutions of real benchmarks grade correct against their own gold answers.

The solutions are written by people, not by the verifier's authors: MATH-500 (boxes, often several,
units and prose around them), GSM8K (``#### X`` after calculator annotations) and AIME 2024. Every one
must be correct in both extraction modes; a regression in extraction or grading shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dapo_env.verifiers import MathVerifier
from dapo_env.verifiers.math_symbolic import warm_up

FILES = {  # name -> (file under shared/data, solution field, rows)
    "math500": ("math_500/math500_test.jsonl", "solution", 500),
    "gsm8k": ("gsm8k/gsm8k_test.jsonl", "solution", 1319),
    "aime24": ("aime_2024/aime_2024.jsonl", "solution", 30),
}


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("extraction", ["strict", "lenient"])
def test_reference_solutions_grade_correct(shared_data: Path, name: str, extraction: str) -> None:
    path, field, rows = FILES[name]
    records = [json.loads(line) for line in (shared_data / path).read_text().splitlines() if line.strip()]
    assert len(records) == rows
    warm_up(120.0)
    verifier = MathVerifier(extraction=extraction)
    wrong = [(r["answer"], r[field][-120:]) for r in records if not verifier(r[field], r["answer"]).correct]
    assert not wrong, wrong[:5]
