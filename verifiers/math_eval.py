"""In-process identity testing of LaTeX expressions by evaluation at fixed sample points.

A small recursive-descent evaluator covers the expressions most answers are written in: ``+ - * /``,
implicit multiplication, ``^``, ``\\frac``, ``\\sqrt[n]{}``, ``\\pi``, ``e``, ``i``, ``\\ln``, ``\\log``,
``\\log_b``, trigonometric functions, ``\\binom`` and small factorials, with any single-letter variables
(subscripts allowed). Values stay exact :class:`fractions.Fraction` as long as the arithmetic is
rational; irrational operations switch to complex floats.

Two expressions are compared at :data:`POINTS` fixed rational points (so the result is deterministic):

* every point exact and equal -> equal (a polynomial/rational identity test, exact at each point);
* any point where they differ (exactly, or by more than ``1e-6`` relative in floats) -> not equal;
* float agreement to ``1e-11`` relative at every point -> equal;
* anything else, or anything the evaluator does not understand -> undecided (the symbolic stage).

Sizes are capped (exponents, factorials, digit counts, recursion depth), so this never gets slow.
"""

from __future__ import annotations

import cmath
import math
import re
from fractions import Fraction

Value = Fraction | complex
POINTS = 3
MAX_POW = 256
MAX_BITS = 4096
MAX_DEPTH = 60
MAX_LENGTH = 400
_TOKEN = re.compile(r"\\[A-Za-z]+|\d+(?:\.\d*)?|\.\d+|[A-Za-z]|\S")
_SAMPLES = (Fraction(7, 3), Fraction(-5, 11), Fraction(13, 4), Fraction(3, 17), Fraction(-19, 6), Fraction(23, 9),
            Fraction(29, 5), Fraction(-2, 13), Fraction(31, 7), Fraction(11, 19))
_FUNCS = {"\\sin": cmath.sin, "\\cos": cmath.cos, "\\tan": cmath.tan, "\\ln": cmath.log, "\\log": cmath.log,
          "\\exp": cmath.exp, "\\sec": lambda z: 1 / cmath.cos(z), "\\csc": lambda z: 1 / cmath.sin(z),
          "\\cot": lambda z: 1 / cmath.tan(z), "\\arcsin": cmath.asin, "\\arccos": cmath.acos,
          "\\arctan": cmath.atan, "\\sinh": cmath.sinh, "\\cosh": cmath.cosh, "\\tanh": cmath.tanh}
_MUL = {"*", "\\cdot", "\\times"}
_DIV = {"/", "\\div"}


class _Unsupported(Exception):
    """The evaluator does not understand the input (the symbolic stage decides instead)."""


def _to_complex(v: Value) -> complex:
    return complex(v.numerator / v.denominator) if isinstance(v, Fraction) else v


def _check(v: Value) -> Value:
    if isinstance(v, Fraction):
        if v.numerator.bit_length() > MAX_BITS or v.denominator.bit_length() > MAX_BITS:
            raise _Unsupported("too large")
        return v
    if not (math.isfinite(v.real) and math.isfinite(v.imag)):
        raise _Unsupported("not finite")
    return v


def _pow(base: Value, exp: Value) -> Value:
    if isinstance(exp, Fraction) and exp.denominator == 1 and isinstance(base, Fraction):
        k = exp.numerator
        if abs(k) > MAX_POW or (base.numerator.bit_length() + base.denominator.bit_length()) * abs(k) > MAX_BITS:
            raise _Unsupported("power too large")
        if base == 0 and k < 0:
            raise ZeroDivisionError
        return base**k
    if isinstance(exp, Fraction) and exp.denominator == 2 and isinstance(base, Fraction) and base >= 0:
        root = _exact_sqrt(base)
        if root is not None:
            return _pow(root, Fraction(exp.numerator))
    b, e = _to_complex(base), _to_complex(exp)
    if abs(e) > MAX_POW or (b == 0 and e.real <= 0):
        raise _Unsupported("power")
    if b.imag == 0 and b.real > 0 and e.imag == 0:
        return complex(b.real**e.real)
    return b**e


def _exact_sqrt(v: Fraction) -> Fraction | None:
    if v < 0:
        return None
    n, d = math.isqrt(v.numerator), math.isqrt(v.denominator)
    return Fraction(n, d) if n * n == v.numerator and d * d == v.denominator else None


class _Parser:
    def __init__(self, text: str, env: dict[str, Fraction]) -> None:
        self.toks = _TOKEN.findall(text)
        self.pos = 0
        self.env = env
        self.depth = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise _Unsupported(f"expected {expected}")
        self.pos += 1
        return tok

    def parse(self) -> Value:
        value = self.expr()
        if self.peek() is not None:
            raise _Unsupported(f"trailing {self.peek()}")
        return value

    def expr(self) -> Value:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Unsupported("too deep")
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = _check(value + rhs if op == "+" else value - rhs)
        self.depth -= 1
        return value

    def term(self) -> Value:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok in _MUL:
                self.take()
                value = _check(value * self.unary())
            elif tok in _DIV:
                self.take()
                value = _check(value / self.unary())
            elif tok is not None and self._starts_atom(tok):
                value = _check(value * self.power())
            else:
                return value

    def unary(self) -> Value:
        if self.peek() in ("-", "+"):
            sign = -1 if self.take() == "-" else 1
            return sign * self.unary()
        return self.power()

    def power(self) -> Value:
        base = self.atom()
        while self.peek() == "!":
            self.take()
            if not (isinstance(base, Fraction) and base.denominator == 1 and 0 <= base <= 200):
                raise _Unsupported("factorial")
            base = Fraction(math.factorial(int(base)))
        if self.peek() == "^":
            self.take()
            exp = self.group_or_token()
            if self.peek() == "^":
                raise _Unsupported("stacked powers")
            base = _check(_pow(base, exp))
        return base

    def group_or_token(self) -> Value:
        """A ``{...}`` group or a single token (``x^2``, ``\\frac{1}{2}``).

        A run of digits is one token: ``2^10`` is ``2^{10}`` (what its writer means, although LaTeX would
        typeset the 0 after the exponent); ``\\frac12`` was already split by the normaliser.
        """
        tok = self.peek()
        if tok == "{":
            return self.braced()
        return self.atom()

    def argument(self) -> Value:
        """A macro argument: ``{...}`` or one character (``\\frac12`` is ``\\frac{1}{2}``)."""
        tok = self.peek()
        if tok is not None and tok.isdigit() and len(tok) > 1:
            self.toks[self.pos] = tok[1:]
            return Fraction(int(tok[0]))
        return self.group_or_token()

    def braced(self) -> Value:
        self.take("{")
        value = self.expr()
        self.take("}")
        return value

    @staticmethod
    def _starts_atom(tok: str) -> bool:
        return tok in ("(", "{") or tok[0].isalnum() or tok[0] == "." or (
            tok.startswith("\\") and tok not in _MUL and tok not in _DIV)

    def atom(self) -> Value:
        tok = self.take()
        if tok[0].isdigit() or tok[0] == ".":
            if len(tok) > 60:
                raise _Unsupported("long number")
            whole, _, frac = tok.partition(".")
            return Fraction(int((whole or "0") + frac), 10 ** len(frac))
        if tok == "(":
            value = self.expr()
            self.take(")")
            return value
        if tok == "{":
            value = self.expr()
            self.take("}")
            return value
        if tok == "\\frac":
            num = self.argument()
            den = self.argument()
            return _check(num / den)
        if tok == "\\binom":
            n, k = self.argument(), self.argument()
            if not all(isinstance(v, Fraction) and v.denominator == 1 and 0 <= v <= 10_000 for v in (n, k)):
                raise _Unsupported("binom")
            return Fraction(math.comb(int(n), int(k)))
        if tok == "\\sqrt":
            index: Value = Fraction(2)
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
            radicand = self.argument()
            if isinstance(radicand, Fraction) and index == 2:
                root = _exact_sqrt(radicand)
                if root is not None:
                    return root
            if isinstance(radicand, Fraction) and radicand < 0 and index == 2:
                return complex(0, math.sqrt(-radicand))
            return _check(_pow(radicand, 1 / index if isinstance(index, Fraction) else 1 / index))
        if tok == "\\pi":
            return complex(math.pi)
        if tok in _FUNCS:
            base: Value | None = None
            if tok == "\\log" and self.peek() == "_":
                self.take()
                base = self.group_or_token()
            power: Value | None = None
            if self.peek() == "^":  # \sin^2 x
                self.take()
                power = self.group_or_token()
            arg = self.power() if self.peek() != "(" else self.atom()
            value = _FUNCS[tok](_to_complex(arg))
            if base is not None:
                value = value / cmath.log(_to_complex(base))
            return _check(_pow(value, power) if power is not None else complex(value))
        if len(tok) == 1 and tok.isalpha():
            name = tok
            if self.peek() == "_":
                self.take()
                sub = self.take()
                if sub == "{":
                    parts = []
                    while self.peek() not in ("}", None):
                        parts.append(self.take())
                    self.take("}")
                    sub = "".join(parts)
                name = f"{tok}_{sub}"
            if name in self.env:
                return self.env[name]
            if name == "e":
                return complex(math.e)
            if name == "i":
                return complex(0, 1)
            raise _Unsupported(f"unknown symbol {name}")
        raise _Unsupported(f"token {tok}")


_VAR = re.compile(r"(?<![\\A-Za-z])([A-Za-z])(?![A-Za-z])(?:_(\{[^{}]*\}|[A-Za-z0-9]))?")


def _variables(*texts: str) -> list[str]:
    names: set[str] = set()
    for text in texts:
        for m in _VAR.finditer(text):
            if m.group(1) in ("e", "i") and not m.group(2):
                continue
            names.add(m.group(1) + ("_" + m.group(2).strip("{}") if m.group(2) else ""))
    return sorted(names)


def evaluate(text: str, env: dict[str, Fraction] | None = None) -> Value | None:
    """Value of a LaTeX expression with variables bound by ``env``, or ``None`` if not understood.

    Example:
        >>> evaluate("\\\\frac{x+1}{2}", {"x": Fraction(3)})
        Fraction(2, 1)
    """
    if len(text) > MAX_LENGTH:
        return None
    try:
        return _Parser(text, env or {}).parse()
    except (_Unsupported, ZeroDivisionError, OverflowError, ValueError, TypeError, RecursionError, IndexError):
        return None


def identity(a: str, b: str, *, exact_only: bool = False) -> bool | None:
    """Whether expressions ``a`` and ``b`` are identical (see the module docstring), or ``None``.

    With ``exact_only``, agreement in floating point only (``1.4142`` vs ``\\sqrt{2}``) counts as
    not equal: used when one side is a rounded decimal approximation.
    """
    names = _variables(a, b)
    if len(names) > 6:
        return None
    for point in range(POINTS):
        env = {name: _SAMPLES[(point * 3 + k) % len(_SAMPLES)] + point for k, name in enumerate(names)}
        va, vb = evaluate(a, env), evaluate(b, env)
        if va is None or vb is None:
            return None
        if isinstance(va, Fraction) and isinstance(vb, Fraction):
            if va != vb:
                return False
            continue
        ca, cb = _to_complex(va), _to_complex(vb)
        diff, scale = abs(ca - cb), max(1.0, abs(ca), abs(cb))
        if scale > 1e12:
            return None
        if diff > 1e-6 * scale or exact_only:
            return False
        if diff > 1e-11 * scale:
            return None
        if not names:
            break
    return True


def proportional(a: str, b: str) -> bool | None:
    """Whether ``a = c * b`` for one constant ``c != 0`` (equations ``a = 0`` and ``b = 0`` agree)."""
    names = _variables(a, b)
    if len(names) > 6:
        return None
    ratio: complex | None = None
    for point in range(POINTS + 1):
        env = {name: _SAMPLES[(point * 3 + k) % len(_SAMPLES)] + point for k, name in enumerate(names)}
        va, vb = evaluate(a, env), evaluate(b, env)
        if va is None or vb is None:
            return None
        ca, cb = _to_complex(va), _to_complex(vb)
        if abs(cb) < 1e-12 or abs(ca) < 1e-12:
            if max(abs(ca), abs(cb)) > 1e-9:
                return False
            continue
        r = ca / cb
        if ratio is None:
            ratio = r
        elif abs(r - ratio) > 1e-9 * max(1.0, abs(ratio)):
            return False
    return True if ratio is not None else None


__all__ = ["evaluate", "identity", "proportional"]
