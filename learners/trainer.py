"""The DAPO training loop (Yu et al. 2025, Algorithm 1), top to bottom, calling tested pieces.

One step: draw prompts from the task's group env, roll out G responses per prompt with the engine,
verify and shape rewards in the env layer (``GroupVectorEnv`` + ``DynamicSampler``), recompute the
old log-probs with the learner, then mini-batch updates with gradient accumulation using the
mini-batch's global denominators, pushing the weights to the engine after every optimizer step.

Example:
    >>> from dapo_env.learners.config import preset
    >>> result = train(preset("tiny", max_steps=1, warmstart_steps=0, out_dir=tmp))  # doctest: +SKIP
    >>> result.metrics[-1]["step"]  # doctest: +SKIP
    1
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from . import checkpoint as ckpt
from .config import TrainConfig
from .engine import HFEngine, RolloutEngine, SamplingParams, weights_fingerprint
from .losses import group_advantages, loss_denominators, policy_loss
from .metrics import MetricsLog, plot_metrics, read_metrics
from .rollout import (
    SequenceBatch,
    build_sequence_batch,
    derive_seed,
    evaluate_accuracy,
    make_sampler,
    resolve_task,
    response_logprobs,
)
from dapo_env.types import Completion, Group


@dataclass
class TrainResult:
    """What :func:`train` returns: the run folder, every metrics record, and the trained model."""

    run_dir: Path
    metrics: list[dict[str, Any]]
    model: Any = None
    tokenizer: Any = None
    eval_history: list[tuple[int, float]] = field(default_factory=list)

    @property
    def final_eval_accuracy(self) -> float | None:
        return self.eval_history[-1][1] if self.eval_history else None

    @property
    def initial_eval_accuracy(self) -> float | None:
        return self.eval_history[0][1] if self.eval_history else None


def build_model(cfg: TrainConfig) -> tuple[Any, Any]:
    """Load ``cfg.model`` (a local HF folder) or build the tiny random-init model and tokenizer."""
    if cfg.model is not None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not Path(cfg.model).is_dir():
            raise FileNotFoundError(f"--model {cfg.model}: not a local folder (models are never downloaded); "
                                    "pass a folder written by save_pretrained")
        tok = AutoTokenizer.from_pretrained(cfg.model)
        model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch.float32)
        return model, tok
    from .tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer(model_max_length=256)
    model = build_tiny_model(tok, hidden_size=cfg.tiny_hidden_size, layers=cfg.tiny_layers,
                             heads=cfg.tiny_heads, max_positions=256, seed=cfg.seed)
    return model, tok


def make_engine(cfg: TrainConfig, model: Any, tokenizer: Any) -> RolloutEngine:
    """The rollout engine ``cfg.engine`` names: ``hf`` shares the learner's model object (weight pushes
    are free); ``vllm`` builds a vLLM engine (GPU, optional extra) that receives every push."""
    if cfg.engine == "vllm":
        from .vllm_engine import VLLMEngine

        return VLLMEngine(model, tokenizer, seed=cfg.seed)
    return HFEngine(model, tokenizer, device=cfg.device, batch_size=256, autocast_dtype=autocast_dtype(cfg))


def autocast_dtype(cfg: TrainConfig) -> torch.dtype | None:
    """The dtype ``cfg.precision`` asks matmuls to run in (``None``: the model's own, fp32)."""
    return torch.bfloat16 if cfg.precision == "bf16" else None


def autocast(cfg: TrainConfig, device: torch.device) -> torch.autocast:
    """The autocast context of the learner's forward passes (a no-op for ``precision="fp32"``)."""
    dtype = autocast_dtype(cfg)
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def _lr_lambda(cfg: TrainConfig, total_steps: int) -> Callable[[int], float]:
    def fn(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.lr_schedule == "constant":
            return 1.0
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
        return 0.5 * (1 + math.cos(math.pi * progress)) if cfg.lr_schedule == "cosine" else 1.0 - progress

    return fn


def param_drift(model: torch.nn.Module, init: dict[str, torch.Tensor]) -> float:
    """Relative L2 distance ``||theta - theta_0|| / ||theta_0||`` over the named parameters in ``init``."""
    num, den = 0.0, 0.0
    for name, p in model.named_parameters():
        if name in init:
            ref = init[name]
            num += float((p.detach().float().cpu() - ref).pow(2).sum())
            den += float(ref.pow(2).sum())
    return math.sqrt(num / max(den, 1e-30))


class Trainer:
    """Owns the model, optimizer, engine, env sampler and run folder; :meth:`fit` runs the loop.

    Args:
        config: the run's settings.
        model, tokenizer: a model to train (default: :func:`build_model`).
        engine: a :class:`RolloutEngine`; default ``HFEngine`` sharing the learner's model.
        resume: continue from the newest checkpoint in the run folder.
        warm_start: a callable ``(model, tokenizer, task) -> dict`` run before training on a fresh run.

    Example:
        >>> trainer = Trainer(preset("tiny", max_steps=2))  # doctest: +SKIP
        >>> result = trainer.fit()  # doctest: +SKIP
    """

    def __init__(self, config: TrainConfig, *, model: Any = None, tokenizer: Any = None,
                 engine: RolloutEngine | None = None, resume: bool = False,
                 warm_start: Callable[..., dict[str, Any]] | None = None) -> None:
        self.cfg = cfg = config
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.run_dir = cfg.run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.device = torch.device(cfg.device)
        self.task = resolve_task(cfg)
        latest = ckpt.latest_checkpoint(self.run_dir) if resume else None
        self._model_from_checkpoint = latest is not None and model is None
        if resume and latest is None and not (self.run_dir / "config.json").exists():
            raise FileNotFoundError(f"--resume {self.run_dir}: no config.json or checkpoint there")
        if latest is not None and model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            model = AutoModelForCausalLM.from_pretrained(str(latest / "model"), dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(str(latest / "model"))
        elif model is None:
            model, tokenizer = build_model(cfg)
        if tokenizer is None:
            raise ValueError("pass the tokenizer together with the model")
        self.model, self.tokenizer = model.to(self.device), tokenizer
        self.engine = engine if engine is not None else make_engine(cfg, self.model, tokenizer)
        self.step, self.optimizer_steps = 0, 0
        self.metrics_log = MetricsLog(self.run_dir / "metrics.jsonl")
        self.eval_history: list[tuple[int, float]] = []
        self._round = 0
        self._t_start, self._cpu_start = time.perf_counter(), time.process_time()
        self._fresh_ids: set[int] = set()
        self._fresh: list[Completion] = []  # this step's generated completions (all rounds)

        if latest is None:
            self.metrics_log.path.unlink(missing_ok=True)
            if warm_start is not None and cfg.warmstart_steps > 0:
                stats = warm_start(self.model, self.tokenizer, self.task)
                (self.run_dir / "warmstart.json").write_text(json.dumps(stats, indent=2))
            self._push_weights()
        self.init_params = self._init_reference(latest is None)
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, betas=cfg.adam_betas, eps=cfg.adam_eps)
        updates_per_step = cfg.epochs_per_batch * (cfg.batch_size // cfg.mini_batch_size)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, _lr_lambda(cfg, cfg.max_steps * updates_per_step))
        self.sampler, self.env = make_sampler(cfg, self.task, self._generate, tokenizer=self.tokenizer)
        (self.run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2, default=str))
        if latest is not None:
            self._load(latest)

    # --- weights and checkpoints --------------------------------------------------------------------
    def _init_reference(self, fresh: bool) -> dict[str, torch.Tensor]:
        """Parameters at the start of RL (after any warm start), saved once so resume keeps the drift."""
        path = self.run_dir / "init_weights.pt"
        if fresh or not path.exists():
            ref = {n: p.detach().float().cpu().clone() for n, p in self.model.named_parameters()}
            torch.save(ref, path)
            return ref
        return torch.load(path, map_location="cpu", weights_only=True)

    def _push_weights(self) -> None:
        """Send the learner's weights to the engine and check the engine now holds exactly them."""
        version = self.engine.weights_version
        state = self.model.state_dict()
        self.engine.load_weights(state)
        if self.engine.weights_version != version + 1 or self.engine.fingerprint() != weights_fingerprint(state):
            raise RuntimeError("weight push to the rollout engine did not take effect: its fingerprint differs "
                               "from the learner's; check the engine's load_weights")

    def _load(self, checkpoint: Path) -> None:
        state = ckpt.load_trainer_state(checkpoint)
        if not self._model_from_checkpoint:
            ckpt.load_model_weights(self.model, checkpoint)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step, self.optimizer_steps = int(state["step"]), int(state["optimizer_steps"])
        self.eval_history = [tuple(x) for x in state.get("eval_history", [])]
        ckpt.restore_rng_state(state["rng"])
        self.metrics_log.truncate_after(self.step)
        self._push_weights()

    def save(self) -> Path:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "sampler": self.sampler.state_dict(), "optimizer_steps": self.optimizer_steps,
                 "eval_history": self.eval_history, "rng": ckpt.capture_rng_state(),
                 "config": self.cfg.to_dict()}
        return ckpt.save_checkpoint(self.run_dir, self.step, model=self.model, tokenizer=self.tokenizer,
                                    trainer_state=state, keep=self.cfg.keep_checkpoints)

    # --- rollout -------------------------------------------------------------------------------------
    def _generate(self, prompts: list[str]) -> list[Completion]:
        """The sampler's ``generate``: B*G group-major prompts -> G samples of each distinct prompt.

        Each call (one generation round) samples with a seed derived from (seed, step, round), so a
        resumed run regenerates exactly what an uninterrupted run would.
        """
        G = self.cfg.group_size
        if len(prompts) % G:
            raise RuntimeError(f"sampler passed {len(prompts)} prompts, not a multiple of group_size={G}")
        unique = prompts[::G]  # (B,) one per group; the env repeats each prompt G times group-major
        for b, p in enumerate(unique):
            if any(q != p for q in prompts[b * G:(b + 1) * G]):
                raise RuntimeError("sampler prompts are not group-major (G consecutive copies per prompt)")
        sampling = SamplingParams(temperature=self.cfg.temperature, top_p=self.cfg.top_p,
                                  max_response_tokens=self.cfg.max_response_tokens,
                                  seed=derive_seed(self.cfg.seed, self.step, self._round))
        self._round += 1
        out = [c for group in self.engine.generate(unique, n=G, sampling=sampling) for c in group]
        self._fresh_ids.update(id(c) for c in out)
        self._fresh.extend(out)
        return out

    # --- update ----------------------------------------------------------------------------------------
    def _update(self, groups: Sequence[Group], batch: SequenceBatch, advantages: torch.Tensor,
                old_logp: torch.Tensor, *, fill_old_logp: bool = False) -> dict[str, float]:
        """Mini-batch updates (one optimizer step per ``mini_batch_size`` groups) with accumulation.

        ``fill_old_logp``: the batch gets exactly one optimizer step, so each micro-batch's own
        (pre-update) log-probs are the old policy's; they are written into ``old_logp`` as it goes.
        """
        cfg, G = self.cfg, self.cfg.group_size
        mb_seqs, micro = cfg.mini_batch_size * G, cfg.micro_batch_size
        n = batch.input_ids.shape[0]
        agg: dict[str, list[float]] = {}
        self.model.train()
        for epoch in range(cfg.epochs_per_batch):
            gen = torch.Generator().manual_seed(derive_seed(cfg.seed, self.step, 1000 + epoch))
            order = torch.randperm(len(groups), generator=gen)  # shuffle groups, keep members together
            seq_order = (order[:, None] * G + torch.arange(G)[None, :]).reshape(-1)  # (num_groups*G,)
            for start in range(0, n, mb_seqs):
                idx = seq_order[start:start + mb_seqs]
                mask = batch.loss_mask[idx]  # (mb, T)
                num_tokens, num_seqs = self._denominators(mask)  # global over the mini-batch (and ranks)
                if int(num_tokens) == 0:
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                for ms in range(0, idx.numel(), micro):
                    sub = idx[ms:ms + micro]
                    with autocast(cfg, self.device):
                        logp, entropy = response_logprobs(self.model, batch, sub, cfg.temperature, with_entropy=True)
                    if fill_old_logp:
                        old_logp[sub] = logp.detach()
                    loss, m = policy_loss(
                        logp, old_logp[sub], advantages[sub], batch.loss_mask[sub],
                        clip_low=cfg.clip_low, clip_high=cfg.clip_high, clip_c=cfg.clip_c, agg=cfg.loss_agg,
                        num_tokens=num_tokens, num_seqs=num_seqs, max_response_tokens=cfg.max_response_tokens)
                    loss.backward()
                    sub_mask = batch.loss_mask[sub]
                    weight = float(sub_mask.sum()) / float(num_tokens)
                    ent = float((entropy.detach() * sub_mask).sum() / sub_mask.sum().clamp(min=1))
                    for k, v in {**{k: float(v) for k, v in m.items()}, "entropy": ent,
                                 "loss": float(loss.detach())}.items():
                        agg.setdefault(k, []).append((v if k == "loss" else v * weight))
                self._sync_gradients()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
                agg.setdefault("grad_norm", []).append(float(grad_norm))
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer_steps += 1
                self._push_weights()
                agg.setdefault("_updates", []).append(1.0)
        updates = max(1.0, sum(agg.pop("_updates", [0.0])))
        out = {k: sum(v) / (updates if k != "loss" else 1.0) for k, v in agg.items() if k != "grad_norm"}
        out["grad_norm"] = float(np.mean(agg["grad_norm"])) if agg.get("grad_norm") else 0.0
        return out

    # --- one step ----------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        self._round, self._fresh_ids, self._fresh = 0, set(), []
        rollout = self.sampler.sample()
        t_roll = time.perf_counter() - t0
        groups = list(rollout.groups)
        record: dict[str, Any] = {"step": self.step + 1}
        stats = dict(rollout.stats)
        completions = [c for g in groups for c in g.completions]
        rewards = torch.tensor([r for g in groups for r in g.rewards], dtype=torch.float32)  # (N,) N = #groups*G
        correct = [c for g in groups for c in g.correct]
        lengths = [c.length or 0 for c in self._fresh]  # over every sample generated this step
        record.update({
            "reward/mean": float(rewards.mean()) if len(rewards) else 0.0,
            "rollout/accuracy": float(np.mean(correct)) if correct else 0.0,
            "rollout/accuracy_before_filter": float(stats.get("accuracy_before_filter", np.mean(correct) if correct else 0.0)),
            "rollout/zero_adv_share": float(stats.get("zero_advantage_share", 0.0)),
            "rollout/rounds": int(stats.get("rounds", self._round)),
            "rollout/samples_generated": int(stats.get("samples_generated", len(completions))),
            "rollout/num_groups": len(groups),
            "rollout/partial": float(stats.get("partial", 0.0)),
            "response/length_mean": float(np.mean(lengths)) if lengths else 0.0,
            "response/length_max": int(max(lengths)) if lengths else 0,
            "response/truncation_rate": float(np.mean([c.truncated for c in self._fresh])) if self._fresh else 0.0,
            "perf/rollout_tokens_per_s": float(sum(lengths)) / max(t_roll, 1e-9),
            "time/rollout_s": t_roll,
        })
        t1 = time.perf_counter()
        update_metrics: dict[str, float] = {}
        if groups:
            device = next(self.model.parameters()).device
            batch = build_sequence_batch(groups, pad_id=self._pad_id()).to(device)
            advantages = group_advantages(rewards.to(device), cfg.group_size,
                                          scale_by_std=cfg.scale_adv_by_std)  # (N,)
            old_logp = torch.zeros_like(batch.loss_mask, dtype=torch.float32)  # (N, T)
            # One optimizer step on the whole batch: the policy that sampled is exactly the one the
            # update's own forward sees, so old_logp = logp.detach() there and the separate no-grad pass
            # is skipped. Otherwise recompute it before any update.
            on_policy = cfg.epochs_per_batch == 1 and len(groups) <= cfg.mini_batch_size
            if not on_policy:
                self.model.eval()
                with torch.no_grad(), autocast(cfg, self.device):
                    for ms in range(0, len(completions), cfg.micro_batch_size):
                        sub = torch.arange(ms, min(ms + cfg.micro_batch_size, len(completions)))
                        old_logp[sub] = response_logprobs(self.model, batch, sub, cfg.temperature)[0]
            update_metrics = self._update(groups, batch, advantages, old_logp, fill_old_logp=on_policy)
            record.update(self._mismatch(completions, batch, old_logp))
            t_upd = time.perf_counter() - t1
            tokens = float(batch.response_mask.sum()) * cfg.epochs_per_batch
            record["perf/update_tokens_per_s"] = tokens / max(t_upd, 1e-9)
            record["time/update_s"] = t_upd
        record.update({
            "policy/entropy": update_metrics.get("entropy"),
            "policy/clip_frac_high": update_metrics.get("clip_frac_high"),
            "policy/clip_frac_low": update_metrics.get("clip_frac_low"),
            "policy/approx_kl": update_metrics.get("approx_kl"),
            "loss/policy": update_metrics.get("loss"),
            "optim/grad_norm": update_metrics.get("grad_norm"),
            "optim/lr": float(self.scheduler.get_last_lr()[0]),
            "optim/steps": self.optimizer_steps,
            "policy/drift_from_init": param_drift(self.model, self.init_params),
        })
        self.step += 1
        record["time/step_s"] = time.perf_counter() - t0
        record["time/elapsed_s"] = time.perf_counter() - self._t_start
        record["time/cpu_s"] = time.process_time() - self._cpu_start  # this process's CPU time (all threads)
        return record

    # --- data-parallel hooks (overridden by learners.distributed.DistributedTrainer) -------------------
    def _denominators(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Token and sequence counts of a mini-batch's loss mask (one process: the local counts)."""
        return loss_denominators(mask)

    def _sync_gradients(self) -> None:
        """Called once per optimizer step after gradient accumulation; one process: nothing to do."""

    def _pad_id(self) -> int:
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return int(pad) if pad is not None else int(self.tokenizer.eos_token_id)

    def _mismatch(self, completions: Sequence[Completion], batch: SequenceBatch,
                  learner_logp: torch.Tensor) -> dict[str, float]:
        """|logp_engine - logp_learner| on this step's freshly sampled tokens (catches a stale engine)."""
        diffs = []
        for i, c in enumerate(completions):
            if id(c) not in self._fresh_ids or c.logprobs is None:
                continue
            engine_lp = torch.tensor(c.logprobs, dtype=torch.float32, device=learner_logp.device)  # (L,)
            diffs.append((engine_lp - learner_logp[i, :len(c.logprobs)]).abs())
        if not diffs:
            return {"policy/logprob_mismatch_mean": None, "policy/logprob_mismatch_max": None}
        d = torch.cat(diffs)
        return {"policy/logprob_mismatch_mean": float(d.mean()), "policy/logprob_mismatch_max": float(d.max())}

    def evaluate(self) -> float:
        """Held-out accuracy on ``eval_split`` (greedy unless ``eval_temperature > 0``, fixed seed)."""
        acc = evaluate_accuracy(self.engine, self.task, self.cfg, tokenizer=self.tokenizer)
        self.eval_history.append((self.step, acc))
        return acc

    # --- the loop --------------------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        """Run until ``max_steps``, evaluating, logging, plotting and checkpointing on the way."""
        cfg = self.cfg
        if self.step == 0:
            t = time.perf_counter()
            record = {"step": 0, "eval/accuracy": self.evaluate(), "time/eval_s": time.perf_counter() - t}
            self.metrics_log.write(record)
        bar = tqdm(total=cfg.max_steps, initial=self.step, desc=cfg.run_name, disable=not cfg.progress,
                   dynamic_ncols=True)
        try:
            while self.step < cfg.max_steps:
                record = self.train_step()
                if (cfg.eval_every and self.step % cfg.eval_every == 0) or self.step == cfg.max_steps:
                    t = time.perf_counter()
                    record["eval/accuracy"] = self.evaluate()
                    record["time/eval_s"] = time.perf_counter() - t
                self.metrics_log.write(record)
                bar.update(1)
                bar.set_postfix(acc=f"{record['rollout/accuracy_before_filter']:.2f}",
                                eval=f"{self.eval_history[-1][1]:.2f}" if self.eval_history else "-")
                if cfg.plot_every and (self.step % cfg.plot_every == 0 or self.step == cfg.max_steps):
                    self.plot()
                if cfg.checkpoint_every and (self.step % cfg.checkpoint_every == 0 or self.step == cfg.max_steps):
                    self.save()
        finally:
            bar.close()
            close = getattr(self.env, "close", None)
            if close is not None:
                close()
        return TrainResult(self.run_dir, read_metrics(self.metrics_log.path), self.model, self.tokenizer,
                           list(self.eval_history))

    def plot(self) -> Path:
        return plot_metrics(read_metrics(self.metrics_log.path), self.run_dir / "curves.png",
                            title=f"{self.cfg.run_name} ({self.cfg.preset_name})")


def train(config: TrainConfig, *, resume: bool = False, **kwargs: Any) -> TrainResult:
    """Run one training job programmatically and return its metrics (what benchmarks/ablation calls).

    Example:
        >>> from dapo_env.learners.config import preset
        >>> res = train(preset("tiny", max_steps=2, out_dir="/tmp/runs"))  # doctest: +SKIP
        >>> res.final_eval_accuracy  # doctest: +SKIP
    """
    warm = kwargs.pop("warm_start", None)
    if warm is None and config.warmstart_steps > 0 and kwargs.get("model") is None and config.model is None:
        from .warmstart import warm_start_for

        warm = warm_start_for(config)
    return Trainer(config, resume=resume, warm_start=warm, **kwargs).fit()


__all__ = ["TrainResult", "Trainer", "autocast", "autocast_dtype", "build_model", "make_engine", "param_drift",
           "train"]
