"""A text space for prompts and responses: any Unicode string up to a maximum length.

Gymnasium's own :class:`gymnasium.spaces.Text` only accepts characters from a fixed charset (by
default letters and digits), so it rejects LaTeX, spaces, newlines and non-Latin scripts: every real
prompt. :class:`UnicodeText` accepts any ``str``.

Vector environments: Gymnasium's generic fallbacks for a custom :class:`~gymnasium.spaces.Space`
already do the right thing for strings (``batch_space`` gives a ``Tuple`` of copies,
``concatenate`` gives a ``tuple`` of the items, ``create_empty_array`` gives ``None``, and iterating
a ``Tuple`` of unregistered subspaces iterates the items), so ``SyncVectorEnv`` and
``AsyncVectorEnv(shared_memory=False)`` batch strings as tuples. For ``AsyncVectorEnv``'s default
``shared_memory=True`` this module registers :class:`SharedText`: each sub-environment writes its
string as UTF-8 into a fixed slot of shared memory (a longer string goes through a file in a private
temporary directory), and the batch the parent reads is a live view that decodes the current strings
on access, so observations are never stale; ``AsyncVectorEnv(copy=True)`` (its default) hands out a
plain ``tuple`` snapshot.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

# Unicode blocks that sample() draws from: Latin, Greek, maths operators, CJK, emoji. Every code
# point sampled is re-checked with str.isprintable().
_SAMPLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x20, 0x7E),  # ASCII printable
    (0xA1, 0x17F),  # Latin-1 supplement, Latin Extended-A
    (0x391, 0x3C9),  # Greek
    (0x2200, 0x22FF),  # mathematical operators
    (0x4E00, 0x4FFF),  # CJK unified ideographs (a slice)
    (0x1F600, 0x1F64F),  # emoticons
)


class UnicodeText(Space[str]):
    """Any Python ``str`` of ``min_length`` to ``max_length`` characters.

    Args:
        max_length: the longest string the space contains (characters).
        min_length: the shortest string the space contains.
        sample_max_length: the longest string :meth:`sample` draws (sampling a million characters
            is never what a test wants); capped at ``max_length``.
        seed: seeds the space's generator used by :meth:`sample`.

    Example:
        >>> space = UnicodeText(max_length=100, seed=0)
        >>> space.contains("Compute $\\\\frac{1}{2} + x^2$ — 答案")
        True
        >>> isinstance(space.sample(), str)
        True
    """

    def __init__(
        self,
        max_length: int = 1_000_000,
        *,
        min_length: int = 0,
        sample_max_length: int = 64,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if not isinstance(min_length, int) or min_length < 0:
            raise ValueError(f"UnicodeText min_length must be an int >= 0, got {min_length!r}")
        if not isinstance(max_length, int) or max_length < min_length:
            raise ValueError(
                f"UnicodeText max_length must be an int >= min_length ({min_length}), got {max_length!r}"
            )
        if not isinstance(sample_max_length, int) or sample_max_length < 0:
            raise ValueError(f"UnicodeText sample_max_length must be an int >= 0, got {sample_max_length!r}")
        self.min_length = min_length
        self.max_length = max_length
        self.sample_max_length = max(min_length, min(sample_max_length, max_length))
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Strings have no fixed-size array form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of printable Unicode characters (length uniform in the sample range).

        Args:
            mask: must be ``None`` (this space has no masking).
            probability: must be ``None``.
        """
        if mask is not None or probability is not None:
            raise ValueError("UnicodeText.sample takes no mask or probability: call sample() without them")
        length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        sizes = np.array([hi - lo + 1 for lo, hi in _SAMPLE_RANGES], dtype=np.float64)
        chars: list[str] = []
        while len(chars) < length:
            block = int(self.np_random.choice(len(_SAMPLE_RANGES), p=sizes / sizes.sum()))
            lo, hi = _SAMPLE_RANGES[block]
            char = chr(int(self.np_random.integers(lo, hi + 1)))
            if char.isprintable():
                chars.append(char)
        return "".join(chars)

    def contains(self, x: Any) -> bool:
        """True for a ``str`` whose length is within ``[min_length, max_length]``."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def to_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return [str(s) for s in sample_n]

    def from_jsonable(self, sample_n: Sequence[str]) -> list[str]:
        return [str(s) for s in sample_n]

    def __repr__(self) -> str:
        return f"UnicodeText(min_length={self.min_length}, max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    __hash__ = None  # type: ignore[assignment]  # mutable RNG state; like gymnasium's spaces


SHARED_SLOT_BYTES = 1 << 16
"""UTF-8 bytes of each sub-environment's string held in shared memory; longer strings go through a file."""

_OVERFLOW = -1  # a slot's size when its string is in the overflow file


class SharedText:
    """Shared memory for one string per sub-environment of an ``AsyncVectorEnv``.

    Each of the ``n`` slots holds a size and up to ``slot_bytes`` of UTF-8; a longer string is written
    to ``<directory>/<index>.txt`` (created on first use, removed with the buffer). The worker process
    writes its slot before it answers the parent through its pipe, so the parent reads the string of
    the current step. Built by Gymnasium's ``create_shared_memory`` for :class:`UnicodeText`.

    Example:
        >>> buffer = SharedText(2, slot_bytes=8)
        >>> buffer.write(0, "short"); buffer.write(1, "longer than eight bytes: ∑")
        >>> buffer.read(0), buffer.read(1)
        ('short', 'longer than eight bytes: ∑')
    """

    def __init__(self, n: int, ctx: Any = None, *, slot_bytes: int = SHARED_SLOT_BYTES) -> None:
        ctx = ctx if ctx is not None else multiprocessing
        self.n, self.slot_bytes = n, slot_bytes
        self.sizes = ctx.Array("q", n, lock=False)  # (n,) int64: bytes in the slot, or _OVERFLOW
        self.data = ctx.Array("B", n * slot_bytes, lock=False)  # (n * slot_bytes,) UTF-8
        self.directory = os.path.join(tempfile.gettempdir(), f"dapo_env_text_{uuid.uuid4().hex}")
        weakref.finalize(self, _remove_directory, self.directory, os.getpid())

    def write(self, index: int, text: str) -> None:
        """Store ``text`` as sub-environment ``index``'s string."""
        encoded = str(text).encode("utf-8")
        if len(encoded) <= self.slot_bytes:
            start = index * self.slot_bytes
            memoryview(self.data).cast("B")[start:start + len(encoded)] = encoded
            self.sizes[index] = len(encoded)
            return
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{index}.txt")
        with open(path + ".tmp", "wb") as f:
            f.write(encoded)
        os.replace(path + ".tmp", path)
        self.sizes[index] = _OVERFLOW

    def read(self, index: int) -> str:
        """Sub-environment ``index``'s current string."""
        size = self.sizes[index]
        if size == _OVERFLOW:
            with open(os.path.join(self.directory, f"{index}.txt"), "rb") as f:
                return f.read().decode("utf-8")
        start = index * self.slot_bytes
        return bytes(memoryview(self.data).cast("B")[start:start + size]).decode("utf-8")


def _remove_directory(directory: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # never from a forked worker that inherited the buffer
        shutil.rmtree(directory, ignore_errors=True)


class SharedTextBatch(Sequence[str]):
    """The batch of strings an ``AsyncVectorEnv`` with shared memory returns: a live view of a
    :class:`SharedText` that decodes on access; ``copy.deepcopy`` (what ``AsyncVectorEnv(copy=True)``
    does) gives a plain ``tuple``, and it compares equal to the tuple of its strings."""

    def __init__(self, buffer: SharedText, n: int) -> None:
        self.buffer, self.n = buffer, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self.buffer.read(i) for i in range(self.n)[index])
        if not -self.n <= index < self.n:
            raise IndexError(f"index {index} out of range for {self.n} strings")
        return self.buffer.read(index % self.n)

    def __iter__(self) -> Iterator[str]:
        return (self.buffer.read(i) for i in range(self.n))

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@create_shared_memory.register(UnicodeText)
def _create_shared_text(space: UnicodeText, n: int = 1, ctx: Any = multiprocessing) -> SharedText:
    return SharedText(n, ctx)


@read_from_shared_memory.register(UnicodeText)
def _read_shared_text(space: UnicodeText, shared_memory: SharedText, n: int = 1) -> SharedTextBatch:
    return SharedTextBatch(shared_memory, n)


@write_to_shared_memory.register(UnicodeText)
def _write_shared_text(space: UnicodeText, index: int, value: str, shared_memory: SharedText) -> None:
    shared_memory.write(index, value)


__all__ = ["SHARED_SLOT_BYTES", "SharedText", "SharedTextBatch", "UnicodeText"]
