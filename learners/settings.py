"""Typed settings: each field of a config dataclass says its type, range and help once, and the validator,
the command line's flags and ``--set`` all read them from there.

A field's range or choices ride on its type (``Annotated[int, Range(1)]``), its help is the string literal
under it (an attribute docstring) and its section the ``# --- name ---`` comment above it. One validator,
:func:`check_fields`, checks every field's type and range; :func:`coerce` turns a command-line string into
the field's type (a ``str`` field keeps ``off``; a ``bool`` field reads ``on``/``off``).

Example:
    >>> from dataclasses import dataclass
    >>> from typing import Annotated
    >>> @dataclass(frozen=True)
    ... class Knobs:
    ...     steps: Annotated[int, Range(1)] = 3
    ...     mode: str = "off"
    >>> spec = field_specs(Knobs)["steps"]
    >>> (spec.kind, spec.range.describe(True), coerce(spec, "8"), coerce(field_specs(Knobs)["mode"], "off"))
    ('int', 'an integer >= 1', 8, 'off')
    >>> from dapo_env.learners.config import TrainConfig
    >>> field_specs(TrainConfig)["max_steps"].help, field_specs(TrainConfig)["max_steps"].section
    ('training steps, one rollout batch each', 'run')
    >>> check_fields(Knobs(steps=0))
    Traceback (most recent call last):
    ...
    ValueError: Knobs.steps: must be an integer >= 1 (got 0)
"""

from __future__ import annotations

import ast
import difflib
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Annotated, Any, Union

_NONE_WORDS = frozenset({"null", "none", "None", "~"})
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class Range:
    """A number's bounds: ``low <= x`` (``low < x`` when ``low_open``) and likewise ``high``; ``why`` says
    what the bound protects, ``none`` what ``None`` means for an optional field."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""
    none: str = ""

    def holds(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def describe(self, integer: bool) -> str:
        """``"an integer >= 1"``, ``"a number > 0"`` or ``"in (0, 1]"``."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}{')' if self.high_open else ']'}"
        what = "an integer" if integer else "a number"
        if self.low is not None:
            return f"{what} {'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{what} {'<' if self.high_open else '<='} {_num(self.high)}"
        return what


@dataclass(frozen=True)
class OneOf:
    """A name from a registry: ``names()`` lists the valid ones (called late, so registries may import torch);
    ``what`` names the kind (``"a registered aggregation"``) and ``hint`` how to add one."""

    names: Callable[[], Iterable[str]]
    what: str = "one of"
    hint: str = ""

    def choices(self) -> list[str]:
        return list(self.names())


@dataclass(frozen=True)
class FieldSpec:
    """What a config field accepts. ``kind``: ``bool``, ``int``, ``float``, ``str``, ``mapping``, ``tuple``
    or ``any``; ``item``: a tuple's item kind; ``optional``: ``None`` is a value."""

    name: str
    kind: str
    optional: bool
    default: Any
    help: str = ""
    section: str = ""
    range: Range | None = None
    one_of: OneOf | None = None
    item: str = "any"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _kind(tp: Any) -> str:
    origin = typing.get_origin(tp) or tp
    if tp is bool:
        return "bool"
    if tp in (int, float, str):
        return tp.__name__
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return "mapping"
    if origin is tuple:
        return "tuple"
    return "any"


def _spec(name: str, hint: Any, default: Any, help_: str, section: str) -> FieldSpec:
    meta: tuple[Any, ...] = ()
    if typing.get_origin(hint) is Annotated:
        hint, meta = hint.__origin__, hint.__metadata__
    optional = False
    if typing.get_origin(hint) in (Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(members) < len(typing.get_args(hint))
        hint = members[0] if len(members) == 1 else (str if str in members else Any)
    item = "any"
    if typing.get_origin(hint) is tuple:
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        item = _kind(args[0]) if args and all(a == args[0] for a in args) else "any"
    range_ = next((m for m in meta if isinstance(m, Range)), None)
    one_of = next((m for m in meta if isinstance(m, OneOf)), None)
    return FieldSpec(name=name, kind=_kind(hint), optional=optional, default=default, help=help_, section=section,
                     range=range_, one_of=one_of, item=item)


@cache
def field_specs(cls: type) -> dict[str, FieldSpec]:
    """Every field of the dataclass ``cls``, in order, with its type, range, help and section."""
    hints = typing.get_type_hints(cls, include_extras=True)
    docs, sections = _docs(cls)
    out = {}
    for f in fields(cls):
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else None)
        out[f.name] = _spec(f.name, hints[f.name], default, docs.get(f.name, ""), sections.get(f.name, ""))
    return out


def _docs(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """Field -> its attribute docstring, field -> the ``# --- section ---`` comment above it."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):  # no source (frozen app): flags without help
        return {}, {}
    source = textwrap.dedent("".join(lines))
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    section_at = {i + 1: m.group(1).strip() for i, line in enumerate(source.splitlines())
                  if (m := re.match(r"\s*# -+ (.+?) -+\s*$", line))}
    sections: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None]):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above = [n for n in section_at if n < node.lineno]
        sections[node.target.id] = section_at[max(above)] if above else ""
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs, sections


# --- one validator -------------------------------------------------------------------------------------------
def check_fields(obj: Any) -> None:
    """Check every field of the dataclass instance ``obj`` against its type, range and choices; the first
    violation raises ``ValueError("<Class>.<field>: must be ... (got X)")``."""
    cls = type(obj)
    for spec in field_specs(cls).values():
        value = getattr(obj, spec.name)
        problem = field_problem(spec, value)
        if problem:
            raise ValueError(f"{cls.__name__}.{spec.name}: {problem} (got {value!r})")


def field_problem(spec: FieldSpec, value: Any) -> str | None:
    """What is wrong with ``value`` for the field, or ``None``."""
    if value is None:
        return None if spec.optional else f"must be {_expected(spec)}, not None"
    if spec.kind in ("int", "float"):
        integer = spec.kind == "int"
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if not ok or isinstance(value, bool) or (spec.range is not None and not spec.range.holds(value)):
            if spec.kind == "float" and not ok and spec.range is None:
                return "must be a number (write 3.0e-4 rather than 3e-4 in YAML 1.1 files)"
            return f"must be {_expected(spec)}"
    elif spec.kind == "bool" and not isinstance(value, bool):
        return "must be true or false"
    elif spec.kind == "str" and not isinstance(value, str) and not callable(value):
        return f"must be a string{', or None' if spec.optional else ''}"
    if spec.one_of is not None and value not in (choices := spec.one_of.choices()):
        hint = f" ({spec.one_of.hint})" if spec.one_of.hint else ""
        return f"choose {spec.one_of.what} {choices}{hint}"
    return None


def _expected(spec: FieldSpec) -> str:
    if spec.kind in ("int", "float"):
        text = spec.range.describe(spec.kind == "int") if spec.range else (
            "an integer" if spec.kind == "int" else "a number")
        if spec.range and spec.range.describe(True).startswith("in "):
            text = f"a number {text}"
        if spec.optional:
            text += f", or None ({spec.range.none})" if spec.range and spec.range.none else ", or None"
        if spec.range and spec.range.why:
            text += f" ({spec.range.why})"
        return text
    return {"bool": "true or false", "str": "a string", "mapping": "a mapping", "tuple": "a list"}.get(spec.kind,
                                                                                                 "a value")


# --- command-line values ---------------------------------------------------------------------------------------
class SettingError(ValueError):
    """A ``--set`` item or flag value that cannot be read; the message names the item and the fix."""


def coerce(spec: FieldSpec, text: str, *, item: str | None = None) -> Any:
    """The command-line string ``text`` as the field's type. ``item`` names the ``--set`` item in errors.

    A ``str`` field keeps the text (``off`` stays ``"off"``); ``None``/``null`` is ``None`` for an optional
    field; a ``bool`` reads true/false/yes/no/on/off/1/0; a mapping or list is read as YAML (a list also
    as ``a,b``).
    """
    where = item or f"{spec.name}={text}"
    if spec.optional and text.strip() in _NONE_WORDS:
        return None
    if spec.kind == "str":
        return text
    if spec.kind == "bool":
        word = text.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise SettingError(f"--set {where}: {spec.name} is true or false (also on/off, yes/no, 1/0)")
    if spec.kind in ("int", "float"):
        try:
            number = float(text) if spec.kind == "float" else int(text)
        except ValueError:
            raise SettingError(f"--set {where}: {spec.name} takes {_expected(spec)}") from None
        return number
    value = yaml_value(text, item=where)
    if spec.kind == "mapping" and not isinstance(value, Mapping):
        raise SettingError(f"--set {where}: {spec.name} takes a mapping, e.g. --set '{spec.name}={{key: value}}' "
                           f"or one key as --set {spec.name}.key=value")
    if spec.kind == "tuple":
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list):
            value = [value]
        value = tuple(float(v) if spec.item == "float" and isinstance(v, (int, str)) else v for v in value)
    return value


def yaml_value(text: str, *, item: str) -> Any:
    """``text`` read as a YAML value (numbers, booleans, null, lists, mappings; ``3e-4`` as a number); a YAML
    error names the ``--set`` item and the quoting that makes it a plain string."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        key, _, raw = item.partition("=")
        reason = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SettingError(f"--set {item}: the value is not valid YAML ({reason}); to pass it as text, quote it "
                           f"inside the shell's quotes: --set '{key}=\"{raw}\"'") from None
    if isinstance(value, str):  # YAML 1.1 reads "3e-4" as a string; numbers win
        try:
            return float(value)
        except ValueError:
            return value
    return value


def close_matches(key: str, names: Iterable[str]) -> list[str]:
    """The names a mistyped ``key`` may have meant, best first (difflib's, plus names that contain it)."""
    names = sorted(set(names))
    found = difflib.get_close_matches(key, names, n=4, cutoff=0.6)
    if len(key) >= 4:  # a fragment of a name ("rounds" of max_gen_rounds); shorter ones match too much
        found += [n for n in names if (key in n or (len(n) >= 4 and n in key)) and n not in found]
    return found[:5]


__all__ = ["FieldSpec", "OneOf", "Range", "SettingError", "check_fields", "close_matches", "coerce", "field_problem",
           "field_specs", "yaml_value"]
