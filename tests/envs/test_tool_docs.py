"""The code in docs/environments.md's "Tool calls" section runs (a new tool task: a function and a registration)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo_env.tasks import list_tasks, unregister_task

DOC = Path(__file__).resolve().parents[2] / "docs" / "environments.md"
SECTION = DOC.read_text(encoding="utf-8").split("## Tool calls", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```\n", SECTION, flags=re.DOTALL)


def test_the_section_has_its_example() -> None:
    assert len(BLOCKS) == 1 and "register_task" in BLOCKS[0]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(index: int) -> None:
    before = set(list_tasks())
    try:
        exec(compile(BLOCKS[index], f"docs/environments.md tool block {index}", "exec", dont_inherit=True),
             {"__name__": "docs_example"})
        assert set(list_tasks()) - before == {"ToolArithmetic-v0"}
    finally:
        for env_id in set(list_tasks()) - before:
            unregister_task(env_id)
