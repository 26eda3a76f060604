"""Values reported by the code sandbox, as plain data, and how the parent judges them.

The harness in ``code.py`` encodes a computed value in a tagged JSON form (``{"i": "3"}`` an int, ``{"f":
<hex>}`` a float, ``{"s": ...}`` a str, ``{"l"|"t"|"S"|"F": [...]}`` list/tuple/set/frozenset, ``{"d":
[[k, v], ...]}`` a dict, ``{"y"|"Y": hex}`` bytes/bytearray, ``{"c": [re, im]}`` complex, ``{"r": [start, stop,
step]}`` range, JSON ``null``/``true``/``false``, and ``{"o": type name}`` for anything else). :func:`decode`
turns it into plain Python data, never into candidate objects (nothing is unpickled), and
:class:`Expectation` compares that data with the test's expected value, which the parent parsed from the
test itself. Equality is Python's ``==`` on plain data: ``True == 1`` and ``1.0 == 1`` hold as they would in
the original assert, ``(1, 2) == [1, 2]`` does not, and a value of any other type (:class:`Opaque`: a
generator, a numpy array, a custom class) fails every test, whatever its ``__eq__`` says.

Example:
    >>> decode({"t": [{"i": "1"}, {"s": "a"}, None, True]})
    (1, 'a', None, True)
    >>> Expectation("eq", [1, 2]).judge(decode({"l": [{"i": "1"}, {"f": "0x1.0000000000000p+1"}]}))
    True
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64  # nesting of a reported value
MAX_NODES = 200_000  # elements of a reported value
MAX_INT_CHARS = 4000  # digits of a reported int
MAX_HASHED = 5000  # set elements and dict keys of a reported value (hash collisions cost quadratic time)


class Opaque:
    """A reported value of a type the encoding does not carry (a generator, a custom object): equal to
    nothing, neither true nor false, so no test decided outside can pass with it."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name[:80]

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("the truth value of an opaque candidate object is not decided outside the sandbox")

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


class DecodeError(ValueError):
    """A reported value that is not a well-formed encoding (too deep, too large, unknown tag)."""


def decode(data: Any) -> Any:
    """Plain Python data from the sandbox's tagged JSON encoding (module docstring); raises
    :class:`DecodeError` for anything malformed, too deep or too large."""
    budget = {"nodes": MAX_NODES, "hashed": MAX_HASHED}
    try:
        return _decode(data, 0, budget)
    except (TypeError, ValueError, OverflowError, IndexError) as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"malformed reported value ({type(exc).__name__})") from None


_CONTAINERS = frozenset("ltSFd")


def _decode(data: Any, depth: int, budget: dict[str, int]) -> Any:
    budget["nodes"] -= 1
    if depth > MAX_DEPTH or budget["nodes"] < 0:
        raise DecodeError("reported value is too deep or too large")
    if data is None or isinstance(data, bool):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise DecodeError(f"malformed reported value {str(data)[:60]!r}")
    (tag, body), = data.items()
    if tag in _CONTAINERS:
        if not isinstance(body, list):
            raise DecodeError(f"malformed {tag!r} container in a reported value")
        if tag == "d":
            return dict(_hashed([(_decode(k, depth + 1, budget), _decode(v, depth + 1, budget)) for k, v in body],
                                budget, key=True))
        values = [_decode(x, depth + 1, budget) for x in body]
        if tag == "l":
            return values
        if tag == "t":
            return tuple(values)
        return (set if tag == "S" else frozenset)(_hashed(values, budget))
    if tag not in _SCALARS:
        raise DecodeError(f"unknown tag {tag!r} in a reported value")
    if not isinstance(body, (str, list)):
        raise DecodeError(f"malformed {tag!r} value in a reported value")
    return _SCALARS[tag](body)


def _int(body: str) -> int:
    if not isinstance(body, str) or len(body) > MAX_INT_CHARS:
        raise DecodeError("reported integer is malformed or too long")
    return int(body)


def _text(body: str) -> str:
    if not isinstance(body, str):
        raise DecodeError("reported string is malformed")
    return body


def _complex(body: list[str]) -> complex:
    real, imag = body
    return complex(float.fromhex(real), float.fromhex(imag))


def _range(body: list[int]) -> range:
    if len(body) != 3 or not all(type(x) is int for x in body):
        raise DecodeError("reported range is malformed")
    return range(*body)


_SCALARS = {"i": _int, "f": float.fromhex, "c": _complex, "s": _text, "y": bytes.fromhex,
            "Y": lambda body: bytearray(bytes.fromhex(body)), "r": _range, "o": lambda body: Opaque(str(body))}


def _hashed(items: list[Any], budget: dict[str, int], *, key: bool = False) -> list[Any]:
    """``items`` (or the keys of ``(key, value)`` pairs), checked hashable and counted: a set built from
    many values the candidate chose to collide would take quadratic time in the parent."""
    budget["hashed"] -= len(items)
    if budget["hashed"] < 0:
        raise DecodeError(f"reported value has more than {MAX_HASHED} set elements and dict keys")
    for item in items:
        try:
            hash(item[0] if key else item)
        except TypeError:
            raise DecodeError("reported set element or dict key is unhashable") from None
    return items


@dataclass(frozen=True)
class Expectation:
    """How the parent judges a reported value ``v``: ``op`` is ``eq``, ``ne``, ``is``, ``is_not``, ``truthy``,
    ``falsy``, ``lt``/``le``/``gt``/``ge``/``in``/``not_in`` (``v < value``; ``r_lt`` etc. for ``value < v``),
    ``close`` (``math.isclose``), ``abs_lt`` / ``abs_le`` (``abs(v - value) < tol``), or ``same`` / ``differ``
    for a pair ``v = (left, right)`` whose both sides were computed (``left == right`` / ``!=``)."""

    op: str
    value: Any = None
    rel_tol: float = 1e-9
    abs_tol: float = 0.0

    def judge(self, got: Any) -> bool:
        """True when ``got`` (decoded plain data) passes. Never raises; a value holding an object the
        encoding could not carry (:class:`Opaque`) fails every test."""
        try:
            return not _has_opaque(got, 0) and bool(self._judge(got))
        except Exception:  # noqa: BLE001 - a value that cannot be compared fails the test
            return False

    def _judge(self, got: Any) -> bool:
        if self.op == "eq":
            return got == self.value
        if self.op == "ne":
            return got != self.value
        if self.op == "is":
            return got is self.value
        if self.op == "is_not":
            return got is not self.value
        if self.op in _COMPARE:
            return _COMPARE[self.op](got, self.value)
        if self.op in _COMPARE_REVERSED:
            return _COMPARE[_COMPARE_REVERSED[self.op]](self.value, got)
        if self.op in ("same", "differ"):  # got = (left, right), both computed inside, compared here
            left, right = got
            return (left == right) is (self.op == "same")
        if self.op in ("truthy", "falsy"):
            return bool(got) is (self.op == "truthy")
        if not isinstance(got, (int, float)):
            return False
        if self.op == "close":
            return math.isclose(got, self.value, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        gap = abs(got - self.value)
        return gap < self.abs_tol if self.op == "abs_lt" else gap <= self.abs_tol


def _has_opaque(value: Any, depth: int) -> bool:
    if isinstance(value, Opaque):
        return True
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return any(_has_opaque(k, depth + 1) or _has_opaque(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_opaque(x, depth + 1) for x in value)
    return False


_COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
            "in": lambda a, b: a in b, "not_in": lambda a, b: a not in b}
_COMPARE_REVERSED = {"r_lt": "lt", "r_le": "le", "r_gt": "gt", "r_ge": "ge", "r_in": "in", "r_not_in": "not_in"}


__all__ = ["DecodeError", "Expectation", "Opaque", "decode"]
