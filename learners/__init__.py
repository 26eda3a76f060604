"""The bundled DAPO learner (needs torch and transformers; the environment layer never imports this).

The public names are imported on first use, so ``import dapo_env.learners`` costs nothing until one is
needed (and ``import dapo_env`` never imports torch).

Example:
    >>> from dapo_env.learners import preset
    >>> preset("tiny").task
    'Largest-v0'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "train": "trainer", "Trainer": "trainer", "TrainResult": "trainer", "TrainingInterrupted": "trainer",
    "TrainConfig": "config", "preset": "config", "build_config": "config",
    "policy_loss": "losses", "group_advantages": "losses", "register_aggregation": "losses",
    "HFEngine": "hf_engine", "SamplingParams": "engine", "make_engine": "engine", "register_engine": "engine",
    "update_policy": "update", "evaluate": "evaluation",
    "Collective": "collective", "LocalCollective": "collective", "DDPCollective": "collective",
    "FSDPCollective": "collective", "train_distributed": "distributed",
}

if TYPE_CHECKING:
    from .collective import Collective, DDPCollective, FSDPCollective, LocalCollective
    from .config import TrainConfig, build_config, preset
    from .distributed import train_distributed
    from .engine import SamplingParams, make_engine, register_engine
    from .hf_engine import HFEngine
    from .evaluation import evaluate
    from .losses import group_advantages, policy_loss, register_aggregation
    from .trainer import Trainer, TrainingInterrupted, TrainResult, train
    from .update import update_policy


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_LAZY)
