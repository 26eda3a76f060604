"""Rows to problems for spec files: the field map (:class:`SpecConverter`), the answer transforms, the reference
reader the TRL/verl adapters use (:class:`SpecReference`) and the data source (:class:`SpecSource`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import TaskDataError, template_fields
from .loading import DatasetSource, RowError, get_field, get_text
from dapo_env.types import CodeTests, InvalidReference, Problem

ANSWER_TRANSFORMS = ("none", "gsm8k", "boxed", "integer")
_INTEGER_RE = re.compile(r"^-?\d+$")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}\b)")


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



__all__ = ["ANSWER_TRANSFORMS", "SpecConverter", "SpecReference", "SpecSource", "transform_answer"]
