"""The command line's view of the settings: one flag per :class:`~dapo_env.learners.config.TrainConfig` field,
made from the field's type and docstring, and one ``--set`` grammar for ``train`` and ``eval``.

``--set KEY=VALUE`` takes, in this order:

- a settings field (a ``TrainConfig`` field for ``train``, an ``EvalSettings`` field for ``eval``), its value
  read as the field's type: a string field keeps ``off``; a boolean reads ``on``/``off``; ``None``/``null``
  clears an optional field;
- a dotted path into a mapping field: ``task_kwargs.data_files=F``, ``engine_options.server_url=U``;
- a task knob: ``data_files=F`` or any option of the run's task (``max_value=50``), merged into ``task_kwargs``.

An unknown key is refused with the close matches among all three. Values of mappings and task knobs are
YAML (``data_files={train: a.jsonl, test: b.jsonl}``); a YAML error names the item and the quoting to use.

Example:
    >>> from dapo_env.learners.config import TrainConfig
    >>> got = parse_set(["packing=off", "lr=3e-4", "data_files=my.jsonl", "task_kwargs.hub_config=main"],
    ...                 TrainConfig, task="GSM8K-v0")
    >>> got.fields, got.merges
    ({'packing': 'off', 'lr': 0.0003}, {'task_kwargs': {'data_files': 'my.jsonl', 'hub_config': 'main'}})
    >>> parse_set(["max_value=50", "task_kwargs.seed=2"], TrainConfig, task="Largest-v0").merges
    {'task_kwargs': {'max_value': 50, 'seed': 2}}
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .settings import (
    FieldSpec,
    SettingError,
    close_matches,
    coerce,
    field_specs,
    yaml_value,
)

#: Flags spelled otherwise than ``--<field-name>`` (kept from earlier releases): field -> option strings.
FLAG_NAMES: dict[str, tuple[str, ...]] = {"name": ("--run-name", "--name")}
#: Fields set through another flag of the command (``--preset`` records ``preset_name``).
NOT_FLAGS = frozenset({"preset_name"})
_METAVARS = {"int": "N", "float": "X", "mapping": "YAML", "tuple": "A,B"}
#: Metavars that say more than the type's (cosmetic only).
_NAMED_METAVARS = {"model": "PATH", "verifier": "MODULE:FUNCTION", "out_dir": "DIR", "name": "NAME", "task": "TASK",
                   "device": "DEVICE", "seed": "SEED", "lora_rank": "R", "lora_alpha": "A", "is_cap": "C",
                   "max_staleness": "K", "lora_target_modules": "NAMES"}


def flag_for(name: str) -> tuple[str, ...]:
    """The option strings of a field's flag, e.g. ``("--max-steps",)``."""
    return FLAG_NAMES.get(name, (f"--{name.replace('_', '-')}",))


def add_config_flags(parser: argparse.ArgumentParser, cls: type, *, default_text: Callable[[str], str]) -> None:
    """One flag per field of ``cls`` (except :data:`NOT_FLAGS`), in an argument group per section of the class,
    with the field's docstring as help and ``default_text(name)`` as its default. A flag not given leaves
    no attribute (:func:`given_flags` reads those given); a boolean field gets ``--x`` / ``--no-x``; values are read as the field's type."""
    groups: dict[str, Any] = {}
    for spec in field_specs(cls).values():
        if spec.name in NOT_FLAGS:
            continue
        title = spec.section or "settings"
        if title not in groups:
            groups[title] = parser.add_argument_group(title)
        help_ = spec.help or spec.name.replace("_", " ")
        if "default" not in help_:
            help_ += f" (default: {default_text(spec.name)})"
        # not given: absent from the namespace (SUPPRESS), so a flag may set an optional field to None
        kwargs: dict[str, Any] = {"dest": spec.name, "default": argparse.SUPPRESS, "help": help_.replace("%", "%%")}
        if spec.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _reader(spec)
            kwargs["metavar"] = _metavar(spec)
        groups[title].add_argument(*flag_for(spec.name), **kwargs)


def _metavar(spec: FieldSpec) -> str:
    if spec.name in _NAMED_METAVARS:
        return _NAMED_METAVARS[spec.name]
    if spec.one_of is not None:
        try:
            return "{" + ",".join(spec.one_of.choices()) + "}"
        except ImportError:  # a registry whose module cannot be imported here
            pass
    return _METAVARS.get(spec.kind, "TEXT")


def _reader(spec: FieldSpec) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            return coerce(spec, text, item=f"{spec.name}={text}")
        except SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace("--set ", "", 1)) from None

    read.__name__ = spec.kind  # argparse names the type in its own errors
    return read


def given_flags(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The fields whose flags were given (their values, already of the field's type; ``None`` clears an optional
    field)."""
    return {name: getattr(args, name) for name in field_specs(cls) if name not in NOT_FLAGS and hasattr(args, name)}


# --- --set -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetItems:
    """``--set`` items sorted out: ``fields`` replace settings fields; ``merges`` are merged key by key into a
    mapping field (``task_kwargs`` holds the task knobs)."""

    fields: dict[str, Any] = field(default_factory=dict)
    merges: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply(self, current: Mapping[str, Any]) -> dict[str, Any]:
        """``fields`` plus each merged mapping on top of its value in ``current`` (or in ``fields``)."""
        out = dict(self.fields)
        for name, extra in self.merges.items():
            out[name] = {**dict(out.get(name, current.get(name)) or {}), **extra}
        return out


def parse_set(items: Sequence[str], cls: type, *, task: str | None = None) -> SetItems:
    """Sort ``--set KEY=VALUE`` items into fields of ``cls``, dotted mapping keys and task knobs of ``task``
    (see the module's docstring); each value read as its field's or knob's type."""
    specs = field_specs(cls)
    mappings = [name for name, spec in specs.items() if spec.kind == "mapping"]
    knobs = task_options(task) if task else None
    fields_: dict[str, Any] = {}
    merges: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingError(f"--set {item!r}: use KEY=VALUE, e.g. --set group_size=8 (a task knob: --set "
                               "data_files=my.jsonl)")
        head, dot, rest = key.partition(".")
        if dot:
            if head not in mappings or not rest:
                raise SettingError(f"--set {item}: a dotted key goes into a mapping field: "
                                   f"{', '.join(f'{m}.KEY' for m in mappings)}")
            if head == "task_kwargs" and knobs is not None and rest not in knobs:
                raise SettingError(_unknown(rest, item, cls, {}, knobs, task))
            spec = (knobs or {}).get(rest) if head == "task_kwargs" else None
            merges.setdefault(head, {})[rest] = coerce(spec, text, item=item) if spec else yaml_value(text, item=item)
        elif key in specs and key not in NOT_FLAGS:
            fields_[key] = coerce(specs[key], text, item=item)
        elif "task_kwargs" in mappings and _is_knob(key, knobs, specs):
            spec = (knobs or {}).get(key)
            merges.setdefault("task_kwargs", {})[key] = coerce(spec, text, item=item) if spec else yaml_value(
                text, item=item)
        else:
            raise SettingError(_unknown(key, item, cls, specs, knobs, task))
    return SetItems(fields_, merges)


def _is_knob(key: str, knobs: Mapping[str, FieldSpec | None] | None, specs: Mapping[str, FieldSpec]) -> bool:
    """A task knob: one the task names, or (a task whose options cannot be listed) any key that is not a
    near miss of a settings field."""
    if knobs is not None:
        return key in knobs
    return not close_matches(key, specs)


def _unknown(key: str, item: str, cls: type, specs: Mapping[str, FieldSpec],
             knobs: Mapping[str, FieldSpec | None] | None, task: str | None) -> str:
    names = [n for n in specs if n not in NOT_FLAGS]
    near = close_matches(key, [*names, *(knobs or {})])
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    options = f"an option of {task} ({', '.join(sorted(knobs))})" if knobs is not None else "a task option"
    where = f"neither a field of {cls.__name__} nor {options}" if specs else f"not {options}"
    command = "train" if cls.__name__ == "TrainConfig" else "eval"
    return f"--set {item}: {key!r} is {where}; {hint}`dapo-env {command} --help` lists the fields"


def task_options(task: str) -> dict[str, FieldSpec | None] | None:
    """The knobs the task ``task`` loads with (a knob's :class:`FieldSpec` where its type is known, else
    ``None``), or ``None`` when they cannot be listed (a source whose ``load`` takes any keyword) or the task
    is unknown."""
    from dapo_env.tasks import get_task

    try:
        source = get_task(task).source
    except (KeyError, ValueError):
        return None
    return _source_options(source)


def _source_options(source: Any) -> dict[str, FieldSpec | None] | None:
    options: dict[str, FieldSpec | None] = {}
    for attr in ("default", "rules"):  # a generator's config or an episode's rules: a dataclass of knobs
        knobs = getattr(source, attr, None)
        if dataclasses.is_dataclass(knobs):
            try:
                options.update(field_specs(type(knobs)))
            except (NameError, TypeError):  # annotations that cannot be resolved: names only
                options.update({f.name: None for f in dataclasses.fields(knobs)})
    if hasattr(source, "default"):
        return options  # generated: no data files
    base = getattr(source, "base", None)
    if base is not None:
        inner = _source_options(base)
        return None if inner is None else {**inner, **options}
    parameters = inspect.signature(source.load).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    options.update({p.name: None for p in parameters if p.name != "split"})
    return options


__all__ = ["FLAG_NAMES", "NOT_FLAGS", "SetItems", "add_config_flags", "flag_for", "given_flags", "parse_set",
           "task_options"]
