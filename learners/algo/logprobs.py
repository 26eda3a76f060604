"""Memory-lean per-token log-probs and entropy of a causal LM's responses.

The naive path materialises ``model(...).logits`` in fp32 for every position: ``B * L * V * 4`` bytes,
plus as much again for the softmax saved for the backward (for V = 151,936, B*L = 8k tokens that is
~5 GB per copy). Here the backbone runs once, and the lm_head, the temperature, the log-softmax and the
entropy are computed chunk by chunk over the response tokens inside one custom autograd Function that
saves only the hidden states, the log-sum-exp and the entropy, and recomputes each chunk's logits in the
backward. Peak extra memory is ``chunk_size * V`` fp32 elements (a few copies) instead of ``B * T * V``.

Batch layout (see :func:`pack_batch`): prompts left-padded, responses right-padded, the response block
being the LAST ``response_len`` columns of ``input_ids``.

Example:
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> tok = build_tokenizer(); model = build_tiny_model(tok)
    >>> batch = pack_batch([[1, 5], [1]], [[6, 2], [7]], pad_id=0)
    >>> logp, ent = token_logprobs_and_entropy(model, batch.input_ids, batch.attention_mask, batch.response_len)
    >>> logp.shape, ent.shape
    (torch.Size([2, 2]), torch.Size([2, 2]))
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .losses import entropy_from_logits


@dataclass(frozen=True, kw_only=True)
class PackedBatch:
    """Prompt + response token ids in the learner's layout.

    Attributes:
        input_ids: (B, P + T) left-padded prompts then right-padded responses.
        attention_mask: (B, P + T) 1 on real tokens.
        response_mask: (B, T) 1 on response tokens.
        response_len: T.
        rollout_logprobs: (B, T) the engine's log-probs (0 at padding), when given.
    """

    input_ids: Tensor
    attention_mask: Tensor
    response_mask: Tensor
    response_len: int
    rollout_logprobs: Tensor | None = None


def pack_batch(
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    pad_id: int,
    rollout_logprobs: Sequence[Sequence[float]] | None = None,
) -> PackedBatch:
    """Lay out prompts (left-padded) and responses (right-padded) into one (B, P + T) batch.

    Example:
        >>> b = pack_batch([[1, 5], [1]], [[6], [7, 8]], pad_id=0)
        >>> b.input_ids.tolist(), b.response_mask.tolist()
        ([[1, 5, 6, 0], [0, 1, 7, 8]], [[1, 0], [1, 1]])
    """
    if len(prompts) != len(responses) or not prompts:
        raise ValueError(f"need as many prompts as responses (> 0), got {len(prompts)} and {len(responses)}")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token (the first response token is predicted from it)")
    P = max(len(p) for p in prompts)
    T = max(max(len(r) for r in responses), 1)
    B = len(prompts)
    ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + T), dtype=torch.long)
    resp_mask = torch.zeros((B, T), dtype=torch.long)
    roll = torch.zeros((B, T), dtype=torch.float32) if rollout_logprobs is not None else None
    for i, (p, r) in enumerate(zip(prompts, responses)):
        ids[i, P - len(p) : P] = torch.tensor(list(p), dtype=torch.long)
        attn[i, P - len(p) : P + len(r)] = 1
        if len(r):
            ids[i, P : P + len(r)] = torch.tensor(list(r), dtype=torch.long)
            resp_mask[i, : len(r)] = 1
        if roll is not None:
            lp = rollout_logprobs[i]
            if len(lp) != len(r):
                raise ValueError(f"row {i}: {len(lp)} rollout logprobs for {len(r)} response tokens")
            roll[i, : len(r)] = torch.tensor(list(lp), dtype=torch.float32)
    return PackedBatch(input_ids=ids, attention_mask=attn, response_mask=resp_mask, response_len=T,
                       rollout_logprobs=roll)


def _compute_dtype(hidden: Tensor) -> torch.dtype:
    """fp32 for half/bf16/fp32 models (like the naive ``.float()`` path); fp64 stays fp64."""
    return torch.float64 if hidden.dtype == torch.float64 else torch.float32


def _scaled_logits(h: Tensor, weight: Tensor, bias: Tensor | None, temperature: float, cdtype: torch.dtype,
                   out: Tensor | None = None) -> Tensor:
    """(C, V) logits / temperature in ``cdtype``, a tensor that may be modified in place: the first C rows
    of ``out`` (a work buffer reused across chunks) when the weights are already in ``cdtype`` and no autocast
    is on (``out=`` kernels run outside autocast, so a bf16 run's head would silently compute in fp32 and part
    from the engine's), else fresh. Same operations either way (``linear`` is ``mm`` / ``addmm``), so the same
    values to the bit."""
    if out is not None and weight.dtype == cdtype and h.dtype == cdtype and not torch.is_autocast_enabled(h.device.type):
        z = out[: h.shape[0]]
        if bias is None:
            torch.mm(h, weight.t(), out=z)
        else:
            torch.addmm(bias, h, weight.t(), out=z)
    else:
        z = torch.nn.functional.linear(h, weight, bias).to(cdtype)
    return z.div_(temperature) if temperature != 1.0 else z


def _work_buffers(rows: int, hidden: Tensor, weight: Tensor, cdtype: torch.dtype) -> tuple[Tensor | None, Tensor]:
    """The (rows, V) buffers the chunks reuse: one for the logits (``None`` when the weights are not in
    ``cdtype``: the cast makes a fresh tensor anyway) and one for the exponentials. Allocating fresh (chunk,
    V) tensors per chunk costs more than the arithmetic on CPU: each is above glibc's mmap threshold, so
    every chunk maps and zero-fills new pages (~25% of the head's time at V = 32k, measured)."""
    logits = hidden.new_empty((rows, weight.shape[0]), dtype=cdtype) if weight.dtype == cdtype else None
    return logits, hidden.new_empty((rows, weight.shape[0]), dtype=cdtype)


def _logsumexp(z: Tensor, work: Tensor) -> Tensor:
    """``torch.logsumexp(z, -1)`` for (C, V) ``z`` with its (C, V) temporary in ``work`` (the same
    operations as torch's CPU implementation: max, masked infinities, exp of the difference, sum, log)."""
    m = torch.amax(z, dim=-1, keepdim=True)  # (C, 1)
    m.masked_fill_(m.abs() == float("inf"), 0)
    e = work[: z.shape[0]]
    torch.sub(z, m, out=e).exp_()
    return e.sum(-1).log_().add_(m.squeeze(-1))


class _ChunkedHeadLogprobs(torch.autograd.Function):
    """logp[n] = log_softmax((h[n] @ W.T + b) / temp)[y[n]] and its entropy, chunk by chunk over n."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk_size, with_entropy):
        n = hidden.shape[0]
        cdtype = _compute_dtype(hidden)
        logp = hidden.new_empty(n, dtype=cdtype)
        lse = hidden.new_empty(n, dtype=cdtype)
        ent = hidden.new_zeros(n, dtype=cdtype)
        zbuf, work = _work_buffers(min(chunk_size, n), hidden, weight, cdtype)  # (C, V) each, reused
        for s in range(0, n, chunk_size):
            sl = slice(s, s + chunk_size)
            z = _scaled_logits(hidden[sl], weight, bias, temperature, cdtype, out=zbuf)  # (C, V)
            c_lse = _logsumexp(z, work)  # (C,)
            lse[sl] = c_lse
            logp[sl] = z.gather(-1, targets[sl, None]).squeeze(-1) - c_lse
            if with_entropy:
                p = work[: z.shape[0]]
                torch.sub(z, c_lse[:, None], out=p).exp_()  # (C, V) softmax
                ent[sl] = c_lse - (p[:, None, :] @ z[:, :, None]).reshape(-1)  # sum_v p z, no temporary
        del zbuf, work
        ctx.save_for_backward(hidden, weight, bias, targets, lse, ent)
        ctx.temperature, ctx.chunk_size, ctx.with_entropy = temperature, chunk_size, with_entropy
        # An output the loss does not use (the entropy, a metric) gets a None gradient, not a zero tensor
        # whose (chunk, V) arithmetic the backward would run for nothing.
        ctx.set_materialize_grads(False)
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, grad_ent):
        hidden, weight, bias, targets, lse, ent = ctx.saved_tensors
        temp, chunk = ctx.temperature, ctx.chunk_size
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        cdtype = _compute_dtype(hidden)
        grad_h = torch.zeros_like(hidden) if need_h else None
        grad_w = torch.zeros_like(weight, dtype=cdtype) if need_w else None
        grad_b = torch.zeros_like(bias, dtype=cdtype) if (need_b and bias is not None) else None
        use_ent = ctx.with_entropy and grad_ent is not None
        if grad_logp is None and not use_ent:
            return None, None, None, None, None, None, None
        if grad_logp is None:
            grad_logp = torch.zeros_like(lse)
        zbuf, pbuf = _work_buffers(min(chunk, hidden.shape[0]), hidden, weight, cdtype)  # (C, V) each, reused
        for s in range(0, hidden.shape[0], chunk):
            sl = slice(s, s + chunk)
            h = hidden[sl]  # (C, H)
            g_lp = grad_logp[sl, None].to(cdtype)  # (C, 1)
            z = _scaled_logits(h, weight, bias, temp, cdtype, out=zbuf)  # (C, V)
            z.sub_(lse[sl, None])  # log p
            p = torch.exp(z, out=pbuf[: z.shape[0]])
            # dlogp/dz = onehot(y) - p ; dH/dz = -p (log p + H). So dL/dz = onehot*g_lp - p (g_lp + g_ent (log p + H)).
            if use_ent:
                g = z.add_(ent[sl, None]).mul_(grad_ent[sl, None].to(cdtype)).add_(g_lp).mul_(p).neg_()
            else:
                g = p.mul_(-g_lp)  # the sign folded into the (C, 1) factor: one (C, V) pass fewer, same values
            g.scatter_add_(-1, targets[sl, None], g_lp)
            if temp != 1.0:
                g.div_(temp)  # through z = logits / temp
            if grad_h is not None:
                grad_h[sl] = (g.to(weight.dtype) @ weight).to(hidden.dtype)
            if grad_w is not None:
                grad_w.addmm_(g.t(), h.to(cdtype))
            if grad_b is not None:
                grad_b += g.sum(0)
        del zbuf, pbuf
        grad_w = grad_w.to(weight.dtype) if grad_w is not None else None
        grad_b = grad_b.to(bias.dtype) if grad_b is not None else None
        return grad_h, grad_w, grad_b, None, None, None, None


def chunked_head_logprobs(
    hidden: Tensor,
    head: Any,
    targets: Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 512,
    with_entropy: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """Log-probs of ``targets`` and entropies under ``softmax(head(hidden) / temperature)``, chunked.

    Args:
        hidden: (..., H) final hidden states (after the backbone's last norm).
        head: the lm_head: anything with ``weight`` (V, H) and ``bias`` (V,) or None, e.g. a ``Linear``
            (its weight may be tied to the embeddings).
        targets: (...) token ids predicted from each hidden state.

    Returns:
        ``(logp, entropy)`` both (...) fp32 (fp64 for fp64 inputs); ``entropy`` is None unless ``with_entropy``.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    lead = targets.shape
    flat_h = hidden.reshape(-1, hidden.shape[-1])  # (N, H)
    flat_y = targets.reshape(-1)  # (N,)
    logp, ent = _ChunkedHeadLogprobs.apply(
        flat_h, head.weight, head.bias, flat_y, float(temperature), int(chunk_size), bool(with_entropy)
    )
    return logp.reshape(lead), (ent.reshape(lead) if with_entropy else None)


def _default_positions(attention_mask: Tensor) -> Tensor:
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, L): left padding starts at 0


def supports_chunked_head(model: Any) -> bool:
    """True when ``model`` is a plain decoder + linear lm_head (no logit soft-capping or scaling)."""
    get_dec = getattr(model, "get_decoder", None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if get_dec is None or not isinstance(head, torch.nn.Linear):
        return False
    config = getattr(model, "config", None)
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None) not in (None, 1, 1.0):
        return False
    try:
        return get_dec() is not None
    except (AttributeError, NotImplementedError):
        return False


def token_logprobs_and_entropy(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    response_len: int,
    *,
    temperature: float = 1.0,
    chunk_size: int = 512,
    with_entropy: bool = True,
    position_ids: Tensor | None = None,
    chunked: bool | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Per-token log-probs of the response tokens (and entropies) under ``softmax(logits / temperature)``.

    Runs the backbone once (``model.get_decoder()``), then :func:`chunked_head_logprobs` over the last
    ``response_len`` positions' predecessors. Models without a decoder + ``Linear`` lm_head (or with
    logit soft-capping/scaling) take the naive full-logits path; ``chunked=False`` forces it.

    Args:
        model: an HF causal LM.
        input_ids: (B, L) prompts left-padded then responses right-padded (see :func:`pack_batch`).
        attention_mask: (B, L).
        response_len: T, the response block is ``input_ids[:, L - T:]``.
        temperature: the policy trained is the temperature-scaled one (match the sampler's).
        chunk_size: tokens per lm_head chunk (peak extra memory ~ ``chunk_size * V`` fp32 elements).
        with_entropy: also return the entropies (differentiable).
        position_ids: (B, L); default ``cumsum(attention_mask) - 1`` (what the HF engine used).
        chunked: force (True) or forbid (False) the chunked path; default: chunked when supported.

    Returns:
        ``(logp, entropy)``: (B, T) fp32 each (entropy None unless ``with_entropy``). Values at padding
        positions are finite but meaningless: mask them.
    """
    L = input_ids.shape[1]
    if not 0 < response_len < L:
        raise ValueError(f"response_len must be in [1, {L - 1}] for inputs of length {L}, got {response_len}")
    if position_ids is None:
        position_ids = _default_positions(attention_mask)
    targets = input_ids[:, L - response_len :]  # (B, T)
    use_chunked = supports_chunked_head(model) if chunked is None else chunked
    if use_chunked:
        if not supports_chunked_head(model):
            raise ValueError("chunked=True needs a model with get_decoder() and a Linear lm_head; pass chunked=None")
        out = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                  position_ids=position_ids, use_cache=False)
        hidden = out.last_hidden_state[:, L - response_len - 1 : L - 1]  # (B, T, H) predicts targets
        return chunked_head_logprobs(hidden, model.get_output_embeddings(), targets, temperature=temperature,
                                     chunk_size=chunk_size, with_entropy=with_entropy)
    return naive_logprobs_and_entropy(model, input_ids, attention_mask, response_len, temperature=temperature,
                                      with_entropy=with_entropy, position_ids=position_ids)


def packed_logprobs_and_entropy(
    model: Any,
    input_ids: Tensor,
    position_ids: Tensor,
    predict: Tensor,
    targets: Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 512,
    with_entropy: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """Log-probs (and entropies) of ``targets`` in rows that hold several sequences end to end.

    No attention mask is passed: the model's mask builder (transformers >= 4.53: ``masking_utils``) reads
    the sequence boundaries from where ``position_ids`` restart and keeps attention inside each sequence
    (block-diagonal causal for sdpa/eager/flex; varlen for flash-attention).

    Args:
        model: an HF causal LM (chunked lm_head when :func:`supports_chunked_head`, else full logits).
        input_ids, position_ids: (K, C) the packed rows; each sequence's positions start at 0.
        predict: (T,) the flat index (into K * C) of the position whose output predicts each target.
        targets: (T,) the predicted tokens.

    Returns:
        ``(logp, entropy)``: (T,) fp32 each (entropy None unless ``with_entropy``).

    Raises:
        ValueError: transformers too old to read sequence boundaries from position ids, or an attention
            implementation without a mask builder (then packed rows would attend across sequences).
    """
    check_packing_support(model)
    if supports_chunked_head(model):
        out = model.get_decoder()(input_ids=input_ids, attention_mask=None, position_ids=position_ids,
                                  use_cache=False)
        hidden = out.last_hidden_state.reshape(-1, out.last_hidden_state.shape[-1])[predict]  # (T, H)
        return chunked_head_logprobs(hidden, model.get_output_embeddings(), targets, temperature=temperature,
                                     chunk_size=chunk_size, with_entropy=with_entropy)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    logits = model(input_ids=input_ids, attention_mask=None, position_ids=position_ids, use_cache=False).logits
    z = logits.reshape(-1, logits.shape[-1])[predict].float() / temperature  # (T, V)
    logp = torch.log_softmax(z, dim=-1).gather(-1, targets[:, None]).squeeze(-1)
    return logp, (entropy_from_logits(z) if with_entropy else None)


#: Attention implementations whose masks transformers builds from restarting position ids (flash-attention
#: reads them as varlen boundaries); others (e.g. a custom kernel registered by a library) are refused.
PACKED_ATTENTION = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3")


def packing_unsupported(model: Any) -> str | None:
    """Why packed rows would not keep ``model``'s sequences apart (``None``: they do)."""
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401  (transformers >= 4.53)
    except ImportError:
        return "packing='pack' needs transformers >= 4.53 (sequence boundaries read from position ids)"
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in PACKED_ATTENTION:
        return f"packing='pack' needs one of the attention implementations {PACKED_ATTENTION}, the model uses {impl!r}"
    return None


def check_packing_support(model: Any) -> None:
    """Raise ``ValueError`` naming the fix unless packed rows keep ``model``'s sequences apart."""
    if (why := packing_unsupported(model)) is not None:
        raise ValueError(f"{why}: use packing='length' (or 'auto', which picks it)")


def resolve_packing(packing: str, model: Any) -> str:
    """The micro-batch layout ``packing`` means for ``model``: ``"auto"`` is ``"pack"`` where packing is exact
    for it (:func:`packing_unsupported` finds nothing), else ``"length"``; other values as given.

    Example:
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> model = build_tiny_model(build_tokenizer())
        >>> resolve_packing("auto", model), resolve_packing("off", model)
        ('pack', 'off')
    """
    if packing != "auto":
        return packing
    return "pack" if packing_unsupported(model) is None else "length"


@contextlib.contextmanager
def activation_checkpointing(model: Any, enabled: bool = True) -> Iterator[None]:
    """Within the block, ``model``'s decoder layers keep only their inputs in the forward and recompute
    their activations in the backward (Hugging Face's non-reentrant activation checkpointing), then the
    model's own setting is restored. A no-op when ``enabled`` is False or the model already checkpoints.

    ``model`` is an HF ``PreTrainedModel`` or the FSDP learner (:class:`~dapo_env.learners.collective.ShardedPolicy`,
    whose wrapped model is switched: FSDP2's hooks stay outside the recomputed layers). The switch reaches
    LoRA adapters (peft injects them into the same layers) and needs no input gradients (non-reentrant).

    Example:
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> model = build_tiny_model(build_tokenizer())
        >>> with activation_checkpointing(model):
        ...     inside = model.model.layers[0].gradient_checkpointing
        >>> inside, model.model.layers[0].gradient_checkpointing
        (True, False)
    """
    if not enabled:
        yield
        return
    from transformers import PreTrainedModel

    from ..collective import ShardedPolicy

    hf = model.module if isinstance(model, ShardedPolicy) else model
    if not isinstance(hf, PreTrainedModel) or not hf.supports_gradient_checkpointing:
        raise ValueError(f"gradient_checkpointing needs a Hugging Face model that supports it, got "
                         f"{type(hf).__name__}: set gradient_checkpointing=False")
    layers = [m for m in hf.modules() if isinstance(getattr(m, "gradient_checkpointing", None), bool)]
    if any(m.gradient_checkpointing for m in layers):
        yield  # the model checkpoints already (the user switched it on): leave it as it is
        return
    kwargs = {"use_reentrant": False}
    # transformers >= 5.25 names it activation_checkpointing_enable (the old name warns); 4.x has only the old one
    new_api = hasattr(PreTrainedModel, "activation_checkpointing_enable")
    if new_api:
        hf.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    try:
        yield
    finally:
        if new_api:
            hf.activation_checkpointing_disable()
        else:
            hf.gradient_checkpointing_disable()


def naive_logprobs_and_entropy(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    response_len: int,
    *,
    temperature: float = 1.0,
    with_entropy: bool = True,
    position_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The reference path: full fp32 logits, ``log_softmax(logits / T)`` gathered. Same contract as
    :func:`token_logprobs_and_entropy`; memory grows with ``B * T * V``."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    L = input_ids.shape[1]
    if position_ids is None:
        position_ids = _default_positions(attention_mask)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                   use_cache=False).logits
    z = logits[:, L - response_len - 1 : L - 1].float() / temperature  # (B, T, V)
    logp = torch.log_softmax(z, dim=-1).gather(-1, input_ids[:, L - response_len :, None]).squeeze(-1)
    return logp, (entropy_from_logits(z) if with_entropy else None)


__all__ = [
    "PackedBatch",
    "PACKED_ATTENTION",
    "activation_checkpointing",
    "check_packing_support",
    "packing_unsupported",
    "resolve_packing",
    "chunked_head_logprobs",
    "naive_logprobs_and_entropy",
    "pack_batch",
    "packed_logprobs_and_entropy",
    "supports_chunked_head",
    "token_logprobs_and_entropy",
]
