"""The HF rollout engine: :class:`HFEngine` samples from a plain ``transformers`` causal LM (CPU or GPU) with a
hand-written KV-cache loop, and keeps each multi-turn episode's cache between its turns.

It implements the whole :class:`~dapo_env.learners.engines.RolloutEngine` protocol under the conventions
written down in :mod:`~dapo_env.learners.engines`; prompts are encoded and sampled ids turned into
:class:`~dapo_env.types.Completion` s by the helpers every engine shares (:mod:`~dapo_env.learners.engines.engine_io`).
Build it by name with ``make_engine("hf", ...)``.

Speed (measured on this project's shared 2-core CPU box, one thread, 64 responses of 16 tokens): the
0.14M-parameter tiny Llama takes ~0.10 s per batch (~10k tokens/s) with this hand-written KV-cache loop,
the same as ``model.generate`` (0.10-0.12 s, with or without ``output_scores``); the 1.1M model ~0.27 s
for both. The loop is kept because it takes a local ``torch.Generator`` (reproducible under ``seed``
without global seeding, which ``generate`` cannot do) and records log-probs at no extra cost. Each
distinct prompt is prefilled once for its G samples, which matters when prompts are long against the
responses (few-shot chat prompts; ``benchmarks/bench_precision.py`` times it against one prefill per row).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from dapo_env.types import Completion

from .engine_io import WeightsLike, collect_eos_ids, completion_of, empty_turn, weights_fingerprint
from .engine_io import encode_prompts, turn_inputs
from .turn_cache import EpisodeKVCache, KVEntry, batched_past, reusable, row_kv
from .base import SamplingParams



def _sample_from(probs: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One draw per row of ``probs`` (B, V) by inverting the CDF: one uniform per row instead of
    ``torch.multinomial``'s per-entry random numbers (about 20x cheaper per step at V=32k on CPU; same
    distribution). Returns (B,) token ids."""
    cdf = probs.cumsum(dim=-1)  # (B, V)
    u = torch.rand((probs.shape[0], 1), generator=gen, device=probs.device) * cdf[:, -1:]  # (B, 1)
    idx = torch.searchsorted(cdf, u, right=True).squeeze(-1)  # (B,) first entry with cdf > u
    return idx.clamp_(max=probs.shape[-1] - 1)


def _filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float) -> torch.Tensor:
    """Mask (to -inf) tokens outside the top-k and outside the top-p nucleus. logits: (B, V)."""
    if top_k:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs  # mass of strictly more likely tokens
        drop_sorted = mass_before >= top_p  # the most likely token always stays
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


class HFEngine:
    """Batched sampling from a ``transformers`` causal LM with a hand-written KV-cache loop.

    Args:
        model: any HF causal LM. It may be the learner's own model object (then weight pushes are
            free: :meth:`load_weights` skips tensors that already are the parameters).
        tokenizer: its tokenizer (left padding is applied here, whatever its ``padding_side``).
        device: where to run; defaults to the model's device.
        batch_size: most sequences (prompt copies) per forward pass.
        eos_token_ids: extra ids that end a response, on top of :func:`collect_eos_ids`.
        add_special_tokens: passed to the tokenizer when encoding prompts (vLLM's default is True).
        autocast_dtype: run the forward passes under ``torch.autocast`` to this dtype (e.g.
            ``torch.bfloat16``); log-softmax and sampling stay fp32. ``None`` (default) runs in the model's dtype.
        share_prefill: prefill each distinct prompt once and copy its KV cache to the rows that repeat it
            (default). ``False`` runs one prompt forward per row: the reference the tests and
            ``benchmarks/bench_precision.py`` compare against; the samples are the same.
        reuse_kv: :meth:`generate_turns` keeps each episode's KV cache between turns and prefills only the
            new environment tokens (default). ``False`` prefills the whole history every turn: the reference
            the tests and ``benchmarks/bench_multiturn.py`` compare against; the samples are the same up to
            floating-point rounding (the logits agree to ~1e-6; a draw within rounding of a CDF boundary
            can pick the neighbouring token id, about 2 episodes in 48 on a 49k vocabulary).
        max_kv_bytes: the most bytes of kept episode caches (least recently used go first; an evicted
            episode's next turn prefills its history again).

    Example:
        >>> from dapo_env.learners.engines import SamplingParams
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> tok = build_tokenizer(); engine = HFEngine(build_tiny_model(tok), tok)
        >>> out = engine.generate(["1+1="], n=2, sampling=SamplingParams(max_response_tokens=4, seed=0))
        >>> len(out), len(out[0]), out[0][0].num_tokens <= 4
        (1, 2, True)
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        device: str | torch.device | None = None,
        batch_size: int = 64,
        eos_token_ids: Iterable[int] = (),
        add_special_tokens: bool = True,
        autocast_dtype: torch.dtype | None = None,
        share_prefill: bool = True,
        reuse_kv: bool = True,
        max_kv_bytes: int = 2 << 30,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        if next(model.parameters()).device != self.device:
            self.model.to(self.device)
        self.batch_size = batch_size
        self.eos_token_ids = collect_eos_ids(tokenizer, model, eos_token_ids)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad) if pad is not None else self.eos_token_ids[0]
        self.add_special_tokens = add_special_tokens
        self.autocast_dtype = autocast_dtype
        self.share_prefill = share_prefill
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        params = inspect.signature(model.forward).parameters
        # transformers 5.x renamed ``past_key_values`` to ``cache``; support both.
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_last = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self._version = 0
        self.kv = EpisodeKVCache(max_kv_bytes) if reuse_kv else None
        self._kv_version = 0  # the weights version the kept caches were computed with
        self._kv_unsupported = False
        self._prefilled = 0  # context tokens run through the model by generate_turns

    @property
    def weights_version(self) -> int:
        """How many times :meth:`load_weights` ran."""
        return self._version

    def fingerprint(self, names: Iterable[str] | None = None) -> str:
        """:func:`weights_fingerprint` of the engine model's state dict (only the tensors ``names`` lists, if
        given; a LoRA adapter's tensors are part of the state dict)."""
        state = self.model.state_dict()
        return weights_fingerprint(state if names is None else {n: state[n] for n in names})

    @torch.no_grad()
    def load_weights(self, weights: WeightsLike) -> None:
        """Copy named tensors into the model (names as in its ``state_dict``; a subset is fine).

        Raises ``KeyError`` naming unknown tensors and ``ValueError`` on a shape mismatch.
        """
        state = self.model.state_dict()
        items = list(weights.items() if isinstance(weights, Mapping) else weights)
        unknown = [name for name, _ in items if name not in state]
        if unknown:
            raise KeyError(f"load_weights: unknown tensor names {unknown[:5]} (expected state_dict names)")
        for name, tensor in items:
            target = state[name]
            if target.shape != tensor.shape:
                raise ValueError(f"load_weights: {name} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}")
            if target.data_ptr() != tensor.data_ptr():
                target.copy_(tensor.detach())
        self._version += 1

    def _encode(self, prompts: Sequence[str], max_response_tokens: int) -> list[list[int]]:
        return encode_prompts(self.tokenizer, prompts, add_special_tokens=self.add_special_tokens,
                              max_response_tokens=max_response_tokens, context_length=self.max_positions)

    def generate(
        self, prompts: list[str], n: int, sampling: SamplingParams
    ) -> list[list[Completion]]:
        """Sample ``n`` responses per prompt; returns ``[prompt][sample]`` completions.

        The ``len(prompts) * n`` sequences run group-major in chunks of ``batch_size``, all drawing from
        one generator seeded by ``sampling.seed`` (so results depend on seed and ``batch_size`` only).
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        encoded = self._encode(prompts, sampling.max_response_tokens)
        flat = [ids for ids in encoded for _ in range(n)]  # group-major: n copies per prompt
        budgets = [sampling.max_response_tokens] * len(flat)
        results = self._run_chunks(len(flat), sampling, lambda rows, gen: self._sample_rows(
            [flat[r] for r in rows], [budgets[r] for r in rows], sampling, gen))
        return [results[i * n : (i + 1) * n] for i in range(len(prompts))]

    def generate_turns(self, requests: Sequence[Any], sampling: SamplingParams) -> list[Completion]:
        """The next turn of each live multi-turn episode: one :class:`Completion` per request, in order.

        Each request is a :class:`~dapo_env.multiturn.TurnRequest` (``key``, ``context_token_ids`` or
        ``text``, ``tokens_left``): the response is sampled after exactly ``context_token_ids`` (else the
        tokenized ``text``; not token-exact across turns), for at most ``min(sampling.max_response_tokens,
        request.tokens_left)`` tokens. With ``reuse_kv`` the episode's cache from its previous turn is used
        when it covers a prefix of the context, so only the environment's new tokens are prefilled; caches
        of keys missing from this call (ended episodes) and caches of older weights are dropped first.
        Results depend on ``sampling.seed`` and ``batch_size`` only, not on ``reuse_kv`` (up to
        floating-point rounding, see the class's ``reuse_kv``).

        Example:
            >>> from dapo_env.learners.engines import SamplingParams
            >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
            >>> from dapo_env.multiturn import TurnRequest
            >>> tok = build_tokenizer(); engine = HFEngine(build_tiny_model(tok), tok)
            >>> first = TurnRequest(key="a", turn=0, group=0, messages=(), text="", context_token_ids=(1, 40, 41))
            >>> (turn,) = engine.generate_turns([first], SamplingParams(max_response_tokens=4, seed=0))
            >>> context = first.context_token_ids + turn.token_ids + (42,)  # + the environment's reply tokens
            >>> second = TurnRequest(key="a", turn=1, group=0, messages=(), text="", context_token_ids=context)
            >>> _ = engine.generate_turns([second], SamplingParams(max_response_tokens=4, seed=1))
            >>> engine.turn_stats["reused_tokens"] == len(context) - 2  # all but the last sampled + reply token
            True
        """
        contexts, budgets = self._turn_inputs(requests, sampling)
        keys = [str(r.key) for r in requests]
        if len(set(keys)) != len(keys):
            raise ValueError("generate_turns: two requests share an episode key; each live episode asks once per call")
        if self.kv is not None:
            if self._kv_version != self._version:  # new weights: every kept cache is stale
                self.kv.clear()
                self._kv_version = self._version
            self.kv.keep_only(set(keys))
        results: list[Completion | None] = [None] * len(requests)
        live = [i for i, b in enumerate(budgets) if b > 0]
        # look every cache up before any chunk stores new ones (which may evict what later chunks need)
        entries = [None if self.kv is None else self.kv.match(keys[i], contexts[i]) for i in live]
        for i in set(range(len(requests))) - set(live):  # no budget left: an empty, cut turn
            results[i] = empty_turn(contexts[i])
        sampled = self._run_chunks(len(live), sampling, lambda rows, gen: self._sample_turns(
            [keys[live[r]] for r in rows], [contexts[live[r]] for r in rows], [budgets[live[r]] for r in rows],
            [entries[r] for r in rows], sampling, gen))
        for i, completion in zip(live, sampled):
            results[i] = completion
        return results  # type: ignore[return-value]

    @property
    def turn_stats(self) -> dict[str, int]:
        """Cumulative :meth:`generate_turns` counters: ``prefilled_tokens`` (context tokens run through the
        model), ``reused_tokens`` (context tokens served from kept caches), ``hits``, ``misses``,
        ``evictions``, ``dropped`` and ``kv_bytes`` (held now)."""
        cache = dict(self.kv.stats) if self.kv is not None else {
            "hits": 0, "misses": 0, "reused_tokens": 0, "evictions": 0, "dropped": 0}
        return {"prefilled_tokens": self._prefilled, **cache, "kv_bytes": self.kv.nbytes if self.kv else 0}

    def release(self) -> None:
        """Drop every kept episode cache (e.g. after a rollout whose episodes have all ended)."""
        if self.kv is not None:
            self.kv.clear()

    def _turn_inputs(self, requests: Sequence[Any], sampling: SamplingParams) -> tuple[list[list[int]], list[int]]:
        """Each request's context ids and token budget; raises when a context does not fit the model."""
        return turn_inputs(requests, sampling.max_response_tokens, tokenizer=self.tokenizer,
                           add_special_tokens=self.add_special_tokens, context_length=self.max_positions)

    def _run_chunks(self, count: int, sampling: SamplingParams,
                    sample: Callable[[range, torch.Generator], list[Completion]]) -> list[Completion]:
        """Run ``sample(rows, generator)`` over ``count`` rows in chunks of ``batch_size``, in eval mode
        (and autocast), all chunks drawing from one generator seeded by ``sampling.seed``."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(sampling.seed if sampling.seed is not None else int(torch.Generator().seed()))
        was_training = self.model.training
        self.model.eval()
        try:
            results: list[Completion] = []
            with torch.no_grad(), torch.autocast(self.device.type, dtype=self.autocast_dtype or torch.bfloat16,
                                                 enabled=self.autocast_dtype is not None):
                for start in range(0, count, self.batch_size):
                    results.extend(sample(range(start, min(count, start + self.batch_size)), gen))
        finally:
            self.model.train(was_training)
        return results

    @staticmethod
    def _cache_of(out: Any) -> Any:
        cache = getattr(out, "cache", None)
        return cache if cache is not None else out.past_key_values

    def _forward_prompts(self, prompts: Sequence[Sequence[int]], width: int) -> tuple[Any, torch.Tensor]:
        """The prompt forward over ``prompts`` left-padded to ``width``; returns ``(out, attention)``."""
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)  # (U, P)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention[row, width - len(ids) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # (U, P)
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                         **self._keep_last)
        return out, attention

    def _prefill(self, prompts: list[list[int]]) -> tuple[Any, torch.Tensor]:
        """The prompt forward for all B rows; returns ``(out, attention)`` with attention (B, P).

        Each distinct prompt runs once (a group's n copies share it) and every row then gets its
        prompt's KV cache and last logits by re-indexing the batch: n times less prefill, the same
        left-padded layout. A cache type without batch re-indexing runs one row per prompt instead.
        """
        width = max(len(p) for p in prompts)
        distinct: dict[tuple[int, ...], int] = {}
        rows = [distinct.setdefault(tuple(ids), len(distinct)) for ids in prompts]
        if self.share_prefill and len(distinct) < len(prompts):
            out, attention = self._forward_prompts(list(distinct), width)
            select = getattr(self._cache_of(out), "batch_select_indices", None)
            if select is not None:
                index = torch.tensor(rows, device=self.device)  # (B,) row -> its distinct prompt
                select(index)  # every layer's (U, ...) keys and values -> (B, ...)
                out.logits = out.logits[index]  # (B, 1 or P, V)
                return out, attention[index]
        return self._forward_prompts(prompts, width)

    def _prefill_after(self, entries: list[KVEntry | None], contexts: list[list[int]]) -> tuple[Any, torch.Tensor]:
        """The forward over each row's context after its cached prefix (``None``: the whole context);
        returns ``(out, attention)``. Layout per row: [pad | cached] [pad | new tokens], right-aligned."""
        past, cached = batched_past(entries, self.device)  # cached: (R, C)
        starts = [0 if e is None else len(e.tokens) for e in entries]
        width = max(len(c) - s for c, s in zip(contexts, starts))
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)  # (R, S)
        fresh = torch.zeros((len(contexts), width), dtype=torch.long)
        positions = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, (ids, start) in enumerate(zip(contexts, starts)):
            new = ids[start:]
            input_ids[row, width - len(new):] = torch.tensor(new)
            fresh[row, width - len(new):] = 1
            positions[row, width - len(new):] = torch.arange(start, len(ids))
        attention = torch.cat([cached, fresh.to(self.device)], dim=-1)  # (R, C + S)
        self._prefilled += int(fresh.sum())
        out = self.model(input_ids=input_ids.to(self.device), attention_mask=attention,
                         position_ids=positions.to(self.device), use_cache=True, **{self._cache_kw: past},
                         **self._keep_last)
        return out, attention

    def _sample_turns(self, keys: list[str], contexts: list[list[int]], budgets: list[int],
                      entries: list[KVEntry | None], sampling: SamplingParams, gen: torch.Generator) -> list[Completion]:
        """One chunk of :meth:`generate_turns`: prefill what the kept caches (``entries``) do not cover,
        decode, keep the new caches."""
        if any(e is not None for e in entries):
            out, attention = self._prefill_after(entries, contexts)
        else:
            out, attention = self._prefill(contexts)
            rows = {tuple(c) for c in contexts} if self.share_prefill else contexts
            self._prefilled += sum(map(len, rows))
        width = attention.shape[1]
        tokens, logps, out, attention = self._decode(out, attention, budgets, sampling, gen)
        completions = self._completions(tokens, logps, budgets, contexts)
        if self.kv is not None:
            self._keep(self.kv, keys, contexts, completions, out, attention[:, :width])
        return completions

    def _keep(self, kv: EpisodeKVCache, keys: list[str], contexts: list[list[int]], completions: list[Completion],
              out: Any, prefix: torch.Tensor) -> None:
        """Store each row's cache: its context and all but its last sampled token (whose keys/values the
        decode loop has not computed), compacted to those columns. ``prefix``: (R, P) the context mask."""
        cache = self._cache_of(out)
        if not reusable(cache):
            if not self._kv_unsupported:
                self._kv_unsupported = True
                warnings.warn(f"generate_turns: {type(cache).__name__} cannot be re-batched, so each turn prefills "
                              "its history again (reuse works with DynamicCache of full-attention layers)",
                              RuntimeWarning, stacklevel=4)
            return
        width = prefix.shape[1]
        for row, (key, context, completion) in enumerate(zip(keys, contexts, completions)):
            sampled = list(completion.token_ids or ())[:-1]
            columns = torch.cat([prefix[row].nonzero().squeeze(-1),
                                 torch.arange(width, width + len(sampled), device=self.device)])
            kv.store(key, context + sampled, row_kv(cache, row, columns))

    def _sample_rows(self, prompts: list[list[int]], budgets: list[int], sampling: SamplingParams,
                     gen: torch.Generator) -> list[Completion]:
        out, attention = self._prefill(prompts)  # attention: (B, P)
        tokens, logps, _, _ = self._decode(out, attention, budgets, sampling, gen)
        return self._completions(tokens, logps, budgets, prompts)

    def _decode(self, out: Any, attention: torch.Tensor, budgets: list[int], sampling: SamplingParams,
                gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, Any, torch.Tensor]:
        """Sample up to ``budgets[row]`` tokens per row after the prefill ``out``; returns the tokens and
        log-probs (B, steps) on CPU, the last forward's output (its cache) and the attention mask."""
        batch = attention.shape[0]
        next_pos = attention.sum(-1, keepdim=True)  # (B, 1) the next token's position
        eos = torch.tensor(self.eos_token_ids, device=self.device)
        limit = torch.tensor(budgets, device=self.device)  # (B,)
        done = torch.zeros(batch, dtype=torch.bool, device=self.device)
        tokens, logps = [], []  # each (B,) per step
        for step in range(max(budgets)):
            logits = out.logits[:, -1, :].float()  # (B, V)
            scaled = logits / sampling.temperature if sampling.temperature > 0 else logits
            logp = torch.log_softmax(scaled, dim=-1)
            if sampling.temperature == 0:
                nxt = scaled.argmax(-1)
            else:
                if sampling.top_k or sampling.top_p < 1.0:
                    probs = torch.softmax(_filter_logits(scaled, sampling.top_k, sampling.top_p), dim=-1)
                else:
                    probs = logp.exp()
                nxt = _sample_from(probs, gen)  # (B,)
            nxt = torch.where(done, torch.full_like(nxt, self.pad_token_id), nxt)
            tokens.append(nxt)
            logps.append(logp.gather(-1, nxt[:, None]).squeeze(-1))
            done = done | torch.isin(nxt, eos) | (limit <= step + 1)
            if bool(done.all()):
                break
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=-1)
            out = self.model(
                input_ids=nxt[:, None],
                attention_mask=attention,
                position_ids=next_pos,
                use_cache=True,
                **{self._cache_kw: self._cache_of(out)},
            )
            next_pos = next_pos + 1
        return torch.stack(tokens, dim=1).cpu(), torch.stack(logps, dim=1).cpu(), out, attention

    def _completions(self, tok: torch.Tensor, lp: torch.Tensor, budgets: list[int],
                     prompts: list[list[int]]) -> list[Completion]:
        """Rows of sampled tokens and their log-probs (B, steps) -> completions (:func:`~.engine_io.completion_of`:
        each ends at its first EOS, kept in ``token_ids`` and not in ``text``, or at its budget, ``"length"``)."""
        return [completion_of(tok[row, :budget], lp[row, :budget], prompt, max_response_tokens=budget,
                              tokenizer=self.tokenizer, eos_token_ids=self.eos_token_ids, weights_version=self._version)
                for row, (prompt, budget) in enumerate(zip(prompts, budgets))]


__all__ = ["HFEngine"]
