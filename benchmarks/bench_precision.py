"""fp32 vs bf16 autocast (``TrainConfig.precision``), and the HF engine's shared prefill, on a SmolLM2-135M shape.

A random-init Llama with SmolLM2-135M-Instruct's shape (30 layers, width 576, 9 heads / 3 KV heads, vocab
49,152, tied embeddings; no download, no GGUF) is timed side by side in one process, each precision on
the same inputs:
- learner: ``token_logprobs_and_entropy`` forward + backward of a DAPO-sized micro-batch (B sequences
  of a 70-token prompt + 10-token response), the trainer's update path;
- rollout: ``HFEngine.generate`` of G samples for each of a few prompts (prefill + KV-cache decode);
each with SDPA attention (``from_pretrained``'s default) and with eager attention.
Each cell is the best of ``--repeats`` runs after one warm-up. The table gives the ratio fp32 / bf16 and
the largest log-prob difference between the two precisions (what bf16 rounding costs). One more fp32
rollout row runs the engine with one prompt forward per sequence instead of one per distinct prompt
(``HFEngine`` prefills each prompt once and re-indexes its KV cache for the group's G rows).

Run: ``python benchmarks/bench_precision.py`` (about a minute with 2 threads). Writes
``benchmarks/out/bench_precision.json`` (git-ignored; ``--out benchmarks/results/bench_precision.json`` updates
the tracked result). bf16 only pays on hardware with bf16 matmul units (CPUs with
AMX or AVX512-BF16, GPUs); elsewhere it can be slower than fp32, which the table then shows.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from _paths import add_out_argument, out_path, write_json


def smollm2_shaped(layers: int = 30, seed: int = 0) -> Any:
    """A random-init Llama with SmolLM2-135M's dimensions (``layers`` decoder layers)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=49_152, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         tie_word_embeddings=True, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


class IdTokenizer:
    """Prompts are space-separated token ids ("5 17 3"): lets the engine run without a trained tokenizer."""

    eos_token_id, pad_token_id = 2, 0

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [int(t) for t in text.split()]}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return " ".join(map(str, ids))


def best_of(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up (allocator, oneDNN kernel selection)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dapo_env.learners.engines import HFEngine, SamplingParams
    from dapo_env.learners.algo.logprobs import token_logprobs_and_entropy

    torch.set_num_threads(args.threads)
    model = smollm2_shaped(args.layers)
    g = torch.Generator().manual_seed(1)
    prompt_len, response_len = 70, 10
    ids = torch.randint(3, 49_152, (args.batch, prompt_len + response_len), generator=g)  # (B, P + T)
    mask = torch.ones_like(ids)
    prompts = [" ".join(str(int(t)) for t in torch.randint(3, 49_152, (prompt_len,), generator=g))
               for _ in range(args.prompts)]
    sampling = SamplingParams(temperature=1.0, max_response_tokens=response_len, seed=0)
    cells: dict[str, float] = {}
    logps: dict[str, torch.Tensor] = {}
    for attn in ("sdpa", "eager"):
        model.config._attn_implementation = attn  # what from_pretrained(attn_implementation=...) sets
        for precision in ("fp32", "bf16"):
            dtype = torch.bfloat16 if precision == "bf16" else None

            def learner_step() -> None:
                model.zero_grad(set_to_none=True)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
                    logp, ent = token_logprobs_and_entropy(model, ids, mask, response_len)
                (logp.sum() + 0.01 * ent.sum()).backward()
                logps[precision] = logp.detach()

            cells[f"learner_{precision}_{attn}_s"] = best_of(learner_step, args.repeats)
            engine = HFEngine(model, IdTokenizer(), batch_size=256, autocast_dtype=dtype)
            cells[f"rollout_{precision}_{attn}_s"] = best_of(
                lambda: engine.generate(prompts, n=args.group_size, sampling=sampling), args.repeats)
            print(f"{attn} {precision}: learner fwd+bwd {cells[f'learner_{precision}_{attn}_s']:.2f} s, "
                  f"rollout {cells[f'rollout_{precision}_{attn}_s']:.2f} s", flush=True)
    model.config._attn_implementation = "sdpa"
    unshared = HFEngine(model, IdTokenizer(), batch_size=256, share_prefill=False)
    cells["rollout_fp32_sdpa_unshared_s"] = best_of(
        lambda: unshared.generate(prompts, n=args.group_size, sampling=sampling), args.repeats)
    return {
        "model": f"random-init Llama, SmolLM2-135M shape ({args.layers} layers)",
        "machine": {"processor": platform.processor() or platform.machine(), "threads": args.threads,
                    "torch": torch.__version__},
        "shapes": {"learner_batch": args.batch, "prompt_tokens": prompt_len, "response_tokens": response_len,
                   "rollout_prompts": args.prompts, "group_size": args.group_size},
        "seconds": cells,
        "speedup_learner_bf16": cells["learner_fp32_sdpa_s"] / cells["learner_bf16_sdpa_s"],
        "speedup_learner_eager": cells["learner_fp32_sdpa_s"] / cells["learner_fp32_eager_s"],
        "speedup_learner_bf16_eager": cells["learner_fp32_sdpa_s"] / cells["learner_bf16_eager_s"],
        "speedup_rollout_bf16": cells["rollout_fp32_sdpa_s"] / cells["rollout_bf16_sdpa_s"],
        "speedup_shared_prefill": cells["rollout_fp32_sdpa_unshared_s"] / cells["rollout_fp32_sdpa_s"],
        "max_abs_logprob_diff": float((logps["fp32"] - logps["bf16"]).abs().max()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=30, help="decoder layers (30 = SmolLM2-135M)")
    parser.add_argument("--batch", type=int, default=16, help="learner micro-batch (sequences)")
    parser.add_argument("--prompts", type=int, default=4, help="rollout prompts")
    parser.add_argument("--group-size", type=int, default=8, help="samples per rollout prompt")
    parser.add_argument("--repeats", type=int, default=3)
    add_out_argument(parser, "bench_precision")
    args = parser.parse_args(argv)
    result = run(args)
    sec = result["seconds"]
    print("| path | fp32, sdpa | bf16, sdpa | fp32, eager | bf16, eager | fastest vs fp32 sdpa |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, label in (("learner", "learner forward + backward (s)"), ("rollout", "rollout, prefill + decode (s)")):
        vals = [sec[f"{kind}_{p}_{a}_s"] for a in ("sdpa", "eager") for p in ("fp32", "bf16")]
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {vals[0] / min(vals):.2f}x |")
    print(f"shared prefill (fp32, sdpa rollout): one forward per sequence {sec['rollout_fp32_sdpa_unshared_s']:.2f} s "
          f"vs one per distinct prompt {sec['rollout_fp32_sdpa_s']:.2f} s = {result['speedup_shared_prefill']:.2f}x")
    print(f"max |logp_fp32 - logp_bf16| = {result['max_abs_logprob_diff']:.3g}")
    write_json(out_path(args.out, "bench_precision"), result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
