"""Data-parallel scaling of the DAPO trainer: the same global batch on 1 and on 2 torchrun processes.

Each configuration runs the real entry point (``torchrun --nproc-per-node N -m dapo_env.learners.train``)
for a few steps on the tiny model and reads the run's ``metrics.jsonl``: median step time, rollout time,
update time and update tokens/s (summed over ranks), skipping the first step (warm-up). Dynamic sampling
is off so every step does the same work (B groups, all generated in one round). Prints a table with the
2-vs-1 ratios and writes ``benchmarks/out/bench_scaling.json`` (git-ignored; ``--out
benchmarks/results/bench_scaling.json`` refreshes the tracked result).

Run:
    python benchmarks/bench_scaling.py            # 1 vs 2 processes, 6 steps each
    python benchmarks/bench_scaling.py --steps 10 --procs 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _paths import add_out_argument, child_env, out_path, write_json

ROOT = Path(__file__).resolve().parents[1]
OVERRIDES = ["warmstart_steps=0", "batch_size=8", "group_size=8", "mini_batch_size=8", "micro_batch_size=16",
             "max_response_tokens=24", "overlong_cache_length=8", "tiny_hidden_size=128", "tiny_layers=2",
             "tiny_heads=4", "num_threads=1", "dynamic_sampling=false", "eval_every=0", "eval_size=8",
             "checkpoint_every=0", "plot_every=0"]
METRICS = ("time/step_s", "time/rollout_s", "time/update_s", "perf/update_tokens_per_s",
           "perf/rollout_tokens_per_s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(procs: int, steps: int, out_dir: Path) -> dict[str, Any]:
    """One torchrun job of ``procs`` processes; medians of the per-step metrics after the first step."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(procs), "--master-port",
           str(_free_port()), "-m", "dapo_env.learners.train", "--max-steps", str(steps), "--out-dir",
           str(out_dir), "--run-name", f"p{procs}", "--no-progress", "--set", *OVERRIDES]
    env = child_env(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun with {procs} processes failed:\n{proc.stderr[-3000:]}")
    records = [json.loads(line) for line in (out_dir / f"p{procs}" / "metrics.jsonl").read_text().splitlines()]
    steps_ = [r for r in records if r.get("step", 0) >= 2]  # skip step 0 (eval) and step 1 (warm-up)
    out: dict[str, Any] = {k: float(np.median([r[k] for r in steps_])) for k in METRICS}
    out["groups_per_step"] = float(np.median([r["rollout/num_groups"] for r in steps_]))
    out["job_wall_s"] = wall
    return out


def verify_throughput(items: int, workers: int) -> dict[str, dict[str, float]]:
    """Items/s of ``verify_batch`` with the MathVerifier: ``process`` pool vs ``ray`` actors (same worker count).

    Persistent pools are timed on a second pass (start-up is reported apart): what a training run sees.
    """
    from dapo_env.verifiers import MathVerifier, VerifierPool

    gen = np.random.default_rng(0)
    refs = [str(int(x)) for x in gen.integers(0, 1000, size=items)]
    responses = [f"The answer is \\boxed{{{r if k % 2 else int(r) + 1}}}" for k, r in enumerate(refs)]
    verifier = MathVerifier()
    out: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    with VerifierPool(workers, timeout_s=10.0) as pool:
        start = time.perf_counter() - t0
        pool.map(verifier, responses[:workers * 4], refs[:workers * 4])
        t1 = time.perf_counter()
        pool.map(verifier, responses, refs)
        out["process"] = {"startup_s": start, "items_per_s": items / (time.perf_counter() - t1)}
    try:
        import ray
    except ImportError:
        return out
    from dapo_env.verifiers.ray_backend import RayVerifierPool

    t0 = time.perf_counter()
    ray.init(num_cpus=workers, object_store_memory=int(1e9), include_dashboard=False, log_to_driver=False)
    with RayVerifierPool(workers, timeout_s=10.0) as pool:
        pool.map(verifier, responses[:workers * 4], refs[:workers * 4])
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        pool.map(verifier, responses, refs)
        out["ray"] = {"startup_s": start, "items_per_s": items / (time.perf_counter() - t1)}
    ray.shutdown()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--verify-items", type=int, default=400, help="0 skips the verification comparison")
    add_out_argument(parser, "bench_scaling")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        for n in args.procs:
            results[str(n)] = run(n, args.steps, Path(tmp))
    base = results[str(args.procs[0])]
    header = f"{'procs':>5} {'step s':>8} {'rollout s':>10} {'update s':>9} {'upd tok/s':>10} {'roll tok/s':>11} " \
             f"{'step x':>7} {'upd tok/s x':>12}"
    print(header)
    for n, r in results.items():
        r["step_speedup"] = base["time/step_s"] / r["time/step_s"]
        r["update_tokens_per_s_ratio"] = r["perf/update_tokens_per_s"] / base["perf/update_tokens_per_s"]
        print(f"{n:>5} {r['time/step_s']:>8.3f} {r['time/rollout_s']:>10.3f} {r['time/update_s']:>9.3f} "
              f"{r['perf/update_tokens_per_s']:>10.0f} {r['perf/rollout_tokens_per_s']:>11.0f} "
              f"{r['step_speedup']:>7.2f} {r['update_tokens_per_s_ratio']:>12.2f}")
    verify = verify_throughput(args.verify_items, workers=2) if args.verify_items else {}
    if verify:
        print(f"\nverify_batch, MathVerifier, {args.verify_items} items, 2 workers:")
        for name, v in verify.items():
            print(f"  {name:>8}: {v['items_per_s']:8.0f} items/s  (start-up {v['startup_s']:.1f} s)")
    report = {
        "benchmark": "bench_scaling", "command": "python benchmarks/bench_scaling.py " + " ".join(argv or sys.argv[1:]),
        "what": "same global batch (8 groups x 8 samples, tiny model 128x2) on N torchrun CPU processes (gloo); "
                "medians over steps 2..S",
        "overrides": OVERRIDES, "steps": args.steps, "results": results,
        "verification": {"items": args.verify_items, "workers": 2, "results": verify},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                    "note": "2 cores shared with other agents' jobs; timings are noisy"},
    }
    write_json(out_path(args.out, "bench_scaling"), report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
