"""Verifiers by name for spec files: ``verifier: {name: math, options: {...}}`` builds ``factory(**options)``.

``math``, ``code``, ``countdown`` and ``sort`` are built in; :func:`register_verifier` adds a name (for example in the
entry point of the package that ships a spec); ``module:function`` imports a verifier or a factory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .spec_checks import check_keys, close_matches, fail, import_object, typed

VERIFIER_KEYS = ("name", "options")
_VERIFIERS: dict[str, Callable[..., Any]] = {}


def _math_verifier(**options: Any) -> Any:
    from dapo_env.verifiers import MathVerifier

    return MathVerifier(**options)


def _code_verifier(**options: Any) -> Any:
    from dapo_env.verifiers import CodeVerifier, SandboxLimits

    if isinstance(options.get("limits"), Mapping):
        options["limits"] = SandboxLimits(**options["limits"])
    return CodeVerifier(**options)


def _countdown_verifier(**options: Any) -> Any:
    from .countdown import CountdownVerifier

    return CountdownVerifier(**options)


def _sort_verifier(**options: Any) -> Any:
    from .sort import SortVerifier

    return SortVerifier(**options)


def register_verifier(name: str, factory: Callable[..., Any], *, overwrite: bool = False) -> None:
    """Make ``verifier: {name: NAME, options: {...}}`` in a spec build ``factory(**options)``.

    Register before the spec is loaded, e.g. in the entry-point function of the package that ships the spec
    (``docs/tutorials/share-task.md``), so every process that imports ``dapo_env`` has it.

    Example:
        >>> register_verifier("math", _math_verifier)
        Traceback (most recent call last):
        ...
        ValueError: verifier name 'math' is taken: pick another name or pass overwrite=True
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"verifier name must be a non-empty string without ':', got {name!r}")
    if not callable(factory):
        raise TypeError(f"verifier factory must be callable as factory(**options), got {factory!r}")
    if name in _VERIFIERS and not overwrite:
        raise ValueError(f"verifier name {name!r} is taken: pick another name or pass overwrite=True")
    _VERIFIERS[name] = factory


def verifier_names() -> list[str]:
    """The names a spec's ``verifier.name`` may use (besides ``module:function``)."""
    return sorted(_VERIFIERS)


for _name, _factory in (("math", _math_verifier), ("code", _code_verifier), ("countdown", _countdown_verifier),
                        ("sort", _sort_verifier)):
    register_verifier(_name, _factory)


def build_verifier(value: Any, *, base: Path, path: Path, kind: str) -> Any:
    """The verifier a spec's ``verifier`` field names (``None``: the kind's default)."""
    if value is None:
        if kind == "custom":
            raise fail(path, "verifier", "a custom task needs a verifier: a registered name "
                                          f"({', '.join(verifier_names())}) or 'module:function'")
        value = kind
    spec = {"name": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping):
        raise fail(path, "verifier", "expected a name, 'module:function' or {name: ..., options: {...}}")
    check_keys(path, spec, VERIFIER_KEYS, prefix="verifier.")
    name = typed(path, "verifier.name", spec.get("name"), str, "a verifier name or 'module:function'")
    options = spec.get("options") or {}
    if not isinstance(options, Mapping):
        raise fail(path, "verifier.options", f"expected a mapping of options, got {type(options).__name__}")
    options = dict(options)
    if ":" in name:
        obj = import_object(name, base=base, where="verifier.name", path=path)
        if not callable(obj):
            raise fail(path, "verifier.name", f"{name} is not callable")
        if not options and not isinstance(obj, type):
            from dapo_env.verifiers import as_verifier

            return as_verifier(obj)  # the function itself grades: fn(response, reference)
        factory = obj  # a class, or a factory called with the options
    elif name in _VERIFIERS:
        factory = _VERIFIERS[name]
    else:
        raise fail(path, "verifier.name", f"unknown verifier {name!r}; {close_matches(name, verifier_names())}known: "
                                           f"{', '.join(verifier_names())} (or 'module:function'; register more "
                                           "with dapo_env.tasks.spec.register_verifier)")
    try:
        return factory(**options)
    except (TypeError, ValueError) as exc:
        raise fail(path, "verifier.options", f"{name} rejects {options}: {exc}") from exc



__all__ = ["VERIFIER_KEYS", "build_verifier", "register_verifier", "verifier_names"]
