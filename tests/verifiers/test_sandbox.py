"""The sandbox's public pieces: ``run_python`` for tool calls, per-test feedback, the isolation report, no
silent downgrade, and verdicts decided outside (which test shapes, how values are judged)."""

from __future__ import annotations

import json
import warnings

import pytest

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, verify_batch
from dapo_env.verifiers import sandbox
from dapo_env.verifiers.code_plan import plan_tests
from dapo_env.verifiers.code_values import Expectation, Opaque, decode
from dapo_env.verifiers.sandbox import SandboxLimits, SandboxUnavailable, isolation, run_python

needs_bwrap = pytest.mark.skipif(not isolation("full").ok, reason="the code sandbox needs bubblewrap (apt-get install bubblewrap)")
LIMITS = SandboxLimits(wall_s=5.0, max_output_bytes=2000)
VERIFIER = CodeVerifier(limits=LIMITS)


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# --- run_python -------------------------------------------------------------------------------------------
@needs_bwrap
def test_run_python_returns_what_the_program_printed() -> None:
    run = run_python("import sys\nprint(sum(map(int, sys.stdin.read().split())))", stdin="1 2 3", limits=LIMITS)
    assert (run.stdout, run.exit_code, run.ok) == ("6\n", 0, True)


@needs_bwrap
def test_runs_under_a_python_tracer_and_keep_it() -> None:
    """Under a debugger's or a property-test tool's tracer the sandbox still starts (the forked child's
    pre-exec step runs without the tracer) and the caller's tracer is back afterwards."""
    import sys

    seen: list[str] = []

    def tracer(frame, event, arg):
        seen.append(event)
        return tracer

    sys.settrace(tracer)
    try:
        run = run_python("print(6 * 7)")
        restored = sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert run.stdout.strip() == "42" and restored and seen


@needs_bwrap
def test_a_launch_that_fails_before_exec_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pre-exec failure of the launcher (the child died before exec: no candidate code ran) is retried; a
    persistent one still surfaces as an error, never as a verdict on the program."""
    import subprocess

    real, calls = subprocess.Popen, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise subprocess.SubprocessError("Exception occurred in preexec_fn.")
        return real(*args, **kwargs)

    monkeypatch.setattr(sandbox.subprocess, "Popen", flaky)
    assert run_python("print(6 * 7)").stdout.strip() == "42" and len(calls) == 2

    def broken(*args, **kwargs):
        raise subprocess.SubprocessError("Exception occurred in preexec_fn.")

    monkeypatch.setattr(sandbox.subprocess, "Popen", broken)
    with pytest.raises(subprocess.SubprocessError):
        run_python("print(1)")


@needs_bwrap
def test_run_python_reports_errors_timeouts_and_floods() -> None:
    crash = run_python("x = 1\nraise ValueError('bad input')", limits=LIMITS)
    assert crash.exit_code == 1 and not crash.ok
    assert "ValueError: bad input" in crash.stderr and 'File "<program>", line 2' in crash.stderr
    assert "<string>" not in crash.stderr
    slow = run_python("while True:\n    pass", limits=SandboxLimits(wall_s=1.0))
    assert slow.timed_out and not slow.ok
    flood = run_python("print('x' * 100000)", limits=LIMITS)
    assert flood.output_truncated and len(flood.stdout) == 2000


@needs_bwrap
def test_run_python_sees_nothing_of_the_host() -> None:
    code = ("import os\nprint(sorted(os.listdir('/')), os.path.exists('/etc'), os.getuid() != 0,\n"
            "      len([p for p in os.listdir('/proc') if p.isdigit()]))")
    run = run_python(code, limits=LIMITS)
    assert run.ok, run.stderr
    listing = run.stdout.split("]")[0]
    assert "'etc'" not in listing and "'home'" not in listing and "'var'" not in listing
    assert run.stdout.strip().endswith("False True 2")  # no /etc, not root, 2 processes (init and itself)


# --- feedback ------------------------------------------------------------------------------------------------
@needs_bwrap
def test_report_gives_one_message_per_test_without_expected_values() -> None:
    tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add('a', 1) == 'a1'",
                             "assert helper() == expected()"),
                      stdio=(("5\n", "5\n"),))
    program = "def add(a, b):\n    return a * b\nif __name__ == '__main__':\n    print(int(input()) + 1)"
    report = VERIFIER.report(fenced(program), tests)
    assert report.result.reason == "tests_failed:4/5;inside:1"
    messages = [t.message for t in report.tests]
    assert messages[0] == "add(1, 2) returned 2"
    assert messages[1] == "passed"
    assert messages[2].startswith("add('a', 1) raised TypeError") or messages[2] == "add('a', 1) returned 'a'"
    assert messages[3].startswith("raised NameError")
    assert messages[4] == "on input '5\\n' printed '6\\n'"
    assert [t.decided for t in report.tests] == ["outside", "outside", "outside", "inside", "outside"]
    assert not any("3" in m for m in messages[:1])  # the expected value of the first test is not shown


@needs_bwrap
def test_report_says_which_tests_did_not_run() -> None:
    tests = CodeTests(tests=("assert f(1) == 1", "assert f(2) == 2"))
    report = VERIFIER.report(fenced("def f(x):\n    if x == 2:\n        while True:\n            pass\n    return x"),
                             tests)
    assert [t.passed for t in report.tests] == [True, False]
    assert report.tests[1].message == "did not finish within the time limit"
    assert report.result.reason == "tests_failed:1/2;timeout"


# --- no silent downgrade ----------------------------------------------------------------------------------------
def test_without_bubblewrap_the_verifier_refuses_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "_probe_bwrap", lambda: "bubblewrap (bwrap) is not installed: install bubblewrap")
    layers = isolation("full")
    assert not layers.ok and layers.active == () and "install bubblewrap" in layers.missing["user_ns"]
    with pytest.raises(SandboxUnavailable, match="install bubblewrap"):
        VERIFIER(fenced("x = 1"), CodeTests(tests=("assert x == 1",)))
    with pytest.raises(SandboxUnavailable):
        verify_batch(VERIFIER, [fenced("x = 1")], [CodeTests(tests=("assert x == 1",))], workers=0)
    with pytest.raises(SandboxUnavailable):
        run_python("print(1)")


def test_weak_isolation_is_an_explicit_opt_in_that_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "_weak_warned", False)
    weak = CodeVerifier(limits=LIMITS, isolation="weak")
    tests = CodeTests(tests=("assert x == 1",))
    with pytest.warns(RuntimeWarning, match="no OS isolation"):
        assert weak(fenced("x = 1"), tests).correct
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert weak(fenced("x = 1"), tests).correct
    assert isolation("weak").active == sandbox.WEAK_LAYERS and isolation("weak").ok


@needs_bwrap
def test_isolation_names_every_layer() -> None:
    layers = isolation()
    assert layers.ok and set(sandbox.FULL_LAYERS) == set(layers.active)
    assert "pid_ns" in layers and "audit_hook" not in layers
    with pytest.raises(ValueError, match="isolation"):
        isolation("none")


# --- verdicts outside -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("test", "outside"), [
    ("assert f(1) == 2", True),
    ("assert 2 == f(1)", True),
    ("assert f(1) == (3 + 5, 3 * 5)", True),
    ("assert set(f(1)) == set([1, 2])", True),
    ("assert f(1) != 2", True),
    ("assert f(1) is None", True),
    ("assert f(1)", True),
    ("assert not f(1)", True),
    ("assert f(1) in [1, 2]", True),
    ("assert f(1) < 3", True),
    ("assert math.isclose(f(1), 2.5, rel_tol=1e-6)", True),
    ("assert abs(f(1) - 2.5) < 1e-6", True),
    ("assert True, 'a message'", True),
    ("assert f(1) == g(1)", False),
    ("assert f(1) == 1 == x", False),
    ("x = f(1)\nassert x == 2", False),
])
def test_which_shapes_are_decided_outside(test: str, outside: bool) -> None:
    assert plan_tests(CodeTests(tests=(test,))).checks[0].outside is outside


def test_humaneval_checks_split_into_one_test_per_assert() -> None:
    check = ("import math\n\ndef check(candidate):\n    y = 3\n    assert candidate(1) == 2\n"
             "    assert candidate(y) == candidate(y)\n    for x in range(3):\n        assert candidate(x) == x + 1\n"
             "\ncheck(incr)\n")
    plan = plan_tests(CodeTests(tests=(check,), entry_point="incr"))
    assert plan.scope == ("candidate", "incr")
    assert [s.kind for s in plan.steps] == ["exec", "exec", "value", "test", "test"]
    assert [c.outside for c in plan.checks] == [True, False, False]


@pytest.mark.parametrize(("expect", "value", "passes"), [
    (Expectation("eq", 3), {"i": "3"}, True),
    (Expectation("eq", 3), {"f": (3.0).hex()}, True),  # 3.0 == 3 in Python, as the original test would say
    (Expectation("eq", 3), {"i": "4"}, False),
    (Expectation("eq", [1, (2, "a")]), {"l": [{"i": "1"}, {"t": [{"i": "2"}, {"s": "a"}]}]}, True),
    (Expectation("eq", [1, 2]), {"t": [{"i": "1"}, {"i": "2"}]}, False),  # a tuple is not a list
    (Expectation("eq", {1: "a"}), {"d": [[{"i": "1"}, {"s": "a"}]]}, True),
    (Expectation("eq", 3), {"o": "Any"}, False),
    (Expectation("ne", 3), {"o": "Any"}, False),  # an opaque object passes nothing, not even !=
    (Expectation("ne", 3), {"l": [{"o": "Any"}]}, False),
    (Expectation("truthy"), {"o": "Any"}, False),
    (Expectation("is", None), None, True),
    (Expectation("is", True), {"i": "1"}, False),
    (Expectation("close", 2.5, rel_tol=1e-6), {"f": (2.5000001).hex()}, True),
    (Expectation("abs_lt", 2.5, abs_tol=1e-6), {"f": (2.6).hex()}, False),
    (Expectation("in", [1, 2]), {"i": "2"}, True),
    (Expectation("not_in", [1, 2]), {"o": "Any"}, False),
])
def test_values_are_judged_as_plain_data(expect: Expectation, value: object, passes: bool) -> None:
    assert expect.judge(decode(json.loads(json.dumps(value)))) is passes


@pytest.mark.parametrize("bad", [{"x": 1}, [1], {"i": 5}, {"l": "abc"}, {"i": "9" * 5000}])
def test_malformed_values_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        decode(bad)


def test_deep_values_are_rejected() -> None:
    deep: object = {"i": "1"}
    for _ in range(100):
        deep = {"l": [deep]}
    with pytest.raises(ValueError, match="too deep"):
        decode(deep)
    assert not Opaque("x") == Opaque("x")
