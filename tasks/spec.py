"""Task spec files: a task declared in YAML, loaded into the same :class:`~dapo_env.tasks.base.Task` a Python
user would write.

A spec names the task (``name`` + ``version`` -> the Gymnasium id), its data (local files of any format the
loaders read, or a hub id), a field map from the data's columns to the problem (question, answer, id, code
tests, entry point, reference solution, metadata), an answer transform for the forms datasets hold
(GSM8K's ``#### N``, a MATH solution's last ``\\boxed{}``), the prompt (template and system prompt), the
verifier by registered name with its options, run defaults (reward map, overlong shaping, eval settings),
multi-turn tools by import path, and fixtures (responses with the reward they must get). Python stays the
escape hatch: ``converter: module:function`` and ``verifier: module:function``. Relative paths in a spec
resolve against the spec file's folder, and so do the modules it imports. The format, field by field, is
``docs/reference/task-spec.md``.

Loading reads no data: a spec is checked field by field (a bad field is one :class:`SpecError` line naming
the file, the field and what was expected), and the data is read on the first ``task.load()``, where a bad
row is reported as ``file: row N: field 'x': ...`` and a prompt placeholder the data lacks is an error.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "rows.jsonl").write_text('{"q": "1+1?", "a": 2}\\n')
    >>> _ = (folder / "tiny.yaml").write_text("name: Tiny\\nkind: math\\ndata: {files: rows.jsonl}\\n"
    ...                                       "fields: {question: q, answer: a}\\n")
    >>> task = load_spec(folder / "tiny.yaml")
    >>> task.env_id, task.load()[0].answer
    ('Tiny-v0', '2')
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import Task, template_fields
from .loading import DatasetSource
from .registry import list_tasks, register_task, task_origin
from .spec_checks import SpecError, check_keys, close_matches, fail, import_object, read_section, typed
from .spec_rows import ANSWER_TRANSFORMS, SpecConverter, SpecReference, SpecSource
from .spec_verifiers import build_verifier, register_verifier, verifier_names

KINDS = ("math", "code", "custom")
MIXTURE_KEY = "mixture"  # reserved: a mixture spec (dapo_env.tasks.mixture:load_mixture_spec)
SPEC_SUFFIXES = (".yaml", ".yml")
TOP_KEYS = ("name", "version", "description", "kind", "data", "fields", "answer_transform", "converter", "prompt",
            "verifier", "reward", "overlong", "eval", "multi_turn", "fixtures", MIXTURE_KEY)
DATA_KEYS = ("files", "hub", "config", "hub_splits", "split", "dedupe_ids")
FIELD_KEYS = ("question", "answer", "id", "tests", "entry_point", "solution", "setup", "prefix", "metadata")
PROMPT_KEYS = ("template", "system")
REWARD_KEYS = ("correct", "wrong")
OVERLONG_KEYS = ("penalty", "cache_length", "factor", "filter", "max_response_tokens")
EVAL_KEYS = ("split", "size", "temperature", "every")
MULTI_TURN_KEYS = ("tools", "interaction", "options", "max_tool_calls", "tool_format")
FIXTURE_KEYS = ("response", "reward", "problem", "answer", "reason", "split")
_TRAIN_FIELDS = {("reward", "correct"): "reward_high", ("reward", "wrong"): "reward_low",
                 ("overlong", "penalty"): "overlong_penalty", ("overlong", "cache_length"): "overlong_cache_length",
                 ("overlong", "factor"): "overlong_penalty_factor", ("overlong", "filter"): "overlong_filter",
                 ("overlong", "max_response_tokens"): "max_response_tokens", ("eval", "split"): "eval_split",
                 ("eval", "size"): "eval_size", ("eval", "temperature"): "eval_temperature",
                 ("eval", "every"): "eval_every"}


@dataclass(frozen=True)
class Fixture:
    """A response and the reward (the verifier's score) it must get, against a problem of the data (``problem``:
    its id) or an explicit reference (``answer``); ``reason``: the verdict's reason must start with it."""

    response: str
    reward: float
    problem: str | None = None
    answer: Any = None
    reason: str | None = None
    split: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    """A loaded spec: the task, where it came from, its fixtures and the run defaults it declares.

    Attributes:
        path: the spec file (absolute).
        task: the :class:`~dapo_env.tasks.base.Task` it builds.
        kind: ``"math"``, ``"code"`` or ``"custom"``.
        fixtures: what ``dapo-env task validate`` checks the verifier with.
        train_defaults: ``TrainConfig`` fields (reward map, overlong, eval) a run of this task starts from.
        solution_column: the metadata key of a code task's reference solution (None: none).
    """

    path: Path
    task: Task
    kind: str
    fixtures: tuple[Fixture, ...] = ()
    train_defaults: Mapping[str, Any] = field(default_factory=dict)
    solution_column: str | None = None


def read_spec(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The spec file's YAML mapping (no other check)."""
    import yaml  # a dependency; imported here so `import dapo_env` without specs never pays for it

    spec_path = Path(path)
    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{spec_path}: cannot read the spec file ({exc.strerror or exc})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{spec_path}:{line}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from exc
    if not isinstance(data, Mapping):
        raise SpecError(f"{spec_path}: a spec is a YAML mapping with at least 'name' and 'data', got "
                        f"{type(data).__name__}")
    return dict(data)


def spec_id(path: str | os.PathLike[str]) -> str | None:
    """The Gymnasium id a spec declares (``name`` + ``version``), read without building the task; None when
    the file does not say (what discovery registers a broken spec under)."""
    try:
        data = read_spec(path)
    except SpecError:
        return None
    name, version = data.get("name"), data.get("version", 0)
    if isinstance(name, str) and isinstance(version, int) and not isinstance(version, bool):
        return f"{name}-v{version}"
    return None


def load_task_spec(path: str | os.PathLike[str]) -> TaskSpec:
    """Read and check a spec file and build its task (no data is read). Raises :class:`SpecError`."""
    spec_path = Path(path).resolve()
    data = read_spec(spec_path)
    if MIXTURE_KEY not in data:  # a mixture spec's loader checks its own keys
        check_keys(spec_path, data, TOP_KEYS)
    name = typed(spec_path, "name", data.get("name"), str, "the task's name, e.g. MyMath (letters, digits, _ . -)")
    version = data.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise fail(spec_path, "version", f"expected an integer >= 0, got {version!r}")
    if MIXTURE_KEY in data:
        return _mixture(spec_path, data)
    kind = data.get("kind", "math")
    if kind not in KINDS:
        raise fail(spec_path, "kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    base = spec_path.parent
    convert, answer_column = _converter(spec_path, data, kind, base)
    prompt = read_section(spec_path, data, "prompt", PROMPT_KEYS)
    template = prompt.get("template", "{question}")
    typed(spec_path, "prompt.template", template, str, "a str.format template such as '{question}'")
    try:
        template_fields(template)
    except ValueError as exc:
        raise fail(spec_path, "prompt.template", str(exc)) from exc
    if isinstance(convert, SpecConverter):
        available = {"question", *(convert.metadata or ())} | ({convert.solution} if convert.solution else set())
        missing = [f for f in template_fields(template) if f not in available]
        if convert.metadata is not None and missing:
            raise fail(spec_path, "prompt.template", f"placeholder {{{missing[0]}}} is not among the kept fields "
                                                      f"{sorted(available)}: add it to fields.metadata")
    system = prompt.get("system")
    if system is not None:
        typed(spec_path, "prompt.system", system, str, "the system prompt as a string")
    source, split = _source(spec_path, data, convert, template, f"{name}-v{version}")
    verifier = build_verifier(data.get("verifier"), base=base, path=spec_path, kind=kind)
    try:
        task = Task(name=name, version=version, source=source, verifier=verifier, prompt_template=template,
                    split=split, description=str(data.get("description") or f"spec {spec_path.name}"),
                    interaction=_interaction(spec_path, data, base),
                    reference_reader=SpecReference(convert, answer_column),
                    reference_columns=(answer_column,) if kind == "code" and answer_column else (),
                    system_prompt=system)
    except (TypeError, ValueError) as exc:
        raise fail(spec_path, "name", str(exc)) from exc
    return TaskSpec(path=spec_path, task=task, kind=kind, fixtures=_fixtures(spec_path, data),
                    train_defaults=_train_defaults(spec_path, data),
                    solution_column=convert.solution if isinstance(convert, SpecConverter) else None)


def load_spec(path: str | os.PathLike[str]) -> Task:
    """The :class:`~dapo_env.tasks.base.Task` a spec file declares (not registered; no data read)."""
    return load_task_spec(path).task


_SPECS: dict[str, TaskSpec] = {}  # env_id -> the spec it was registered from


def register_spec(path: str | os.PathLike[str], *, overwrite: bool = False, origin: str | None = None) -> str:
    """Load a spec and register its task (and Gymnasium id); returns the id. A taken id raises naming both
    sources (``overwrite=True`` replaces it)."""
    spec = load_task_spec(path)
    known = _SPECS.get(spec.task.env_id)
    again = known is not None and known.path == spec.path and spec.task.env_id in list_tasks()
    # the same file again (e.g. on DAPO_ENV_TASK_PATH and registered by a script): reloaded, not a collision
    env_id = register_task(spec.task, overwrite=overwrite or again,
                           origin=origin or (task_origin(spec.task.env_id) if again else f"spec {spec.path}"))
    _SPECS[env_id] = spec
    return env_id


def spec_for(env_id: str) -> TaskSpec | None:
    """The spec a registered id came from (None: not from a spec)."""
    return _SPECS.get(env_id)


def spec_train_defaults(env_id: str) -> dict[str, Any]:
    """The ``TrainConfig`` fields a registered spec task declares (reward map, overlong, eval); {} otherwise."""
    spec = _SPECS.get(env_id)
    return dict(spec.train_defaults) if spec is not None else {}


def _mixture(path: Path, data: dict[str, Any]) -> TaskSpec:
    try:
        module = importlib.import_module("dapo_env.tasks.mixture")
        loader = module.load_mixture_spec
    except (ImportError, AttributeError) as exc:
        raise fail(path, MIXTURE_KEY, "mixture specs are not available in this version of dapo-env") from exc
    task = loader(data, path)
    return TaskSpec(path=path, task=task, kind="mixture")


def _converter(path: Path, data: Mapping[str, Any], kind: str, base: Path) -> tuple[Any, str | None]:
    fields_ = read_section(path, data, "fields", FIELD_KEYS)
    if data.get("converter") is not None:
        target = typed(path, "converter", data["converter"], str, "'module:function' taking (row, index)")
        if fields_:
            raise fail(path, "fields", "a spec with a converter has no field map (the converter reads the rows)")
        convert = import_object(target, base=base, where="converter", path=path)
        if not callable(convert):
            raise fail(path, "converter", f"{target} is not callable")
        return convert, None
    if kind == "custom":
        raise fail(path, "converter", "a custom task reads its rows with converter: 'module:function'; or use "
                                       "kind: math / code with a field map")
    for key, value in fields_.items():
        if key != "metadata":
            typed(path, f"fields.{key}", value, str, "a column name")
    question = fields_.get("question", "question")
    metadata = fields_.get("metadata", "all")
    if metadata == "all":
        keep = None
    elif isinstance(metadata, list) and all(isinstance(m, str) for m in metadata):
        keep = tuple(metadata)
    else:
        raise fail(path, "fields.metadata", f"expected 'all' or a list of column names, got {metadata!r}")
    transform: Any = data.get("answer_transform", "none")
    if kind == "code":
        if "answer" in fields_:
            raise fail(path, "fields.answer", "a code task's reference is its tests: name the column in fields.tests")
        if data.get("answer_transform") is not None:
            raise fail(path, "answer_transform", "applies to math answers; a code task's tests are read as they are")
        tests = fields_.get("tests", "tests")
        return SpecConverter(kind="code", question=question, id=fields_.get("id"), tests=tests,
                             entry_point=fields_.get("entry_point"), solution=fields_.get("solution"),
                             setup=fields_.get("setup"), prefix=fields_.get("prefix"), metadata=keep), tests
    for key in ("tests", "entry_point", "setup", "prefix"):
        if key in fields_:
            raise fail(path, f"fields.{key}", "is a code field; set kind: code")
    if not isinstance(transform, str):
        raise fail(path, "answer_transform", f"expected one of {', '.join(ANSWER_TRANSFORMS)} or 'module:function'")
    if ":" in transform:
        transform = import_object(transform, base=base, where="answer_transform", path=path)
    elif transform not in ANSWER_TRANSFORMS:
        hint = close_matches(transform, ANSWER_TRANSFORMS)
        raise fail(path, "answer_transform", f"unknown transform {transform!r}; {hint}expected one of "
                                             f"{', '.join(ANSWER_TRANSFORMS)} or 'module:function'")
    answer = fields_.get("answer", "answer")
    return SpecConverter(kind="math", question=question, answer=answer, id=fields_.get("id"),
                         solution=fields_.get("solution"), metadata=keep, transform=transform), answer


def _source(path: Path, data: Mapping[str, Any], convert: Any, template: str, env_id: str) -> tuple[SpecSource, str]:
    if "data" not in data:
        raise fail(path, "data", "missing; add data: {files: rows.jsonl} (or {train: ..., test: ...}) or "
                                  "data: {hub: org/name}")
    section = read_section(path, data, "data", DATA_KEYS)
    files = section.get("files")
    hub = section.get("hub")
    if files is None and hub is None:
        raise fail(path, "data", "expected data.files (local files) or data.hub (a hub dataset id)")
    entries: list[tuple[str, tuple[str, ...]]] = []
    if files is not None:
        grouped = files if isinstance(files, Mapping) else {"*": files}
        for split, paths in grouped.items():
            paths = [paths] if isinstance(paths, str) else paths
            if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
                raise fail(path, "data.files", "expected a path, a list of paths, or {split: path(s)}")
            resolved = []
            for item in paths:
                full = (path.parent / os.path.expanduser(item)).resolve()
                if not full.is_file():
                    raise fail(path, "data.files", f"data file {item!r} does not exist (looked for {full}; "
                                                    "relative paths start at the spec's folder)")
                resolved.append(str(full))
            entries.append((str(split), tuple(resolved)))
    if hub is not None:
        typed(path, "data.hub", hub, str, "a hub dataset id such as org/name")
    hub_splits = section.get("hub_splits") or {}
    if not isinstance(hub_splits, Mapping):
        raise fail(path, "data.hub_splits", "expected a mapping {our split: the hub's split}")
    default_split = section.get("split") or (entries[0][0] if entries and entries[0][0] != "*" else "train")
    typed(path, "data.split", default_split, str, "a split name such as train")
    dataset = DatasetSource(env_id=env_id, hub_id=hub or "", convert=convert, hub_config=section.get("config"),
                            hub_splits=dict(hub_splits), dedupe_ids=bool(section.get("dedupe_ids", False)),
                            example_file="path/to/rows.jsonl")
    return SpecSource(dataset=dataset, files=tuple(entries), spec_path=str(path), template=template), default_split


def _interaction(path: Path, data: Mapping[str, Any], base: Path) -> Any:
    section = read_section(path, data, "multi_turn", MULTI_TURN_KEYS)
    if not section:
        return None
    options = section.get("options") or {}
    if section.get("interaction"):
        factory = import_object(str(section["interaction"]), base=base, where="multi_turn.interaction", path=path)
        try:
            return factory(**options) if isinstance(factory, type) or options else factory
        except (TypeError, ValueError) as exc:
            raise fail(path, "multi_turn.options", str(exc)) from exc
    tools = section.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise fail(path, "multi_turn.tools", "expected a list of 'module:function' tools (or multi_turn.interaction)")
    from dapo_env.tools import Tool, ToolUse, tool

    built = []
    for index, target in enumerate(tools):
        obj = import_object(target, base=base, where=f"multi_turn.tools[{index}]", path=path)
        built.append(obj if isinstance(obj, Tool) else tool(obj))
    try:
        return ToolUse(tools=tuple(built), default_format=section.get("tool_format", "hermes"),
                       max_tool_calls=int(section.get("max_tool_calls", 3)))
    except (TypeError, ValueError) as exc:
        raise fail(path, "multi_turn", str(exc)) from exc


def _fixtures(path: Path, data: Mapping[str, Any]) -> tuple[Fixture, ...]:
    items = data.get("fixtures") or []
    if not isinstance(items, list):
        raise fail(path, "fixtures", "expected a list of {response, reward, problem | answer, reason}")
    out = []
    for index, item in enumerate(items):
        where = f"fixtures[{index}]"
        if not isinstance(item, Mapping):
            raise fail(path, where, "expected a mapping {response, reward, problem | answer, reason}")
        check_keys(path, item, FIXTURE_KEYS, prefix=f"{where}.")
        response = typed(path, f"{where}.response", item.get("response"), str, "the response text")
        reward = item.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not 0 <= reward <= 1:
            raise fail(path, f"{where}.reward", f"expected the verifier's score in [0, 1], got {reward!r}")
        if (item.get("problem") is None) == (item.get("answer") is None):
            raise fail(path, where, "give exactly one of problem (a problem id of the data) or answer (a reference)")
        reason = item.get("reason")
        if reason is not None:
            typed(path, f"{where}.reason", reason, str, "the start of the verdict's reason, e.g. no_answer")
        out.append(Fixture(response=response, reward=float(reward),
                           problem=None if item.get("problem") is None else str(item["problem"]),
                           answer=item.get("answer"), reason=reason, split=item.get("split")))
    return tuple(out)


def _train_defaults(path: Path, data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sections = {"reward": REWARD_KEYS, "overlong": OVERLONG_KEYS, "eval": EVAL_KEYS}
    for section, keys in sections.items():
        for key, value in read_section(path, data, section, keys).items():
            out[_TRAIN_FIELDS[(section, key)]] = value
    if "reward_high" in out and "reward_low" in out and not out["reward_high"] > out["reward_low"]:
        raise fail(path, "reward.correct", f"must exceed reward.wrong ({out['reward_low']})")
    return out


__all__ = ["Fixture", "KINDS", "MIXTURE_KEY", "SPEC_SUFFIXES", "SpecError", "TaskSpec", "load_spec", "load_task_spec",
           "read_spec", "register_spec", "register_verifier", "spec_for", "spec_id", "spec_train_defaults",
           "verifier_names"]
