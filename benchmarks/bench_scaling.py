"""Data-parallel scaling of the DAPO trainer: the same global batch on 1 and on 2 torchrun processes.

Each configuration runs the real entry point (``torchrun --nproc-per-node N -m dapo_env.learners.train``)
for a few steps on the tiny model and reads the run's ``metrics.jsonl``: median step time, rollout time,
update time and update tokens/s (summed over ranks), skipping the first step (warm-up). Dynamic sampling
is off so every step does the same work (B groups, all generated in one round). Prints a table with the
2-vs-1 ratios and writes ``benchmarks/out/bench_scaling.json`` (git-ignored; ``--out
benchmarks/results/bench_scaling.json`` refreshes the tracked result).

``--long-responses`` measures the other axis, response length: one update (``update_policy``, one
sequence per forward: 16 prompt tokens + L response tokens, G = 2) of a small model at each length, with
and without activation checkpointing (``TrainConfig.gradient_checkpointing``), each point in a fresh
process: peak memory (CPU: RSS growth after the model is built; CUDA: ``max_memory_allocated``) and
update tokens/s (plus the bytes autograd keeps for the backward, exact where RSS is noisy), with a
linear and a quadratic fit of memory in L (the quadratic term must be ~0: no
L x L buffer from our code) and the checkpointing memory ratio at the longest length both fit.

Run:
    python benchmarks/bench_scaling.py            # 1 vs 2 processes, 6 steps each
    python benchmarks/bench_scaling.py --steps 10 --procs 1 2 4
    python benchmarks/bench_scaling.py --long-responses --lengths 512 2048 8192 16384   # memory vs length
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


#: Response lengths of the long-response table (DAPO trains at 20,480).
LONG_LENGTHS = (512, 2048, 8192, 16384)
# Below this much peak-RSS growth per update, the allocator's reuse of freed pages decides the number (a point can
# read 0 MB): the RSS ratio is then reported as unresolved, and the exact saved-activations ratio is the one to read.
RSS_RESOLUTION_MB = 16.0


def _status_mb(key: str) -> float:
    """A ``/proc/self/status`` memory line (``VmRSS``, ``VmHWM``) in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status: the long-response table needs Linux")


def reset_peak_rss() -> float:
    """Restart this process's peak RSS (``VmHWM``) from its current RSS (``clear_refs`` 5, Linux); returns
    the current RSS in MB. The peak of one update is then measured apart from earlier ones."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def long_response_point(length: int, checkpointing: bool, *, model_shape: str = "small", device: str = "cpu",
                        dtype: str = "float32", threads: int = 1) -> dict[str, Any]:
    """One update of one group (G = 2) of 16 prompt + ``length`` response tokens, one sequence per forward;
    the second of two updates is timed. Runs in the calling process (the driver gives each point its own)."""
    import torch
    from bench_learner import BenchConfig, build_tokenizer_and_model

    from dapo_env.learners.algo.batch import build_sequence_batch
    from dapo_env.learners.config import preset
    from dapo_env.learners.algo.update import update_policy
    from dapo_env.types import Completion, Group

    torch.set_num_threads(threads)
    bench = BenchConfig(device=device, model_shape=model_shape, dtype=dtype, length=length, group_size=2,
                        prompts_per_step=1, micro_batch=1)
    tok, model = build_tokenizer_and_model(bench)
    cfg = preset("dapo", group_size=2, batch_size=1, mini_batch_size=1, micro_batch_size=1, max_response_tokens=length,
                 overlong_penalty=False, gradient_checkpointing=checkpointing, lr=1e-6)
    gen = torch.Generator().manual_seed(0)
    prompt = tuple(torch.randint(4, len(tok), (16,), generator=gen).tolist())
    comps = tuple(Completion("x", token_ids=tuple(torch.randint(4, len(tok), (length,), generator=gen).tolist()),
                             prompt_token_ids=prompt) for _ in range(2))
    batch = build_sequence_batch([Group("0", "p", comps, (1.0, -1.0), (True, False), (True, True))],
                                 pad_id=tok.pad_token_id).to(device)
    adv = torch.tensor([1.0, -1.0], device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    update_policy(model, optimizer, batch, adv, cfg, key=(0, 0))  # optimizer state allocated before the baseline
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base_cuda = torch.cuda.memory_allocated()
    base_rss = reset_peak_rss()  # the current RSS; the peak (VmHWM) restarts from it
    params = {p.data_ptr() for p in model.parameters()}
    saved: dict[tuple[int, int], int] = {}  # tensors kept for the backward (activations), once each

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.data_ptr() not in params:
            saved[(t.data_ptr(), t.untyped_storage().nbytes())] = t.untyped_storage().nbytes()
        return t

    start, cpu_start = time.perf_counter(), time.thread_time()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        update_policy(model, optimizer, batch, adv, cfg, key=(0, 1))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    tokens = 2 * length
    peak = _status_mb("VmHWM")
    out = {"length": length, "checkpointing": checkpointing, "update_s": wall, "update_cpu_s": cpu,
           "update_tokens_per_s": tokens / wall, "update_tokens_per_cpu_s": tokens / cpu,
           "peak_rss_mb": peak, "rss_growth_mb": peak - base_rss,
           # per forward (2 sequences, one per forward): what autograd keeps for the backward, exact
           "saved_activations_mb": sum(saved.values()) / 2 / 2**20}
    if device.startswith("cuda"):
        out["peak_cuda_growth_mb"] = (torch.cuda.max_memory_allocated() - base_cuda) / 2**20
    out["memory_mb"] = out.get("peak_cuda_growth_mb", out["rss_growth_mb"])
    return out


def fit_memory(points: list[dict[str, Any]]) -> dict[str, float]:
    """Linear and quadratic least-squares fits of ``memory_mb`` in length: MB per 1k tokens, R^2 of the line,
    and the quadratic term's share of the growth at the longest length (0 = linear).

    Example:
        >>> pts = [{"length": n, "memory_mb": 10 + 0.5 * n} for n in (512, 2048, 8192)]
        >>> f = fit_memory(pts); round(f["mb_per_1k_tokens"], 3), round(f["r2_linear"], 6), abs(f["quadratic_share_at_max"]) < 1e-6
        (500.0, 1.0, True)
    """
    x = np.array([p["length"] for p in points], dtype=float)
    y = np.array([p["memory_mb"] for p in points], dtype=float)
    slope, icpt = np.polyfit(x, y, 1)
    residual = y - (slope * x + icpt)
    total = float(((y - y.mean()) ** 2).sum())
    out = {"mb_per_1k_tokens": float(slope) * 1000, "intercept_mb": float(icpt),
           "r2_linear": 1.0 - float((residual ** 2).sum()) / total if total > 0 else 1.0}
    if len(points) >= 3:
        c2, c1, _ = np.polyfit(x, y, 2)
        growth = c2 * x.max() ** 2 + c1 * x.max()
        out["quadratic_share_at_max"] = float(c2 * x.max() ** 2 / growth) if growth else 0.0
    return out


def long_responses(lengths: list[int], *, model_shape: str, device: str, threads: int,
                   timeout_s: float) -> dict[str, Any]:
    """Every (length, checkpointing) point in a fresh process; a point that fails (out of memory, time limit)
    is recorded with its error and ends that setting's longer lengths."""
    results: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    errors: dict[str, str] = {}
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    for setting in ("off", "on"):
        for length in lengths:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--long-worker", str(length), setting,
                   "--model-shape", model_shape, "--device", device, "--dtype", dtype, "--threads", str(threads)]
            env = child_env(OMP_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                errors[f"{setting}/{length}"] = f"over {timeout_s:.0f} s"
                break
            if proc.returncode != 0:
                errors[f"{setting}/{length}"] = proc.stderr[-2000:]
                break
            point = json.loads(proc.stdout.strip().splitlines()[-1])
            results[setting].append(point)
            print(f"  checkpointing {setting:>3} L={length:>6}: memory {point['memory_mb']:>8.0f} MB "
                  f"(saved activations {point['saved_activations_mb']:.0f} MB), "
                  f"{point['update_tokens_per_s']:>7.0f} tok/s ({point['update_tokens_per_cpu_s']:.0f} per CPU-s)",
                  flush=True)
    report: dict[str, Any] = {"points": results, "errors": errors,
                              "fits": {k: fit_memory(v) for k, v in results.items() if len(v) >= 2},
                              "fits_saved_activations": {k: fit_memory([{**p, "memory_mb": p["saved_activations_mb"]}
                                                                        for p in v])
                                                         for k, v in results.items() if len(v) >= 2}}
    both = sorted({p["length"] for p in results["off"]} & {p["length"] for p in results["on"]})
    if both:
        longest = both[-1]
        mem = {k: next(p["memory_mb"] for p in v if p["length"] == longest) for k, v in results.items()}
        report["longest_both_fit"] = longest
        report["checkpointing_memory_ratio"] = mem["on"] / max(mem["off"], 1e-9)
        report["checkpointing_memory_ratio_resolved"] = device.startswith("cuda") or mem["off"] >= RSS_RESOLUTION_MB
        report["target_memory_ratio_0_5_met"] = (report["checkpointing_memory_ratio"] <= 0.5
                                                 if report["checkpointing_memory_ratio_resolved"] else None)
        act = {k: next(p["saved_activations_mb"] for p in v if p["length"] == longest) for k, v in results.items()}
        report["checkpointing_saved_activations_ratio"] = act["on"] / max(act["off"], 1e-9)
    return report


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
    parser.add_argument("--long-responses", action="store_true",
                        help="instead: peak memory and update tokens/s vs response length, with and without "
                             "activation checkpointing (writes bench_scaling_long.json)")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LONG_LENGTHS))
    parser.add_argument("--model-shape", default="small", help="bench_learner.MODEL_SHAPES entry (default small)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--point-timeout", type=float, default=1800.0, help="seconds per (length, setting) point")
    parser.add_argument("--long-worker", nargs=2, metavar=("LENGTH", "CKPT"), help=argparse.SUPPRESS)
    add_out_argument(parser, "bench_scaling")
    args = parser.parse_args(argv)
    if args.long_worker:
        length, setting = int(args.long_worker[0]), args.long_worker[1] == "on"
        print(json.dumps(long_response_point(length, setting, model_shape=args.model_shape, device=args.device,
                                             dtype=args.dtype, threads=args.threads)))
        return 0
    if args.long_responses:
        print(f"long responses: {args.model_shape} on {args.device}, lengths {args.lengths}")
        report = long_responses(args.lengths, model_shape=args.model_shape, device=args.device,
                                threads=args.threads, timeout_s=args.point_timeout)
        for name, fit in report["fits"].items():
            print(f"checkpointing {name}: {fit['mb_per_1k_tokens']:.1f} MB per 1k tokens, R^2 {fit['r2_linear']:.4f}"
                  + (f", quadratic share at max {fit['quadratic_share_at_max']:.3f}" if "quadratic_share_at_max" in fit else ""))
        if "checkpointing_memory_ratio" in report:
            print(f"at L={report['longest_both_fit']}: memory with / without checkpointing "
                  f"{report['checkpointing_memory_ratio']:.2f} (target <= 0.5)"
                  + ("" if report["checkpointing_memory_ratio_resolved"] else
                     f"; unresolved: under {RSS_RESOLUTION_MB:.0f} MB of RSS growth, read the saved-activations ratio "
                     f"{report['checkpointing_saved_activations_ratio']:.2f}"))
        report.update({"benchmark": "bench_scaling", "mode": "long_responses", "model_shape": args.model_shape,
                       "device": args.device, "threads": args.threads, "lengths": args.lengths,
                       "command": "python benchmarks/bench_scaling.py " + " ".join(argv or sys.argv[1:]),
                       "machine": {"cpu_count": os.cpu_count(), "loadavg": os.getloadavg()}})
        write_json(out_path(args.out, "bench_scaling_long"), report)
        return 0
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
