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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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
)


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

    Panels whose metrics never appear are skipped. Written atomically (tmp file, then rename).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(t, keys) for t, keys in PANELS if any(k in r and r[k] is not None for r in records for k in keys)]
    cols = 2
    rows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3.0 * rows), squeeze=False)
    for ax, (name, keys) in zip(axes.flat, panels):
        for key in keys:
            pts = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o" if len(pts) < 30 else None, markersize=3, label=key)
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


__all__ = ["PANELS", "TIMING_KEYS", "MetricsLog", "plot_metrics", "read_metrics", "strip_timing"]
