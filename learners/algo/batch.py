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
from typing import Any

import torch

from dapo_env.types import Group, TrainSample, Trajectory


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
        token_turns: (N, R) int64, the assistant turn each response token was sampled in (0 for a single-turn
            response), -1 on environment tokens and padding.
        turn_rewards: (N, T) each turn's own reward (``TrajectoryTurn.reward``; 0.0 for a single-turn response,
            whose reward is all the sample's), T the most turns of any sample.
        turn_mask: (N, T) bool, True for the turns a sample has.
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
    token_turns: torch.Tensor
    turn_rewards: torch.Tensor
    turn_mask: torch.Tensor

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
        sampled[i, :L] = True if c.sampled_mask is None else torch.tensor([bool(m) for m in c.sampled_mask])
        if c.logprobs is not None:
            rollout[i, :L] = torch.tensor(c.logprobs, dtype=torch.float32)
            has_rollout[i] = True
        versions[i] = -1 if c.weights_version is None else int(c.weights_version)
    keep = torch.tensor([1.0 if k else 0.0 for _, k in samples])  # (N,)
    position_ids = (packed.attention_mask.cumsum(-1) - 1).clamp(min=0)  # (N, P+R)
    token_turns, turn_rewards, turn_mask = turn_layout([c for c, _ in samples], R)
    return SequenceBatch(packed.input_ids, packed.attention_mask, position_ids, packed.input_ids[:, -R:],
                         response_mask, sampled, sampled.float() * keep[:, None], rollout, has_rollout, versions,
                         packed.input_ids.shape[1] - R, token_turns, turn_rewards, turn_mask)


def turn_layout(completions: Sequence[TrainSample], response_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which assistant turn each response token belongs to, and each turn's reward: ``(token_turns (N, R),
    turn_rewards (N, T), turn_mask (N, T))`` (see :class:`SequenceBatch`). A :class:`~dapo_env.types.Trajectory`
    lays out its turns in order (the turn's sampled tokens, then the environment's reply tokens, -1); any other
    completion is one turn of reward 0.0 (its reward is the sample's).

    Example:
        >>> from dapo_env.types import Completion, Trajectory, TrajectoryTurn
        >>> t = Trajectory("p", (TrajectoryTurn("a", 2, reward=0.5, num_reply_tokens=1), TrajectoryTurn("b", 1)),
        ...                prompt_token_ids=(1,), token_ids=(5, 6, 7, 8), logprobs=(0.0,) * 4, sampled_mask=(1, 1, 0, 1))
        >>> tt, tr, tm = turn_layout([t, Completion("c", token_ids=(9,), prompt_token_ids=(1,))], 5)
        >>> tt.tolist(), tr.tolist(), tm.tolist()
        ([[0, 0, -1, 1, -1], [0, -1, -1, -1, -1]], [[0.5, 0.0], [0.0, 0.0]], [[True, True], [True, False]])
    """
    turns = [c.turns if isinstance(c, Trajectory) else None for c in completions]
    T = max((len(t) for t in turns if t is not None), default=1)
    token_turns = torch.full((len(completions), response_len), -1, dtype=torch.int64)  # (N, R)
    turn_rewards = torch.zeros((len(completions), T), dtype=torch.float32)  # (N, T)
    turn_mask = torch.zeros((len(completions), T), dtype=torch.bool)
    for i, (c, episode) in enumerate(zip(completions, turns)):
        if episode is None:  # one turn: its sampled tokens (all of them without a sampled mask)
            row = torch.zeros(len(c.token_ids), dtype=torch.int64)
            token_turns[i, :len(c.token_ids)] = row if c.sampled_mask is None else row.masked_fill(
                ~torch.tensor([bool(m) for m in c.sampled_mask], dtype=torch.bool), -1)
            turn_mask[i, 0] = True
            continue
        pos = 0
        for t, turn in enumerate(episode):
            token_turns[i, pos:pos + int(turn.num_tokens or 0)] = t
            pos += int(turn.num_tokens or 0) + int(turn.num_reply_tokens)
            turn_rewards[i, t] = float(turn.reward)
        turn_mask[i, :len(episode)] = True
    return token_turns, turn_rewards, turn_mask


#: How :func:`~dapo_env.learners.algo.update.update_policy` lays out its micro-batches (``TrainConfig.packing``):
#: ``"off"`` every row padded to the whole batch; ``"length"`` rows sorted by length into micro-batches, each
#: cut to its own longest prompt and response; ``"pack"`` the mini-batch's sequences packed end to end into
#: rows as long as its longest one (position ids restart at each sequence, so attention stays within it),
#: ``micro_batch_size`` such rows per forward; ``"auto"`` (the default) is ``"pack"`` where the model's attention
#: keeps packed sequences apart, else ``"length"`` (:func:`~dapo_env.learners.algo.logprobs.resolve_packing`).
#: The loss and its gradients are the same in all of them (global denominators); only the padding differs.
LAYOUTS = ("off", "length", "pack")
PACKINGS = ("auto", *LAYOUTS)


def sequence_lengths(batch: SequenceBatch, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(prompt, response)`` real-token counts of ``rows``, each (n,) int64."""
    prompt = batch.attention_mask[rows, :batch.prompt_len].sum(-1).long()
    return prompt, batch.response_mask[rows].sum(-1).long()


def micro_batches(batch: SequenceBatch, rows: torch.Tensor, size: int, packing: str) -> list[torch.Tensor]:
    """Split ``rows`` (one mini-batch) into micro-batches of at most ``size`` rows.

    ``"off"``: in order. ``"length"`` / ``"pack"``: longest responses first (then longest prompts, ties in
    order), so each micro-batch holds samples of similar length and pads little.

    Example:
        >>> from dapo_env.types import Completion, Group
        >>> cs = tuple(Completion("x", token_ids=(5,) * n, prompt_token_ids=(1,)) for n in (1, 4, 2, 3))
        >>> b = build_sequence_batch([Group("0", "p", cs, (1.0,) * 4, (True,) * 4, (True,) * 4)], pad_id=0)
        >>> [m.tolist() for m in micro_batches(b, torch.arange(4), 2, "length")]
        [[1, 3], [2, 0]]
    """
    if packing not in PACKINGS:
        raise ValueError(f"packing {packing!r}: choose one of {PACKINGS}")
    if packing == "auto":
        raise ValueError("packing='auto' depends on the model: resolve it first with "
                         "dapo_env.learners.algo.logprobs.resolve_packing(packing, model)")
    if packing != "off":
        prompt, response = sequence_lengths(batch, rows)
        key = response * (batch.prompt_len + 1) + prompt  # response length first, then prompt length
        rows = rows[torch.argsort(key, descending=True, stable=True)]
    return [rows[s:s + size] for s in range(0, rows.numel(), size)]


@dataclass(frozen=True)
class ForwardLayout:
    """How one micro-batch's sequences are laid out for the forward pass.

    Attributes:
        rows: (n,) the batch rows, in the order of the returned log-probs.
        packing: one of :data:`PACKINGS`.
        columns: ``"off"`` / ``"length"``: the columns of the batch's (N, P + R) tensors the forward reads.
        bins: ``"pack"``: per packed row, the indices (into ``rows``) of its sequences, end to end.
        shape: (rows, columns) of the forward's input.
        real_tokens: prompt + response tokens of the sequences (the rest of ``shape`` is padding).
    """

    rows: torch.Tensor
    packing: str
    columns: slice
    bins: tuple[tuple[int, ...], ...]
    shape: tuple[int, int]
    real_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def padding_tokens(self) -> int:
        return self.total_tokens - self.real_tokens


def first_fit_decreasing(lengths: Sequence[int], capacity: int) -> tuple[tuple[int, ...], ...]:
    """Bins of item indices, longest first, each item in the first bin it fits (sum <= ``capacity``).

    Example:
        >>> first_fit_decreasing([3, 5, 2, 4, 1], 5)
        ((1,), (3, 4), (0, 2))
    """
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda k: -lengths[k]):  # stable: ties keep their order
        k = next((b for b, free in enumerate(room) if free >= lengths[i]), len(bins))
        if k == len(bins):
            bins.append([])
            room.append(capacity)
        bins[k].append(i)
        room[k] -= lengths[i]
    return tuple(tuple(b) for b in bins)


def forward_layout(batch: SequenceBatch, rows: torch.Tensor, packing: str = "off") -> ForwardLayout:
    """The layout :func:`layout_logprobs` runs ``rows`` in (see :data:`PACKINGS`).

    Example:
        >>> from dapo_env.types import Completion, Group
        >>> cs = tuple(Completion("x", token_ids=(5,) * n, prompt_token_ids=(1, 1)) for n in (1, 6, 2, 3))
        >>> b = build_sequence_batch([Group("0", "p", cs, (1.0,) * 4, (True,) * 4, (True,) * 4)], pad_id=0)
        >>> [(forward_layout(b, torch.tensor([0, 2]), p).shape) for p in LAYOUTS]
        [(2, 8), (2, 4), (2, 4)]
        >>> forward_layout(b, torch.arange(4), "pack").bins, forward_layout(b, torch.arange(4), "pack").padding_tokens
        (((1,), (3, 0), (2,)), 4)
    """
    if packing not in LAYOUTS:
        raise ValueError(f"layout {packing!r}: choose one of {LAYOUTS} ('auto' is resolved first: resolve_packing)")
    prompt, response = sequence_lengths(batch, rows)
    real = int((prompt + response).sum())
    P, R = batch.prompt_len, batch.response_ids.shape[1]
    if packing == "off":
        return ForwardLayout(rows, packing, slice(0, P + R), (), (rows.numel(), P + R), real)
    if packing == "length":
        p, r = int(prompt.max()), max(int(response.max()), 1)
        return ForwardLayout(rows, packing, slice(P - p, P + r), (), (rows.numel(), p + r), real)
    lengths = (prompt + response).tolist()
    capacity = max(lengths)
    bins = first_fit_decreasing(lengths, capacity)
    return ForwardLayout(rows, packing, slice(0, P + R), bins, (len(bins), capacity), real)


def micro_batch_layouts(batch: SequenceBatch, rows: torch.Tensor, size: int, packing: str) -> list[ForwardLayout]:
    """The forward passes of one mini-batch (``rows``): every row in exactly one layout.

    ``"off"`` / ``"length"``: :func:`micro_batches` of ``size`` sequences, each in :func:`forward_layout`.
    ``"pack"``: the mini-batch's sequences packed first-fit-decreasing into rows as long as its longest
    sequence, the fullest rows first, ``size`` packed rows per forward, each forward as wide as its fullest
    row: at most ``size`` x that many tokens per forward (never more than a padded micro-batch of ``size``
    rows holds), with only the packing's slack as padding.

    Example:
        >>> from dapo_env.types import Completion, Group
        >>> cs = tuple(Completion("x", token_ids=(5,) * n, prompt_token_ids=(1, 1)) for n in (1, 6, 2, 3))
        >>> b = build_sequence_batch([Group("0", "p", cs, (1.0,) * 4, (True,) * 4, (True,) * 4)], pad_id=0)
        >>> [(m.rows.tolist(), m.shape) for m in micro_batch_layouts(b, torch.arange(4), 2, "pack")]
        [([1, 3, 0], (2, 8)), ([2], (1, 4))]
    """
    if packing != "pack":
        return [forward_layout(batch, sub, packing) for sub in micro_batches(batch, rows, size, packing)]
    prompt, response = sequence_lengths(batch, rows)
    lengths = (prompt + response).tolist()
    capacity = max(lengths)
    fill = {b: sum(lengths[i] for i in b) for b in first_fit_decreasing(lengths, capacity)}
    bins = sorted(fill, key=lambda b: -fill[b])  # fullest rows first: each forward is as wide as its fullest row
    P, R = batch.prompt_len, batch.response_ids.shape[1]
    layouts = []
    for start in range(0, len(bins), size):
        chunk = bins[start:start + size]
        members = [i for b in chunk for i in b]
        local, offset = [], 0
        for b in chunk:  # the bins, renumbered into the micro-batch's own rows
            local.append(tuple(range(offset, offset + len(b))))
            offset += len(b)
        layouts.append(ForwardLayout(rows[torch.tensor(members)], packing, slice(0, P + R), tuple(local),
                                     (len(chunk), fill[chunk[0]]), int(sum(lengths[i] for i in members))))
    return layouts


def layout_logprobs(model: torch.nn.Module, batch: SequenceBatch, layout: ForwardLayout, temperature: float,
                    *, with_entropy: bool = False, checkpointing: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the response tokens of ``layout.rows`` under ``model`` at
    ``temperature``, computed in ``layout``. Returns ``(logp, entropy)``, each (n, R), 0 on padding; the
    same values (to float rounding) in every layout. ``checkpointing``: recompute each decoder layer's
    activations in the backward instead of keeping them (:func:`~dapo_env.learners.algo.logprobs.activation_checkpointing`)."""
    from .logprobs import activation_checkpointing, packed_logprobs_and_entropy, token_logprobs_and_entropy

    device = next(model.parameters()).device
    rows = layout.rows
    n, R = rows.numel(), batch.response_ids.shape[1]
    mask = batch.response_mask[rows].to(device)
    with activation_checkpointing(model, checkpointing):
        if layout.packing == "pack":
            packed = _pack(batch, layout)
            flat_logp, flat_ent = packed_logprobs_and_entropy(
                model, packed["input_ids"].to(device), packed["position_ids"].to(device),
                packed["predict"].to(device), packed["targets"].to(device), temperature=temperature,
                with_entropy=with_entropy)
            dest = packed["dest"].to(device)  # (T,) flat index into (n, R)
            logp = torch.zeros(n * R, dtype=flat_logp.dtype, device=device).index_put((dest,), flat_logp).view(n, R)
            entropy = None
            if flat_ent is not None:
                entropy = torch.zeros(n * R, dtype=flat_ent.dtype, device=device).index_put((dest,), flat_ent).view(n, R)
            return logp, entropy
        cols = layout.columns
        kept = cols.stop - batch.prompt_len  # response columns in the forward
        logp, entropy = token_logprobs_and_entropy(
            model, batch.input_ids[rows][:, cols].to(device), batch.attention_mask[rows][:, cols].to(device),
            kept, temperature=temperature, with_entropy=with_entropy,
            position_ids=batch.position_ids[rows][:, cols].to(device))
    if kept < R:  # the trimmed response columns were padding: their log-probs are 0
        logp = torch.nn.functional.pad(logp, (0, R - kept))
        entropy = torch.nn.functional.pad(entropy, (0, R - kept)) if entropy is not None else None
    logp = logp.masked_fill(~mask, 0.0)
    entropy = entropy.masked_fill(~mask, 0.0) if entropy is not None else None
    return logp, entropy


def _pack(batch: SequenceBatch, layout: ForwardLayout) -> dict[str, torch.Tensor]:
    """The packed rows of ``layout``: ``input_ids`` and ``position_ids`` (K, C) (padding at the ends of rows
    is a sequence of its own: positions restart there too), ``predict`` (T,) the flat (K * C) index of the
    hidden state that predicts each response token, ``targets`` (T,) the tokens, ``dest`` (T,) their flat
    index in the (n, R) output."""
    rows, P, R = layout.rows, batch.prompt_len, batch.response_ids.shape[1]
    K, C = layout.shape
    prompt, response = sequence_lengths(batch, rows)
    ids = torch.zeros((K, C), dtype=batch.input_ids.dtype)
    pos = torch.zeros((K, C), dtype=batch.position_ids.dtype)
    predict, targets, dest = [], [], []
    for k, members in enumerate(layout.bins):
        offset = 0
        for i in members:
            row, p, r = int(rows[i]), int(prompt[i]), int(response[i])
            ids[k, offset:offset + p + r] = batch.input_ids[row, P - p:P + r]
            pos[k, offset:offset + p + r] = batch.position_ids[row, P - p:P + r]
            predict.append(k * C + offset + p - 1 + torch.arange(r))
            targets.append(batch.response_ids[row, :r])
            dest.append(i * R + torch.arange(r))
            offset += p + r
        pos[k, offset:] = torch.arange(C - offset)
    cat = (lambda xs, dtype: torch.cat(xs) if xs else torch.zeros(0, dtype=dtype))
    return {"input_ids": ids, "position_ids": pos, "predict": cat(predict, torch.long),
            "targets": cat(targets, batch.response_ids.dtype), "dest": cat(dest, torch.long)}


def response_logprobs(model: torch.nn.Module, batch: SequenceBatch, rows: torch.Tensor, temperature: float,
                      *, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the response tokens of ``rows`` under ``model`` at
    ``temperature`` (memory-lean chunked lm_head), every row padded to the batch. Returns ``(logp,
    entropy)``, each (n, R), 0 on padding."""
    return layout_logprobs(model, batch, forward_layout(batch, rows, "off"), temperature, with_entropy=with_entropy)


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


__all__ = ["LAYOUTS", "PACKINGS", "ForwardLayout", "SequenceBatch", "TrainSample", "autocast", "autocast_dtype", "batch_logprobs",
           "build_sequence_batch", "first_fit_decreasing", "forward_layout", "layout_logprobs", "logprob_mismatch",
           "micro_batch_layouts", "micro_batches", "response_logprobs", "sequence_lengths"]
