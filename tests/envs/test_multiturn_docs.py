"""The code in docs/environments.md's multi-turn section runs (except the illustration that loads a real
chat model from a placeholder path)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo_env.tasks import list_tasks, unregister_task

DOC = Path(__file__).resolve().parents[2] / "docs" / "environments.md"
SECTION = DOC.read_text(encoding="utf-8").split("## Multi-turn environments", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```\n", SECTION, flags=re.DOTALL)
RUNNABLE = [block for block in BLOCKS if "path/to/a/chat/model" not in block and "EpisodeGroupEnv(task," not in block]


def test_the_section_has_its_examples() -> None:
    assert len(BLOCKS) == 5 and len(RUNNABLE) == 3


@pytest.mark.parametrize("index", range(len(RUNNABLE)))
def test_doc_block_runs(index: int) -> None:
    before = set(list_tasks())
    try:
        exec(compile(RUNNABLE[index], f"docs/environments.md multi-turn block {index}", "exec", dont_inherit=True),
             {"__name__": "docs_example"})
    finally:
        for env_id in set(list_tasks()) - before:
            unregister_task(env_id)
