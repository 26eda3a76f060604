"""Dataset-backed problem sources: a hub id by default, or local JSONL / JSONL.gz / Parquet files.

`datasets` is imported inside :func:`read_hub` / :func:`read_file` only, so importing the tasks costs
nothing until data is loaded. Rows become :class:`~dapo_env.types.Problem` through a converter; a
malformed row raises :class:`~dapo_env.tasks.base.TaskDataError` naming the file, the row number
(1-based, the line number of a JSONL file) and the field. Loaded problems are cached in memory per
(source, split, files and their modification times, options).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import DataFiles, TaskDataError
from dapo_env.types import Problem

_BUILDERS = (
    (".jsonl.gz", "json"),
    (".json.gz", "json"),
    (".jsonl", "json"),
    (".json", "json"),
    (".parquet", "parquet"),
    (".csv", "csv"),
)
_CACHE_SIZE = 8
_CACHE: OrderedDict[tuple[Any, ...], tuple[Problem, ...]] = OrderedDict()
_BATCH = 4096


class RowError(ValueError):
    """Raised by a row converter: ``field`` is the offending field, the message says what is wrong."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


RowConverter = Callable[[Mapping[str, Any], int], Problem]


def builder_for(path: str | os.PathLike[str]) -> str:
    """The `datasets` builder for a file, from its extension (``json`` for JSONL and ``.jsonl.gz``)."""
    name = str(path).lower()
    for suffix, builder in _BUILDERS:
        if name.endswith(suffix):
            return builder
    raise TaskDataError(
        f"cannot tell the format of {str(path)!r} from its extension: use .jsonl, .jsonl.gz, .json, .parquet or .csv"
    )


def _batches_to_rows(dataset: Any) -> Iterator[dict[str, Any]]:
    for batch in dataset.iter(batch_size=_BATCH):
        columns = list(batch)
        yield from (dict(zip(columns, values)) for values in zip(*(batch[c] for c in columns)))


def read_file(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The rows of one local file, in file order, through the `datasets` builder its extension names (without
    the hub library's progress bars: a local file is not a download)."""
    builder = builder_for(path)
    if not Path(path).is_file():
        raise TaskDataError(f"data file {str(path)!r} does not exist")
    import datasets  # lazy: heavy import

    try:
        with _quiet_progress(datasets):
            dataset = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:  # datasets/pyarrow raise many types; name the file and keep the cause
        raise TaskDataError(f"could not read {str(path)!r} as {builder}: {exc}") from exc
    return _batches_to_rows(dataset)


@contextmanager
def _quiet_progress(datasets: Any) -> Iterator[None]:
    """Switch `datasets`' progress bars off for the block, then back to what they were."""
    utils = datasets.utils.logging
    was_on = utils.is_progress_bar_enabled()
    utils.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            utils.enable_progress_bar()


def _offline() -> bool:
    flags = (os.environ.get(name, "") for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(flag.strip().lower() in {"1", "true", "yes", "on"} for flag in flags)


def read_hub(hub_id: str | None, config: str | None, split: str, *, env_id: str,
             example: str) -> Iterator[dict[str, Any]]:
    """The rows of a hub dataset split; any failure (offline, not cached, no network, no hub dataset at all)
    says how to use a file, in the library's and in the command line's spelling."""
    fix = (f'gym.make("{env_id}", data_files="{example}") or get_task("{env_id}").load(data_files="{example}") '
           "(JSONL, .jsonl.gz, Parquet or CSV)")
    cli_fix = f"--set data_files={example} (JSONL, .jsonl.gz, Parquet or CSV; a {{split: file}} mapping for several)"
    if not hub_id:
        problem = f"{env_id} has no hub dataset: its problems come from local files"
        raise TaskDataError(f"{problem}. Pass them: {fix}.", cli_message=f"{problem}. Pass them: {cli_fix}")
    import datasets  # lazy: heavy import

    try:
        dataset = datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:  # offline mode, connection errors, missing splits: all end the same way
        state = "offline mode is on (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE) and it is not cached" if _offline() else (
            "the hub could not be reached or the dataset/split is unavailable"
        )
        problem = (f"cannot load {env_id} from the Hugging Face hub dataset {hub_id!r}"
                   f"{f' (config {config!r})' if config else ''}, split {split!r}: {state} ({type(exc).__name__}: {exc})")
        raise TaskDataError(f"{problem}. Pass a local copy instead: {fix}.",
                            cli_message=f"{problem}. Pass a local copy instead: {cli_fix}") from exc
    return _batches_to_rows(dataset)


def _files_for_split(data_files: DataFiles, split: str) -> list[str]:
    if isinstance(data_files, Mapping):
        if split not in data_files:
            raise TaskDataError(f"data_files has no entry for split {split!r}; it has {sorted(data_files)}")
        data_files = data_files[split]
    if isinstance(data_files, (str, os.PathLike)):
        return [os.fspath(data_files)]
    files = [os.fspath(f) for f in data_files]
    if not files:
        raise TaskDataError("data_files is empty: pass a path or a list of paths")
    return files


def convert_rows(rows: Iterable[Mapping[str, Any]], convert: RowConverter, *, where: str) -> list[Problem]:
    """Convert rows in order; a :class:`RowError` becomes a TaskDataError naming ``where``, row and field, and
    any other exception of the converter (a ``KeyError`` of a custom one) one naming ``where`` and row."""
    problems = []
    for index, row in enumerate(rows):
        try:
            problems.append(convert(row, index))
        except RowError as exc:
            raise TaskDataError(f"{where}: row {index + 1}: field {exc.field!r}: {exc}") from exc
        except Exception as exc:  # a converter's own bug or assumption: say where, keep the cause
            detail = f"missing key {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc)
            columns = sorted(k for k, v in row.items() if v is not None) if isinstance(row, Mapping) else []
            raise TaskDataError(f"{where}: row {index + 1}: the converter raised {type(exc).__name__}: {detail} "
                                f"(the row has fields {columns})") from exc
    return problems


@dataclass(frozen=True, kw_only=True)
class DatasetSource:
    """A :class:`~dapo_env.tasks.base.ProblemSource` backed by `datasets`.

    ``load(split)`` reads the hub dataset ``hub_id`` (config ``hub_config``, split ``hub_splits.get(split,
    split)``); ``load(split, data_files=PATH)`` reads local files instead (a path, a list of paths, or a
    ``{split: path}`` mapping). Options: ``hub_id=`` / ``hub_config=`` override the hub location. A task
    with local files only leaves ``hub_id`` out: ``load`` without ``data_files`` then says to pass them.

    Attributes:
        env_id: the task's Gymnasium id, for error messages.
        hub_id: the default hub dataset (``None``: the task reads local files only).
        convert: ``convert(row, index) -> Problem``; raises :class:`RowError` on a malformed row.
        hub_config: the hub dataset's configuration name, if it has several.
        hub_splits: our split name -> the hub's split name, where they differ.
        dedupe_ids: keep only the first row of each problem id (DAPO-Math-17k on the hub repeats each
            prompt about 100 times).
        example_file: the file name shown in the "pass a local file" hint.

    Example:
        >>> from dapo_env.tasks.math_tasks import convert_math_row
        >>> source = DatasetSource(env_id="MyMath-v0", hub_id="me/my-math", convert=convert_math_row)
        >>> source.hub_id
        'me/my-math'
    """

    env_id: str
    convert: RowConverter
    hub_id: str | None = None
    hub_config: str | None = None
    hub_splits: tuple[tuple[str, str], ...] | Mapping[str, str] = field(default=())  # stored as a tuple
    dedupe_ids: bool = False
    example_file: str = "path/to/file.jsonl"

    def __post_init__(self) -> None:
        if isinstance(self.hub_splits, Mapping):
            object.__setattr__(self, "hub_splits", tuple(self.hub_splits.items()))

    def load(
        self,
        split: str,
        data_files: DataFiles | None = None,
        *,
        hub_id: str | None = None,
        hub_config: str | None = None,
    ) -> tuple[Problem, ...]:
        hub_id = hub_id or self.hub_id
        hub_config = hub_config or self.hub_config
        if data_files is not None:
            files = _files_for_split(data_files, split)
            stamps = tuple((f, *_stamp(f)) for f in files)
            key: tuple[Any, ...] = (self, "files", stamps)
        else:
            files = []
            key = (self, "hub", hub_id, hub_config, split)
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        if files:
            problems = [p for f in files for p in convert_rows(read_file(f), self.convert, where=f)]
        else:
            hub_split = dict(self.hub_splits).get(split, split)
            rows = read_hub(hub_id, hub_config, hub_split, env_id=self.env_id, example=self.example_file)
            problems = convert_rows(rows, self.convert, where=f"hub dataset {hub_id!r} split {hub_split!r}")
        if self.dedupe_ids:
            seen: set[str] = set()
            problems = [p for p in problems if not (p.id in seen or seen.add(p.id))]
        result = tuple(problems)
        _CACHE[key] = result
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return result


def _stamp(path: str) -> tuple[int, int]:
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise TaskDataError(f"data file {path!r} does not exist or cannot be read: {exc}") from exc
    return stat.st_mtime_ns, stat.st_size


def clear_cache() -> None:
    """Forget every loaded dataset (the next ``load`` reads the files again)."""
    _CACHE.clear()


# --- row helpers for converters -------------------------------------------------------------------


def get_field(row: Mapping[str, Any], *names: str, required: bool = True) -> Any:
    """The first of ``names`` present (and not None) in ``row``; dotted names reach into nested dicts."""
    for name in names:
        value: Any = row
        for part in name.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None:
            return value
    if required:
        shown = names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"
        present = sorted(key for key, value in row.items() if value is not None)
        raise RowError(names[0], f"missing field {shown}; the row has fields {present}")
    return None


def get_text(row: Mapping[str, Any], *names: str, required: bool = True) -> str | None:
    """Like :func:`get_field` but the value must be a non-empty string (a chat message list gives the
    content of its last user message)."""
    value = get_field(row, *names, required=required)
    if value is None:
        return None
    if isinstance(value, Sequence) and not isinstance(value, str):
        user = [m.get("content") for m in value if isinstance(m, Mapping) and m.get("role", "user") == "user"]
        value = user[-1] if user else None
    if not isinstance(value, str):
        raise RowError(names[0], f"expected a string, got {type(value).__name__}")
    if required and not value.strip():
        raise RowError(names[0], "is empty")
    return value


def get_answer_text(row: Mapping[str, Any], *names: str) -> str:
    """A reference answer as a stripped string; integers are accepted and written in decimal."""
    value = get_field(row, *names)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RowError(names[0], f"expected a string or an integer answer, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise RowError(names[0], "is empty")
    return text


def row_id(row: Mapping[str, Any], index: int, *names: str) -> str:
    """The row's id from the first present field of ``names``, else its 0-based position."""
    value = get_field(row, *names, required=False) if names else None
    return str(index) if value is None else str(value)


def metadata_of(row: Mapping[str, Any], consumed: Iterable[str]) -> dict[str, Any]:
    """The row's remaining fields, for the prompt template and ``Problem.metadata``."""
    skip = set(consumed)
    return {key: value for key, value in row.items() if key not in skip}


__all__ = [
    "DatasetSource",
    "RowConverter",
    "RowError",
    "builder_for",
    "clear_cache",
    "convert_rows",
    "get_answer_text",
    "get_field",
    "get_text",
    "metadata_of",
    "read_file",
    "read_hub",
    "row_id",
]
