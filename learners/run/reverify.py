"""``dapo-env reverify EVAL_DIR``: grade an eval's stored responses again, with today's verifier or another one.

No model is called: every response of ``samples.jsonl`` is verified again against its problem's reference
(the task's problems are loaded as the eval loaded them, from ``eval.json``), a truncated response still
counts as wrong, and failed requests (``error:endpoint``) stay failed. Beside the eval's own files it writes

- ``reverify-<name>.samples.jsonl``: the records with the new verdicts (``correct``, ``extracted``, ``reason``);
- ``reverify-<name>.summary.json``: the summary of those records, in ``summary.json``'s format (plus the
  verifier used and the number of flips);
- ``reverify-<name>.flips.jsonl``: one line per verdict that changed (``index``, ``greedy``, ``sample``,
  ``problem_id``, old and new ``correct``/``reason``/``extracted``).

``<name>`` is ``task`` (the task's own verifier) or the custom verifier's ``module.function``. With an
unchanged verifier the new summary equals the stored one and there is no flip: a verifier change is
auditable sample by sample. Multi-turn evals are refused (an episode's verdict comes from its environment,
turn by turn, not from one response).

Example:
    >>> reverify_name(None), reverify_name("my_checks:strict")
    ('task', 'my_checks.strict')
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dapo_env.verifiers import as_verifier, verify_batch

from .eval_run import (
    SAMPLES_FILE,
    SETTINGS_FILE,
    SUMMARY_FILE,
    EvalSettings,
    eval_problems,
    eval_task,
    read_samples,
    summarize_eval,
)
from ..evaluation import is_failed
from .run_folder import write_text_atomic


@dataclass(frozen=True)
class ReverifyOutcome:
    """What :func:`reverify` wrote: the new summary and the flipped verdicts, and where."""

    summary: dict[str, Any]
    flips: list[dict[str, Any]]
    summary_path: Path
    samples_path: Path
    flips_path: Path


def reverify_name(verifier: str | None) -> str:
    """The file-name tag of a re-verification: ``task`` or the verifier's ``module.function``."""
    return "task" if verifier is None else verifier.replace(":", ".")


def reverify(eval_dir: str | Path, *, verifier: str | None = None) -> ReverifyOutcome:
    """Re-grade the responses of ``eval_dir`` (see the module docstring).

    Args:
        eval_dir: an eval folder (``eval.json`` + ``samples.jsonl``, as ``dapo-env eval`` writes).
        verifier: a ``"module:function"`` verifier; ``None``: the verifier the eval used (the task's, or its
            own custom one), as it is today.
    """
    eval_dir = Path(eval_dir)
    manifest_file = eval_dir / SETTINGS_FILE
    if not manifest_file.is_file():
        raise FileNotFoundError(f"{eval_dir} holds no {SETTINGS_FILE}: pass an eval folder written by `dapo-env eval`")
    manifest = json.loads(manifest_file.read_text())
    settings = EvalSettings(**manifest["settings"])
    if verifier is not None:
        settings = dataclasses.replace(settings, verifier=verifier)
    task = eval_task(settings)
    from ..rollout.setup import is_multi_turn

    if is_multi_turn(task):
        raise ValueError(f"{settings.task} is multi-turn: an episode's verdict comes from its environment turn by "
                         "turn, so its records cannot be re-graded from one response")
    problems = eval_problems(task, settings)
    records = read_samples(eval_dir / SAMPLES_FILE)
    if not records:
        raise ValueError(f"{eval_dir / SAMPLES_FILE} holds no records: nothing to re-verify")
    beyond = [r["index"] for r in records if r["index"] >= len(problems)]
    if beyond:
        raise ValueError(f"record index {beyond[0]} is past the {len(problems)} problems the eval's settings load: the "
                         "task's data changed since the eval; re-verify against the same data")
    graded = [r for r in records if not is_failed(r)]
    verdicts = verify_batch(as_verifier(task.verifier), [r["completion"] for r in graded],
                            [problems[r["index"]].answer for r in graded], workers=0)
    new_by_id = {id(r): _regraded(r, v) for r, v in zip(graded, verdicts)}
    regraded = [new_by_id.get(id(r), r) for r in records]
    flips = [_flip(old, new) for old, new in zip(records, regraded) if old["correct"] != new["correct"]]
    summary = summarize_eval(regraded, task, settings, len(problems), manifest.get("model", {}))
    name = reverify_name(verifier)
    summary = {**summary, "reverify": {"verifier": verifier or "the eval's own (as it is today)", "flips": len(flips),
                                       "of": str(eval_dir / SUMMARY_FILE)}}
    paths = [eval_dir / f"reverify-{name}.{suffix}" for suffix in ("summary.json", "samples.jsonl", "flips.jsonl")]
    write_text_atomic(paths[0], json.dumps(summary, indent=2, default=str))
    write_text_atomic(paths[1], "".join(json.dumps(r) + "\n" for r in regraded))
    write_text_atomic(paths[2], "".join(json.dumps(f) + "\n" for f in flips))
    return ReverifyOutcome(summary, flips, *paths)


def _regraded(record: Mapping[str, Any], verdict: Any) -> dict[str, Any]:
    truncated = record["finish_reason"] == "length"
    return {**record, "correct": bool(verdict.correct) and not truncated, "extracted": verdict.extracted,
            "reason": verdict.reason}


def _flip(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    keep = {key: old.get(key) for key in ("index", "greedy", "sample", "problem_id")}
    return {**keep, **{f"{side}_{key}": rec.get(key) for side, rec in (("old", old), ("new", new))
                       for key in ("correct", "reason", "extracted")}}


__all__ = ["ReverifyOutcome", "reverify", "reverify_name"]
