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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dapo_env.types import CodeTests, InvalidReference, VerifierConfigError, VerifyResult
from .calls import CALL_HARNESSES, call_records, decode_js, python_assert, same, shown
from .compare import CHECKER, check_mode, compare_output
from .languages import Language, get_language, language_of_tag
from .program_tests import CallTest, IOTest, ProgramTests, check_time
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
        check_time(self.time_limit_s, "time_limit_s")
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
        if tests.calls and self.language not in CALL_HARNESSES and self.language != "python":
            raise InvalidReference(f"function (call) tests are supported in {sorted({'python', *CALL_HARNESSES})}; "
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
        harness_file, harness = CALL_HARNESSES[language.name]
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
        records = call_records(out.records, nonce)
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
                value = decode_js(records["V", i])
                ok = same(value, test.expected, self.tolerance)
                status = "passed" if ok else "wrong_answer"
                message = "passed" if ok else f"{_short(test.call)} returned {_short(shown(value))}"
            if crash is not None and status != "passed" and "the program itself" not in message:
                message = f"{_short(message)} (the program itself raised {_short(str(crash))})"
            reports.append(TestReport(start + i, test.call, status == "passed", "outside", message, status))
        return reports

    def _python_calls(self, code: str, tests: ProgramTests, start: int) -> list[TestReport]:
        """Python call tests are CodeVerifier's value tests (``assert <call> == <literal>``, judged outside)."""
        asserts = tuple(python_assert(t.call, t.expected, self.tolerance) for t in tests.calls)
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


def _source(test: IOTest | CallTest) -> str:
    return test.call if isinstance(test, CallTest) else f"stdin: {test.input[:200]!r}"


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 3] + "..."


__all__ = ["SCORING_MODES", "Build", "CallTest", "IOTest", "ProgramTests", "ProgramVerifier", "build"]
