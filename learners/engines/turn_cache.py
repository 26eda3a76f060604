"""Per-episode KV caches for multi-turn generation (:meth:`HFEngine.generate_turns`).

A multi-turn episode's next turn conditions on everything before it: the prompt, every sampled turn and
every environment reply. Prefilling that whole history again each turn costs O(turns^2) tokens of
forward passes; keeping each episode's keys and values between turns costs only the new environment tokens.
:class:`EpisodeKVCache` holds one entry per episode key: the exact context tokens whose keys/values it
stores and the tensors themselves (compact, no padding). An entry is used only when its tokens are a proper
prefix of the next context, token for token, so a stale or foreign entry can never change what is sampled;
it is dropped when its episode leaves the live set, when the weights change, or (least recently used
first) when the cache outgrows ``max_bytes``.

:func:`batched_past` lays the entries of one batch out as a transformers ``DynamicCache`` (each row
right-aligned, padding masked) and :func:`row_kv` cuts one row back out. Keys are cached after the rotary
embedding, so moving columns does not change them: positions travel as explicit ``position_ids``.

Example:
    >>> import torch
    >>> cache = EpisodeKVCache(max_bytes=1 << 20)
    >>> layer = (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))  # (1, heads, tokens, head_dim)
    >>> cache.store("ep0", (5, 6, 7), [layer])
    >>> cache.match("ep0", (5, 6, 7, 8)).tokens, cache.match("ep0", (5, 9, 7, 8)), cache.nbytes
    ((5, 6, 7), None, 192)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch

KV = tuple[torch.Tensor, torch.Tensor]  # one layer's (keys, values), each (1, heads, tokens, head_dim)


@dataclass(frozen=True, slots=True)
class KVEntry:
    """One episode's cached context: ``tokens`` and each layer's keys/values for exactly those tokens."""

    tokens: tuple[int, ...]
    layers: tuple[KV, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for kv in self.layers for t in kv)


class EpisodeKVCache:
    """Episode key -> :class:`KVEntry`, bounded by ``max_bytes`` (least recently used entries go first).

    Counters in :attr:`stats` (cumulative): ``hits`` / ``misses`` (turns served with / without a cached
    prefix), ``reused_tokens`` (context tokens not prefilled again), ``evictions``, ``dropped`` (entries of
    ended episodes or old weights).
    """

    def __init__(self, max_bytes: int) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ValueError(f"max_bytes must be an int >= 0 (0 keeps nothing), got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, KVEntry] = OrderedDict()
        self._bytes = 0
        self.stats = {"hits": 0, "misses": 0, "reused_tokens": 0, "evictions": 0, "dropped": 0}

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        return self._bytes

    def match(self, key: str, context: Sequence[int]) -> KVEntry | None:
        """The entry of ``key`` if its tokens are a proper prefix of ``context`` (counted as a hit), else
        ``None`` (a miss; a non-matching entry stays until :meth:`store` replaces it)."""
        entry = self._entries.get(key)
        n = 0 if entry is None else len(entry.tokens)
        if entry is None or n >= len(context) or tuple(context[:n]) != entry.tokens:
            self.stats["misses"] += 1
            return None
        self._entries.move_to_end(key)
        self.stats["hits"] += 1
        self.stats["reused_tokens"] += n
        return entry

    def store(self, key: str, tokens: Sequence[int], layers: Sequence[KV]) -> None:
        """Keep ``layers`` (per layer ``(1, heads, len(tokens), head_dim)`` keys and values) for ``key``."""
        entry = KVEntry(tuple(int(t) for t in tokens), tuple(layers))
        if any(k.shape[-2] != len(entry.tokens) or v.shape[-2] != len(entry.tokens) for k, v in entry.layers):
            raise ValueError(f"episode {key}: cached keys/values do not cover its {len(entry.tokens)} tokens")
        self._pop(key)
        self._entries[key] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.max_bytes and self._entries:
            self._pop(next(iter(self._entries)))
            self.stats["evictions"] += 1

    def keep_only(self, keys: Collection[str]) -> None:
        """Drop the entries of episodes not in ``keys`` (a key missing from a turn call has ended)."""
        for key in [k for k in self._entries if k not in keys]:
            self._pop(key)
            self.stats["dropped"] += 1

    def clear(self) -> None:
        """Drop every entry (the weights changed, or the caller's episodes all ended)."""
        self.stats["dropped"] += len(self._entries)
        self._entries.clear()
        self._bytes = 0

    def _pop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.nbytes


def reusable(cache: Any) -> bool:
    """True for a transformers ``DynamicCache`` of plain full-attention layers (whose columns can be moved
    between batches); sliding-window, quantized, static or recurrent caches are re-prefilled instead."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    layers = getattr(cache, "layers", None)
    return type(cache) is DynamicCache and bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def batched_past(entries: Sequence[KVEntry | None], device: torch.device) -> tuple[Any, torch.Tensor]:
    """The entries as one ``DynamicCache`` of R rows, each right-aligned in C = the longest entry's columns
    (``None`` rows hold only padding), and its attention mask (R, C) with 1 on cached tokens."""
    from transformers.cache_utils import DynamicCache

    some = next(e for e in entries if e is not None)
    width = max(len(e.tokens) for e in entries if e is not None)
    mask = torch.zeros((len(entries), width), dtype=torch.long, device=device)  # (R, C)
    layers = []
    for layer, (k0, v0) in enumerate(some.layers):
        keys = k0.new_zeros((len(entries), k0.shape[1], width, k0.shape[3]))  # (R, H, C, D)
        values = v0.new_zeros((len(entries), v0.shape[1], width, v0.shape[3]))
        for row, entry in enumerate(entries):
            if entry is not None:
                n = len(entry.tokens)
                keys[row, :, width - n:] = entry.layers[layer][0][0]
                values[row, :, width - n:] = entry.layers[layer][1][0]
        layers.append((keys, values))
    for row, entry in enumerate(entries):
        if entry is not None:
            mask[row, width - len(entry.tokens):] = 1
    return DynamicCache(ddp_cache_data=layers), mask


def row_kv(cache: Any, row: int, columns: torch.Tensor) -> tuple[KV, ...]:
    """Row ``row``'s keys and values at ``columns`` (1-D index tensor), per layer ``(1, H, len(columns), D)``."""
    return tuple((layer.keys[row:row + 1, :, columns], layer.values[row:row + 1, :, columns])  # copies
                 for layer in cache.layers)


__all__ = ["EpisodeKVCache", "KVEntry", "batched_past", "reusable", "row_kv"]
