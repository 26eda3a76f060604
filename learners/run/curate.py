"""``dapo-env curate``: an eval's problems whose measured pass rate lies in a range, as a dataset and a task spec.

A DAPO group teaches only when its G answers disagree (``0 < #correct < G``); a problem the model always or
never solves gives all-equal rewards, zero advantage and a wasted rollout. An eval with ``--n K`` samples per
problem measures each problem's pass rate; :func:`curate` keeps the problems whose rate lies in
``[low, high]`` and writes, into one folder:

- ``train.jsonl``: the kept problems, one row each: ``id``, ``question``, ``answer`` (the reference as its
  verifier reads it back, :func:`~dapo_env.interop.datasets.reference_to_str`), the prompt's metadata fields,
  ``pass_rate`` and ``samples`` (how many responses measured it);
- ``test.jsonl``: the source task's held-out problems (its ``test`` split, the eval's size), unfiltered, so a
  curated run's ``eval/accuracy`` is comparable with a run on the full task;
- ``<Name>.yaml``: a task spec (``dapo-env train --task DIR/<Name>.yaml``) with the source task's prompt
  template, graded by the source task's verifier (``dapo_env.tasks.mixture:task_verifier``, or the eval's own
  ``--verifier``);
- ``curate.json``: what was kept and why (the range, the eval, the counts).

The pass rate of a problem is the share of its sampled responses that were right (the greedy response when the
eval drew no samples); failed requests (an endpoint's ``error:endpoint``) are not answers and do not count.
Curate the split you will train on (``dapo-env eval ... --split train``), never the held-out one.

Example:
    >>> pass_rates([{"index": 0, "greedy": False, "sample": 0, "correct": True, "reason": "ok"},
    ...             {"index": 0, "greedy": False, "sample": 1, "correct": False, "reason": "ok"},
    ...             {"index": 1, "greedy": True, "sample": 0, "correct": True, "reason": "ok"}])
    {0: (0.5, 2)}
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .eval_run import SAMPLES_FILE, SETTINGS_FILE, EvalSettings, read_samples

CURATE_FILE = "curate.json"


def pass_rates(records: Sequence[Mapping[str, Any]]) -> dict[int, tuple[float, int]]:
    """Problem index -> ``(pass rate, responses measured)`` over the sampled responses of an eval's records (the
    greedy ones when none was sampled); failed requests are left out, the last record of a sample wins."""
    from .evaluation import is_failed

    latest = {(r["index"], bool(r["greedy"]), r["sample"]): r for r in records}
    graded = [r for r in latest.values() if not is_failed(r)]
    sampled = [r for r in graded if not r["greedy"]]
    chosen = sampled or graded
    tally: dict[int, list[int]] = {}
    for r in chosen:
        counts = tally.setdefault(int(r["index"]), [0, 0])
        counts[0] += bool(r["correct"])
        counts[1] += 1
    return {i: (right / total, total) for i, (right, total) in sorted(tally.items())}


def parse_range(text: str) -> tuple[float, float]:
    """``"LOW:HIGH"`` as two pass rates in [0, 1] with LOW <= HIGH.

    Example:
        >>> parse_range("0.1:0.9")
        (0.1, 0.9)
    """
    low, colon, high = str(text).partition(":")
    try:
        bounds = (float(low), float(high)) if colon else None
    except ValueError:
        bounds = None
    if bounds is None or not all(0.0 <= b <= 1.0 for b in bounds) or bounds[0] > bounds[1]:
        raise ValueError(f"--pass-rate {text!r}: expected LOW:HIGH with 0 <= LOW <= HIGH <= 1, e.g. 0.1:0.9")
    return bounds


@dataclass(frozen=True)
class CurateOutcome:
    """What :func:`curate` wrote: the folder, the spec's path and Gymnasium id, and the counts."""

    out_dir: Path
    spec_path: Path
    env_id: str
    kept: int
    measured: int

    @property
    def train_path(self) -> Path:
        return self.out_dir / "train.jsonl"


def read_eval(eval_dir: str | Path) -> tuple[EvalSettings, list[dict[str, Any]]]:
    """An eval folder's settings and records (errors name the missing file and the fix)."""
    eval_dir = Path(eval_dir)
    manifest_path = eval_dir / SETTINGS_FILE
    if not manifest_path.is_file() or not (eval_dir / SAMPLES_FILE).is_file():
        raise FileNotFoundError(f"{eval_dir}: not an eval folder (needs {SETTINGS_FILE} and {SAMPLES_FILE}); pass the "
                                "folder `dapo-env eval` wrote, e.g. evals/<model>-<task>-train-n8")
    settings = EvalSettings(**json.loads(manifest_path.read_text())["settings"])
    return settings, read_samples(eval_dir / SAMPLES_FILE)


def select(rates: Mapping[int, tuple[float, int]], low: float, high: float) -> list[int]:
    """The problem indices whose pass rate lies in ``[low, high]``, in order.

    Example:
        >>> select({0: (0.0, 8), 1: (0.5, 8), 2: (1.0, 8)}, 0.1, 0.9)
        [1]
    """
    return [i for i, (rate, _) in rates.items() if low - 1e-12 <= rate <= high + 1e-12]


def _row(problem: Any, keep: Sequence[str], extra: Mapping[str, Any]) -> dict[str, Any]:
    from dapo_env.interop.datasets import reference_to_str

    return {"id": str(problem.id), "question": problem.question, "answer": reference_to_str(problem.answer),
            **{k: _plain(problem.metadata[k]) for k in keep}, **extra}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _kept_metadata(task: Any, problems: Sequence[Any]) -> list[str]:
    """The metadata fields to keep: those every problem has with a JSON value (the prompt's must be among them)."""
    from dapo_env.tasks import template_fields

    keys = [k for k in (problems[0].metadata if problems else {}) if k not in ("id", "question", "answer")]
    kept = []
    for key in keys:
        try:
            if all(key in p.metadata for p in problems):
                json.dumps([_plain(p.metadata[key]) for p in problems])
                kept.append(key)
        except (TypeError, ValueError):
            continue
    missing = [f for f in template_fields(task.prompt_template) if f != "question" and f not in kept]
    if missing:
        raise ValueError(f"{task.env_id}'s prompt template uses {missing}, which its problems do not hold as JSON "
                         "values: curate a task whose prompt fields are plain data")
    return kept


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def curate(eval_dir: str | Path, low: float, high: float, out_dir: str | Path, *, name: str | None = None,
           overwrite: bool = False) -> CurateOutcome:
    """Write the eval's problems whose pass rate lies in ``[low, high]`` as a dataset and a spec (module docstring).

    Args:
        eval_dir: a ``dapo-env eval`` folder (any model, in-process or served).
        low, high: the pass-rate range kept (inclusive).
        out_dir: the folder to write (created; a non-empty one is refused unless ``overwrite``).
        name: the curated task's name (default ``<source name>Curated``); its id is ``<name>-v0``.
    """
    import yaml

    from .eval_run import eval_problems, eval_task
    from dapo_env.tasks.mixture import is_mixture

    settings, records = read_eval(eval_dir)
    task = eval_task(settings)
    if is_mixture(task):
        raise ValueError(f"{eval_dir} evaluated a mixture: curate each task's own eval (dapo-env eval --task ID)")
    problems = eval_problems(task, settings)
    rates = pass_rates(records)
    if not rates:
        raise ValueError(f"{eval_dir} holds no graded responses yet: finish the eval (rerun its command) first")
    for index in rates:
        if index >= len(problems):
            raise ValueError(f"{eval_dir}: record index {index} is beyond the {len(problems)} problems of "
                             f"{settings.task} {settings.split!r}: the task's data changed since the eval")
    stray = [r for r in records if r["index"] < len(problems) and str(r["problem_id"]) != str(problems[r["index"]].id)]
    if stray:
        raise ValueError(f"{eval_dir}: problem {stray[0]['index']} was {stray[0]['problem_id']!r} in the eval but is "
                         f"{problems[stray[0]['index']].id!r} now: the task's data changed since the eval; rerun it")
    kept = select(rates, low, high)
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} is not empty: pass another --out or --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    name = name or f"{task.name}Curated"
    fields = _kept_metadata(task, problems)
    _write_jsonl(out / "train.jsonl", [_row(problems[i], fields, {"pass_rate": rates[i][0], "samples": rates[i][1]})
                                       for i in kept])
    files: dict[str, str] = {"train": "train.jsonl"}
    heldout = _heldout(task, settings)
    if heldout:
        _write_jsonl(out / "test.jsonl", [_row(p, fields, {}) for p in heldout])
        files["test"] = "test.jsonl"
    verifier = ({"name": settings.verifier} if settings.verifier else
                {"name": "dapo_env.tasks.mixture:task_verifier", "options": {"task": task.env_id}})
    spec = {"name": name, "version": 0,
            "description": f"{len(kept)} of {len(rates)} {settings.task} {settings.split!r} problems with a measured "
                           f"pass rate in [{low:g}, {high:g}] (dapo-env curate {Path(eval_dir).name})",
            "kind": "math", "data": {"files": files, "split": "train"},  # rows of text answers; the verifier below
            "fields": {"question": "question", "answer": "answer", "id": "id", "metadata": fields},
            "answer_transform": "none", "prompt": {"template": task.prompt_template}, "verifier": verifier}
    spec_path = out / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    histogram = _histogram(rates)
    (out / CURATE_FILE).write_text(json.dumps({
        "eval": str(Path(eval_dir).resolve()), "task": settings.task, "split": settings.split, "pass_rate": [low, high],
        "measured": len(rates), "kept": len(kept), "kept_ids": [str(problems[i].id) for i in kept],
        "samples_per_problem": max(n for _, n in rates.values()), "histogram": histogram,
        "mean_pass_rate": sum(rate for rate, _ in rates.values()) / len(rates),
        "spec": spec_path.name, "env_id": f"{name}-v0"}, indent=2))
    return CurateOutcome(out, spec_path, f"{name}-v0", len(kept), len(rates))


def _heldout(task: Any, settings: EvalSettings) -> list[Any]:
    """The source task's ``test`` problems (the eval's size, at most), unless the eval was of that split."""
    from .evaluation import load_eval_problems

    if settings.split == "test":
        return []
    try:
        return load_eval_problems(task, split="test", size=settings.size or 200, task_kwargs=dict(settings.task_kwargs))
    except (KeyError, ValueError, FileNotFoundError):
        return []


def _histogram(rates: Mapping[int, tuple[float, int]], bins: int = 10) -> list[int]:
    """Problems per pass-rate bin ([0, 0.1), ..., [0.9, 1.0]); rate 1.0 falls in the last bin."""
    counts = [0] * bins
    for rate, _ in rates.values():
        counts[min(bins - 1, int(math.floor(rate * bins)))] += 1
    return counts


# --- the command ------------------------------------------------------------------------------------------
def add_curate_parser(sub: Any, formatter: Any = argparse.HelpFormatter) -> argparse.ArgumentParser:
    """The ``curate`` subcommand's parser."""
    p = sub.add_parser("curate", help="keep an eval's problems whose pass rate lies in a range, as a dataset and a "
                                      "task spec that trains on them", formatter_class=formatter,
                       description="From an eval folder (dapo-env eval --n K, any model, in-process or served), "
                                   "write the problems whose measured pass rate lies in LOW:HIGH as train.jsonl, "
                                   "the source task's held-out problems as test.jsonl and a spec that trains on "
                                   "them, into DIR. Train with: dapo-env train --task DIR/<Name>.yaml")
    p.add_argument("eval_dir", type=Path, metavar="EVAL_DIR", help="the folder dapo-env eval wrote")
    p.add_argument("--pass-rate", required=True, metavar="LOW:HIGH",
                   help="keep problems whose pass rate lies in [LOW, HIGH], e.g. 0.1:0.9 (the problems that give "
                        "DAPO's groups a signal)")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="the folder to write")
    p.add_argument("--name", default=None, help="the curated task's name (default: <task name>Curated)")
    p.add_argument("--overwrite", action="store_true", help="replace the files of a non-empty --out folder")
    return p


def cmd_curate(args: argparse.Namespace) -> int:
    """Run ``dapo-env curate``; prints what was kept and the command that trains on it."""
    low, high = parse_range(args.pass_rate)
    outcome = curate(args.eval_dir, low, high, args.out, name=args.name, overwrite=args.overwrite)
    print(f"dapo-env curate: kept {outcome.kept} of {outcome.measured} problems with a pass rate in "
          f"[{low:g}, {high:g}]: {outcome.train_path}")
    print(f"spec {outcome.spec_path} ({outcome.env_id}); train with: dapo-env train --task {outcome.spec_path}")
    return 0


__all__ = ["CURATE_FILE", "CurateOutcome", "add_curate_parser", "cmd_curate", "curate", "parse_range", "pass_rates",
           "read_eval", "select"]
