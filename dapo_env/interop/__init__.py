"""Tasks as datasets and verifiers as reward functions for other RL libraries: TRL and verl.

Neither library is imported: both contracts are plain callables and ``datasets`` rows. One module per
client, re-exported here:

* :mod:`dapo_env.interop.datasets`: :func:`to_hf_dataset`, a task's problems as rows both libraries read.
* :mod:`dapo_env.interop.trl`: :func:`trl_reward_function`, a picklable TRL reward function.
* :mod:`dapo_env.interop.trl_environment`: :func:`trl_environment_factory`, a multi-turn task as TRL's
  ``environment_factory``.
* :mod:`dapo_env.interop.verl`: :func:`verl_compute_score` (alias :data:`compute_score`), verl's
  ``custom_reward_function`` (``path=pkg://dapo_env.interop``, ``name=compute_score``).
* :mod:`dapo_env.interop.routing`: which task grades a row (``data_source`` names, task ids,
  ``extra_info["task"]``), shared by the TRL and verl functions.

Every import below is absolute, so when verl runs this file by path as a module copy under a made-up
name, the copy hands out the installed modules' objects (one routing table; everything pickles by
reference).
"""

from __future__ import annotations

from dapo_env.interop.datasets import reference_to_str, to_hf_dataset
from dapo_env.interop.routing import (
    VERL_DATA_SOURCES,
    InteropWarning,
    apps_tests,
    register_data_source,
    route,
    task_for_data_source,
)
from dapo_env.interop.trl import MissingReferenceColumn, TaskReward, completion_text, trl_reward_function
from dapo_env.interop.trl_environment import (
    EpisodeReward,
    ToolSpec,
    TRLEnvironment,
    TRLEnvironmentFactory,
    trl_environment_factory,
)
from dapo_env.interop.verl import VerlScore, compute_score, verl_compute_score

__all__ = [
    "EpisodeReward",
    "InteropWarning",
    "MissingReferenceColumn",
    "TRLEnvironment",
    "TRLEnvironmentFactory",
    "TaskReward",
    "ToolSpec",
    "VERL_DATA_SOURCES",
    "VerlScore",
    "apps_tests",
    "completion_text",
    "compute_score",
    "reference_to_str",
    "register_data_source",
    "route",
    "task_for_data_source",
    "to_hf_dataset",
    "trl_environment_factory",
    "trl_reward_function",
    "verl_compute_score",
]
