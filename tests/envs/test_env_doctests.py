"""The docstring examples of the env-layer modules run (imported by package name, like tests/tasks/test_doctests.py)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["dapo_env.completions", "dapo_env.interop", "dapo_env.spaces"]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0 and result.failed == 0
