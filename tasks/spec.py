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

import dataclasses
import difflib
import importlib
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import Task, TaskDataError, template_fields
from .loading import DatasetSource, RowError, get_field, get_text
from .registry import list_tasks, register_task, task_origin
from dapo_env.types import CodeTests, InvalidReference, Problem

KINDS = ("math", "code", "custom")
ANSWER_TRANSFORMS = ("none", "gsm8k", "boxed", "integer")
MIXTURE_KEY = "mixture"  # reserved: a mixture spec (dapo_env.tasks.mixture:load_mixture_spec)
SPEC_SUFFIXES = (".yaml", ".yml")
TOP_KEYS = ("name", "version", "description", "kind", "data", "fields", "answer_transform", "converter", "prompt",
            "verifier", "reward", "overlong", "eval", "multi_turn", "fixtures", MIXTURE_KEY)
DATA_KEYS = ("files", "hub", "config", "hub_splits", "split", "dedupe_ids")
FIELD_KEYS = ("question", "answer", "id", "tests", "entry_point", "solution", "setup", "prefix", "metadata")
PROMPT_KEYS = ("template", "system")
VERIFIER_KEYS = ("name", "options")
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
_INTEGER_RE = re.compile(r"^-?\d+$")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}\b)")


class SpecError(TaskDataError):
    """A spec file cannot be used; the one-line message names the file, the field and what was expected."""


def _fail(path: Path | str, where: str, message: str) -> SpecError:
    return SpecError(f"{path}: field {where!r}: {message}")


def _close(word: str, options: Sequence[str]) -> str:
    matches = difflib.get_close_matches(word, list(options), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(m) for m in matches)}? " if matches else ""


def _section(path: Path, data: Mapping[str, Any], key: str, allowed: Sequence[str]) -> dict[str, Any]:
    """``data[key]`` as a mapping whose keys are all in ``allowed`` ({} when absent)."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(path, key, f"expected a mapping with keys {list(allowed)}, got {type(value).__name__}")
    _check_keys(path, value, allowed, prefix=f"{key}.")
    return dict(value)


def _check_keys(path: Path, data: Mapping[str, Any], allowed: Sequence[str], *, prefix: str = "") -> None:
    for key in data:
        if key not in allowed:
            raise _fail(path, f"{prefix}{key}", f"unknown field; {_close(str(key), allowed)}"
                                                f"valid fields: {', '.join(allowed)}")


def _typed(path: Path, where: str, value: Any, kind: type | tuple[type, ...], expected: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None or (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise _fail(path, where, f"expected {expected}, got {value!r}")
    return value


# --- verifiers by name ------------------------------------------------------------------------------------
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


def import_object(target: str, *, base: Path, where: str, path: Path) -> Any:
    """``module:attr`` (``pkg.mod:Class.attr`` works) imported with the spec's folder ``base`` on ``sys.path``
    (appended, so the folder's modules are found in every process that loads the spec)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise _fail(path, where, f"expected 'module:function', got {target!r}")
    folder = str(base)
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise _fail(path, where, f"cannot import module {module_name!r} ({exc}); put {module_name}.py beside the "
                                 "spec or install it") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _fail(path, where, f"module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def build_verifier(value: Any, *, base: Path, path: Path, kind: str) -> Any:
    """The verifier a spec's ``verifier`` field names (``None``: the kind's default)."""
    if value is None:
        if kind == "custom":
            raise _fail(path, "verifier", "a custom task needs a verifier: a registered name "
                                          f"({', '.join(verifier_names())}) or 'module:function'")
        value = kind
    spec = {"name": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping):
        raise _fail(path, "verifier", "expected a name, 'module:function' or {name: ..., options: {...}}")
    _check_keys(path, spec, VERIFIER_KEYS, prefix="verifier.")
    name = _typed(path, "verifier.name", spec.get("name"), str, "a verifier name or 'module:function'")
    options = spec.get("options") or {}
    if not isinstance(options, Mapping):
        raise _fail(path, "verifier.options", f"expected a mapping of options, got {type(options).__name__}")
    options = dict(options)
    if ":" in name:
        obj = import_object(name, base=base, where="verifier.name", path=path)
        if not callable(obj):
            raise _fail(path, "verifier.name", f"{name} is not callable")
        if not options and not isinstance(obj, type):
            from dapo_env.verifiers import as_verifier

            return as_verifier(obj)  # the function itself grades: fn(response, reference)
        factory = obj  # a class, or a factory called with the options
    elif name in _VERIFIERS:
        factory = _VERIFIERS[name]
    else:
        raise _fail(path, "verifier.name", f"unknown verifier {name!r}; {_close(name, verifier_names())}known: "
                                           f"{', '.join(verifier_names())} (or 'module:function'; register more "
                                           "with dapo_env.tasks.spec.register_verifier)")
    try:
        return factory(**options)
    except (TypeError, ValueError) as exc:
        raise _fail(path, "verifier.options", f"{name} rejects {options}: {exc}") from exc


# --- rows to problems -------------------------------------------------------------------------------------
def _answer_text(value: Any, column: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RowError(column, f"expected a string or a number, got {type(value).__name__}")
    if isinstance(value, float):
        text = str(int(value)) if value.is_integer() else repr(value)
    else:
        text = str(value).strip()
    if not text:
        raise RowError(column, "is empty")
    return text


def transform_answer(transform: str, text: str, column: str = "answer") -> str:
    """A reference as a dataset holds it -> the final answer: ``gsm8k`` (the text after the last ``####``,
    thousands commas dropped), ``boxed`` (the last ``\\boxed{}`` of a solution), ``integer`` (``"025"`` ->
    ``"25"``) or ``none``.

    Example:
        >>> transform_answer("gsm8k", "3 + 15 = 18\\n#### 1,018"), transform_answer("boxed", "So $\\\\boxed{7}$.")
        ('1018', '7')
    """
    if transform == "gsm8k":
        if "####" not in text:
            raise RowError(column, f"has no '#### N' line (answer_transform: gsm8k): {text[:60]!r}")
        text = _THOUSANDS_RE.sub("", text.rsplit("####", 1)[1].strip())
    elif transform == "boxed":
        from dapo_env.verifiers.math_extract import extract_answer

        boxed = extract_answer(text, answer_format="boxed")
        if boxed is None:
            raise RowError(column, f"has no \\boxed{{}} answer (answer_transform: boxed): {text[-60:]!r}")
        text = boxed
    elif transform == "integer":
        if not _INTEGER_RE.match(text.strip()):
            raise RowError(column, f"expected an integer (answer_transform: integer), got {text[:40]!r}")
        text = str(int(text))
    if not text.strip():
        raise RowError(column, "is empty once transformed")
    return text.strip()


def _strings(value: Any, column: str) -> list[str]:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise RowError(column, f"expected a list of strings, got {type(value).__name__}")
    return list(value)


@dataclass(frozen=True, kw_only=True)
class SpecConverter:
    """``convert(row, index) -> Problem`` from a spec's field map (picklable, hashable: a loader cache key).

    Attributes:
        kind: ``"math"`` (the answer column, transformed) or ``"code"`` (tests, entry point, setup, prefix ->
            :class:`~dapo_env.types.CodeTests`; the reference solution is kept in the metadata).
        question, answer, id: column names (dotted names reach into nested columns); ``id`` may be None.
        tests, entry_point, solution, setup, prefix: code columns (None: absent).
        metadata: the columns to keep (None: every column not used above).
        transform: an :data:`ANSWER_TRANSFORMS` name, or a function ``fn(value, row) -> answer``.
    """

    kind: str
    question: str
    answer: str | None = None
    id: str | None = None
    tests: str | None = None
    entry_point: str | None = None
    solution: str | None = None
    setup: str | None = None
    prefix: str | None = None
    metadata: tuple[str, ...] | None = None
    transform: str | Callable[[Any, Mapping[str, Any]], Any] = "none"

    def __call__(self, row: Mapping[str, Any], index: int) -> Problem:
        question = get_text(row, self.question)
        answer = self._code(row) if self.kind == "code" else self._math(row)
        problem_id = get_field(row, self.id, required=False) if self.id else None
        used = {c.split(".")[0] for c in (self.question, self.answer, self.id, self.tests) if c}
        keep = [k for k in row if k not in used] if self.metadata is None else list(self.metadata)
        if self.solution and self.solution not in keep:
            keep.append(self.solution)  # validate runs it against the tests
        metadata = {}
        for column in keep:  # a column listed in fields.metadata that a row lacks is that row's error
            listed = self.metadata is not None and column != self.solution
            value = get_field(row, column) if listed else row.get(column, get_field(row, column, required=False))
            metadata[column] = value.tolist() if hasattr(value, "tolist") else value
        return Problem(id=str(index) if problem_id is None else str(problem_id), question=question, answer=answer,
                       metadata=metadata)

    def _math(self, row: Mapping[str, Any]) -> str:
        assert self.answer is not None  # checked when the spec is loaded
        value = get_field(row, self.answer)
        if callable(self.transform):
            try:
                value = self.transform(value, row)
            except (ValueError, TypeError) as exc:
                raise RowError(self.answer, f"answer_transform failed: {exc}") from exc
            return _answer_text(value, self.answer)
        return transform_answer(self.transform, _answer_text(value, self.answer), self.answer)

    def _code(self, row: Mapping[str, Any]) -> CodeTests:
        from dapo_env.verifiers.references import code_tests

        assert self.tests is not None  # checked when the spec is loaded
        value = get_field(row, self.tests)
        try:
            tests = code_tests(value.tolist() if hasattr(value, "tolist") else value)
        except InvalidReference as exc:
            raise RowError(self.tests, str(exc)) from exc
        extra = {}
        for name in ("entry_point", "setup", "prefix"):
            column = getattr(self, name)
            text = get_field(row, column, required=name == "entry_point") if column else None
            if text is not None and not isinstance(text, str):
                raise RowError(column, f"expected a string, got {type(text).__name__}")
            if text is not None:
                extra[name] = text.strip() if name == "entry_point" else text
        if "entry_point" in extra and not extra["entry_point"].isidentifier():
            raise RowError(self.entry_point or "entry_point", f"is not a Python identifier: {extra['entry_point']!r}")
        if self.solution:
            solution = get_field(row, self.solution, required=False)
            if solution is not None and not isinstance(solution, str):
                raise RowError(self.solution, "expected the reference solution as a string, got "
                                              f"{type(solution).__name__}")
        return dataclasses.replace(tests, **extra) if extra else tests


@dataclass(frozen=True)
class SpecReference:
    """A spec task's ``reference_reader``: a reference as a dataset row holds it (through the answer transform,
    or the code columns) or as ``to_hf_dataset`` exports it."""

    convert: Callable[[Mapping[str, Any], int], Problem]
    column: str | None

    def __call__(self, value: Any, row: Mapping[str, Any]) -> Any:
        if self.column is None:  # a custom converter: the exported reference is used as it is
            return value
        source = {**row, self.column: value} if value is not None else dict(row)
        converter = self.convert
        if isinstance(converter, SpecConverter) and converter.kind == "math" and isinstance(converter.transform, str):
            text = _answer_text(source.get(self.column), self.column) if source.get(self.column) is not None else None
            if text is None:
                raise InvalidReference(f"no reference: pass the {self.column!r} column")
            if converter.transform in ("gsm8k", "boxed") and "####" not in text and "\\boxed" not in text:
                return text  # the bare answer we export
            try:
                return transform_answer(converter.transform, text, self.column)
            except RowError as exc:
                raise InvalidReference(f"reference {text[:60]!r}: {exc}") from exc
        if isinstance(converter, SpecConverter) and converter.kind == "code":
            from dapo_env.verifiers.references import code_tests

            try:
                return code_tests(value)  # our exported CodeTests (dict or JSON)
            except InvalidReference:
                pass
        try:
            return converter({**source, converter.question: "-"} if isinstance(converter, SpecConverter) else source,
                             0).answer
        except RowError as exc:
            raise InvalidReference(f"reference: field {exc.field!r}: {exc}") from exc


@dataclass(frozen=True, kw_only=True)
class SpecSource:
    """A :class:`~dapo_env.tasks.base.ProblemSource` reading a spec's files (per split, or one set for every
    split) or its hub id; ``data_files=`` still overrides. The prompt's placeholders are checked against the
    loaded problems, so a placeholder the data lacks is an error naming the spec."""

    dataset: DatasetSource
    files: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (split, paths); split "*" = every split
    spec_path: str = ""
    template: str = "{question}"

    @property
    def hub_id(self) -> str | None:
        return self.dataset.hub_id or None

    @property
    def hub_config(self) -> str | None:
        return self.dataset.hub_config

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Problem]:
        if data_files is None and self.files:
            by_split = dict(self.files)
            if split not in by_split and "*" not in by_split:
                raise TaskDataError(f"{self.spec_path}: field 'data.files': no file for split {split!r}; the spec "
                                    f"has {sorted(by_split)}: add '{split}: PATH' under data.files")
            data_files = list(by_split.get(split, by_split.get("*", ())))
        elif data_files is None and not self.dataset.hub_id:
            raise TaskDataError(f"{self.spec_path}: field 'data': no files and no hub id; add data.files or data.hub")
        try:
            problems = self.dataset.load(split, data_files, **kwargs)
        except TaskDataError as exc:
            if str(exc).startswith(("could not read", "cannot tell the format")):  # not a row: the file itself
                raise TaskDataError(f"{self.spec_path}: field 'data.files': {' '.join(str(exc).split())}") from exc
            raise
        if problems:
            first = problems[0]
            have = {"question", *first.metadata}
            missing = [name for name in template_fields(self.template) if name not in have]
            if missing:
                raise TaskDataError(f"{self.spec_path}: field 'prompt.template': placeholder {{{missing[0]}}} is not "
                                    f"in the data (problem {first.id!r} has {sorted(have)}); use one of those or "
                                    "keep the column under fields.metadata")
        return problems


# --- the spec -----------------------------------------------------------------------------------------------
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
        _check_keys(spec_path, data, TOP_KEYS)
    name = _typed(spec_path, "name", data.get("name"), str, "the task's name, e.g. MyMath (letters, digits, _ . -)")
    version = data.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise _fail(spec_path, "version", f"expected an integer >= 0, got {version!r}")
    if MIXTURE_KEY in data:
        return _mixture(spec_path, data)
    kind = data.get("kind", "math")
    if kind not in KINDS:
        raise _fail(spec_path, "kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    base = spec_path.parent
    convert, answer_column = _converter(spec_path, data, kind, base)
    prompt = _section(spec_path, data, "prompt", PROMPT_KEYS)
    template = prompt.get("template", "{question}")
    _typed(spec_path, "prompt.template", template, str, "a str.format template such as '{question}'")
    try:
        template_fields(template)
    except ValueError as exc:
        raise _fail(spec_path, "prompt.template", str(exc)) from exc
    if isinstance(convert, SpecConverter):
        available = {"question", *(convert.metadata or ())} | ({convert.solution} if convert.solution else set())
        missing = [f for f in template_fields(template) if f not in available]
        if convert.metadata is not None and missing:
            raise _fail(spec_path, "prompt.template", f"placeholder {{{missing[0]}}} is not among the kept fields "
                                                      f"{sorted(available)}: add it to fields.metadata")
    system = prompt.get("system")
    if system is not None:
        _typed(spec_path, "prompt.system", system, str, "the system prompt as a string")
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
        raise _fail(spec_path, "name", str(exc)) from exc
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
        raise _fail(path, MIXTURE_KEY, "mixture specs are not available in this version of dapo-env") from exc
    task = loader(data, path)
    return TaskSpec(path=path, task=task, kind="mixture")


def _converter(path: Path, data: Mapping[str, Any], kind: str, base: Path) -> tuple[Any, str | None]:
    fields_ = _section(path, data, "fields", FIELD_KEYS)
    if data.get("converter") is not None:
        target = _typed(path, "converter", data["converter"], str, "'module:function' taking (row, index)")
        if fields_:
            raise _fail(path, "fields", "a spec with a converter has no field map (the converter reads the rows)")
        convert = import_object(target, base=base, where="converter", path=path)
        if not callable(convert):
            raise _fail(path, "converter", f"{target} is not callable")
        return convert, None
    if kind == "custom":
        raise _fail(path, "converter", "a custom task reads its rows with converter: 'module:function'; or use "
                                       "kind: math / code with a field map")
    for key, value in fields_.items():
        if key != "metadata":
            _typed(path, f"fields.{key}", value, str, "a column name")
    question = fields_.get("question", "question")
    metadata = fields_.get("metadata", "all")
    if metadata == "all":
        keep = None
    elif isinstance(metadata, list) and all(isinstance(m, str) for m in metadata):
        keep = tuple(metadata)
    else:
        raise _fail(path, "fields.metadata", f"expected 'all' or a list of column names, got {metadata!r}")
    transform: Any = data.get("answer_transform", "none")
    if kind == "code":
        if "answer" in fields_:
            raise _fail(path, "fields.answer", "a code task's reference is its tests: name the column in fields.tests")
        if data.get("answer_transform") is not None:
            raise _fail(path, "answer_transform", "applies to math answers; a code task's tests are read as they are")
        tests = fields_.get("tests", "tests")
        return SpecConverter(kind="code", question=question, id=fields_.get("id"), tests=tests,
                             entry_point=fields_.get("entry_point"), solution=fields_.get("solution"),
                             setup=fields_.get("setup"), prefix=fields_.get("prefix"), metadata=keep), tests
    for key in ("tests", "entry_point", "setup", "prefix"):
        if key in fields_:
            raise _fail(path, f"fields.{key}", "is a code field; set kind: code")
    if not isinstance(transform, str):
        raise _fail(path, "answer_transform", f"expected one of {', '.join(ANSWER_TRANSFORMS)} or 'module:function'")
    if ":" in transform:
        transform = import_object(transform, base=base, where="answer_transform", path=path)
    elif transform not in ANSWER_TRANSFORMS:
        raise _fail(path, "answer_transform", f"unknown transform {transform!r}; {_close(transform, ANSWER_TRANSFORMS)}"
                                              f"expected one of {', '.join(ANSWER_TRANSFORMS)} or 'module:function'")
    answer = fields_.get("answer", "answer")
    return SpecConverter(kind="math", question=question, answer=answer, id=fields_.get("id"),
                         solution=fields_.get("solution"), metadata=keep, transform=transform), answer


def _source(path: Path, data: Mapping[str, Any], convert: Any, template: str, env_id: str) -> tuple[SpecSource, str]:
    if "data" not in data:
        raise _fail(path, "data", "missing; add data: {files: rows.jsonl} (or {train: ..., test: ...}) or "
                                  "data: {hub: org/name}")
    section = _section(path, data, "data", DATA_KEYS)
    files = section.get("files")
    hub = section.get("hub")
    if files is None and hub is None:
        raise _fail(path, "data", "expected data.files (local files) or data.hub (a hub dataset id)")
    entries: list[tuple[str, tuple[str, ...]]] = []
    if files is not None:
        grouped = files if isinstance(files, Mapping) else {"*": files}
        for split, paths in grouped.items():
            paths = [paths] if isinstance(paths, str) else paths
            if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
                raise _fail(path, "data.files", "expected a path, a list of paths, or {split: path(s)}")
            resolved = []
            for item in paths:
                full = (path.parent / os.path.expanduser(item)).resolve()
                if not full.is_file():
                    raise _fail(path, "data.files", f"data file {item!r} does not exist (looked for {full}; "
                                                    "relative paths start at the spec's folder)")
                resolved.append(str(full))
            entries.append((str(split), tuple(resolved)))
    if hub is not None:
        _typed(path, "data.hub", hub, str, "a hub dataset id such as org/name")
    hub_splits = section.get("hub_splits") or {}
    if not isinstance(hub_splits, Mapping):
        raise _fail(path, "data.hub_splits", "expected a mapping {our split: the hub's split}")
    default_split = section.get("split") or (entries[0][0] if entries and entries[0][0] != "*" else "train")
    _typed(path, "data.split", default_split, str, "a split name such as train")
    dataset = DatasetSource(env_id=env_id, hub_id=hub or "", convert=convert, hub_config=section.get("config"),
                            hub_splits=dict(hub_splits), dedupe_ids=bool(section.get("dedupe_ids", False)),
                            example_file="path/to/rows.jsonl")
    return SpecSource(dataset=dataset, files=tuple(entries), spec_path=str(path), template=template), default_split


def _interaction(path: Path, data: Mapping[str, Any], base: Path) -> Any:
    section = _section(path, data, "multi_turn", MULTI_TURN_KEYS)
    if not section:
        return None
    options = section.get("options") or {}
    if section.get("interaction"):
        factory = import_object(str(section["interaction"]), base=base, where="multi_turn.interaction", path=path)
        try:
            return factory(**options) if isinstance(factory, type) or options else factory
        except (TypeError, ValueError) as exc:
            raise _fail(path, "multi_turn.options", str(exc)) from exc
    tools = section.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise _fail(path, "multi_turn.tools", "expected a list of 'module:function' tools (or multi_turn.interaction)")
    from dapo_env.tools import Tool, ToolUse, tool

    built = []
    for index, target in enumerate(tools):
        obj = import_object(target, base=base, where=f"multi_turn.tools[{index}]", path=path)
        built.append(obj if isinstance(obj, Tool) else tool(obj))
    try:
        return ToolUse(tools=tuple(built), default_format=section.get("tool_format", "hermes"),
                       max_tool_calls=int(section.get("max_tool_calls", 3)))
    except (TypeError, ValueError) as exc:
        raise _fail(path, "multi_turn", str(exc)) from exc


def _fixtures(path: Path, data: Mapping[str, Any]) -> tuple[Fixture, ...]:
    items = data.get("fixtures") or []
    if not isinstance(items, list):
        raise _fail(path, "fixtures", "expected a list of {response, reward, problem | answer, reason}")
    out = []
    for index, item in enumerate(items):
        where = f"fixtures[{index}]"
        if not isinstance(item, Mapping):
            raise _fail(path, where, "expected a mapping {response, reward, problem | answer, reason}")
        _check_keys(path, item, FIXTURE_KEYS, prefix=f"{where}.")
        response = _typed(path, f"{where}.response", item.get("response"), str, "the response text")
        reward = item.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not 0 <= reward <= 1:
            raise _fail(path, f"{where}.reward", f"expected the verifier's score in [0, 1], got {reward!r}")
        if (item.get("problem") is None) == (item.get("answer") is None):
            raise _fail(path, where, "give exactly one of problem (a problem id of the data) or answer (a reference)")
        reason = item.get("reason")
        if reason is not None:
            _typed(path, f"{where}.reason", reason, str, "the start of the verdict's reason, e.g. no_answer")
        out.append(Fixture(response=response, reward=float(reward),
                           problem=None if item.get("problem") is None else str(item["problem"]),
                           answer=item.get("answer"), reason=reason, split=item.get("split")))
    return tuple(out)


def _train_defaults(path: Path, data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sections = {"reward": REWARD_KEYS, "overlong": OVERLONG_KEYS, "eval": EVAL_KEYS}
    for section, keys in sections.items():
        for key, value in _section(path, data, section, keys).items():
            out[_TRAIN_FIELDS[(section, key)]] = value
    if "reward_high" in out and "reward_low" in out and not out["reward_high"] > out["reward_low"]:
        raise _fail(path, "reward.correct", f"must exceed reward.wrong ({out['reward_low']})")
    return out


__all__ = ["ANSWER_TRANSFORMS", "Fixture", "KINDS", "MIXTURE_KEY", "SPEC_SUFFIXES", "SpecConverter", "SpecError",
           "SpecReference", "SpecSource", "TaskSpec", "build_verifier", "import_object", "load_spec",
           "load_task_spec", "read_spec", "register_spec", "register_verifier", "spec_for", "spec_id",
           "spec_train_defaults", "transform_answer", "verifier_names"]
