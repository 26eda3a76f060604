"""The DAPO paper's cumulative ablation (Table 1), reproduced small on the CPU under a token budget.

Rows (each adds one switch to the previous; ``dapo_env.learners.config.ABLATION``): naive GRPO,
+ overlong filtering, + clip-higher, + soft overlong punishment, + token-level loss, + dynamic sampling;
then one row outside the ladder, the ``dapo`` preset as shipped (the last row without overlong
filtering; see :data:`ROWS`). Every run of every row gets the same compute budget counted in GENERATED
TOKENS (every sampled token, including the groups dynamic sampling throws away) and stops once it has
spent it; held-out accuracy is measured (sampled at temperature 1, not counted in the budget) at regular
points of the budget. Within a seed all rows start from the same warm-started tiny model, so a row's
difference is its switches only.

The default regime (:data:`BASE`) is built so that the mechanisms have something to act on: Sort-v0
over 2-8 digits, where the answer is as long as the list (responses of 12-24 tokens, longer for the
harder lists), a 32-token limit that only rambling responses reach (the soft penalty starts at 26), and
a warm start to ~20 % train-probe accuracy, so most groups of G=8 are all-wrong (long lists) or
all-right (short ones). Sizes, lr and model come from the ``tiny`` preset (the CPU default run): 32
prompts per step in mini-batches of 8 (four optimizer steps per rollout). ``--largest`` reruns the
earlier Largest-v0 regime (fixed-length answers, few zero-advantage groups) and ``--arithmetic`` the
first one (the negative control: held-out accuracy cannot move).

Run (full mode: 7 rows x 5 seeds, ~35 minutes on an idle 2-core box with ``--jobs 2``)::

    python benchmarks/ablation.py --jobs 2   # writes benchmarks/out/ablation.json and ablation_*.png (git-ignored)
    python benchmarks/ablation.py --largest --jobs 2      # ablation_largest.json, ablation_largest_*.png
    python benchmarks/ablation.py --arithmetic --jobs 2   # ablation_arithmetic.json, ablation_arithmetic_*.png
    python benchmarks/ablation.py --quick    # seconds; writes ablation_quick.json, no plots
    # refresh the tracked result and the docs' plots:
    python benchmarks/ablation.py --jobs 2 --out benchmarks/results/ablation.json --img-dir docs/img
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from _paths import UNTRACKED_DIR, out_path, write_json
from dapo_env.learners.config import ABLATION, TrainConfig, preset
from dapo_env.learners.engines import HFEngine, SamplingParams, WeightsLike
from dapo_env.types import Completion

#: The rows this benchmark can run: the paper's cumulative ladder (``ABLATION``, rows 0-5), then the
#: ``dapo`` preset as shipped, which is row 5 without overlong filtering (``TrainConfig``'s docstring says
#: why the preset leaves the filter off) - the configuration users get from ``preset("dapo")``.
ROWS: tuple[tuple[str, dict[str, Any]], ...] = ABLATION + (
    ("DAPO preset (row 5 without filtering)", {k: v for k, v in ABLATION[-1][1].items() if k != "overlong_filter"}),
)
#: The two rows the done-when compares: naive GRPO and the last rung of the paper's ladder.
GRPO_ROW, DAPO_ROW = 0, len(ABLATION) - 1

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, kw_only=True)
class AblationSettings:
    """One ablation experiment: budget, seeds, and the shared base configuration.

    Attributes:
        name: names the outputs (``<name>.json``, ``<name>_accuracy.png``, ...).
        budget_tokens: generated tokens per run (the stopping rule).
        seeds: one run per row per seed; the seed also picks the warm start and the data order.
        eval_points: evaluations spread evenly over the budget (plus one at 0 tokens).
        eval_size: held-out test problems per evaluation (decoded at the base's eval_temperature).
        rows: which rows to run (indices into :data:`ROWS`).
        base: ``TrainConfig`` fields shared by every row (applied on the ``grpo`` preset).
        warmstart_steps: most supervised warm-start steps (stops early at ``warmstart_target``).
        warmstart_target: train-probe accuracy at which the warm start stops.
        warmstart_probe: train problems in the warm start's probe.

    Example:
        >>> AblationSettings(budget_tokens=1000, seeds=(0,)).rows
        (0, 1, 2, 3, 4, 5, 6)
    """

    budget_tokens: int
    seeds: tuple[int, ...]
    eval_points: int = 6
    eval_size: int = 200
    rows: tuple[int, ...] = tuple(range(len(ROWS)))
    base: Mapping[str, Any] = field(default_factory=dict)
    warmstart_steps: int = 300
    warmstart_target: float = 0.15
    warmstart_probe: int = 64
    name: str = "ablation"

    def __post_init__(self) -> None:
        if self.budget_tokens < 1:
            raise ValueError(f"budget_tokens must be >= 1, got {self.budget_tokens}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed, e.g. seeds=(0, 1, 2)")
        if self.eval_points < 1 or self.eval_size < 1:
            raise ValueError(f"eval_points and eval_size must be >= 1, got {self.eval_points}, {self.eval_size}")
        bad = [r for r in self.rows if not 0 <= r < len(ROWS)]
        if bad or not self.rows:
            raise ValueError(f"rows must be non-empty indices in 0..{len(ROWS) - 1}, got {self.rows}")


#: The ``tiny`` preset's fields the ablation takes over (one source of truth for the CPU regime): task
#: and its knobs, sizes, learning rate, lengths, model shape, warm start. The rows then toggle only the
#: DAPO switches (``ABLATION``) on top of the ``grpo`` preset, so every row shares these numbers.
TINY_FIELDS = ("task", "task_kwargs", "group_size", "batch_size", "mini_batch_size", "micro_batch_size",
               "max_response_tokens", "overlong_cache_length", "max_gen_rounds", "lr", "warmup_steps",
               "weight_decay", "tiny_hidden_size", "tiny_layers", "tiny_heads", "num_threads", "warmstart_lr",
               "warmstart_batch_size")


def tiny_base() -> dict[str, Any]:
    """The shared ``TrainConfig`` fields of every row, read from the ``tiny`` preset (``TINY_FIELDS``).

    Held-out accuracy is sampled at temperature 1 (the paper's avg@k style), which resolves smaller
    changes than greedy decoding.
    """
    tiny = preset("tiny").to_dict()
    return {k: tiny[k] for k in TINY_FIELDS} | {"eval_temperature": 1.0}


#: The Largest-v0 regime (the second ablation, ``--largest``): the CPU default run's settings unchanged
#: (5-6 single digits, uniform answer; a 16-token limit with the penalty over the last 4). Its answers
#: all have the same length and only ~40 % of groups have zero advantage, so the length mechanisms and
#: dynamic sampling had little to act on (docs/ablation.md).
LARGEST_BASE: dict[str, Any] = tiny_base()

#: The task-specific part of the default regime: Sort-v0 over 2-8 digits. The answer line is 8 + 2c - 1
#: characters for c numbers (12-24 tokens with EOS, char-level tokenizer), so hard problems have long
#: responses; the 32-token limit leaves room for every correct answer and the soft penalty starts at 26
#: tokens (L_max - L_cache, above the longest correct answer), so only rambling responses are shaped or cut.
SORT_TASK: dict[str, Any] = {
    "task": "Sort-v0",
    "task_kwargs": {"min_count": 2, "max_count": 8, "min_value": 0, "max_value": 9},
    "max_response_tokens": 32,
    "overlong_cache_length": 6,
}

#: Shared settings of every row in the default regime: the tiny preset's sizes, lr, model and warm start
#: (G=8, 32 prompts per step in mini-batches of 8 = 4 optimizer steps per rollout, lr 5e-4) on Sort-v0.
BASE: dict[str, Any] = tiny_base() | SORT_TASK

#: The first ablation's settings (single-digit Arithmetic, kept as the negative control of
#: docs/ablation.md): the test split's arithmetic facts are never trained on, so held-out accuracy
#: cannot move and no row differs. ``--arithmetic`` reruns it.
ARITHMETIC_BASE: dict[str, Any] = {
    "task": "Arithmetic-v0",
    "task_kwargs": {"max_value": 9},
    "group_size": 8,
    "batch_size": 16,
    "mini_batch_size": 8,
    "micro_batch_size": 128,
    "max_response_tokens": 16,
    "overlong_cache_length": 4,
    "max_gen_rounds": 4,
    "lr": 3e-4,
    "warmup_steps": 2,
    "weight_decay": 0.0,
    "tiny_hidden_size": 128,
    "tiny_layers": 2,
    "tiny_heads": 4,
    "num_threads": 1,
    "eval_temperature": 1.0,
}

#: Generated tokens per run in full mode (default regime): ~130 updates of naive GRPO, ~65 with dynamic
#: sampling (which pays for the groups it discards), where the DAPO rows are still climbing (pilot,
#: docs/ablation.md).
BUDGET_TOKENS = 600_000

_TINY = preset("tiny")
_WARM = dict(warmstart_steps=_TINY.warmstart_steps, warmstart_target=float(_TINY.warmstart_target_accuracy or 1.0),
             warmstart_probe=128)
FULL = AblationSettings(budget_tokens=BUDGET_TOKENS, seeds=(0, 1, 2, 3, 4), eval_points=6, eval_size=200, base=BASE,
                        **_WARM)
LARGEST = AblationSettings(budget_tokens=150_000, seeds=(0, 1, 2), eval_points=6, eval_size=200,
                           rows=tuple(range(len(ABLATION))), base=LARGEST_BASE, name="ablation_largest", **_WARM)
ARITHMETIC = AblationSettings(budget_tokens=60_000, seeds=(0, 1, 2), eval_points=5, eval_size=200,
                              rows=tuple(range(len(ABLATION))), base=ARITHMETIC_BASE, warmstart_steps=600,
                              warmstart_target=0.45, name="ablation_arithmetic")
QUICK = AblationSettings(budget_tokens=600, seeds=(0,), eval_points=1, eval_size=8, rows=(GRPO_ROW, DAPO_ROW),
                         base=BASE | {"batch_size": 4, "mini_batch_size": 4, "tiny_hidden_size": 64,
                                      "tiny_heads": 2},
                         warmstart_steps=2, warmstart_target=1.0, warmstart_probe=8, name="ablation_quick")


class CountingEngine:
    """Wraps a rollout engine and counts what the TRAINING rollouts generate (tokens, samples, cuts).

    ``counting`` is switched off around evaluations so the budget covers training rollouts only.
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.counting = True
        self.tokens = 0
        self.samples = 0
        self.truncated = 0

    @property
    def weights_version(self) -> int:
        return self.engine.weights_version

    def fingerprint(self, names: Any = None) -> str:
        return self.engine.fingerprint(names)

    def load_weights(self, weights: WeightsLike) -> None:
        self.engine.load_weights(weights)

    def generate_turns(self, requests: Sequence[Any], sampling: SamplingParams) -> list[Completion]:
        return self.engine.generate_turns(requests, sampling)  # multi-turn rollouts are not counted

    @property
    def turn_stats(self) -> dict[str, int]:
        return self.engine.turn_stats

    def release(self) -> None:
        self.engine.release()

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams) -> list[list[Completion]]:
        out = self.engine.generate(prompts, n, sampling)
        if self.counting:
            for group in out:
                for c in group:
                    self.tokens += c.num_tokens or len(c.token_ids or ())
                    self.samples += 1
                    self.truncated += c.finish_reason == "length"
        return out


def row_config(settings: AblationSettings, row: int, seed: int, out_dir: str) -> TrainConfig:
    """The ``TrainConfig`` of one row and seed (the ``grpo`` preset + base + the row's switches)."""
    name, switches = ROWS[row]
    fields = dict(settings.base) | dict(switches) | {
        "seed": seed, "out_dir": out_dir, "name": f"row{row}-s{seed}", "max_steps": 100_000,
        "eval_every": 0, "eval_size": settings.eval_size, "checkpoint_every": 0, "plot_every": 0,
        "progress": False, "warmstart_steps": 0,
    }
    return preset("grpo", **fields)


def warm_started(settings: AblationSettings, seed: int, cache_dir: Path | None = None
                 ) -> tuple[torch.nn.Module, Any, dict[str, Any]]:
    """The tiny model of ``seed``, supervised until it is right ``warmstart_target`` of the time.

    With ``cache_dir`` the warm-started weights are kept there, keyed by everything that shapes them,
    so a rerun (or the other mode) skips the warm start.
    """
    from dapo_env.learners.rollout.setup import resolve_task
    from dapo_env.learners.trainer import build_model
    from dapo_env.learners.warmstart import warm_start

    cfg = preset("grpo", **(dict(settings.base) | {"seed": seed}))
    model, tok = build_model(cfg)
    key = json.dumps([cfg.task, dict(cfg.task_kwargs), cfg.tiny_hidden_size, cfg.tiny_layers, cfg.tiny_heads,
                      cfg.max_response_tokens, settings.warmstart_steps, settings.warmstart_target,
                      settings.warmstart_probe, seed],
                     sort_keys=True, default=str)
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"warm-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pt"
        if path.is_file():
            saved = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(saved["state_dict"])
            model.eval()
            return model, tok, json.loads(saved["stats"]) | {"cached": True}
    stats = warm_start(model, tok, resolve_task(cfg), steps=settings.warmstart_steps, lr=cfg.warmstart_lr,
                       batch_size=cfg.warmstart_batch_size,
                       seed=seed, target_accuracy=settings.warmstart_target, max_response_tokens=cfg.max_response_tokens,
                       probe_size=settings.warmstart_probe,
                       task_kwargs=dict(cfg.task_kwargs))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": model.state_dict(), "stats": json.dumps(stats)}, path)
    return model, tok, stats


def run_one(settings: AblationSettings, row: int, seed: int, model: torch.nn.Module, tokenizer: Any,
            out_dir: str) -> dict[str, Any]:
    """Train one row from a copy of ``model`` until the token budget is spent; return its curves."""
    from dapo_env.learners.trainer import Trainer

    cfg = row_config(settings, row, seed, out_dir)
    counter = CountingEngine(None)
    learner = copy.deepcopy(model)
    counter.engine = HFEngine(learner, tokenizer, batch_size=256)
    trainer = Trainer(cfg, model=learner, tokenizer=tokenizer, engine=counter)
    t0 = time.perf_counter()
    checkpoints = [settings.budget_tokens * (i + 1) / settings.eval_points for i in range(settings.eval_points)]

    def evaluate() -> float:
        counter.counting = False
        try:
            return trainer.evaluate()
        finally:
            counter.counting = True

    evals = [(0, evaluate())]
    steps: list[dict[str, Any]] = []
    try:
        while counter.tokens < settings.budget_tokens:
            before = (counter.tokens, counter.samples, counter.truncated)
            record = trainer.train_step()
            samples = counter.samples - before[1]
            steps.append({
                "tokens": counter.tokens,
                "entropy": record.get("policy/entropy"),
                "truncation_rate": (counter.truncated - before[2]) / max(samples, 1),
                "rollout_accuracy": record.get("rollout/accuracy_before_filter"),
                "zero_adv_share": record.get("rollout/zero_adv_share"),
                "groups": record.get("rollout/num_groups"),
                "rounds": record.get("rollout/rounds"),
                "clip_frac_high": record.get("policy/clip_frac_high"),
            })
            if checkpoints and counter.tokens >= checkpoints[0]:
                while checkpoints and counter.tokens >= checkpoints[0]:
                    checkpoints.pop(0)
                evals.append((counter.tokens, evaluate()))
    finally:
        trainer.close()
    tail = [s["entropy"] for s in steps[-3:] if s["entropy"] is not None]
    return {
        "row": row, "config": ROWS[row][0], "seed": seed, "steps": len(steps),
        "tokens": counter.tokens, "samples": counter.samples,
        "truncation_rate": counter.truncated / max(counter.samples, 1),
        "final_accuracy": evals[-1][1], "initial_accuracy": evals[0][1],
        "final_entropy": float(np.mean(tail)) if tail else None,
        "evals": evals, "history": steps, "seconds": time.perf_counter() - t0,
    }


def _history_mean(runs: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """Mean of a per-step metric over every step of ``runs`` (None when no step recorded it)."""
    values = [s[key] for r in runs for s in r.get("history", ()) if s.get(key) is not None]
    return float(np.mean(values)) if values else None


def summarise(runs: Sequence[Mapping[str, Any]], rows: Iterable[int]) -> list[dict[str, Any]]:
    """Per row: mean, std, min, max of the final accuracy over seeds; mean end entropy, truncation, tokens."""
    table = []
    for row in rows:
        mine = [r for r in runs if r["row"] == row]
        acc = np.array([r["final_accuracy"] for r in mine])
        ent = [r["final_entropy"] for r in mine if r["final_entropy"] is not None]
        table.append({
            "row": row, "config": ROWS[row][0], "seeds": len(mine),
            "accuracy_mean": float(acc.mean()), "accuracy_std": float(acc.std(ddof=1)) if len(acc) > 1 else 0.0,
            "accuracy_min": float(acc.min()), "accuracy_max": float(acc.max()),
            "initial_accuracy_mean": float(np.mean([r["initial_accuracy"] for r in mine])),
            "entropy_end": float(np.mean(ent)) if ent else None,
            "truncation_rate": float(np.mean([r["truncation_rate"] for r in mine])),
            "tokens": float(np.mean([r["tokens"] for r in mine])),
            "steps": float(np.mean([r["steps"] for r in mine])),
            "clip_frac_high": _history_mean(mine, "clip_frac_high"),
            "zero_adv_share": _history_mean(mine, "zero_adv_share"),
            "accuracy_over_budget": float(np.mean([_over_budget(r) for r in mine])),
        })
    return table


def _over_budget(run: Mapping[str, Any]) -> float:
    """Mean held-out accuracy over a run's evaluations after the start (an area-under-curve summary)."""
    return float(np.mean([acc for _, acc in run["evals"][1:]] or [run["final_accuracy"]]))


def compare(runs: Sequence[Mapping[str, Any]], baseline: int, other: int) -> dict[str, Any] | None:
    """Row ``other`` against row ``baseline``, paired by seed (same warm start, same budget).

    Returns the per-seed differences of the final held-out accuracy (other - baseline), their mean and
    sample std, how many seeds ``other`` wins, and ``ranges_separate``: every seed of ``other`` ends above
    every seed of ``baseline`` (the "beyond the seed spread" test); ``None`` if no seed has both rows.
    """
    base = {r["seed"]: r["final_accuracy"] for r in runs if r["row"] == baseline}
    mine = {r["seed"]: r["final_accuracy"] for r in runs if r["row"] == other}
    seeds = sorted(set(base) & set(mine))
    if not seeds:
        return None
    diff = np.array([mine[s] - base[s] for s in seeds])
    return {
        "baseline": ROWS[baseline][0], "other": ROWS[other][0], "seeds": seeds, "differences": diff.tolist(),
        "mean_difference": float(diff.mean()), "std_difference": float(diff.std(ddof=1)) if len(diff) > 1 else 0.0,
        "wins": int((diff > 0).sum()),
        "ranges_separate": bool(min(mine[s] for s in seeds) > max(base[s] for s in seeds)),
    }


def comparisons(runs: Sequence[Mapping[str, Any]], rows: Sequence[int]) -> list[dict[str, Any]]:
    """Every run row after naive GRPO compared with it (:func:`compare`)."""
    if GRPO_ROW not in rows:
        return []
    found = (compare(runs, GRPO_ROW, row) for row in rows if row != GRPO_ROW)
    return [c for c in found if c is not None]


def format_comparisons(found: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| configuration vs naive GRPO | per-seed difference | mean ± std | seeds won | ranges separate |",
             "| --- | --- | --- | --- | --- |"]
    for c in found:
        per_seed = " / ".join(f"{d:+.3f}" for d in c["differences"])
        lines.append(f"| {c['other']} | {per_seed} | {c['mean_difference']:+.3f} ± {c['std_difference']:.3f} | "
                     f"{c['wins']}/{len(c['seeds'])} | {'yes' if c['ranges_separate'] else 'no'} |")
    return "\n".join(lines)


def format_table(table: Sequence[Mapping[str, Any]]) -> str:
    """The summary as a markdown table (the one docs/ablation.md shows)."""

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    head = ("| configuration | held-out acc. (mean ± std) | min-max | start | over budget | entropy (end) "
            "| truncated | zero-adv. groups | clip-high frac. | tokens | steps |")
    lines = [head, "|" + " --- |" * 11]
    for t in table:
        lines.append(
            f"| {t['config']} | {t['accuracy_mean']:.3f} ± {t['accuracy_std']:.3f} | "
            f"{t['accuracy_min']:.3f}-{t['accuracy_max']:.3f} | {t['initial_accuracy_mean']:.3f} | "
            f"{fmt(t.get('accuracy_over_budget'))} | "
            f"{fmt(t['entropy_end'])} | {t['truncation_rate']:.3f} | {fmt(t.get('zero_adv_share'))} | "
            f"{fmt(t.get('clip_frac_high'))} | {t['tokens']:.0f} | {t['steps']:.1f} |")
    return "\n".join(lines)


def _mean_curve(runs: Sequence[Mapping[str, Any]], grid: np.ndarray, key: str) -> np.ndarray:
    """Mean over seeds of a per-run curve, linearly interpolated onto ``grid`` (generated tokens)."""
    curves = []
    for r in runs:
        if key == "accuracy":
            xs, ys = zip(*r["evals"])
        else:
            pts = [(s["tokens"], s[key]) for s in r["history"] if s[key] is not None]
            if not pts:
                continue
            xs, ys = zip(*pts)
        curves.append(np.interp(grid, np.asarray(xs, float), np.asarray(ys, float)))
    return np.mean(curves, axis=0) if curves else np.full_like(grid, np.nan)


def plot(runs: Sequence[Mapping[str, Any]], rows: Sequence[int], budget: int, out_dir: Path,
         prefix: str = "ablation") -> list[Path]:
    """``<prefix>_accuracy.png``, ``<prefix>_entropy.png`` and ``<prefix>_dynamics.png`` (zero-advantage
    share and truncation rate): one line per row, mean over seeds, against generated tokens."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    grid = np.linspace(0, budget, 60)
    seeds = len({r["seed"] for r in runs})
    paths = []
    figures = (
        (f"{prefix}_accuracy.png", (("accuracy", "held-out accuracy (sampled, T=1)"),)),
        (f"{prefix}_entropy.png", (("entropy", "policy entropy (nats/token)"),)),
        (f"{prefix}_dynamics.png", (("zero_adv_share", "share of groups with zero advantage"),
                                    ("truncation_rate", "share of samples cut at the limit"))),
    )
    for fname, panels in figures:
        fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.2), squeeze=False)
        for ax, (key, label) in zip(axes[0], panels):
            for row in rows:
                mine = [r for r in runs if r["row"] == row]
                style = "--" if row >= len(ABLATION) else "-"  # rows outside the paper's ladder dashed
                ax.plot(grid / 1000, _mean_curve(mine, grid, key), style, label=ROWS[row][0], lw=1.8)
            ax.set_xlabel("generated tokens (thousands)")
            ax.set_ylabel(label)
            ax.set_title(f"DAPO ablation, mean over {seeds} seeds")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _warm_job(settings: AblationSettings, seed: int, cache_dir: Path) -> dict[str, Any]:
    """Worker: warm-start ``seed`` into ``cache_dir`` (the runs then load it); returns the stats."""
    torch.set_num_threads(1)
    return warm_started(settings, seed, cache_dir)[2]


def _row_job(settings: AblationSettings, row: int, seed: int, cache_dir: Path, out_dir: str) -> dict[str, Any]:
    """Worker: one (row, seed) run from the cached warm start of ``seed``."""
    torch.set_num_threads(1)
    model, tok, _ = warm_started(settings, seed, cache_dir)
    return run_one(settings, row, seed, model, tok, out_dir)


def _log_run(log: Any, r: Mapping[str, Any]) -> None:
    entropy = r["final_entropy"] if r["final_entropy"] is None else round(r["final_entropy"], 3)
    log(f"  s{r['seed']} {r['config']:<28} acc {r['initial_accuracy']:.3f} -> {r['final_accuracy']:.3f}  "
        f"steps {r['steps']:>3}  tokens {r['tokens']}  trunc {r['truncation_rate']:.3f}  H_end {entropy}"
        f"  ({r['seconds']:.0f} s)")


def run_ablation(settings: AblationSettings, *, cache_dir: Path | None = None, jobs: int = 1,
                 log: Any = print) -> dict[str, Any]:
    """Every (seed, row) run; returns ``{"settings", "warm_start", "runs", "table"}``.

    With ``jobs > 1`` the warm starts and then the runs go to that many worker processes (one torch
    thread each); every run is the same computation as in the sequential order, only scheduled apart.
    """
    runs: list[dict[str, Any]] = []
    warm: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dapo-ablation-") as tmp:
        if jobs > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            cache = Path(cache_dir) if cache_dir is not None else Path(tmp) / "warm"
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                for seed, stats in zip(settings.seeds, pool.map(_warm_job, [settings] * len(settings.seeds),
                                                                 settings.seeds, [cache] * len(settings.seeds))):
                    warm[str(seed)] = stats
                    log(f"seed {seed}: warm start {stats['steps']} steps, probe accuracy "
                        f"{stats['probe_accuracy']:.3f}")
                futures = [pool.submit(_row_job, settings, row, seed, cache, tmp)
                           for seed in settings.seeds for row in settings.rows]
                for future in futures:
                    runs.append(future.result())
                    _log_run(log, runs[-1])
        else:
            for seed in settings.seeds:
                t = time.perf_counter()
                model, tok, stats = warm_started(settings, seed, cache_dir)
                warm[str(seed)] = stats
                log(f"seed {seed}: warm start {stats['steps']} steps, probe accuracy "
                    f"{stats['probe_accuracy']:.3f} ({time.perf_counter() - t:.0f} s)")
                for row in settings.rows:
                    runs.append(run_one(settings, row, seed, model, tok, tmp))
                    _log_run(log, runs[-1])
    settings_dict = asdict(settings) | {"base": dict(settings.base)}
    return {"settings": settings_dict, "warm_start": warm, "runs": runs,
            "table": summarise(runs, settings.rows), "comparisons": comparisons(runs, settings.rows)}


def _report(result: Mapping[str, Any]) -> None:
    print(format_table(result["table"]))
    if result.get("comparisons"):
        print(format_comparisons(result["comparisons"]))


def _name_of(settings: Mapping[str, Any]) -> str:
    """The output name of a result file's settings (files written before ``name`` existed: by task)."""
    if "name" in settings:
        return str(settings["name"])
    task = settings["base"].get("task")
    return {"Arithmetic-v0": "ablation_arithmetic", "Largest-v0": "ablation_largest"}.get(task, "ablation")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 rows, 1 seed, a few hundred tokens")
    parser.add_argument("--budget", type=int, help="generated tokens per run (overrides the mode's)")
    parser.add_argument("--eval-points", type=int, help="evaluations over the budget (overrides the mode's)")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (overrides the mode's)")
    parser.add_argument("--rows", type=int, nargs="+",
                        help=f"rows 0..{len(ROWS) - 1}: " + "; ".join(f"{i} {n}" for i, (n, _) in enumerate(ROWS)))
    parser.add_argument("--out", type=Path, help="JSON path (default benchmarks/out/<mode's name>.json, git-ignored; "
                                                 "benchmarks/results/<name>.json updates the tracked result)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override a shared TrainConfig field of every row, e.g. --set lr=5e-4")
    parser.add_argument("--warmstart-target", type=float, help="warm-start probe accuracy to stop at")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--largest", action="store_true",
                      help="the earlier Largest-v0 regime (fixed-length answers; rows 0-5)")
    mode.add_argument("--arithmetic", action="store_true",
                      help="the first, single-digit Arithmetic regime (the negative control; rows 0-5)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes for the runs (default 1)")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--plot-only", type=Path, metavar="JSON", help="redraw the plots and table of a result file")
    parser.add_argument("--img-dir", type=Path, default=UNTRACKED_DIR,
                        help="where the PNG plots go (default benchmarks/out; docs/img updates the docs' plots)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "runs" / "ablation_cache",
                        help="keeps warm-started models between runs ('none' disables)")
    args = parser.parse_args(argv)
    if args.plot_only is not None:
        result = json.loads(args.plot_only.read_text())
        rows = result["settings"]["rows"]
        result["table"] = summarise(result["runs"], rows)
        result["comparisons"] = comparisons(result["runs"], rows)
        args.plot_only.write_text(json.dumps(result, indent=1, default=float) + "\n")
        _report(result)
        for p in plot(result["runs"], rows, result["settings"]["budget_tokens"], args.img_dir,
                      _name_of(result["settings"])):
            print(f"wrote {p}")
        return 0
    settings = QUICK if args.quick else ARITHMETIC if args.arithmetic else LARGEST if args.largest else FULL
    changes: dict[str, Any] = {}
    if args.budget is not None:
        changes["budget_tokens"] = args.budget
    if args.eval_points is not None:
        changes["eval_points"] = args.eval_points
    if args.seeds:
        changes["seeds"] = tuple(args.seeds)
    if args.rows:
        changes["rows"] = tuple(args.rows)
    if args.set:
        from dapo_env.learners.cli import parse_overrides

        changes["base"] = dict(settings.base) | parse_overrides(args.set)
    if args.warmstart_target is not None:
        changes["warmstart_target"] = args.warmstart_target
    if changes:
        settings = AblationSettings(**(asdict(settings) | {"base": dict(settings.base)} | changes))
    print(f"settings: {asdict(settings)}", flush=True)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    cache = None if str(args.cache_dir) == "none" else args.cache_dir
    result = run_ablation(settings, cache_dir=cache, jobs=max(1, args.jobs))
    result["seconds"] = time.perf_counter() - t0
    _report(result)
    write_json(out_path(args.out, settings.name), json.loads(json.dumps(result, default=float)), indent=1)
    print(f"({result['seconds']:.0f} s)")
    if not args.quick and not args.no_plots:
        for p in plot(result["runs"], settings.rows, settings.budget_tokens, args.img_dir, settings.name):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
