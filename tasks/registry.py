"""The task registry: ``register_task``, ``get_task``, ``list_tasks``.

Registering a task also registers its Gymnasium id. The entry points are strings, so this module
never imports the environment layer (which imports tasks).
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.vector import AutoresetMode
from gymnasium.envs.registration import VectorizeMode

from .base import Task, TaskDataError

ENTRY_POINT = "dapo_env.envs:ReasoningEnv"
VECTOR_ENTRY_POINT = "dapo_env.vector:GroupVectorEnv"
MULTI_TURN_ENTRY_POINT = "dapo_env.multiturn:MultiTurnEnv"
TURNS = ("single-turn", "multi-turn")

_TASKS: dict[str, Task] = {}  # env_id -> Task
_ORIGINS: dict[str, str] = {}  # env_id -> where it came from ("built-in", "spec /abs/x.yaml", "entry point ...")
_BROKEN: dict[str, str] = {}  # env_id -> the one-line error its source gave (raised when the id is used)
_DEFAULT_ORIGIN = ["built-in"]  # becomes "python" once the built-in tasks are registered (mark_builtins)


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


def register_task(task: Task, *, overwrite: bool = False, origin: str | None = None) -> str:
    """Add ``task`` to the registry and register its Gymnasium id; returns the id.

    The Gymnasium spec is ``entry_point="dapo_env.envs:ReasoningEnv"``,
    ``vector_entry_point="dapo_env.vector:GroupVectorEnv"``, ``kwargs={"task": task.env_id}`` (a
    :class:`SpecKwargs`: ``make_vec``'s ``"sync"``/``"async"`` modes default to same-step autoreset), so
    ``gym.make(task.env_id, data_files=..., split=...)`` builds a :class:`ReasoningEnv` for it. A multi-turn
    task (one with an ``interaction``) gets ``entry_point="dapo_env.multiturn:MultiTurnEnv"`` and no vector
    entry point (its batched form, :class:`~dapo_env.episodes.EpisodeGroupEnv`, is not a ``VectorEnv``).
    ``origin`` says where the task came from (``dapo-env tasks`` lists it; default ``"python"``).

    Raises:
        ValueError: when the id is taken (by a task or any Gymnasium env) and ``overwrite`` is False; the
            message names both sources.

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
    origin = origin or _DEFAULT_ORIGIN[0]
    taken = env_id in _TASKS or env_id in _BROKEN or env_id in gymnasium.registry
    if taken and not overwrite:
        raise ValueError(f"{env_id} is defined twice: by {task_origin(env_id)} and by {origin}; rename one or bump "
                         f"its version (version: {task.version + 1}), or pass overwrite=True to replace it")
    if env_id in gymnasium.registry:
        del gymnasium.registry[env_id]  # replace without Gymnasium's "overriding" warning
    _register_id(env_id, multi_turn=task.turns == "multi-turn")
    _BROKEN.pop(env_id, None)
    _TASKS[env_id] = task
    _ORIGINS[env_id] = origin
    return env_id


def _register_id(env_id: str, *, multi_turn: bool) -> None:
    gymnasium.register(
        id=env_id,
        entry_point=MULTI_TURN_ENTRY_POINT if multi_turn else ENTRY_POINT,
        vector_entry_point=None if multi_turn else VECTOR_ENTRY_POINT,
        kwargs=SpecKwargs(task=env_id),
    )


def register_broken(env_id: str, message: str, origin: str) -> None:
    """Keep ``env_id`` as an id whose use raises ``message`` (a spec or plugin that failed to load, or one id
    from two sources): ``gym.make(env_id)`` and ``get_task(env_id)`` raise :class:`TaskDataError` with it, and
    every other id works. Replaces a task registered under the id."""
    _TASKS.pop(env_id, None)
    gymnasium.registry.pop(env_id, None)
    _register_id(env_id, multi_turn=False)
    _BROKEN[env_id] = message
    _ORIGINS[env_id] = origin


def broken_tasks() -> dict[str, str]:
    """The ids whose source failed to load, with the error each raises when used."""
    return dict(_BROKEN)


def task_origin(env_id: str) -> str:
    """Where a registered id came from: ``"built-in"``, ``"spec /path/x.yaml"``, ``"entry point NAME (package
    DIST)"``, ``"python"`` (``register_task`` at run time) or another package's Gymnasium env."""
    if env_id in _ORIGINS:
        return _ORIGINS[env_id]
    if env_id in gymnasium.registry:
        return "the Gymnasium registry (another package's env)"
    raise KeyError(f"unknown task {env_id!r}")


def mark_builtins() -> None:
    """Called once the built-in tasks are registered: later registrations default to origin ``"python"``."""
    _DEFAULT_ORIGIN[0] = "python"


def unregister_task(name_or_env_id: str) -> Task | None:
    """Remove a task (or a broken id) and its Gymnasium id (mainly for tests); returns the removed task (None for
    a broken id)."""
    if name_or_env_id in _BROKEN:
        del _BROKEN[name_or_env_id]
        _ORIGINS.pop(name_or_env_id, None)
        gymnasium.registry.pop(name_or_env_id, None)
        return None
    task = get_task(name_or_env_id)
    del _TASKS[task.env_id]
    _ORIGINS.pop(task.env_id, None)
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
    if name_or_env_id in _BROKEN:
        raise TaskDataError(_BROKEN[name_or_env_id])
    versions = [task for task in _TASKS.values() if task.name == name_or_env_id]
    if versions:
        return max(versions, key=lambda task: task.version)
    raise KeyError(
        f"unknown task {name_or_env_id!r}; registered tasks: {', '.join(list_tasks()) or '(none)'}. "
        "Put its spec file (or folder) on DAPO_ENV_TASK_PATH, pass the spec path as --task, or register it with "
        "dapo_env.tasks.register_task(Task(...))"
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


__all__ = ["ENTRY_POINT", "TURNS", "MULTI_TURN_ENTRY_POINT", "SpecKwargs", "VECTOR_ENTRY_POINT", "broken_tasks",
           "get_task", "list_tasks", "mark_builtins", "register_broken", "register_task", "task_origin",
           "unregister_task"]
