"""The code in docs/tasks.md runs (except the data_files illustration, whose paths are placeholders)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo_env.tasks import list_tasks, unregister_task

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"
BLOCKS = re.findall(r"```python\n(.*?)```\n", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
RUNNABLE = [block for block in BLOCKS if "part1.jsonl" not in block]


def test_doc_has_the_expected_examples() -> None:
    assert len(BLOCKS) == 8 and len(RUNNABLE) == 7


@pytest.mark.parametrize("index", range(len(RUNNABLE)))
def test_doc_block_runs(index: int) -> None:
    before = set(list_tasks())
    try:
        exec(compile(RUNNABLE[index], f"docs/tasks.md block {index}", "exec", dont_inherit=True), {"__name__": "docs_example"})
    finally:
        for env_id in set(list_tasks()) - before:
            unregister_task(env_id)
