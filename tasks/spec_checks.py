"""Checks shared by the spec modules: the one-line :class:`SpecError` and the field-by-field readers.

Every message names the spec file, the field and what was expected, e.g. ``x.yaml: field 'data.files': ...``.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .base import TaskDataError


class SpecError(TaskDataError):
    """A spec file cannot be used; the one-line message names the file, the field and what was expected."""


def fail(path: Path | str, where: str, message: str) -> SpecError:
    """The error for field ``where`` of the spec at ``path`` (raise it)."""
    return SpecError(f"{path}: field {where!r}: {message}")


def close_matches(word: str, options: Sequence[str]) -> str:
    """A "did you mean ...? " phrase for the options close to ``word`` (empty when none is)."""
    matches = difflib.get_close_matches(word, list(options), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(m) for m in matches)}? " if matches else ""


def read_section(path: Path, data: Mapping[str, Any], key: str, allowed: Sequence[str]) -> dict[str, Any]:
    """``data[key]`` as a mapping whose keys are all in ``allowed`` ({} when absent)."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(path, key, f"expected a mapping with keys {list(allowed)}, got {type(value).__name__}")
    check_keys(path, value, allowed, prefix=f"{key}.")
    return dict(value)


def check_keys(path: Path, data: Mapping[str, Any], allowed: Sequence[str], *, prefix: str = "") -> None:
    """Every key of ``data`` is in ``allowed``; an unknown one is an error listing the close matches."""
    for key in data:
        if key not in allowed:
            raise fail(path, f"{prefix}{key}", f"unknown field; {close_matches(str(key), allowed)}"
                                                f"valid fields: {', '.join(allowed)}")


def typed(path: Path, where: str, value: Any, kind: type | tuple[type, ...], expected: str) -> Any:
    """``value`` when it is a ``kind`` (a bool only where ``kind`` names it), else an error saying ``expected``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None or (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise fail(path, where, f"expected {expected}, got {value!r}")
    return value



def import_object(target: str, *, base: Path, where: str, path: Path) -> Any:
    """``module:attr`` (``pkg.mod:Class.attr`` works) imported with the spec's folder ``base`` on ``sys.path``
    (appended, so the folder's modules are found in every process that loads the spec)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise fail(path, where, f"expected 'module:function', got {target!r}")
    folder = str(base)
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise fail(path, where, f"cannot import module {module_name!r} ({exc}); put {module_name}.py beside the "
                                 "spec or install it") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise fail(path, where, f"module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


__all__ = ["SpecError", "check_keys", "close_matches", "fail", "import_object", "read_section", "typed"]
