"""Held-out is held out: when a run's training and evaluation splits would read the same rows, split them.

That happens with one local file (``data_files="my.jsonl"`` is read whole for every split), the same file
given for both splits, or a hub dataset whose only split serves both. The run then holds out a fixed,
seeded share of the rows (:func:`held_out_count`: 20 %, at most ``eval_size``, at least 1) as its
evaluation split and trains on the rest; a file of fewer than 2 rows is refused with the fix. The rule, the
sizes and the held-out rows' positions are recorded in the run folder (``heldout.json``) and printed, and
``dapo-env eval`` of the run's checkpoints evaluates the same rows.

Generated (procedural) tasks draw their splits from different seeds and are left alone, as is a dataset
whose evaluation split holds any row the training split does not.

Example:
    >>> held_out_count(7, eval_size=200), held_out_count(1000, eval_size=200), held_out_count(10_000, eval_size=200)
    (1, 200, 200)
    >>> held_out_rows(7, 2, seed=0) == held_out_rows(7, 2, seed=0)
    True
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The run folder's record of a held-out split.
HELDOUT_FILE = "heldout.json"
#: The share of the rows held out, and the seed that picks them (fixed: every run on a file holds out the same
#: rows, so runs of different seeds are compared on one evaluation set).
HELD_OUT_SHARE, SPLIT_SEED = 0.2, 0
RULE = (f"the training and evaluation splits read the same rows, so {HELD_OUT_SHARE:.0%} of them (at most eval_size, "
        f"at least 1) are held out for evaluation, picked with seed {SPLIT_SEED}, and training uses the rest")


def held_out_count(rows: int, *, eval_size: int) -> int:
    """How many of ``rows`` shared rows are held out: 20 %, at most ``eval_size``, at least 1."""
    return max(1, min(eval_size, round(rows * HELD_OUT_SHARE)))


def held_out_rows(rows: int, count: int, *, seed: int = SPLIT_SEED) -> tuple[int, ...]:
    """The positions of the ``count`` held-out rows among ``rows``, in file order (a seeded draw)."""
    return tuple(sorted(int(i) for i in np.random.default_rng(seed).choice(rows, size=count, replace=False)))


@dataclass(frozen=True)
class HeldOutSplit:
    """A :class:`~dapo_env.tasks.base.ProblemSource` over ``base`` whose ``eval_split`` is the rows at
    ``held_out`` (positions in what ``base`` loads for ``train_split``) and whose ``train_split`` is the
    others; any other split is ``base``'s own."""

    base: Any
    train_split: str
    eval_split: str
    held_out: tuple[int, ...]
    rows: int
    source: str

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Any]:
        if split not in (self.train_split, self.eval_split):
            return self.base.load(split, data_files, **kwargs)
        problems = self.base.load(self.train_split, data_files, **kwargs)
        held = set(self.held_out)
        if split == self.eval_split:
            return tuple(problems[i] for i in self.held_out)
        return tuple(p for i, p in enumerate(problems) if i not in held)

    def record(self) -> dict[str, Any]:
        """What ``heldout.json`` holds."""
        return {"rule": RULE, "source": self.source, "rows": self.rows, "held_out": len(self.held_out),
                "train": self.rows - len(self.held_out), "seed": SPLIT_SEED, "train_split": self.train_split,
                "eval_split": self.eval_split, "held_out_rows": list(self.held_out)}

    def describe(self) -> str:
        """One line: ``2 of the 7 rows of data_files my.jsonl held out (seed 0), training on the other 5``."""
        return (f"{len(self.held_out)} of the {self.rows} rows of {self.source} held out (seed {SPLIT_SEED}), "
                f"training on the other {self.rows - len(self.held_out)}")


def split_if_shared(task: Any, *, train_split: str, eval_split: str, task_kwargs: Mapping[str, Any],
                    eval_size: int) -> Any:
    """``task`` with a :class:`HeldOutSplit` source when its two splits would read the same rows (see the
    module docstring), else ``task`` unchanged. Raises ``ValueError`` naming the fix for a single row."""
    if _generated(task.source) or isinstance(task.source, HeldOutSplit):
        return task
    from dapo_env.tasks import TaskDataError

    kwargs = dict(task_kwargs)
    train = task.load(split=train_split, **kwargs)
    source = rows_source(task, train_split, kwargs)
    try:
        evaluation = train if eval_split == train_split else task.load(split=eval_split, **kwargs)
    except TaskDataError:
        if "data_files" in kwargs:
            raise
        evaluation = train  # the hub dataset read the training split but has no evaluation split: one split
        source += f" (it has no {eval_split!r} split)"
    seen = {_key(p) for p in train}
    if not len(evaluation) or not all(_key(p) in seen for p in evaluation):
        return task
    if len(train) < 2:
        raise ValueError(f"{task.env_id}: the {train_split!r} and {eval_split!r} splits read the same {len(train)} "
                         f"row(s) of {source}, too few to hold any out: pass a file per split, --set "
                         "'data_files={train: train.jsonl, test: test.jsonl}'")
    held = held_out_rows(len(train), held_out_count(len(train), eval_size=eval_size))
    split = HeldOutSplit(base=task.source, train_split=train_split, eval_split=eval_split, held_out=held,
                         rows=len(train), source=source)
    return dataclasses.replace(task, source=split)


def _generated(source: Any) -> bool:
    """A procedural source (a generator's config as ``default``), also under episode rules (``base``)."""
    while source is not None:
        if getattr(source, "default", None) is not None:
            return True
        source = getattr(source, "base", None)
    return False


def _key(problem: Any) -> tuple[str, str]:
    return problem.question, str(problem.answer)


def rows_source(task: Any, split: str, task_kwargs: Mapping[str, Any]) -> str:
    """Where a split's rows come from, in words: ``data_files my.jsonl``, ``hub dataset openai/gsm8k`` (with
    the hub's split name where it differs) or ``the generator of Largest-v0``.

    Example:
        >>> from dapo_env.tasks import get_task
        >>> rows_source(get_task("GSM8K-v0"), "test", {"data_files": {"train": "a.jsonl", "test": "b.jsonl"}})
        'data_files b.jsonl'
    """
    files = task_kwargs.get("data_files")
    if files is not None:
        if isinstance(files, Mapping):
            files = files.get(split, files)
        shown = files if isinstance(files, str) else ", ".join(map(str, files)) if isinstance(files, (list, tuple)) \
            else str(files)
        return f"data_files {shown}"
    if _generated(task.source):
        return f"the generator of {task.env_id}"
    hub = task_kwargs.get("hub_id") or getattr(task.source, "hub_id", None)
    if hub:
        hub_split = dict(getattr(task.source, "hub_splits", ()) or ()).get(split, split)
        return f"hub dataset {hub}" + (f" (its split {hub_split!r})" if hub_split != split else "")
    return f"{task.env_id}'s source"


def heldout_of(task: Any) -> HeldOutSplit | None:
    """The held-out split a run's task carries, if any."""
    source = task.source
    return source if isinstance(source, HeldOutSplit) else None


def write_record(run_dir: Path, task: Any) -> str | None:
    """Record the task's held-out split in ``run_dir/heldout.json`` and return the line that announces it
    (``None``, and nothing written, when the task has no such split)."""
    split = heldout_of(task)
    if split is None:
        return None
    (Path(run_dir) / HELDOUT_FILE).write_text(json.dumps(split.record(), indent=2))
    return f"held-out: {split.describe()}; {RULE} (recorded in {HELDOUT_FILE})"


def describe_eval_rows(task: Any, split: str, task_kwargs: Mapping[str, Any]) -> str:
    """Where a run's held-out rows come from, for every printout that says "held-out"."""
    held = heldout_of(task)
    if held is not None and split == held.eval_split:
        return held.describe()
    return f"split {split!r} of {rows_source(task, split, task_kwargs)}"


def describe_run_rows(run_dir: Path, task: Any, split: str, task_kwargs: Mapping[str, Any]) -> str:
    """Where a finished run's held-out rows came from: its ``heldout.json`` when it split them, else the
    split's source (``task``: the registered task)."""
    record = Path(run_dir) / HELDOUT_FILE
    if record.is_file():
        held = json.loads(record.read_text())
        return (f"{held['held_out']} of the {held['rows']} rows of {held['source']} held out (seed {held['seed']}, "
                f"{HELDOUT_FILE})")
    return f"split {split!r} of {rows_source(task, split, task_kwargs)}"


__all__ = ["HELDOUT_FILE", "HELD_OUT_SHARE", "RULE", "SPLIT_SEED", "HeldOutSplit", "describe_eval_rows", "describe_run_rows",
           "held_out_count", "held_out_rows", "heldout_of", "rows_source", "split_if_shared", "write_record"]
