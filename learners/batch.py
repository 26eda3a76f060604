"""Sequence batches for the learner: padded token tensors from verified groups, learner log-probs on them,
and the engine-vs-learner log-prob mismatch.

A sample is anything with the :class:`TrainSample` attributes: a :class:`~dapo_env.types.Completion`
(every token sampled by the model) or a multi-turn trajectory whose environment tokens carry
``sampled_mask`` 0. The loss and its denominators count sampled tokens only.

Example:
    >>> from dapo_env.types import Completion, Group
    >>> c = Completion("x", token_ids=(5, 2), logprobs=(-0.1, -0.2), prompt_token_ids=(1, 4, 4))
    >>> g = Group("0", "p", (c, c), (1.0, -1.0), (True, False), (True, False))
    >>> batch = build_sequence_batch([g], pad_id=0)
    >>> batch.input_ids.tolist()[0], batch.loss_mask.tolist()
    ([1, 4, 4, 5, 2], [[1.0, 1.0], [0.0, 0.0]])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dapo_env.types import Group


class TrainSample(Protocol):
    """What the learner reads from a sample. Optional attributes: ``logprobs`` (the engine's, per token of
    ``token_ids``), ``sampled_mask`` (per token of ``token_ids``: 1 sampled by the model, 0 inserted by the
    environment; absent means all sampled) and ``weights_version`` (the engine's weights version)."""

    prompt_token_ids: Sequence[int] | None
    token_ids: Sequence[int] | None


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The dtype ``TrainConfig.precision`` asks matmuls to run in (``None``: the model's own, fp32)."""
    return torch.bfloat16 if precision == "bf16" else None


def autocast(precision: str, device: torch.device) -> torch.autocast:
    """The autocast context of the learner's forward passes (a no-op for ``"fp32"``)."""
    dtype = autocast_dtype(precision)
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


@dataclass(frozen=True)
class SequenceBatch:
    """Prompt + response token ids of N samples, prompts left-padded to P and responses right-padded
    to R, so every response starts at column P.

    Attributes:
        input_ids: (N, P + R) token ids.
        attention_mask: (N, P + R) 1 on real tokens.
        position_ids: (N, P + R) positions counted over real tokens (as the engine saw them).
        response_ids: (N, R) the response tokens.
        response_mask: (N, R) bool, True on real response tokens.
        sampled_mask: (N, R) bool, True on response tokens the model sampled (not environment tokens).
        loss_mask: (N, R) float, ``sampled_mask`` and the sample's loss mask from shaping (overlong filter).
        rollout_logprobs: (N, R) the engine's log-probs (0 where it gave none).
        has_rollout_logprobs: (N,) bool, the engine gave log-probs for the sample.
        weights_versions: (N,) int64, the engine weights version that sampled it (-1 when unknown).
        prompt_len: P.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    sampled_mask: torch.Tensor
    loss_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    has_rollout_logprobs: torch.Tensor
    weights_versions: torch.Tensor
    prompt_len: int

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.shape[0])

    def to(self, device: torch.device | str) -> SequenceBatch:
        """The same batch with every tensor on ``device`` (the learner's; no copy when already there)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self) if f.name != "prompt_len"})

    def rows(self, index: torch.Tensor | slice) -> SequenceBatch:
        """The batch restricted to ``index`` (e.g. one data-parallel rank's share)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name)[index]
                                            for f in dataclasses.fields(self) if f.name != "prompt_len"})


def build_sequence_batch(groups: Sequence[Group], *, pad_id: int) -> SequenceBatch:
    """Stack every sample of ``groups`` (group-major) into a :class:`SequenceBatch`."""
    from .logprobs import pack_batch

    samples = [(c, keep) for g in groups for c, keep in zip(g.completions, g.loss_mask)]
    for c, _ in samples:
        if c.token_ids is None or c.prompt_token_ids is None:
            raise ValueError("samples need token_ids and prompt_token_ids for the learner: use an engine that reports "
                             "them (HFEngine, VLLMEngine)")
    packed = pack_batch([c.prompt_token_ids for c, _ in samples], [c.token_ids for c, _ in samples], pad_id=pad_id)
    N, R = len(samples), packed.response_len
    response_mask = packed.response_mask.bool()  # (N, R)
    sampled = torch.zeros((N, R), dtype=torch.bool)
    rollout = torch.zeros((N, R), dtype=torch.float32)
    has_rollout = torch.zeros(N, dtype=torch.bool)
    versions = torch.full((N,), -1, dtype=torch.int64)
    for i, (c, _) in enumerate(samples):
        L = len(c.token_ids)
        mask = getattr(c, "sampled_mask", None)
        sampled[i, :L] = True if mask is None else torch.tensor([bool(m) for m in mask])
        logprobs = getattr(c, "logprobs", None)
        if logprobs is not None:
            rollout[i, :L] = torch.tensor(logprobs, dtype=torch.float32)
            has_rollout[i] = True
        version = getattr(c, "weights_version", None)
        versions[i] = -1 if version is None else int(version)
    keep = torch.tensor([1.0 if k else 0.0 for _, k in samples])  # (N,)
    position_ids = (packed.attention_mask.cumsum(-1) - 1).clamp(min=0)  # (N, P+R)
    return SequenceBatch(packed.input_ids, packed.attention_mask, position_ids, packed.input_ids[:, -R:],
                         response_mask, sampled, sampled.float() * keep[:, None], rollout, has_rollout, versions,
                         packed.input_ids.shape[1] - R)


def response_logprobs(model: torch.nn.Module, batch: SequenceBatch, rows: torch.Tensor, temperature: float,
                      *, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the response tokens of ``rows`` under ``model`` at
    ``temperature`` (memory-lean chunked lm_head). Returns ``(logp, entropy)``, each (n, R), 0 on padding."""
    from .logprobs import token_logprobs_and_entropy

    device = next(model.parameters()).device
    logp, entropy = token_logprobs_and_entropy(
        model, batch.input_ids[rows].to(device), batch.attention_mask[rows].to(device),
        batch.response_ids.shape[1], temperature=temperature, with_entropy=with_entropy,
        position_ids=batch.position_ids[rows].to(device))
    mask = batch.response_mask[rows].to(device)
    logp = logp.masked_fill(~mask, 0.0)
    entropy = entropy.masked_fill(~mask, 0.0) if entropy is not None else None
    return logp, entropy


@torch.no_grad()
def batch_logprobs(model: torch.nn.Module, batch: SequenceBatch, *, micro_batch_size: int, temperature: float,
                   precision: str = "fp32") -> torch.Tensor:
    """(N, R) log-probs of every response token under ``model`` (no grad; e.g. the old policy's before an
    update), ``micro_batch_size`` rows per forward."""
    device = next(model.parameters()).device
    out = torch.zeros_like(batch.loss_mask, dtype=torch.float32)
    was_training = model.training
    model.eval()
    try:
        with autocast(precision, device):
            for start in range(0, batch.num_rows, micro_batch_size):
                rows = torch.arange(start, min(start + micro_batch_size, batch.num_rows))
                out[rows] = response_logprobs(model, batch, rows, temperature)[0]
    finally:
        model.train(was_training)
    return out


def logprob_mismatch(batch: SequenceBatch, learner_logp: torch.Tensor, weights_version: int) -> dict[str, Any]:
    """``|logp_engine - logp_learner|`` over the sampled tokens of the samples of ``weights_version``.

    Compares like with like: the learner's log-probs must be of the weights the engine held at that
    version (the old policy, before the update); samples of other versions (surplus groups from an
    earlier step) are left out. ``None`` values when no sample qualifies.
    """
    rows = batch.has_rollout_logprobs & (batch.weights_versions == weights_version)  # (N,)
    tokens = batch.sampled_mask & rows[:, None]  # (N, R)
    if not bool(tokens.any()):
        return {"policy/logprob_mismatch_mean": None, "policy/logprob_mismatch_max": None}
    diff = (batch.rollout_logprobs.to(learner_logp.device) - learner_logp).abs()[tokens.to(learner_logp.device)]
    return {"policy/logprob_mismatch_mean": float(diff.mean()), "policy/logprob_mismatch_max": float(diff.max())}


__all__ = ["SequenceBatch", "TrainSample", "autocast", "autocast_dtype", "batch_logprobs", "build_sequence_batch",
           "logprob_mismatch", "response_logprobs"]
