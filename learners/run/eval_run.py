"""``dapo-env eval``: K samples per problem from a checkpoint, one record per sample, pass@k / avg@k / maj@k / greedy.

:func:`evaluate_checkpoint` takes a model folder (usually ``runs/<name>/checkpoints/step_N/model``, or a
run folder for its newest checkpoint) and, when it sits inside a run folder, evaluates it the way the run
did: the run's task and task knobs, held-out split and size, chat template, custom verifier, response
limit, precision and engine (every one overridable). :func:`run_eval` is the loop for an engine you
already have. Each problem gets one greedy response (the run's ``eval/accuracy``) and ``n`` sampled ones;
the metrics are computed from the records by :mod:`dapo_env.evaluation` (unbiased pass@k for
k = 1, 2, 4, ..., n, avg@n, maj@n over the verifier's own answer equivalence, greedy accuracy, each with a
95% bootstrap interval over problems).

An eval folder holds:

- ``eval.json``: the settings and the model's identity (a weights fingerprint);
- ``samples.jsonl``: one record per response (the run folder's ``eval/step_<N>.jsonl`` format plus
  ``index``, the problem's position, and ``greedy``): ``problem_id``, ``index``, ``prompt``, ``completion``,
  ``extracted``, ``correct`` (a truncated response is wrong), ``reason``, ``tokens``, ``finish_reason``,
  ``sample`` (0..n-1; 0 for greedy), ``greedy``, ``answer`` (the reference when it is a string);
- ``summary.json``: ``{"metrics": {"pass@1": {"value": .., "ci95": [lo, hi]}, ...}, "task": .., ...}``.

Generation runs in fixed units (the greedy pass ``batch_size`` problems at a time, the sampled pass
``batch_size // n`` problems at a time, each unit seeded from its first problem), and each unit's records
are appended and flushed at once. Rerunning the same command resumes: finished problems are skipped,
and because a unit's samples depend only on the seed and the unit, a resumed eval writes what an
uninterrupted one would have. Different settings or weights in the same folder are refused.

Example:
    >>> s = settings_from_run({"task": "Largest-v0", "eval_size": 50, "max_response_tokens": 16}, n=8)
    >>> (s.task, s.size, s.n, s.sample_chunk)
    ('Largest-v0', 50, 8, 32)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dapo_env.evaluation import answer_equivalence, summarize_records
from dapo_env.types import Problem

SETTINGS_FILE, SAMPLES_FILE, SUMMARY_FILE = "eval.json", "samples.jsonl", "summary.json"
PRECISIONS = ("fp32", "bf16")
_STEP = re.compile(r"^step_(\d+)$")


@dataclass(frozen=True, kw_only=True)
class EvalSettings:
    """What an evaluation generates and how it is graded (everything that changes the records).

    Attributes:
        task: registered task name or Gymnasium id.
        task_kwargs: the task loader's knobs (e.g. ``{"max_value": 9}``).
        split: the split evaluated; its first ``size`` problems (``None``: all of them).
        n: sampled responses per problem (``0``: greedy only).
        greedy: also decode each problem greedily (the trainer's held-out accuracy).
        temperature, top_p: the sampling of the ``n`` responses.
        max_response_tokens: the response budget; a response cut there counts as wrong.
        chat_template: wrap prompts with the tokenizer's chat template (as the run did).
        verifier: a custom ``"module:function"`` verifier replacing the task's.
        seed: the sampling seed (each unit's seed is derived from it and the unit's first problem).
        batch_size: responses per generation call (the trainer's engine uses 256, so the greedy pass
            batches exactly as the trainer's evaluation did).
        engine: ``"hf"``, ``"vllm"`` (or another registered engine).
        precision: ``"fp32"`` or ``"bf16"`` (autocast of the HF engine's forward passes).
        prompt_template: replaces the task's template (as the run did; ``None``: the task's own).
        max_turns, max_episode_tokens: a multi-turn task's episode budgets (as the run's evaluation).
        heldout_from, heldout_size: a run's training split and ``eval_size``: when ``split`` reads the same rows
            as ``heldout_from``, the eval covers the rows the run held out of them (``learners.run.heldout``);
            ``None``: the split as it loads.
    """

    task: str
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)
    split: str = "test"
    size: int | None = 200
    n: int = 0
    greedy: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    max_response_tokens: int = 1024
    chat_template: bool = False
    verifier: str | None = None
    seed: int = 0
    batch_size: int = 256
    engine: str = "hf"
    precision: str = "fp32"
    prompt_template: str | None = None
    max_turns: int | None = None
    max_episode_tokens: int | None = None
    heldout_from: str | None = None
    heldout_size: int = 200

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, msg: str) -> None:
            if not ok:
                raise ValueError(f"eval {name}={getattr(self, name)!r}: {msg}")

        def integer(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        need(isinstance(self.task, str) and bool(self.task), "task", "name a registered task, e.g. GSM8K-v0")
        need(self.size is None or (integer(self.size) and self.size >= 1), "size", "must be >= 1 (or all)")
        need(integer(self.n) and self.n >= 0, "n", "must be an integer >= 0 (0: greedy only)")
        need(self.greedy or self.n > 0, "greedy", "nothing to evaluate: keep greedy decoding or pass --n K")
        need(self.n == 0 or self.temperature > 0, "temperature", "sampling needs a temperature > 0 "
             "(greedy decoding is always included; --no-greedy drops it)")
        need(0.0 < self.top_p <= 1.0, "top_p", "must be in (0, 1]")
        need(integer(self.max_response_tokens) and self.max_response_tokens >= 1, "max_response_tokens", "must be >= 1")
        need(integer(self.batch_size) and self.batch_size >= 1, "batch_size", "must be >= 1")
        need(self.precision in PRECISIONS, "precision", f"choose one of {PRECISIONS}")
        need(self.verifier is None or (isinstance(self.verifier, str) and ":" in self.verifier), "verifier",
             "pass a 'module:function' string")
        object.__setattr__(self, "task_kwargs", dict(self.task_kwargs))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def sample_chunk(self) -> int:
        """Problems per sampled generation call: ``batch_size // n`` (at least 1)."""
        return max(1, self.batch_size // max(self.n, 1))


#: Eval settings read from a run's ``config.json``: eval field -> TrainConfig field.
RUN_FIELDS = {"task": "task", "task_kwargs": "task_kwargs", "split": "eval_split", "size": "eval_size",
              "max_response_tokens": "max_response_tokens", "chat_template": "chat_template",
              "verifier": "verifier", "precision": "precision", "engine": "engine", "top_p": "top_p",
              "prompt_template": "prompt_template", "max_turns": "max_turns", "max_episode_tokens": "max_episode_tokens"}


def settings_from_run(run_config: Mapping[str, Any], **overrides: Any) -> EvalSettings:
    """Eval settings that repeat a run's held-out evaluation (its ``config.json`` as a dict), then ``overrides``.

    Sampling uses the run's ``eval_temperature`` when it sampled its evaluation, else its training
    temperature. ``task_kwargs`` given are merged over the run's knobs. Evaluating another task than the
    run's drops the run's task knobs and custom verifier (they belong to the run's task).

    Example:
        >>> s = settings_from_run({"task": "Largest-v0", "task_kwargs": {"max_value": 9}, "eval_size": 50,
        ...                        "max_response_tokens": 16}, n=4)
        >>> (s.task, s.task_kwargs, s.size, s.max_response_tokens, s.n)
        ('Largest-v0', {'max_value': 9}, 50, 16, 4)
        >>> settings_from_run({"task": "Largest-v0", "task_kwargs": {"max_value": 9}}, task="GSM8K-v0").task_kwargs
        {}
    """
    known = {f.name for f in fields(EvalSettings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown eval setting(s) {unknown}; valid: {sorted(known)}")
    base = {name: run_config[key] for name, key in RUN_FIELDS.items() if run_config.get(key) is not None}
    temperature = run_config.get("eval_temperature") or run_config.get("temperature")
    if temperature:
        base["temperature"] = temperature
    if "task" in overrides and not _same_task(overrides["task"], base.get("task")):
        for name in ("task_kwargs", "verifier", "prompt_template", "max_turns", "max_episode_tokens"):
            base.pop(name, None)  # they belong to the run's task
    merged = {**base, **overrides}
    if "task_kwargs" in overrides and "task_kwargs" in base:
        merged["task_kwargs"] = {**base["task_kwargs"], **overrides["task_kwargs"]}
    if run_config and all(merged.get(name) == base.get(name) for name in ("task", "task_kwargs", "split")):
        # the run's own held-out problems: split off the training rows as the run split them (if it did)
        merged.setdefault("heldout_from", run_config.get("train_split", "train"))
        merged.setdefault("heldout_size", run_config.get("eval_size") or 200)
    if "task" not in merged:
        raise ValueError("no task: the model is not inside a run folder, so pass --task (e.g. --task GSM8K-v0)")
    return EvalSettings(**merged)


def _same_task(a: Any, b: Any) -> bool:
    from dapo_env.tasks import get_task

    try:
        return a == b or get_task(a).env_id == get_task(b).env_id
    except (KeyError, ValueError, TypeError):
        return False


def _length_stats(records: Sequence[Mapping[str, Any]], greedy: bool) -> dict[str, float] | None:
    chosen = [r for r in records if bool(r.get("greedy")) == greedy]
    if not chosen:
        return None
    return {"responses": len(chosen), "mean_tokens": sum(int(r["tokens"]) for r in chosen) / len(chosen),
            "truncated": sum(r["finish_reason"] == "length" for r in chosen) / len(chosen)}


# --- the eval folder -----------------------------------------------------------------------------------
def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``samples.jsonl``. A torn last line (an eval killed mid-write) is dropped; any other
    unreadable line raises ``ValueError`` naming its number."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not {"index", "greedy", "sample", "correct"} <= set(record):
                raise ValueError("not a sample record (needs index, greedy, sample, correct)")
        except ValueError as exc:
            if i == len(lines):  # the text after the last newline: a write was cut short
                break
            raise ValueError(f"{path} line {i}: {exc}; delete the eval folder or pass --overwrite") from None
        out.append(record)
    return out


def _open_folder(out_dir: Path, manifest: dict[str, Any], overwrite: bool) -> list[dict[str, Any]]:
    """Create or reopen an eval folder; returns the finished records to keep (none when overwriting)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    settings_file, samples_file = out_dir / SETTINGS_FILE, out_dir / SAMPLES_FILE
    if overwrite:
        samples_file.unlink(missing_ok=True)
        (out_dir / SUMMARY_FILE).unlink(missing_ok=True)
    elif settings_file.exists():
        old = json.loads(settings_file.read_text())
        diff = _manifest_diff(old, manifest)
        if diff:
            raise ValueError(f"{out_dir} holds an eval with other settings ({'; '.join(diff)}): rerun with the same "
                             "settings to resume, pass --out DIR for a new eval, or --overwrite to replace it")
    elif samples_file.exists():
        raise ValueError(f"{samples_file} exists without {SETTINGS_FILE}: pass --overwrite or another --out")
    _write_atomic(settings_file, json.dumps(manifest, indent=2, default=str))
    records = read_samples(samples_file)
    _write_atomic(samples_file, "".join(json.dumps(r) + "\n" for r in records))  # drops a torn last line
    return records


def _split_failed(records: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(graded, failed)``: a sample whose request failed is not an answer (``evaluation.is_failed``); the
    last record of a sample wins (a resume appends the re-run of a failed one)."""
    from .evaluation import is_failed

    latest = {(r["index"], bool(r["greedy"]), r["sample"]): r for r in records}
    graded = [r for r in latest.values() if not is_failed(r)]
    return graded, [r for r in latest.values() if is_failed(r)]


def _manifest_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What changed between two eval manifests, ignoring ``size`` (a resume may ask for more or fewer problems)."""
    out = []
    a, b = dict(old.get("settings", {})), dict(new.get("settings", {}))
    for key in sorted((set(a) | set(b)) - {"size"}):
        if key in a and a.get(key) != b.get(key):  # a setting newer than the old eval is no difference
            out.append(f"{key} was {a.get(key)!r}, now {b.get(key)!r}")
    if old.get("model", {}).get("endpoint") and old["model"].get("model") != new.get("model", {}).get("model"):
        out.append(f"the served model was {old['model'].get('model')!r}, now {new.get('model', {}).get('model')!r}")
    fa, fb = old.get("model", {}).get("fingerprint"), new.get("model", {}).get("fingerprint")
    if fa and fb and fa != fb:
        out.append(f"the model's weights differ (fingerprint {fa} vs {fb})")
    return out


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _append(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
        f.flush()
        os.fsync(f.fileno())


# --- the loop ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvalOutcome:
    """What :func:`run_eval` wrote: the folder, its files and the summary (as in ``summary.json``);
    ``published``: the run folder's ``eval/step_<N>.summary.json`` it was copied to, if any."""

    out_dir: Path
    summary: dict[str, Any]
    published: Path | None = None

    @property
    def samples_path(self) -> Path:
        return self.out_dir / SAMPLES_FILE

    @property
    def summary_path(self) -> Path:
        return self.out_dir / SUMMARY_FILE

    @property
    def metrics(self) -> dict[str, float]:
        """Metric name -> value (``{"greedy": 0.6, "pass@1": ..., ...}``)."""
        return {k: v["value"] for k, v in self.summary["metrics"].items()}


def _units(count: int, settings: EvalSettings) -> list[tuple[bool, int, int]]:
    """``(greedy, start, stop)`` generation units over problems ``[0, count)``: per block of ``batch_size``
    problems, the greedy unit, then the block's sampled units of ``sample_chunk`` problems."""
    units: list[tuple[bool, int, int]] = []
    for block in range(0, count, settings.batch_size):
        end = min(block + settings.batch_size, count)
        if settings.greedy:
            units.append((True, block, end))
        if settings.n:
            units += [(False, s, min(s + settings.sample_chunk, end)) for s in range(block, end, settings.sample_chunk)]
    return units


def run_eval(engine: Any, task: Any, problems: Sequence[Problem], settings: EvalSettings, out_dir: str | Path, *,
             tokenizer: Any = None, identity: Mapping[str, Any] | None = None, overwrite: bool = False,
             progress: bool = True, messages: bool = False, served: bool = False, count_tokenizer: Any = None,
             judge: Any = None) -> EvalOutcome:
    """Evaluate ``problems`` with ``engine`` into ``out_dir`` (resuming what is there), then summarise.

    Args:
        engine: a rollout engine holding the weights to evaluate.
        task: the task (prompt template; its verifier grades, and its equivalence groups maj@k answers).
        problems: the problems, in order (a record's ``index`` is its position here).
        settings: what to generate (``settings.size`` is not applied here: pass the problems to evaluate).
        tokenizer: the tokenizer whose chat template wraps prompts when ``settings.chat_template`` (always
            for a multi-turn task, as in training).
        identity: the model's identity for ``eval.json`` (``{"model": path, "fingerprint": ...}``); a
            resume with another fingerprint is refused.
        overwrite: start over instead of resuming.
        progress: show a progress bar (responses done / total; failed requests shown apart).
        messages: play multi-turn episodes from their chat messages without a tokenizer (an endpoint).
        served: the answers come from a server: grade their final content, keep reasoning and token usage per
            record (:mod:`.served`); ``count_tokenizer`` counts what the server does not report.
        judge: a :class:`~dapo_env.learners.run.judge.Judge` asked about the rules' negatives once generation is
            done (also those a previous run of the eval left unjudged or with a judge error).

    A sample whose request failed is written with ``reason="error:endpoint: <cause>"`` and summarised apart
    (:func:`summarize_eval`); a rerun re-runs exactly those samples and the missing ones.
    """
    from tqdm.auto import tqdm

    from .evaluation import evaluate
    from ..algo.update import derive_seed

    out_dir = Path(out_dir)
    manifest = {"settings": settings.to_dict(), "model": dict(identity or {})}
    kept, retry = _split_failed(_open_folder(out_dir, manifest, overwrite))
    retry_keys = {(r["index"], bool(r["greedy"])) for r in retry}  # failed before: re-run exactly these
    done = {(r["index"], bool(r["greedy"]), r["sample"]) for r in kept}
    from ..rollout.setup import is_multi_turn

    # episodes always run through the chat template (exact tokens), as the trainer's evaluation does
    chat = tokenizer if settings.chat_template or is_multi_turn(task) else None
    per_problem = settings.n + int(settings.greedy)
    total = len(problems) * per_problem
    finished = sum(1 for i, g, s in done if i < len(problems) and (s < settings.n or g))
    bar = tqdm(total=total, initial=finished, desc=f"eval {settings.task}", unit="resp", disable=not progress)
    tally = {True: [0, 0], False: [0, 0]}  # greedy / sampled: [correct, responses], shown on the bar
    for r in kept:
        tally[bool(r["greedy"])][0] += bool(r["correct"])
        tally[bool(r["greedy"])][1] += 1
    failed = 0
    try:
        for greedy, start, stop in _units(len(problems), settings):
            count = 1 if greedy else settings.n
            missing = [i for i in range(start, stop) if any((i, greedy, k) not in done for k in range(count))]
            if not missing:
                continue
            # a unit whose only gaps are failed requests re-runs those problems alone (an endpoint engine's
            # samples do not depend on the other prompts of a call); otherwise the whole unit, as first run
            targets = missing if all((i, greedy) in retry_keys for i in missing) else list(range(start, stop))
            result = evaluate(engine, task, [problems[i] for i in targets], samples=count, tokenizer=chat,
                               temperature=0.0 if greedy else settings.temperature, top_p=settings.top_p,
                               seed=0 if greedy else derive_seed(settings.seed, start, 1),
                               max_response_tokens=settings.max_response_tokens, max_turns=settings.max_turns,
                               max_episode_tokens=settings.max_episode_tokens, messages=messages, served=served,
                               count_tokenizer=count_tokenizer)
            extras = result.extras or ({},) * len(result.records)
            fresh = [dict(asdict(r), index=targets[offset // count], greedy=greedy, **extra)
                     for offset, (r, extra) in enumerate(zip(result.records, extras))]
            fresh = [r for r in fresh if (r["index"], greedy, r["sample"]) not in done]
            _append(out_dir / SAMPLES_FILE, fresh)
            graded, errors = _split_failed(fresh)
            done.update((r["index"], greedy, r["sample"]) for r in graded)
            failed += len(errors)
            tally[greedy][0] += sum(bool(r["correct"]) for r in graded)
            tally[greedy][1] += len(graded)
            postfix = {name: f"{c / t:.3f}" for name, (c, t) in (("greedy", tally[True]), ("sampled", tally[False])) if t}
            bar.set_postfix({**postfix, **({"failed": failed} if failed else {})}, refresh=False)
            bar.update(len(fresh))
    finally:
        bar.close()
    if judge is not None:
        _judge_pass(judge, out_dir, problems, progress)
    summary = summarize_eval(read_samples(out_dir / SAMPLES_FILE), task, settings, len(problems), manifest["model"])
    _write_atomic(out_dir / SUMMARY_FILE, json.dumps(summary, indent=2, default=str))
    return EvalOutcome(out_dir, summary)


def _judge_pass(judge: Any, out_dir: Path, problems: Sequence[Problem], progress: bool) -> None:
    """Ask the judge about every latest record the rules scored 0 that has no verdict yet; append the judged
    records (the last record of a sample wins)."""
    from .judge import wants_judge

    latest = {(r["index"], bool(r["greedy"]), r["sample"]): r for r in read_samples(out_dir / SAMPLES_FILE)}
    todo = [r for r in latest.values() if r["index"] < len(problems) and wants_judge(r)]
    if not todo:
        return
    if progress:
        print(f"judge: asking {judge.settings.model} about {len(todo)} answer(s) the rules scored 0", flush=True)
    judged = judge.judge(todo, [r["prompt"] for r in todo], [problems[r["index"]].answer for r in todo])
    _append(out_dir / SAMPLES_FILE, judged)


def summarize_eval(records: Sequence[Mapping[str, Any]], task: Any, settings: EvalSettings, count: int,
                   model: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of an eval's records (a ``samples.jsonl``) over its first ``count`` problems; maj@k groups
    answers by ``task``'s verifier equivalence. A mixture's summary adds ``tasks``: each task's metrics.

    Failed requests (``reason`` ``error:endpoint: ...``) are no answers: they are counted and listed under
    ``failed``, and kept out of every metric: a failed greedy response leaves its problem out of ``greedy``;
    a failed sample leaves its problem out of pass@k, avg@k and maj@k (which need all ``n`` samples), each
    with a note. Rerunning the eval re-runs exactly the failed samples.
    """
    records = [r for r in records if r["index"] < count and (r["greedy"] or r["sample"] < settings.n)]
    graded, failed = _split_failed(records)
    same = answer_equivalence(task.verifier)
    incomplete = {r["index"] for r in failed if not r["greedy"]}
    greedy_failed = {r["index"] for r in failed if r["greedy"]}
    scored = _scored(graded, failed)
    summary = summarize_records(scored, same=same)
    if failed:
        notes = [f"{len(failed)} request(s) failed after their retries (reason error:endpoint): not answers, kept out "
                 "of every metric; rerun the same command to re-run exactly them"]
        if incomplete:
            notes.append(f"{len(incomplete)} problem(s) left out of pass@k/avg@k/maj@k (a sample's request failed)")
        if greedy_failed:
            notes.append(f"{len(greedy_failed)} problem(s) left out of greedy (its request failed)")
        summary["notes"] = [*summary["notes"], *notes]
    listed = [{key: r.get(key) for key in ("index", "problem_id", "greedy", "sample", "reason")}
              for r in sorted(failed, key=lambda r: (r["index"], not r["greedy"], r["sample"]))]
    from dapo_env.tasks.mixture import mixture_task_ids

    from .heldout import describe_eval_rows

    extra: dict[str, Any] = {}
    latest = [*graded, *failed]
    if any("usage" in r for r in latest):
        from .served import usage_totals

        pricing = dict(model.get("pricing") or {})
        extra["usage"] = usage_totals(latest, price_in=pricing.get("price_in"), price_out=pricing.get("price_out"))
    if model.get("endpoint"):
        from .served import short_answer_warning

        warning = short_answer_warning(graded, model.get("api"))
        extra["warnings"] = [warning] if warning else []
    if any(r.get("judge") for r in graded):
        extra["judge"] = _judge_summary(graded, failed, same)
    by_task = {task_id: summarize_records([r for r in scored if str(r["problem_id"]).startswith(f"{task_id}/")],
                                          same=answer_equivalence(task.verifier))["metrics"]
               for task_id in mixture_task_ids(task)}  # a mixture's ids are "<task id>/<problem id>"
    if by_task:
        summary["tasks"] = by_task
    return {**summary, "task": settings.task, "split": settings.split,
            "rows": describe_eval_rows(task, settings.split, settings.task_kwargs), **model,
            "failed": {"samples": len(failed), "list": listed},
            "stats": {"greedy": _length_stats(scored, True), "sampled": _length_stats(scored, False)},
            **extra, "settings": settings.to_dict(), "samples_file": SAMPLES_FILE}


def _scored(graded: Sequence[Mapping[str, Any]], failed: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The graded records that count: a failed greedy response leaves its problem out of ``greedy``, a failed
    sample leaves its problem out of pass@k/avg@k/maj@k."""
    incomplete = {r["index"] for r in failed if not r["greedy"]}
    greedy_failed = {r["index"] for r in failed if r["greedy"]}
    return [r for r in graded if (r["index"] not in greedy_failed if r["greedy"] else r["index"] not in incomplete)]


def _judge_summary(graded: Sequence[Mapping[str, Any]], failed: Sequence[Mapping[str, Any]],
                   same: Any) -> dict[str, Any]:
    """Rule+judge metrics (a judge error kept out as a failed request is), flips and judge errors."""
    from .judge import judge_error, judged_correct

    errors = [r for r in graded if judge_error(r)]
    fine = [{**r, "correct": judged_correct(r)} for r in graded if not judge_error(r)]
    summary = summarize_records(_scored(fine, [*failed, *errors]), same=same)
    models = sorted({r["judge"]["model"] for r in graded if r.get("judge")})
    notes = list(summary["notes"])
    if errors:
        notes.append(f"{len(errors)} judge error(s) (the judge failed or gave no verdict): kept out of the rule+judge "
                     "scores like failed requests; rerun the same command to ask the judge again")
    return {"model": models[0] if len(models) == 1 else models, "metrics": summary["metrics"],
            "problems": summary["problems"], "asked": sum(bool(r.get("judge")) for r in graded),
            "flipped": sum(1 for r in graded if (r.get("judge") or {}).get("verdict") is True and not r["correct"]),
            "errors": len(errors), "notes": notes}


# --- a checkpoint, end to end ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """A model folder and, when it lies in a run folder (``<run>/checkpoints/step_N/model``), the run and step."""

    model_dir: Path
    run_dir: Path | None = None
    step: int | None = None

    @property
    def run_config(self) -> dict[str, Any] | None:
        """The run's ``config.json`` (``None`` outside a run folder)."""
        return json.loads((self.run_dir / "config.json").read_text()) if self.run_dir is not None else None


def locate_checkpoint(path: str | Path) -> Checkpoint:
    """Resolve a model folder, a checkpoint folder (``step_N``) or a run folder (its newest checkpoint).

    Example:
        >>> locate_checkpoint("/nonexistent/model")
        Traceback (most recent call last):
        ...
        FileNotFoundError: /nonexistent/model: no such folder; pass a model folder such as runs/<name>/checkpoints/step_000040/model, or a run folder
    """
    from .checkpoint import latest_checkpoint

    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: no such folder; pass a model folder such as "
                                "runs/<name>/checkpoints/step_000040/model, or a run folder")
    if _is_run_folder(p):
        latest = latest_checkpoint(p)
        if latest is None:
            raise FileNotFoundError(f"run folder {p} has no checkpoint yet (checkpoints/step_N/model)")
        p = latest / "model"
    elif _STEP.match(p.name) and (p / "model").is_dir():
        p = p / "model"
    step_dir = p.parent
    if p.name == "model" and _STEP.match(step_dir.name) and step_dir.parent.name == "checkpoints" \
            and _is_run_folder(step_dir.parent.parent):
        return Checkpoint(p, step_dir.parent.parent, int(_STEP.match(step_dir.name).group(1)))
    return Checkpoint(p)


def _is_run_folder(p: Path) -> bool:
    """A run folder has a ``config.json`` naming a task (a model folder's ``config.json`` does not)."""
    try:
        config = json.loads((p / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "task" in config and "max_steps" in config


def _folder_task(task: str) -> str:
    """A task id as a folder name part (a mixture's ``A-v0:0.7,B-v0:0.3`` as ``A-v0@0.7+B-v0@0.3``)."""
    return task.replace(",", "+").replace(":", "@")


def default_out_dir(ckpt: Checkpoint, settings: EvalSettings) -> Path:
    """``<run>/evals/step_<N>-<task>-<split>-n<K>`` for a run's checkpoint, else ``evals/<model>-<task>-<split>-n<K>``."""
    tail = f"{_folder_task(settings.task)}-{settings.split}-n{settings.n}"
    if ckpt.run_dir is not None and ckpt.step is not None:
        return ckpt.run_dir / "evals" / f"step_{ckpt.step:06d}-{tail}"
    return Path("evals") / f"{ckpt.model_dir.resolve().name}-{tail}"


def evaluate_checkpoint(model: str | Path, *, out_dir: str | Path | None = None, device: str | None = None,
                        overwrite: bool = False, progress: bool = True, **overrides: Any) -> EvalOutcome:
    """Evaluate a checkpoint as its run did (see :func:`settings_from_run`), with ``overrides`` applied.

    Args:
        model: a model folder (``runs/<name>/checkpoints/step_N/model``), a checkpoint or a run folder.
        out_dir: the eval folder (default :func:`default_out_dir`); rerunning resumes it.
        device: where the model runs (default: the run's device, else ``cpu``).
        overrides: :class:`EvalSettings` fields (``task`` is required outside a run folder).
    """
    ckpt = locate_checkpoint(model)
    run_config = ckpt.run_config or {}
    if not run_config and "task" not in overrides:
        raise ValueError(f"{model} is not inside a run folder (runs/<name>/checkpoints/step_N/model), so there is no "
                         "run to take the task from: pass --task, e.g. --task GSM8K-v0")
    lm, tokenizer = load_model(ckpt.model_dir)
    if "max_response_tokens" not in run_config and "max_response_tokens" not in overrides:
        positions = getattr(lm.config, "max_position_embeddings", None) or 2048
        overrides["max_response_tokens"] = min(1024, positions // 2)
    settings = settings_from_run(run_config, **overrides)
    device = device or run_config.get("device") or "cpu"
    if str(device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: no CUDA device here (the run trained on {run_config.get('device')!r}); "
                             "pass --device cpu")
    engine = _make_engine(settings, lm, tokenizer, device)
    task = eval_task(settings)
    problems = eval_problems(task, settings)
    identity = {"model": str(ckpt.model_dir), "run": str(ckpt.run_dir) if ckpt.run_dir else None,
                "checkpoint_step": ckpt.step, "fingerprint": engine.fingerprint()}
    outcome = run_eval(engine, task, problems, settings, out_dir or default_out_dir(ckpt, settings),
                       tokenizer=tokenizer, identity=identity, overwrite=overwrite, progress=progress)
    return EvalOutcome(outcome.out_dir, outcome.summary, publish_summary(ckpt, outcome))


def evaluate_endpoint(base_url: str, model: str, *, out_dir: str | Path | None = None, api: str | None = None,
                      concurrency: int = 8, timeout_s: float = 120.0, retries: int = 4,
                      api_key_env: str = "OPENAI_API_KEY", overwrite: bool = False, progress: bool = True,
                      rpm: float | None = None, tpm: float | None = None, price_in: float | None = None,
                      price_out: float | None = None, tokenizer: str | None = None, judge_endpoint: str | None = None,
                      judge_model: str | None = None, **overrides: Any) -> EvalOutcome:
    """Evaluate the model an OpenAI-compatible server serves (``dapo-env eval --endpoint URL --model NAME``).

    The model is asked as its users ask it: over the **chat API** (the task's prompt as the user message, after
    the task's system prompt if it has one; the server applies its own chat template). ``api="completions"``
    sends the rendered prompt as raw text to ``/v1/completions`` (what a base model or a run's own checkpoint
    was trained on; ``chat_template=False`` in ``overrides`` means the same), ``"auto"`` completions falling
    back to chat. A multi-turn task is played as episodes over chat. The records, summary and resume are
    :func:`run_eval`'s; what is graded is the final content (reasoning kept apart, :mod:`.served`), with each
    sample's token usage. A request that fails after its retries is recorded as ``error:endpoint`` and re-run
    by the next run of the command.

    Args:
        base_url: the server's OpenAI base URL (``http://127.0.0.1:8000/v1``).
        model: the served model's name.
        out_dir: the eval folder (default ``evals/<model>-<task>-<split>-n<K>``).
        api: ``"chat"`` (default), ``"completions"`` or ``"auto"``.
        concurrency, timeout_s, retries, api_key_env, rpm, tpm: see
            :class:`~dapo_env.learners.engines.openai_engine.EndpointConfig`.
        price_in, price_out: prices per million prompt / completion tokens: the summary's ``usage.cost``.
        tokenizer: a tokenizer folder that counts the tokens the server does not report.
        judge_endpoint, judge_model: a judge model asked about the rules' negatives (:mod:`.judge`).
        overrides: :class:`EvalSettings` fields (``task`` is required).
    """
    from ..engines.openai_engine import APIS, EndpointConfig, OpenAIEngine
    from ..engines.pacing import Pacer
    from ..rollout.setup import is_multi_turn

    if "task" not in overrides:
        raise ValueError("an endpoint eval needs --task (e.g. --task GSM8K-v0)")
    template, explicit = overrides.get("chat_template"), api
    if api is None:
        api = "completions" if template is False else "chat"
    if api not in APIS:
        raise ValueError(f"api {api!r}: choose one of {APIS}")
    if template is not None and template != (api == "chat"):
        raise ValueError(f"--api {api} and --{'' if template else 'no-'}chat-template disagree: with --endpoint, "
                         "--api chat is the server's chat template and --api completions raw text; pass one of them")
    overrides["chat_template"] = api == "chat"
    settings = settings_from_run({}, engine="openai", **overrides)
    task = eval_task(settings)
    if is_multi_turn(task):  # episodes always go over chat (as before: --no-chat-template changes nothing there)
        if explicit == "completions":
            raise ValueError(f"{settings.task} is multi-turn: its episodes are played over the chat API; drop --api "
                             "completions")
        if judge_endpoint or judge_model:
            raise ValueError(f"{settings.task} is multi-turn: its environment grades each episode turn by turn, so "
                             "there is no single answer for a judge; drop --judge-endpoint/--judge-model")
        api = "chat"
    if (price_in is None) != (price_out is None) or any(p is not None and p < 0 for p in (price_in, price_out)):
        raise ValueError("pass both --price-in and --price-out (dollars per million tokens, >= 0), or neither")
    problems = eval_problems(task, settings)
    config = EndpointConfig(base_url=base_url, model=model, api=api, concurrency=concurrency, timeout_s=timeout_s,
                            retries=retries, api_key_env=api_key_env, on_error="record", rpm=rpm, tpm=tpm)
    engine = OpenAIEngine(config, system_prompt=task.system_prompt)
    judge = None
    if judge_endpoint or judge_model:
        from .judge import Judge, JudgeSettings

        # the judge shares the evaluated model's pacer when it is the same server (one rate limit)
        same_server = judge_endpoint and EndpointConfig(base_url=judge_endpoint, model="j").base_url == config.base_url
        judge = Judge(JudgeSettings(endpoint=judge_endpoint or "", model=judge_model or ""),
                      concurrency=concurrency, timeout_s=timeout_s, retries=retries, api_key_env=api_key_env,
                      rpm=rpm, tpm=tpm)
        if same_server:
            judge.engine.client.pacer = engine.client.pacer
    counter = None
    if tokenizer:
        from transformers import AutoTokenizer

        counter = AutoTokenizer.from_pretrained(tokenizer)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"
    out = out_dir or Path("evals") / f"{safe}-{_folder_task(settings.task)}-{settings.split}-n{settings.n}"
    identity: dict[str, Any] = {"model": model, "endpoint": config.base_url, "api": api}
    if price_in is not None:
        identity["pricing"] = {"price_in": price_in, "price_out": price_out, "per": "1M tokens"}
    if judge is not None:
        identity["judge"] = judge.settings.identity()
    outcome = run_eval(engine, task, problems, settings, out, identity=identity, overwrite=overwrite,
                       progress=progress, messages=True, served=True, count_tokenizer=counter, judge=judge)
    pacer: Pacer = engine.client.pacer
    if pacer.active or pacer.pauses:
        outcome.summary["pacing"] = pacer.stats()
        _write_atomic(outcome.summary_path, json.dumps(outcome.summary, indent=2, default=str))
    return outcome


def publish_summary(ckpt: Checkpoint, outcome: EvalOutcome) -> Path | None:
    """Copy an eval's metrics to ``<run>/eval/step_<N>.summary.json`` (the pass@k table of ``dapo-env report``)
    when the checkpoint lies in a run folder and the eval is of the run's own held-out problems (its task,
    knobs, verifier and split); otherwise (not comparable with the run's own evaluations) nothing. Returns
    the path written, or ``None``.
    """
    from .run_folder import eval_summary_path, write_text_atomic

    config = ckpt.run_config
    settings = outcome.summary["settings"]
    same = (config is not None and ckpt.step is not None and _same_task(settings["task"], config.get("task"))
            and settings["split"] == config.get("eval_split", "test")
            and settings["task_kwargs"] == dict(config.get("task_kwargs") or {})
            and settings["verifier"] == config.get("verifier"))
    if not same:
        return None
    info = {"task": settings["task"], "split": settings["split"], "problems": outcome.summary["problems"],
            "n": settings["n"], "temperature": settings["temperature"], "max_response_tokens":
            settings["max_response_tokens"], "eval": os.path.relpath(outcome.out_dir, ckpt.run_dir)}
    path = eval_summary_path(ckpt.run_dir, ckpt.step)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({"metrics": outcome.summary["metrics"], **info}, indent=2))
    return path


#: The file that marks a model folder as a peft (LoRA) adapter rather than full weights.
ADAPTER_CONFIG = "adapter_config.json"


def load_model(model_dir: str | Path) -> tuple[Any, Any]:
    """The model (frozen, fp32) and tokenizer of a model folder, loaded as the trainer loads them: full
    weights, or a folder holding a peft adapter (``adapter_config.json``: the base model its config names plus
    the adapter; ``checkpoint.load_pretrained``, the one loader of both kinds)."""
    from .checkpoint import load_pretrained

    return load_pretrained(model_dir, trainable=False)


def eval_task(settings: EvalSettings) -> Any:
    """The task an eval grades with: the settings' task with their prompt template and custom verifier; the
    task's own verifier also reads the common answer forms where its prompt states no format
    (:mod:`~dapo_env.learners.run.answer_forms`), and a run's shared rows are split as the run split them."""
    from .answer_forms import with_common_forms
    from .heldout import split_if_shared
    from ..rollout.setup import task_with

    task = task_with(settings.task, verifier=settings.verifier, prompt_template=settings.prompt_template)
    if settings.verifier is None:  # the task's own verifier: also read the common answer forms (answer_forms)
        task = with_common_forms(task)
    if settings.heldout_from is None:
        return task
    return split_if_shared(task, train_split=settings.heldout_from, eval_split=settings.split,
                           task_kwargs=settings.task_kwargs, eval_size=settings.heldout_size)


def eval_problems(task: Any, settings: EvalSettings) -> list[Problem]:
    """The problems an eval covers: the first ``settings.size`` of its split (all when ``None``)."""
    from .evaluation import load_eval_problems

    size = settings.size if settings.size is not None else len(task.load(split=settings.split,
                                                                          **dict(settings.task_kwargs)))
    problems = load_eval_problems(task, split=settings.split, size=size, task_kwargs=dict(settings.task_kwargs))
    if not problems:
        raise ValueError(f"{settings.task} split {settings.split!r} has no problems: pass another --split")
    return problems


def _make_engine(settings: EvalSettings, model: Any, tokenizer: Any, device: str) -> Any:
    """The trainer's engine factory with the run's engine, device and precision; HF batches
    ``settings.batch_size`` rows per forward (the trainer's 256 by default)."""
    from ..algo.batch import autocast_dtype
    from ..engines import make_engine, resolve_engine_kind

    kind = resolve_engine_kind(settings.engine)
    extra = {"batch_size": settings.batch_size} if kind == "hf" else {}
    return make_engine(kind, model, tokenizer, device=device, seed=settings.seed,
                       autocast_dtype=autocast_dtype(settings.precision), **extra)


__all__ = ["ADAPTER_CONFIG", "Checkpoint", "EvalOutcome", "EvalSettings", "RUN_FIELDS", "default_out_dir",
           "eval_problems", "eval_task", "evaluate_checkpoint", "evaluate_endpoint", "load_model", "locate_checkpoint",
           "publish_summary", "read_samples", "run_eval", "settings_from_run", "summarize_eval"]
