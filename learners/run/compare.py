"""``dapo-env eval compare DIR...``: several evals in one table, and whether a lead on the same problems is real.

Each DIR is an eval folder (``dapo-env eval`` wrote its ``summary.json`` and ``samples.jsonl``). The table has a
row per eval and task (and a second row, ``+judge``, for an eval graded with a judge): problems, greedy,
pass@k, avg@k, maj@k with their 95% intervals, tokens, cost and failed requests. It is printed, and written as
markdown (``--markdown``), JSON (``--json``) and one self-contained HTML page with a plot (``--html``).

**The paired comparison.** Two evals of the same task and split answered the same problems, so their
difference is judged problem by problem (a paired test), not from two independent intervals:

- ``greedy`` (one binary verdict per problem): the **exact McNemar test**: of the ``b + c`` problems where
  the two disagree, A alone right on ``b``; under "no difference" ``b ~ Binomial(b + c, 1/2)``; two-sided
  p = ``min(1, 2 * P(X <= min(b, c)))``;
- ``avg`` (per-problem pass rate, avg@n; pass@1): the **paired sign-flip permutation test** of the mean
  per-problem difference: exact (all ``2^m`` sign patterns of the ``m`` non-zero differences) for
  ``m <= 16``, else 20,000 random patterns (fixed seed, p with the +1 correction). For binary differences it
  equals the exact McNemar p-value.

Each pair reports the mean difference (A - B) with a paired bootstrap 95% interval, the p-value and whether
it is beyond chance at ``--alpha`` (default 0.05). Failed requests and problems missing from either eval are
left out (counted).

Example:
    >>> mcnemar_exact(1, 7)   # 8 discordant problems, 1 vs 7: 2 * 9/256
    0.0703125
    >>> sign_flip_test([1, 1, 1, 1, 1, -1, 0]) == mcnemar_exact(5, 1)
    True
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

EXACT_MAX = 16
RESAMPLES = 20_000


# --- the tests --------------------------------------------------------------------------------------------------
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` (A right, B wrong) and ``c``."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(b, c) + 1)) / 2 ** m
    return min(1.0, 2.0 * tail)


def sign_flip_test(diffs: Sequence[float], *, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of ``mean(diffs) == 0`` (see the module
    docstring: exact up to :data:`EXACT_MAX` non-zero differences)."""
    d = np.asarray([x for x in diffs if x != 0], dtype=np.float64)
    m = d.size
    if m == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-12 * max(1.0, float(np.abs(d).sum()))
    if m <= EXACT_MAX:
        signs = 1 - 2 * ((np.arange(2 ** m)[:, None] >> np.arange(m)[None, :]) & 1)  # (2^m, m) all patterns
        return float(np.mean(np.abs(signs @ d) >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(RESAMPLES, m))
    return float((np.sum(np.abs(signs @ d) >= observed) + 1) / (RESAMPLES + 1))


def paired_bootstrap_ci(diffs: Sequence[float], *, level: float = 0.95, resamples: int = 2000,
                        seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean per-problem difference (problems resampled, pairs kept)."""
    from dapo_env.evaluation import bootstrap_ci

    return bootstrap_ci(diffs, level=level, resamples=resamples, seed=seed)


# --- reading evals ----------------------------------------------------------------------------------------------
@dataclass
class EvalEntry:
    """One eval folder: its summary, label and per-problem outcomes (failed requests left out)."""

    path: Path
    summary: dict[str, Any]
    label: str = ""
    greedy: dict[tuple[int, str], bool] = field(default_factory=dict)
    rates: dict[tuple[int, str], float] = field(default_factory=dict)

    @property
    def task_key(self) -> tuple[Any, ...]:
        s = self.summary.get("settings", {})
        return (self.summary.get("task"), self.summary.get("split"), json.dumps(s.get("task_kwargs", {}), sort_keys=True))


def load_eval(path: str | Path) -> EvalEntry:
    """An eval folder's summary and its per-problem greedy verdicts and pass rates (avg@n over complete problems)."""
    from .eval_run import SAMPLES_FILE, SUMMARY_FILE, read_samples
    from ..evaluation import is_failed

    path = Path(path)
    if not (path / SUMMARY_FILE).is_file():
        raise FileNotFoundError(f"{path} holds no {SUMMARY_FILE}: pass eval folders written by `dapo-env eval` "
                                "(rerun an unfinished eval to write its summary)")
    summary = json.loads((path / SUMMARY_FILE).read_text())
    n = int(summary.get("settings", {}).get("n") or 0)
    latest = {(r["index"], bool(r["greedy"]), r["sample"]): r for r in read_samples(path / SAMPLES_FILE)}
    entry = EvalEntry(path, summary)
    sampled: dict[tuple[int, str], list[bool]] = {}
    broken: set[tuple[int, str]] = set()
    for (index, greedy, sample), r in latest.items():
        key = (index, str(r.get("problem_id")))
        if greedy:
            if not is_failed(r):
                entry.greedy[key] = bool(r["correct"])
        elif sample < n:
            (broken.add(key) if is_failed(r) else sampled.setdefault(key, []).append(bool(r["correct"])))
    entry.rates = {k: sum(v) / len(v) for k, v in sampled.items() if k not in broken and len(v) == n}
    return entry


def _labels(entries: Sequence[EvalEntry]) -> None:
    for e in entries:
        model = str(e.summary.get("model") or e.path.name)
        e.label = Path(model).name if "/" in model and not e.summary.get("endpoint") else model
        if e.summary.get("checkpoint_step") is not None:
            e.label += f" step {e.summary['checkpoint_step']}"
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.label] = counts.get(e.label, 0) + 1
    for e in entries:
        if counts[e.label] > 1 or not e.label:
            e.label = f"{e.label} ({e.path.name})" if e.label else e.path.name


# --- the table --------------------------------------------------------------------------------------------------
def table_rows(entries: Sequence[EvalEntry]) -> list[dict[str, Any]]:
    """One row per eval (and per judged eval, a ``+judge`` row with the rule+judge metrics)."""
    rows = []
    for e in entries:
        s = e.summary
        usage = s.get("usage") or {}
        base = {"eval": e.label, "task": s.get("task"), "split": s.get("split"), "problems": s.get("problems"),
                "n": s.get("n"), "metrics": s.get("metrics", {}), "completion_tokens": usage.get("completion_tokens"),
                "prompt_tokens": usage.get("prompt_tokens"), "reasoning_tokens": usage.get("reasoning_tokens"),
                "cost": usage.get("cost"), "failed": (s.get("failed") or {}).get("samples", 0), "path": str(e.path)}
        rows.append(base)
        judged = s.get("judge")
        if judged:
            rows.append({**base, "eval": f"{e.label} +judge", "metrics": judged.get("metrics", {}),
                         "problems": judged.get("problems"), "judge_flipped": judged.get("flipped"),
                         "judge_errors": judged.get("errors")})
    return rows


def metric_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The metrics any row has, in a fixed order: greedy, pass@k by k, avg@n, maj@n."""
    names = {name for r in rows for name in r["metrics"]}

    def order(name: str) -> tuple[int, int]:
        kind, _, k = name.partition("@")
        return ({"greedy": 0, "pass": 1, "avg": 2, "maj": 3}.get(kind, 4), int(k) if k.isdigit() else 0)

    return sorted(names, key=order)


def _cell(metric: Mapping[str, Any] | None) -> str:
    if not metric:
        return "-"
    lo, hi = metric.get("ci95") or (float("nan"), float("nan"))
    return f"{metric['value']:.3f} [{lo:.2f}, {hi:.2f}]"


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _cost(value: Any) -> str:
    return "-" if value is None else f"${value:.4f}"


def table_cells(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """``(header, cells)`` of the comparison table."""
    metrics = metric_columns(rows)
    header = ["eval", "task", "problems", *metrics, "tokens out", "cost", "failed"]
    cells = [[str(r["eval"]), f"{r['task']} {r['split']}", str(r["problems"]), *(_cell(r["metrics"].get(m)) for m in metrics),
              _count(r["completion_tokens"]), _cost(r["cost"]), str(r["failed"])] for r in rows]
    return header, cells


# --- the paired comparison --------------------------------------------------------------------------------------
def paired(a: EvalEntry, b: EvalEntry, *, metric: str = "auto", alpha: float = 0.05) -> dict[str, Any] | None:
    """The paired comparison of two evals of the same task (``None`` when they share no task or problem)."""
    if a.task_key != b.task_key:
        return None
    use = metric
    if use == "auto":
        use = "avg" if a.rates and b.rates else "greedy"
    left, right = (a.rates, b.rates) if use == "avg" else (a.greedy, b.greedy)
    shared = sorted(set(left) & set(right))
    if not shared:
        return None
    diffs = [float(left[k]) - float(right[k]) for k in shared]
    if use == "greedy":
        b_count = sum(1 for d in diffs if d > 0)
        c_count = sum(1 for d in diffs if d < 0)
        p, test = mcnemar_exact(b_count, c_count), f"exact McNemar (A alone right {b_count}, B alone right {c_count})"
    else:
        p = sign_flip_test(diffs)
        nonzero = sum(d != 0 for d in diffs)
        test = f"paired sign-flip permutation ({'exact' if nonzero <= EXACT_MAX else f'{RESAMPLES:,} patterns'})"
    lo, hi = paired_bootstrap_ci(diffs)
    mean = float(np.mean(diffs))
    return {"a": a.label, "b": b.label, "task": a.summary.get("task"), "metric": "greedy" if use == "greedy" else
            f"avg@{a.summary.get('settings', {}).get('n')} (pass@1)", "problems": len(shared),
            "left_out": len(set(left) ^ set(right)), "a_mean": float(np.mean([left[k] for k in shared])),
            "b_mean": float(np.mean([right[k] for k in shared])), "difference": mean, "ci95": [lo, hi],
            "test": test, "p_value": p, "alpha": alpha, "significant": p < alpha}


def pairs(entries: Sequence[EvalEntry], *, metric: str = "auto", alpha: float = 0.05) -> list[dict[str, Any]]:
    """The paired comparison of every two evals of the same task, in the order given."""
    out = []
    for a, b in itertools.combinations(entries, 2):
        result = paired(a, b, metric=metric, alpha=alpha)
        if result is not None:
            out.append(result)
    return out


def pair_sentence(p: Mapping[str, Any]) -> str:
    """One line saying whether the difference is beyond chance."""
    verdict = (f"beyond chance at alpha={p['alpha']:g}" if p["significant"] else
               f"not beyond chance at alpha={p['alpha']:g}")
    return (f"{p['a']} vs {p['b']} on {p['task']} ({p['problems']} shared problems, {p['metric']}): "
            f"{p['a_mean']:.3f} vs {p['b_mean']:.3f}, difference {p['difference']:+.3f} "
            f"[{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}], {p['test']}: p = {p['p_value']:.4g}, {verdict}")


# --- renderings -------------------------------------------------------------------------------------------------
def render_text(header: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(header)]
    line = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def render_markdown(header: Sequence[str], cells: Sequence[Sequence[str]], pair_list: Sequence[Mapping[str, Any]]) -> str:
    rows = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    rows += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    text = "\n".join(rows) + "\n"
    if pair_list:
        text += "\n" + "\n".join(f"- {pair_sentence(p)}" for p in pair_list) + "\n"
    return text


def bar_chart_svg(rows: Sequence[Mapping[str, Any]], metric: str) -> str:
    """Horizontal bars of ``metric`` per row with their 95% interval as whiskers (inline SVG, scale 0..1)."""
    shown = [r for r in rows if metric in r["metrics"]]
    left, width, bar, gap = 260, 400, 18, 8
    height = 30 + len(shown) * (bar + gap)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + width + 60} {height}" role="img" '
             f'aria-label="{html.escape(metric)} per eval">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = left + tick * width
        parts.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 18}" stroke="#ddd"/>'
                     f'<text x="{x:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">{tick:g}</text>')
    for i, r in enumerate(shown):
        m = r["metrics"][metric]
        y = 8 + i * (bar + gap)
        lo, hi = m.get("ci95") or (m["value"], m["value"])
        parts.append(f'<text x="{left - 6}" y="{y + bar * 0.7:.1f}" font-size="12" text-anchor="end">'
                     f'{html.escape(str(r["eval"]))} · {html.escape(str(r["task"]))}</text>'
                     f'<rect x="{left}" y="{y}" width="{max(0.0, m["value"]) * width:.1f}" height="{bar}" fill="#0072B2"/>'
                     f'<line x1="{left + lo * width:.1f}" y1="{y + bar / 2}" x2="{left + hi * width:.1f}" '
                     f'y2="{y + bar / 2}" stroke="#000" stroke-width="1.5"/>'
                     f'<text x="{left + width + 6}" y="{y + bar * 0.7:.1f}" font-size="12">{m["value"]:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(header: Sequence[str], cells: Sequence[Sequence[str]], rows: Sequence[Mapping[str, Any]],
                pair_list: Sequence[Mapping[str, Any]]) -> str:
    """One self-contained page (no script, no network): the table, a plot of the headline metric, the pairs."""
    metrics = metric_columns(rows)
    headline = next((m for m in metrics if m.startswith("pass@1")), None) or next(iter(metrics), None)
    table = "<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"
    table += "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in cells)
    table += "</tbody></table>"
    chart = f"<h2>{html.escape(headline)} with 95% intervals</h2>{bar_chart_svg(rows, headline)}" if headline else ""
    items = "".join(f"<li>{html.escape(pair_sentence(p))}</li>" for p in pair_list)
    paired_html = f"<h2>Paired comparisons</h2><ul>{items}</ul>" if items else ""
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-variant-numeric:tabular-nums}"
             "svg{max-width:56em;width:100%}")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>dapo-env eval compare</title>'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">'
            f"<style>{style}</style></head><body><h1>Evals compared</h1>{table}{chart}{paired_html}</body></html>\n")


# --- one eval's console table -------------------------------------------------------------------------------------
def eval_console_lines(summary: Mapping[str, Any]) -> list[str]:
    """The console lines ``dapo-env eval`` prints for one summary: the metric table (rule-only and rule+judge
    side by side when a judge graded), notes, tokens and cost."""
    judged = summary.get("judge")
    lines = []
    if judged:
        lines.append(f"{'metric':<10} {'rules':>7}   95% CI           {'+judge':>7}   95% CI")
        for name, m in summary["metrics"].items():
            j = judged["metrics"].get(name)
            right = f"{j['value']:7.3f}   [{j['ci95'][0]:.3f}, {j['ci95'][1]:.3f}]" if j else f"{'-':>7}"
            lines.append(f"{name:<10} {m['value']:7.3f}   [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]   {right}")
        lines.append(f"judge {judged['model']}: asked about {judged['asked']} answer(s) the rules scored 0, flipped "
                     f"{judged['flipped']}, {judged['errors']} judge error(s)")
    else:
        lines.append(f"{'metric':<10} {'value':>7}   95% CI")
        for name, m in summary["metrics"].items():
            lines.append(f"{name:<10} {m['value']:7.3f}   [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]")
    lines += [f"note: {note}" for note in summary.get("notes", [])]
    lines += [f"note (judge): {note}" for note in (judged or {}).get("notes", [])]
    usage = summary.get("usage")
    if usage:
        text = (f"tokens: prompt {_count(usage['prompt_tokens'])}, completion {_count(usage['completion_tokens'])} "
                f"(reasoning {_count(usage['reasoning_tokens'])}) over {usage['samples']} samples")
        if usage.get("samples_counted_locally"):
            text += f"; {usage['samples_counted_locally']} counted with --tokenizer"
        if usage.get("samples_missing"):
            text += f"; not reported: {usage['samples_missing']} (pass --tokenizer to count them)"
        if usage.get("cost") is not None:
            text += f"; cost ${usage['cost']:.4f}"
        lines.append(text)
    return lines


# --- the command --------------------------------------------------------------------------------------------------
def compare(dirs: Sequence[str | Path], *, metric: str = "auto", alpha: float = 0.05) -> dict[str, Any]:
    """The comparison of eval folders: ``{"rows", "header", "cells", "pairs"}``."""
    if not dirs:
        raise ValueError("pass at least one eval folder")
    if not 0 < alpha < 1:
        raise ValueError(f"--alpha {alpha}: must be in (0, 1)")
    entries = [load_eval(d) for d in dirs]
    _labels(entries)
    rows = table_rows(entries)
    header, cells = table_cells(rows)
    return {"rows": rows, "header": header, "cells": cells, "pairs": pairs(entries, metric=metric, alpha=alpha)}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dapo-env eval compare",
        description="One table of several evals (models or runs x tasks): pass@k, avg@k, maj@k with 95%% intervals, "
                    "tokens, cost, failed requests; and for every two evals of the same task a paired test on their "
                    "shared problems (exact McNemar for greedy, sign-flip permutation for pass rates).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="eval folders written by `dapo-env eval`")
    p.add_argument("--metric", choices=["auto", "greedy", "avg"], default="auto",
                   help="what the paired test compares: greedy verdicts or per-problem pass rates (avg@n); auto = "
                        "avg when both evals sampled, else greedy (default: auto)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the paired test (default: 0.05)")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table as markdown (default: none)")
    p.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML page with a plot (default: none)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write rows and pairs as JSON (default: none)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``dapo-env eval compare``; returns the exit status (2 with a one-line error on bad input)."""
    import sys

    args = build_parser().parse_args(argv)
    try:
        result = compare(args.dirs, metric=args.metric, alpha=args.alpha)
    except (ValueError, OSError) as exc:
        print(f"dapo-env eval compare: error: {exc}", file=sys.stderr)
        return 2
    print(render_text(result["header"], result["cells"]))
    for p in result["pairs"]:
        print(pair_sentence(p))
    if len(args.dirs) > 1 and not result["pairs"]:
        print("no paired comparison: no two evals share a task, split and task knobs")
    for path, text in ((args.markdown, lambda: render_markdown(result["header"], result["cells"], result["pairs"])),
                       (args.html, lambda: render_html(result["header"], result["cells"], result["rows"], result["pairs"])),
                       (args.json, lambda: json.dumps({"rows": result["rows"], "pairs": result["pairs"]}, indent=2))):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text(), encoding="utf-8")
            print(f"wrote {path}")
    return 0


__all__ = ["EvalEntry", "bar_chart_svg", "compare", "eval_console_lines", "load_eval", "main", "mcnemar_exact",
           "paired", "pair_sentence", "pairs", "render_html", "render_markdown", "render_text", "sign_flip_test",
           "table_cells", "table_rows"]
