"""In-process vLLM vs server mode (``vllm serve`` + verified pushes), side by side on the same model in one run.

For each engine, on the same tiny Llama (the default run's shape by default) and the same workload:

- **rollout tokens/s**: ``--prompts`` x ``--group`` sampled responses of at most ``--max-response-tokens``
  tokens per ``generate`` call, ``--repeats`` calls (the first, a warm-up, is not timed); tokens counted from
  the completions (EOS included);
- **weight-push latency**: ``--pushes`` pushes of a perturbed copy of the learner (``load_weights``: for the
  in-process engine a direct load + strided check, for the server a safetensors file, the worker's load, a
  prefix-cache reset and a fingerprint round trip), median and max in ms.

The two engines run one after the other (never two vLLM instances at once). ``VLLMEngine`` runs in this
process; ``ServerEngine`` starts its own ``vllm serve`` (weight sync on) on 127.0.0.1 with the same
interpreter. Prints a table and writes JSON (``--out``, default ``benchmarks/out/bench_server.json``).

Run (needs vLLM, e.g. the vLLM CI venv): ``python benchmarks/bench_server.py`` (~2-3 min on 2 CPU cores,
mostly the two vLLM start-ups).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from _paths import add_out_argument, out_path, write_json

from dapo_env.learners.config import preset
from dapo_env.learners.engines import SamplingParams
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer


def prompts_for(count: int) -> list[str]:
    return [f"<bos>user: What is {7 * i + 3} + {5 * i + 11}?\nassistant: " for i in range(count)]


def measure(engine: Any, learner: torch.nn.Module, args: argparse.Namespace) -> dict[str, Any]:
    """Rollout throughput and push latency of one engine (see the module docstring)."""
    prompts = prompts_for(args.prompts)
    rates, tokens = [], 0
    for call in range(args.repeats + 1):
        sampling = SamplingParams(temperature=1.0, max_response_tokens=args.max_response_tokens, seed=call)
        start = time.perf_counter()
        groups = engine.generate(prompts, n=args.group, sampling=sampling)
        took = time.perf_counter() - start
        count = sum(c.num_tokens or 0 for g in groups for c in g)
        if call:  # the first call warms caches and threads up
            rates.append(count / took)
            tokens += count
    pushes = []
    generator = torch.Generator().manual_seed(0)
    for _ in range(args.pushes):
        with torch.no_grad():
            for p in learner.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * 1e-3)
        start = time.perf_counter()
        engine.load_weights(learner)
        pushes.append((time.perf_counter() - start) * 1000)
    return {"tokens_per_s": statistics.median(rates), "tokens_per_s_each": rates, "tokens": tokens,
            "push_ms_median": statistics.median(pushes), "push_ms_max": max(pushes), "push_ms_each": pushes}


def timed(build: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    engine = build()
    return engine, time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-response-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16, help="server mode: requests in flight")
    parser.add_argument("--server-log", type=Path, default=Path("benchmarks/out/bench_server.vllm.log"),
                        help="the server's output (default: benchmarks/out/bench_server.vllm.log)")
    add_out_argument(parser, "bench_server")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    cfg = preset("tiny")
    tok = build_tokenizer(model_max_length=cfg.tiny_max_positions)

    def learner() -> torch.nn.Module:
        return build_tiny_model(tok, hidden_size=cfg.tiny_hidden_size, layers=cfg.tiny_layers, heads=cfg.tiny_heads,
                                max_positions=cfg.tiny_max_positions, seed=0)

    from dapo_env.learners.engines.server import ServerEngine
    from dapo_env.learners.engines.vllm_engine import VLLMEngine

    results: dict[str, Any] = {}
    model = learner()
    engine, startup = timed(lambda: VLLMEngine(model, tok, dtype="float32", cpu_kv_cache_gib=0.25))
    try:
        results["in-process"] = {"startup_s": startup, **measure(engine, model, args)}
    finally:
        engine.close()
    model = learner()
    engine, startup = timed(lambda: ServerEngine(model, tok, concurrency=args.concurrency, log=args.server_log))
    try:
        results["server"] = {"startup_s": startup, **measure(engine, model, args)}
    finally:
        engine.close()

    print(f"{'engine':<11} {'start-up s':>10} {'rollout tok/s':>13} {'push ms (median)':>16} {'push ms (max)':>13}")
    for name, r in results.items():
        print(f"{name:<11} {r['startup_s']:>10.1f} {r['tokens_per_s']:>13.0f} {r['push_ms_median']:>16.1f} "
              f"{r['push_ms_max']:>13.1f}")
    a, b = results["in-process"], results["server"]
    ratios = {"rollout_tokens_per_s_server_over_in_process": b["tokens_per_s"] / a["tokens_per_s"],
              "push_ms_server_over_in_process": b["push_ms_median"] / a["push_ms_median"]}
    print(json.dumps(ratios, indent=1))
    import vllm

    write_json(out_path(args.out, "bench_server"), {
        "benchmark": "bench_server", "machine": platform.machine(), "cpus": os.cpu_count(), "torch": torch.__version__,
        "vllm": vllm.__version__, "load_average": os.getloadavg(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "model": f"tiny Llama (default run's shape: hidden {cfg.tiny_hidden_size}, {cfg.tiny_layers} layers, "
                 f"{cfg.tiny_heads} heads), fp32, CPU", "ratios": ratios, "results": results}, indent=1)


if __name__ == "__main__":
    main()
