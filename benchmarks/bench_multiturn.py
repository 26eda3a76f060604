"""Multi-turn rollout throughput: each episode's KV cache kept across turns vs its history prefilled again.

Plays GuessNumber-v0 episodes (chat template bound, so every turn is sampled after the exact token context)
through ``HFEngine.generate_turns`` twice per setting, side by side in one run and under the same seeds:
``reuse_kv=True`` prefills only each turn's new environment tokens, ``reuse_kv=False`` prefills the whole
history every turn. Both must sample the same tokens (checked: log-probs equal to 1e-4 and the same tokens,
except that an episode may part at a CDF boundary between neighbouring token ids, a floating-point rounding
event counted as ``boundary_flips``; anything else fails the run). Rollout
tokens/s = tokens the model sampled / rollout time (generation and environment); the ratio is the
speed-up. Wall-clock and CPU seconds are both reported (CPU time is steadier on a shared machine).

Models: ``tiny`` (the default run's Llama, character tokenizer) and ``smollm2`` (a random-init Llama with
SmolLM2-135M's shape: 30 layers, width 576, GQA 9/3 heads, 49k vocabulary; the tiny tokenizer's chat
template renders the conversation). Random weights never find the number, so every episode lasts the
full ``--turns``, and each reply is GuessNumber's 80-character "no guess found" hint.

    python benchmarks/bench_multiturn.py                       # both models, 2/4/6 turns (minutes)
    python benchmarks/bench_multiturn.py --models tiny --turns 4 8
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
from _paths import add_out_argument, out_path, write_json

MODES = ("reuse", "reprefill")


def build_model(name: str, tok: Any, smollm2_layers: int) -> Any:
    """The tiny default Llama, or a random-init Llama shaped like SmolLM2-135M."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from dapo_env.learners.models.tiny import build_tiny_model

    if name == "tiny":
        return build_tiny_model(tok, max_positions=2048, seed=0).eval()
    config = LlamaConfig(vocab_size=49_152, hidden_size=576, intermediate_size=1536, num_hidden_layers=smollm2_layers,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         tie_word_embeddings=True, rms_norm_eps=1e-5, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config).eval()


def rollout(engine: Any, tok: Any, *, turns: int, prompts: int, group_size: int, max_tokens: int,
            seed: int) -> dict[str, Any]:
    """One rollout of ``prompts * group_size`` episodes; returns its timings, token counts and trajectories."""
    from dapo_env import EpisodeGroupEnv
    from dapo_env.learners.engines import SamplingParams

    calls = itertools.count()

    def generate(requests: list[Any]) -> list[Any]:
        return engine.generate_turns(requests, SamplingParams(max_response_tokens=max_tokens, seed=1000 * seed + next(calls)))

    with EpisodeGroupEnv("GuessNumber-v0", num_envs=prompts * group_size, group_size=group_size, tokenizer=tok,
                         max_turns=turns, n=100, k=turns) as env:
        env.reset(seed=seed)
        before = engine.turn_stats["prefilled_tokens"]
        wall, cpu = time.perf_counter(), time.process_time()
        episodes = [t for group in env.rollout(generate).groups for t in group.completions]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    engine.release()
    return {"wall_s": wall, "cpu_s": cpu, "sampled_tokens": sum(t.num_tokens for t in episodes),
            "context_tokens_prefilled": engine.turn_stats["prefilled_tokens"] - before,
            "turns_mean": statistics.fmean(t.num_turns for t in episodes),
            "final_context_mean": statistics.fmean(len(t.prompt_token_ids) + len(t.token_ids) for t in episodes),
            "episodes": episodes}


def same_samples(a: Sequence[Any], b: Sequence[Any], where: str, tolerance: float = 1e-4) -> int:
    """Check that both modes sampled the same episodes; returns how many episodes parted at a CDF boundary.

    The two modes compute the same logits in a different order (padding, batch shapes), so they agree to
    floating-point rounding, not bit for bit. The sampler draws one uniform per token and inverts the CDF,
    so a draw that lands within rounding of a boundary between two neighbouring token ids can pick either
    (measured on the SmolLM2 shape: about 2 episodes in 48, log-probs equal to 1e-6 up to that token). That
    is allowed, once per episode (after it the contexts differ); anything else fails the run: log-probs that
    differ by more than ``tolerance`` before the first differing token, or a first difference between token
    ids that are not neighbours.
    """
    flips = 0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.token_ids == y.token_ids:
            continue
        first = next((k for k, (s, t) in enumerate(zip(x.token_ids, y.token_ids)) if s != t),
                     min(len(x.token_ids), len(y.token_ids)))
        drift = max((abs(p - q) for p, q in zip(x.logprobs[:first], y.logprobs[:first])), default=0.0)
        neighbours = first < min(len(x.token_ids), len(y.token_ids)) and abs(x.token_ids[first] - y.token_ids[first]) == 1
        if drift > tolerance or not neighbours:
            raise RuntimeError(f"{where}: episode {i} of KV reuse differs from a full re-prefill at token {first} "
                               f"(log-prob drift {drift:.2g} before it): KV reuse changed what was sampled")
        flips += 1
    return flips


def measure(model_name: str, model: Any, tok: Any, turns: int, args: argparse.Namespace) -> dict[str, Any]:
    """Both modes on the same episodes, alternating, ``--repeats`` times; medians and their ratios."""
    from dapo_env.learners.engines import HFEngine

    engines = {mode: HFEngine(model, tok, batch_size=256, reuse_kv=mode == "reuse") for mode in MODES}
    prompts, group = (args.prompts if model_name == "tiny" else args.smollm2_prompts), args.group_size
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    flips = 0
    for repeat in range(args.repeats):
        order = MODES if repeat % 2 == 0 else MODES[::-1]
        for mode in order:
            runs[mode].append(rollout(engines[mode], tok, turns=turns, prompts=prompts, group_size=group,
                                      max_tokens=args.max_tokens, seed=repeat))
        a, b = (runs[m][-1]["episodes"] for m in MODES)
        flips += same_samples(a, b, f"{model_name}, {turns} turns, repeat {repeat}")
    row: dict[str, Any] = {"model": model_name, "turns": turns, "episodes": prompts * group, "boundary_flips": flips}
    first = runs["reuse"][0]
    row.update(turns_mean=first["turns_mean"], sampled_tokens=first["sampled_tokens"],
               final_context_mean=round(first["final_context_mean"], 1))
    for mode in MODES:
        wall = statistics.median(r["wall_s"] for r in runs[mode])
        cpu = statistics.median(r["cpu_s"] for r in runs[mode])
        row[mode] = {"wall_s": wall, "cpu_s": cpu, "tokens_per_s": first["sampled_tokens"] / wall,
                     "tokens_per_cpu_s": first["sampled_tokens"] / cpu,
                     "context_tokens_prefilled": runs[mode][0]["context_tokens_prefilled"]}
    row["speedup_wall"] = row["reuse"]["tokens_per_s"] / row["reprefill"]["tokens_per_s"]
    row["speedup_cpu"] = row["reuse"]["tokens_per_cpu_s"] / row["reprefill"]["tokens_per_cpu_s"]
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dapo_env.learners.models.tiny import build_tokenizer

    torch.set_num_threads(args.threads)
    tok = build_tokenizer(model_max_length=2048)
    rows = []
    for model_name in args.models:
        model = build_model(model_name, tok, args.smollm2_layers)
        for turns in args.turns:
            row = measure(model_name, model, tok, turns, args)
            print(f"{model_name}, {turns} turns: reuse {row['reuse']['tokens_per_s']:.0f} tok/s, re-prefill "
                  f"{row['reprefill']['tokens_per_s']:.0f} tok/s ({row['speedup_wall']:.2f}x wall, "
                  f"{row['speedup_cpu']:.2f}x CPU)", flush=True)
            rows.append(row)
    return {"task": "GuessNumber-v0 (n=100, k=turns)", "max_tokens_per_turn": args.max_tokens,
            "repeats": args.repeats, "smollm2_layers": args.smollm2_layers,
            "machine": {"processor": platform.processor() or platform.machine(), "threads": args.threads,
                        "torch": torch.__version__},
            "rows": rows}


def table(result: dict[str, Any]) -> str:
    lines = ["| model | turns | episodes | context at end | reuse tok/s | re-prefill tok/s | speed-up (wall) | "
             "speed-up (CPU) | prefilled tokens, reuse / re-prefill |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        lines.append(
            f"| {r['model']} | {r['turns']} | {r['episodes']} | {r['final_context_mean']:.0f} | "
            f"{r['reuse']['tokens_per_s']:.0f} | {r['reprefill']['tokens_per_s']:.0f} | {r['speedup_wall']:.2f}x | "
            f"{r['speedup_cpu']:.2f}x | {r['reuse']['context_tokens_prefilled']} / "
            f"{r['reprefill']['context_tokens_prefilled']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=("tiny", "smollm2"), default=["tiny", "smollm2"])
    parser.add_argument("--turns", nargs="+", type=int, default=[2, 4, 6], help="turns per episode (k)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per rollout (tiny model)")
    parser.add_argument("--smollm2-prompts", type=int, default=4, help="prompts per rollout (SmolLM2 shape)")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per prompt")
    parser.add_argument("--max-tokens", type=int, default=16, help="most sampled tokens per turn")
    parser.add_argument("--smollm2-layers", type=int, default=30, help="decoder layers of the SmolLM2 shape (30)")
    parser.add_argument("--repeats", type=int, default=3, help="rollouts per mode (medians are reported)")
    parser.add_argument("--threads", type=int, default=2)
    add_out_argument(parser, "bench_multiturn")
    args = parser.parse_args(argv)
    if min(args.turns) < 1 or args.repeats < 1:
        parser.error("--turns and --repeats must be >= 1")
    result = run(args)
    print(table(result))
    write_json(out_path(args.out, "bench_multiturn"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
