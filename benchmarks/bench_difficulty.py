"""Difficulty-aware sampling vs plain dynamic sampling at the same generated-token budget.

Both arms run DAPO (the ablation's last rung: dynamic sampling on) from the same warm-started tiny model
per seed, on the ablation's default regime (Sort-v0 over 2-8 digits: most groups of G=8 are all-right
for short lists and all-wrong for long ones), until each has generated the same number of tokens
(every sampled token, discarded groups included). The only difference: ``difficulty_sampling=True``
draws prompts by their chance of an informative group (``dapo_env.difficulty``) instead of uniformly.
The training pool is finite (``--pool`` problems, revisited like the epochs over a real dataset), since
per-problem beliefs only help on problems seen before.

Reported per arm (mean and std over seeds): generated tokens per informative group (what dynamic
sampling pays for each group it keeps), the share of zero-advantage groups among those generated, the
optimizer steps the budget bought, and held-out accuracy at the end (test split, temperature 1);
then the ratios difficulty / plain.

Run::

    python benchmarks/bench_difficulty.py             # 3 seeds; benchmarks/out/bench_difficulty.json (git-ignored)
    python benchmarks/bench_difficulty.py --quick     # seconds: a smoke test
    python benchmarks/bench_difficulty.py --out benchmarks/results/bench_difficulty.json   # the tracked result
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from _paths import out_path, write_json
from ablation import BASE, DAPO_ROW, FULL, QUICK, ROOT, AblationSettings, run_one, warm_started

ARMS: tuple[tuple[str, dict[str, Any]], ...] = (("plain dynamic sampling", {}),
                                                ("difficulty-aware", {"difficulty_sampling": True}))


def arm_settings(settings: AblationSettings, overrides: Mapping[str, Any], pool: int) -> AblationSettings:
    """``settings`` on a training pool of ``pool`` problems, with the arm's config overrides."""
    task_kwargs = dict(settings.base.get("task_kwargs", {})) | {"size": pool}
    return replace(settings, base=dict(settings.base) | {"task_kwargs": task_kwargs} | dict(overrides),
                   rows=(DAPO_ROW,))


def run_summary(run: Mapping[str, Any], batch_size: int) -> dict[str, Any]:
    """Per-run numbers: informative groups generated and tokens spent per informative group."""
    history = run["history"]
    generated = [s["rounds"] * batch_size for s in history if s["rounds"] is not None]
    zero = [s["zero_adv_share"] for s in history if s["zero_adv_share"] is not None]
    informative = sum(g * (1.0 - z) for g, z in zip(generated, zero))
    return {"seed": run["seed"], "steps": run["steps"], "tokens": run["tokens"],
            "groups_generated": int(sum(generated)), "informative_groups": informative,
            "tokens_per_informative_group": run["tokens"] / informative if informative else None,
            "zero_adv_share": float(sum(g * z for g, z in zip(generated, zero)) / max(sum(generated), 1)),
            "initial_accuracy": run["initial_accuracy"], "final_accuracy": run["final_accuracy"],
            "seconds": run["seconds"]}


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    kept = [v for v in values if v is not None]
    if not kept:
        return None, None
    return float(np.mean(kept)), float(np.std(kept))


def table(summaries: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for arm, runs in summaries.items():
        row: dict[str, Any] = {"arm": arm, "seeds": len(runs)}
        for key in ("tokens_per_informative_group", "zero_adv_share", "steps", "final_accuracy", "initial_accuracy"):
            row[key], row[f"{key}_std"] = _mean_std([r[key] for r in runs])
        rows.append(row)
    return rows


def ratios(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    plain, aware = rows[0], rows[1]

    def ratio(key: str) -> float | None:
        return aware[key] / plain[key] if plain[key] and aware[key] is not None else None

    return {"tokens_per_informative_group_ratio": ratio("tokens_per_informative_group"),
            "zero_adv_share_ratio": ratio("zero_adv_share"), "steps_ratio": ratio("steps"),
            "final_accuracy_diff": (aware["final_accuracy"] - plain["final_accuracy"])
            if aware["final_accuracy"] is not None and plain["final_accuracy"] is not None else None}


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    def f(value: float | None, std: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f} ± {std:.{digits}f}"

    lines = [f"{'arm':<24} {'seeds':>5} {'tokens/informative group':>26} {'zero-adv share':>16} {'steps':>14} "
             f"{'held-out acc start -> end':>28}"]
    for r in rows:
        lines.append(f"{r['arm']:<24} {r['seeds']:>5} {f(r['tokens_per_informative_group'], r['tokens_per_informative_group_std'], 0):>26} "
                     f"{f(r['zero_adv_share'], r['zero_adv_share_std'], 3):>16} {f(r['steps'], r['steps_std'], 1):>14} "
                     f"{f(r['initial_accuracy'], r['initial_accuracy_std'], 3) + ' -> ' + f(r['final_accuracy'], r['final_accuracy_std'], 3):>28}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, a few hundred tokens, tiny sizes")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 1 2)")
    parser.add_argument("--budget", type=int, default=None,
                        help="generated tokens per run (default 300000; the ablation's full budget is 600000)")
    parser.add_argument("--pool", type=int, default=512, help="training problems (default 512)")
    parser.add_argument("--eval-size", type=int, default=None, help="held-out problems (default 200)")
    parser.add_argument("--out", type=Path, help="JSON path (default benchmarks/out/bench_difficulty.json, git-ignored)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "runs" / "ablation_cache",
                        help="keeps warm-started models between runs ('none' disables)")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else replace(FULL, budget_tokens=300_000, seeds=(0, 1, 2), eval_points=1)
    if args.seeds:
        settings = replace(settings, seeds=tuple(args.seeds))
    if args.budget:
        settings = replace(settings, budget_tokens=args.budget)
    if args.eval_size:
        settings = replace(settings, eval_size=args.eval_size)
    pool = 64 if args.quick else args.pool
    cache = None if str(args.cache_dir) == "none" else args.cache_dir
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    summaries: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in ARMS}
    batch_size = int(settings.base.get("batch_size", BASE["batch_size"]))
    with tempfile.TemporaryDirectory() as out_dir:
        for seed in settings.seeds:
            arms = [(name, arm_settings(settings, overrides, pool)) for name, overrides in ARMS]
            model, tok, _ = warm_started(arms[0][1], seed, cache)  # the arms differ only after the warm start
            for name, arm in arms:
                run = run_one(arm, DAPO_ROW, seed, model, tok, f"{out_dir}/{len(summaries[name])}-{name[:5]}")
                summaries[name].append(run_summary(run, batch_size))
                print(f"seed {seed} {name}: {summaries[name][-1]}", flush=True)
    rows = table(summaries)
    result = {"settings": {"budget_tokens": settings.budget_tokens, "seeds": list(settings.seeds), "pool": pool,
                           "eval_size": settings.eval_size, "task": settings.base.get("task"),
                           "base": json.loads(json.dumps(dict(settings.base), default=str))},
              "table": rows, **ratios(rows), "runs": summaries, "seconds": time.perf_counter() - t0}
    print(format_table(rows))
    print({k: v for k, v in result.items() if k.endswith("_ratio") or k.endswith("_diff")})
    write_json(out_path(args.out, "bench_difficulty"), result, indent=1)
    print(f"({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
