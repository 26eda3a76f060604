"""CodeVerifier: extract a Python program from a response and score it by the tests it passes.

Each candidate runs in the OS sandbox of ``sandbox.py`` (bubblewrap: fresh namespaces, an unprivileged uid,
a read-only system, a capped tmpfs, nothing outlives the run) behind the harness of ``harness.py``.
Verdicts are decided outside it: for ``assert <expr> == <literal>`` and its relatives (``plan.py``)
the sandbox only computes ``<expr>`` and reports its value; the parent decodes it into plain data
(``values.py``) and compares it with the expected value, which never enters the sandbox. Tests of
other shapes run inside as generators whose asserts yield plain values for the parent to judge; stdio
tests compare captured stdout outside. Exit codes and stdout (for asserts) are never trusted.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from dataclasses import dataclass, field, replace

from dapo_env.types import CodeTests, VerifyResult
from .harness import HARNESS
from .plan import TEST_FUNCTION, Check, TestPlan, plan_tests
from .values import DecodeError, Expectation, decode
from ..references import code_tests
from .sandbox import (
    ISOLATION_MODES,
    Isolation,
    RunOutcome,
    SandboxLimits,
    SandboxUnavailable,
    isolation,
    require_isolation,
    run_sandboxed,
)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.\-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
_MESSAGE_CHARS = 300
# What parsing or compiling model-written code may raise (deep nesting exhausts the parser's stack or memory)
_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_RESULT_KINDS = frozenset("VPX")  # a test's value, its pass (decided inside), or the exception it raised
_RECORD_KINDS = _RESULT_KINDS | {"Y", "C", "S", "E"}  # a value a test run inside yielded, the program's own
# exception, a stdio run's finish status, the end marker



def extract_code(response: str, *, require_fence: bool = False, prefix: str = "") -> str | None:
    """The program in a response: the last fenced Python block, else (policy) the whole response.

    Fences tagged ``python``/``py``/``python3`` or untagged count; blocks in other languages are skipped;
    an unclosed fence is ignored. Without any closed fence (and ``require_fence=False``), the whole
    response is taken as code only if it parses as Python and holds at least one statement that is not a
    bare expression (so prose like ``"The answer is 5"`` or a lone word is not code), or if ``prefix +
    response`` parses (a completion that continues a HumanEval prompt's function body).

    Example:
        >>> extract_code("Here:\\n```python\\nx = 1\\n```\\nand ```py\\ny = 2\\n```")
        'y = 2'
        >>> extract_code("The answer is 5.") is None
        True
    """
    blocks = [body for tag, body in _FENCE.findall(response) if tag.lower() in _PYTHON_TAGS]
    if blocks:
        code = blocks[-1].rstrip()
        return code if code.strip() else None
    if require_fence or "```" in response:
        return None
    code = response.rstrip()
    if _looks_like_code(code.strip("\n")):
        return code.strip("\n")
    if prefix and code.strip() and _compiles(prefix + code):
        return code
    return None


def _looks_like_code(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except _UNPARSABLE:
        return False
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except _UNPARSABLE:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def _compiles(code: str) -> bool:
    try:
        compile(code, "<candidate>", "exec")
    except _UNPARSABLE:
        return False
    return True


def assemble_program(code: str, tests: CodeTests) -> str:
    """The program the harness runs before ``setup`` and the tests (HumanEval's prompt handling).

    Without a ``prefix`` this is ``code``. When ``code`` does not define ``entry_point`` (e.g. a
    HumanEval completion that continues the prompt's function body), the result is ``prefix + code``.
    When it does define it, the prefix still goes first (its imports and helper functions stay available;
    the candidate's definition replaces the prompt's stub) unless that fails to compile, in which case only
    the prefix's import lines are kept.
    """
    if not tests.prefix:
        return code
    if tests.entry_point and _defines(code, tests.entry_point):
        whole = tests.prefix.rstrip("\n") + "\n\n" + code
        if _compiles(whole):
            return whole
        imports = [line for line in tests.prefix.splitlines() if line.startswith(("import ", "from "))]
        return "\n".join([*imports, code])
    return tests.prefix + code


def _normalise(text: str) -> str:
    """Trailing whitespace removed per line and trailing blank lines dropped."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).rstrip("\n")


# A test's verdict, and the letter each has in a reason's ";verdicts:" part (eval records keep the reason).
STATUSES = ("passed", "wrong_answer", "time_limit", "runtime_error", "compile_error")
STATUS_LETTERS = {"passed": "P", "wrong_answer": "W", "time_limit": "T", "runtime_error": "R", "compile_error": "C"}


def _status_of(passed: bool, message: str) -> str:
    if passed:
        return "passed"
    if "within the time limit" in message:
        return "time_limit"
    if message.startswith("raised ") or "exited with an error" in message or "crashed" in message \
            or "output limit" in message:
        return "runtime_error"
    return "wrong_answer"


@dataclass(frozen=True)
class TestReport:
    """What happened to one test: passed or not, where it was decided, and a short message.

    ``message`` never holds an expected value: for a test decided outside it names the computed expression
    and the candidate's own value (or its exception); ``source`` is the test itself, for callers that may
    show it (MBPP's tests are in its prompt; HumanEval's are hidden). ``status`` is the verdict: ``passed``,
    ``wrong_answer``, ``time_limit``, ``runtime_error`` or ``compile_error``.
    """

    __test__ = False  # not a pytest test class

    index: int
    source: str
    passed: bool
    decided: str  # "outside" or "inside" the sandbox
    message: str
    status: str = ""  # one of STATUSES; by default "passed" or "wrong_answer" from ``passed``

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", _status_of(self.passed, self.message))
        if self.status not in STATUSES:
            raise ValueError(f"TestReport.status must be one of {STATUSES}, got {self.status!r}")


@dataclass(frozen=True)
class CodeReport:
    """:meth:`CodeVerifier.report`: the verdict and one :class:`TestReport` per test (asserts, then stdio)."""

    result: VerifyResult
    tests: tuple[TestReport, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CodeVerifier:
    """Scores a response's Python program by the fraction of ``CodeTests`` it passes, in an OS sandbox.

    Args:
        limits: the per-run :class:`~dapo_env.verifiers.sandbox.SandboxLimits` (wall and CPU time, memory,
            disk, processes, output); all assert tests share one run, each stdio pair gets its own.
        isolation: ``"full"`` (default; bubblewrap, see ``docs/code_sandbox.md``) or ``"weak"`` (no OS
            isolation; an explicit opt-in that warns once; never for RL rewards). With ``"full"`` on a
            machine without working bubblewrap the first call raises ``SandboxUnavailable`` naming the fix.
        require_fence: only accept code inside a fenced block (otherwise an unfenced response that parses
            as Python is taken whole).

    Reasons: ``"passed:k/n"``, ``"tests_failed:f/n"`` (``";timeout"`` or ``";output_limit"`` appended when
    a run was cut), then ``";inside:m"`` when m of the tests had to be decided inside the sandbox; and
    ``"no_code"``, ``"syntax_error"``, ``"sandbox_error:<Type>"``.

    Example:
        >>> from dapo_env.types import CodeTests
        >>> verifier = CodeVerifier(limits=SandboxLimits(wall_s=10.0))
        >>> tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0"))
        >>> verifier("```python\\ndef add(a, b):\\n    return a + b\\n```", tests).reason
        'passed:2/2'
    """

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    isolation: str = "full"
    require_fence: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.limits, SandboxLimits):
            raise TypeError(f"CodeVerifier.limits must be a SandboxLimits, got {type(self.limits).__name__}")
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(f"CodeVerifier.isolation must be one of {ISOLATION_MODES}, got {self.isolation!r}")

    def isolation_layers(self) -> Isolation:
        """The layers this verifier's runs get on this machine (the sandbox's, plus the harness's audit
        hook), and why any missing one is missing."""
        layers = isolation(self.isolation)
        return Isolation(layers.mode, (*layers.active, "audit_hook"), layers.missing)

    def prepare_reference(self, reference: object) -> CodeTests:
        """The tests as :class:`CodeTests` (from ``CodeTests``, a dict of its fields, its JSON string or a list
        of asserts; :func:`~dapo_env.verifiers.references.code_tests`). Raises ``InvalidReference`` for any
        other form and ``SandboxUnavailable`` when this machine cannot isolate as asked."""
        require_isolation(self.isolation)
        return code_tests(reference)

    def __call__(self, response: str, tests: CodeTests) -> VerifyResult:
        return self.report(response, tests).result

    def report(self, response: str, tests: CodeTests) -> CodeReport:
        """The verdict with one :class:`TestReport` per test (what a feedback environment shows the model)."""
        tests = self.prepare_reference(tests)
        if not isinstance(response, str):
            return CodeReport(VerifyResult(False, 0.0, None, "error:TypeError"))
        code = extract_code(response, require_fence=self.require_fence, prefix=tests.prefix)
        if code is None:
            return CodeReport(VerifyResult(False, 0.0, None, "no_code"))
        program = assemble_program(code, tests)
        if not _compiles(program):
            return CodeReport(VerifyResult(False, 0.0, code, "syntax_error"))
        try:
            reports, cut = self._run_all(program, tests)
        except SandboxUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - the sandbox itself failed: never raise on model output
            return CodeReport(VerifyResult(False, 0.0, code, f"sandbox_error:{type(exc).__name__}"))
        passed, total = sum(r.passed for r in reports), len(reports)
        inside = sum(r.decided == "inside" for r in reports)
        suffix = (f";{cut}" if cut and passed < total else "") + (f";inside:{inside}" if inside else "")
        if passed == total:
            return CodeReport(VerifyResult(True, 1.0, code, f"passed:{passed}/{total}{suffix}"), tuple(reports))
        result = VerifyResult(False, passed / total, code, f"tests_failed:{total - passed}/{total}{suffix}")
        return CodeReport(result, tuple(reports))

    def _run_all(self, program: str, tests: CodeTests) -> tuple[list[TestReport], str]:
        reports: list[TestReport] = []
        cut = ""
        if tests.tests:
            plan = plan_tests(tests)
            outcome, nonce = self._run(program, mode="tests", setup=tests.setup, plan=plan)
            records = _records(outcome.records, nonce)
            crash = records.first.get(("C", 0))
            crash = f" (the program itself raised {_text(crash)})" if crash else ""
            reports.extend(_with_note(r, crash) for r in _judge_plan(plan, records, outcome))
            cut = _cut(outcome)
        for stdin, expected in tests.stdio:
            outcome, nonce = self._run(program, mode="stdio", setup="", plan=None, stdin=stdin)
            finished = _records(outcome.records, nonce).first.get(("S", 0)) == "ok"
            stdout = outcome.stdout.decode("utf-8", "replace")
            ok = finished and not outcome.output_limited and _normalise(stdout) == _normalise(expected)
            message = "passed" if ok else _stdio_message(stdin, stdout, outcome, finished)
            reports.append(TestReport(len(reports), f"stdin: {stdin[:200]!r}", ok, "outside", message))
            cut = cut or _cut(outcome)
        return reports, cut

    def _run(self, program: str, *, mode: str, setup: str, plan: TestPlan | None,
             stdin: str = "") -> tuple[RunOutcome, str]:
        nonce = secrets.token_hex(16)
        job = {"nonce": nonce, "mode": mode, "code": program, "setup": setup, "test_function": TEST_FUNCTION,
               "steps": [[s.kind, s.index, s.source, s.scoped] for s in plan.steps] if plan else [],
               "scope": list(plan.scope) if plan and plan.scope else None}
        outcome = run_sandboxed(HARNESS, json.dumps(job).encode(), stdin=stdin.encode(),
                                capture_stdout=mode == "stdio", limits=self.limits,
                                end_marker=f"{nonce} E 0 end".encode(), isolation=self.isolation)
        return outcome, nonce


@dataclass
class _Records:
    """The records of one run tagged with its nonce: the first of each ``(kind, index)`` (a test's result
    as ``"R"``: its kind letter then payload), and every value a test run inside yielded, by test."""

    first: dict[tuple[str, int], str] = field(default_factory=dict)
    yields: dict[int, list[str]] = field(default_factory=dict)


def _records(raw: bytes, nonce: str) -> _Records:
    found = _Records()
    for line in raw.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != nonce or parts[1] not in _RECORD_KINDS or not parts[2].isdigit():
            continue
        kind, index, payload = parts[1], int(parts[2]), parts[3]
        if kind == "Y":
            found.yields.setdefault(index, []).append(payload)
        elif kind in _RESULT_KINDS:
            found.first.setdefault(("R", index), kind + payload)
        else:
            found.first.setdefault((kind, index), payload)
    return found


def _with_note(report: TestReport, note: str) -> TestReport:
    return report if report.passed or not note else replace(report, message=_short(report.message) + note)


def _judge_plan(plan: TestPlan, records: _Records, outcome: RunOutcome) -> list[TestReport]:
    reports = []
    for check in plan.checks:
        record = records.first.get(("R", check.index))
        if record is None:
            passed, message = False, _missing_message(outcome)
        elif record[0] == "X":
            passed, message = False, f"raised {_text(record[1:])}"
        elif record[0] == "V" and check.outside:
            passed, message = _judge_value(check.expect, check.expression, record[1:])
        elif record[0] == "P" and not check.outside:
            passed, message = _judge_parts(check, records.yields.get(check.index, []))
        else:  # a record of the wrong kind for this test: only a forged one could be
            passed, message = False, "no valid result"
        reports.append(TestReport(check.index, check.source, passed, "outside" if check.outside else "inside",
                                  message))
    return reports


def _judge_value(expect: Expectation, expression: str, payload: str) -> tuple[bool, str]:
    """A value test: the reported value decoded into plain data and judged against the test's literal."""
    try:
        value = decode(json.loads(payload))
    except (DecodeError, ValueError, TypeError, OverflowError, RecursionError):
        return False, f"{_short(expression)} returned a value that could not be read back"
    if expect.judge(value):
        return True, "passed"
    return False, f"{_short(expression)} returned {_shown(value)}"


def _judge_parts(check: Check, payloads: list[str]) -> tuple[bool, str]:
    """A test run inside that finished: every value its rewritten asserts yielded must pass."""
    for payload in payloads:
        try:
            sub, *encoded = json.loads(payload)
            part = check.parts[sub] if type(sub) is int and 0 <= sub < len(check.parts) else None
            values = [decode(item) for item in encoded]
        except (DecodeError, ValueError, TypeError, OverflowError, RecursionError):
            return False, "a value could not be read back"
        if part is None or len(values) != (2 if part.other else 1):
            return False, "no valid result"
        if not part.expect.judge(values[0] if len(values) == 1 else tuple(values)):
            against = f" (compared with {_short(part.other)})" if part.other else ""
            return False, f"{_short(part.expression)} returned {_shown(values[0])}{against}"
    return True, "passed"


def _shown(value: object) -> str:
    try:
        return _short(repr(value))
    except Exception:  # noqa: BLE001 - a huge int or the like
        return f"a {type(value).__name__}"


def _missing_message(outcome: RunOutcome) -> str:
    if outcome.timed_out:
        return "did not finish within the time limit"
    if outcome.output_limited:
        return "did not finish: the program printed more than the output limit"
    return "did not run: the program exited or crashed before this test"


def _stdio_message(stdin: str, stdout: str, outcome: RunOutcome, finished: bool) -> str:
    if outcome.timed_out:
        return f"on input {_short(repr(stdin))} did not finish within the time limit"
    if outcome.output_limited:
        return f"on input {_short(repr(stdin))} printed more than the output limit"
    if not finished:
        return f"on input {_short(repr(stdin))} exited with an error"
    return f"on input {_short(repr(stdin))} printed {_short(repr(stdout))}"


def _cut(outcome: RunOutcome) -> str:
    return "timeout" if outcome.timed_out else "output_limit" if outcome.output_limited else ""


def _text(payload: str) -> str:
    try:
        text = json.loads(payload)
    except ValueError:
        return "an exception"
    return _short(text if isinstance(text, str) else "an exception")


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 3] + "..."


__all__ = ["STATUSES", "STATUS_LETTERS", "CodeReport", "CodeVerifier", "TestReport", "assemble_program", "extract_code"]
