"""The run report: one self-contained HTML file of a run folder's curves, evaluations and samples.

``write_report(run_dir)`` reads the run folder (``learners/run/run_folder.py``: ``config.json``,
``metrics.jsonl``, ``eval/step_<N>.jsonl``, ``eval/step_<N>.summary.json``) and writes
``<run_dir>/report.html``: the config summary; a line chart per metric group (inline SVG drawn in
Python; batch metrics of steps with an empty batch are gaps, as in ``curves.png``); held-out accuracy
and pass@k / avg@k / maj@k tables; and, per eval step, a few right and wrong samples side by side with
the verifier's reasons. The page loads nothing from anywhere (its Content-Security-Policy forbids
it), runs only its own inline script (allowed by hash) and shows model output as escaped text.

Writing is cheap (tens of milliseconds for a 200-step run) and atomic (temporary file, then rename), so
a trainer may call it after every evaluation and a browser never reads a half-written page.

Example:
    >>> import json, tempfile
    >>> run = Path(tempfile.mkdtemp())
    >>> _ = (run / "metrics.jsonl").write_text("\\n".join(json.dumps({"step": s, "reward/mean": s / 10})
    ...                                                  for s in range(5)) + "\\n")
    >>> path = write_report(run)
    >>> path.name, 'id="chart-reward"' in path.read_text()
    ('report.html', True)
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from ..metrics import empty_batch_spans, is_batch_metric, metric_series, record_task_ids
from .run_folder import EvalSample, RunFolder, load_run, write_text_atomic
from .svg_chart import COLORS, Series, format_number, line_chart_svg

@dataclass(frozen=True, kw_only=True)
class Chart:
    """One line chart of the report: ``keys`` drawn over steps, ``y_range`` fixed (e.g. a share) or ``None``
    (the data's range); ``group`` is the section it goes in (``"main"``, ``"async"`` or ``"other"``)."""

    id: str
    title: str
    keys: tuple[str, ...]
    y_range: tuple[float, float] | None = None
    group: str = "main"


_SHARE = (0.0, 1.0)

#: The main charts, in page order. A chart appears when one of its keys has a value.
CHARTS: tuple[Chart, ...] = (
    Chart(id="reward", title="reward (training batch)", keys=("reward/mean",)),
    Chart(id="accuracy", title="training accuracy before / after filtering",
          keys=("rollout/accuracy_before_filter", "rollout/accuracy"), y_range=_SHARE),
    Chart(id="heldout", title="held-out accuracy", keys=("eval/accuracy",), y_range=_SHARE),
    Chart(id="entropy", title="policy entropy", keys=("policy/entropy",)),
    Chart(id="clip", title="clip fractions (high: A>0, low: A<0)",
          keys=("policy/clip_frac_high", "policy/clip_frac_low")),
    Chart(id="length", title="response length (tokens)", keys=("response/length_mean", "response/length_max")),
    Chart(id="truncation", title="truncation rate", keys=("response/truncation_rate",), y_range=_SHARE),
    Chart(id="zero-adv", title="zero-advantage group share", keys=("rollout/zero_adv_share",), y_range=_SHARE),
    Chart(id="rounds", title="generation rounds and partial batches", keys=("rollout/rounds", "rollout/partial")),
    Chart(id="groups", title="groups in the training batch", keys=("rollout/num_groups",)),
    Chart(id="tool-calls", title="tool calls per episode", keys=("tool/calls_per_episode",)),
    Chart(id="tool-use", title="tool use: episodes without a call, failed calls (share)",
          keys=("tool/no_call_share", "tool/failed_share", "tool/invalid_json_share", "tool/unknown_tool_share",
                "tool/bad_arguments_share", "tool/tool_error_share"), y_range=_SHARE),
    Chart(id="mismatch", title="log-prob mismatch |engine - learner|",
          keys=("policy/logprob_mismatch_mean", "policy/logprob_mismatch_max")),
    Chart(id="drift", title="drift from init (relative L2)", keys=("policy/drift_from_init",)),
    Chart(id="loss", title="policy loss", keys=("loss/policy",)),
    Chart(id="kl", title="approx KL to the rollout policy", keys=("policy/approx_kl",)),
    Chart(id="grad-norm", title="gradient norm (before clipping)", keys=("optim/grad_norm",)),
    Chart(id="lr", title="learning rate", keys=("optim/lr",)),
)

#: A mixture's per-task metrics (``task/<id>/<name>``): one chart per name, one line per task (group ``"tasks"``).
TASK_CHARTS: tuple[tuple[str, str, tuple[float, float] | None], ...] = (
    ("reward_mean", "per task: reward (training batch)", None),
    ("accuracy_before_filter", "per task: accuracy before filtering", _SHARE),
    ("informative_share", "per task: informative-group share (0 < #correct < G)", _SHARE),
    ("response_length_mean", "per task: response length (tokens)", None),
    ("tokens_per_informative_group", "per task: generated tokens per informative group", None),
    ("groups", "per task: groups in the training batch", None),
)

#: Key prefixes charted one key per chart whenever present (asynchronous rollouts, importance sampling).
DYNAMIC_PREFIXES = ("async/", "is/")

#: Config fields shown in the summary table (all of config.json is in a collapsed block below it).
CONFIG_FIELDS = ("task", "task_kwargs", "model", "preset_name", "engine", "device", "precision", "seed",
                 "max_steps", "batch_size", "group_size", "mini_batch_size", "epochs_per_batch", "lr",
                 "lr_schedule", "warmup_steps", "clip_low", "clip_high", "clip_c", "loss_agg", "dynamic_sampling",
                 "max_gen_rounds", "temperature", "top_p", "max_response_tokens", "overlong_penalty",
                 "overlong_cache_length", "overlong_filter", "reward_low", "reward_high", "eval_split", "eval_size",
                 "eval_every", "eval_temperature", "verifier")

SAMPLES_PER_SIDE = 4  # right and wrong samples shown per eval step
MAX_TEXT = 4000  # characters of a prompt or completion shown (the rest is counted, not shown)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def h(value: Any) -> str:
    """HTML-escaped text of ``value`` (quotes too); control characters and lone surrogates become U+FFFD.

    Example:
        >>> h('<script>alert("x")</script>')
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
    """
    text = str(value).encode("utf-8", "replace").decode("utf-8")
    return escape(_CONTROL.sub("\ufffd", text), quote=True)


def _json_for_script(obj: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` are escaped."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# --- curves ----------------------------------------------------------------------------------------
def chart_specs(records: Sequence[Mapping[str, Any]]) -> list[Chart]:
    """The charts to draw for ``records``: :data:`CHARTS` whose keys have a value, a mixture's per-task charts
    (:data:`TASK_CHARTS`, group ``"tasks"``), then one chart per
    ``async/*`` and ``is/*`` key with a value (group ``"async"``), then one per other key with a value
    that no chart shows yet (group ``"other"``: throughput, timings, counters, keys added later)."""
    def has_value(key: str) -> bool:
        return any(v is not None for v in metric_series(records, key)[1])

    charts = [c for c in CHARTS if any(has_value(k) for k in c.keys)]
    shown = {k for c in CHARTS for k in c.keys} | {"step"}
    task_ids = list(dict.fromkeys(t for r in records for t in record_task_ids(r)))
    for name, title, y_range in TASK_CHARTS if task_ids else ():
        keys = tuple(f"task/{t}/{name}" for t in task_ids)
        shown.update(keys)
        if any(has_value(k) for k in keys):
            charts.append(Chart(id=f"task-{name.replace('_', '-')}", title=title, keys=keys, y_range=y_range,
                                group="tasks"))
    present = sorted({k for r in records for k in r} - shown)
    dynamic = [k for k in present if k.startswith(DYNAMIC_PREFIXES)]
    for group, keys in (("async", dynamic), ("other", [k for k in present if k not in dynamic])):
        for k in filter(has_value, keys):
            slug = "m-" + re.sub(r"[^a-z0-9]+", "-", k.lower()).strip("-")
            taken = {c.id for c in charts}
            unique = slug if slug not in taken else next(f"{slug}-{i}" for i in range(1, len(taken) + 2)
                                                         if f"{slug}-{i}" not in taken)
            charts.append(Chart(id=unique, title=k, keys=(k,), group=group))
    return charts


def _chart_html(chart: Chart, records: Sequence[Mapping[str, Any]], x_range: tuple[float, float],
                spans: Sequence[tuple[int, int]]) -> str:
    series = [Series(k, *metric_series(records, k)) for k in chart.keys]
    series = [s for s in series if any(v is not None for v in s.values)]
    batch = any(is_batch_metric(s.label) for s in series)
    svg = line_chart_svg(series, x_range=x_range, y_range=chart.y_range, shade=spans if batch else (),
                         label=chart.title)
    legend = "".join(f'<span class="key"><i class="swatch" data-color="{i % len(COLORS)}"></i>{h(s.label)}</span>'
                     for i, s in enumerate(series))
    return (f'<figure class="chart" id="chart-{h(chart.id)}" data-keys="{h(json.dumps([s.label for s in series]))}">'
            f'<figcaption><b>{h(chart.title)}</b>{legend}</figcaption>{svg}</figure>')


def _curves_html(run: RunFolder) -> tuple[str, dict[str, Any]]:
    records = run.metrics
    steps = [int(r["step"]) for r in records]
    if not steps:
        return '<p class="note">metrics.jsonl has no records yet.</p>', {}
    spans = empty_batch_spans(records)
    x_range = (float(min(steps)), float(max(steps)))
    charts = chart_specs(records)
    out = []
    if spans:
        n = sum(b - a + 1 for a, b in spans)
        listed = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans[:12])
        listed += ", ..." if len(spans) > 12 else ""
        out.append(f'<p class="note" id="empty-batches">{n} step(s) trained on an empty batch '
                   f'(<code>rollout/num_groups</code> = 0: no group had both right and wrong answers): steps '
                   f'{h(listed)}. Batch metrics have no value there: they are drawn as gaps over grey bands, '
                   'not as zeros.</p>')

    def grid(group: str) -> str:
        return ('<div class="grid">' + "".join(_chart_html(c, records, x_range, spans) for c in charts
                                               if c.group == group) + "</div>")

    out.append(grid("main"))
    if any(c.group == "tasks" for c in charts):
        out.append("<h3>Per task (a mixture)</h3>" + grid("tasks"))
    if any(c.group == "async" for c in charts):
        out.append("<h3>Staleness and importance sampling</h3>" + grid("async"))
    others = sum(c.group == "other" for c in charts)
    if others:
        out.append(f"<details><summary>{others} other metric(s): throughput, timings, counters</summary>"
                   f"{grid('other')}</details>")
    data = {}
    for c in charts:
        for k in c.keys:
            xs, ys = metric_series(records, k)
            data[k] = {"steps": xs, "values": [None if v is None else float(f"{v:.6g}") for v in ys]}
    return "".join(out), data


# --- config and eval tables ---------------------------------------------------------------------------
def _value_text(v: Any) -> str:
    if isinstance(v, float):
        return format_number(v) if abs(v) < 1e-3 or abs(v) >= 1e5 else f"{v:g}"
    return json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else str(v)


def _config_html(run: RunFolder) -> str:
    if not run.config:
        return '<p class="note">No config.json in this run folder.</p>'
    items = "".join(f'<div><span class="k">{h(k)}</span> <code>{h(_value_text(run.config[k]))}</code></div>'
                    for k in CONFIG_FIELDS if k in run.config)
    ws = run.warmstart
    warm = ""
    if ws:
        probe = ws.get("probe_accuracy")
        warm = (f'<p>Warm start: {h(ws.get("steps"))} supervised steps'
                + (f", probe accuracy {probe:.3f}" if isinstance(probe, (int, float)) else "") + ".</p>")
    full = h(json.dumps(run.config, indent=2, sort_keys=True, default=str))
    return (f'<div class="config">{items}</div>{warm}'
            f"<details><summary>all of config.json</summary><pre>{full}</pre></details>")


def _facts_html(run: RunFolder) -> str:
    recs = run.metrics
    last = recs[-1]["step"] if recs else None
    max_steps = run.config.get("max_steps")
    evals = [(r["step"], r["eval/accuracy"]) for r in recs if isinstance(r.get("eval/accuracy"), (int, float))]
    facts = [f"step {h(last)}" + (f" of {h(max_steps)}" if max_steps is not None else "")
             + (" (finished)" if last is not None and last == max_steps else "")]
    if evals:
        best = max(evals, key=lambda e: e[1])
        facts.append(f"held-out accuracy {evals[0][1]:.3f} (step {evals[0][0]}) &rarr; {evals[-1][1]:.3f} "
                     f"(step {evals[-1][0]}), best {best[1]:.3f} (step {best[0]}); rows: {h(_heldout_rows(run))}")
    empty = sum(b - a + 1 for a, b in empty_batch_spans(recs))
    if empty:
        facts.append(f'<a href="#empty-batches">{empty} empty-batch step(s)</a>')
    return '<p class="facts">' + " &middot; ".join(facts) + "</p>"


def _heldout_rows(run: RunFolder) -> str:
    """Where the held-out rows came from: the run's ``heldout.json`` when it split them off its training rows,
    else its evaluation split."""
    from .heldout import HELDOUT_FILE

    record = run.path / HELDOUT_FILE
    if record.is_file():
        held = json.loads(record.read_text())
        return f"{held['held_out']} of the {held['rows']} rows of {held['source']} held out ({HELDOUT_FILE})"
    return f"split {run.config.get('eval_split', 'test')!r} of {run.config.get('task', 'the task')}"


def _reasons(samples: Iterable[EvalSample], limit: int = 3) -> str:
    counts = Counter(s.reason for s in samples)
    return ", ".join(f"<code>{h(r)}</code> {n}" for r, n in counts.most_common(limit))


def _eval_html(run: RunFolder) -> str:
    metric_eval = {r["step"]: r["eval/accuracy"] for r in run.metrics
                   if isinstance(r.get("eval/accuracy"), (int, float))}
    steps = sorted(set(metric_eval) | set(run.samples))
    out = []
    if steps:
        rows = []
        for s in steps:
            acc = f"{metric_eval[s]:.3f}" if s in metric_eval else "&ndash;"
            smp = run.samples.get(s)
            if smp:
                right = sum(x.correct for x in smp)
                trunc = sum(x.finish_reason == "length" for x in smp)
                cells = (f"<td>{len(smp)}</td><td>{right / len(smp):.3f}</td><td>{trunc / len(smp):.3f}</td>"
                         f"<td>{_reasons(x for x in smp if not x.correct)}</td>")
            else:
                cells = "<td>&ndash;</td>" * 4
            rows.append(f"<tr><td>{s}</td><td>{acc}</td>{cells}</tr>")
        out.append('<table class="eval" id="heldout-table"><thead><tr><th>step</th><th>held-out accuracy '
                   '(metrics.jsonl)</th><th>samples (eval/)</th><th>sample accuracy</th><th>truncated</th>'
                   "<th>wrong answers' reasons</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    if run.summaries:
        names = list(dict.fromkeys(n for s in run.summaries.values() for n in s.metrics))
        head = "".join(f"<th>{h(n)}</th>" for n in names)
        rows = []
        for step, summ in run.summaries.items():
            cells = "".join(_summary_cell(summ.metrics.get(n)) for n in names)
            info = "; ".join(f"{h(k)}={h(_value_text(v))}" for k, v in summ.info.items() if k != "step")
            rows.append(f"<tr><td>{step}</td>{cells}<td class=\"info\">{info}</td></tr>")
        out.append(f'<table class="eval" id="summary-table"><thead><tr><th>step</th>{head}<th>settings</th></tr>'
                   f"</thead><tbody>{''.join(rows)}</tbody></table>")
    return "".join(out) or '<p class="note">No held-out evaluations yet.</p>'


def _summary_cell(entry: tuple[float, tuple[float, float] | None] | None) -> str:
    if entry is None:
        return "<td>&ndash;</td>"
    value, ci = entry
    ci_text = f' <span class="ci">[{ci[0]:.3f}, {ci[1]:.3f}]</span>' if ci else ""
    return f"<td>{value:.3f}{ci_text}</td>"


# --- samples ------------------------------------------------------------------------------------------
def pick_samples(samples: Sequence[EvalSample], k: int) -> list[EvalSample]:
    """Up to ``k`` of ``samples``, taking them round-robin over verifier reasons (file order within a
    reason), so the wrong side shows each kind of failure before a second one of any kind.

    Example:
        >>> mk = lambda i, r: EvalSample(problem_id=str(i), prompt="", completion="", extracted=None,
        ...                              correct=False, reason=r, tokens=1, finish_reason="stop")
        >>> [s.problem_id for s in pick_samples([mk(0, "a"), mk(1, "a"), mk(2, "b"), mk(3, "c")], 3)]
        ['0', '2', '3']
    """
    by_reason: dict[str, list[EvalSample]] = {}
    for s in samples:
        by_reason.setdefault(s.reason, []).append(s)
    out: list[EvalSample] = []
    depth = 0
    while len(out) < k and any(len(v) > depth for v in by_reason.values()):
        out += [v[depth] for v in by_reason.values() if len(v) > depth][: k - len(out)]
        depth += 1
    return out


def _clip_text(text: str) -> str:
    extra = len(text) - MAX_TEXT
    return h(text[:MAX_TEXT]) + (f'<span class="more">&hellip; {extra} more characters</span>' if extra > 0 else "")


def _sample_html(s: EvalSample) -> str:
    status = "right" if s.correct else "wrong"
    cut = ' <span class="badge">cut at the token limit</span>' if s.finish_reason == "length" else ""
    extracted = "none" if s.extracted is None else f"<code>{h(s.extracted)}</code>"
    return (f'<article class="sample {status}"><header>problem <code>{h(s.problem_id)}</code>'
            + (f" &middot; sample {s.sample}" if s.sample else "")
            + f" &middot; {s.tokens} tokens{cut}"
            + (f" &middot; answer <code>{h(s.answer)}</code>" if s.answer is not None else "") + "</header>"
            f'<div class="label">prompt</div><pre class="prompt">{_clip_text(s.prompt)}</pre>'
            f'<div class="label">completion</div><pre class="completion">{_clip_text(s.completion)}</pre>'
            f'<div class="verdict">extracted {extracted} &middot; reason <code>{h(s.reason)}</code></div></article>')


def _samples_html(run: RunFolder) -> str:
    if not run.samples:
        return ('<p class="note">No eval sample files in this run folder yet (<code>eval/step_&lt;N&gt;.jsonl</code>, '
                "one JSON record per sample: see the learner docs, 'Run folder').</p>")
    last = max(run.samples)
    options = "".join(f'<option value="{s}"{" selected" if s == last else ""}>step {s} (accuracy '
                      f'{sum(x.correct for x in v) / max(1, len(v)):.3f})</option>' for s, v in run.samples.items())
    out = [f'<label class="picker">eval step <select id="sample-step">{options}</select></label>']
    for step, samples in run.samples.items():
        right = [s for s in samples if s.correct]
        wrong = [s for s in samples if not s.correct]
        cols = []
        for name, group in (("right", right), ("wrong", wrong)):
            shown = pick_samples(group, SAMPLES_PER_SIDE)
            body = "".join(_sample_html(s) for s in shown) or '<p class="note">none</p>'
            cols.append(f'<div class="side {name}"><h3>{name}: {len(group)} of {len(samples)}'
                        f' <small>(showing {len(shown)})</small></h3>{body}</div>')
        hidden = "" if step == last else " hidden"
        out.append(f'<section class="sample-step" data-step="{step}"{hidden}><div class="sides">{"".join(cols)}'
                   "</div></section>")
    return "".join(out)


# --- page ---------------------------------------------------------------------------------------------
_CSS = """
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; background: #fff; }
body { margin: 0 auto; max-width: 1480px; padding: 12px 20px 40px; font-size: 14px; }
h1 { font-size: 22px; margin: 6px 0 2px; } h2 { font-size: 17px; margin: 26px 0 8px; border-bottom: 1px solid #ddd; }
h3 { font-size: 14px; margin: 12px 0 6px; } code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; }
.facts, .note { color: #444; } .note { background: #f6f6f6; padding: 6px 10px; border-left: 3px solid #bbb; }
.grid { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 10px; }
@media (max-width: 1100px) { .grid { grid-template-columns: repeat(2, minmax(0, 1fr)); } }
figure.chart { margin: 0; border: 1px solid #e3e3e3; border-radius: 6px; padding: 6px 6px 2px; }
figcaption { font-size: 12px; line-height: 1.6; } figcaption b { margin-right: 8px; }
.key { margin-right: 10px; white-space: nowrap; color: #333; }
.swatch { display: inline-block; width: 12px; height: 3px; margin: 0 4px 3px 0; vertical-align: middle; }
.swatch[data-color="0"] { background: #0072B2; } .swatch[data-color="1"] { background: #D55E00; }
.swatch[data-color="2"] { background: #009E73; } .swatch[data-color="3"] { background: #CC79A7; }
.swatch[data-color="4"] { background: #E69F00; } .swatch[data-color="5"] { background: #56B4E9; }
.swatch[data-color="6"] { background: #000; }
svg.chart-svg { width: 100%; height: auto; display: block; }
.plot-bg { fill: #fcfcfc; } .grid line, line.grid { stroke: #e6e6e6; stroke-width: 1; }
line.axis { stroke: #999; } text.tick { font-size: 10px; fill: #555; }
rect.gap-band { fill: #e4e4e4; } line.cursor { stroke: #888; stroke-dasharray: 3 3; }
#tooltip { position: absolute; pointer-events: none; background: rgba(20, 20, 20, .88); color: #fff;
  font: 12px ui-monospace, Menlo, Consolas, monospace; padding: 5px 8px; border-radius: 4px; white-space: pre;
  z-index: 9; }
.config { columns: 4 260px; column-gap: 20px; font-size: 13px; } .config div { padding: 1px 0; break-inside: avoid; }
.config .k { color: #666; } details pre { max-height: 400px; }
table { border-collapse: collapse; margin: 6px 0; } th, td { text-align: left; padding: 3px 10px 3px 0;
  border-bottom: 1px solid #eee; vertical-align: top; }
table.eval td:not(:last-child) { font-variant-numeric: tabular-nums; } .ci { color: #777; font-size: 12px; }
td.info { color: #666; font-size: 12px; }
.picker { display: inline-block; margin: 4px 0 8px; font-weight: 600; } select { font-size: 14px; margin-left: 6px; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; }
.side.right h3 { color: #0a7a3b; } .side.wrong h3 { color: #b3261e; }
article.sample { border: 1px solid #e3e3e3; border-left: 4px solid #ccc; border-radius: 4px; padding: 6px 8px;
  margin: 0 0 8px; }
article.right { border-left-color: #2e9d5b; } article.wrong { border-left-color: #d9534f; }
article header { font-size: 12px; color: #555; } .label { font-size: 11px; color: #888; margin-top: 4px; }
pre { margin: 2px 0; padding: 4px 6px; background: #f7f7f7; white-space: pre-wrap; word-break: break-word;
  max-height: 220px; overflow: auto; font-size: 12px; }
.verdict { font-size: 12px; margin-top: 4px; } .badge { background: #fde2c4; border-radius: 3px; padding: 0 4px; }
.more { color: #888; font-style: italic; } small { font-weight: 400; color: #777; }
"""

_JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var tip = document.getElementById("tooltip");
  function fmt(v) {
    if (v === null) return "gap (empty batch)";
    var a = Math.abs(v);
    if (v === 0) return "0";
    if (a >= 1e5 || a < 1e-3) return v.toPrecision(2);
    return a >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
  }
  function hide(cursor) { tip.hidden = true; cursor.setAttribute("visibility", "hidden"); }
  document.querySelectorAll("figure.chart").forEach(function (fig) {
    var svg = fig.querySelector("svg"), cursor = svg.querySelector("line.cursor");
    var keys = JSON.parse(fig.getAttribute("data-keys")), d = svg.dataset;
    var x0 = +d.x0, x1 = +d.x1, p0 = +d.px0, p1 = +d.px1, all = [];
    keys.forEach(function (k) { if (data[k]) all = all.concat(data[k].steps); });
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect(), vx = (ev.clientX - r.left) / r.width * svg.viewBox.baseVal.width;
      var want = x0 + (vx - p0) / (p1 - p0) * (x1 - x0), step = null;
      all.forEach(function (s) { if (step === null || Math.abs(s - want) < Math.abs(step - want)) step = s; });
      if (step === null) { hide(cursor); return; }
      var lines = ["step " + step];
      keys.forEach(function (k) {
        var i = data[k] ? data[k].steps.indexOf(step) : -1;
        if (i >= 0) lines.push(k + ": " + fmt(data[k].values[i]));
      });
      var cx = p0 + (step - x0) / (x1 - x0) * (p1 - p0);
      cursor.setAttribute("x1", cx); cursor.setAttribute("x2", cx); cursor.setAttribute("visibility", "visible");
      tip.textContent = lines.join("\\n"); tip.hidden = false;
      tip.style.left = (ev.pageX + 14) + "px"; tip.style.top = (ev.pageY + 14) + "px";
    });
    svg.addEventListener("mouseleave", function () { hide(cursor); });
  });
  var select = document.getElementById("sample-step");
  if (select) select.addEventListener("change", function () {
    document.querySelectorAll("section.sample-step").forEach(function (s) {
      s.hidden = s.getAttribute("data-step") !== select.value;
    });
  });
})();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def render_report(run: RunFolder) -> str:
    """The report page of ``run`` as one HTML string (see the module docstring)."""
    curves, data = _curves_html(run)
    name = run.config.get("name") or run.path.resolve().name
    csp = (f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{h(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        f"<title>{h(name)} &middot; dapo-env run report</title><style>{_CSS}</style></head><body>"
        f'<h1>{h(name)}</h1>{_facts_html(run)}<p class="note">dapo-env run report, written {when} from '
        "<code>metrics.jsonl</code>, <code>config.json</code> and <code>eval/</code>. Hover a chart for values.</p>"
        f'<h2 id="config">Config</h2>{_config_html(run)}'
        f'<h2 id="curves">Training curves</h2>{curves}'
        f'<h2 id="eval">Held-out evaluation</h2>{_eval_html(run)}'
        f'<h2 id="samples">Samples</h2>{_samples_html(run)}'
        '<div id="tooltip" hidden></div>'
        f'<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
        f"<script>{_JS}</script></body></html>\n")


def write_report(run_dir: str | Path, *, out: str | Path | None = None) -> Path:
    """Write the run folder's HTML report and return its path.

    Args:
        run_dir: a run folder (``runs/<name>``) holding at least ``metrics.jsonl``.
        out: the HTML file to write (default ``<run_dir>/report.html``).

    Raises:
        RunFolderError: ``run_dir`` is not a run folder, or one of its files is malformed (the message
            names the file, the line and the fix).
    """
    html = render_report(load_run(run_dir))
    return write_text_atomic(Path(run_dir) / "report.html" if out is None else Path(out), html)


__all__ = ["CHARTS", "CONFIG_FIELDS", "TASK_CHARTS", "DYNAMIC_PREFIXES", "SAMPLES_PER_SIDE", "Chart", "chart_specs", "pick_samples",
           "render_report", "write_report"]
