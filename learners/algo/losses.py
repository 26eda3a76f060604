"""Pure maths of the DAPO/GRPO family: group advantages, the clipped policy loss, aggregation, entropy.

Tensors in, a loss tensor and detached metric tensors out; no config objects, no ``.item()``, no I/O.
Formulas, references and the global-denominator rule are in ``docs/losses.md``.

Shapes (the glossary of ``docs/DESIGN.md``): ``N = B·G`` sequences (group-major: the ``G`` responses to one
prompt are consecutive), ``R`` response positions (right-padded), ``V`` vocabulary.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` where ``mask`` is true (over ``dim``, or everything); 0 where nothing is masked in.

    Example:
        >>> masked_mean(torch.tensor([1.0, 2.0, 9.0]), torch.tensor([1, 1, 0]))
        tensor(1.5000)
    """
    m = mask.to(values.dtype)
    if dim is None:
        return (values * m).sum() / m.sum().clamp(min=1)
    return (values * m).sum(dim) / m.sum(dim).clamp(min=1)


def group_advantages(
    rewards: Tensor, group_size: int, *, scale_by_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """Group-relative advantages (GRPO, as in DAPO): ``A_i = (R_i - mean_g) / (std_g + eps)``.

    ``std_g`` is the UNBIASED standard deviation of the group (``torch.std`` with Bessel's correction,
    as TRL and verl use). ``scale_by_std=False`` gives Dr.GRPO's mean-centring ``R_i - mean_g``. A group
    whose rewards are all equal (or a group of one) gets exactly 0.

    Args:
        rewards: (N,) rewards, group-major (``group_size`` consecutive entries per prompt).
        group_size: G.
        scale_by_std: divide by the group's standard deviation.
        eps: added to the standard deviation.

    Returns:
        (N,) advantages, same dtype as ``rewards``.

    Example:
        >>> group_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), 2)
        tensor([ 0.7071, -0.7071,  0.0000,  0.0000])
    """
    if group_size < 1 or rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards must be 1-D with a length divisible by group_size={group_size}, got shape "
            f"{tuple(rewards.shape)}"
        )
    r = rewards.reshape(-1, group_size)  # (B, G)
    centred = r - r.mean(dim=1, keepdim=True)
    constant = (r == r[:, :1]).all(dim=1, keepdim=True)  # (B, 1)
    if scale_by_std and group_size > 1:
        centred = centred / (r.std(dim=1, keepdim=True) + eps)
    return torch.where(constant, torch.zeros_like(centred), centred).reshape(-1)


def loss_denominators(mask: Tensor) -> tuple[Tensor, Tensor]:
    """The global denominators of a mini-batch: (number of loss tokens, number of sequences with one).

    Compute them over the whole mini-batch (summed over ranks) and pass them to every micro-batch's
    :func:`policy_loss` call as ``num_tokens`` / ``num_seqs``.
    """
    m = mask.bool()
    return m.sum(), m.any(dim=-1).sum()


class Aggregation(Protocol):
    """Reduces a (N, R) per-token loss to a scalar; every entry has this one signature."""

    def __call__(
        self, loss_mat: Tensor, mask: Tensor, *, num_tokens: Tensor | float | None,
        num_seqs: Tensor | float | None, max_response_tokens: int | None,
    ) -> Tensor: ...


def _register(table: dict, what: str, name: str, fn: object, overwrite: bool) -> None:
    """Add ``fn`` under ``name`` in a registry; a duplicate raises unless ``overwrite``."""
    if name in table and not overwrite:
        raise ValueError(f"{what} {name!r} is already registered; pass overwrite=True to replace it")
    table[name] = fn


def _lookup(table: dict, what: str, name: str):  # noqa: ANN202 - the registry's own value type
    """The registry's entry ``name``; an unknown name raises listing the known ones."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r}; known: {sorted(table)}") from None


class AdvantageEstimator(Protocol):
    """Per-sample (or per-token) advantages from rewards; every registered entry has this one signature.

    Args:
        rewards: (N,) each sample's reward (an episode's return), group-major (G consecutive per prompt).
        mask: (N, R) the tokens the loss counts (1 = a sampled token that is trained on).
        group_size: G.
        scale_by_std: divide by the group's reward standard deviation (GRPO) or not (Dr.GRPO).

    Returns:
        (N,) one advantage per sample, or (N, R) one per token (e.g. a per-turn estimator); detached.
    """

    def __call__(self, rewards: Tensor, mask: Tensor, *, group_size: int, scale_by_std: bool,
                 turns: TurnRewards | None = None) -> Tensor: ...


@dataclass(frozen=True)
class TurnRewards:
    """The turn structure of a batch, for estimators that credit turns (``None`` where a caller has none).

    Attributes:
        rewards: (N, T) each turn's own reward.
        mask: (N, T) bool, the turns each sample has (a prefix).
        token_turns: (N, R) int64, the turn each response token was sampled in, -1 elsewhere.
    """

    rewards: Tensor
    mask: Tensor
    token_turns: Tensor


def _group(rewards: Tensor, mask: Tensor, *, group_size: int, scale_by_std: bool,
           turns: TurnRewards | None = None) -> Tensor:
    return group_advantages(rewards, group_size, scale_by_std=scale_by_std)


def _turn(rewards: Tensor, mask: Tensor, *, group_size: int, scale_by_std: bool,
          turns: TurnRewards | None = None) -> Tensor:
    """Per-turn credit (:func:`~dapo_env.learners.algo.turn_credit.turn_credit_advantages`), spread onto the tokens
    each turn sampled: (N, R)."""
    from .turn_credit import per_token, turn_credit_advantages

    if turns is None:
        raise ValueError("advantage='turn' needs the batch's turns (turns=TurnRewards(...)); the trainer passes them")
    per_turn = turn_credit_advantages(rewards, group_size, turn_rewards=turns.rewards, turn_mask=turns.mask,
                                      scale_by_std=scale_by_std)  # (N, T)
    return per_token(per_turn, turns.token_turns)  # (N, R)


#: Registered advantage estimators: ``group`` is GRPO/DAPO's :func:`group_advantages` (one value per sample,
#: every token of an episode alike); ``turn`` credits each turn of a multi-turn episode with its reward-to-go
#: against the group's other episodes at the same turn (docs/losses.md, "Per-turn credit"; one value per token).
ADVANTAGES: dict[str, AdvantageEstimator] = {"group": _group, "turn": _turn}


def register_advantage(name: str, fn: AdvantageEstimator, *, overwrite: bool = False) -> None:
    """Add an advantage estimator (signature of :class:`AdvantageEstimator`); ``TrainConfig(advantage=name)``
    selects it. A duplicate raises unless ``overwrite``.

    Example:
        >>> register_advantage("sign", lambda r, m, *, group_size, scale_by_std, turns=None: torch.sign(r))
        >>> get_advantage("sign")(torch.tensor([2.0, -3.0]), torch.ones(2, 1), group_size=2, scale_by_std=True)
        tensor([ 1., -1.])
        >>> del ADVANTAGES["sign"]
        >>> register_advantage("old", lambda r, m, *, group_size, scale_by_std: r)
        Traceback (most recent call last):
        ...
        TypeError: advantage estimator 'old' must accept the keyword turns= (a TurnRewards or None, which it may ignore): def fn(rewards, mask, *, group_size, scale_by_std, turns=None)
    """
    if not _accepts_keyword(fn, "turns"):
        raise TypeError(f"advantage estimator {name!r} must accept the keyword turns= (a TurnRewards or None, which it "
                        "may ignore): def fn(rewards, mask, *, group_size, scale_by_std, turns=None)")
    _register(ADVANTAGES, "advantage estimator", name, fn, overwrite)


def _accepts_keyword(fn: Callable[..., Any], keyword: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature (a builtin): trust it
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == keyword and p.kind is not p.POSITIONAL_ONLY) for p in params)


def get_advantage(name: str) -> AdvantageEstimator:
    """The registered advantage estimator ``name``; unknown names raise listing the known ones.

    Example:
        >>> get_advantage("group")(torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.ones(4, 3), group_size=2,
        ...                        scale_by_std=True)
        tensor([ 0.7071, -0.7071,  0.0000,  0.0000])
    """
    return _lookup(ADVANTAGES, "advantage estimator", name)


def _seqs(mask: Tensor, num_seqs: Tensor | float | None) -> Tensor | float:
    return num_seqs if num_seqs is not None else mask.bool().any(dim=-1).sum().clamp(min=1)


def _token_mean(loss_mat, mask, *, num_tokens, num_seqs, max_response_tokens):
    denom = num_tokens if num_tokens is not None else mask.sum().clamp(min=1)
    return (loss_mat * mask).sum() / denom


def _seq_mean_token_mean(loss_mat, mask, *, num_tokens, num_seqs, max_response_tokens):
    per_seq = (loss_mat * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (N,)
    return per_seq.sum() / _seqs(mask, num_seqs)


def _seq_mean_token_sum(loss_mat, mask, *, num_tokens, num_seqs, max_response_tokens):
    return (loss_mat * mask).sum() / _seqs(mask, num_seqs)


def _seq_mean_token_sum_norm(loss_mat, mask, *, num_tokens, num_seqs, max_response_tokens):
    norm = max_response_tokens if max_response_tokens is not None else mask.shape[-1]
    return (loss_mat * mask).sum() / (norm * _seqs(mask, num_seqs))


AGGREGATIONS: dict[str, Aggregation] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def register_aggregation(name: str, fn: Aggregation, *, overwrite: bool = False) -> None:
    """Add a loss aggregation mode usable as ``policy_loss(agg=name)``; duplicates raise."""
    _register(AGGREGATIONS, "aggregation", name, fn, overwrite)


def get_aggregation(name: str) -> Aggregation:
    """The registered aggregation ``name``; unknown names raise listing the known ones."""
    return _lookup(AGGREGATIONS, "aggregation", name)


#: ``policy_loss(ratio_level=...)``: a ratio per token (PPO/GRPO/DAPO) or GSPO's length-normalised sequence ratio.
RATIO_LEVELS = ("token", "sequence")


def _log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, ratio_level: str) -> Tensor:
    """Per-token log importance ratio, (N, R); zero at padding."""
    log_ratio = torch.where(mask.bool(), logp - old_logp, torch.zeros_like(logp))
    if ratio_level == "token":
        return log_ratio
    if ratio_level == "sequence":
        # GSPO: s_i = exp(mean_t log ratio). Token form: value log s_i, gradient that of logp_t (scaled by
        # s_i through exp), so seq-mean-token-mean aggregation reproduces the sequence objective's gradient.
        seq = (log_ratio.sum(-1) / mask.sum(-1).clamp(min=1)).detach()  # (N,)
        return torch.where(mask.bool(), logp - logp.detach() + seq[:, None], torch.zeros_like(logp))
    raise ValueError(f"ratio_level must be one of {RATIO_LEVELS}, got {ratio_level!r}")


def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float | None = None,
    agg: str = "token-mean",
    ratio_level: str = "token",
    num_tokens: Tensor | float | None = None,
    num_seqs: Tensor | float | None = None,
    is_weights: Tensor | None = None,
    max_response_tokens: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """DAPO's clipped surrogate (Clip-Higher, §3.1): decoupled clip, optional dual clip, any aggregation.

    Per token: ``l = -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)``; with ``clip_c`` (dual clip,
    ``> 1``) the loss of a token with ``A < 0`` is at most ``clip_c * |A|``; times ``is_weights`` if given.
    ``r = exp(logp - old_logp)`` (``ratio_level="token"``) or GSPO's length-normalised sequence ratio
    (``"sequence"``; use ``agg="seq-mean-token-mean"`` for the GSPO paper's objective).

    Global denominators: when ``num_tokens`` / ``num_seqs`` (the counts over the WHOLE mini-batch, all
    micro-batches and ranks; see :func:`loss_denominators`) are given, the result is this micro-batch's
    share, so summing the micro-batch losses (and gradients) gives exactly the full-batch loss. Without
    them the micro-batch is its own batch. ``max_response_tokens`` is Dr.GRPO's constant for
    ``"seq-mean-token-sum-norm"`` (default ``R``; pass the generation limit for split invariance).

    Args:
        logp: (N, R) log-probs of the taken tokens under the current policy (requires grad).
        old_logp: (N, R) under the policy that the ratio is taken against (detached here).
        advantages: (N,) or (N, R) (detached here).
        mask: (N, R) 1/True for response tokens in the loss.

    Returns:
        ``(loss, metrics)``: scalar loss; detached metrics over masked tokens of this micro-batch:
        ``clip_frac_high`` (r > 1 + clip_high with A > 0), ``clip_frac_low`` (r < 1 - clip_low with A < 0),
        ``clip_frac``, ``dual_clip_frac`` (A < 0 and the ``clip_c`` bound binds), ``approx_kl`` (k3:
        ``r - 1 - log r``), ``ratio_mean``, ``ratio_max``.

    Example:
        >>> lp = torch.zeros(1, 2, requires_grad=True)
        >>> loss, m = policy_loss(lp, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2))
        >>> loss
        tensor(-1., grad_fn=<DivBackward0>)
    """
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.dim() != 2:
        raise ValueError(
            f"logp, old_logp and mask must share a (N, R) shape, got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(mask.shape)}"
        )
    if not (0 <= clip_low < 1 and clip_high >= 0):
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    if clip_c is not None and clip_c <= 1:
        raise ValueError(f"dual-clip clip_c must be > 1 (verl uses 3.0), got {clip_c}")
    aggregate = get_aggregation(agg)
    adv = advantages.detach().to(logp.dtype)
    if adv.dim() == 1:
        adv = adv[:, None]  # (N, 1) broadcasts over R
    elif adv.shape != logp.shape:
        raise ValueError(f"advantages must be (N,) or (N, R), got {tuple(advantages.shape)}")
    m = mask.to(logp.dtype)
    log_ratio = _log_ratio(logp, old_logp.detach(), mask, ratio_level)
    ratio = torch.exp(log_ratio)  # (N, R)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip_low, 1 + clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    if clip_c is not None:
        loss_mat = torch.where(adv < 0, torch.minimum(loss_mat, -adv * clip_c), loss_mat)
    if is_weights is not None:
        loss_mat = loss_mat * is_weights.detach()
    loss = aggregate(loss_mat, m, num_tokens=num_tokens, num_seqs=num_seqs, max_response_tokens=max_response_tokens)

    with torch.no_grad():
        r = ratio.detach()
        high = (r > 1 + clip_high) & (adv > 0)
        low = (r < 1 - clip_low) & (adv < 0)
        dual = (adv < 0) & (r > clip_c) if clip_c is not None else torch.zeros_like(high)
        lr = log_ratio.detach()
        metrics = {
            "clip_frac_high": masked_mean(high.to(m.dtype), m),
            "clip_frac_low": masked_mean(low.to(m.dtype), m),
            "clip_frac": masked_mean((high | low).to(m.dtype), m),
            "dual_clip_frac": masked_mean(dual.to(m.dtype), m),
            "approx_kl": masked_mean(torch.expm1(lr) - lr, m),
            "ratio_mean": masked_mean(r, m),
            "ratio_max": torch.where(mask.bool(), r, torch.zeros_like(r)).max(),
        }
    return loss, metrics


def entropy_from_logits(logits: Tensor, chunk_size: int = 1024) -> Tensor:
    """Entropy of ``softmax(logits)`` over the last dim, in fp32, ``chunk_size`` rows at a time.

    ``H = logsumexp(l) - sum softmax(l) * l``. Chunking bounds the fp32 temporaries to
    ``chunk_size * V`` elements. Differentiable.

    Args:
        logits: (..., V).

    Returns:
        (...) entropies, fp32.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    flat = logits.reshape(-1, logits.shape[-1])  # (N, V)
    parts = []
    for start in range(0, flat.shape[0], chunk_size):
        chunk = flat[start : start + chunk_size].float()
        parts.append(torch.logsumexp(chunk, -1) - (torch.softmax(chunk, -1) * chunk).sum(-1))
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(logits.shape[:-1])


# --- policy-loss registry ----------------------------------------------------------------------------
class PolicyLoss(Protocol):
    """A per-token policy loss; every entry of :data:`POLICY_LOSSES` has :func:`policy_loss`'s signature."""

    def __call__(
        self, logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, *, clip_low: float,
        clip_high: float, clip_c: float | None, agg: str, ratio_level: str, num_tokens: Tensor | float | None,
        num_seqs: Tensor | float | None, is_weights: Tensor | None, max_response_tokens: int | None,
    ) -> tuple[Tensor, dict[str, Tensor]]: ...


def cispo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float | None = None,
    agg: str = "token-mean",
    ratio_level: str = "token",
    num_tokens: Tensor | float | None = None,
    num_seqs: Tensor | float | None = None,
    is_weights: Tensor | None = None,
    max_response_tokens: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """CISPO (MiniMax-M1, arXiv:2506.13585, §3.1): clip the detached importance weight, never the gradient.

    Per token: ``l = -sg(clip(r, 1 - clip_low, 1 + clip_high)) * A * log pi_theta``, implemented with the
    value ``-clip(r) A`` (comparable with the clipped surrogate's) and the gradient
    ``-clip(r) A grad logp``: a token whose ratio left the range still contributes, scaled by the bound,
    where PPO's clip would zero its gradient. MiniMax-M1 sets no lower bound (``clip_low=1``) and tunes
    ``clip_high`` only. ``r`` is the token ratio or GSPO's sequence ratio (``ratio_level``); times
    ``is_weights`` if given; any aggregation with the global denominators of :func:`policy_loss`.

    Args:
        logp, old_logp, advantages, mask: as for :func:`policy_loss`.
        clip_low: in ``[0, 1]``; the weight's lower bound is ``1 - clip_low``.
        clip_high: ``>= 0``; the weight's upper bound is ``1 + clip_high``.
        clip_c: must be ``None`` (dual clip bounds the PPO surrogate; CISPO has no such term).

    Returns:
        ``(loss, metrics)`` with :func:`policy_loss`'s metric names; ``clip_frac_high`` / ``clip_frac_low``
        count tokens whose weight was clipped at the upper / lower bound (whatever the advantage's sign),
        ``dual_clip_frac`` is 0.

    Example:
        >>> lp = torch.log(torch.tensor([[2.0, 0.5]])).requires_grad_(True)
        >>> loss, m = cispo_loss(lp, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2))
        >>> round(loss.item(), 4), m["clip_frac_high"].item()  # weights clipped to 1.28 and 0.8
        (-1.04, 0.5)
        >>> loss.backward(); lp.grad
        tensor([[-0.6400, -0.4000]])
    """
    if logp.shape != old_logp.shape or logp.shape != mask.shape or logp.dim() != 2:
        raise ValueError(
            f"logp, old_logp and mask must share a (N, R) shape, got {tuple(logp.shape)}, "
            f"{tuple(old_logp.shape)}, {tuple(mask.shape)}"
        )
    if not (0 <= clip_low <= 1 and clip_high >= 0):
        raise ValueError(f"CISPO needs 0 <= clip_low <= 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    if clip_c is not None:
        raise ValueError("clip_c (dual clip) bounds the PPO surrogate; CISPO has no such term: pass clip_c=None")
    aggregate = get_aggregation(agg)
    adv = advantages.detach().to(logp.dtype)
    if adv.dim() == 1:
        adv = adv[:, None]  # (N, 1)
    elif adv.shape != logp.shape:
        raise ValueError(f"advantages must be (N,) or (N, R), got {tuple(advantages.shape)}")
    m = mask.to(logp.dtype)
    log_ratio = _log_ratio(logp, old_logp.detach(), mask, ratio_level)
    ratio = torch.exp(log_ratio.detach())  # (N, R), the IS weight before clipping
    weight = ratio.clamp(1 - clip_low, 1 + clip_high)
    # value -w A, gradient -w A grad logp: exp(logp - sg(logp)) is 1 with gradient grad logp
    loss_mat = -adv * weight * torch.exp(logp - logp.detach())
    if is_weights is not None:
        loss_mat = loss_mat * is_weights.detach()
    loss = aggregate(loss_mat, m, num_tokens=num_tokens, num_seqs=num_seqs, max_response_tokens=max_response_tokens)

    with torch.no_grad():
        high, low = ratio > 1 + clip_high, ratio < 1 - clip_low
        lr = log_ratio.detach()
        metrics = {
            "clip_frac_high": masked_mean(high.to(m.dtype), m),
            "clip_frac_low": masked_mean(low.to(m.dtype), m),
            "clip_frac": masked_mean((high | low).to(m.dtype), m),
            "dual_clip_frac": torch.zeros((), dtype=m.dtype),
            "approx_kl": masked_mean(torch.expm1(lr) - lr, m),
            "ratio_mean": masked_mean(ratio, m),
            "ratio_max": torch.where(mask.bool(), ratio, torch.zeros_like(ratio)).max(),
        }
    return loss, metrics


#: Policy losses by name (``TrainConfig.loss``): DAPO's clipped surrogate and CISPO; one signature.
POLICY_LOSSES: dict[str, PolicyLoss] = {"ppo-clip": policy_loss, "cispo": cispo_loss}


def register_policy_loss(name: str, fn: PolicyLoss, *, overwrite: bool = False) -> None:
    """Add a policy loss usable as ``TrainConfig(loss=name)``; it must take :func:`policy_loss`'s arguments and
    return ``(loss, metrics)`` with its metric names. Duplicates raise."""
    _register(POLICY_LOSSES, "policy loss", name, fn, overwrite)


def get_policy_loss(name: str) -> PolicyLoss:
    """The registered policy loss ``name``; unknown names raise listing the known ones.

    Example:
        >>> get_policy_loss("cispo") is cispo_loss
        True
    """
    return _lookup(POLICY_LOSSES, "policy loss", name)


# --- rollout correction: importance weights between the sampling engine and the learner ---------------
class ISCorrection(Protocol):
    """Bounds the importance weights ``w = pi_learner / pi_engine``; every entry of :data:`IS_CORRECTIONS`
    has this signature.

    Takes ``log_w`` (N, R), the per-token log weight (0 off the mask), the bool ``mask`` and the bound
    ``cap > 1``; returns ``(raw, weights, keep)``, each (N, R): the unbounded weight at the entry's level
    (token or sequence, broadcast over the sequence's tokens), the weight to multiply the loss with, and
    the tokens that stay in the loss.
    """

    def __call__(self, log_w: Tensor, mask: Tensor, *, cap: float) -> tuple[Tensor, Tensor, Tensor]: ...


_MAX_LOG_W = 30.0  # weights are computed in log space and kept below e^30 so sums stay finite


def _sequence_log_w(log_w: Tensor, mask: Tensor) -> Tensor:
    """``log prod_t w_t`` of each sequence, broadcast back to (N, R)."""
    return (log_w * mask).sum(-1, keepdim=True).expand_as(log_w)


def _truncate(log_w: Tensor, mask: Tensor, cap: float) -> tuple[Tensor, Tensor, Tensor]:
    raw = torch.exp(log_w.clamp(max=_MAX_LOG_W))
    return raw, torch.exp(log_w.clamp(max=math.log(cap))), mask


def _reject(log_w: Tensor, mask: Tensor, cap: float) -> tuple[Tensor, Tensor, Tensor]:
    bound = math.log(cap)
    raw = torch.exp(log_w.clamp(max=_MAX_LOG_W))
    return raw, torch.exp(log_w.clamp(-bound, bound)), mask & (log_w.abs() <= bound)


def _token_truncate(log_w, mask, *, cap):  # TIS: min(w_t, C)
    return _truncate(log_w, mask, cap)


def _token_mask(log_w, mask, *, cap):  # MIS: drop tokens with w_t outside [1/C, C], keep w_t on the others
    return _reject(log_w, mask, cap)


def _sequence_truncate(log_w, mask, *, cap):  # min(prod_t w_t, C) for every token of the sequence
    return _truncate(_sequence_log_w(log_w, mask), mask, cap)


def _sequence_mask(log_w, mask, *, cap):  # drop whole sequences with prod_t w_t outside [1/C, C]
    return _reject(_sequence_log_w(log_w, mask), mask, cap)


#: Rollout corrections by name (``TrainConfig.is_correction``): truncated (TIS) or masked (MIS) importance
#: sampling, per token or per sequence.
IS_CORRECTIONS: dict[str, ISCorrection] = {
    "token-truncate": _token_truncate,
    "token-mask": _token_mask,
    "sequence-truncate": _sequence_truncate,
    "sequence-mask": _sequence_mask,
}


def register_is_correction(name: str, fn: ISCorrection, *, overwrite: bool = False) -> None:
    """Add a rollout correction usable as ``rollout_correction(mode=name)``; duplicates raise."""
    _register(IS_CORRECTIONS, "IS correction", name, fn, overwrite)


def get_is_correction(name: str) -> ISCorrection:
    """The registered rollout correction ``name``; unknown names raise listing the known ones."""
    return _lookup(IS_CORRECTIONS, "IS correction", name)


def rollout_correction(
    old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, *, mode: str = "token-truncate", cap: float = 2.0
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Importance weights that correct for sampling with another policy than the learner's.

    ``w_t = pi_learner(o_t) / pi_engine(o_t) = exp(old_logp - rollout_logp)``: the learner's log-probs
    before the update (the proximal policy of AReaL's decoupled objective) over the log-probs the
    rollout engine sampled with (stale weights under asynchronous rollouts, another numerical precision
    or kernel under vLLM). ``mode`` bounds them (:data:`IS_CORRECTIONS`):

    - ``"token-truncate"`` (TIS): ``min(w_t, cap)``.
    - ``"token-mask"`` (MIS): tokens with ``w_t`` outside ``[1/cap, cap]`` leave the loss (and its
      denominators); the others keep ``w_t``.
    - ``"sequence-truncate"``: ``min(prod_t w_t, cap)`` for every token of the sequence.
    - ``"sequence-mask"``: sequences with ``prod_t w_t`` outside ``[1/cap, cap]`` leave the loss.

    Pass ``weights`` as :func:`policy_loss`'s ``is_weights`` and ``keep`` (and the loss mask) as its mask,
    with denominators counted over ``mask & keep``.

    Args:
        old_logp: (N, R) the learner's log-probs of the sampled tokens (detached here).
        rollout_logp: (N, R) the engine's log-probs of the same tokens (detached here).
        mask: (N, R) 1/True on loss tokens.
        mode: a registered correction.
        cap: the bound ``C > 1``.

    Returns:
        ``(weights, keep, metrics)``: (N, R) weights (0 off the mask), (N, R) bool tokens kept, and
        detached metrics over the mask: ``is_weight_mean`` (applied weight, kept tokens), ``is_weight_max``
        (unbounded weight at the mode's level, below ``e^30``), ``is_truncated_share`` / ``is_masked_share``
        (loss tokens whose weight was capped / that were dropped), ``mismatch_k3`` (k3 estimate of
        KL(pi_engine || pi_learner) per token) and ``mismatch_abs`` (mean ``|log w_t|``).

    Example:
        >>> old, engine, mask = torch.log(torch.tensor([[1.0, 1.5, 3.0]])), torch.zeros(1, 3), torch.ones(1, 3)
        >>> w, keep, m = rollout_correction(old, engine, mask, mode="token-mask", cap=2.0)
        >>> w.tolist(), keep.tolist(), round(m["is_masked_share"].item(), 4)
        ([[1.0, 1.5, 0.0]], [[True, True, False]], 0.3333)
        >>> rollout_correction(old, engine, mask, mode="token-truncate", cap=2.0)[0].tolist()
        [[1.0, 1.5, 2.0]]
    """
    if old_logp.shape != rollout_logp.shape or old_logp.shape != mask.shape or old_logp.dim() != 2:
        raise ValueError(
            f"old_logp, rollout_logp and mask must share a (N, R) shape, got {tuple(old_logp.shape)}, "
            f"{tuple(rollout_logp.shape)}, {tuple(mask.shape)}"
        )
    if not cap > 1:
        raise ValueError(f"the IS cap must be > 1 (weights are bounded to [1/cap, cap] or min(w, cap)), got {cap}")
    m = mask.bool()
    log_w = torch.where(m, old_logp.detach() - rollout_logp.detach(), torch.zeros_like(old_logp))  # (N, R)
    raw, weights, keep = get_is_correction(mode)(log_w, m, cap=cap)
    keep = keep & m
    weights = torch.where(keep, weights, torch.zeros_like(weights))  # a dropped token weighs nothing
    with torch.no_grad():
        f = m.to(old_logp.dtype)
        lw = log_w.clamp(-_MAX_LOG_W, _MAX_LOG_W)
        metrics = {
            "is_weight_mean": masked_mean(weights, keep),
            "is_weight_max": torch.where(m, raw, torch.zeros_like(raw)).max() if m.any() else f.sum() * 0,
            "is_truncated_share": masked_mean((keep & (weights < raw * (1 - 1e-6))).to(f.dtype), f),
            "is_masked_share": masked_mean((m & ~keep).to(f.dtype), f),
            "mismatch_k3": masked_mean(torch.expm1(lw) - lw, f),
            "mismatch_abs": masked_mean(lw.abs(), f),
        }
    return weights.detach(), keep, metrics


__all__ = [
    "ADVANTAGES",
    "TurnRewards",
    "AGGREGATIONS",
    "AdvantageEstimator",
    "IS_CORRECTIONS",
    "POLICY_LOSSES",
    "RATIO_LEVELS",
    "Aggregation",
    "cispo_loss",
    "entropy_from_logits",
    "get_advantage",
    "get_aggregation",
    "get_is_correction",
    "get_policy_loss",
    "group_advantages",
    "ISCorrection",
    "loss_denominators",
    "masked_mean",
    "policy_loss",
    "PolicyLoss",
    "register_advantage",
    "register_aggregation",
    "register_is_correction",
    "register_policy_loss",
    "rollout_correction",
]
