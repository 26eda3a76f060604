"""Curated vs full training data on the default tiny setup: how many generated samples each wastes.

The default run's setup (``preset("tiny")``: Largest-v0 over 5-6 digits, the tiny model warm-started to the
default run's starting accuracy, G=8, dynamic sampling) is evaluated on a pool of ``--pool`` training problems
with ``--n`` samples each (``dapo-env eval``'s loop, :func:`~dapo_env.learners.run.eval_run.run_eval`), and
``dapo-env curate`` keeps the problems whose measured pass rate lies in ``--pass-rate``. Then two DAPO runs
start from the same warm-started weights with the same seed and settings and differ only in their training
problems: **full** (the whole pool) and **curated** (the kept problems). Both evaluate on Largest-v0's test
split.

Reported per arm, over every group generated for training (kept or filtered out): the informative-group share
(``0 < #correct < G``: the groups whose advantages are not all zero), generated tokens per informative group
(what one useful group cost), the generation rounds per step, and held-out accuracy at the start and the end;
then curated / full ratios. Each run trains on its pool as a mixture of one task (``<id>:1``), so its metrics
hold the exact per-task counts (``task/<id>/groups_generated``, ``informative_share``, ...).

Run::

    python benchmarks/bench_curate.py            # benchmarks/out/bench_curate.json (git-ignored)
    python benchmarks/bench_curate.py --quick    # a smoke test: tiny sizes, seconds to minutes
    python benchmarks/bench_curate.py --out benchmarks/results/bench_curate.json   # the tracked result
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from _paths import out_path, write_json
from ablation import SORT_TASK

from dapo_env.learners.run.checkpoint import build_model
from dapo_env.learners.config import preset
from dapo_env.learners.run.curate import curate
from dapo_env.learners.engines import make_engine
from dapo_env.learners.run.eval_run import EvalSettings, run_eval
from dapo_env.learners.metrics import read_metrics
from dapo_env.learners.trainer import train
from dapo_env.learners.warmstart import warm_start_for
from dapo_env.tasks import Task, get_task, register_task, unregister_task
from dapo_env.types import Problem


@dataclass(frozen=True)
class PoolSource:
    """Training problems given up front (``train``), and the source task's own split for anything else."""

    train: tuple[Problem, ...]
    source: Task
    task_kwargs: Mapping[str, Any]

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Problem]:
        if split == "train":
            return self.train
        return self.source.load(split, **{**dict(self.task_kwargs), **kwargs})


def pool_task(name: str, problems: Sequence[Problem], source: Task, task_kwargs: Mapping[str, Any]) -> Task:
    """``source`` training on ``problems`` only (its verifier, prompt and held-out split unchanged): what the
    curated spec declares (``dapo-env train --task DIR/<Name>.yaml``), built in memory."""
    return Task(name=name, source=PoolSource(tuple(problems), source, dict(task_kwargs)), verifier=source.verifier,
                prompt_template=source.prompt_template, description=f"{len(problems)} problems of {source.env_id}")


def arm_totals(records: Sequence[Mapping[str, Any]], task_id: str, group_size: int) -> dict[str, Any]:
    """Sums over a run's training steps: groups generated, informative groups, generated tokens, rounds; the same
    over its first step alone (fresh samples of the evaluated policy: the curation's own premise, before any
    update moves the policy); and the per-step series."""
    steps = [r for r in records if r.get("step", 0) >= 1]
    evals = [r["eval/accuracy"] for r in records if r.get("eval/accuracy") is not None]
    totals = _sums(steps, task_id, group_size)
    first = _sums(steps[:1], task_id, group_size)
    prefix = f"task/{task_id}/"
    return {**totals, "first_step": first, "heldout_start": evals[0] if evals else None,
            "heldout_end": evals[-1] if evals else None,
            "series": {"informative_share": [r[prefix + "informative_share"] for r in steps],
                       "groups_generated": [r[prefix + "groups_generated"] for r in steps],
                       "accuracy_before_filter": [r[prefix + "accuracy_before_filter"] for r in steps]}}


def _sums(steps: Sequence[Mapping[str, Any]], task_id: str, group_size: int) -> dict[str, Any]:
    prefix = f"task/{task_id}/"
    groups = sum(r[prefix + "groups_generated"] for r in steps)
    informative = sum((r[prefix + "informative_share"] or 0.0) * r[prefix + "groups_generated"] for r in steps)
    tokens = sum((r[prefix + "response_length_mean"] or 0.0) * r[prefix + "groups_generated"] * group_size
                 for r in steps)
    return {"steps": len(steps), "groups_generated": int(groups), "informative_groups": round(informative),
            "informative_share": informative / groups if groups else None,
            "generated_tokens": round(tokens), "tokens_per_informative_group": tokens / informative if informative else None,
            "rounds_per_step": sum(r["rollout/rounds"] for r in steps) / max(len(steps), 1),
            "partial_batches": steps[-1]["rollout/partial_batches"] if steps else None,
            "accuracy_before_filter": sum(r[prefix + "accuracy_before_filter"] or 0.0 for r in steps) / max(len(steps), 1)}


#: The training problems of each regime (``preset("tiny")`` fields on top of the default run's).
REGIMES: dict[str, dict[str, Any]] = {"largest": {}, "sort": dict(SORT_TASK)}


def binomial_histogram(problems: int, n: int, p: float, bins: int = 10) -> list[float]:
    """The pass-rate histogram (``curate.json``'s bins) expected if every problem were equally hard: each problem's
    count of right answers Binomial(n, p) at the pool's mean rate p. A measured histogram close to it means the
    per-problem rates are sampling noise, and curating by them selects noise.

    Example:
        >>> binomial_histogram(100, 2, 0.5)
        [25.0, 0.0, 0.0, 0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 25.0]
    """
    import math

    expected = [0.0] * bins
    for k in range(n + 1):
        expected[min(bins - 1, int(k / n * bins))] += problems * math.comb(n, k) * p**k * (1 - p) ** (n - k)
    return expected


def format_table(arms: Mapping[str, Mapping[str, Any]]) -> str:
    def f(value: Any, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    head = (f"{'arm':<9} {'problems':>8} {'step 1 share':>12} {'step 1 tok/inf':>14} {'groups':>7} "
            f"{'informative':>11} {'share':>6} {'tokens/informative':>18} {'rounds/step':>11} "
            f"{'held-out start -> end':>22}")
    lines = [head]
    for name, a in arms.items():
        first = a["first_step"]
        lines.append(f"{name:<9} {a['problems']:>8} {f(first['informative_share'], 3):>12} "
                     f"{f(first['tokens_per_informative_group'], 1):>14} {a['groups_generated']:>7} "
                     f"{a['informative_groups']:>11} {f(a['informative_share'], 3):>6} "
                     f"{f(a['tokens_per_informative_group'], 1):>18} {f(a['rounds_per_step'], 2):>11} "
                     f"{f(a['heldout_start'], 3) + ' -> ' + f(a['heldout_end'], 3):>22}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--regime", choices=sorted(REGIMES), default="largest",
                        help="largest: the default tiny setup (default); sort: the ablation's regime, Sort-v0 over "
                             "2-8 digits, whose problems differ in difficulty")
    parser.add_argument("--pool", type=int, default=512, help="training problems evaluated and curated (default 512)")
    parser.add_argument("--n", type=int, default=8, help="samples per problem that measure its pass rate (default 8)")
    parser.add_argument("--pass-rate", default="0.1:0.9", help="the kept range (default 0.1:0.9)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per arm (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny sizes, every problem kept")
    parser.add_argument("--out", type=Path, help="JSON path (default benchmarks/out/bench_curate.json, git-ignored)")
    args = parser.parse_args(argv)
    from dapo_env.learners.run.curate import parse_range

    low, high = (0.0, 1.0) if args.quick else parse_range(args.pass_rate)  # quick: keep all (a tiny pool may hold none)
    pool, n, steps = (32, 4, 2) if args.quick else (args.pool, args.n, args.steps)
    quick = dict(batch_size=4, mini_batch_size=4, warmstart_steps=20, eval_size=16) if args.quick else {}
    regime = REGIMES[args.regime]
    base = preset("tiny", seed=args.seed, progress=False, **quick, **regime)  # the default run's settings
    torch.set_num_threads(base.num_threads or 1)
    t0 = time.perf_counter()
    source = get_task(base.task)
    kwargs = dict(base.task_kwargs)
    problems = list(source.load(split="train", **kwargs)[:pool])
    model, tokenizer = build_model(base)
    warm = warm_start_for(base)(model, tokenizer, source)  # the default run's warm start
    print(f"warm start: {warm}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        full = pool_task(f"{source.name}Pool", problems, source, kwargs)
        register_task(full)
        engine = make_engine("hf", model, tokenizer, device="cpu", seed=args.seed, batch_size=256)
        settings = EvalSettings(task=full.env_id, split="train", size=pool, n=n, greedy=False,
                                temperature=base.temperature, max_response_tokens=base.max_response_tokens,
                                seed=args.seed)
        t_eval = time.perf_counter()
        run_eval(engine, full, problems, settings, Path(tmp) / "eval", progress=False)
        eval_s = time.perf_counter() - t_eval
        outcome = curate(Path(tmp) / "eval", low, high, Path(tmp) / "curated", name=f"{source.name}Curated")
        facts = json.loads((outcome.out_dir / "curate.json").read_text())
        kept_ids = set(facts["kept_ids"])
        curated = pool_task(f"{source.name}Curated", [p for p in problems if p.id in kept_ids], source, kwargs)
        register_task(curated)
        if not outcome.kept:
            raise SystemExit(f"no problem's pass rate lies in [{low:g}, {high:g}]: raise --pool or --n, or widen it")
        print(f"curated {outcome.kept} of {outcome.measured} problems (pass rate in [{low:g}, {high:g}]; "
              f"histogram {facts['histogram']})", flush=True)
        arms: dict[str, dict[str, Any]] = {}
        try:
            for name, task in (("full", full), ("curated", curated)):
                cfg = preset("tiny", seed=args.seed, progress=False, **quick, **{**regime, "task": f"{task.env_id}:1",
                             "task_kwargs": {}}, max_steps=steps, eval_every=0, checkpoint_every=0, plot_every=0,
                             report_every_eval=False, out_dir=tmp, name=f"run-{name}")
                t = time.perf_counter()
                result = train(cfg, model=copy.deepcopy(model), tokenizer=tokenizer)
                records = read_metrics(result.run_dir / "metrics.jsonl")
                arms[name] = {"problems": len(task.load()), **arm_totals(records, task.env_id, cfg.group_size),
                              "seconds": time.perf_counter() - t}
                print(f"{name}: {arms[name]}", flush=True)
        finally:
            unregister_task(full.env_id)
            unregister_task(curated.env_id)

    def ratio(key: str, part: str | None = None) -> float | None:
        a, b = ((arms[arm][part] if part else arms[arm])[key] for arm in ("curated", "full"))
        return a / b if a is not None and b else None

    result = {
        "command": "python benchmarks/bench_curate.py" + (" --quick" if args.quick else "")
                   + (f" --regime {args.regime}" if args.regime != "largest" else ""),
        "binomial_histogram": [round(x, 1) for x in binomial_histogram(facts["measured"], n, facts["mean_pass_rate"])],
        "settings": {"regime": args.regime, "task": base.task, "task_kwargs": kwargs, "pool": pool, "n": n, "pass_rate": [low, high],
                     "steps": steps, "seed": args.seed, "group_size": base.group_size, "batch_size": base.batch_size,
                     "max_gen_rounds": base.max_gen_rounds, "max_response_tokens": base.max_response_tokens,
                     "eval_size": base.eval_size, "temperature": base.temperature, "threads": torch.get_num_threads()},
        "warm_start": warm, "curation": {k: facts[k] for k in ("measured", "kept", "histogram", "mean_pass_rate", "samples_per_problem")},
        "eval_seconds": eval_s, "arms": arms,
        "first_step_informative_share_ratio": ratio("informative_share", "first_step"),
        "first_step_tokens_per_informative_group_ratio": ratio("tokens_per_informative_group", "first_step"),
        "informative_share_ratio": ratio("informative_share"),
        "tokens_per_informative_group_ratio": ratio("tokens_per_informative_group"),
        "rounds_per_step_ratio": ratio("rounds_per_step"), "seconds": time.perf_counter() - t0}
    print(format_table(arms))
    print({k: v for k, v in result.items() if k.endswith("_ratio")})
    write_json(out_path(args.out, "bench_curate" + ("" if args.regime == "largest" else f"_{args.regime}")), result)
    print(f"({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
