"""Which tests are decided outside the sandbox, how reported values are read back and judged, and the
per-test feedback ``CodeVerifier.report`` gives."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, SandboxLimits
from dapo_env.verifiers.code_plan import plan_tests
from dapo_env.verifiers.code_values import DecodeError, Expectation, Opaque, decode
from dapo_env.verifiers.sandbox import isolation

VERIFIER = CodeVerifier(limits=SandboxLimits(wall_s=10.0))
needs_bwrap = pytest.mark.skipif(not isolation("full").ok, reason="the code sandbox needs bubblewrap (apt-get "
                                 "install bubblewrap)")


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# -- the plan ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("test", "expression", "op", "value"), [
    ("assert add(1, 2) == 3", "add(1, 2)", "eq", 3),
    ("assert 3 == add(1, 2)", "add(1, 2)", "eq", 3),
    ("assert f(x) != [1, 2]", "f(x)", "ne", [1, 2]),
    ("assert f() == (1, 'a', None, True)", "f()", "eq", (1, "a", None, True)),
    ("assert set(f()) == set([3, 1])", "set(f())", "eq", {1, 3}),
    ("assert f() == frozenset({1})", "f()", "eq", frozenset({1})),
    ("assert f() == -2.5", "f()", "eq", -2.5),
    ("assert f() == (3 + 5, 2 * 4)", "f()", "eq", (8, 8)),
    ("assert f() == {0: frozenset(), 'a': [-1]}", "f()", "eq", {0: frozenset(), "a": [-1]}),
    ("assert f() == float('inf')", "f()", "eq", math.inf),
    ("assert f() is None", "f()", "is", None),
    ("assert f() is not True", "f()", "is_not", True),
    ("assert f(1)", "f(1)", "truthy", None),
    ("assert not f(1)", "f(1)", "falsy", None),
    ("assert f() < 10", "f()", "lt", 10),
    ("assert 10 >= f()", "f()", "r_ge", 10),
    ("assert f() in (1, 2)", "f()", "in", (1, 2)),
    ("assert 3 in f()", "f()", "r_in", 3),
    ("assert math.isclose(f(), 2.0, rel_tol=0.001)", "f()", "close", 2.0),
    ("assert abs(f() - 0.5) < 1e-6", "f()", "abs_lt", 0.5),
    ("assert candidate([1]) == [2], 'message'", "candidate([1])", "eq", [2]),
])
def test_value_tests_are_decided_outside(test: str, expression: str, op: str, value: object) -> None:
    plan = plan_tests(CodeTests(tests=(test,)))
    (step,), (check,) = plan.steps, plan.checks
    assert (step.kind, check.expression, check.expect.op, check.expect.value) == ("value", expression, op, value)
    assert check.outside and check.source == test
    assert step.source == (f"not not {expression}" if op in ("truthy", "falsy") else expression)


def test_the_expected_value_never_enters_the_sandbox() -> None:
    plan = plan_tests(CodeTests(tests=("assert f(1) == 918273645", "assert g('x') == 'secret-answer'")))
    sent = repr([(s.kind, s.source) for s in plan.steps])
    assert "918273645" not in sent and "secret-answer" not in sent


@pytest.mark.parametrize(("test", "parts"), [
    ("assert f(x) == g(y)", [("f(x)", "same", "g(y)")]),
    ("assert f() == {set()}", [("f()", "same", "{set()}")]),  # not a literal (it raises): inside
    ("assert f(1) == 2 and f(2) == 3", []),  # a shape it does not rewrite: a plain assert inside
    ("for i in range(3):\n    assert f(i) == i * 2\n    assert f(i) >= 0", [("f(i)", "same", "i * 2"), ("f(i)", "ge", "")]),
    ("root = 1\nassert f(root) == False", [("f(root)", "eq", "")]),
    ("try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass", []),  # under try: stays an assert
    ("f(3)", []),
])
def test_other_tests_run_inside_as_generators(test: str, parts: list) -> None:
    plan = plan_tests(CodeTests(tests=(test,)))
    (step,), (check,) = plan.steps, plan.checks
    assert step.kind == "test" and not check.outside and step.source.startswith("def __dapo_test__():")
    assert [(p.expression, p.expect.op, p.other) for p in check.parts] == parts


def test_humaneval_check_functions_split_per_statement_with_the_prompts_helpers() -> None:
    prefix = "import math\n\ndef helper(x):\n    return x + 1\n\n\ndef solve(x):\n    \"\"\"Doc.\"\"\"\n"
    check = ("METADATA = {}\n\ndef check(candidate):\n    data = [1, 2]\n    assert candidate(1) == 2\n"
             "    for x in data:\n        assert candidate(x) == helper(x)\n\ncheck(solve)\n")
    plan = plan_tests(CodeTests(tests=(check,), prefix=prefix, entry_point="solve"))
    assert [(s.kind, s.scoped) for s in plan.steps] == [
        ("exec", False), ("exec", True), ("exec", True), ("value", True), ("test", True)]
    assert plan.steps[1].source == "import math\ndef helper(x):\n    return x + 1"  # not the stub of solve
    assert plan.scope == ("candidate", "solve") and len(plan.checks) == 2


@needs_bwrap
def test_truth_tests_take_any_objects_truth_as_assert_would() -> None:
    """``assert f(x)`` with a ``re.Match`` passes, as in Python: the truth is taken inside (passing a truth
    test needs no hidden value), the value itself is never compared."""
    program = "import re\ndef f(s):\n    return re.search('^a', s)\n"
    tests = CodeTests(tests=("assert f('abc')", "assert not f('xyz')", "for s in ['ab', 'ac']:\n    assert f(s)"))
    assert VERIFIER(fenced(program), tests).reason == "passed:3/3;inside:1"
    assert not VERIFIER(fenced(program), CodeTests(tests=("assert f('b')",))).correct


# -- values ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("encoded", "value"), [
    ({"i": "-12"}, -12),
    ({"f": (0.1).hex()}, 0.1),
    ({"c": [(1.0).hex(), (-2.0).hex()]}, complex(1, -2)),
    ({"s": "é"}, "é"),
    ({"y": "00ff"}, b"\x00\xff"),
    ({"l": [None, True, {"t": []}]}, [None, True, ()]),
    ({"S": [{"i": "1"}]}, {1}),
    ({"F": []}, frozenset()),
    ({"d": [[{"s": "k"}, {"l": []}]]}, {"k": []}),
    ({"r": [0, 5, 2]}, range(0, 5, 2)),
])
def test_decode_gives_plain_data(encoded: dict, value: object) -> None:
    decoded = decode(encoded)
    assert decoded == value and type(decoded) is type(value)


@pytest.mark.parametrize("bad", [{"i": 5}, {"x": 1}, {"l": "ab"}, [1], {"S": [{"l": []}]}, {"i": "1" * 5000},
                                 {"lt": []}, {"c": {"a": 1}}, {"r": [1, 2]}, {"d": [[1]]}, {"f": 3}, {"y": "zz"},
                                 {"i": "1", "s": "a"}])
def test_decode_refuses_malformed_values(bad: object) -> None:
    with pytest.raises(DecodeError):
        decode(bad)


def test_decode_refuses_values_nested_too_deep() -> None:
    deep: dict = {"l": []}
    for _ in range(100):
        deep = {"l": [deep]}
    with pytest.raises(DecodeError, match="too deep"):
        decode(deep)


@pytest.mark.parametrize(("expect", "got", "passed"), [
    (Expectation("eq", 1), True, True),  # plain data compares as the original assert would: True == 1
    (Expectation("eq", True), 1, True),
    (Expectation("eq", 1), 1.0, True),
    (Expectation("eq", (1, 2)), [1, 2], False),
    (Expectation("eq", {"a": 1}), {"a": 1}, True),
    (Expectation("eq", 0.1 + 0.2), 0.3, False),  # exact, like ==
    (Expectation("close", 0.3), 0.1 + 0.2, True),
    (Expectation("abs_lt", 0.5, abs_tol=1e-6), 0.5000001, True),
    (Expectation("abs_lt", 0.5, abs_tol=1e-6), "0.5", False),
    (Expectation("eq", [1]), Opaque("ndarray"), False),
    (Expectation("ne", [1]), Opaque("ndarray"), False),  # an opaque value fails every test, != too
    (Expectation("eq", [1]), [Opaque("A")], False),
    (Expectation("truthy"), Opaque("A"), False),
    (Expectation("falsy"), [], True),
    (Expectation("same"), ([1, 2], [1, 2]), True),
    (Expectation("differ"), (1, 1.0), False),
    (Expectation("lt", 3), "a", False),  # a comparison that raises fails
    (Expectation("is", None), None, True),
])
def test_expectations_judge_plain_data(expect: Expectation, got: object, passed: bool) -> None:
    assert expect.judge(got) is passed


# no backticks in strings: the program travels inside a markdown fence, which a "```" in its text would close
TEXT = st.characters(blacklist_characters="`")
PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(TEXT, max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.integers() | st.text(TEXT, max_size=4), inner, max_size=3)
    | st.frozensets(st.integers() | st.text(TEXT, max_size=4), max_size=3),
    max_leaves=12,
)


@needs_bwrap
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(PLAIN, min_size=1, max_size=6))
def test_any_plain_value_round_trips_through_the_sandbox(values: list) -> None:
    """The candidate returns each value; the test expects its repr: every one passes, and a changed
    expectation fails."""
    program = f"VALUES = {values!r}\ndef f(i):\n    return VALUES[i]\n"
    tests = tuple(f"assert f({i}) == {value!r}" for i, value in enumerate(values))
    assert all(c.outside for c in plan_tests(CodeTests(tests=tests)).checks)
    assert VERIFIER(fenced(program), CodeTests(tests=tests)).correct
    changed = CodeTests(tests=(f"assert f(0) == {[values[0]]!r}",))  # the value wrapped in a list
    assert not VERIFIER(fenced(program), changed).correct


# -- feedback ---------------------------------------------------------------------------------------
@needs_bwrap
def test_report_gives_one_short_message_per_test() -> None:
    tests = CodeTests(tests=("assert add(1, 2) == 918273645", "assert add(0, 0) == 0", "assert boom() == 1",
                             "for i in range(3):\n    assert add(i, i) == i * 3"),
                      stdio=(("2 3\n", "5\n"),))
    program = ("def add(a, b):\n    return a + b\n\ndef boom():\n    return 1 / 0\n\n"
               "if __name__ == '__main__':\n    a, b = map(int, input().split())\n    print(a * b)\n")
    report = VERIFIER.report(fenced(program), tests)
    assert report.result.reason == "tests_failed:4/5;inside:1"
    assert [(t.passed, t.decided, t.message) for t in report.tests] == [
        (False, "outside", "add(1, 2) returned 3"),
        (True, "outside", "passed"),
        (False, "outside", "raised ZeroDivisionError: division by zero"),
        (False, "inside", "add(i, i) returned 2 (compared with i * 3)"),
        (False, "outside", "on input '2 3\\n' printed '6\\n'"),
    ]
    assert all("918273645" not in t.message for t in report.tests)  # the expected value is never shown


@needs_bwrap
def test_report_says_when_a_run_was_cut_or_the_program_failed() -> None:
    slow = CodeVerifier(limits=SandboxLimits(wall_s=1.0))
    report = slow.report(fenced("def f():\n    while True:\n        pass\n"), CodeTests(tests=("assert f() == 1",)))
    assert report.result.reason == "tests_failed:1/1;timeout"
    assert report.tests[0].message == "did not finish within the time limit"
    broken = VERIFIER.report(fenced("import not_a_module\ndef f():\n    return 1\n"), CodeTests(tests=("assert f() == 1",)))
    assert broken.tests[0].message == ("raised NameError: name 'f' is not defined (the program itself raised "
                                       "ModuleNotFoundError: No module named 'not_a_module')")
    assert VERIFIER.report("no code here", CodeTests(tests=("assert f() == 1",))).tests == ()


def test_decode_bounds_what_the_parent_hashes() -> None:
    """Set elements the candidate chose to collide (ints k * (2**61 - 1) all hash alike) would cost the
    parent quadratic time: a value with more than MAX_HASHED of them is refused, fast."""
    from dapo_env.verifiers.code_values import MAX_HASHED

    colliding = {"S": [{"i": str(k * (2 ** 61 - 1))} for k in range(MAX_HASHED + 1)]}
    with pytest.raises(DecodeError, match="set elements"):
        decode(colliding)
    assert len(decode({"F": colliding["S"][:100]})) == 100
