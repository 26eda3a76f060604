"""Peak memory and time: chunked lm_head log-probs vs the naive full-logits path (forward + backward).

A 1-layer Llama backbone (hidden 64, head dim 32) with Qwen2.5's vocabulary size, 151,936, so the lm_head
and its logits dominate exactly as in a real model's loss computation. For each (B, T) and path, a FRESH
subprocess builds the model and inputs, records its baseline, runs one forward + backward (log-probs
and entropy, loss on the log-probs), and reports:
- CPU: the peak resident-set growth, ``ru_maxrss`` after minus before (kernel-measured high-water mark,
  so it includes every allocator; tracemalloc does not see torch's allocations);
- CUDA: ``torch.cuda.max_memory_allocated()`` minus the baseline allocation.
Time is that of a second run in the same process (best of three on CUDA). The two paths' log-probs and gradients are
compared too.

Run: ``python benchmarks/bench_logprobs.py`` (CPU: about two minutes; with CUDA present it runs there,
with larger shapes). Writes (merges into) ``benchmarks/out/bench_logprobs.json`` (git-ignored) under the key
``"cpu"`` or ``"cuda"``; ``--out benchmarks/results/bench_logprobs.json`` updates the tracked result.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Sequence

from _paths import add_out_argument, child_env, out_path, write_json

VOCAB = 151_936
CPU_SHAPES = [(1, 256), (2, 512), (4, 512)]
CUDA_SHAPES = [(4, 1024), (8, 2048), (16, 4096)]


def _build(device: str, batch: int, length: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, head_dim=32,
                         max_position_embeddings=2 * length + 8, tie_word_embeddings=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).to(device)
    g = torch.Generator().manual_seed(1)
    prompt = length // 4
    ids = torch.randint(0, VOCAB, (batch, prompt + length), generator=g).to(device)  # (B, P + T)
    mask = torch.ones_like(ids)
    return model, ids, mask


def worker(path: str, device: str, batch: int, length: int, chunk_size: int) -> dict:
    """One measurement in this (fresh) process; prints a JSON line."""
    import torch

    from dapo_env.learners.algo.logprobs import naive_logprobs_and_entropy, token_logprobs_and_entropy

    model, ids, mask = _build(device, batch, length)

    def step() -> tuple:
        model.zero_grad(set_to_none=True)
        if path == "chunked":
            logp, ent = token_logprobs_and_entropy(model, ids, mask, length, chunk_size=chunk_size)
        else:
            logp, ent = naive_logprobs_and_entropy(model, ids, mask, length)
        loss = -logp.mean()
        loss.backward()
        grad = model.model.embed_tokens.weight.grad
        return logp.detach(), ent.detach(), grad

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    logp, ent, grad = step()
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    times = []
    for _ in range(1 if not cuda else 3):
        start = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {
        "path": path, "batch": batch, "length": length, "peak_bytes": peak, "seconds": min(times),
        "logp_sum": float(logp.double().sum()), "ent_sum": float(ent.double().sum()),
        "grad_norm": float(grad.double().norm()),
    }


def run_isolated(path: str, device: str, batch: int, length: int, chunk_size: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", path, "--device", device, "--batch", str(batch),
           "--length", str(length), "--chunk-size", str(chunk_size)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=child_env())
    if out.returncode != 0:
        raise RuntimeError(f"worker {path} {batch}x{length} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["naive", "chunked"])
    parser.add_argument("--device", default=None)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--chunk-size", type=int, default=512)
    parser.add_argument("--shapes", default=None, help="comma-separated BxT, e.g. 1x512,4x512")
    add_out_argument(parser, "bench_logprobs")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.device, args.batch, args.length, args.chunk_size)))
        return

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    shapes = CUDA_SHAPES if device.startswith("cuda") else CPU_SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in item.split("x")) for item in args.shapes.split(",")]
    rows = []
    print(f"device={device} vocab={VOCAB} chunk_size={args.chunk_size} (peak = memory growth of fwd+bwd)")
    print(f"{'B':>3} {'T':>5} {'B*T*V*4 MB':>11} {'naive MB':>9} {'chunked MB':>10} {'ratio':>6} "
          f"{'naive s':>8} {'chunked s':>9} {'|dlogp|':>8}")
    for batch, length in shapes:
        naive = run_isolated("naive", device, batch, length, args.chunk_size)
        chunked = run_isolated("chunked", device, batch, length, args.chunk_size)
        row = {
            "batch": batch, "length": length, "logits_fp32_mb": batch * length * VOCAB * 4 / 2**20,
            "naive_peak_mb": naive["peak_bytes"] / 2**20, "chunked_peak_mb": chunked["peak_bytes"] / 2**20,
            "memory_ratio": chunked["peak_bytes"] / max(naive["peak_bytes"], 1),
            "naive_s": naive["seconds"], "chunked_s": chunked["seconds"],
            "time_ratio": chunked["seconds"] / naive["seconds"],
            "logp_sum_diff": abs(naive["logp_sum"] - chunked["logp_sum"]),
            "ent_sum_rel_diff": abs(naive["ent_sum"] - chunked["ent_sum"]) / abs(naive["ent_sum"]),
            "grad_norm_rel_diff": abs(naive["grad_norm"] - chunked["grad_norm"]) / naive["grad_norm"],
        }
        rows.append(row)
        print(f"{batch:>3} {length:>5} {row['logits_fp32_mb']:>11.0f} {row['naive_peak_mb']:>9.0f} "
              f"{row['chunked_peak_mb']:>10.0f} {row['memory_ratio']:>6.3f} {row['naive_s']:>8.2f} "
              f"{row['chunked_s']:>9.2f} {row['logp_sum_diff']:>8.1e}")
    result = {
        "benchmark": "bench_logprobs", "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor()
        or platform.machine(),
        "torch": torch.__version__, "vocab": VOCAB, "chunk_size": args.chunk_size,
        "method": "fresh subprocess per (path, shape); CPU: ru_maxrss growth; CUDA: max_memory_allocated growth",
        "rows": rows,
    }
    out = out_path(args.out, "bench_logprobs")
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged["cuda" if device.startswith("cuda") else "cpu"] = result  # one entry per device kind
    write_json(out, merged)


if __name__ == "__main__":
    main()
