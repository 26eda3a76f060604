"""The files of a run folder that the report reads, and the per-sample eval record format.

A run folder (``runs/<name>/``, written by the trainer and by evaluation) holds:

- ``config.json``: the run's ``TrainConfig`` as a JSON object (optional for the report);
- ``metrics.jsonl``: one JSON object per step (``learners/metrics.py``; a torn last line is skipped);
- ``warmstart.json``: the warm start's statistics (optional);
- ``eval/step_<N>.jsonl``: one :class:`EvalSample` per line, the held-out samples of the checkpoint
  after ``N`` optimizer-loop steps (``N`` zero-padded to 6 digits when written, any digits when read);
- ``eval/step_<N>.summary.json``: an evaluation's summary (``{"metrics": {"pass@1": 0.61, "maj@8":
  {"value": 0.7, "ci95": [0.64, 0.76]}, ...}, ...}``; every other top-level key is shown as a caption).

Readers are lenient where a live writer can leave a partial file (a torn last line) and strict elsewhere:
a malformed record raises :class:`RunFolderError` naming the file, the line and the fix.

Example:
    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp())
    >>> s = EvalSample(problem_id="7", prompt="Largest of 3 7 2?", completion="Answer: 7", extracted="7",
    ...                correct=True, reason="equal:numeric", tokens=9, finish_reason="stop")
    >>> write_eval_samples(eval_samples_path(run, 30), [s]).name
    'step_000030.jsonl'
    >>> (read_eval_samples(run / "eval" / "step_000030.jsonl")[0] == s, list(find_eval_files(run)))
    (True, [30])
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..metrics import read_metrics

SAMPLES_SUFFIX, SUMMARY_SUFFIX = ".jsonl", ".summary.json"


#: Fields of an eval sample record that a writer may leave out.
OPTIONAL_FIELDS = ("sample", "answer")


class RunFolderError(ValueError):
    """A run folder, or one of its files, that the report cannot read; the message names the fix."""


@dataclass(frozen=True, kw_only=True)
class EvalSample:
    """One evaluated sample: a line of ``eval/step_<N>.jsonl`` (``dapo-env eval --n K`` writes the same).

    Attributes:
        problem_id: the problem's id within its task.
        prompt: the text the model was given (after any chat template).
        completion: the model's response, untrusted text.
        extracted: the answer the verifier extracted, ``None`` if none.
        correct: the verdict that counts for accuracy (a truncated response counts as wrong).
        reason: the verifier's reason (``"equal:numeric"``, ``"no_answer"``, ...).
        tokens: response length in tokens.
        finish_reason: ``"stop"`` or ``"length"`` (cut at the token limit).
        sample: index of this sample among the problem's samples (0 for greedy; 0..K-1 with ``--n K``).
        answer: the reference answer as text, when it is short enough to show (math tasks); optional.
    """

    problem_id: str
    prompt: str
    completion: str
    extracted: str | None
    correct: bool
    reason: str
    tokens: int
    finish_reason: str
    sample: int = 0
    answer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.correct, bool):
            raise TypeError(f"EvalSample.correct must be true or false, got {self.correct!r}")
        if self.finish_reason not in ("stop", "length"):
            raise ValueError(f"EvalSample.finish_reason must be 'stop' or 'length', got {self.finish_reason!r}")

    @classmethod
    def from_json(cls, obj: Any) -> EvalSample:
        """A sample from a decoded JSON line; unknown keys are ignored (newer writers may add some)."""
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in obj and n not in OPTIONAL_FIELDS]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        kw = {n: obj[n] for n in names if n in obj}
        kw["problem_id"] = str(kw["problem_id"])
        for name in ("extracted", "answer"):  # a number written as a number is still the answer's text
            if kw.get(name) is not None:
                kw[name] = str(kw[name])
        if not isinstance(kw["tokens"], int) or isinstance(kw["tokens"], bool):
            raise ValueError(f"tokens must be an integer, got {kw['tokens']!r}")
        for name in ("prompt", "completion", "reason"):
            if not isinstance(kw[name], str):
                raise ValueError(f"{name} must be a string, got {type(kw[name]).__name__}")
        return cls(**kw)


@dataclass(frozen=True, kw_only=True)
class EvalSummary:
    """An evaluation summary: metric name -> ``(value, ci95 or None)``, plus the file's other keys."""

    metrics: dict[str, tuple[float, tuple[float, float] | None]]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RunFolder:
    """Everything the report shows, read from disk by :func:`load_run`.

    Attributes:
        path: the run folder.
        config: ``config.json`` (empty when absent).
        warmstart: ``warmstart.json`` (empty when absent).
        metrics: the ``metrics.jsonl`` records, sorted by step (the last record of a step wins).
        samples: eval step -> its samples, in file order.
        summaries: eval step -> its summary.
    """

    path: Path
    config: dict[str, Any]
    warmstart: dict[str, Any]
    metrics: list[dict[str, Any]]
    samples: dict[int, list[EvalSample]]
    summaries: dict[int, EvalSummary]


def eval_samples_path(run_dir: str | Path, step: int) -> Path:
    """Where the eval samples of ``step`` go: ``<run_dir>/eval/step_<NNNNNN>.jsonl``."""
    return Path(run_dir) / "eval" / f"step_{step:06d}{SAMPLES_SUFFIX}"


def eval_summary_path(run_dir: str | Path, step: int) -> Path:
    """Where the eval summary of ``step`` goes: ``<run_dir>/eval/step_<NNNNNN>.summary.json``."""
    return Path(run_dir) / "eval" / f"step_{step:06d}{SUMMARY_SUFFIX}"


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file next to ``path``, fsync it, then rename it over ``path``: a
    reader sees the old file or the new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_eval_samples(path: str | Path, samples: Iterable[EvalSample]) -> Path:
    """Write ``samples`` as JSONL to ``path`` atomically (see :func:`eval_samples_path`)."""
    lines = [json.dumps(asdict(s)) + "\n" for s in samples]
    return write_text_atomic(path, "".join(lines))


def read_eval_samples(path: str | Path) -> list[EvalSample]:
    """The samples of one ``eval/step_<N>.jsonl`` file. A torn last line (no newline: a writer was
    interrupted) is skipped; any other unreadable line raises :class:`RunFolderError` with its number."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        torn = i == len(lines)  # the text after the last newline
        try:
            out.append(EvalSample.from_json(json.loads(line)))
        except json.JSONDecodeError as exc:
            if torn:
                continue
            raise RunFolderError(f"{path} line {i}: not JSON ({exc.msg}); each line must be one JSON object "
                                 "(docs/learner.md, 'Run folder')") from None
        except (TypeError, ValueError) as exc:
            raise RunFolderError(f"{path} line {i}: {exc}; an eval sample needs problem_id, prompt, completion, "
                                 "extracted, correct, reason, tokens, finish_reason") from None
    return out


def read_eval_summary(path: str | Path) -> EvalSummary:
    """One ``eval/step_<N>.summary.json``: ``{"metrics": {name: number | {"value", "ci95"}}, ...}``."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}: not JSON ({exc.msg}); write it atomically (tmp file, then rename)") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("metrics"), dict):
        raise RunFolderError(f"{path}: expected an object with a 'metrics' object, e.g. "
                             '{"metrics": {"pass@1": 0.61, "maj@8": {"value": 0.7, "ci95": [0.64, 0.76]}}}')
    metrics: dict[str, tuple[float, tuple[float, float] | None]] = {}
    for name, v in obj["metrics"].items():
        value, ci = (v.get("value"), v.get("ci95")) if isinstance(v, dict) else (v, None)
        if not _is_number(value) or (ci is not None and not (isinstance(ci, list) and len(ci) == 2
                                                             and all(_is_number(c) for c in ci))):
            raise RunFolderError(f"{path}: metric {name!r} must be a number or "
                                 f'{{"value": number, "ci95": [low, high]}}, got {v!r}')
        metrics[str(name)] = (float(value), (float(ci[0]), float(ci[1])) if ci is not None else None)
    return EvalSummary(metrics=metrics, info={k: v for k, v in obj.items() if k != "metrics"})


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def find_eval_files(run_dir: str | Path, suffix: str = SAMPLES_SUFFIX) -> dict[int, Path]:
    """Eval step -> ``<run_dir>/eval/step_<N><suffix>`` (sample files by default, or ``SUMMARY_SUFFIX``)."""
    folder = Path(run_dir) / "eval"
    pattern = re.compile(r"^step_(\d+)" + re.escape(suffix) + "$")
    found: dict[int, Path] = {}
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        m = pattern.match(p.name)
        if m is None:
            continue
        step = int(m.group(1))
        if step in found:
            raise RunFolderError(f"{found[step]} and {p} are both step {step}; remove one")
        found[step] = p
    return dict(sorted(found.items()))


def _read_json_object(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}: not JSON ({exc.msg}); rewrite it or delete it") from None
    if not isinstance(obj, dict):
        raise RunFolderError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def by_step(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Metrics records sorted by step, one per step (the last one written wins); records without an
    integer ``step`` are dropped.

    Example:
        >>> [r["x"] for r in by_step([{"step": 2, "x": "a"}, {"step": 1, "x": "b"}, {"step": 2, "x": "c"}])]
        ['b', 'c']
    """
    out: dict[int, dict[str, Any]] = {}
    for r in records:
        step = r.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            out[step] = dict(r)
    return [out[s] for s in sorted(out)]


def load_run(run_dir: str | Path) -> RunFolder:
    """Read a run folder (see the module docstring); raises :class:`RunFolderError` if it is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RunFolderError(f"{path}: no such folder; pass a run folder such as runs/<name>")
    metrics_file = path / "metrics.jsonl"
    if not metrics_file.exists():
        raise RunFolderError(f"{path}: no metrics.jsonl; pass the folder of a run written by dapo-env train "
                             "(runs/<name>)")
    return RunFolder(
        path=path, config=_read_json_object(path / "config.json"),
        warmstart=_read_json_object(path / "warmstart.json"), metrics=by_step(read_metrics(metrics_file)),
        samples={s: read_eval_samples(p) for s, p in find_eval_files(path).items()},
        summaries={s: read_eval_summary(p) for s, p in find_eval_files(path, SUMMARY_SUFFIX).items()})


__all__ = ["OPTIONAL_FIELDS", "SAMPLES_SUFFIX", "SUMMARY_SUFFIX", "EvalSample", "EvalSummary", "RunFolder",
           "RunFolderError", "by_step", "eval_samples_path", "eval_summary_path", "find_eval_files", "load_run",
           "read_eval_samples", "read_eval_summary", "write_eval_samples", "write_text_atomic"]
