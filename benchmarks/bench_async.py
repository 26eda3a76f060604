"""Synchronous vs asynchronous rollouts (``max_staleness`` 1 and 2), side by side: throughput and accuracy.

Every (workload, setting, seed) trains in its OWN fresh subprocess for the same number of steps, so each
setting generates about the same number of tokens (dynamic sampling's extra rounds aside; the JSON records
the counts) and held-out accuracy is compared at (nearly) equal generated tokens. Settings:

- ``sync``: ``max_staleness=0``, generation in the learner's process, ``--threads`` torch threads;
- ``staleness_1`` / ``staleness_2``: a rollout worker process generates the next rounds while the learner
  updates; learner and worker share the same ``--threads`` (``num_threads``, the total) under the
  ``--thread-split`` policy (``num_threads_split``; default ``work-conserving``: the side that waits lends
  its threads to the other, ``static``: ``thread_shares`` always, the policy before the budget existed).
  At ``--threads 1`` each process still needs a thread, so the asynchronous runs use 1 + 1 and the JSON
  says ``equal_total_threads: false``.

Workloads: ``tiny`` (the CPU default run: the ``tiny`` preset with its warm start, Largest-v0) and
``smollm2`` (a SmolLM2-135M-shaped random-init Llama, 30 layers x 576, with the tiny tokenizer's vocabulary,
on the tiny run's task with a toy verifier that accepts an even-length response, so about half the samples
are right and every step updates; its accuracy measures nothing and is reported for completeness).

Measured per run, over training steps 2..N (the first step includes starting the worker): wall-clock
steps/s and generated tokens/s; CPU seconds of the run's process tree (learner + worker); the final
held-out accuracy (the ``tiny`` preset's greedy eval); the share of step time the learner spent waiting for
rollouts (generating them itself when synchronous): the overlap, readable even on a loaded machine; the
mean torch threads of the learner's and the worker's forward passes (``perf/*_threads_mean``).
``speedup_staleness_k`` is the mean over seeds of steps/s at staleness k over the same seed's sync
steps/s; ``amdahl_bound_staleness_k`` the best speed-up overlap can give that sync run, ``1 / max(s, 1 - s)``
for its rollout share ``s``; ``overlap_efficiency_staleness_k`` the speed-up over that bound (per seed,
then averaged).

Run (full: both workloads, 3 seeds; sizes chosen for ~25 minutes on an idle 2-core box)::

    python benchmarks/bench_async.py                              # -> benchmarks/out/bench_async.json
    python benchmarks/bench_async.py --workloads tiny --seeds 1 --steps 6    # a few minutes
    python benchmarks/bench_async.py --out benchmarks/results/bench_async.json   # refresh the tracked result
    python benchmarks/bench_async.py --ablation --out benchmarks/results/bench_async_ablation.json
        # the staleness ablation: max_staleness 0/1/2/4 x (none, token-truncate IS) on Sort-v0, 3 seeds
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from _paths import REPO, add_out_argument, out_path, write_json

SETTINGS: dict[str, int] = {"sync": 0, "staleness_1": 1, "staleness_2": 2}
WORKLOADS = ("tiny", "smollm2", "sort")  # sort: the ablation's task (--ablation); not a default throughput workload
#: The staleness ablation (``--ablation``): (label, max_staleness, is_correction) on the ablation task.
ABLATION_SETTINGS: tuple[tuple[str, int, str | None], ...] = (
    ("sync", 0, None),
    *((f"staleness_{k}{suffix}", k, correction) for k in (1, 2, 4)
      for suffix, correction in (("", None), ("_corrected", "token-truncate"))),
)
#: SmolLM2-135M's shape (hidden, layers, heads, kv heads, MLP width); the vocabulary is the tokenizer's.
SMOLLM2_SHAPE = dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                     intermediate_size=1536)


def even_length(response: str, reference: Any) -> bool:
    """The smollm2 workload's toy verifier: about half of a random model's responses pass."""
    return len(response) % 2 == 0


def smollm2_folder(folder: Path) -> Path:
    """Save a SmolLM2-135M-shaped random-init Llama with the tiny tokenizer to ``folder`` (once)."""
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from dapo_env.learners.models.tiny import build_tokenizer

    tok = build_tokenizer(model_max_length=256)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), max_position_embeddings=256, tie_word_embeddings=True,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         **SMOLLM2_SHAPE)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def run_config(workload: str, setting: str, seed: int, steps: int, threads: int, out_dir: str,
               model_dir: str | None = None, is_correction: str | None = None, quick: bool = False,
               staleness: int | None = None, thread_split: str = "work-conserving") -> Any:
    """The :class:`TrainConfig` of one run (``quick``: no warm start, 8 prompts, 16 eval problems: a smoke run;
    ``staleness`` overrides the setting's, for the ablation). Every throughput setting gets ``threads`` in
    total (learner and worker together); the ablation's task keeps one thread (it measures learning).

    Example:
        >>> cfg = run_config("tiny", "staleness_1", seed=2, steps=5, threads=2, out_dir="runs")
        >>> cfg.max_staleness, cfg.num_threads, cfg.num_threads_split, cfg.seed, cfg.task
        (1, 2, 'work-conserving', 2, 'Largest-v0')
    """
    from dapo_env.learners.config import preset

    name = f"{workload}-{setting}-s{seed}" if staleness is None else f"{workload}-k{staleness}-{is_correction}-s{seed}"
    staleness = SETTINGS[setting] if staleness is None else staleness
    common = dict(max_steps=steps, seed=seed, max_staleness=staleness, eval_every=0, checkpoint_every=0,
                  plot_every=0, progress=False, out_dir=out_dir, name=name,
                  num_threads=1 if workload == "sort" else threads, num_threads_split=thread_split,
                  is_correction=is_correction if staleness > 0 else None)
    quick_sizes = dict(warmstart_steps=0, batch_size=8, eval_size=16) if quick else {}
    if workload == "tiny":
        return preset("tiny", **common, **quick_sizes)
    if workload == "sort":  # the ablation task (docs/ablation.md): Sort-v0, sampled held-out accuracy
        from ablation import SORT_TASK

        start = dict(model=model_dir, warmstart_steps=0) if model_dir is not None else {}  # the shared warm start
        return preset("tiny", **SORT_TASK, **start, eval_temperature=1.0, **common, **quick_sizes)
    if workload == "smollm2":
        return preset("tiny", model=model_dir, verifier="bench_async:even_length", warmstart_steps=0,
                      batch_size=8, mini_batch_size=8, micro_batch_size=16, eval_size=32, lr=1e-5, **common)
    raise ValueError(f"unknown workload {workload!r}; choose from {WORKLOADS}")


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one run in this process; return its throughput and accuracy."""
    from dapo_env.learners.trainer import train

    cfg = run_config(**spec)
    start = time.perf_counter()
    result = train(cfg)
    records = [r for r in result.metrics if r.get("step", 0) >= 1]
    first, last = records[0], records[-1]
    measured = records[1:] or records
    span = max(last["time/elapsed_s"] - (first["time/elapsed_s"] if len(records) > 1 else 0.0), 1e-9)
    tokens = sum(r["rollout/samples_generated"] * (r["response/length_mean"] or 0.0) for r in measured)
    all_tokens = sum(r["rollout/samples_generated"] * (r["response/length_mean"] or 0.0) for r in records)
    return {"steps_per_s": len(measured) / span, "generated_tokens_per_s": tokens / span,
            "generated_tokens": all_tokens, "accuracy": result.final_eval_accuracy,
            "initial_accuracy": result.initial_eval_accuracy, "train_wall_s": span,
            "total_wall_s": time.perf_counter() - start,
            "staleness_mean": float(np.mean([r["staleness/mean"] for r in records if r.get("staleness/mean") is not None]
                                            or [0.0])),
            "worker_restarts": last.get("async/worker_restarts", 0.0),
            "is_weight_mean": _mean_of(records, "is/weight_mean"),
            "is_truncated_share": _mean_of(records, "is/truncated_share"),
            "mismatch_k3": _mean_of(records, "is/mismatch_k3"),
            "clip_frac": _mean_of(records, "policy/clip_frac_high", "policy/clip_frac_low"),
            "logprob_mismatch": _mean_of(records, "policy/logprob_mismatch_mean"),
            # the share of a step the learner waits for rollouts (sync: generating them itself)
            "rollout_share": float(sum(r["time/rollout_s"] for r in measured) / sum(r["time/step_s"] for r in measured)),
            "update_s_mean": float(np.mean([r.get("time/update_s") or 0.0 for r in measured])),
            "thread_split": cfg.num_threads_split if cfg.uses_rollout_worker else None,
            "total_threads": total_threads(cfg),
            # the mean torch threads of each side's forward passes (None: no worker, or no update)
            "learner_threads_mean": _mean_of(measured, "perf/learner_threads_mean"),
            "worker_threads_mean": _mean_of(measured, "perf/worker_threads_mean")}


def total_threads(cfg: Any) -> int:
    """The most torch threads a run computes with at once: ``num_threads``, or with a rollout worker the
    learner's and the worker's shares together (at ``num_threads=1`` both still need one: 2).

    Example:
        >>> from dapo_env.learners.config import preset
        >>> [total_threads(preset("tiny", num_threads=t, max_staleness=k)) for t, k in ((2, 0), (2, 1), (1, 0), (1, 1))]
        [2, 2, 1, 2]
    """
    from dapo_env.learners.rollout.threads import thread_shares

    threads = cfg.num_threads or 1
    return sum(thread_shares(threads)) if cfg.uses_rollout_worker else threads


def amdahl_bound(rollout_share: float) -> float:
    """The best speed-up overlap can give a synchronous loop that spends ``rollout_share`` of each step on
    rollouts: with perfect overlap a step lasts as long as its longer part.

    Example:
        >>> round(amdahl_bound(0.32), 3), amdahl_bound(0.5), amdahl_bound(0.0)
        (1.471, 2.0, 1.0)
    """
    return 1.0 / max(rollout_share, 1.0 - rollout_share)


def _mean_of(records: list[dict[str, Any]], *keys: str) -> float | None:
    """The mean over steps of the sum of ``keys`` (steps missing any of them are skipped; None if none has)."""
    values = [sum(r[k] for k in keys) for r in records if all(r.get(k) is not None for k in keys)]
    return float(np.mean(values)) if values else None


def run_in_subprocess(spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_one` in a fresh interpreter; adds the CPU seconds of its process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True,
                          cwd=str(REPO))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"run {spec} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return out


def summarize(runs: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Per setting: means and standard deviations over seeds; speedups as the mean of per-seed ratios."""
    by = {(r["setting"], r["seed"]): r for r in runs}
    out: dict[str, Any] = {}
    for setting in SETTINGS:
        rows = [by[(setting, s)] for s in seeds if (setting, s) in by]
        if not rows:
            continue
        for key in ("steps_per_s", "generated_tokens_per_s", "accuracy", "generated_tokens", "cpu_s", "rollout_share",
                    "learner_threads_mean", "worker_threads_mean"):
            values = [r[key] for r in rows if r.get(key) is not None]
            out[f"{key}_{setting}"] = float(np.mean(values)) if values else None
            out[f"{key}_{setting}_std"] = float(np.std(values)) if len(values) > 1 else None
        if setting != "sync":
            pairs = [(by[(setting, s)], by[("sync", s)]) for s in seeds if (setting, s) in by and ("sync", s) in by]
            ratios = [a["steps_per_s"] / b["steps_per_s"] for a, b in pairs]
            out[f"speedup_{setting}"] = float(np.mean(ratios)) if ratios else None
            # overlap efficiency: the achieved speed-up over the Amdahl bound of the same seed's sync run
            bounds = [amdahl_bound(b["rollout_share"]) for a, b in pairs if b.get("rollout_share") is not None]
            if bounds and len(bounds) == len(ratios):
                out[f"amdahl_bound_{setting}"] = float(np.mean(bounds))
                out[f"overlap_efficiency_{setting}"] = float(np.mean([r / b for r, b in zip(ratios, bounds)]))
            threads = {(a.get("total_threads"), b.get("total_threads")) for a, b in pairs}
            if all(None not in t for t in threads):
                out[f"equal_total_threads_{setting}"] = all(x == y for x, y in threads)
    return out


def warm_sort_model(seed: int, cache_dir: Path) -> Path:
    """The ablation's warm-started tiny model of ``seed`` (docs/ablation.md: supervised until 20 % of a
    train probe; the same start ``ablation.py`` and ``bench_difficulty.py`` use, from their cache), saved
    with its tokenizer as a model folder that every run of that seed starts from."""
    folder = cache_dir / f"hf-sort-warm-s{seed}"
    if not (folder / "config.json").exists():
        from dataclasses import replace

        from ablation import FULL, warm_started

        model, tok, _ = warm_started(replace(FULL, seeds=(seed,)), seed, cache_dir)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    return folder


def ablation(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """The staleness ablation: ``ABLATION_SETTINGS`` x seeds on the ablation task, same steps per run.

    Every run of a seed starts from the same warm-started model (:func:`warm_sort_model`; none with
    ``--quick``) and trains ``--steps`` steps, so the settings generate about the same number of tokens (recorded); the
    held-out accuracy is the ablation's sampled one (temperature 1, 200 test problems).
    """
    steps = args.steps or 40
    chosen = [s for s in ABLATION_SETTINGS if args.settings is None or s[0] in args.settings]
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-async-ablation-") as tmp:
        for seed in seeds:
            model_dir = None if args.quick else str(warm_sort_model(seed, args.cache_dir))
            for label, staleness, correction in chosen:
                spec = dict(workload="sort", setting="sync", staleness=staleness, seed=seed, steps=steps,
                            threads=args.threads, out_dir=tmp, is_correction=correction, quick=args.quick,
                            model_dir=model_dir)
                run = {"setting": label, "max_staleness": staleness, "is_correction": correction, "seed": seed,
                       **run_in_subprocess(spec)}
                runs.append(run)
                print(f"sort     {label:24s} seed {seed}: acc {run['initial_accuracy']} -> {run['accuracy']} "
                      f"staleness {run['staleness_mean']:.2f} wall {run['total_wall_s']:.0f}s", flush=True)
    table = []
    for label, staleness, correction in chosen:
        rows = [r for r in runs if r["setting"] == label]

        def stat(key: str, rows: list[dict[str, Any]] = rows) -> tuple[float | None, float | None]:
            values = [r[key] for r in rows if r.get(key) is not None]
            return (float(np.mean(values)) if values else None, float(np.std(values)) if len(values) > 1 else None)

        gains = [r["accuracy"] - r["initial_accuracy"] for r in rows]
        table.append({"setting": label, "max_staleness": staleness, "is_correction": correction,
                      "accuracy": stat("accuracy")[0], "accuracy_std": stat("accuracy")[1],
                      "gain": float(np.mean(gains)), "gain_std": float(np.std(gains)) if len(gains) > 1 else None,
                      "staleness_mean": stat("staleness_mean")[0], "generated_tokens": stat("generated_tokens")[0],
                      "is_truncated_share": stat("is_truncated_share")[0], "clip_frac": stat("clip_frac")[0],
                      "mismatch_k3": stat("mismatch_k3")[0], "steps_per_s": stat("steps_per_s")[0]})
    return {"task": "Sort-v0 (docs/ablation.md's task, the tiny preset's sizes and warm start)", "steps": steps,
            "seeds": seeds, "is_cap": 2.0, "runs": runs, "table": table}


def ablation_table(result: dict[str, Any]) -> str:
    """The ablation's markdown table (means over seeds, +- the standard deviation)."""
    def pm(mean: float | None, sd: float | None, digits: int = 3) -> str:
        return "-" if mean is None else f"{mean:.{digits}f}" + (f" +- {sd:.{digits}f}" if sd is not None else "")

    def num(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = ["| setting | max_staleness | correction | mean staleness | held-out accuracy | gain over the start | "
             "generated tokens | IS-capped share | clip fraction | engine-learner mismatch (k3) |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in result["table"]:
        lines.append(f"| {row['setting']} | {row['max_staleness']} | {row['is_correction'] or 'none'} | "
                     f"{num(row['staleness_mean'], 2)} | {pm(row['accuracy'], row['accuracy_std'])} | "
                     f"{pm(row['gain'], row['gain_std'])} | {num(row['generated_tokens'], 0)} | "
                     f"{num(row['is_truncated_share'])} | {num(row['clip_frac'])} | {num(row['mismatch_k3'], 4)} |")
    return "\n".join(lines)


def results_table(result: dict[str, Any]) -> str:
    """The throughput table: per workload and setting, steps/s, the speed-up over sync, the rollout share, the
    Amdahl bound of the sync run and the overlap efficiency, both sides' mean threads, accuracy and CPU seconds."""
    def num(value: float | None, digits: int = 2) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [f"{'workload':9s} {'setting':12s} {'steps/s':>8s} {'speedup':>8s} {'rollout share':>13s} {'bound':>6s} "
             f"{'overlap eff':>11s} {'equal thr':>9s} {'learner thr':>11s} {'worker thr':>10s} {'accuracy':>14s} "
             f"{'cpu s':>7s}"]
    for workload, w in result["workloads"].items():
        for s in SETTINGS:
            if w.get(f"steps_per_s_{s}") is None:
                continue
            acc, sd = w.get(f"accuracy_{s}"), w.get(f"accuracy_{s}_std")
            acc_text = "-" if acc is None else f"{acc:.3f}" + (f" +-{sd:.3f}" if sd is not None else "")
            equal = w.get(f"equal_total_threads_{s}")
            lines.append(
                f"{workload:9s} {s:12s} {w[f'steps_per_s_{s}']:8.3f} {num(1.0 if s == 'sync' else w.get(f'speedup_{s}')):>8s} "
                f"{num(w.get(f'rollout_share_{s}')):>13s} {num(w.get(f'amdahl_bound_{s}')):>6s} "
                f"{num(w.get(f'overlap_efficiency_{s}')):>11s} {'-' if equal is None else str(equal).lower():>9s} "
                f"{num(w.get(f'learner_threads_mean_{s}')):>11s} {num(w.get(f'worker_threads_mean_{s}')):>10s} "
                f"{acc_text:>14s} {num(w.get(f'cpu_s_{s}'), 0):>7s}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=["tiny", "smollm2"])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps per run of every workload (overrides --tiny-steps/--smollm2-steps)")
    parser.add_argument("--tiny-steps", type=int, default=20, help="training steps per tiny run (default 20)")
    parser.add_argument("--smollm2-steps", type=int, default=6, help="training steps per smollm2 run (default 6)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads per run, shared by learner and "
                        "worker in the async settings (num_threads; default 2)")
    parser.add_argument("--thread-split", default="work-conserving", choices=("work-conserving", "static"),
                        help="how the async settings split --threads between learner and worker "
                        "(num_threads_split; default work-conserving)")
    parser.add_argument("--is-correction", default=None, help="is_correction of the async settings (default: none; "
                        "with one, the async runs recompute the old log-probs: a forward pass sync does not make)")
    parser.add_argument("--model-dir", type=Path, default=REPO / "runs" / "models" / "smollm2-shaped-random",
                        help="where the SmolLM2-shaped random-init model is saved (built once)")
    add_out_argument(parser, "bench_async")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny workload without warm start, "
                        "8 prompts per step (numbers mean nothing)")
    parser.add_argument("--ablation", action="store_true", help="the staleness ablation instead: max_staleness "
                        "0/1/2/4, with and without token-truncate IS correction, on the ablation task (Sort-v0); "
                        "--steps per run (default 40) -> bench_async_ablation.json")
    parser.add_argument("--cache-dir", type=Path, default=REPO / "runs" / "ablation_cache",
                        help="with --ablation: where the warm-started models are kept (shared with ablation.py)")
    parser.add_argument("--settings", nargs="+", choices=[s[0] for s in ABLATION_SETTINGS],
                        help="with --ablation: only these settings (default: all seven)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return {}
    seeds = list(range(args.seeds))
    if args.ablation:
        result = ablation(args, seeds)
        print(ablation_table(result))
        write_json(out_path(args.out, "bench_async_ablation"), result)
        return result
    if args.quick:
        args.workloads = ["tiny"]
    result: dict[str, Any] = {"seeds": seeds, "threads": args.threads, "thread_split": args.thread_split,
                              "is_correction": args.is_correction, "quick": args.quick, "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        for workload in args.workloads:
            steps = args.steps or (args.tiny_steps if workload == "tiny" else args.smollm2_steps)
            model_dir = str(smollm2_folder(args.model_dir)) if workload == "smollm2" else None
            runs = []
            for seed in seeds:
                for setting in SETTINGS:  # interleaved, so machine load drifts over all settings alike
                    spec = dict(workload=workload, setting=setting, seed=seed, steps=steps, threads=args.threads,
                                out_dir=tmp, model_dir=model_dir, is_correction=args.is_correction, quick=args.quick,
                                thread_split=args.thread_split)
                    run = {"setting": setting, "seed": seed, **run_in_subprocess(spec)}
                    runs.append(run)
                    print(f"{workload:8s} {setting:12s} seed {seed}: {run['steps_per_s']:.3f} steps/s "
                          f"{run['generated_tokens_per_s']:.0f} tok/s acc {run['accuracy']} cpu {run['cpu_s']:.0f}s "
                          f"wall {run['total_wall_s']:.0f}s", flush=True)
            result["workloads"][workload] = {"steps": steps, "runs": runs, **summarize(runs, seeds)}
    first = result["workloads"][args.workloads[0]]
    result.update({k: first.get(k) for k in ("speedup_staleness_1", "speedup_staleness_2", "overlap_efficiency_staleness_1",
                                             "overlap_efficiency_staleness_2", "amdahl_bound_staleness_1",
                                             "amdahl_bound_staleness_2")})
    result["accuracy"] = {s: first.get(f"accuracy_{s}") for s in SETTINGS}
    print(f"\n{args.threads} torch threads per run in total; asynchronous settings split them {args.thread_split}")
    print(results_table(result))
    write_json(out_path(args.out, "bench_async"), result)
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
