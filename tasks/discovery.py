"""Find the user's tasks in every process: spec files on ``DAPO_ENV_TASK_PATH`` and installed packages' entry
points (group ``dapo_env.tasks``), registered on ``import dapo_env`` after the built-in tasks.

Discovery is data, not import side effects of the user's script, so ``gym.make("MyMath-v0")`` works in a fresh
interpreter, a spawn worker, ``gymnasium.make_vec(..., vectorization_mode="async")``, a Ray task and the learner's
workers alike.

- ``DAPO_ENV_TASK_PATH``: entries separated by ``os.pathsep`` (``:`` on Linux and macOS), each a folder (its
  ``*.yaml`` / ``*.yml`` files, sorted, not recursive) or one spec file.
- Entry points: ``[project.entry-points."dapo_env.tasks"] my_tasks = "my_pkg:tasks"``; the object is a callable
  returning one or several :class:`~dapo_env.tasks.base.Task` objects and/or spec file paths (``str`` or
  ``Path``).

A source that fails never breaks ``import dapo_env`` for the tasks that work: a broken spec whose id can be read
(``name`` + ``version``) is kept as that id, and using it (``gym.make``, ``get_task``) raises the spec's one-line
error; one id from two sources is kept the same way, with an error naming both (no silent override). Each such
failure also gives one :class:`TaskSourceWarning` on import. ``dapo-env tasks`` lists every id with its origin.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import Task
from .registry import broken_tasks, list_tasks, register_broken, register_task, task_origin

ENV_VAR = "DAPO_ENV_TASK_PATH"
ENTRY_POINT_GROUP = "dapo_env.tasks"
_LOADED: set[Path] = set()  # spec files registered in this process (a file listed twice loads once)


class TaskSourceWarning(UserWarning):
    """A spec file or a plugin on the search path could not be loaded (the other tasks work)."""


def spec_files(search_path: str | None = None) -> list[Path]:
    """The spec files ``DAPO_ENV_TASK_PATH`` (or ``search_path``) names, in order; a missing entry warns."""
    value = os.environ.get(ENV_VAR, "") if search_path is None else search_path
    files: list[Path] = []
    for entry in filter(None, (part.strip() for part in value.split(os.pathsep))):
        path = Path(entry).expanduser()
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            _warn(f"{ENV_VAR} entry {entry!r} is neither a folder nor a spec file; skipped")
    return files


def discover(search_path: str | None = None) -> list[str]:
    """Register the spec files on the search path, then the entry points' tasks; returns the ids registered
    (broken ones included). Run once by ``import dapo_env``."""
    ids = [env_id for path in spec_files(search_path) for env_id in [load_spec_file(path)] if env_id]
    for entry_point in _entry_points():
        ids += _load_entry_point(entry_point)
    return ids


def load_spec_file(path: str | os.PathLike[str], origin: str | None = None) -> str | None:
    """Register one spec file as discovery does (a failure is kept as a broken id and warned about, never
    raised); returns its id, or None when the file does not say one."""
    from .spec import SpecError, register_spec, spec_id

    resolved = Path(path).resolve()
    if resolved in _LOADED:
        return None
    _LOADED.add(resolved)
    origin = origin or f"spec {resolved}"
    try:
        return register_spec(resolved, origin=origin)
    except Exception as exc:  # a spec's own module may raise anything on import: kept as that id's error
        env_id = spec_id(resolved)
        message = " ".join(str(exc).split())
        if not isinstance(exc, SpecError) and "defined twice" not in message:  # a collision names both already
            message = f"{resolved}: {type(exc).__name__}: {message}"
        if env_id is None:
            _warn(f"{message} (spec skipped: it declares no name/version)")
            return None
        _keep_broken(env_id, message, origin)
        return env_id


def _keep_broken(env_id: str, message: str, origin: str) -> None:
    taken = env_id in list_tasks() or env_id in broken_tasks()
    if taken and "defined twice" not in message:
        message = (f"{env_id} is defined twice: by {task_origin(env_id)} and by {origin} (which also fails: "
                   f"{message}); rename one or bump its version")
    if "defined twice" in message and taken:
        origin = f"{task_origin(env_id)} + {origin}"
    register_broken(env_id, message, origin)
    _warn(f"{message} ({env_id} cannot be made; other tasks work)")


def _entry_points() -> Iterable[Any]:
    from importlib.metadata import entry_points

    return entry_points(group=ENTRY_POINT_GROUP)


def _load_entry_point(entry_point: Any) -> list[str]:
    dist = getattr(getattr(entry_point, "dist", None), "name", None)
    origin = f"entry point {entry_point.name} = {entry_point.value}" + (f" (package {dist})" if dist else "")
    try:
        provider = entry_point.load()
        items = provider() if callable(provider) else provider
    except Exception as exc:  # a plugin's own bug: reported, never fatal for the other tasks
        _warn(f"{origin}: failed to load ({type(exc).__name__}: {exc}); its tasks are skipped")
        return []
    if isinstance(items, (Task, str, os.PathLike)):
        items = [items]
    ids: list[str] = []
    for item in items or ():
        if isinstance(item, Task):
            try:
                ids.append(register_task(item, origin=origin))
            except ValueError as exc:
                _keep_broken(item.env_id, " ".join(str(exc).split()), origin)
                ids.append(item.env_id)
        elif isinstance(item, (str, os.PathLike)):
            env_id = load_spec_file(item, origin=f"spec {Path(item).resolve()} ({origin})")
            ids += [env_id] if env_id else []
        else:
            _warn(f"{origin}: returned {type(item).__name__}; expected Task objects or spec file paths")
    return ids


def _warn(message: str) -> None:
    warnings.warn(f"dapo-env: {message}", TaskSourceWarning, stacklevel=3)


__all__ = ["ENTRY_POINT_GROUP", "ENV_VAR", "TaskSourceWarning", "discover", "load_spec_file", "spec_files"]
