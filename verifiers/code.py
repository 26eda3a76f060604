"""CodeVerifier: extract a Python program from a response and score it by the tests it passes.

Each candidate runs in the OS sandbox of ``sandbox.py`` (bubblewrap: fresh namespaces, unprivileged uid,
read-only system, a capped tmpfs, nothing outlives the run). Verdicts are decided outside it wherever the
test allows: for ``assert <expr> == <literal>`` and its relatives (``code_plan.py``) the sandbox only
computes ``<expr>`` and reports its value; the parent decodes it into plain data and compares it with the
expected value, which never enters the sandbox. stdio tests compare captured stdout outside. Tests of any
other shape run inside, behind a trusted harness: a per-run nonce the candidate never sees tags every
record, and a Python audit hook refuses introspection, sockets, subprocesses and writes outside the
working directory (an inner layer, the only one with ``isolation="weak"``). Exit codes are never trusted.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from dataclasses import dataclass, field

from dapo_env.types import CodeTests, VerifyResult
from .code_plan import Check, DecodeError, TestPlan, decode, plan_tests
from .references import code_tests
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

# The harness runs as ``python -I -c HARNESS <payload_fd> <result_fd>`` inside the sandbox. Two audit hooks
# are installed before the candidate runs. The reporter holds the nonce and the result fd in its closure and
# writes "<nonce> <kind> <index> <json>" only for a "dapo.record" event raised from main()'s own frame (the
# one frame that announced itself with "dapo.start"), ignoring every other caller. The guard refuses the
# remaining ways to reach the reporter's closure (gc object walks, other threads' frames, tracing, ctypes,
# /proc/*/mem) and OS-level escapes (an inner layer under the OS sandbox). Values of "value" steps are
# encoded by tagged JSON ("i" int, "f" float hex, "s" str, "l"/"t"/"S"/"F"/"d" containers, "o" any other
# type): only data leaves the sandbox, and the parent compares it with expected values it never sent.
HARNESS = r"""
import os, sys

def install(nonce, result_fd, main_code):
    write, getframe, legit = os.write, sys._getframe, []

    def reporter(event, args):
        if event != "dapo.start" and event != "dapo.record":
            return
        frame = getframe(1)
        if frame.f_code is not main_code:
            return
        if event == "dapo.start":
            if not legit:
                legit.append(frame)
        elif legit and frame is legit[0] and len(args) == 3:
            write(result_fd, f"{nonce} {args[0]} {args[1]} {args[2]}\n".encode())

    blocked = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.kill",
               "os.killpg", "os.system", "os.startfile", "ctypes.", "pty.", "sys._current_frames",
               "sys.settrace", "sys.setprofile", "gc.get_", "sys.addaudithook", "os.pidfd_open", "signal.pidfd")
    workdir = os.path.realpath(os.getcwd())
    path_events = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                             "os.link", "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "os.chdir",
                             "shutil.move", "shutil.copyfile", "shutil.copytree", "os.mkfifo", "os.mknod"})
    realpath, fspath, join, getcwd = os.path.realpath, os.fspath, os.path.join, os.getcwd

    def as_text(path):
        try:
            path = fspath(path)
        except TypeError:
            return None
        return path.decode("utf-8", "replace") if isinstance(path, bytes) else path

    def resolved(path):
        path = as_text(path)
        return None if not isinstance(path, str) else realpath(join(getcwd(), path))

    def outside(path):
        full = resolved(path)
        return full is not None and full != workdir and not full.startswith(workdir + "/")

    def guard(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and args and not isinstance(args[0], int):
            full = resolved(args[0]) or ""
            if full == "/proc" or full.startswith(("/proc/", "/dev/fd")):
                raise PermissionError("sandbox: /proc (process memory, descriptors, environment) is not readable")
            mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & 0o3103)
            if writing and outside(args[0]):
                raise PermissionError("sandbox: writes outside the working directory are not allowed")
        elif event in path_events:
            for arg in args:
                if (isinstance(arg, (str, bytes)) or hasattr(arg, "__fspath__")) and outside(arg):
                    raise PermissionError(f"sandbox: {event} outside the working directory")

    sys.addaudithook(reporter)
    sys.addaudithook(guard)


def encode(value, depth=0, budget=[0]):
    if depth == 0:
        budget[0] = 200000
    budget[0] -= 1
    if depth > 64 or budget[0] < 0:
        raise ValueError("value too deep or too large to report")
    t = type(value)
    if value is None or t is bool:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return {"i": int.__repr__(value)}
    if isinstance(value, float):
        return {"f": float.hex(float(value))}
    if isinstance(value, complex):
        return {"c": [float.hex(value.real), float.hex(value.imag)]}
    if isinstance(value, str):
        return {"s": str.__str__(value)}
    if isinstance(value, bytes):
        return {"y": bytes.hex(value)}
    if isinstance(value, bytearray):
        return {"Y": bytearray.hex(value)}
    if isinstance(value, range):
        return {"r": [value.start, value.stop, value.step]}
    if isinstance(value, dict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    for kind, tag in ((list, "l"), (tuple, "t"), (frozenset, "F"), (set, "S")):
        if isinstance(value, kind):
            return {tag: [encode(x, depth + 1) for x in kind.__iter__(value)]}
    import numbers
    if isinstance(value, numbers.Integral):
        return {"i": int.__repr__(int(value))}
    if isinstance(value, numbers.Real):
        return {"f": float.hex(float(value))}
    return {"o": t.__name__}


def describe(exc):
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:
        text = type(exc).__name__
    return text[:300]


def main():
    payload_fd, result_fd = int(sys.argv[1]), int(sys.argv[2])
    chunks = []
    while True:
        chunk = os.read(payload_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(payload_fd)
    import json, builtins
    sys.set_int_max_str_digits(0)
    job = json.loads(b"".join(chunks))
    chunks = None
    install(job.pop("nonce"), result_fd, main.__code__)
    # Only immutable values from here on: candidate code can read this frame, not rebind its locals.
    mode, code, setup = str(job["mode"]), str(job["code"]), str(job["setup"])
    steps = tuple((str(k), int(i), str(s), bool(c)) for k, i, s, c in job["steps"])
    scope_param, scope_target = tuple(job["scope"] or ("", ""))
    job = None
    audit, run, evaluate, compile_, exc_type, dumps = sys.audit, exec, eval, compile, BaseException, json.dumps
    stdout, is_int, dict_, encode_, describe_ = sys.stdout, int, dict, encode, describe
    namespace = {"__name__": "__main__" if mode == "stdio" else "candidate", "__builtins__": builtins}
    saved_builtins = tuple(builtins.__dict__.items())
    audit("dapo.start")
    try:
        run(compile_(code, "<candidate>", "exec"), namespace)
        status = "ok"
    except SystemExit as stop:
        status = "ok" if stop.code is None or (type(stop.code) is is_int and stop.code == 0) else "exit"
    except exc_type as exc:
        status = "error"
    if mode == "stdio":
        try:
            stdout.flush()
        except exc_type:
            status = "error"
        audit("dapo.record", "S", 0, status)
        audit("dapo.record", "E", 0, "end")
        return
    builtins.__dict__.clear()  # undo any monkeypatching of builtins before the tests run
    builtins.__dict__.update(saved_builtins)
    namespace["__builtins__"] = builtins
    try:
        run(compile_(setup, "<setup>", "exec"), namespace)
    except exc_type:
        pass
    scope, broken = None, ""
    for kind, index, source, scoped in steps:
        where = namespace
        if scoped:
            if scope is None:
                scope = dict_(namespace)
                scope[scope_param] = namespace.get(scope_target)
            where = scope
        if kind == "exec":
            try:
                run(compile_(source, "<test>", "exec"), where)
            except exc_type as exc:
                broken = broken or describe_(exc)
            continue
        if broken:
            audit("dapo.record", "X", index, dumps("an earlier statement of the test raised " + broken))
            continue
        try:
            if kind == "value":
                line = dumps(encode_(evaluate(compile_(source, "<test>", "eval"), where)))
                audit("dapo.record", "V", index, line)
            else:
                run(compile_(source, "<test>", "exec"), where)
                audit("dapo.record", "P", index, "0")
        except exc_type as exc:
            audit("dapo.record", "X", index, dumps(describe_(exc)))
    audit("dapo.record", "E", 0, "end")

main()
"""


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
    except (SyntaxError, ValueError):
        return False
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
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
    except (SyntaxError, ValueError):
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


@dataclass(frozen=True)
class TestReport:
    """What happened to one test: passed or not, where it was decided, and a short message.

    ``message`` never holds an expected value: for a test decided outside it names the computed expression
    and the candidate's own value (or its exception); ``source`` is the test itself, for callers that may
    show it (MBPP's tests are in its prompt; HumanEval's are hidden).
    """

    index: int
    source: str
    passed: bool
    decided: str  # "outside" or "inside" the sandbox
    message: str


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
        """The sandbox layers this verifier's runs get on this machine, and why any missing one is missing."""
        return isolation(self.isolation)

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
            reports.extend(_judge_plan(plan, _records(outcome.records, nonce), outcome))
            cut = _cut(outcome)
        for stdin, expected in tests.stdio:
            outcome, nonce = self._run(program, mode="stdio", setup="", plan=None, stdin=stdin)
            finished = _records(outcome.records, nonce).get(("S", 0)) == "ok"
            stdout = outcome.stdout.decode("utf-8", "replace")
            ok = finished and not outcome.output_limited and _normalise(stdout) == _normalise(expected)
            message = "passed" if ok else _stdio_message(stdin, stdout, outcome, finished)
            reports.append(TestReport(len(reports), f"stdin: {stdin[:200]!r}", ok, "outside", message))
            cut = cut or _cut(outcome)
        return reports, cut

    def _run(self, program: str, *, mode: str, setup: str, plan: TestPlan | None,
             stdin: str = "") -> tuple[RunOutcome, str]:
        nonce = secrets.token_hex(16)
        job = {"nonce": nonce, "mode": mode, "code": program, "setup": setup,
               "steps": [[s.kind, s.index, s.source, s.scoped] for s in plan.steps] if plan else [],
               "scope": list(plan.scope) if plan and plan.scope else None}
        outcome = run_sandboxed(HARNESS, json.dumps(job).encode(), stdin=stdin.encode(),
                                capture_stdout=mode == "stdio", limits=self.limits,
                                end_marker=f"{nonce} E 0 end".encode(), isolation=self.isolation)
        return outcome, nonce


def _records(raw: bytes, nonce: str) -> dict[tuple[str, int], str]:
    """``(kind, index) -> payload`` of the records tagged with this run's nonce (the first of each wins);
    value, pass and exception records share the kind ``"R"`` with their own letter first in the payload."""
    found: dict[tuple[str, int], str] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != nonce or parts[1] not in ("V", "P", "X", "S", "E") or not parts[2].isdigit():
            continue
        result = parts[1] in ("V", "P", "X")
        found.setdefault(("R" if result else parts[1], int(parts[2])), parts[1] + parts[3] if result else parts[3])
    return found


def _judge_plan(plan: TestPlan, records: dict[tuple[str, int], str], outcome: RunOutcome) -> list[TestReport]:
    sources = {s.index: s.source for s in plan.steps if s.kind == "value"}
    reports = []
    for check in plan.checks:
        decided = "outside" if check.outside else "inside"
        record = records.get(("R", check.index))
        if record is None:
            passed, message = False, _missing_message(outcome)
        elif record[0] == "X":
            passed, message = False, f"raised {_text(record[1:])}"
        elif record[0] == "P" and not check.outside:
            passed, message = True, "passed"
        elif record[0] == "V" and check.outside:
            passed, message = _judge_value(check, sources[check.index], record[1:])
        else:  # a record of the wrong kind for this test: only a forged one could be
            passed, message = False, "no valid result"
        reports.append(TestReport(check.index, check.source, passed, decided, message))
    return reports


def _judge_value(check: Check, expression: str, payload: str) -> tuple[bool, str]:
    try:
        value = decode(json.loads(payload))
    except (DecodeError, ValueError, TypeError, OverflowError, RecursionError):
        return False, f"{_short(expression)} returned a value that could not be read back"
    if check.expect is not None and check.expect.judge(value):
        return True, "passed"
    try:
        shown = repr(value)
    except Exception:  # noqa: BLE001 - a huge int or the like
        shown = f"a {type(value).__name__}"
    return False, f"{_short(expression)} returned {_short(shown)}"


def _missing_message(outcome: RunOutcome) -> str:
    if outcome.timed_out:
        return "did not finish within the time limit"
    if outcome.output_limited:
        return "did not finish: the program printed more than the output limit"
    return "did not run: the program exited or crashed before this test"


def _stdio_message(stdin: str, stdout: str, outcome: RunOutcome, finished: bool) -> str:
    shown = _short(repr(stdin))
    if outcome.timed_out:
        return f"on input {shown} did not finish within the time limit"
    if outcome.output_limited:
        return f"on input {shown} printed more than the output limit"
    if not finished:
        return f"on input {shown} exited with an error"
    return f"on input {shown} printed {_short(repr(stdout))}"


def _cut(outcome: RunOutcome) -> str:
    return "timeout" if outcome.timed_out else "output_limit" if outcome.output_limited else ""


def _text(payload: str) -> str:
    try:
        text = json.loads(payload)
    except ValueError:
        return "an exception"
    return _short(text) if isinstance(text, str) else "an exception"


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 3] + "..."


__all__ = ["HARNESS", "CodeReport", "CodeVerifier", "TestReport", "assemble_program", "extract_code"]
