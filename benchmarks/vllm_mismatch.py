"""Rollout-vs-learner log-prob mismatch with vLLM: correct weight sync vs a skipped sync.

The learner (a tiny Llama) takes ``--steps`` policy-gradient-like Adam steps; before each step a
``VLLMEngine`` samples ``--prompts`` x ``--group`` responses and the learner recomputes their log-probs
with its own path (``pack_batch`` + ``token_logprobs_and_entropy``, as the trainer does). The mismatch
metrics per step, over response tokens:

- ``mean_abs``: mean |learner - rollout| log-prob;
- ``max_abs``: the largest one;
- ``ratio_dev``: mean |exp(learner - rollout) - 1|, the importance ratio's distance from 1.

Two runs with identical learner updates (same seeds), in one process and one engine:
``synced`` pushes the weights after every update (``engine.load_weights``), ``skipped`` never pushes
(the engine keeps the initial weights: what a silently failing sync looks like). Synced stays at fp32
round-off (~1e-6); skipped grows with every step. The weight-push time is reported too.

Run (needs vLLM, e.g. the vLLM CI venv): ``python benchmarks/vllm_mismatch.py`` (~1-2 min on 2 CPU
cores, mostly vLLM start-up). Writes ``benchmarks/out/vllm_mismatch.json`` (git-ignored);
``--out benchmarks/results/vllm_mismatch.json`` updates the tracked result.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from _paths import add_out_argument, out_path, write_json

from dapo_env.learners.engines import SamplingParams
from dapo_env.learners.algo.logprobs import pack_batch, token_logprobs_and_entropy
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.engines.vllm_engine import VLLMEngine


def prompts_for(count: int) -> list[str]:
    return [f"<bos>user: What is {7 * i + 3} + {5 * i + 11}?\nassistant: " for i in range(count)]


def mismatch(learner: torch.nn.Module, completions: list, pad_id: int, temperature: float) -> dict[str, float]:
    """Learner log-probs of the rollout tokens vs the engine's, over response tokens."""
    batch = pack_batch(
        [c.prompt_token_ids for c in completions],
        [c.token_ids for c in completions],
        pad_id=pad_id,
        rollout_logprobs=[c.logprobs for c in completions],
    )
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(
            learner, batch.input_ids, batch.attention_mask, batch.response_len,
            temperature=temperature, with_entropy=False,
        )  # (B, T)
    mask = batch.response_mask.bool()
    diff = (logp - batch.rollout_logprobs)[mask]  # (tokens,)
    return {
        "mean_abs": float(diff.abs().mean()),
        "max_abs": float(diff.abs().max()),
        "ratio_dev": float((diff.exp() - 1).abs().mean()),
        "tokens": int(mask.sum()),
    }


def update(learner: torch.nn.Module, optimizer: torch.optim.Optimizer, completions: list, pad_id: int,
           temperature: float, seed: int) -> None:
    """One policy-gradient-like step: random +-1 advantages per response (fixed by ``seed``)."""
    batch = pack_batch([c.prompt_token_ids for c in completions], [c.token_ids for c in completions], pad_id=pad_id)
    gen = torch.Generator().manual_seed(seed)
    adv = torch.randint(0, 2, (len(completions), 1), generator=gen).float() * 2 - 1  # (B, 1)
    logp, _ = token_logprobs_and_entropy(
        learner, batch.input_ids, batch.attention_mask, batch.response_len, temperature=temperature, with_entropy=False
    )  # (B, T)
    mask = batch.response_mask.float()
    loss = -(adv * logp * mask).sum() / mask.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def run(engine: VLLMEngine, initial: torch.nn.Module, tok, *, sync: bool, args: argparse.Namespace) -> dict:
    learner = copy.deepcopy(initial)
    engine.load_weights(initial)
    optimizer = torch.optim.Adam(learner.parameters(), lr=args.lr)
    sampling = SamplingParams(temperature=args.temperature, max_response_tokens=args.max_response_tokens, seed=0)
    steps, push_ms = [], []
    for step in range(args.steps + 1):
        groups = engine.generate(prompts_for(args.prompts), args.group, sampling)
        completions = [c for group in groups for c in group]
        steps.append({"step": step, **mismatch(learner, completions, tok.pad_token_id, args.temperature)})
        if step == args.steps:
            break
        update(learner, optimizer, completions, tok.pad_token_id, args.temperature, seed=step)
        if sync:
            start = time.perf_counter()
            engine.load_weights(learner)  # includes the verification
            push_ms.append(1e3 * (time.perf_counter() - start))
    return {"steps": steps, "push_ms_mean": sum(push_ms) / len(push_ms) if push_ms else None}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-response-tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=3e-3)
    add_out_argument(parser, "vllm_mismatch")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    tok = build_tokenizer()
    initial = build_tiny_model(tok, hidden_size=64, layers=2, heads=2, seed=0)
    start = time.perf_counter()
    engine = VLLMEngine(initial, tok, dtype="float32", cpu_kv_cache_gib=0.125)
    startup_s = time.perf_counter() - start
    try:
        synced = run(engine, initial, tok, sync=True, args=args)
        skipped = run(engine, initial, tok, sync=False, args=args)
    finally:
        engine.close()

    print(f"{'step':>4} | {'synced mean|d|':>14} {'max|d|':>9} {'ratio dev':>9} | "
          f"{'skipped mean|d|':>15} {'max|d|':>9} {'ratio dev':>9} | {'skipped/synced':>14}")
    for a, b in zip(synced["steps"], skipped["steps"], strict=True):
        ratio = b["mean_abs"] / max(a["mean_abs"], 1e-12)
        print(f"{a['step']:>4} | {a['mean_abs']:>14.2e} {a['max_abs']:>9.2e} {a['ratio_dev']:>9.2e} | "
              f"{b['mean_abs']:>15.2e} {b['max_abs']:>9.2e} {b['ratio_dev']:>9.2e} | {ratio:>14.3g}")
    last_a, last_b = synced["steps"][-1], skipped["steps"][-1]
    summary = {
        "synced_max_abs": max(s["max_abs"] for s in synced["steps"]),
        "skipped_final_mean_abs": last_b["mean_abs"],
        "final_mean_abs_ratio_skipped_over_synced": last_b["mean_abs"] / max(last_a["mean_abs"], 1e-12),
        "push_ms_mean": synced["push_ms_mean"],
        "engine_startup_s": startup_s,
    }
    print(json.dumps(summary, indent=1))
    import vllm

    result = {
        "benchmark": "vllm_mismatch",
        "device": "cpu" if engine.on_cpu else "cuda",
        "machine": platform.machine(),
        "torch": torch.__version__,
        "vllm": vllm.__version__,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "model": "tiny Llama, hidden 64, 2 layers, 2 heads, fp32",
        "summary": summary,
        "synced": synced,
        "skipped": skipped,
    }
    write_json(out_path(args.out, "vllm_mismatch"), result, indent=1)


if __name__ == "__main__":
    main()
