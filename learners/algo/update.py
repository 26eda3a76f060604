"""One policy update on a rollout batch: mini-batches, gradient accumulation with global denominators,
clipping, optimizer and scheduler steps, and a callback after every optimizer step (the weight push).

The batch's groups are shuffled (seeded, members kept together) into mini-batches of
``mini_batch_size`` groups; each mini-batch is one optimizer step, accumulated over micro-batches of
``micro_batch_size`` sequences. Every micro-batch's loss divides by the token and sequence counts of
the WHOLE mini-batch, summed over data-parallel ranks by the :class:`~dapo_env.learners.collective.Collective`
(verl #5625), so the result does not depend on the micro-batch or rank split.

Metrics, one rule for all: within an optimizer step a metric is the sum of the micro-batches' shares
(the loss is already a share; the others are weighted by the micro-batch's share of the global token
count, so across ranks the shares sum too); the value reported for the update is the MEAN over its
optimizer steps (``loss``, ``entropy``, ``clip_frac_high``, ``clip_frac_low``, ``clip_frac``,
``dual_clip_frac``, ``approx_kl``, ``ratio_mean``, ``grad_norm``). One exception, said here:
``padded_share`` is padding tokens / all tokens of the update's forward passes (a ratio of the update's
sums), the padding that ``cfg.packing`` (:data:`~dapo_env.learners.algo.batch.PACKINGS`) leaves.

Micro-batches: ``cfg.packing="off"`` takes the mini-batch's rows in order and pads every one to the
batch's longest prompt and response; ``"length"`` sorts them by length so each micro-batch pads only to
its own longest; ``"pack"`` puts several sequences end to end in one row (``micro_batch_size`` such rows per
forward, each as long as the mini-batch's longest sequence). The loss and gradients
are the same (global denominators); ``cfg.gradient_checkpointing`` recomputes the decoder's activations
in the backward.

Example:
    >>> import torch
    >>> from dapo_env.learners.algo.batch import build_sequence_batch
    >>> from dapo_env.learners.config import preset
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> from dapo_env.types import Completion, Group
    >>> tok = build_tokenizer(); model = build_tiny_model(tok, hidden_size=64, layers=1, heads=2)
    >>> c = [Completion("x", token_ids=(5 + i, 2), prompt_token_ids=(1, 7)) for i in range(2)]
    >>> batch = build_sequence_batch([Group("0", "p", tuple(c), (1.0, -1.0), (True, False), (True, True))], pad_id=0)
    >>> cfg = preset("tiny", group_size=2, batch_size=1, mini_batch_size=1)
    >>> result = update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), batch,
    ...                        torch.tensor([1.0, -1.0]), cfg, key=(0, 0))
    >>> result.optimizer_steps, sorted(result.metrics)[:3]
    (1, ['approx_kl', 'clip_frac', 'clip_frac_high'])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .batch import SequenceBatch, autocast, layout_logprobs, micro_batch_layouts
from ..collective import Collective, LocalCollective
from .losses import get_policy_loss, masked_mean, rollout_correction
from .logprobs import resolve_packing

#: policy_loss metrics reported by update_policy (``ratio_max`` is left out: a maximum has no share).
LOSS_METRICS = ("clip_frac_high", "clip_frac_low", "clip_frac", "dual_clip_frac", "approx_kl", "ratio_mean")
#: per-step token counts summed into ``padded_share`` (not reported as means)
_COUNTS = ("forward_tokens", "padding_tokens")


def derive_seed(*keys: int) -> int:
    """A 31-bit seed that is a pure function of ``keys`` (e.g. (seed, step, round)): reproducible draws.

    Example:
        >>> derive_seed(0, 3, 1) == derive_seed(0, 3, 1) != derive_seed(0, 3, 2)
        True
    """
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0] & 0x7FFFFFFF)


def loss_settings(cfg: Any) -> dict[str, Any]:
    """The :func:`~dapo_env.learners.algo.losses.policy_loss` keywords a :class:`TrainConfig` selects."""
    return {"clip_low": cfg.clip_low, "clip_high": cfg.clip_high, "clip_c": cfg.clip_c, "agg": cfg.loss_agg,
            "ratio_level": cfg.ratio_level, "max_response_tokens": cfg.max_response_tokens}


@dataclass(frozen=True)
class UpdateResult:
    """What :func:`update_policy` returns.

    Attributes:
        metrics: the update's metrics, each the mean over its optimizer steps (empty without a step).
        old_logp: (N, R) the log-probs the importance ratios were taken against (the learner's before
            the update; filled from the update's own forward when ``old_logp=None`` was passed).
        optimizer_steps: how many optimizer steps ran (mini-batches with no loss token are skipped).
    """

    metrics: dict[str, float]
    old_logp: torch.Tensor
    optimizer_steps: int


def update_policy(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: SequenceBatch,
                  advantages: torch.Tensor, cfg: Any, *, key: Sequence[int], old_logp: torch.Tensor | None = None,
                  scheduler: Any = None, collective: Collective | None = None,
                  on_optimizer_step: Callable[[], None] | None = None) -> UpdateResult:
    """Optimise the policy on one rollout batch (``cfg.epochs_per_batch`` passes).

    Args:
        model: the learner (its forward may be FSDP-sharded).
        optimizer, scheduler: stepped once per mini-batch (the scheduler may be ``None``).
        batch: the N = groups * G samples, group-major (:func:`build_sequence_batch`).
        advantages: (N,) or (N, R) advantages.
        cfg: a :class:`~dapo_env.learners.config.TrainConfig` (sizes, ``loss``, clipping, aggregation, ratio
            level, ``is_correction``/``is_cap``, ``grad_clip``, ``temperature``, ``precision``).
            ``is_correction`` reweights (and may mask) tokens by ``rollout_correction(old_logp, engine
            log-probs)`` before the mini-batches' denominators are counted; its metrics join the result's
            (``is_weight_mean``, ``is_weight_max``, ``is_truncated_share``, ``is_masked_share``,
            ``mismatch_k3``, ``mismatch_abs``).
        key: the batch's key, e.g. ``(seed, step)``; epoch ``e`` shuffles groups with ``derive_seed(*key, 1000 + e)``.
        old_logp: (N, R) log-probs of the policy that sampled (detached). ``None``: the batch gets exactly
            one optimizer step, so the update's own forward IS the old policy; its detached log-probs are
            used (and returned), saving a no-grad pass.
        collective: data-parallel denominators and gradient sync (default: one process).
        on_optimizer_step: called after every optimizer step (e.g. push the weights to the engine).

    Returns:
        :class:`UpdateResult`.
    """
    collective = collective or LocalCollective()
    G, n = cfg.group_size, batch.num_rows
    if n % G:
        raise ValueError(f"batch has {n} rows, not a multiple of group_size={G}")
    num_groups = n // G
    if old_logp is None and (cfg.epochs_per_batch > 1 or num_groups > cfg.mini_batch_size):
        raise ValueError("old_logp=None (on-policy) needs exactly one optimizer step on the batch: pass the old "
                         "policy's log-probs (batch_logprobs) when epochs_per_batch > 1 or the batch has more "
                         "than mini_batch_size groups")
    fill = old_logp is None
    old = torch.zeros_like(batch.loss_mask) if fill else old_logp
    loss_mask, is_weights, is_metrics = _rollout_correction(batch, old, cfg, fill=fill)
    steps: list[dict[str, float]] = []
    model.train()
    for epoch in range(cfg.epochs_per_batch):
        gen = torch.Generator().manual_seed(derive_seed(*key, 1000 + epoch))
        order = torch.randperm(num_groups, generator=gen)  # shuffle groups, keep members together
        rows = (order[:, None] * G + torch.arange(G)[None, :]).reshape(-1)  # (num_groups * G,)
        for start in range(0, n, cfg.mini_batch_size * G):
            step = _optimizer_step(model, optimizer, batch, advantages, old, rows[start:start + cfg.mini_batch_size * G],
                                   cfg, collective, fill=fill, loss_mask=loss_mask, is_weights=is_weights)
            if step is None:
                continue
            if scheduler is not None:
                scheduler.step()
            steps.append(step)
            if on_optimizer_step is not None:
                on_optimizer_step()
    metrics = {k: float(np.mean([s[k] for s in steps])) for k in steps[0] if k not in _COUNTS} if steps else {}
    if steps:  # a ratio of the update's sums, not a mean of per-step ratios
        metrics["padded_share"] = sum(s["padding_tokens"] for s in steps) / sum(s["forward_tokens"] for s in steps)
    metrics.update(is_metrics)
    return UpdateResult(metrics, old, len(steps))


def _rollout_correction(batch: SequenceBatch, old: torch.Tensor, cfg: Any, *, fill: bool
                        ) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, float]]:
    """The loss mask and IS weights of ``cfg.is_correction`` (engine -> learner), with its metrics.

    Samples without engine log-probs weigh 1. Without a correction: the batch's mask, no weights."""
    mode = cfg.is_correction
    if mode is None:
        return batch.loss_mask, None, {}
    if fill:
        raise ValueError("is_correction needs the old policy's log-probs before the update: pass old_logp "
                         "(batch_logprobs)")
    engine = torch.where(batch.has_rollout_logprobs[:, None], batch.rollout_logprobs.to(old.device), old)
    weights, keep, metrics = rollout_correction(old, engine, batch.loss_mask, mode=mode, cap=cfg.is_cap)
    return batch.loss_mask * keep.to(batch.loss_mask.dtype), weights, {k: float(v) for k, v in metrics.items()}


def _optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: SequenceBatch,
                    advantages: torch.Tensor, old: torch.Tensor, rows: torch.Tensor, cfg: Any,
                    collective: Collective, *, fill: bool, loss_mask: torch.Tensor,
                    is_weights: torch.Tensor | None) -> dict[str, float] | None:
    """One mini-batch: accumulate the micro-batches' gradients, sync, clip, step. ``None`` if it has no loss token."""
    num_tokens, num_seqs = collective.denominators(loss_mask[rows])  # global over the mini-batch and ranks
    if int(num_tokens) == 0:
        return None
    device = next(model.parameters()).device
    optimizer.zero_grad(set_to_none=True)
    sums = dict.fromkeys(("loss", "entropy", *LOSS_METRICS, "forward_tokens", "padding_tokens"), 0.0)
    loss_fn = get_policy_loss(cfg.loss)
    for layout in micro_batch_layouts(batch, rows, cfg.micro_batch_size, resolve_packing(cfg.packing, model)):
        sub = layout.rows
        sums["forward_tokens"] += layout.total_tokens
        sums["padding_tokens"] += layout.padding_tokens
        with autocast(cfg.precision, device):
            logp, entropy = layout_logprobs(model, batch, layout, cfg.temperature, with_entropy=True,
                                            checkpointing=cfg.gradient_checkpointing)
        if fill:
            old[sub] = logp.detach()
        mask = loss_mask[sub]
        weights = None if is_weights is None else is_weights[sub]
        loss, metrics = loss_fn(logp, old[sub], advantages[sub], mask, num_tokens=num_tokens, num_seqs=num_seqs,
                                is_weights=weights, **loss_settings(cfg))
        loss.backward()
        weight = float(mask.sum()) / float(num_tokens)  # this micro-batch's share of the global tokens
        sums["loss"] += float(loss.detach())  # already a share (global denominators)
        sums["entropy"] += float(masked_mean(entropy.detach(), mask)) * weight
        for name in LOSS_METRICS:
            sums[name] += float(metrics[name]) * weight
    collective.sync_gradients(model)
    sums["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
    optimizer.step()
    return sums


def lr_lambda(cfg: Any, total_steps: int) -> Callable[[int], float]:
    """Linear warm-up over ``warmup_steps`` optimizer steps, then ``lr_schedule`` until ``total_steps``."""
    def fn(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.lr_schedule == "constant":
            return 1.0
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
        return 0.5 * (1 + math.cos(math.pi * progress)) if cfg.lr_schedule == "cosine" else 1.0 - progress

    return fn


def param_drift(model: torch.nn.Module, init: Mapping[str, torch.Tensor]) -> float:
    """Relative L2 distance ``||theta - theta_0|| / ||theta_0||`` over the named parameters in ``init``."""
    num, den = 0.0, 0.0
    for name, p in model.named_parameters():
        if name in init:
            ref = init[name]
            num += float((p.detach().float().cpu() - ref).pow(2).sum())
            den += float(ref.pow(2).sum())
    return math.sqrt(num / max(den, 1e-30))


def behaviour_logprobs(old_logp: torch.Tensor, rollout_logp: torch.Tensor, has_rollout: torch.Tensor,
                       stale: torch.Tensor) -> torch.Tensor:
    """The old log-probs with each stale sample's row taken from the engine that sampled it (the behaviour
    policy), so the clipped ratio ``pi / pi_old`` is the true importance ratio for samples of older weights
    (``keep_surplus=True``); rows without engine log-probs keep ``old_logp``.

    Args:
        old_logp: (N, R) the learner's log-probs before the update.
        rollout_logp: (N, R) the engine's log-probs at sampling time.
        has_rollout: (N,) bool, the engine gave log-probs for the sample.
        stale: (N,) bool, the sample was generated by weights older than the learner's.

    Example:
        >>> old, engine = torch.zeros(2, 2), torch.full((2, 2), -1.0)
        >>> behaviour_logprobs(old, engine, torch.tensor([True, True]), torch.tensor([True, False])).tolist()
        [[-1.0, -1.0], [0.0, 0.0]]
    """
    use = (stale & has_rollout)[:, None]  # (N, 1)
    return torch.where(use, rollout_logp.to(old_logp.device, old_logp.dtype), old_logp)


def make_optimizer(model: torch.nn.Module, cfg: Any) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the trainable parameters (no weight decay on biases and norms) and its learning-rate
    schedule (:func:`lr_lambda` over the run's ``max_steps`` training steps' optimizer steps)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:  # a LoRA run's frozen base
            continue
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=cfg.adam_betas, eps=cfg.adam_eps)
    updates_per_step = cfg.epochs_per_batch * (cfg.batch_size // cfg.mini_batch_size)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, cfg.max_steps * updates_per_step))
    return optimizer, scheduler


__all__ = ["LOSS_METRICS", "UpdateResult", "behaviour_logprobs", "derive_seed", "loss_settings", "lr_lambda", "make_optimizer", "param_drift",
           "update_policy"]
