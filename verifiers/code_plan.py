"""Which tests the parent decides: reading assert statements with ``ast`` so expected values never enter
the sandbox, and judging the values the sandbox reports.

A test of the form ``assert <expr> == <literal>`` (the MBPP / HumanEval shape; also ``!=``, ``<``, ``in``,
``is None`` / ``True`` / ``False``, ``assert <expr>``, ``assert not <expr>``, ``math.isclose(<expr>,
<literal>)`` and ``abs(<expr> - <literal>) < <literal>``) becomes a *value step*: the sandbox computes
``<expr>`` and reports its value in a tagged JSON encoding; the parent decodes it into plain Python data
(never candidate objects) and compares it with the literal, which it parsed itself. A candidate can
therefore only choose which value it reports, which it could do anyway by computing it: an ``__eq__`` that
always answers True, a forged result line or a patched module cannot make a wrong value pass, because the
expected value is never in the sandbox. Tests of any other shape run inside the sandbox as before and are
reported as decided inside.

HumanEval's ``def check(candidate): ...`` followed by ``check(entry_point)`` is split into one test per
``assert`` of the body (other statements run in order in the check's own scope).

Example:
    >>> from dapo_env.types import CodeTests
    >>> plan = plan_tests(CodeTests(tests=("assert add(1, 2) == 3", "assert sorted(f()) == g()")))
    >>> [(s.kind, s.source) for s in plan.steps]
    [('value', 'add(1, 2)'), ('test', 'assert sorted(f()) == g()')]
    >>> plan.checks[0].expect.judge(decode({"i": "3"}))
    True
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from dataclasses import dataclass
from typing import Any

from dapo_env.types import CodeTests

MAX_DEPTH = 64  # nesting of a reported value
MAX_NODES = 200_000  # elements of a reported value
_SAFE_CALLS = {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "dict": dict, "sorted": sorted,
               "float": float, "int": int, "str": str, "bytes": bytes, "complex": complex, "bool": bool}
_ISCLOSE_DEFAULTS = {"rel_tol": 1e-9, "abs_tol": 0.0}


class Opaque:
    """A reported value of a type the encoding does not carry (a generator, a custom object): equal to
    nothing and neither true nor false, so no test decided outside can pass with it."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name[:80]

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("the truth value of an opaque candidate object is not decided outside the sandbox")

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


class DecodeError(ValueError):
    """A reported value that is not a well-formed encoding (too deep, too large, unknown tag)."""


def decode(data: Any) -> Any:
    """Plain Python data from the sandbox's tagged JSON encoding (see the harness in ``code.py``).

    Example:
        >>> decode({"t": [{"i": "1"}, {"s": "a"}, None, True]})
        (1, 'a', None, True)
    """
    return _decode(data, 0, [MAX_NODES])


def _decode(data: Any, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise DecodeError("reported value is too deep or too large")
    if data is None or isinstance(data, bool):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise DecodeError(f"malformed reported value {str(data)[:60]!r}")
    (tag, body), = data.items()
    if tag == "i":
        if not isinstance(body, str) or len(body) > 4000:
            raise DecodeError("reported integer is malformed or too long")
        return int(body)
    if tag == "f":
        return float.fromhex(body)
    if tag == "c":
        return complex(float.fromhex(body[0]), float.fromhex(body[1]))
    if tag == "s":
        if not isinstance(body, str):
            raise DecodeError("reported string is malformed")
        return body
    if tag in ("y", "Y"):
        raw = bytes.fromhex(body)
        return raw if tag == "y" else bytearray(raw)
    if tag == "r":
        return range(*(int(x) for x in body))
    if tag == "o":
        return Opaque(str(body))
    if tag not in ("l", "t", "S", "F", "d") or not isinstance(body, list):
        raise DecodeError(f"unknown tag {tag!r} in a reported value")
    if tag == "d":
        return {_hashable(_decode(k, depth + 1, budget)): _decode(v, depth + 1, budget) for k, v in body}
    values = [_decode(x, depth + 1, budget) for x in body]
    if tag == "l":
        return values
    if tag == "t":
        return tuple(values)
    return set(map(_hashable, values)) if tag == "S" else frozenset(map(_hashable, values))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        raise DecodeError("reported set element or dict key is unhashable") from None
    return value


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
_OPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.In: "in", ast.NotIn: "not_in"}


@dataclass(frozen=True)
class Expectation:
    """How the parent judges a reported value ``v``: ``op`` is ``eq``, ``ne``, ``is``, ``is_not``, ``truthy``,
    ``falsy``, ``lt``/``le``/``gt``/``ge``/``in``/``not_in`` (``v < value``; ``r_lt`` etc. for ``value < v``),
    ``close`` (``math.isclose``) or ``abs_lt`` / ``abs_le`` (``abs(v - value) < abs_tol``)."""

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
        if self.op.startswith("r_") and self.op[2:] in _COMPARE:
            return _COMPARE[self.op[2:]](self.value, got)
        if self.op in ("truthy", "falsy"):
            return bool(got) is (self.op == "truthy")
        if not isinstance(got, (int, float)):
            return False
        if self.op == "close":
            return math.isclose(got, self.value, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        gap = abs(got - self.value)
        return gap < self.abs_tol if self.op == "abs_lt" else gap <= self.abs_tol


@dataclass(frozen=True)
class Step:
    """One thing the harness does, in order: ``value`` (compute ``source`` and report it), ``test`` (run
    ``source``, report pass/fail) or ``exec`` (run ``source`` silently; a failure fails the tests after it).
    ``index`` is the test number (``-1`` for ``exec``); ``scoped`` steps run in the check function's scope."""

    kind: str
    index: int
    source: str
    scoped: bool = False


@dataclass(frozen=True)
class Check:
    """A test as reported to the user: its source, and (when decided outside) its expectation."""

    index: int
    source: str
    expect: Expectation | None  # None: decided inside the sandbox

    @property
    def outside(self) -> bool:
        return self.expect is not None


@dataclass(frozen=True)
class TestPlan:
    """The harness's steps for a ``CodeTests``' assert tests, the checks, and the check-scope binding."""

    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    scope: tuple[str, str] | None = None  # (parameter, entry point) of a HumanEval-style check function


def plan_tests(tests: CodeTests) -> TestPlan:
    """Split ``tests.tests`` into steps; see the module docstring for the shapes decided outside."""
    steps: list[Step] = []
    checks: list[Check] = []
    scope = None
    for text in tests.tests:
        module = _parse(text)
        check = _check_function(module) if module is not None else None
        if check is not None:
            param, target, prelude, body = check
            scope = (param, target)
            steps.extend(Step("exec", -1, ast.unparse(node)) for node in prelude)
            for node in body:
                _add(node, text, steps, checks, scoped=True)
        elif module is not None and len(module.body) == 1 and isinstance(module.body[0], ast.Assert):
            _add(module.body[0], text, steps, checks, scoped=False)
        else:
            _add_inside(text, steps, checks, scoped=False)
    return TestPlan(tuple(steps), tuple(checks), scope)


def _parse(text: str) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError):
            return None


def _check_function(module: ast.Module) -> tuple[str, str, list[ast.stmt], list[ast.stmt]] | None:
    """``(param, target, prelude, body)`` for ``...; def check(param): body; check(target)``, else None."""
    if len(module.body) < 2:
        return None
    last = module.body[-1]
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name)
            and len(last.value.args) == 1 and isinstance(last.value.args[0], ast.Name) and not last.value.keywords):
        return None
    name, target = last.value.func.id, last.value.args[0].id
    defs = [n for n in module.body[:-1] if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(defs) != 1 or len(defs[0].args.args) != 1 or defs[0].decorator_list:
        return None
    prelude = [n for n in module.body[:-1] if n is not defs[0]]
    return defs[0].args.args[0].arg, target, prelude, list(defs[0].body)


def _add(node: ast.stmt, text: str, steps: list[Step], checks: list[Check], *, scoped: bool) -> None:
    if not isinstance(node, ast.Assert):
        if any(isinstance(n, ast.Assert) for n in ast.walk(node)):
            _add_inside(ast.unparse(node), steps, checks, scoped=scoped)
        else:
            steps.append(Step("exec", -1, ast.unparse(node), scoped))
        return
    split = _value_test(node.test)
    if split is None:
        _add_inside(ast.unparse(node) if scoped else text, steps, checks, scoped=scoped)
        return
    expr, expect = split
    index = len(checks)
    steps.append(Step("value", index, ast.unparse(expr), scoped))
    checks.append(Check(index, ast.unparse(node) if scoped else text.strip(), expect))


def _add_inside(text: str, steps: list[Step], checks: list[Check], *, scoped: bool) -> None:
    index = len(checks)
    steps.append(Step("test", index, text, scoped))
    checks.append(Check(index, text.strip(), None))


def _value_test(test: ast.expr) -> tuple[ast.expr, Expectation] | None:
    """``(expression computed inside, expectation)`` for a supported assert condition, else None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _compare_test(test.left, test.ops[0], test.comparators[0])
    if isinstance(test, ast.Call):
        close = _isclose_test(test)
        if close is not None:
            return close
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return (test.operand, Expectation("falsy")) if literal(test.operand) is _NO else None
    if not isinstance(test, (ast.BoolOp, ast.Compare)):
        return test, Expectation("truthy")  # ``assert f(x)``, and a constant ``assert True, "message"``
    return None


def _compare_test(left: ast.expr, op: ast.cmpop, right: ast.expr) -> tuple[ast.expr, Expectation] | None:
    if isinstance(op, (ast.Eq, ast.NotEq)):
        for expr, other in ((left, right), (right, left)):
            value = literal(other)
            if value is not _NO and literal(expr) is _NO:
                return expr, Expectation("eq" if isinstance(op, ast.Eq) else "ne", value)
        return None
    if isinstance(op, (ast.Is, ast.IsNot)):
        if isinstance(right, ast.Constant) and (right.value is None or isinstance(right.value, bool)):
            return left, Expectation("is" if isinstance(op, ast.Is) else "is_not", right.value)
        return None
    if isinstance(op, (ast.Lt, ast.LtE)):
        close = _abs_test(left, right, "abs_lt" if isinstance(op, ast.Lt) else "abs_le")
        if close is not None:
            return close
    name = _OPS.get(type(op))
    if name is None:
        return None
    if literal(right) is not _NO and literal(left) is _NO:
        return left, Expectation(name, literal(right))
    if literal(left) is not _NO and literal(right) is _NO:
        return right, Expectation(f"r_{name}", literal(left))
    return None


def _abs_test(left: ast.expr, right: ast.expr, op: str) -> tuple[ast.expr, Expectation] | None:
    tol = literal(right)
    if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "abs"
            and len(left.args) == 1 and isinstance(left.args[0], ast.BinOp) and isinstance(left.args[0].op, ast.Sub)
            and _is_real(tol)):
        return None
    a, b = left.args[0].left, left.args[0].right
    for expr, other in ((a, b), (b, a)):
        value = literal(other)
        if _is_real(value) and literal(expr) is _NO:
            return expr, Expectation(op, value, abs_tol=float(tol))
    return None


def _isclose_test(call: ast.Call) -> tuple[ast.expr, Expectation] | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "isclose" or len(call.args) != 2:
        return None
    tolerances = dict(_ISCLOSE_DEFAULTS)
    for keyword in call.keywords:
        value = literal(keyword.value)
        if keyword.arg not in tolerances or not _is_real(value):
            return None
        tolerances[keyword.arg] = float(value)
    for expr, other in ((call.args[0], call.args[1]), (call.args[1], call.args[0])):
        value = literal(other)
        if _is_real(value) and literal(expr) is _NO:
            return expr, Expectation("close", value, **tolerances)
    return None


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Missing:
    pass


_NO = _Missing()
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def literal(node: ast.expr) -> Any:
    """The value of a literal expression (``ast.literal_eval`` plus ``set(...)``, ``float('inf')``,
    ``tuple(...)``, arithmetic on number literals and the like), or a sentinel when it is not one. Never runs
    any other code.

    Example:
        >>> literal(ast.parse("set([1, 2])", mode="eval").body), literal(ast.parse("(3 + 5, 3 * 5)", mode="eval").body)
        ({1, 2}, (8, 15))
    """
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SAFE_CALLS and not node.keywords:
        args = [literal(arg) for arg in node.args]
        if all(arg is not _NO for arg in args) and len(args) <= 1:
            try:
                return _SAFE_CALLS[node.func.id](*args)
            except (ValueError, TypeError, OverflowError, MemoryError):
                return _NO
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = literal(node.operand)
        if _is_real(value):
            return -value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = literal(node.left), literal(node.right)
        if _is_real(left) and _is_real(right) and max(abs(left), abs(right)) < 1e18:
            try:
                return _ARITHMETIC[type(node.op)](left, right)
            except (ArithmeticError, ValueError):
                return _NO
    if isinstance(node, (ast.Tuple, ast.List)):  # containers of arithmetic: ``(3 + 5, 3 * 5)``
        items = [literal(item) for item in node.elts]
        if all(item is not _NO for item in items):
            return tuple(items) if isinstance(node, ast.Tuple) else items
    return _NO


__all__ = ["Check", "DecodeError", "Expectation", "Opaque", "Step", "TestPlan", "decode", "literal", "plan_tests"]
