"""LoRA vs full fine-tuning, side by side: peak memory and update throughput of the learner's update on CPU.

The model is SmolLM2-135M-shaped (576 wide, 30 layers, 9 query / 3 key-value heads, MLP 1536, vocabulary
49,152, tied embeddings) with random weights built locally, so nothing is downloaded. Every mode runs the
SAME update on the SAME batch: the public :func:`~dapo_env.learners.algo.update.update_policy` the trainer
calls (forward, backward with gradient accumulation over micro-batches, gradient clipping, AdamW step)
on ``--prompts`` groups of ``--group-size`` sequences of ``--prompt-len`` prompt and ``--response-len``
response tokens (random ids, every response token in the loss, advantages +1/-1).

Each mode runs in its OWN fresh subprocess, so the peak resident memory (``ru_maxrss``) of one mode
cannot hide another's; the table reports it absolute and as growth over the process after imports.
Throughput is response tokens in the loss per second of the best measured update (``--warmup`` updates
excluded), and per main-thread CPU-second (``time.thread_time``; with one torch thread that is the work
itself, which a shared machine's other load distorts less than wall clock). "push MB" is what a weight
push sends to a rollout engine per update: the whole model for full fine-tuning, the adapter for LoRA.

Run:
    python benchmarks/bench_lora.py                    # full vs LoRA rank 8 and 64, SmolLM2-135M shape, fp32
    python benchmarks/bench_lora.py --ranks 16 --threads 4 --precision bf16
Writes ``benchmarks/out/bench_lora.json`` (git-ignored) unless ``--out`` names another path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _paths import REPO, add_out_argument, out_path, write_json

#: Model shapes (Llama architecture): SmolLM2-135M's and a micro one for the smoke test.
SHAPES: dict[str, dict[str, int]] = {
    "smollm2-135m": dict(hidden=576, layers=30, heads=9, kv_heads=3, intermediate=1536, vocab=49_152),
    "micro": dict(hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128, vocab=512),
}


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """One workload, shared by every mode.

    Example:
        >>> BenchConfig(shape="micro").tokens_per_update
        512
        >>> BenchConfig(ranks=(0,))
        Traceback (most recent call last):
        ...
        ValueError: ranks must be LoRA ranks >= 1 (full fine-tuning always runs), got (0,)
    """

    shape: str = "smollm2-135m"
    ranks: tuple[int, ...] = (8, 64)
    alpha: float = 32.0
    prompts: int = 1  # groups per update (one optimizer step)
    group_size: int = 8  # G sequences per group
    prompt_len: int = 32
    response_len: int = 64
    micro_batch: int = 8  # sequences per forward/backward
    precision: str = "fp32"
    warmup: int = 1
    steps: int = 2
    threads: int = 1
    lr: float = 1e-5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape {self.shape!r}: choose one of {sorted(SHAPES)}")
        if not self.ranks or any(not isinstance(r, int) or r < 1 for r in self.ranks):
            raise ValueError(f"ranks must be LoRA ranks >= 1 (full fine-tuning always runs), got {self.ranks}")
        for name in ("prompts", "group_size", "prompt_len", "response_len", "micro_batch", "steps", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (group-relative advantages)")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision {self.precision!r}: choose fp32 or bf16")

    @property
    def tokens_per_update(self) -> int:
        return self.prompts * self.group_size * self.response_len

    @property
    def modes(self) -> tuple[str, ...]:
        return ("full", *(f"lora-r{r}" for r in self.ranks))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _tensor_mb(tensors: Any) -> float:
    return sum(t.numel() * t.element_size() for t in tensors) / 2**20


def build_model(cfg: BenchConfig) -> Any:
    """The random-init Llama of ``cfg.shape`` (fp32; initialised under a forked RNG with ``cfg.seed``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    s = SHAPES[cfg.shape]
    config = LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["intermediate"],
                         num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                         num_key_value_heads=s["kv_heads"], max_position_embeddings=cfg.prompt_len + cfg.response_len,
                         tie_word_embeddings=True, rope_theta=100_000.0, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return LlamaForCausalLM(config)


def build_batch(cfg: BenchConfig) -> tuple[Any, Any]:
    """``(SequenceBatch, advantages)``: random prompt and response ids, no EOS, every response token in the loss."""
    import torch

    from dapo_env.learners.algo.batch import build_sequence_batch
    from dapo_env.types import Completion, Group

    gen = torch.Generator().manual_seed(cfg.seed)
    vocab, G = SHAPES[cfg.shape]["vocab"], cfg.group_size

    def ids(n: int) -> tuple[int, ...]:
        return tuple(torch.randint(3, vocab, (n,), generator=gen).tolist())

    groups = []
    for g in range(cfg.prompts):
        prompt = ids(cfg.prompt_len)
        completions = tuple(Completion("", num_tokens=cfg.response_len, finish_reason="length",
                                       token_ids=ids(cfg.response_len), prompt_token_ids=prompt) for _ in range(G))
        rewards = tuple(1.0 if i % 2 else -1.0 for i in range(G))
        groups.append(Group(str(g), "", completions, rewards, tuple(r > 0 for r in rewards), (True,) * G))
    advantages = torch.tensor([r for grp in groups for r in grp.rewards])  # (N,) +-1: already zero-mean per group
    return build_sequence_batch(groups, pad_id=0), advantages


def run_mode(mode: str, cfg: BenchConfig) -> dict[str, Any]:
    """One mode in this process: build, ``warmup + steps`` updates, memory and timing."""
    import torch

    from dapo_env.learners.config import preset
    from dapo_env.learners.algo.update import update_policy

    torch.set_num_threads(cfg.threads)
    rss_start = _rss_mb()
    model = build_model(cfg)
    if mode != "full":
        from dapo_env.learners.models.lora import LoraSettings, add_lora, adapter_state_dict

        add_lora(model, LoraSettings(rank=int(mode.removeprefix("lora-r")), alpha=cfg.alpha))
        pushed = adapter_state_dict(model).values()
    else:
        pushed = model.state_dict().values()
    unique = {id(p): p for p in model.parameters()}.values()
    trainable = [p for p in unique if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.0)
    train_cfg = preset("dapo", group_size=cfg.group_size, batch_size=cfg.prompts, mini_batch_size=cfg.prompts,
                       micro_batch_size=cfg.micro_batch, max_response_tokens=cfg.response_len,
                       overlong_penalty=False, precision=cfg.precision)
    batch, advantages = build_batch(cfg)
    rss_built = _rss_mb()
    steps = []
    for step in range(cfg.warmup + cfg.steps):
        start, cpu_start = time.perf_counter(), time.thread_time()
        result = update_policy(model, optimizer, batch, advantages, train_cfg, key=(cfg.seed, step))
        steps.append({"update_s": time.perf_counter() - start, "update_cpu_s": time.thread_time() - cpu_start,
                      "loss_tokens": int(batch.loss_mask.sum()), "loss": result.metrics["loss"]})
    measured = steps[cfg.warmup:]
    tokens = sum(s["loss_tokens"] for s in measured)
    return {
        "mode": mode,
        "trainable_params": sum(p.numel() for p in trainable),
        "total_params": sum(p.numel() for p in unique),
        "optimizer_state_mb": _tensor_mb(t for state in optimizer.state.values() for t in state.values()
                                         if isinstance(t, torch.Tensor)),
        "push_mb": _tensor_mb(pushed),
        "rss_after_imports_mb": rss_start,
        "rss_after_build_mb": rss_built,
        "peak_rss_mb": _rss_mb(),
        "peak_rss_growth_mb": _rss_mb() - rss_start,
        "update_tokens_per_s": max(s["loss_tokens"] / s["update_s"] for s in measured),
        "update_tokens_per_s_mean": tokens / sum(s["update_s"] for s in measured),
        "update_tokens_per_cpu_s": tokens / sum(s["update_cpu_s"] for s in measured),
        "torch_threads": torch.get_num_threads(),
        "per_step": steps,
    }


def run_isolated(mode: str, cfg: BenchConfig) -> dict[str, Any]:
    """:func:`run_mode` in a fresh Python process (its own peak RSS); raises with the tail of its output."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode,
           "--config-json", json.dumps(dataclasses.asdict(cfg))]
    # The worker imports this checkout's dapo_env, whatever copy is installed.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": str(cfg.threads), "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"mode {mode} failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(cfg: BenchConfig) -> dict[str, Any]:
    """Every mode isolated, and the ratios of each LoRA mode to full fine-tuning."""
    import peft
    import torch
    import transformers

    result: dict[str, Any] = {
        "benchmark": "bench_lora", "config": dataclasses.asdict(cfg), "model": SHAPES[cfg.shape],
        "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
        "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "method": ("each mode in a fresh subprocess; same model init, batch, micro-batch, lr and steps; update = "
                   "update_policy (fwd + bwd + clip + AdamW step); tokens in the loss per second of the best measured "
                   "update and per main-thread CPU-second over all measured updates; warm-up updates excluded; "
                   "peak RSS = ru_maxrss of the mode's process"),
        "modes": {},
    }
    for mode in cfg.modes:
        result["modes"][mode] = run_isolated(mode, cfg)
    full = result["modes"]["full"]
    for mode, row in result["modes"].items():
        row["ratio_update_tokens_per_s"] = row["update_tokens_per_s"] / full["update_tokens_per_s"]
        row["ratio_update_tokens_per_cpu_s"] = row["update_tokens_per_cpu_s"] / full["update_tokens_per_cpu_s"]
        row["ratio_peak_rss"] = row["peak_rss_mb"] / full["peak_rss_mb"]
    return result


COLUMNS = (("mode", "mode", "{:<10}"), ("trainable", "trainable_params", "{:>11,}"),
           ("peak RSS MB", "peak_rss_mb", "{:>11.0f}"), ("growth MB", "peak_rss_growth_mb", "{:>9.0f}"),
           ("optim MB", "optimizer_state_mb", "{:>8.1f}"), ("push MB", "push_mb", "{:>8.2f}"),
           ("upd tok/s", "update_tokens_per_s", "{:>9.0f}"), ("tok/CPU-s", "update_tokens_per_cpu_s", "{:>9.0f}"),
           ("x full tok/s", "ratio_update_tokens_per_s", "{:>12.2f}"),
           ("x full tok/CPU-s", "ratio_update_tokens_per_cpu_s", "{:>16.2f}"), ("x full RSS", "ratio_peak_rss", "{:>10.2f}"))


def format_table(result: dict[str, Any]) -> str:
    """The side-by-side table (one row per mode)."""
    header = " ".join(f"{title:<10}" if key == "mode" else f"{title:>{len(fmt.format(0))}}" for title, key, fmt in COLUMNS)
    lines = [header]
    for row in result["modes"].values():
        lines.append(" ".join(fmt.format(row[key]) for _, key, fmt in COLUMNS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    parser.add_argument("--shape", default="smollm2-135m", choices=sorted(SHAPES))
    parser.add_argument("--ranks", default="8,64", help="comma-separated LoRA ranks (full fine-tuning always runs)")
    parser.add_argument("--alpha", type=float, default=32.0)
    parser.add_argument("--prompts", type=int, default=1, help="groups per update")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--response-len", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    add_out_argument(parser, "bench_lora")
    args = parser.parse_args(argv)
    if args.worker:
        data = json.loads(args.config_json)
        cfg = BenchConfig(**{**data, "ranks": tuple(data["ranks"])})
        print(json.dumps(run_mode(args.worker, cfg)))
        return None
    try:
        ranks = tuple(int(r) for r in args.ranks.split(",") if r.strip())
    except ValueError:
        raise SystemExit(f"--ranks {args.ranks!r}: give comma-separated integers such as 8,64") from None
    try:
        import peft  # noqa: F401
    except ImportError:
        raise SystemExit("bench_lora needs peft: pip install -e '.[lora]'") from None
    cfg = BenchConfig(shape=args.shape, ranks=ranks, alpha=args.alpha, prompts=args.prompts, group_size=args.group_size,
                      prompt_len=args.prompt_len, response_len=args.response_len, micro_batch=args.micro_batch,
                      precision=args.precision, warmup=args.warmup, steps=args.steps, threads=args.threads)
    print(f"bench_lora: {cfg.shape} ({cfg.prompts}x{cfg.group_size} sequences of {cfg.prompt_len}+{cfg.response_len} "
          f"tokens, {cfg.precision}, {cfg.threads} thread(s)); each mode in its own process", flush=True)
    result = compare(cfg)
    print(format_table(result))
    write_json(out_path(args.out, "bench_lora"), result)
    return result


if __name__ == "__main__":
    main()
