"""A text space for prompts and responses: any Unicode string up to a maximum length.

Gymnasium's own :class:`gymnasium.spaces.Text` only accepts characters from a fixed charset (by
default letters and digits), so it rejects LaTeX, spaces, newlines and non-Latin scripts: every real
prompt. :class:`UnicodeText` accepts any ``str``.

Vector environments: Gymnasium's generic fallbacks for a custom :class:`~gymnasium.spaces.Space`
already do the right thing for strings (``batch_space`` gives a ``Tuple`` of copies,
``concatenate`` gives a ``tuple`` of the items, ``create_empty_array`` gives ``None``, and iterating
a ``Tuple`` of unregistered subspaces iterates the items), so ``SyncVectorEnv`` and
``AsyncVectorEnv(shared_memory=False)`` batch strings as tuples. Shared memory cannot hold strings of
arbitrary length, so ``create_shared_memory`` raises for this space with a message naming the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.error import CustomSpaceError
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_shared_memory

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


@create_shared_memory.register(UnicodeText)
def _create_shared_memory_unicode_text(space: UnicodeText, n: int = 1, ctx: Any = None) -> Any:
    raise CustomSpaceError(
        "UnicodeText observations are strings of any length and cannot live in shared memory: use "
        "AsyncVectorEnv(..., shared_memory=False) (gym.make_vec(..., vector_kwargs={'shared_memory': False}))"
    )


__all__ = ["UnicodeText"]
