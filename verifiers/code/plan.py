"""Which tests the parent decides: assert statements read with ``ast``, so expected values stay outside.

A test of the form ``assert <expr> == <literal>`` (the MBPP / HumanEval shape; also ``!=``, ``is None`` /
``True`` / ``False``, ``<``/``<=``/``>``/``>=``/``in`` against a literal, ``assert <expr>``, ``assert not
<expr>``, ``math.isclose(<expr>, <literal>)`` and ``abs(<expr> - <literal>) < <literal>``) becomes a *value
step*: the sandbox computes ``<expr>`` and reports its value as plain data (``values.py``); the parent
compares it with the literal, which it parsed itself and never sends. A candidate can only choose the value
it reports, which it could do anyway by computing it: an ``__eq__`` that always answers True, a forged
record or a patched module cannot make a wrong value pass.

Every other test (a loop, a test that builds its inputs, ``assert f(x) == g(y)``) runs inside the sandbox
as a generator: each assert in it that has one of the shapes above, or ``<a> == <b>`` / ``<a> != <b>``,
yields its values instead of asserting, and the parent judges them as plain data too (so no candidate
object's ``__eq__`` is trusted there either); the expected side of ``<a> == <b>`` is computed inside,
though, and asserts of other shapes, in nested functions or under ``try`` stay plain asserts. Such tests
are reported as decided inside.

HumanEval's ``def check(candidate): ...`` followed by ``check(entry_point)`` is split into one test per
top-level statement of the body that holds an assert (other statements run in order in the check's own
scope, which also gets the prompt's helper functions back, so a candidate cannot redefine ``poly`` or
``encode_cyclic`` for the tests).

Example:
    >>> from dapo_env.types import CodeTests
    >>> plan = plan_tests(CodeTests(tests=("assert add(1, 2) == 3", "assert sorted(f()) == g()")))
    >>> [(s.kind, s.index) for s in plan.steps], plan.checks[0].expect
    ([('value', 0), ('test', 1)], Expectation(op='eq', value=3, rel_tol=1e-09, abs_tol=0.0))
    >>> [(part.expression, part.expect.op, part.other) for part in plan.checks[1].parts]
    [('sorted(f())', 'same', 'g()')]
"""

from __future__ import annotations

import ast
import operator
import sys
import warnings
from dataclasses import dataclass
from typing import Any

from dapo_env.types import CodeTests
from .values import Expectation

TEST_FUNCTION = "__dapo_test__"  # the generator an inside test becomes; the harness pops it and runs it
_SAFE_CALLS = {"set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "dict": dict, "sorted": sorted,
               "float": float, "int": int, "str": str, "bytes": bytes, "complex": complex, "bool": bool}
_ISCLOSE_DEFAULTS = {"rel_tol": 1e-9, "abs_tol": 0.0}
_OPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.In: "in", ast.NotIn: "not_in"}


@dataclass(frozen=True)
class Step:
    """One thing the harness does, in order. ``value``: evaluate the expression ``source`` and report its
    value; ``test``: run ``source``, which defines the generator ``TEST_FUNCTION``, and report each value it
    yields, then that it finished; ``exec``: run ``source`` silently (if it raises, the tests after it
    fail). ``index`` is the test number (``-1`` for ``exec``); ``scoped`` steps run in the check scope."""

    kind: str
    index: int
    source: str
    scoped: bool = False


@dataclass(frozen=True)
class Part:
    """A rewritten assert of a test run inside: the expression whose value it yields (for ``a == b``: ``a``,
    then ``b`` as ``other``) and how the parent judges the yielded values."""

    expression: str
    expect: Expectation
    other: str = ""


@dataclass(frozen=True)
class Check:
    """One test: its source, and how the parent judges it. ``expect`` is set for a value test decided
    outside; ``parts[k]`` judges what the k-th rewritten assert of a test run inside yields."""

    index: int
    source: str
    expect: Expectation | None = None
    parts: tuple[Part, ...] = ()
    expression: str = ""  # a value test's computed expression, as shown in messages

    @property
    def outside(self) -> bool:
        return self.expect is not None


@dataclass(frozen=True)
class TestPlan:
    """The harness's steps for a ``CodeTests``' assert tests, the checks, and the check-scope binding."""

    __test__ = False  # not a pytest test class

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
            helpers = _prompt_helpers(tests.prefix, tests.entry_point)
            if helpers:
                steps.append(Step("exec", -1, helpers, scoped=True))
            for node in body:
                _add(node, ast.unparse(node), steps, checks, scoped=True)
        else:  # each test string is one test, even one without an assert (it passes if it runs)
            node = module.body[0] if module is not None and len(module.body) == 1 else None
            split = _value_test(node.test) if isinstance(node, ast.Assert) else None
            if split is not None:
                _add_value(*split, text.strip(), steps, checks, scoped=False)
            else:
                _add_inside(module, text.strip(), steps, checks, scoped=False)
    return TestPlan(tuple(steps), tuple(checks), scope)


def _parse(text: str) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
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


def _prompt_helpers(prefix: str, entry_point: str | None) -> str:
    """The prompt's top-level code except the function the candidate writes (imports, helper functions)."""
    module = _parse(prefix) if prefix and entry_point else None
    if module is None:
        return ""
    keep = [n for n in module.body if not (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                                           and n.name == entry_point)]
    return "\n".join(ast.unparse(n) for n in keep) if len(keep) < len(module.body) else ""


def _computed(expr: ast.expr, expect: Expectation) -> ast.expr:
    """What the sandbox evaluates for ``expect``: the value, or for a truth test (``assert f(x)``) its truth
    as Python's ``assert`` would take it (``not not``: syntax, no name to rebind). The truth of any object
    may be reported: passing a truth test needs no hidden value (``True`` passes it)."""
    if expect.op in ("truthy", "falsy"):
        return ast.UnaryOp(ast.Not(), ast.UnaryOp(ast.Not(), expr))
    return expr


def _add_value(expr: ast.expr, expect: Expectation, source: str, steps: list[Step], checks: list[Check], *,
               scoped: bool) -> None:
    steps.append(Step("value", len(checks), ast.unparse(_computed(expr, expect)), scoped))
    checks.append(Check(len(checks), source, expect, expression=ast.unparse(expr)))


def _add(node: ast.stmt, source: str, steps: list[Step], checks: list[Check], *, scoped: bool) -> None:
    """One statement of a check function: a value step, a test run inside, or (no assert in it) a silent
    step."""
    split = _value_test(node.test) if isinstance(node, ast.Assert) else None
    if split is not None:
        _add_value(*split, source, steps, checks, scoped=scoped)
    elif any(isinstance(n, ast.Assert) for n in ast.walk(node)):
        _add_inside(ast.Module(body=[node], type_ignores=[]), source, steps, checks, scoped=scoped)
    else:
        steps.append(Step("exec", -1, ast.unparse(node), scoped))


def _add_inside(module: ast.Module | None, source: str, steps: list[Step], checks: list[Check], *,
                scoped: bool) -> None:
    """A test run inside, as a generator whose rewritten asserts yield their values (or, if the test does
    not parse or the rewrite does not compile, as a generator that runs the test as it is)."""
    generator, parts = _as_generator(module) if module is not None else (None, ())
    if generator is None:
        generator, parts = f"def {TEST_FUNCTION}():\n    exec({source!r}, globals())\n    yield from ()", ()
    steps.append(Step("test", len(checks), generator, scoped))
    checks.append(Check(len(checks), source, None, parts))


class _YieldAsserts(ast.NodeTransformer):
    """Rewrites ``assert`` statements at the generator's own level into ``yield (k, values...)``."""

    def __init__(self) -> None:
        self.parts: list[Part] = []

    def _keep(self, node: ast.AST) -> ast.AST:
        return node  # nested scopes and try blocks (which may catch AssertionError) keep their asserts

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _keep
    visit_Try = visit_TryStar = _keep

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        split = _value_test(node.test)
        if split is not None:
            values = [_computed(*split)]
            self.parts.append(Part(ast.unparse(split[0]), split[1]))
        elif (isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
              and isinstance(node.test.ops[0], (ast.Eq, ast.NotEq))):
            values = [node.test.left, node.test.comparators[0]]
            expect = Expectation("same" if isinstance(node.test.ops[0], ast.Eq) else "differ")
            self.parts.append(Part(ast.unparse(values[0]), expect, ast.unparse(values[1])))
        else:
            return node
        item = ast.Tuple([ast.Constant(len(self.parts) - 1), *values], ast.Load())
        return ast.copy_location(ast.Expr(ast.Yield(item)), node)


def _as_generator(module: ast.Module) -> tuple[str | None, tuple[Part, ...]]:
    """``def TEST_FUNCTION(): global <names it binds>; <body with asserts yielding>; yield from ()``: the
    ``global`` keeps module-level semantics (its assignments land where the test's would)."""
    rewriter = _YieldAsserts()
    body = [rewriter.visit(node) for node in module.body]
    names = sorted(_bound_names(module.body))
    head: list[ast.stmt] = [ast.Global(names)] if names else []
    tail = ast.Expr(ast.YieldFrom(ast.Tuple([], ast.Load())))
    function = ast.FunctionDef(name=TEST_FUNCTION, args=ast.arguments([], [], None, [], [], None, []),
                               body=head + body + [tail], decorator_list=[], returns=None, type_comment=None,
                               **({"type_params": []} if sys.version_info >= (3, 12) else {}))
    source = ast.unparse(ast.fix_missing_locations(ast.Module([function], [])))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<test>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, ()
    return source, tuple(rewriter.parts)


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Names the statements bind at their own level (not inside nested functions, classes or lambdas)."""
    names: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _value_test(test: ast.expr) -> tuple[ast.expr, Expectation] | None:
    """``(expression computed inside, expectation)`` for a supported assert condition, else None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq)):
            for expr, other in ((left, right), (right, left)):
                value = literal(other)
                if value is not _NO and literal(expr) is _NO:
                    return expr, Expectation("eq" if isinstance(op, ast.Eq) else "ne", value)
            return None
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value in (None, True, False):
            if right.value is None or isinstance(right.value, bool):
                return left, Expectation("is" if isinstance(op, ast.Is) else "is_not", right.value)
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
    if isinstance(test, ast.Call):
        close = _isclose_test(test)
        if close is not None:
            return close
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if literal(test.operand) is _NO:
            return test.operand, Expectation("falsy")
        return None
    if not isinstance(test, (ast.BoolOp, ast.Compare)):
        return test, Expectation("truthy")  # ``assert f(x)``, and a constant ``assert True, "message"``
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


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


_NO = _Missing()


def literal(node: ast.expr) -> Any:
    """The value of a literal expression (``ast.literal_eval`` plus ``set(...)``, ``float('inf')``,
    ``tuple(...)`` and the like applied to literals), or a sentinel when it is not one. Never runs other code.

    Example:
        >>> literal(ast.parse("set([1, 2])", mode="eval").body)
        {1, 2}
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
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):  # containers of the above: ``(3 + 5, frozenset())``
        items = [literal(item) for item in node.elts]
        if all(item is not _NO for item in items):
            return _container(type(node), items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys, values = [literal(k) for k in node.keys], [literal(v) for v in node.values]  # type: ignore[arg-type]
        if all(item is not _NO for item in keys + values):
            return _container(ast.Dict, list(zip(keys, values)))
    return _NO


def _container(kind: type, items: list[Any]) -> Any:
    try:
        if kind is ast.Set:
            return set(items)
        if kind is ast.Dict:
            return dict(items)
    except TypeError:  # an unhashable element or key
        return _NO
    return tuple(items) if kind is ast.Tuple else items


__all__ = ["TEST_FUNCTION", "Check", "Part", "Step", "TestPlan", "literal", "plan_tests"]
