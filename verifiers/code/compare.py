"""How a program's output is compared with a test's expected output: pure functions of (expected, actual).

Modes (``COMPARE_MODES``; a user checker program is the fifth, run sandboxed by :mod:`.programs`):

- ``"exact"``: the same text, byte for byte (after decoding; ``\\r\\n`` counts as ``\\n``);
- ``"whitespace"``: the same whitespace-separated tokens (spaces, tabs, line breaks and trailing blanks
  do not matter: testlib's ``wcmp``, what most judges do);
- ``"float"``: the same tokens, where two tokens that both read as numbers match when they are within
  ``tolerance`` absolutely or relatively (``|a - b| <= tolerance * max(1, |b|)``); ``nan`` matches ``nan``;
- ``"unordered"``: the same non-blank lines in any order (each line's tokens compared as in
  ``"whitespace"``), e.g. "print all pairs" problems.

The verdict is decided here, in the parent: the expected output never enters the sandbox.

Example:
    >>> compare_output("whitespace", "1 2\\n3\\n", "1  2 3")
    True
    >>> compare_output("float", "0.333333", "0.3333334", tolerance=1e-6)
    True
    >>> compare_output("unordered", "a\\nb\\n", "b\\na")
    True
    >>> compare_output("exact", "1\\n", "1")
    False
"""

from __future__ import annotations

import math
from collections import Counter

COMPARE_MODES = ("exact", "whitespace", "float", "unordered")
CHECKER = "checker"


def compare_output(mode: str, expected: str, actual: str, *, tolerance: float = 1e-6) -> bool:
    """Whether ``actual`` is a right answer for ``expected`` under ``mode`` (see the module doc)."""
    if mode == "exact":
        return actual.replace("\r\n", "\n") == expected.replace("\r\n", "\n")
    if mode == "whitespace":
        return actual.split() == expected.split()
    if mode == "float":
        got, want = actual.split(), expected.split()
        return len(got) == len(want) and all(_close(g, w, tolerance) for g, w in zip(got, want))
    if mode == "unordered":
        return _lines(actual) == _lines(expected)
    raise ValueError(f"unknown comparison mode {mode!r}; valid: {[*COMPARE_MODES, CHECKER]}")


def _close(got: str, want: str, tolerance: float) -> bool:
    if got == want:
        return True
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tolerance * max(1.0, abs(b))


def _lines(text: str) -> Counter[tuple[str, ...]]:
    return Counter(tuple(line.split()) for line in text.splitlines() if line.strip())


def check_mode(mode: str, tolerance: float) -> None:
    """Raise a one-line error naming the fix for a mode or tolerance that cannot be used."""
    if mode not in (*COMPARE_MODES, CHECKER):
        raise ValueError(f"compare must be one of {[*COMPARE_MODES, CHECKER]}, got {mode!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a number in [0, 1), got {tolerance!r}")


__all__ = ["CHECKER", "COMPARE_MODES", "check_mode", "compare_output"]
