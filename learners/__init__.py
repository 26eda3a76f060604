"""The bundled DAPO learner (needs torch and transformers; the environment layer never imports this).

Rooms: :mod:`.engines` (rollout engines, serving, weight sync), :mod:`.rollout` (sources, the asynchronous
worker, the thread budget), :mod:`.algo` (losses, advantages, batch, log-probs, update), :mod:`.models` (the
tiny model, pretrained loading, LoRA) and :mod:`.run` (run folder, checkpoints, eval runs, reverify, report);
the core loop (:mod:`.trainer`, :mod:`.config`, :mod:`.evaluation`, :mod:`.metrics`, :mod:`.collective`,
:mod:`.distributed`, :mod:`.warmstart`) and the command line (:mod:`.cli`, :mod:`.train`) sit here.

The public names are imported on first use, so ``import dapo_env.learners`` costs nothing until one is
needed (and ``import dapo_env`` never imports torch). A module's path from before the rooms
(``dapo_env.learners.hf_engine``) still imports, as the same module object, with a ``DeprecationWarning``
naming its new path.

Example:
    >>> from dapo_env.learners import preset
    >>> preset("tiny").task
    'Largest-v0'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

_LAZY = {
    "train": "trainer", "Trainer": "trainer", "TrainResult": "trainer", "TrainingInterrupted": "trainer",
    "TrainConfig": "config", "preset": "config", "build_config": "config",
    "policy_loss": "algo.losses", "group_advantages": "algo.losses", "register_aggregation": "algo.losses",
    "HFEngine": "engines", "SamplingParams": "engines", "make_engine": "engines", "register_engine": "engines",
    "update_policy": "algo.update", "evaluate": "evaluation",
    "Collective": "collective", "LocalCollective": "collective", "DDPCollective": "collective",
    "FSDPCollective": "collective", "train_distributed": "distributed",
}

#: module path before the rooms (relative to this package) -> its path now.
MOVED_MODULES: dict[str, str] = {
    "engine": "engines", "engine_io": "engines.engine_io", "hf_engine": "engines.hf_engine",
    "turn_cache": "engines.turn_cache", "vllm_engine": "engines.vllm_engine", "openai_engine": "engines.openai_engine",
    "server": "engines.server", "server_sync": "engines.server_sync", "weight_sync": "engines.weight_sync",
    "nccl_sync": "engines.nccl_sync",
    "sources": "rollout.sources", "async_rollout": "rollout.async_source", "rollout_worker": "rollout.worker",
    "threads": "rollout.threads",
    "losses": "algo.losses", "turn_credit": "algo.turn_credit", "update": "algo.update", "batch": "algo.batch",
    "logprobs": "algo.logprobs",
    "eval_run": "run.eval_run", "reverify": "run.reverify", "report": "run.report", "svg_chart": "run.svg_chart",
    "run_folder": "run.run_folder", "checkpoint": "run.checkpoint",
    "tiny": "models.tiny", "pretrained": "models.pretrained", "lora": "models.lora",
}

if TYPE_CHECKING:
    from .algo.losses import group_advantages, policy_loss, register_aggregation
    from .algo.update import update_policy
    from .collective import Collective, DDPCollective, FSDPCollective, LocalCollective
    from .config import TrainConfig, build_config, preset
    from .distributed import train_distributed
    from .engines import HFEngine, SamplingParams, make_engine, register_engine
    from .evaluation import evaluate
    from .trainer import Trainer, TrainingInterrupted, TrainResult, train


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves a module path from before the rooms to the module at its new path (the same object)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix(f"{__name__}.")
        if old == fullname or old not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = f"{__name__}.{MOVED_MODULES[spec.name.removeprefix(f'{__name__}.')]}"
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already imported."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Collective", "DDPCollective", "FSDPCollective", "HFEngine", "LocalCollective", "SamplingParams", "TrainConfig",
    "TrainResult", "Trainer", "TrainingInterrupted", "build_config", "evaluate", "group_advantages", "make_engine",
    "policy_loss", "preset", "register_aggregation", "register_engine", "train", "train_distributed",
    "update_policy",
]
