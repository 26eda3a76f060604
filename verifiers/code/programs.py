"""ProgramVerifier: programs in any registered language, judged on stdin/stdout tests or function calls.

A response's program (its last fenced block naming the task's language) is compiled once, inside the
sandbox under the language's own compile limits (compilers are the same sandbox's guests: a template bomb
or ``#include "/dev/zero"`` is a compile error, never a hang), and the binary is carried read-only into a
fresh sandboxed run per test. Every verdict is decided here, outside: the run's stdout is compared with
the expected output (:mod:`.compare`) or handed with the input and the expected output to the task's
checker program, which runs in a sandbox of its own; the expected output never enters the candidate's.
Function tests (``calls``) run in one sandboxed run: a small harness evaluates each call expression and
reports the value as plain data, and the parent compares it with the expected JSON value.

Example:
    >>> verifier = ProgramVerifier(language="cpp", compare="whitespace")
    >>> tests = ProgramTests(io=(IOTest(input="2 3\\n", output="5\\n"),))
    >>> src = "```cpp\\n#include <cstdio>\\nint main(){int a,b;scanf(\\"%d %d\\",&a,&b);printf(\\"%d\\\\n\\",a+b);}\\n```"
    >>> verifier(src, tests).reason  # doctest: +SKIP
    'passed:1/1'
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
import re
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dapo_env.types import CodeTests, InvalidReference, VerifierConfigError, VerifyResult
from .compare import CHECKER, check_mode, compare_output
from .languages import Language, get_language, language_of_tag
from .python import STATUS_LETTERS, CodeReport, CodeVerifier, TestReport, extract_code
from .sandbox import (
    ISOLATION_MODES,
    RunOutcome,
    SandboxLimits,
    SandboxUnavailable,
    require_isolation,
    run_command,
)

SCORING_MODES = ("pass_fail", "fraction", "weighted")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#.\-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MESSAGE_CHARS = 300
_COMPILER_CHARS = 1200
_CACHE_ENTRIES = 128


# --- the reference -----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class IOTest:
    """One stdin/stdout test.

    Args:
        input: what the program reads on stdin.
        output: the expected stdout (compared by the verifier's mode, or given to the checker).
        weight: its share in ``scoring="weighted"`` (> 0).
        time_limit_s: its own wall-clock limit (default: the verifier's ``time_limit_s``).
    """

    __test__ = False

    input: str = ""
    output: str = ""
    weight: float = 1.0
    time_limit_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.input, str) or not isinstance(self.output, str):
            raise InvalidReference("IOTest input and output must be strings")
        _check_weight(self.weight)
        _check_time(self.time_limit_s, "IOTest.time_limit_s")


@dataclass(frozen=True, kw_only=True)
class CallTest:
    """One function test: a call expression in the task's language and the JSON value it must return.

    Args:
        call: e.g. ``"add(1, 2)"``.
        expected: a JSON value (numbers compare numerically: ``3 == 3.0``; booleans only with booleans).
        weight: its share in ``scoring="weighted"``.
    """

    __test__ = False

    call: str
    expected: Any = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.call, str) or not self.call.strip():
            raise InvalidReference("CallTest.call must be a non-empty expression such as 'add(1, 2)'")
        try:
            json.dumps(self.expected, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidReference(f"CallTest.expected must be a JSON value ({exc})") from None
        _check_weight(self.weight)


@dataclass(frozen=True, kw_only=True)
class ProgramTests:
    """The reference of a program task: stdin/stdout tests and/or function tests, and an optional checker.

    Args:
        io: the stdin/stdout tests (each run in its own sandboxed run).
        calls: the function tests (all in one run; Python and JavaScript).
        checker: this problem's checker source (in the verifier's ``checker_language``); overrides the
            verifier's own ``checker``.

    Example:
        >>> ProgramTests.from_value({"inputs": ["1\\n"], "outputs": ["2\\n"]}).io[0].output
        '2\\n'
    """

    io: tuple[IOTest, ...] = ()
    calls: tuple[CallTest, ...] = ()
    checker: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "io", tuple(self.io))
        object.__setattr__(self, "calls", tuple(self.calls))
        if not self.io and not self.calls:
            raise InvalidReference("ProgramTests needs at least one test: pass io=(IOTest(...),) or calls=(...)")
        if not isinstance(self.checker, str):
            raise InvalidReference("ProgramTests.checker must be the checker program's source (a string)")

    @property
    def num_tests(self) -> int:
        return len(self.io) + len(self.calls)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form; :meth:`from_value` reads it back."""
        return {"io": [{"input": t.input, "output": t.output, "weight": t.weight, "time_limit_s": t.time_limit_s}
                       for t in self.io],
                "calls": [{"call": t.call, "expected": t.expected, "weight": t.weight} for t in self.calls],
                "checker": self.checker}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON (how datasets exported for TRL and verl hold it; the verifier reads it back)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_value(cls, value: Any) -> ProgramTests:
        """Read the tests from a ``ProgramTests``, :class:`CodeTests` (its stdio pairs), a dict or its JSON:
        ``{"io": [{"input", "output", "weight"?, "time_limit_s"?}...], "calls": [{"call", "expected"}...],
        "checker"?}``, or the APPS/TACO/CodeContests form ``{"inputs": [...], "outputs": [...]}``
        (``"input"``/``"output"`` too), or a list of ``[input, output]`` pairs."""
        if isinstance(value, ProgramTests):
            return value
        if isinstance(value, CodeTests):
            if value.tests:
                raise InvalidReference("ProgramVerifier runs stdin/stdout and call tests; Python asserts "
                                       "(CodeTests.tests) are CodeVerifier's")
            return cls(io=tuple(IOTest(input=i, output=o) for i, o in value.stdio))
        if isinstance(value, (str, bytes)):
            try:
                value = json.loads(value)
            except ValueError:
                raise InvalidReference("program tests given as a string must be JSON (see ProgramTests.from_value)") \
                    from None
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            value = {"io": list(value)}
        if not isinstance(value, Mapping):
            raise InvalidReference(f"cannot read program tests from a {type(value).__name__}: pass ProgramTests, "
                                   "a dict {'io': [...], 'calls': [...]}, {'inputs': [...], 'outputs': [...]} or JSON")
        return cls(io=_io_tests(value), calls=_call_tests(value.get("calls") or ()),
                   checker=value.get("checker") or "")


def _io_tests(value: Mapping[str, Any]) -> tuple[IOTest, ...]:
    inputs, outputs = value.get("inputs", value.get("input")), value.get("outputs", value.get("output"))
    if inputs is not None or outputs is not None:
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise InvalidReference("'inputs' and 'outputs' must be lists of the same length")
        weights = value.get("weights") or [1.0] * len(inputs)
        return tuple(IOTest(input=_text(i), output=_text(o), weight=float(w))
                     for i, o, w in zip(inputs, outputs, weights))
    tests = []
    for item in value.get("io") or value.get("tests") or ():
        if isinstance(item, Mapping):
            unknown = set(item) - {"input", "output", "weight", "time_limit_s"}
            if unknown:
                raise InvalidReference(f"unknown IOTest field(s) {sorted(unknown)}; valid: input, output, weight, "
                                       "time_limit_s")
            if "output" not in item:
                raise InvalidReference("an io test needs its expected 'output' (and usually an 'input')")
            tests.append(IOTest(input=_text(item.get("input", "")), output=_text(item.get("output", "")),
                                weight=item.get("weight", 1.0), time_limit_s=item.get("time_limit_s")))
        elif isinstance(item, Sequence) and len(item) == 2:
            tests.append(IOTest(input=_text(item[0]), output=_text(item[1])))
        else:
            raise InvalidReference(f"an io test must be {{'input', 'output'}} or an [input, output] pair, got {item!r}"[:200])
    return tuple(tests)


def _call_tests(items: Any) -> tuple[CallTest, ...]:
    tests = []
    for item in items:
        if isinstance(item, Mapping) and "call" in item:
            tests.append(CallTest(call=item["call"], expected=item.get("expected"), weight=item.get("weight", 1.0)))
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            tests.append(CallTest(call=item[0], expected=item[1]))
        else:
            raise InvalidReference(f"a call test must be {{'call', 'expected'}} or a [call, expected] pair, got {item!r}"[:200])
    return tuple(tests)


def _text(value: Any) -> str:
    if isinstance(value, list):  # some datasets hold outputs as lists of lines
        return "\n".join(map(str, value)) + "\n"
    if not isinstance(value, str):
        raise InvalidReference(f"test input/output must be a string, got {type(value).__name__}")
    return value


def _check_weight(weight: Any) -> None:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
        raise InvalidReference(f"a test's weight must be a number > 0, got {weight!r}")


def _check_time(value: Any, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 600):
        raise ValueError(f"{name} must be None or seconds in (0, 600], got {value!r}")


# --- compiling once ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Build:
    """A program ready to run: the files its runs get, or why it did not compile."""

    files: Mapping[str, bytes]
    error: str = ""  # the trimmed compiler output when it did not compile


_cache: collections.OrderedDict[tuple[Any, ...], Build] = collections.OrderedDict()
_cache_lock = threading.Lock()


def build(language: Language, source: str, *, isolation: str = "full", limits: SandboxLimits | None = None) -> Build:
    """Compile ``source`` in the sandbox under ``limits`` (default: the language's compile limits), once per
    program and process (a feedback report or a second run of the same program reuses it); interpreted
    languages just place it."""
    files = {language.source_file: source.encode()}
    if not language.compiled:
        return Build(files)
    limits = limits or language.compile_limits
    command = language.command("compile", memory_mb=limits.memory_mb)
    key = (language.name, command, isolation, limits, hashlib.sha256(source.encode()).hexdigest())
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    out = run_command(command, files=files, limits=limits, isolation=isolation, fetch=language.binary_file,
                      capture_stdout=False)
    if out.returncode == 0 and out.records and not out.timed_out:
        result = Build({language.binary_file: out.records})
    else:
        result = Build({}, _compiler_message(limits, out))
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return result


def _compiler_message(limits: SandboxLimits, out: RunOutcome) -> str:
    if out.timed_out:
        return f"compilation did not finish within {limits.wall_s:g} s"
    text = out.stderr.decode("utf-8", "replace").replace("/tmp/", "")
    if out.output_limited:
        text += "\n[compiler output cut]"
    if not text.strip():
        return f"the compiler failed (exit status {out.returncode}; out of memory?)"
    return text if len(text) <= _COMPILER_CHARS else text[:_COMPILER_CHARS] + "\n[...]"


# --- the verifier ------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ProgramVerifier:
    """Scores a response's program, in any registered language, on stdin/stdout tests or function calls.

    Args:
        language: the task's language (a registry name or fence tag: ``"python"``, ``"cpp"``, ``"javascript"``).
        compare: ``"exact"``, ``"whitespace"`` (default), ``"float"``, ``"unordered"`` (see :mod:`.compare`) or
            ``"checker"`` (the checker program decides).
        tolerance: the absolute/relative tolerance of ``compare="float"`` (and of numbers in call tests).
        checker: the default checker's source (a problem's ``ProgramTests.checker`` overrides it). It runs
            sandboxed as ``checker <input file> <expected file> <actual file>``; exit status 0 accepts, any
            other rejects.
        checker_language: the checker's language (default ``"python"``).
        scoring: ``"pass_fail"`` (1 when every test passes, else 0), ``"fraction"`` (the share of tests
            passed) or ``"weighted"`` (the tests' weights passed over all weights).
        time_limit_s: the wall-clock limit per test (a test's own ``time_limit_s`` wins; default
            ``limits.wall_s``); CPU seconds follow it.
        limits: memory, disk, processes and output limits of each test run.
        checker_limits: the limits of each checker run.
        compile_limits: the compile run's limits (default: the language's ``compile_limits``).
        isolation: ``"full"`` (bubblewrap) or ``"weak"`` (no OS isolation; never for RL rewards).
        require_fence: Python only: accept only fenced code (C++ and JavaScript always need a fenced block).

    Reasons: ``passed:k/n``, ``tests_failed:f/n`` with ``;verdicts:`` and one letter per test (``P`` passed,
    ``W`` wrong answer, ``T`` time limit, ``R`` runtime error, ``C`` compile error); ``compile_error``,
    ``no_code``, ``wrong_language:<name>`` (the only fenced code is in another registered language),
    ``sandbox_error:<Type>``.
    """

    language: str = "python"
    compare: str = "whitespace"
    tolerance: float = 1e-6
    checker: str = ""
    checker_language: str = "python"
    scoring: str = "pass_fail"
    time_limit_s: float | None = None
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    checker_limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(wall_s=10.0))
    compile_limits: SandboxLimits | None = None
    isolation: str = "full"
    require_fence: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "language", get_language(self.language).name)
        object.__setattr__(self, "checker_language", get_language(self.checker_language).name)
        check_mode(self.compare, self.tolerance)
        if self.scoring not in SCORING_MODES:
            raise ValueError(f"scoring must be one of {SCORING_MODES}, got {self.scoring!r}")
        _check_time(self.time_limit_s, "time_limit_s")
        for name in ("limits", "checker_limits", "compile_limits"):
            if not isinstance(getattr(self, name), SandboxLimits) and not (name == "compile_limits"
                                                                            and self.compile_limits is None):
                raise TypeError(f"ProgramVerifier.{name} must be a SandboxLimits")
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {self.isolation!r}")
        for name, limits in ((self.language, self.limits), (self.checker_language, self.checker_limits)):
            language = get_language(name)
            if limits.memory_mb < language.min_memory_mb:
                raise ValueError(f"{name} needs memory_mb >= {language.min_memory_mb} in its limits, got {limits.memory_mb}")
            if limits.max_processes < language.min_processes:
                raise ValueError(f"{name} needs max_processes >= {language.min_processes} in its limits (its runtime's "
                                 f"own threads count), got {limits.max_processes}")
        if not isinstance(self.checker, str):
            raise TypeError("ProgramVerifier.checker is the checker program's source (a string)")

    def prepare_reference(self, reference: object) -> ProgramTests:
        """The tests as :class:`ProgramTests`; raises ``InvalidReference`` for a form it cannot read, or a
        configuration error when this machine lacks the sandbox or the language's compiler/runtime."""
        require_isolation(self.isolation)
        for name in {self.language, self.checker_language}:
            missing = get_language(name).missing()
            if missing is not None:
                raise SandboxUnavailable(f"language {name!r} cannot run here: {missing}")
        tests = ProgramTests.from_value(reference)
        if self.compare == CHECKER and tests.io and not (tests.checker or self.checker):
            raise InvalidReference("compare='checker' needs a checker program: pass checker=<source> to the "
                                   "verifier or put 'checker' in the problem's tests")
        if tests.calls and self.language not in _CALL_HARNESSES and self.language != "python":
            raise InvalidReference(f"function (call) tests are supported in {sorted({'python', *_CALL_HARNESSES})}; "
                                   f"give {self.language} stdin/stdout tests")
        return tests

    def __call__(self, response: str, tests: Any) -> VerifyResult:
        return self.report(response, tests).result

    def report(self, response: str, tests: Any) -> CodeReport:
        """The verdict with one :class:`TestReport` per test (io tests, then calls): status and message."""
        tests = self.prepare_reference(tests)
        if not isinstance(response, str):
            return CodeReport(VerifyResult(False, 0.0, None, "error:TypeError"))
        code, other = self.extract(response)
        if code is None:
            return CodeReport(VerifyResult(False, 0.0, None, f"wrong_language:{other}" if other else "no_code"))
        try:
            reports = self._run_all(code, tests)
        except VerifierConfigError:  # the sandbox or a language is missing, the checker does not compile
            raise
        except Exception as exc:  # noqa: BLE001 - the sandbox itself failed: never raise on model output
            return CodeReport(VerifyResult(False, 0.0, code, f"sandbox_error:{type(exc).__name__}"))
        return CodeReport(self._verdict(code, tests, reports), tuple(reports))

    def extract(self, response: str) -> tuple[str | None, str | None]:
        """The program (the last closed fenced block naming this language; for Python also what
        :func:`~.python.extract_code` takes), and else the registered language the fenced code is in."""
        language = get_language(self.language)
        blocks = _FENCE.findall(response)
        mine = [body for tag, body in blocks if not tag or tag.lower() in language.tags]  # untagged counts
        if language.name == "python":
            code = extract_code(response, require_fence=self.require_fence)
        else:
            code = mine[-1].rstrip() if mine and mine[-1].strip() else None
        if code is not None:
            return code, None
        others = [language_of_tag(tag) for tag, _ in blocks if tag]
        return None, next((name for name in reversed(others) if name and name != language.name), None)

    # --- running ---
    def _run_all(self, code: str, tests: ProgramTests) -> list[TestReport]:
        language = get_language(self.language)
        if tests.calls and language.name == "python":
            program = build(language, code, isolation=self.isolation, limits=self.compile_limits)
            reports = self._io_reports(language, program, tests) if tests.io else []
            return reports + self._python_calls(code, tests, start=len(reports))
        program = build(language, code, isolation=self.isolation, limits=self.compile_limits)
        if program.error:
            message = f"compile error: {program.error}"
            return [TestReport(i, _source(t), False, "outside", message, "compile_error")
                    for i, t in enumerate((*tests.io, *tests.calls))]
        reports = self._io_reports(language, program, tests)
        if tests.calls:
            reports += self._call_reports(language, program, tests, start=len(reports))
        return reports

    def _io_reports(self, language: Language, program: Build, tests: ProgramTests) -> list[TestReport]:
        reports = []
        checker = None
        if self.compare == CHECKER:
            checker_language = get_language(self.checker_language)
            checker = (checker_language, build(checker_language, tests.checker or self.checker, isolation=self.isolation,
                                               limits=self.compile_limits))
            if checker[1].error:
                raise InvalidReference(f"the checker does not compile: {checker[1].error[:300]}")
        for index, test in enumerate(tests.io):
            wall = test.time_limit_s or self.time_limit_s or self.limits.wall_s
            limits = replace(self.limits, wall_s=wall, cpu_s=max(1, math.ceil(wall)))
            memory = limits.memory_mb
            out = run_command(language.command("run", memory_mb=memory), files=program.files,
                              stdin=test.input.encode(), limits=limits, isolation=self.isolation,
                              capture_stderr=True, address_space_mb=memory + language.address_space_extra_mb)
            status, message = self._judge_io(test, out, wall, checker)
            reports.append(TestReport(index, _source(test), status == "passed", "outside", message, status))
        return reports

    def _judge_io(self, test: IOTest, out: RunOutcome, wall: float,
                  checker: tuple[Language, Build] | None) -> tuple[str, str]:
        shown = f"on input {_short(repr(test.input))}"
        if out.timed_out:
            return "time_limit", f"{shown} did not finish within the time limit ({wall:g} s)"
        if out.output_limited:
            return "runtime_error", f"{shown} printed more than the output limit"
        if out.returncode != 0:
            tail = out.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            said = f": {_short(tail[0])}" if tail else ""
            how = f"was killed by signal {-out.returncode}" if (out.returncode or 0) < 0 else \
                f"exited with status {out.returncode}"
            return "runtime_error", f"{shown} {how}{said}"
        actual = out.stdout.decode("utf-8", "replace")
        if checker is None:
            ok = compare_output(self.compare, test.output, actual, tolerance=self.tolerance)
        else:
            ok = self._checker_accepts(checker, test, actual)
        return ("passed", "passed") if ok else ("wrong_answer", f"{shown} printed {_short(repr(actual))}")

    def _checker_accepts(self, checker: tuple[Language, Build], test: IOTest, actual: str) -> bool:
        """Run the checker in its own sandbox on (input, expected, actual): exit status 0 accepts."""
        language, program = checker
        files = {**program.files, "input.txt": test.input.encode(), "expected.txt": test.output.encode(),
                 "actual.txt": actual.encode()}
        memory = self.checker_limits.memory_mb
        command = (*language.command("run", memory_mb=memory), "{dir}/input.txt", "{dir}/expected.txt",
                   "{dir}/actual.txt")
        out = run_command(command, files=files, limits=self.checker_limits, isolation=self.isolation,
                          address_space_mb=memory + language.address_space_extra_mb)
        return out.returncode == 0 and not out.timed_out

    def _call_reports(self, language: Language, program: Build, tests: ProgramTests, start: int) -> list[TestReport]:
        harness_file, harness = _CALL_HARNESSES[language.name]
        nonce = secrets.token_hex(16)
        run = language.command("run", memory_mb=self.limits.memory_mb)
        command = (*run[:-1], "{dir}/" + harness_file, "{payload_fd}", "{result_fd}")
        payload = json.dumps({"nonce": nonce, "file": language.source_file, "calls": [t.call for t in tests.calls]})
        wall = self.time_limit_s or self.limits.wall_s
        limits = replace(self.limits, wall_s=wall, cpu_s=max(1, math.ceil(wall)))
        out = run_command(command, files={**program.files, harness_file: harness.encode()}, payload=payload.encode(),
                          limits=limits, isolation=self.isolation, capture_stdout=False,
                          address_space_mb=self.limits.memory_mb + language.address_space_extra_mb,
                          end_marker=f"{nonce} E 0 ".encode())
        records = _call_records(out.records, nonce)
        crash = records.get(("C", 0))
        reports = []
        for i, test in enumerate(tests.calls):
            if ("V", i) not in records and ("X", i) not in records:
                status = "time_limit" if out.timed_out else "runtime_error"
                message = "did not finish within the time limit" if out.timed_out else \
                    "did not run: the program exited or crashed before this call"
                if crash is not None:
                    message += f" (the program itself raised {_short(str(crash))})"
            elif ("V", i) not in records:
                status, message = "runtime_error", f"{_short(test.call)} raised {_short(str(records['X', i]))}"
            else:
                value = _decode_js(records["V", i])
                ok = _same(value, test.expected, self.tolerance)
                status = "passed" if ok else "wrong_answer"
                message = "passed" if ok else f"{_short(test.call)} returned {_short(_shown(value))}"
            if crash is not None and status != "passed" and "the program itself" not in message:
                message = f"{_short(message)} (the program itself raised {_short(str(crash))})"
            reports.append(TestReport(start + i, test.call, status == "passed", "outside", message, status))
        return reports

    def _python_calls(self, code: str, tests: ProgramTests, start: int) -> list[TestReport]:
        """Python call tests are CodeVerifier's value tests (``assert <call> == <literal>``, judged outside)."""
        asserts = tuple(_python_assert(t.call, t.expected, self.tolerance) for t in tests.calls)
        inner = CodeVerifier(limits=replace(self.limits, wall_s=self.time_limit_s or self.limits.wall_s),
                             isolation=self.isolation, require_fence=self.require_fence)
        report = inner.report(f"```python\n{code}\n```", CodeTests(tests=asserts))
        if not report.tests:
            return [TestReport(start + i, t.call, False, "outside", report.result.reason, "runtime_error")
                    for i, t in enumerate(tests.calls)]
        return [replace(r, index=start + i, source=t.call) for i, (r, t) in enumerate(zip(report.tests, tests.calls))]

    def _verdict(self, code: str, tests: ProgramTests, reports: list[TestReport]) -> VerifyResult:
        weights = [t.weight for t in (*tests.io, *tests.calls)]
        passed, total = sum(r.passed for r in reports), len(reports)
        if all(r.status == "compile_error" for r in reports):
            return VerifyResult(False, 0.0, code, "compile_error")
        if self.scoring == "fraction":
            score = passed / total
        elif self.scoring == "weighted":
            score = sum(w for w, r in zip(weights, reports) if r.passed) / sum(weights)
        else:
            score = float(passed == total)
        if passed == total:
            return VerifyResult(True, 1.0, code, f"passed:{passed}/{total}")
        letters = "".join(STATUS_LETTERS[r.status] for r in reports)
        return VerifyResult(False, score, code, f"tests_failed:{total - passed}/{total};verdicts:{letters}")


# --- function calls ----------------------------------------------------------------------------------------
_JS_CALL_HARNESS = r"""'use strict';
// Evaluates the candidate (main.js) as a script, then each call expression; reports plain values tagged
// with the run's nonce. Everything it uses is captured before the candidate runs.
const fs = require('fs'), vm = require('vm');
const writeSync = fs.writeSync, readFileSync = fs.readFileSync, closeSync = fs.closeSync;
const parse = JSON.parse, stringify = JSON.stringify, isArray = Array.isArray;
const getPrototypeOf = Object.getPrototypeOf, keys = Object.keys, ObjectPrototype = Object.prototype;
const run = vm.runInThisContext, String_ = String;
const payloadFd = Number(process.argv[2]), resultFd = Number(process.argv[3]);
const job = parse(readFileSync(payloadFd, 'utf8'));
closeSync(payloadFd);
const nonce = job.nonce, calls = job.calls;
function emit(kind, index, value) { writeSync(resultFd, nonce + ' ' + kind + ' ' + index + ' ' + stringify(value) + '\n'); }
function describe(e) {
  try { return (e && e.name ? String_(e.name) + ': ' : '') + String_(e && e.message !== undefined ? e.message : e); }
  catch (_) { return 'an exception'; }
}
function enc(v, depth) {
  if (depth > 64) return {$: 'deep'};
  const t = typeof v;
  if (v === null || t === 'boolean' || t === 'string') return v;
  if (t === 'number') {
    if (v !== v) return {$: 'nan'};
    if (v === Infinity) return {$: 'inf'};
    if (v === -Infinity) return {$: '-inf'};
    return v;
  }
  if (t === 'undefined') return {$: 'undefined'};
  if (t === 'bigint') return {$: 'bigint', v: String_(v)};
  if (t === 'object') {
    if (isArray(v)) {
      const out = {$: 'array', v: []}, n = v.length;
      for (let i = 0; i < n && i < 100000; i++) out.v.push(enc(v[i], depth + 1));
      return out;
    }
    const proto = getPrototypeOf(v);
    if (proto === ObjectPrototype || proto === null) {
      const out = {$: 'object', v: []}, ks = keys(v);
      for (let i = 0; i < ks.length && i < 100000; i++) out.v.push([ks[i], enc(v[ks[i]], depth + 1)]);
      return out;
    }
  }
  return {$: 'opaque', type: t};
}
globalThis.require = require;
globalThis.module = {exports: {}};
globalThis.exports = globalThis.module.exports;
try { run(readFileSync(job.file, 'utf8'), {filename: job.file}); } catch (e) { emit('C', 0, describe(e)); }
for (let i = 0; i < calls.length; i++) {
  let value;
  try { value = run(calls[i], {filename: 'test'}); } catch (e) { emit('X', i, describe(e)); continue; }
  let encoded;
  try { encoded = enc(value, 0); } catch (e) { emit('X', i, describe(e)); continue; }
  emit('V', i, encoded);
}
emit('E', 0, 'end');
"""
_CALL_HARNESSES = {"javascript": ("harness.js", _JS_CALL_HARNESS)}


def _call_records(raw: bytes, nonce: str) -> dict[tuple[str, int], Any]:
    found: dict[tuple[str, int], Any] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != nonce or parts[1] not in "VXCE" or not parts[2].isdigit():
            continue
        try:
            found.setdefault((parts[1], int(parts[2])), json.loads(parts[3]))
        except ValueError:
            continue
    return found


class _Opaque:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return self.kind


def _decode_js(value: Any) -> Any:
    """A reported JavaScript value as plain Python data (objects as dicts, arrays as lists)."""
    if isinstance(value, dict):
        tag = value.get("$")
        if tag == "array" and isinstance(value.get("v"), list):
            return [_decode_js(v) for v in value["v"]]
        if tag == "object" and isinstance(value.get("v"), list):
            return {str(k): _decode_js(v) for k, v in value["v"] if isinstance(k, str)}
        if tag in ("nan", "inf", "-inf"):
            return float(tag)
        if tag == "bigint":
            try:
                return int(value.get("v"))
            except (TypeError, ValueError):
                return _Opaque("a bigint")
        if tag == "undefined":
            return _Opaque("undefined")
        return _Opaque(f"an object of type {value.get('type', '?')}")
    return value


def _same(got: Any, want: Any, tolerance: float) -> bool:
    """Plain-data equality: booleans only equal booleans, numbers compare numerically (within
    ``tolerance`` for non-integers), lists element-wise, objects key-wise."""
    if isinstance(got, _Opaque):
        return False
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, int) and isinstance(got, int):
            return got == want
        if math.isnan(got) or math.isnan(want):
            return math.isnan(got) and math.isnan(want)
        return got == want or abs(got - want) <= tolerance * max(1.0, abs(want))
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w, tolerance) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k], tolerance) for k in want)
    return type(got) is type(want) and got == want


def _python_assert(call: str, expected: Any, tolerance: float) -> str:
    """A call test as a value test CodeVerifier judges outside (a float within ``tolerance``)."""
    if isinstance(expected, float):
        return f"assert math.isclose({call}, {expected!r}, rel_tol={tolerance!r}, abs_tol={tolerance!r})"
    return f"assert {call} == {expected!r}"


def _shown(value: Any) -> str:
    try:
        return json.dumps(value) if not isinstance(value, _Opaque) else repr(value)
    except (TypeError, ValueError):
        return repr(value)


def _source(test: IOTest | CallTest) -> str:
    return test.call if isinstance(test, CallTest) else f"stdin: {test.input[:200]!r}"


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 3] + "..."


__all__ = ["SCORING_MODES", "Build", "CallTest", "IOTest", "ProgramTests", "ProgramVerifier", "build"]
