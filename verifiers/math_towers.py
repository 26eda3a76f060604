"""Exact comparison of integer power towers too large to write out: ``10^{10^{10}}``, ``1^{10^{10^{10}}}``.

A tower is read from a canonical answer made only of non-negative integers, ``^`` (right-associative,
so ``10^10^10`` is ``10^{10^{10}}``; an exponent without braces takes all its digits), braces,
parentheses and products (``\\cdot``, ``\\times``, ``*``). Its value is kept exact and never expanded:
every power ``b^E`` with ``b >= 2`` is stored as ``r^F`` where ``r`` is *primitive* (not itself a
perfect power; ``b = r^k``, ``F = k E``). Every integer above 1 has exactly one such form, so two
towers are equal exactly when their primitive bases and their exponents are equal (exponents are
compared the same way), and a tower is compared with a plain integer by evaluating it only as far as
that integer's size allows.

Anything outside this (a sum, a negative base, a product that is not a single power) is left undecided
(``None``), never guessed. Work is bounded by the size caps below.

Example:
    >>> tower_equal("10^{10000000000}", "10^10^10"), tower_equal("1^{10^{10^{10}}}", "1")
    (True, True)
    >>> tower_equal("(10^{10})^{10}", "10^{10^{10}}"), tower_equal("2^{2^{2^{2}}}", "65536")
    (False, True)
    >>> tower_equal("4^{2^{100}}", "2^{2^{101}}"), tower_equal("10^{10^{10}}", "10^{10^{10}}+1")
    (True, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_BASE_BITS = 256  # bases must be at most this large (for the perfect-power test)
MAX_INT_BITS = 4096  # plain integers (literals, products of literals) are capped here
MAX_LENGTH = 2000
_TOKEN = re.compile(r"\d{1,400}|\\cdot|\\times|[\^{}()*]")
_ALLOWED = re.compile(r"(?:\d|\\cdot|\\times|[\^{}()*])+")


@dataclass(frozen=True, slots=True)
class Tower:
    """``base ** exponent`` with a primitive ``base`` >= 2 and an exponent >= 1."""

    base: int
    exponent: int | Tower


Value = int | Tower


class _Undecided(Exception):
    """The value cannot be represented exactly within the caps."""


def _primitive(n: int) -> tuple[int, int]:
    """``(r, k)`` with ``n == r**k`` and ``r`` not a perfect power (``n >= 2``)."""
    if n.bit_length() > MAX_BASE_BITS:
        raise _Undecided("base too large")
    for k in range(n.bit_length(), 1, -1):
        r = _iroot(n, k)
        if r is not None:
            inner, j = _primitive(r)
            return inner, j * k
    return n, 1


def _iroot(n: int, k: int) -> int | None:
    """The exact integer ``k``-th root of ``n``, or ``None``."""
    lo, hi = 1, 1 << (n.bit_length() // k + 1)
    while lo <= hi:
        mid = (lo + hi) // 2
        p = mid**k
        if p == n:
            return mid
        lo, hi = (mid + 1, hi) if p < n else (lo, mid - 1)
    return None


def power(base: Value, exponent: Value) -> Value:
    """``base ** exponent`` in primitive form (raises ``_Undecided`` beyond the caps)."""
    if exponent == 0:
        return 1
    if isinstance(base, int):
        if base in (0, 1):
            return base
        r, k = _primitive(base)
        return Tower(r, multiply(k, exponent))
    return Tower(base.base, multiply(base.exponent, exponent))  # (r^E)^F = r^(E F)


def multiply(a: Value, b: Value) -> Value:
    """``a * b`` when the product is an integer or a single power of a primitive base."""
    a = a if isinstance(a, int) else _small(a, MAX_INT_BITS) or a  # a small tower is an integer
    b = b if isinstance(b, int) else _small(b, MAX_INT_BITS) or b
    if isinstance(a, int) and isinstance(b, int):
        product = a * b
        if product.bit_length() > MAX_INT_BITS:
            raise _Undecided("integer too large")
        return product
    if isinstance(a, int):
        a, b = b, a
    if isinstance(b, int):
        if b in (0, 1):
            return 0 if b == 0 else a
        r, j = _primitive(b)  # r^j * R^E is one power only when r == R
        b = Tower(r, j)
    if a.base != b.base:
        raise _Undecided("product of powers of different bases")
    if not (isinstance(a.exponent, int) and isinstance(b.exponent, int)):
        raise _Undecided("sum of tower exponents")
    return Tower(a.base, multiply(1, a.exponent + b.exponent))


def equal(a: Value, b: Value) -> bool:
    """Exact equality of two values (integers or towers in primitive form)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, Tower) and isinstance(b, Tower):
        return a.base == b.base and equal(a.exponent, b.exponent)
    tower, number = (a, b) if isinstance(a, Tower) else (b, a)
    return _small(tower, number.bit_length()) == number


def _small(value: Value, max_bits: int) -> int | None:
    """``value`` as an ``int`` if it has at most ``max_bits`` bits, else ``None`` (it is larger)."""
    if isinstance(value, int):
        return value if value.bit_length() <= max_bits else None
    exponent = _small(value.exponent, 64)
    if exponent is None or exponent * (value.base.bit_length() - 1) > max_bits:
        return None  # r^E >= 2^((bits(r) - 1) E) is already too large
    result = value.base**exponent
    return result if result.bit_length() <= max_bits else None


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _TOKEN.findall(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise _Undecided(f"expected {expected}")
        self.pos += 1
        return tok

    def product(self, depth: int) -> Value:
        value = self.tower(depth)
        while self.peek() in ("\\cdot", "\\times", "*"):
            self.take()
            value = multiply(value, self.tower(depth))
        return value

    def tower(self, depth: int) -> Value:
        if depth > 240:
            raise _Undecided("too deep")
        base = self.atom(depth)
        if self.peek() == "^":
            self.take()
            return power(base, self.tower(depth + 1))  # right-associative
        return base

    def atom(self, depth: int) -> Value:
        tok = self.take()
        if tok.isdigit():
            if len(tok) > 400:
                raise _Undecided("long literal")
            return int(tok)
        close = {"{": "}", "(": ")"}.get(tok)
        if close is None:
            raise _Undecided(f"token {tok}")
        value = self.product(depth + 1)
        self.take(close)
        return value


def read_tower(text: str) -> Value | None:
    """The exact value of an integer tower written in ``text``, or ``None`` if it is not one."""
    if len(text) > MAX_LENGTH or not _ALLOWED.fullmatch(text):
        return None
    parser = _Parser(text)
    try:
        value = parser.product(0)
        if parser.peek() is not None:
            return None
    except (_Undecided, RecursionError, ValueError):
        return None
    return value


def tower_equal(a: str, b: str) -> bool | None:
    """Whether two canonical answers are the same integer, when at least one is a power tower.

    ``None`` when either side is not a tower or plain integer within the caps (undecided).
    """
    if "^" not in a + b:
        return None
    va, vb = read_tower(a), read_tower(b)
    if va is None or vb is None:
        return None
    return equal(va, vb)


__all__ = ["Tower", "equal", "multiply", "power", "read_tower", "tower_equal"]
