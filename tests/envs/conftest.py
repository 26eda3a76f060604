"""Fixtures for the environment-layer tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from env_helpers import ListSource, toy_problems, write_dapo_jsonl

from dapo_env.tasks import Task, register_task, unregister_task
from dapo_env.verifiers import MathVerifier


@pytest.fixture(autouse=True)
def fresh_interop_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no interop warning given yet: the adapters warn once per cause per process, so a
    test asserting a warning must not depend on which test ran before it in the same (xdist) worker."""
    from dapo_env.interop import routing

    monkeypatch.setattr(routing, "_warned", set())


@pytest.fixture
def toy_task() -> Any:
    """A 12-problem math task registered as ``EnvToy-v0`` for the test's duration."""
    task = Task(name="EnvToy", source=ListSource(toy_problems(12)), verifier=MathVerifier(),
                prompt_template="Solve: {question}\nEnd with 'Answer: N'.")
    register_task(task, overwrite=True)
    yield task
    unregister_task(task.env_id)


@pytest.fixture
def dapo_file(tmp_path: Path) -> Path:
    """A 40-row DAPO-Math-style JSONL file."""
    return write_dapo_jsonl(tmp_path / "dapo.jsonl")
