"""The task registry: ``register_task``, ``get_task``, ``list_tasks``.

Registering a task also registers its Gymnasium id. The entry points are strings, so this module
never imports the environment layer (which imports tasks).
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.vector import AutoresetMode
from gymnasium.envs.registration import VectorizeMode

from .base import Task

ENTRY_POINT = "dapo_env.envs:ReasoningEnv"
VECTOR_ENTRY_POINT = "dapo_env.vector:GroupVectorEnv"
MULTI_TURN_ENTRY_POINT = "dapo_env.multiturn:MultiTurnEnv"
TURNS = ("single-turn", "multi-turn")

_TASKS: dict[str, Task] = {}  # env_id -> Task


class SpecKwargs(dict):
    """The ``kwargs`` of our Gymnasium specs, with same-step autoreset as the default for the standard
    vector envs.

    Every episode is one step, so Gymnasium's default next-step autoreset would make every other
    ``step`` of ``gym.make_vec(id, vectorization_mode="sync" | "async")`` a reset that throws the
    responses away. A spec's kwargs may carry ``vectorization_mode`` and ``vector_kwargs`` for
    ``make_vec``, which pops them (in that order) from a copy of this mapping; when the mode is
    ``"sync"`` or ``"async"``, this mapping answers the ``vector_kwargs`` pop with
    ``autoreset_mode=AutoresetMode.SAME_STEP`` added to what the caller passed (a caller's own
    ``autoreset_mode`` wins). The ``"vector_entry_point"`` mode (our ``GroupVectorEnv``, same-step
    already) gets nothing added. To ``gym.make`` it is a plain dict.

    Example:
        >>> import gymnasium as gym
        >>> import dapo_env
        >>> env = gym.make_vec("Arithmetic-v0", num_envs=2, vectorization_mode="sync")
        >>> env.metadata["autoreset_mode"]
        <AutoresetMode.SAME_STEP: 'SameStep'>
    """

    def pop(self, key: Any, *default: Any) -> Any:
        value = super().pop(key, *default)
        if key == "vectorization_mode":
            self.__dict__["mode"] = value
        elif key == "vector_kwargs" and _is_standard_vector_mode(self.__dict__.get("mode")):
            value = {"autoreset_mode": AutoresetMode.SAME_STEP, **(value or {})}
        return value


def _is_standard_vector_mode(mode: Any) -> bool:
    try:
        return mode is not None and VectorizeMode(mode) in (VectorizeMode.SYNC, VectorizeMode.ASYNC)
    except ValueError:
        return False


def register_task(task: Task, *, overwrite: bool = False) -> str:
    """Add ``task`` to the registry and register its Gymnasium id; returns the id.

    The Gymnasium spec is ``entry_point="dapo_env.envs:ReasoningEnv"``,
    ``vector_entry_point="dapo_env.vector:GroupVectorEnv"``, ``kwargs={"task": task.env_id}`` (a
    :class:`SpecKwargs`: ``make_vec``'s ``"sync"``/``"async"`` modes default to same-step autoreset), so
    ``gym.make(task.env_id, data_files=..., split=...)`` builds a :class:`ReasoningEnv` for it. A multi-turn
    task (one with an ``interaction``) gets ``entry_point="dapo_env.multiturn:MultiTurnEnv"`` and no vector
    entry point (its batched form, :class:`~dapo_env.episodes.EpisodeGroupEnv`, is not a ``VectorEnv``).

    Raises:
        ValueError: when the id is taken (by a task or any Gymnasium env) and ``overwrite`` is False.

    Example:
        >>> from dapo_env.tasks import Task, get_task, register_task, unregister_task
        >>> base = get_task("Arithmetic-v0")
        >>> register_task(Task(name="MyArithmetic", source=base.source, verifier=base.verifier))
        'MyArithmetic-v0'
        >>> get_task("MyArithmetic").load(size=2)[0].question.startswith("Compute ")
        True
        >>> _ = unregister_task("MyArithmetic-v0")
    """
    if not isinstance(task, Task):
        raise TypeError(f"register_task expects a Task, got {type(task).__name__}")
    env_id = task.env_id
    taken = env_id in _TASKS or env_id in gymnasium.registry
    if taken and not overwrite:
        where = "the task registry" if env_id in _TASKS else "the Gymnasium registry"
        raise ValueError(
            f"{env_id!r} is already in {where}: pass overwrite=True to replace it, or bump the version "
            f"(Task(..., version={task.version + 1}))"
        )
    if env_id in gymnasium.registry:
        del gymnasium.registry[env_id]  # replace without Gymnasium's "overriding" warning
    multi_turn = task.turns == "multi-turn"
    gymnasium.register(
        id=env_id,
        entry_point=MULTI_TURN_ENTRY_POINT if multi_turn else ENTRY_POINT,
        vector_entry_point=None if multi_turn else VECTOR_ENTRY_POINT,
        kwargs=SpecKwargs(task=env_id),
    )
    _TASKS[env_id] = task
    return env_id


def unregister_task(name_or_env_id: str) -> Task:
    """Remove a task and its Gymnasium id (mainly for tests); returns the removed task."""
    task = get_task(name_or_env_id)
    del _TASKS[task.env_id]
    gymnasium.registry.pop(task.env_id, None)
    return task


def get_task(name_or_env_id: str | Task) -> Task:
    """Look a task up by Gymnasium id (``"GSM8K-v0"``) or by name (``"GSM8K"``: its highest version).

    A :class:`Task` passed in is returned unchanged.

    Raises:
        KeyError: for an unknown name; the message lists the registered ids.
    """
    if isinstance(name_or_env_id, Task):
        return name_or_env_id
    if not isinstance(name_or_env_id, str):
        raise TypeError(f"get_task expects a task name or id string, got {type(name_or_env_id).__name__}")
    if name_or_env_id in _TASKS:
        return _TASKS[name_or_env_id]
    versions = [task for task in _TASKS.values() if task.name == name_or_env_id]
    if versions:
        return max(versions, key=lambda task: task.version)
    raise KeyError(
        f"unknown task {name_or_env_id!r}; registered tasks: {', '.join(list_tasks()) or '(none)'}. "
        "Register yours with dapo_env.tasks.register_task(Task(...))"
    )


def list_tasks(turns: str | None = None) -> list[str]:
    """The registered Gymnasium ids, sorted; ``turns="single-turn"`` or ``"multi-turn"`` keeps those
    (``get_task(id).turns`` says which a task is).

    Example:
        >>> "GuessNumber-v0" in list_tasks("multi-turn"), "GuessNumber-v0" in list_tasks("single-turn")
        (True, False)
    """
    if turns is None:
        return sorted(_TASKS)
    if turns not in TURNS:
        raise ValueError(f"turns must be one of {TURNS} or None, got {turns!r}")
    return sorted(env_id for env_id, task in _TASKS.items() if task.turns == turns)


__all__ = ["ENTRY_POINT", "TURNS", "MULTI_TURN_ENTRY_POINT", "SpecKwargs", "VECTOR_ENTRY_POINT", "get_task", "list_tasks",
           "register_task", "unregister_task"]
