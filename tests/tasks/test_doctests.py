"""The docstring examples of dapo_env.tasks run (by package name: pytest's --doctest-modules imports the
folder `tasks/` under another module name, which would register every built-in twice)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["base", "registry", "loading", "procedural", "arithmetic", "countdown", "math_tasks", "code_tasks"]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(f"dapo_env.tasks.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0


def test_public_classes_have_examples() -> None:
    from dapo_env.tasks import ArithmeticConfig, CountdownAnswer, CountdownConfig, CountdownVerifier, Task
    from dapo_env.tasks.loading import DatasetSource
    from dapo_env.tasks.procedural import ProceduralSource

    for cls in (Task, DatasetSource, ProceduralSource, ArithmeticConfig, CountdownConfig, CountdownAnswer, CountdownVerifier):
        assert ">>>" in (cls.__doc__ or ""), cls.__name__
