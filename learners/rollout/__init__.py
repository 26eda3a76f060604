"""Rollouts: what the trainer samples from. Sources own their generation (:mod:`.sources`; the asynchronous source
:mod:`.async_source` with its worker :mod:`.worker`), the thread budget between them (:mod:`.threads`), and the
setup that builds a run's envs and sampler from its config (:mod:`.setup`).

The names of :mod:`.setup` are also reachable here, where they lived before the rooms (imported on first use,
since ``setup`` needs the config and the config needs ``threads``).
"""

from __future__ import annotations

import importlib
from typing import Any

_SETUP_NAMES = ("chat_tokenizer", "check_context", "is_multi_turn", "make_episode_env",
                "make_group_env", "make_sampler", "resolve_task", "shaping_options", "stamp_step", "task_with")


def __getattr__(name: str) -> Any:
    if name in _SETUP_NAMES:
        return getattr(importlib.import_module(f"{__name__}.setup"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_SETUP_NAMES)
