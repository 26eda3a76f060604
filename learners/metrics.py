"""Run observability: a metrics JSONL stream (one line per step) and PNG plots of the main curves.

Plots use matplotlib's Agg backend (no display needed) and are rewritten during the run, so a
``runs/<name>/curves.png`` always shows the curves so far.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> log = MetricsLog(d / "metrics.jsonl")
    >>> log.write({"step": 1, "reward/mean": 0.5})
    >>> read_metrics(d / "metrics.jsonl")[0]["reward/mean"]
    0.5
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Wall-clock metrics: excluded when comparing a resumed run's stream with an uninterrupted one.
TIMING_KEYS = ("time/step_s", "time/rollout_s", "time/update_s", "time/eval_s", "perf/rollout_tokens_per_s",
               "perf/update_tokens_per_s", "time/elapsed_s", "time/cpu_s")

#: (panel title, metric keys) for :func:`plot_metrics`.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("accuracy", ("eval/accuracy", "rollout/accuracy_before_filter", "rollout/accuracy")),
    ("reward", ("reward/mean",)),
    ("entropy", ("policy/entropy",)),
    ("clip fraction", ("policy/clip_frac_high", "policy/clip_frac_low")),
    ("response length", ("response/length_mean", "response/length_max")),
    ("zero-advantage group share", ("rollout/zero_adv_share",)),
    ("logprob mismatch |engine - learner|", ("policy/logprob_mismatch_mean", "policy/logprob_mismatch_max")),
    ("drift from init (relative L2)", ("policy/drift_from_init",)),
    ("tool use (tasks with tools)", ("tool/calls_per_episode", "tool/no_call_share", "tool/failed_share")),
)

#: Metrics computed from the training batch (the groups kept after dynamic sampling), by key or key prefix:
#: a step whose batch is empty (``rollout/num_groups == 0``) has no value for them. Everything else
#: (held-out accuracy, accuracy before filtering, lengths, rounds, drift, ...) describes every sample
#: generated that step, or the weights, and stays meaningful.
BATCH_KEYS = ("reward/", "loss/", "is/", "rollout/accuracy", "policy/entropy", "policy/clip_frac_high",
              "policy/clip_frac_low", "policy/approx_kl", "policy/logprob_mismatch_mean",
              "policy/logprob_mismatch_max", "optim/grad_norm", "perf/update_tokens_per_s", "perf/padded_share", "time/update_s")


#: A mixture's per-task metrics (``task/<id>/<name>``) computed from the training batch.
TASK_BATCH_KEYS = ("reward_mean", "accuracy", "groups")


def is_batch_metric(key: str) -> bool:
    """Whether ``key`` is computed from the training batch (see :data:`BATCH_KEYS`).

    A mixture's per-task ``task/<id>/reward_mean``, ``accuracy`` and ``groups`` are batch metrics too.

    Example:
        >>> is_batch_metric("reward/mean"), is_batch_metric("rollout/accuracy_before_filter")
        (True, False)
        >>> is_batch_metric("task/A-v0/accuracy"), is_batch_metric("task/A-v0/informative_share")
        (True, False)
    """
    if key.startswith("task/"):
        return key.rsplit("/", 1)[-1] in TASK_BATCH_KEYS
    return any(key == k or (k.endswith("/") and key.startswith(k)) for k in BATCH_KEYS)


def empty_batch(record: Mapping[str, Any]) -> bool:
    """Whether the step of ``record`` trained on an empty batch (``rollout/num_groups == 0``)."""
    return record.get("rollout/num_groups") == 0


def metric_series(records: Iterable[Mapping[str, Any]], key: str) -> tuple[list[int], list[float | None]]:
    """The points to draw for ``key``: ``(steps, values)``, where ``None`` is a gap (break the line).

    A record without ``key`` is skipped (the metric was not measured that step, e.g. held-out accuracy
    between evaluations: the line joins its neighbours). A gap is a value that is null or not finite, or
    a batch metric (:func:`is_batch_metric`) of a step with an empty batch (:func:`empty_batch`), whatever
    value the record holds: a trainer that wrote 0.0 there did not measure a collapse.

    Example:
        >>> recs = [{"step": 1, "reward/mean": 0.5, "rollout/num_groups": 4},
        ...         {"step": 2, "reward/mean": 0.0, "rollout/num_groups": 0},
        ...         {"step": 3, "rollout/num_groups": 2}]
        >>> metric_series(recs, "reward/mean")
        ([1, 2], [0.5, None])
    """
    steps: list[int] = []
    values: list[float | None] = []
    for r in records:
        gap = empty_batch(r) and is_batch_metric(key)
        if key not in r and not gap:
            continue
        v = r.get(key)
        finite = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        steps.append(int(r["step"]))
        values.append(None if gap or not finite else float(v))
    return steps, values


def empty_batch_spans(records: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Runs of consecutive steps with an empty batch, as inclusive ``(first, last)`` step pairs.

    Example:
        >>> empty_batch_spans([{"step": s, "rollout/num_groups": n} for s, n in enumerate([3, 0, 0, 2, 0], 1)])
        [(2, 3), (5, 5)]
    """
    spans: list[tuple[int, int]] = []
    for r in records:
        if not empty_batch(r):
            continue
        step = int(r["step"])
        if spans and spans[-1][1] == step - 1:
            spans[-1] = (spans[-1][0], step)
        else:
            spans.append((step, step))
    return spans


def staleness_metrics(policy_steps: Sequence[int | None], current: int, *, max_staleness: int
                      ) -> dict[str, float | None]:
    """The age of consumed samples in training steps: ``current - policy_step`` per sample (the step whose
    weights generated it).

    Returns ``staleness/mean``, ``staleness/max`` and the histogram as shares of the samples:
    ``staleness/share_0`` ... ``staleness/share_<max_staleness>`` and ``staleness/share_older`` (samples
    older than the bound: groups dynamic sampling carried over from an earlier batch). Samples without a
    step (``None`` or negative) are left out; all ``None`` when none has one.

    Example:
        >>> staleness_metrics([3, 3, 2, 0], 3, max_staleness=1)
        {'staleness/mean': 1.0, 'staleness/max': 3.0, 'staleness/share_0': 0.5, 'staleness/share_1': 0.25, 'staleness/share_older': 0.25}
    """
    if max_staleness < 0:
        raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
    keys = [f"staleness/share_{s}" for s in range(max_staleness + 1)] + ["staleness/share_older"]
    ages = np.array([current - v for v in policy_steps if v is not None and v >= 0], dtype=np.int64)
    if ages.size == 0:
        return dict.fromkeys(["staleness/mean", "staleness/max", *keys])
    counts = np.bincount(np.clip(ages, 0, max_staleness + 1), minlength=max_staleness + 2)
    out: dict[str, float | None] = {"staleness/mean": float(ages.mean()), "staleness/max": float(ages.max())}
    out.update({key: float(c) / ages.size for key, c in zip(keys, counts)})
    return out


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


#: The source's counters every record carries (0.0 without a rollout worker).
ASYNC_KEYS = ("async/rounds_expired", "async/rounds_ahead", "async/worker_restarts")


def rollout_record(stats: Mapping[str, Any], groups: Sequence[Any], *, step: int, batch_size: int,
                   rollout_s: float, deferred: int | None, policy_steps: Sequence[int | None],
                   max_staleness: int) -> dict[str, Any]:
    """The rollout half of a step's record: the kept ``groups`` (rewards, accuracy), the sampler's ``stats``
    of the batch (accuracy before filtering, rounds, lengths) and the source's own (``episode/``,
    ``difficulty/``, ``async/``, ``time/`` keys), the samples' staleness in training steps (their
    ``policy_steps`` against ``step - 1``, the weights that sample now) and ``dist/groups_deferred`` when
    ``deferred`` is given.

    Example:
        >>> from dapo_env.types import Completion, Group
        >>> g = Group("1", "p", (Completion("a"), Completion("b")), (1.0, -1.0), (True, False), (True, True))
        >>> stats = {"accuracy_before_filter": 0.5, "zero_advantage_share": 0.0, "rounds": 1.0,
        ...          "samples_generated": 2.0, "partial_batches": 0.0, "response_length_mean": float("nan"),
        ...          "response_length_max": float("nan"), "truncation_rate": 0.0, "generated_tokens": 0.0}
        >>> r = rollout_record(stats, [g], step=1, batch_size=1, rollout_s=1.0, deferred=None,
        ...                    policy_steps=[0, 0], max_staleness=0)
        >>> r["reward/mean"], r["rollout/accuracy"], r["response/length_max"], r["staleness/max"]
        (0.0, 0.5, None, 0.0)
    """
    rewards = [r for g in groups for r in g.rewards]
    correct = [c for g in groups for c in g.correct]
    record: dict[str, Any] = {
        "step": step,
        "reward/mean": float(np.mean(rewards)) if rewards else None,
        "rollout/accuracy": float(np.mean(correct)) if correct else None,
        "rollout/accuracy_before_filter": float(stats["accuracy_before_filter"]),
        "rollout/zero_adv_share": float(stats["zero_advantage_share"]),
        "rollout/rounds": int(stats["rounds"]),
        "rollout/samples_generated": int(stats["samples_generated"]),
        "rollout/num_groups": len(groups),
        "rollout/partial": 1.0 if len(groups) < batch_size else 0.0,
        "rollout/partial_batches": int(stats["partial_batches"]),
        "response/length_mean": _finite(stats["response_length_mean"]),
        "response/length_max": None if math.isnan(stats["response_length_max"]) else int(stats["response_length_max"]),
        "response/truncation_rate": _finite(stats["truncation_rate"]),
        "perf/rollout_tokens_per_s": float(stats["generated_tokens"]) / max(rollout_s, 1e-9),
        "time/rollout_s": rollout_s,
    }
    record.update({k: float(v) for k, v in stats.items() if "/" in k})  # the source's, namespaced
    if deferred is not None:
        record["dist/groups_deferred"] = deferred
    record.update(staleness_metrics(policy_steps, step - 1, max_staleness=max_staleness))
    for key in ASYNC_KEYS:
        record.setdefault(key, 0.0)
    return record


def progress_postfix(record: Mapping[str, Any], eval_history: Sequence[tuple[int, float]]) -> dict[str, str]:
    """The progress bar's postfix for a step's ``record``: training accuracy before filtering, the latest
    held-out accuracy, partial batches so far, and for a task with tools the calls per episode and the share
    of episodes without a call.

    Example:
        >>> progress_postfix({"rollout/accuracy_before_filter": 0.25, "rollout/partial_batches": 0,
        ...                   "tool/calls_per_episode": 1.5, "tool/no_call_share": 0.125}, [(5, 0.5)])
        {'acc': '0.25', 'eval': '0.50', 'partial': '0', 'calls': '1.50', 'no_call': '0.12'}
        >>> progress_postfix({"rollout/accuracy_before_filter": 0.25, "rollout/partial_batches": 0,
        ...                   "task/A-v0/accuracy_before_filter": 0.5, "task/A-v0/informative_share": 0.25}, [])
        {'acc': '0.25', 'eval': '-', 'partial': '0', 'A-v0': '0.50/0.25'}
    """
    postfix = {"acc": f"{record['rollout/accuracy_before_filter']:.2f}",
               "eval": f"{eval_history[-1][1]:.2f}" if eval_history else "-",
               "partial": str(record["rollout/partial_batches"])}
    if record.get("tool/calls_per_episode") is not None:
        postfix["calls"] = f"{record['tool/calls_per_episode']:.2f}"
        postfix["no_call"] = f"{record['tool/no_call_share']:.2f}"
    for task_id in record_task_ids(record):  # a mixture: accuracy before filtering / informative share, per task
        acc, share = (record.get(f"task/{task_id}/{k}") for k in ("accuracy_before_filter", "informative_share"))
        postfix[task_id] = f"{_short(acc)}/{_short(share)}"
    return postfix


def _short(value: Any) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def record_task_ids(record: Mapping[str, Any]) -> list[str]:
    """The task ids of a mixture run's per-task metrics (``task/<id>/...`` keys) in a record, in first-seen order.

    Example:
        >>> record_task_ids({"task/A-v0/accuracy": 0.5, "task/B-v0/accuracy": 0.1, "reward/mean": 0.0})
        ['A-v0', 'B-v0']
    """
    return list(dict.fromkeys(key.split("/")[1] for key in record if key.startswith("task/") and key.count("/") >= 2))


#: Rollout-correction metrics of :func:`~dapo_env.learners.algo.update.update_policy`, logged as ``is/<name without is_>``.
IS_METRICS = ("is_weight_mean", "is_weight_max", "is_truncated_share", "is_masked_share", "mismatch_k3", "mismatch_abs")


def update_record(update: Mapping[str, float], *, lr: float, optimizer_steps: int, drift: float | None,
                  is_correction: bool) -> dict[str, Any]:
    """The update half of a step's record from :func:`~dapo_env.learners.algo.update.update_policy`'s metrics
    (each the mean over the step's optimizer steps; ``None`` where the step had no update), plus the
    update's ``update_s`` (seconds) and ``trained_tokens`` (loss tokens x epochs) when it ran.

    Example:
        >>> update_record({"loss": 0.5, "entropy": 1.0}, lr=1e-3, optimizer_steps=4, drift=None,
        ...               is_correction=False)["loss/policy"]
        0.5
    """
    record = {
        "policy/entropy": update.get("entropy"),
        "policy/clip_frac_high": update.get("clip_frac_high"),
        "policy/clip_frac_low": update.get("clip_frac_low"),
        "policy/approx_kl": update.get("approx_kl"),
        "loss/policy": update.get("loss"),
        "optim/grad_norm": update.get("grad_norm"),
        "optim/lr": float(lr),
        "optim/steps": optimizer_steps,
        "policy/drift_from_init": drift,
    }
    if "update_s" in update:
        record["perf/update_tokens_per_s"] = update["trained_tokens"] / max(update["update_s"], 1e-9)
        record["time/update_s"] = update["update_s"]
        record["perf/padded_share"] = update.get("padded_share")
    if is_correction:
        record.update({f"is/{k.removeprefix('is_')}": update.get(k) for k in IS_METRICS})
    return record


class MetricsLog:
    """Append-only JSONL writer, flushed and fsynced per line so a killed run loses at most a line.

    On resume, :meth:`truncate_after` drops lines for steps after the checkpoint, so the stream on
    disk is exactly what an uninterrupted run would have written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(_jsonable(record), sort_keys=True)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_after(self, step: int) -> None:
        """Keep only records with ``step <= step`` (and drop a torn last line)."""
        if not self.path.exists():
            return
        kept = [r for r in read_metrics(self.path) if int(r.get("step", 0)) <= step]
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for r in kept:
                f.write(json.dumps(r, sort_keys=True) + "\n")
        os.replace(tmp, self.path)


def _jsonable(record: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in record.items():
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Read a metrics JSONL file, skipping a torn (partially written) last line."""
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def strip_timing(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Records without the wall-clock keys in :data:`TIMING_KEYS`."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def plot_metrics(records: list[Mapping[str, Any]], path: str | Path, *, title: str = "") -> Path:
    """Draw the main curves (accuracy, entropy, clip fractions, lengths, ...) into one PNG.

    Panels whose metrics never have a value are skipped. Batch metrics of steps with an empty batch are
    gaps (:func:`metric_series`), and those steps are shaded grey in panels that show a batch metric.
    Written atomically (tmp file, then rename).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {k: metric_series(records, k) for _, keys in PANELS for k in keys}
    panels = [(t, keys) for t, keys in PANELS if any(v is not None for k in keys for v in series[k][1])]
    spans = empty_batch_spans(records)
    cols = 2
    rows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3.0 * rows), squeeze=False)
    for ax, (name, keys) in zip(axes.flat, panels):
        for key in keys:
            xs, ys = series[key]
            drawn = [i for i, y in enumerate(ys) if y is not None]
            if drawn:  # markers on every point of a short series, else on points isolated between gaps
                alone = [i for i in drawn if (i == 0 or ys[i - 1] is None) and (i + 1 == len(ys) or ys[i + 1] is None)]
                ax.plot(xs, [math.nan if y is None else y for y in ys], marker="o",
                        markevery=None if len(drawn) < 30 else alone, markersize=3, label=key)
        if any(is_batch_metric(k) for k in keys):
            for first, last in spans:
                ax.axvspan(first - 0.5, last + 0.5, color="0.85", lw=0, zorder=0)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)
    return path


__all__ = ["ASYNC_KEYS", "BATCH_KEYS", "IS_METRICS", "PANELS", "TIMING_KEYS", "MetricsLog", "empty_batch",
           "empty_batch_spans", "is_batch_metric", "metric_series", "plot_metrics", "progress_postfix", "read_metrics",
           "rollout_record", "staleness_metrics", "strip_timing", "update_record"]
