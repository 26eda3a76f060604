"""Our DAPO trainer vs TRL's ``GRPOTrainer`` vs the floors, side by side on one workload: update and rollout
throughput and peak memory.

The floors say how close we are to what the hardware allows, not just how far ahead of a peer:
- **update floor** (side ``floor``): a minimal loop written for this benchmark (:func:`floor_update_step`:
  backbone forward, lm_head on the response positions, log-softmax, the response tokens' log-probs, the same
  clipped token-mean loss, backward, gradient clipping, AdamW) replaying exactly the batches our update saw
  (our side saves them); ``ratio_update_tokens_per_cpu_s_vs_floor`` (target >= 0.85) and
  ``ratio_peak_rss_vs_floor`` in the JSON;
- **rollout floor** (side ``rollout_floor``): ``HFEngine.generate`` (what our rollouts call) against a bare
  KV-cache sampling loop (:func:`floor_generate`) on the same model and prompts, alternating in one process;
  ``ratio_rollout_tokens_per_cpu_s_vs_floor`` (target >= 0.8).
``--packing-sweep`` measures instead ``update_policy`` on a variable-length workload with each
``TrainConfig.packing`` (padded share, tokens per CPU-second, loss beside the padded layout's).

Both sides train the same random-init model (built locally from a config: a tiny Llama with a 32k
vocabulary on CPU, a Qwen2-0.5B-shaped model in bf16 on CUDA), on the same task's prompts, with the same
group size G, prompts per step, micro-batch, response length limit, sampling temperature, learning
rate and number of steps, and the same DAPO loss settings (clip 0.2/0.28, token-level loss, no KL,
one optimizer step per rollout batch). Each side runs in its OWN fresh subprocess (so peak memory is
comparable) with the same torch thread count. The first ``--warmup`` steps are excluded.

What is measured per training step:
- rollout: generating the G responses per prompt and scoring them (ours: the DynamicSampler round
  through the env; TRL: ``_generate_and_score_completions``);
- update: the optimisation on that batch, forward + backward (with gradient accumulation over
  micro-batches) + gradient clipping + optimizer step (ours: the public ``update_policy`` the trainer calls,
  which also pushes the weights to the engine; TRL: the rest of its optimizer step, on_step_begin ->
  on_step_end minus rollout);
- learner: everything in the step that is not rollout (ours adds the no-grad old-log-prob pass,
  the engine/learner mismatch metric and the parameter-drift metric; TRL skips the old-log-prob pass
  when the batch is used for exactly one optimizer step, as here);
- tokens in the loss (response tokens, EOS included; padding excluded) and tokens generated.
Neither side forces a response length: both stop at EOS or at ``--length`` tokens, and throughput is
tokens actually processed per second (a random-init model with a 32k+ vocabulary almost never samples
EOS, so both sides process about ``--length`` tokens per response; the JSON records the counts).
Peak memory: CPU ``ru_maxrss`` of the process (absolute, and its growth after the model is built);
CUDA ``max_memory_allocated``. Wall-clock tokens/s are those of the best measured step (``*_mean``: all
measured steps); on CPU, tokens per main-thread CPU-second (``time.thread_time``; with one torch thread
that is the work itself) are reported too, since other load on a shared machine distorts wall clock.

Run:
    python benchmarks/bench_learner.py                       # CPU, tiny Llama (~4.6M params, vocab 32k), all sides
    python benchmarks/bench_learner.py --packing-sweep --length 512   # padding: off / length / pack
    python benchmarks/bench_learner.py --device cuda --model-shape qwen2-0.5b   # see bench_learner_gpu.sh
    python benchmarks/bench_learner.py --device cuda --engine vllm-server --sides ours   # server mode
With ``--engine vllm-server`` our side's engine starts a ``vllm serve`` beside the learner (on CUDA with 30 % of
the GPU) and the JSON adds which weight-sync path ran (``weight_sync``: file or nccl, ``--weight-sync``) and
the latency of every push after an optimizer step, verification included (``push_ms_*``).
Writes ``benchmarks/out/bench_learner.json`` (CPU) or ``bench_learner_gpu.json`` (CUDA), a git-ignored
folder; ``--out benchmarks/results/bench_learner.json`` refreshes the tracked result.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _paths import child_env, out_path, write_json


#: Model shapes: (hidden, layers, heads, kv_heads, intermediate, vocab, architecture).
MODEL_SHAPES: dict[str, dict[str, Any]] = {
    "micro": dict(hidden=64, layers=1, heads=2, kv_heads=2, intermediate=128, vocab=2048, arch="llama"),
    "tiny": dict(hidden=128, layers=2, heads=4, kv_heads=4, intermediate=512, vocab=32_000, arch="llama"),
    "small": dict(hidden=256, layers=4, heads=4, kv_heads=4, intermediate=1024, vocab=32_000, arch="llama"),
    "qwen2-tiny": dict(hidden=128, layers=2, heads=4, kv_heads=2, intermediate=256, vocab=4096, arch="qwen2"),
    "qwen2-0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=151_936,
                       arch="qwen2"),
}


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """One side-by-side workload.

    Example:
        >>> BenchConfig(model_shape="micro", length=16).tokens_per_step_max
        512
    """

    device: str = "cpu"
    model_shape: str = "tiny"
    dtype: str = "float32"  # "float32" or "bfloat16"
    task: str = "Arithmetic-v0"
    group_size: int = 8  # G
    prompts_per_step: int = 4  # B prompts -> B*G responses per optimizer step
    micro_batch: int = 16  # sequences per forward/backward (gradient accumulation over the rest)
    length: int = 256  # the most response tokens
    warmup: int = 1  # steps run first and excluded
    steps: int = 3  # measured steps
    threads: int = 1  # torch CPU threads, both sides
    lr: float = 1e-6
    seed: int = 0
    #: Our side's token sampler: "multinomial" (what HFEngine calls) or "inverse-cdf", a demonstration of
    #: a proposed HFEngine change (one uniform per row + cumsum + searchsorted; same distribution).
    our_sampler: str = "multinomial"
    #: Our side's micro-batch layout (TrainConfig.packing): "off", "length" or "pack".
    packing: str = "off"
    #: Our side's rollout engine (TrainConfig.engine): "hf", "vllm" in-process (CUDA), or "vllm-server" (a
    #: ``vllm serve`` the engine starts beside the learner; every push verified).
    engine: str = "hf"
    #: With engine "vllm-server": how pushes reach the server (auto, file or nccl; see learners/engines/weight_sync.py).
    weight_sync: str = "auto"

    def __post_init__(self) -> None:
        if self.model_shape not in MODEL_SHAPES:
            raise ValueError(f"model_shape {self.model_shape!r}: choose one of {sorted(MODEL_SHAPES)}")
        if self.our_sampler not in ("multinomial", "inverse-cdf"):
            raise ValueError(f"our_sampler {self.our_sampler!r}: choose multinomial or inverse-cdf")
        if self.engine not in ("hf", "vllm", "vllm-server"):
            raise ValueError(f"engine {self.engine!r}: choose hf, vllm or vllm-server")
        if self.weight_sync not in ("auto", "file", "nccl"):
            raise ValueError(f"weight_sync {self.weight_sync!r}: choose auto, file or nccl")
        if self.packing not in ("off", "length", "pack"):
            raise ValueError(f"packing {self.packing!r}: choose off, length or pack")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype {self.dtype!r}: choose float32 or bfloat16")
        for name in ("group_size", "prompts_per_step", "micro_batch", "length", "steps", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (group-relative advantages)")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if (self.group_size * self.prompts_per_step) % self.micro_batch:
            raise ValueError(f"micro_batch={self.micro_batch} must divide group_size*prompts_per_step="
                             f"{self.group_size * self.prompts_per_step} (TRL needs whole micro-batches)")

    @property
    def tokens_per_step_max(self) -> int:
        return self.group_size * self.prompts_per_step * self.length


# --- shared pieces: tokenizer, model, prompts --------------------------------------------------------
def vocab_alphabet(vocab: int) -> str:
    """Printable ASCII then CJK and further code points (no surrogates): ``vocab - 4`` distinct characters,
    so the character-level tokenizer (4 special tokens) has exactly ``vocab`` entries."""
    from dapo_env.learners.models.tiny import DEFAULT_ALPHABET, SPECIAL_TOKENS

    need = vocab - len(SPECIAL_TOKENS)
    if need < len(DEFAULT_ALPHABET):
        raise ValueError(f"vocab {vocab} is smaller than the ASCII alphabet + special tokens")
    chars = list(DEFAULT_ALPHABET)
    code = 0x4E00
    while len(chars) < need:
        if not 0xD800 <= code <= 0xDFFF and not 0xFFF0 <= code <= 0xFFFF:
            chars.append(chr(code))
        code += 1
    return "".join(chars)


def build_tokenizer_and_model(cfg: BenchConfig) -> tuple[Any, Any]:
    """The character tokenizer with the shape's vocabulary and the random-init model (seed ``cfg.seed``)."""
    import torch

    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    shape = MODEL_SHAPES[cfg.model_shape]
    max_pos = max(512, 2 * (cfg.length + 64))
    tok = build_tokenizer(vocab_alphabet(shape["vocab"]), model_max_length=max_pos)
    dtype = getattr(torch, cfg.dtype)
    if shape["arch"] == "llama":
        model = build_tiny_model(tok, hidden_size=shape["hidden"], layers=shape["layers"], heads=shape["heads"],
                                 kv_heads=shape["kv_heads"], intermediate_size=shape["intermediate"],
                                 max_positions=max_pos, seed=cfg.seed)
    else:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        config = Qwen2Config(vocab_size=len(tok), hidden_size=shape["hidden"], intermediate_size=shape["intermediate"],
                             num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                             num_key_value_heads=shape["kv_heads"], max_position_embeddings=max_pos,
                             tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, rope_theta=1_000_000.0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            model = Qwen2ForCausalLM(config)
        for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
            setattr(model.generation_config, key, getattr(tok, key))
    return tok, model.to(device=cfg.device, dtype=dtype)


#: Dense bf16 peak of the GPUs this benchmark meets (TFLOP/s, no sparsity), by a word of the device name.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def flop_parameters(shape: dict[str, Any]) -> int:
    """Parameters that cost FLOPs per token: every decoder layer's matrices plus the lm_head (V x H; the
    embedding lookup is free). Training costs ~6 of them per token, generation ~2 (attention left out).

    Example:
        >>> flop_parameters(MODEL_SHAPES["qwen2-0.5b"]) // 10**6
        493
    """
    h, heads, kv, inter = shape["hidden"], shape["heads"], shape["kv_heads"], shape["intermediate"]
    d = h // heads
    attn = h * heads * d + 2 * h * kv * d + heads * d * h  # q, k, v, o
    return shape["layers"] * (attn + 3 * h * inter) + shape["vocab"] * h


def peak_tflops(device_name: str) -> float | None:
    """The bf16 dense peak of ``device_name`` from :data:`PEAK_BF16_TFLOPS` (None if unknown)."""
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in device_name), None)


def add_mfu(result: dict[str, Any], peak: float) -> None:
    """Model FLOPs utilisation of every side (in place): 6 N FLOPs per update token and 2 N per generated
    token over ``peak`` TFLOP/s, N = :func:`flop_parameters`."""
    n = flop_parameters(result["model"])
    result["mfu_peak_tflops"] = peak
    for side in result["sides"].values():
        if "update_tokens_per_s" in side:
            side["update_mfu"] = 6 * n * side["update_tokens_per_s"] / (peak * 1e12)
        if "rollout_tokens_per_s" in side:
            side["rollout_mfu"] = 2 * n * side["rollout_tokens_per_s"] / (peak * 1e12)
        for key in ("ours_tokens_per_s", "floor_tokens_per_s"):  # the rollout floor's two loops
            if key in side:
                side[key.replace("tokens_per_s", "mfu")] = 2 * n * side[key] / (peak * 1e12)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _memory(device: str, base_rss: int) -> dict[str, float]:
    out = {"peak_rss_mb": _rss_bytes() / 2**20, "peak_rss_growth_mb": (_rss_bytes() - base_rss) / 2**20}
    if device.startswith("cuda"):
        import torch

        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


# --- our side ------------------------------------------------------------------------------------------
def inverse_cdf_multinomial(original: Callable[..., Any]) -> Callable[..., Any]:
    """A drop-in for ``torch.multinomial`` that draws ONE sample per row by inverting the CDF.

    ``torch.multinomial`` on CPU spends most of a (B, 32k) call generating random numbers per vocabulary
    entry (~10 ms for B = 16, V = 32,000 here); one uniform per row, a cumulative sum and a binary search
    draw from the same distribution in ~0.5 ms. Other calls (several samples, replacement) go to
    ``original``.
    """
    import torch

    def sample(probs: Any, num_samples: int, replacement: bool = False, *, generator: Any = None,
               out: Any = None) -> Any:
        if num_samples != 1 or out is not None or probs.dim() != 2:
            return original(probs, num_samples, replacement, generator=generator, out=out)
        cdf = probs.cumsum(-1)  # (B, V) non-decreasing; zero-probability tokens are never the first >= u
        u = (1.0 - torch.rand(probs.shape[0], 1, generator=generator, device=probs.device,
                              dtype=cdf.dtype)) * cdf[:, -1:]  # (B, 1) in (0, total]
        return torch.searchsorted(cdf, u).clamp_(max=probs.shape[-1] - 1)  # (B, 1)

    return sample


def run_ours(cfg: BenchConfig, batch_dir: str | None = None) -> dict[str, Any]:
    """Our ``Trainer.train_step`` on the workload; the public ``update_policy`` it calls is timed by wrapping
    the trainer module's reference to it (this worker process only). With ``batch_dir``, every batch the
    update sees is saved there (after its timing) for the floor side."""
    import torch

    from dapo_env.learners import trainer as trainer_module
    from dapo_env.learners.config import preset
    from dapo_env.learners.trainer import Trainer

    torch.set_num_threads(cfg.threads)
    if cfg.our_sampler == "inverse-cdf":
        torch.multinomial = inverse_cdf_multinomial(torch.multinomial)  # this worker process only
    tok, model = build_tokenizer_and_model(cfg)
    base_rss = _rss_bytes()
    with tempfile.TemporaryDirectory(prefix="bench_learner_") as tmp:
        tcfg = preset("dapo", name="ours", out_dir=tmp, seed=cfg.seed, task=cfg.task, device=cfg.device,
                      num_threads=cfg.threads, max_steps=cfg.warmup + cfg.steps, group_size=cfg.group_size,
                      batch_size=cfg.prompts_per_step, mini_batch_size=cfg.prompts_per_step,
                      micro_batch_size=cfg.micro_batch, max_response_tokens=cfg.length, dynamic_sampling=False,
                      overlong_penalty=False, temperature=1.0, top_p=1.0, lr=cfg.lr, warmup_steps=0,
                      eval_every=0, plot_every=0, checkpoint_every=0, progress=False, packing=cfg.packing,
                      engine=cfg.engine, engine_options=server_options(cfg, tmp))
        trainer = Trainer(tcfg, model=model, tokenizer=tok, overwrite=True)
        push_ms = time_pushes(trainer.engine, cfg) if cfg.engine == "vllm-server" else []
        update_times: list[tuple[float, float, float]] = []  # (wall s, main-thread CPU s, padded share)
        original = trainer_module.update_policy

        def timed_update(model: Any, optimizer: Any, batch: Any, advantages: Any, *args: Any, **kwargs: Any) -> Any:
            _sync(cfg.device)
            start, cpu_start = time.perf_counter(), time.thread_time()
            out = original(model, optimizer, batch, advantages, *args, **kwargs)
            _sync(cfg.device)
            update_times.append((time.perf_counter() - start, time.thread_time() - cpu_start,
                                 float(out.metrics.get("padded_share", float("nan")))))
            if batch_dir is not None:
                save_update_batch(Path(batch_dir) / f"step{len(update_times) - 1}.pt", batch, advantages)
            return out

        trainer_module.update_policy = timed_update
        rollout_cpu: list[float] = []
        sample = trainer.sampler.sample

        def timed_sample(*args: Any, **kwargs: Any) -> Any:
            cpu_start = time.thread_time()
            out = sample(*args, **kwargs)
            rollout_cpu.append(time.thread_time() - cpu_start)
            return out

        trainer.sampler.sample = timed_sample  # type: ignore[method-assign]
        steps = []
        for _ in range(cfg.warmup + cfg.steps):
            _sync(cfg.device)
            start, cpu_start = time.perf_counter(), time.thread_time()
            rec = trainer.train_step()
            _sync(cfg.device)
            step_s, step_cpu_s = time.perf_counter() - start, time.thread_time() - cpu_start
            rollout_s = float(rec["time/rollout_s"])
            steps.append({
                "step_s": step_s, "rollout_s": rollout_s, "update_s": update_times[-1][0],
                "learner_s": step_s - rollout_s, "step_cpu_s": step_cpu_s, "update_cpu_s": update_times[-1][1],
                "rollout_cpu_s": rollout_cpu[-1], "learner_cpu_s": step_cpu_s - rollout_cpu[-1],
                "loss_tokens": round(float(rec["perf/update_tokens_per_s"]) * float(rec["time/update_s"])),
                "generated_tokens": round(float(rec["perf/rollout_tokens_per_s"]) * rollout_s),
                "sequences": int(rec["rollout/samples_generated"]), "padded_share": update_times[-1][2],
            })
        server = {}
        if cfg.engine == "vllm-server":  # which sync path ran, the push latency; the server it started ends here
            server = {"weight_sync": trainer.engine.weight_sync, **push_summary(push_ms)}
            trainer.engine.close()
        trainer.close()
    return {"side": "ours", "torch_threads": torch.get_num_threads(), "steps": steps, **server,
            **_memory(cfg.device, base_rss)}


def server_options(cfg: BenchConfig, folder: str) -> dict[str, Any]:
    """engine_options of the server-mode row: the weight-sync choice, the server's log, and (CUDA) a share of
    the GPU small enough to leave the learner its room (the server starts beside it on the same GPU)."""
    if cfg.engine != "vllm-server":
        return {}
    options: dict[str, Any] = {"weight_sync": cfg.weight_sync, "log": str(Path(folder) / "vllm-server.log")}
    if cfg.device.startswith("cuda"):
        options["gpu_memory_utilization"] = 0.3
    return options


def time_pushes(engine: Any, cfg: BenchConfig) -> list[float]:
    """Wrap ``engine.load_weights`` (this worker process only) to time every push after an optimizer step,
    verification included; returns the list the times (ms) go to."""
    load = engine.load_weights
    times: list[float] = []

    def timed(weights: Any) -> None:
        _sync(cfg.device)
        start = time.perf_counter()
        load(weights)
        _sync(cfg.device)
        times.append((time.perf_counter() - start) * 1000)

    engine.load_weights = timed
    return times


def push_summary(push_ms: list[float]) -> dict[str, Any]:
    """Median and max push latency (ms) over the timed pushes, and each one.

    Example:
        >>> push_summary([30.0, 10.0, 20.0])["push_ms_median"]
        20.0
    """
    ordered = sorted(push_ms)
    return {"push_ms_median": ordered[len(ordered) // 2], "push_ms_max": ordered[-1], "push_ms_each": push_ms}


# --- the floors: bare PyTorch loops on the same model and data --------------------------------------
def save_update_batch(path: Path, batch: Any, advantages: Any) -> None:
    """The tensors of one update's batch (what the floor side replays), on the CPU."""
    import torch

    torch.save({"input_ids": batch.input_ids.cpu(), "attention_mask": batch.attention_mask.cpu(),
                "position_ids": batch.position_ids.cpu(), "loss_mask": batch.loss_mask.cpu(),
                "prompt_len": batch.prompt_len, "advantages": advantages.detach().cpu()}, path)


def floor_update_step(model: Any, optimizer: Any, batch: dict[str, Any], *, micro_batch: int, clip_low: float = 0.2,
                      clip_high: float = 0.28, grad_clip: float = 1.0) -> float:
    """One DAPO optimizer step written out by hand: for each micro-batch, the backbone forward, the lm_head
    on the response positions only, log-softmax, the response tokens' log-probs, the clipped token-level
    loss over the batch's token count (on-policy: the old log-probs are these, detached), backward; then
    gradient clipping and the optimizer step. Returns the loss."""
    import torch

    ids, attn, pos = batch["input_ids"], batch["attention_mask"], batch["position_ids"]
    mask, adv, P = batch["loss_mask"], batch["advantages"], batch["prompt_len"]
    device = next(model.parameters()).device
    num_tokens = float(mask.sum())
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for s in range(0, ids.shape[0], micro_batch):
        rows = slice(s, s + micro_batch)
        hidden = decoder(input_ids=ids[rows].to(device), attention_mask=attn[rows].to(device),
                         position_ids=pos[rows].to(device), use_cache=False).last_hidden_state  # (m, P+R, H)
        logits = head(hidden[:, P - 1:-1]).float()  # (m, R, V)
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[rows, P:, None].to(device)).squeeze(-1)  # (m, R)
        ratio = torch.exp(logp - logp.detach())
        a = adv[rows, None].to(device)
        loss = torch.maximum(-a * ratio, -a * ratio.clamp(1 - clip_low, 1 + clip_high))  # (m, R)
        loss = (loss * mask[rows].to(device)).sum() / num_tokens
        loss.backward()
        total += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return total


def run_floor(cfg: BenchConfig, batch_dir: str) -> dict[str, Any]:
    """The update floor: :func:`floor_update_step` with AdamW on every batch our side's update saw (same
    model init, same micro-batch size, same dtype and threads), timed like ours."""
    import torch

    torch.set_num_threads(cfg.threads)
    tok, model = build_tokenizer_and_model(cfg)
    base_rss = _rss_bytes()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1)
    files = sorted(Path(batch_dir).glob("step*.pt"), key=lambda f: int(f.stem[4:]))
    if not files:
        raise RuntimeError(f"no saved batches in {batch_dir}: run our side first")
    steps = []
    for f in files:
        batch = torch.load(f, weights_only=False)
        _sync(cfg.device)
        start, cpu_start = time.perf_counter(), time.thread_time()
        floor_update_step(model, optimizer, batch, micro_batch=cfg.micro_batch)
        _sync(cfg.device)
        wall, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
        steps.append({"update_s": wall, "update_cpu_s": cpu, "loss_tokens": int(batch["loss_mask"].sum())})
    return {"side": "floor", "torch_threads": torch.get_num_threads(), "steps": steps, **_memory(cfg.device, base_rss)}


def floor_generate(model: Any, prompts: list[list[int]], n: int, *, max_tokens: int, eos_id: int, pad_id: int,
                   generator: Any) -> list[list[int]]:
    """A bare sampling loop with a KV cache: prompts left-padded and repeated ``n`` times, one forward over
    them, then one token per step (temperature 1: softmax, inverse-CDF draw, its log-prob kept) until every
    row has sampled EOS or ``max_tokens``. Returns the sampled ids per row (EOS included)."""
    import torch

    device = next(model.parameters()).device
    rows = [p for p in prompts for _ in range(n)]
    width = max(len(p) for p in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, p in enumerate(rows):
        ids[i, width - len(p):] = torch.tensor(p)
        attn[i, width - len(p):] = 1
    ids, attn = ids.to(device), attn.to(device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"  # 5.x: cache
    next_pos = attn.sum(-1, keepdim=True)
    done = torch.zeros(len(rows), dtype=torch.bool, device=device)
    tokens, logps = [], []
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1)
        for step in range(max_tokens):
            logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # (B, V)
            cdf = logp.exp().cumsum(-1)
            u = torch.rand((len(rows), 1), generator=generator, device=device) * cdf[:, -1:]
            nxt = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)
            nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
            tokens.append(nxt)
            logps.append(logp.gather(-1, nxt[:, None]).squeeze(-1))
            done |= nxt == eos_id
            if bool(done.all()) or step + 1 == max_tokens:
                break
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=-1)
            cache = out.cache if cache_kw == "cache" else out.past_key_values
            out = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=next_pos, use_cache=True,
                        **{cache_kw: cache})
            next_pos = next_pos + 1
    sampled = torch.stack(tokens, 1).cpu()
    result = []
    for row in sampled.tolist():
        end = row.index(eos_id) + 1 if eos_id in row else len(row)
        result.append(row[:end])
    return result


def run_rollout_floor(cfg: BenchConfig) -> dict[str, Any]:
    """Rollout floor: ``HFEngine.generate`` (what our rollouts call) vs :func:`floor_generate`, on the same
    model, the task's first prompts (rendered as our env renders them), G samples each, alternating per
    step in one process; generated tokens per main-thread CPU-second each."""
    import torch

    from dapo_env.learners.engines import HFEngine, SamplingParams
    from dapo_env.tasks import get_task

    torch.set_num_threads(cfg.threads)
    tok, model = build_tokenizer_and_model(cfg)
    model.eval()
    task = get_task(cfg.task)
    problems = task.load(split="train")
    engine = HFEngine(model, tok, batch_size=cfg.group_size * cfg.prompts_per_step)
    steps = []
    for step in range(cfg.warmup + cfg.steps):
        texts = [task.format_prompt(problems[step * cfg.prompts_per_step + i]) for i in range(cfg.prompts_per_step)]
        sampling = SamplingParams(temperature=1.0, top_p=1.0, max_response_tokens=cfg.length, seed=cfg.seed + step)
        _sync(cfg.device)
        start, cpu_start = time.perf_counter(), time.thread_time()
        ours = engine.generate(texts, cfg.group_size, sampling)
        _sync(cfg.device)
        ours_s, ours_cpu = time.perf_counter() - start, time.thread_time() - cpu_start
        prompts = [c[0].prompt_token_ids for c in ours]
        gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed + step)
        start, cpu_start = time.perf_counter(), time.thread_time()
        floor = floor_generate(model, [list(p) for p in prompts], cfg.group_size, max_tokens=cfg.length,
                               eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, generator=gen)
        _sync(cfg.device)
        floor_s, floor_cpu = time.perf_counter() - start, time.thread_time() - cpu_start
        steps.append({"ours_s": ours_s, "ours_cpu_s": ours_cpu, "floor_s": floor_s, "floor_cpu_s": floor_cpu,
                      "ours_tokens": sum(len(c.token_ids) for g in ours for c in g),
                      "floor_tokens": sum(len(r) for r in floor)})
    return {"side": "rollout_floor", "torch_threads": torch.get_num_threads(), "steps": steps}


def summarize_floors(result: dict[str, Any], floor: dict[str, Any] | None, rollout: dict[str, Any] | None,
                     warmup: int) -> None:
    """Add the floor sides' summaries and ours/floor ratios to ``result`` (in place)."""
    ours = result["sides"].get("ours")
    if floor is not None:
        # the floor replays the batches of every step ours ran, warm-up included: measure the same steps
        measured = floor["steps"][warmup:]
        tokens = sum(s["loss_tokens"] for s in measured)
        summary = {"update_tokens_per_s": max(s["loss_tokens"] / s["update_s"] for s in measured),
                   "update_tokens_per_s_mean": tokens / sum(s["update_s"] for s in measured),
                   "update_tokens_per_cpu_s": tokens / sum(s["update_cpu_s"] for s in measured),
                   "update_s": sum(s["update_s"] for s in measured) / len(measured),
                   "loss_tokens_per_step": tokens / len(measured), "measured_steps": len(measured)}
        result["sides"]["floor"] = {**{k: v for k, v in floor.items() if k != "steps"}, **summary,
                                    "per_step": floor["steps"]}
        if ours is not None:
            f = result["sides"]["floor"]
            result["ratio_update_tokens_per_s_vs_floor"] = ours["update_tokens_per_s"] / f["update_tokens_per_s"]
            result["ratio_peak_rss_vs_floor"] = ours["peak_rss_mb"] / f["peak_rss_mb"]
            result["ratio_peak_rss_growth_vs_floor"] = ours["peak_rss_growth_mb"] / max(f["peak_rss_growth_mb"], 1e-9)
            if "peak_cuda_mb" in ours:
                result["ratio_peak_cuda_vs_floor"] = ours["peak_cuda_mb"] / f["peak_cuda_mb"]
            if not result["config"]["device"].startswith("cuda"):
                result["ratio_update_tokens_per_cpu_s_vs_floor"] = (ours["update_tokens_per_cpu_s"]
                                                                    / f["update_tokens_per_cpu_s"])
                result["target_update_0_85x_floor_met"] = result["ratio_update_tokens_per_cpu_s_vs_floor"] >= 0.85
    if rollout is not None:
        measured = rollout["steps"][warmup:]

        def rate(side: str, seconds: str) -> float:
            return sum(s[f"{side}_tokens"] for s in measured) / sum(s[f"{side}_{seconds}"] for s in measured)

        summary = {"ours_tokens_per_s": rate("ours", "s"), "floor_tokens_per_s": rate("floor", "s"),
                   "ours_tokens_per_cpu_s": rate("ours", "cpu_s"), "floor_tokens_per_cpu_s": rate("floor", "cpu_s")}
        result["sides"]["rollout_floor"] = {**{k: v for k, v in rollout.items() if k != "steps"}, **summary,
                                            "per_step": rollout["steps"]}
        result["ratio_rollout_tokens_per_s_vs_floor"] = summary["ours_tokens_per_s"] / summary["floor_tokens_per_s"]
        if not result["config"]["device"].startswith("cuda"):
            result["ratio_rollout_tokens_per_cpu_s_vs_floor"] = (summary["ours_tokens_per_cpu_s"]
                                                                 / summary["floor_tokens_per_cpu_s"])
            result["target_rollout_0_8x_floor_met"] = result["ratio_rollout_tokens_per_cpu_s_vs_floor"] >= 0.8


# --- padding: the update on a variable-length workload, per micro-batch layout ---------------------------
def variable_length_groups(cfg: BenchConfig, tok: Any, step: int) -> list[Any]:
    """``cfg.prompts_per_step`` groups of G samples: Sort-v0 prompts of 2 to 60 numbers (about 60 to 330
    tokens) and responses of lengths drawn uniformly from [8, ``cfg.length``] (random token ids; DAPO's
    responses range from tens to L_max tokens), seeded by (``cfg.seed``, ``step``)."""
    import numpy as np

    from dapo_env.tasks import get_task
    from dapo_env.types import Completion, Group

    task = get_task("Sort-v0")
    problems = task.load(split="train", min_count=2, max_count=60, max_value=99, seed=cfg.seed,
                         size=(step + 1) * cfg.prompts_per_step)
    gen = np.random.default_rng([cfg.seed, step])
    groups = []
    for g in range(cfg.prompts_per_step):
        prompt = tuple(tok(task.format_prompt(problems[step * cfg.prompts_per_step + g]))["input_ids"])
        comps = tuple(Completion("x", token_ids=tuple(int(t) for t in gen.integers(4, len(tok), size=n)),
                                 prompt_token_ids=prompt) for n in gen.integers(8, cfg.length + 1, size=cfg.group_size))
        rewards = tuple(1.0 if k % 2 else -1.0 for k in range(cfg.group_size))
        groups.append(Group(str(g), "p", comps, rewards, tuple(r > 0 for r in rewards), (True,) * cfg.group_size))
    return groups


def run_packing(cfg: BenchConfig) -> dict[str, Any]:
    """``update_policy`` (on-policy, one optimizer step per batch, AdamW) with ``TrainConfig.packing =
    cfg.packing`` on :func:`variable_length_groups`; per step: CPU seconds, loss tokens, padded share, loss."""
    import torch

    from dapo_env.learners.algo.batch import build_sequence_batch
    from dapo_env.learners.config import preset
    from dapo_env.learners.algo.losses import group_advantages
    from dapo_env.learners.algo.update import update_policy

    torch.set_num_threads(cfg.threads)
    tok, model = build_tokenizer_and_model(cfg)
    base_rss = _rss_bytes()
    tcfg = preset("dapo", group_size=cfg.group_size, batch_size=cfg.prompts_per_step,
                  mini_batch_size=cfg.prompts_per_step, micro_batch_size=cfg.micro_batch,
                  max_response_tokens=cfg.length, overlong_penalty=False, packing=cfg.packing, lr=cfg.lr)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1)
    steps = []
    for step in range(cfg.warmup + cfg.steps):
        groups = variable_length_groups(cfg, tok, step)
        batch = build_sequence_batch(groups, pad_id=tok.pad_token_id).to(cfg.device)
        adv = group_advantages(torch.tensor([r for g in groups for r in g.rewards], device=cfg.device), cfg.group_size)
        _sync(cfg.device)
        start, cpu_start = time.perf_counter(), time.thread_time()
        out = update_policy(model, optimizer, batch, adv, tcfg, key=(cfg.seed, step))
        _sync(cfg.device)
        steps.append({"update_s": time.perf_counter() - start, "update_cpu_s": time.thread_time() - cpu_start,
                      "loss_tokens": int(batch.loss_mask.sum()), "padded_share": out.metrics["padded_share"],
                      "loss": out.metrics["loss"]})
    return {"side": f"packing_{cfg.packing}", "torch_threads": torch.get_num_threads(), "steps": steps,
            **_memory(cfg.device, base_rss)}


def packing_sweep(cfg: BenchConfig) -> dict[str, Any]:
    """Every packing in its own process on the same batches: padded share, update tokens per CPU-second
    (and wall-clock), peak memory, and the loss beside the padded layout's (equal to float rounding)."""
    out: dict[str, Any] = {"workload": variable_length_groups.__doc__.split("\n\n")[0].replace("\n", " "),
                           "modes": {}}
    for packing in ("off", "length", "pack"):
        raw = run_isolated("packing", dataclasses.replace(cfg, packing=packing))
        measured = raw["steps"][cfg.warmup:]
        tokens = sum(s["loss_tokens"] for s in measured)
        out["modes"][packing] = {
            "padded_share": sum(s["padded_share"] for s in measured) / len(measured),
            "update_tokens_per_cpu_s": tokens / sum(s["update_cpu_s"] for s in measured),
            "update_tokens_per_s": max(s["loss_tokens"] / s["update_s"] for s in measured),
            "peak_rss_mb": raw["peak_rss_mb"], "peak_rss_growth_mb": raw["peak_rss_growth_mb"],
            "losses": [s["loss"] for s in raw["steps"]], "per_step": raw["steps"]}
    off = out["modes"]["off"]
    for packing, m in out["modes"].items():
        m["speedup_per_cpu_s_vs_off"] = m["update_tokens_per_cpu_s"] / off["update_tokens_per_cpu_s"]
        m["loss_max_abs_diff_vs_off"] = max(abs(a - b) for a, b in zip(m["losses"], off["losses"]))
    return out


# --- TRL's side --------------------------------------------------------------------------------------
def run_trl(cfg: BenchConfig) -> dict[str, Any]:
    """TRL's ``GRPOTrainer`` (DAPO loss) on the workload; rollout timed by wrapping
    ``_generate_and_score_completions``, optimizer steps by callbacks."""
    import torch
    import trl
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from dapo_env.interop import trl_reward_function
    from dapo_env.tasks import get_task

    torch.set_num_threads(cfg.threads)
    tok, model = build_tokenizer_and_model(cfg)
    base_rss = _rss_bytes()
    task = get_task(cfg.task)
    total = cfg.warmup + cfg.steps
    problems = task.load(split="train")
    rows = [{"prompt": task.format_prompt(problems[i]), "answer": problems[i].answer}
            for i in range(total * cfg.prompts_per_step)]
    n_seqs = cfg.group_size * cfg.prompts_per_step
    cuda = cfg.device.startswith("cuda")
    steps: list[dict[str, float]] = []
    current: dict[str, float] = {}

    class StepTimer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _sync(cfg.device)
            current.clear()
            current.update(start=time.perf_counter(), cpu_start=time.thread_time(), rollout_s=0.0,
                           rollout_cpu_s=0.0, loss_tokens=0.0, generated_tokens=0.0, sequences=0.0)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _sync(cfg.device)
            step_s = time.perf_counter() - current["start"]
            step_cpu_s = time.thread_time() - current["cpu_start"]
            steps.append({"step_s": step_s, "rollout_s": current["rollout_s"],
                          "update_s": step_s - current["rollout_s"], "learner_s": step_s - current["rollout_s"],
                          "step_cpu_s": step_cpu_s, "update_cpu_s": step_cpu_s - current["rollout_cpu_s"],
                          "rollout_cpu_s": current["rollout_cpu_s"], "learner_cpu_s": step_cpu_s - current["rollout_cpu_s"],
                          "loss_tokens": int(current["loss_tokens"]),
                          "generated_tokens": int(current["generated_tokens"]), "sequences": int(current["sequences"])})

    with tempfile.TemporaryDirectory(prefix="bench_learner_trl_") as tmp:
        args = GRPOConfig(
            output_dir=tmp, loss_type="dapo", epsilon=0.2, epsilon_high=0.28, beta=0.0,
            num_generations=cfg.group_size, per_device_train_batch_size=cfg.micro_batch,
            gradient_accumulation_steps=n_seqs // cfg.micro_batch, max_completion_length=cfg.length,
            temperature=1.0, top_p=1.0, learning_rate=cfg.lr, lr_scheduler_type="constant", warmup_steps=0,
            weight_decay=0.1, max_grad_norm=1.0, max_steps=total, logging_steps=10**6, save_strategy="no",
            report_to="none", use_cpu=not cuda, bf16=cfg.dtype == "bfloat16", disable_tqdm=True,
            seed=cfg.seed, dataloader_num_workers=0, log_completions=False,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=trl_reward_function(task), args=args,
                              train_dataset=Dataset.from_list(rows), processing_class=tok, callbacks=[StepTimer()])
        torch.set_num_threads(cfg.threads)  # in case accelerate changed it
        original: Callable[..., dict[str, Any]] = trainer._generate_and_score_completions

        def timed_rollout(*a: Any, **k: Any) -> dict[str, Any]:
            _sync(cfg.device)
            start, cpu_start = time.perf_counter(), time.thread_time()
            out = original(*a, **k)
            _sync(cfg.device)
            current["rollout_s"] += time.perf_counter() - start
            current["rollout_cpu_s"] += time.thread_time() - cpu_start
            tokens = float(out["completion_mask"].sum())
            current["loss_tokens"] += tokens
            current["generated_tokens"] += tokens
            current["sequences"] += float(out["completion_ids"].shape[0])
            return out

        trainer._generate_and_score_completions = timed_rollout  # type: ignore[method-assign]
        trainer.train()
    return {"side": "trl", "trl_version": trl.__version__, "torch_threads": torch.get_num_threads(),
            "steps": steps, **_memory(cfg.device, base_rss)}


# --- driver ----------------------------------------------------------------------------------------------
def summarize(side: dict[str, Any], warmup: int) -> dict[str, Any]:
    """Throughputs over the measured steps (after ``warmup``).

    Wall-clock throughputs are those of the BEST measured step (least disturbed by other processes on a
    shared machine; ``*_mean`` keys hold summed tokens over summed seconds); per-CPU-second throughputs
    (main-thread CPU time, meaningful with one torch thread on CPU) are summed over the measured steps.
    """
    measured = side["steps"][warmup:]
    if not measured:
        raise RuntimeError(f"{side['side']}: no measured steps (ran {len(side['steps'])}, warm-up {warmup})")

    def total(key: str) -> float:
        return float(sum(s[key] for s in measured))

    def best(tokens: str, seconds: str) -> float:
        return max(s[tokens] / s[seconds] for s in measured)

    loss_tokens, gen_tokens = total("loss_tokens"), total("generated_tokens")
    return {
        "update_tokens_per_s": best("loss_tokens", "update_s"),
        "learner_tokens_per_s": best("loss_tokens", "learner_s"),
        "rollout_tokens_per_s": best("generated_tokens", "rollout_s"),
        "best_step_s": min(s["step_s"] for s in measured),
        "update_tokens_per_s_mean": loss_tokens / total("update_s"),
        "update_tokens_per_cpu_s": loss_tokens / total("update_cpu_s"),
        "learner_tokens_per_cpu_s": loss_tokens / total("learner_cpu_s"),
        "rollout_tokens_per_cpu_s": gen_tokens / total("rollout_cpu_s"),
        "learner_tokens_per_s_mean": loss_tokens / total("learner_s"),
        "rollout_tokens_per_s_mean": gen_tokens / total("rollout_s"),
        "step_s": total("step_s") / len(measured),
        "update_s": total("update_s") / len(measured),
        "learner_s": total("learner_s") / len(measured),
        "rollout_s": total("rollout_s") / len(measured),
        "loss_tokens_per_step": loss_tokens / len(measured),
        "measured_steps": len(measured),
        **({"padded_share": float(sum(s["padded_share"] for s in measured) / len(measured))}
           if all("padded_share" in s for s in measured) else {}),
    }


def run_isolated(side: str, cfg: BenchConfig, batch_dir: str | None = None) -> dict[str, Any]:
    """Run one side in a fresh Python process and return its JSON result (``batch_dir``: where our side
    saves, and the floor reads, the update batches)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", side,
           "--config-json", json.dumps(dataclasses.asdict(cfg))] + (["--batch-dir", batch_dir] if batch_dir else [])
    env = child_env(OMP_NUM_THREADS=str(cfg.threads), MKL_NUM_THREADS=str(cfg.threads), HF_HUB_OFFLINE="1",
                    TOKENIZERS_PARALLELISM="false")
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{side} worker failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


#: Every side: ours, TRL's GRPOTrainer, the update floor (replays ours' batches) and the rollout floor.
SIDES = ("ours", "trl", "floor", "rollout_floor")
#: Worker processes that are not sides of the side-by-side comparison.
WORKERS = (*SIDES, "packing")


def compare(cfg: BenchConfig, *, sides: tuple[str, ...] = ("ours", "trl")) -> dict[str, Any]:
    """Run each side isolated and build the result record (with ours/TRL and ours/floor ratios where both ran)."""
    import torch
    import transformers

    shape = MODEL_SHAPES[cfg.model_shape]
    result: dict[str, Any] = {
        "benchmark": "bench_learner", "config": dataclasses.asdict(cfg), "model": shape,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "method": ("each side in a fresh subprocess; same model init, task, G, prompts per step, micro-batch, "
                   "length limit, lr, steps; warm-up steps excluded; update = fwd+bwd+clip+optimizer step "
                   "(tokens in the loss / s); learner = step minus rollout; rollout = generation + scoring; "
                   "wall-clock tokens/s of the best measured step (*_mean: over all measured steps); "
                   "tokens per main-thread CPU-second summed over measured steps; "
                   "peak RSS = ru_maxrss of the side's process"),
        "sides": {},
    }
    if cfg.device.startswith("cuda"):
        result["device_name"] = torch.cuda.get_device_name()
    if "floor" in sides and "ours" not in sides:
        raise ValueError("the floor side replays our side's update batches: run it with ours")
    floors: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_learner_batches_") as batch_dir:
        for side in sides:
            try:
                raw = run_isolated(side, cfg, batch_dir if side in ("ours", "floor") and "floor" in sides else None)
            except RuntimeError as exc:  # keep the other side's numbers (e.g. on a GPU run) and record why
                result.setdefault("errors", {})[side] = str(exc)[-4000:]
                print(f"{side} side failed; recorded under 'errors':\n{str(exc)[-1500:]}", file=sys.stderr)
                continue
            if side in ("floor", "rollout_floor"):
                floors[side] = raw
                continue
            result["sides"][side] = {**{k: v for k, v in raw.items() if k != "steps"},
                                     **summarize(raw, cfg.warmup), "per_step": raw["steps"]}
    summarize_floors(result, floors.get("floor"), floors.get("rollout_floor"), cfg.warmup)
    peak = peak_tflops(result.get("device_name", "")) if cfg.device.startswith("cuda") else None
    if peak is not None:
        add_mfu(result, peak)
    if "ours" in result["sides"] and "trl" in result["sides"]:
        ours, trl = result["sides"]["ours"], result["sides"]["trl"]
        result["trl_version"] = trl["trl_version"]
        result["ratio_update_tokens_per_s"] = ours["update_tokens_per_s"] / trl["update_tokens_per_s"]
        if not cfg.device.startswith("cuda"):  # CPU time measures the work only on the CPU (1 thread)
            for key in ("update_tokens_per_cpu_s", "learner_tokens_per_cpu_s", "rollout_tokens_per_cpu_s"):
                result[f"ratio_{key}"] = ours[key] / trl[key]
        result["ratio_learner_tokens_per_s"] = ours["learner_tokens_per_s"] / trl["learner_tokens_per_s"]
        result["ratio_rollout_tokens_per_s"] = ours["rollout_tokens_per_s"] / trl["rollout_tokens_per_s"]
        result["ratio_step_time"] = ours["best_step_s"] / trl["best_step_s"]
        result["ratio_peak_rss"] = ours["peak_rss_mb"] / trl["peak_rss_mb"]
        result["ratio_peak_rss_growth"] = ours["peak_rss_growth_mb"] / max(trl["peak_rss_growth_mb"], 1e-9)
        if "peak_cuda_mb" in ours:
            result["ratio_peak_cuda"] = ours["peak_cuda_mb"] / trl["peak_cuda_mb"]
        result["target_update_1_5x_met"] = result["ratio_update_tokens_per_s"] >= 1.5
        mem_key = "ratio_peak_cuda" if "ratio_peak_cuda" in result else "ratio_peak_rss"
        result["target_memory_met"] = result[mem_key] <= 1.0
    return result


def print_table(result: dict[str, Any]) -> None:
    cols = [("update tok/s", "update_tokens_per_s", "{:>13.0f}"), ("upd tok/cpu-s", "update_tokens_per_cpu_s", "{:>13.0f}"),
            ("learner tok/s", "learner_tokens_per_s", "{:>13.0f}"),
            ("rollout tok/s", "rollout_tokens_per_s", "{:>13.0f}"), ("step s", "best_step_s", "{:>8.2f}"),
            ("update s", "update_s", "{:>8.2f}"), ("rollout s", "rollout_s", "{:>9.2f}"),
            ("loss tok", "loss_tokens_per_step", "{:>8.0f}"), ("peak RSS MB", "peak_rss_mb", "{:>11.0f}"),
            ("RSS growth", "peak_rss_growth_mb", "{:>10.0f}")]
    if any("peak_cuda_mb" in s for s in result["sides"].values()):
        cols.append(("CUDA MB", "peak_cuda_mb", "{:>9.0f}"))
    cfg = result["config"]
    print(f"bench_learner: {cfg['model_shape']} {result['model']} {cfg['dtype']} on {cfg['device']}, "
          f"G={cfg['group_size']} prompts/step={cfg['prompts_per_step']} micro={cfg['micro_batch']} "
          f"length<={cfg['length']} threads={cfg['threads']} steps={cfg['steps']} (+{cfg['warmup']} warm-up)")
    header = f"{'side':<6}" + "".join(f" {name:>{len(fmt.format(0))}}" for name, _, fmt in cols)
    print(header)
    for side, s in result["sides"].items():
        if side == "rollout_floor":  # its own line below
            continue
        print(f"{side:<6}" + "".join(" " + fmt.format(s.get(key, float('nan'))) for _, key, fmt in cols))
    if "ratio_update_tokens_per_s" in result:
        per_cpu = result.get("ratio_update_tokens_per_cpu_s")
        print(f"ours/TRL (TRL {result['trl_version']}): update tok/s x{result['ratio_update_tokens_per_s']:.2f} "
              + (f"(per CPU-second x{per_cpu:.2f}), " if per_cpu is not None else ", ")
              + f"learner tok/s x{result['ratio_learner_tokens_per_s']:.2f}, "
              f"rollout tok/s x{result['ratio_rollout_tokens_per_s']:.2f}, step time x{result['ratio_step_time']:.2f}, "
              f"peak RSS x{result['ratio_peak_rss']:.2f} (growth x{result['ratio_peak_rss_growth']:.2f})"
              + (f", peak CUDA x{result['ratio_peak_cuda']:.2f}" if "ratio_peak_cuda" in result else ""))
    ours = result["sides"].get("ours", {})
    if "weight_sync" in ours:
        print(f"server mode: weight sync {ours['weight_sync']}, push (verified) median {ours['push_ms_median']:.0f} ms, "
              f"max {ours['push_ms_max']:.0f} ms over {len(ours['push_ms_each'])} pushes")
    if "mfu_peak_tflops" in result:
        print(f"MFU (6N FLOPs per update token, 2N per generated token; peak {result['mfu_peak_tflops']:.0f} TFLOP/s): "
              + ", ".join(f"{name} update {s['update_mfu']:.1%}" + (f" rollout {s['rollout_mfu']:.1%}" if "rollout_mfu" in s else "")
                          for name, s in result["sides"].items() if "update_mfu" in s))
    if "ratio_update_tokens_per_s_vs_floor" in result:
        per_cpu = result.get("ratio_update_tokens_per_cpu_s_vs_floor")
        print(f"ours/floor (update): tok/s x{result['ratio_update_tokens_per_s_vs_floor']:.2f}"
              + (f" (per CPU-second x{per_cpu:.2f}, target >= 0.85)" if per_cpu is not None else "")
              + f", peak RSS x{result['ratio_peak_rss_vs_floor']:.2f} (growth x{result['ratio_peak_rss_growth_vs_floor']:.2f})"
              + (f", peak CUDA x{result['ratio_peak_cuda_vs_floor']:.2f}" if "ratio_peak_cuda_vs_floor" in result else ""))
    if "ratio_rollout_tokens_per_s_vs_floor" in result:
        r = result["sides"]["rollout_floor"]
        per_cpu = result.get("ratio_rollout_tokens_per_cpu_s_vs_floor")
        print(f"rollout: HFEngine.generate {r['ours_tokens_per_s']:.0f} tok/s vs floor {r['floor_tokens_per_s']:.0f}: "
              f"x{result['ratio_rollout_tokens_per_s_vs_floor']:.2f}"
              + (f" (per CPU-second x{per_cpu:.2f}, target >= 0.8)" if per_cpu is not None else ""))


def dry_run(cfg: BenchConfig, args: argparse.Namespace) -> dict[str, Any]:
    """Check what a run needs without running it: the config (already validated), the sides, the optional
    packages each side imports, and that the output folder can be written. Prints the plan; exits non-zero
    on a problem that would fail the real run."""
    import importlib.util

    sides = tuple(s for s in args.sides.split(",") if s)
    problems = [f"unknown side {s!r}" for s in sides if s not in SIDES]
    if "floor" in sides and "ours" not in sides:
        problems.append("the floor side needs ours")
    missing = {side: pkg for side, pkg in (("trl", "trl"), ("ours", "torch" if cfg.engine == "hf" else "vllm"))
               if side in sides and importlib.util.find_spec(pkg) is None}
    if cfg.engine == "vllm-server":
        from dapo_env.learners.engines.weight_sync import check_weight_sync

        try:
            check_weight_sync(cfg.weight_sync, learner_device=cfg.device)
        except ValueError as exc:
            problems.append(str(exc))
    out = out_path(args.out, "bench_learner_gpu" if cfg.device.startswith("cuda") else "bench_learner")
    folder = out.parent if out.parent.exists() else next(p for p in out.parents if p.exists())
    if not os.access(folder, os.W_OK):
        problems.append(f"cannot write {out}")
    shape = MODEL_SHAPES[cfg.model_shape]
    plan = {"config": dataclasses.asdict(cfg), "sides": sides, "out": str(out), "missing_packages": missing,
            "flop_parameters": flop_parameters(shape), "problems": problems,
            "tokens_per_step_max": cfg.tokens_per_step_max}
    print(f"dry run: {cfg.model_shape} ({plan['flop_parameters'] / 1e6:.0f}M FLOP parameters) {cfg.dtype} on "
          f"{cfg.device}, engine {cfg.engine}"
          + (f" (weight sync {cfg.weight_sync})" if cfg.engine == "vllm-server" else "")
          + f", packing {cfg.packing}; sides {','.join(sides)}; "
          f"<= {cfg.tokens_per_step_max} response tokens per step; writes {out}")
    for side, pkg in missing.items():
        print(f"dry run: side {side} needs {pkg}, not importable here (the run records it under 'errors')")
    if problems:
        raise SystemExit("dry run: " + "; ".join(problems))
    print("dry run: ok")
    return plan


def print_packing(sweep: dict[str, Any], cfg: BenchConfig) -> None:
    print(f"packing sweep: {cfg.model_shape}, G={cfg.group_size} prompts/step={cfg.prompts_per_step} "
          f"micro={cfg.micro_batch} responses 8..{cfg.length} tokens, {cfg.steps} steps (+{cfg.warmup} warm-up)")
    print(f"{'packing':<8} {'padded':>7} {'upd tok/cpu-s':>13} {'x off':>6} {'upd tok/s':>10} {'RSS MB':>7} {'|loss - off|':>12}")
    for name, m in sweep["modes"].items():
        print(f"{name:<8} {m['padded_share']:>7.3f} {m['update_tokens_per_cpu_s']:>13.0f} "
              f"{m['speedup_per_cpu_s_vs_off']:>6.2f} {m['update_tokens_per_s']:>10.0f} {m['peak_rss_mb']:>7.0f} "
              f"{m['loss_max_abs_diff_vs_off']:>12.2e}")


def trl_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("trl") is not None


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    parser.add_argument("--batch-dir", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model-shape", default=None, choices=sorted(MODEL_SHAPES),
                        help="default: tiny on CPU, qwen2-0.5b on CUDA")
    parser.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--task", default="Arithmetic-v0")
    parser.add_argument("--group-size", type=int, default=None, help="G (default 8 CPU, 16 CUDA)")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step (default 4 CPU, 8 CUDA)")
    parser.add_argument("--micro-batch", type=int, default=None, help="sequences per fwd/bwd (default 16 CPU, 32 CUDA)")
    parser.add_argument("--length", type=int, default=None, help="max response tokens (default 256 CPU, 512 CUDA)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--our-sampler", default="multinomial", choices=["multinomial", "inverse-cdf"],
                        help="our side's token sampler (inverse-cdf demonstrates a proposed HFEngine change)")
    parser.add_argument("--sides", default=",".join(SIDES),
                        help="comma-separated subset of ours,trl,floor,rollout_floor (floor needs ours)")
    parser.add_argument("--packing", default="off", choices=["off", "length", "pack"],
                        help="our side's micro-batch layout (TrainConfig.packing)")
    parser.add_argument("--engine", default="hf", choices=["hf", "vllm", "vllm-server"],
                        help="our side's rollout engine (vllm: in-process, CUDA; vllm-server: a vllm serve it starts)")
    parser.add_argument("--weight-sync", default="auto", choices=["auto", "file", "nccl"],
                        help="with --engine vllm-server: how pushes reach the server (learners/engines/weight_sync.py)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the arguments, the sides' requirements and the output path; run nothing")
    parser.add_argument("--packing-sweep", action="store_true",
                        help="instead of the side-by-side run: update_policy on a variable-length workload (Sort-v0 "
                             "prompts, responses of 8..--length tokens) with packing off, length and pack")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/out/bench_learner[_gpu].json, "
                                                    "git-ignored; benchmarks/results/... updates the tracked result)")
    args = parser.parse_args(argv)
    if args.worker:
        cfg = BenchConfig(**json.loads(args.config_json))
        workers: dict[str, Callable[[], dict[str, Any]]] = {
            "ours": lambda: run_ours(cfg, args.batch_dir), "trl": lambda: run_trl(cfg),
            "floor": lambda: run_floor(cfg, args.batch_dir), "rollout_floor": lambda: run_rollout_floor(cfg),
            "packing": lambda: run_packing(cfg)}
        print(json.dumps(workers[args.worker]()))
        return None

    cuda = args.device.startswith("cuda")
    cfg = BenchConfig(
        device=args.device, model_shape=args.model_shape or ("qwen2-0.5b" if cuda else "tiny"),
        dtype=args.dtype or ("bfloat16" if cuda else "float32"), task=args.task,
        group_size=args.group_size or (16 if cuda else 8), prompts_per_step=args.prompts or (8 if cuda else 4),
        micro_batch=args.micro_batch or (32 if cuda else 16), length=args.length or (512 if cuda else 256),
        warmup=args.warmup, steps=args.steps, threads=args.threads, our_sampler=args.our_sampler,
        packing=args.packing, engine=args.engine, weight_sync=args.weight_sync)
    if args.dry_run:
        return dry_run(cfg, args)
    if args.packing_sweep:
        sweep = packing_sweep(cfg)
        print_packing(sweep, cfg)
        result = {"benchmark": "bench_learner", "mode": "packing_sweep", "config": dataclasses.asdict(cfg),
                  "model": MODEL_SHAPES[cfg.model_shape], "cpu_count": os.cpu_count(),
                  "loadavg": os.getloadavg(), "packing_sweep": sweep}
        write_json(out_path(args.out, "bench_learner_packing"), result)
        return result
    sides = tuple(s for s in args.sides.split(",") if s)
    unknown = set(sides) - set(SIDES)
    if unknown:
        raise SystemExit(f"--sides: unknown {sorted(unknown)}; choose from {','.join(SIDES)}")
    if "floor" in sides and "ours" not in sides:
        raise SystemExit("--sides: the floor replays our side's update batches; add ours")
    if "trl" in sides and not trl_available():
        print("trl is not installed: running our side only (pip install trl to compare)")
        sides = tuple(s for s in sides if s != "trl")
    result = compare(cfg, sides=sides)
    print_table(result)
    if not result["sides"]:
        raise SystemExit(f"every side failed: {result.get('errors')}")
    write_json(out_path(args.out, "bench_learner_gpu" if cuda else "bench_learner"), result)
    return result


if __name__ == "__main__":
    main()
