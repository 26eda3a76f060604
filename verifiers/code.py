"""CodeVerifier: extract a Python program from a response and score it by the tests it passes.

The program runs in a fresh sandboxed process per candidate (``sandbox.py``: temp dir, scrubbed env,
rlimits, wall-clock kill of the process group, and as root a network namespace plus a per-run
unprivileged uid). A trusted harness inside that process runs the candidate, then ``setup``, then each
test, and reports every test's outcome on a pipe opened before the candidate runs, tagged with a random
per-run nonce the candidate never sees. A test counts only when its record with the nonce arrives, so
exiting early (``SystemExit``, ``os._exit(0)``), printing fake output or crashing the harness can only
lose tests, never win them. Exit codes and stdout are never trusted for assert tests.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from dataclasses import dataclass

from dapo_env.types import CodeTests, VerifyResult
from .references import code_tests
from .sandbox import SandboxLimits, isolation, run_sandboxed

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.\-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})

# The harness runs as ``python -I -c HARNESS <payload_fd> <result_fd>`` inside the sandbox. Two audit
# hooks are installed before the candidate runs. The reporter holds the nonce and the result fd in its
# closure and writes "<nonce> <test> <outcome>" only for a "dapo.record" event raised from main()'s own
# frame (the one frame that announced itself with "dapo.start"), ignoring every other caller. Python code
# cannot list audit hooks; the guard refuses the remaining ways to reach the reporter's closure (gc
# object walks, other threads' frames, tracing, ctypes, /proc/*/mem) and the OS-level escapes. main()'s
# own locals hold no secret, so frame inspection (which namedtuple and typing need) stays allowed.
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
        elif legit and frame is legit[0] and len(args) == 2:
            write(result_fd, f"{nonce} {args[0]} {args[1]}\n".encode())

    workdir = os.path.realpath(os.getcwd())
    blocked = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.kill",
               "os.killpg", "os.system", "os.startfile", "ctypes.", "pty.", "sys._current_frames",
               "sys.settrace", "sys.setprofile", "gc.get_", "sys.addaudithook")
    path_events = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                             "os.link", "os.symlink", "os.truncate", "os.utime", "shutil.rmtree",
                             "shutil.move", "shutil.copyfile", "shutil.copytree"})
    realpath, fspath, join = os.path.realpath, os.fspath, os.path.join

    def as_text(path):
        try:
            path = fspath(path)
        except TypeError:
            return None
        return path.decode("utf-8", "replace") if isinstance(path, bytes) else path

    def outside(path):
        path = as_text(path)
        if not isinstance(path, str):
            return False
        full = realpath(join(workdir, path))
        return full != workdir and not full.startswith(workdir + "/")

    def guard(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and args and not isinstance(args[0], int):
            name = as_text(args[0]) or ""
            if name.startswith("/proc/") and ("mem" in name or "environ" in name):
                raise PermissionError("sandbox: process memory is not readable")
            mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & 0o3103)
            if writing and outside(name):
                raise PermissionError("sandbox: writes outside the working directory are not allowed")
        elif event in path_events:
            for arg in args:
                if isinstance(arg, (str, bytes)) or hasattr(arg, "__fspath__"):
                    if outside(arg):
                        raise PermissionError(f"sandbox: {event} outside the working directory")

    sys.addaudithook(reporter)
    sys.addaudithook(guard)


def main():
    payload_fd, result_fd = int(sys.argv[1]), int(sys.argv[2])
    chunks = []
    while True:
        chunk = os.read(payload_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(payload_fd)
    import json
    job = json.loads(b"".join(chunks))
    chunks = None
    install(job.pop("nonce"), result_fd, main.__code__)
    # Only immutable values from here on: candidate code can read this frame, not rebind its locals.
    mode, code, setup, tests = str(job["mode"]), str(job["code"]), str(job["setup"]), tuple(job["tests"])
    job = None
    import builtins
    audit, run, compile_, exc_type, stdout, is_int = sys.audit, exec, compile, BaseException, sys.stdout, int
    namespace = {"__name__": "__main__" if mode == "stdio" else "candidate", "__builtins__": builtins}
    saved_builtins = tuple(builtins.__dict__.items())
    audit("dapo.start")
    try:
        run(compile_(code, "<candidate>", "exec"), namespace)
        status = "ok"
    except SystemExit as stop:
        status = "ok" if stop.code is None or (type(stop.code) is is_int and stop.code == 0) else "exit"
    except exc_type:
        status = "error"
    if mode == "stdio":
        try:
            stdout.flush()
        except exc_type:
            status = "error"
        audit("dapo.record", "S", status)
        audit("dapo.record", "E", "end")
        return
    builtins.__dict__.clear()  # undo any monkeypatching of builtins before the tests run
    builtins.__dict__.update(saved_builtins)
    namespace["__builtins__"] = builtins
    try:
        run(compile_(setup, "<setup>", "exec"), namespace)
    except exc_type:
        pass
    for index, test in enumerate(tests):
        try:
            run(compile_(test, "<test>", "exec"), namespace)
            outcome = "pass"
        except exc_type:
            outcome = "fail"
        audit("dapo.record", index, outcome)
    audit("dapo.record", "E", "end")

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


@dataclass(frozen=True, kw_only=True)
class CodeVerifier:
    """Scores a response's Python program by the fraction of ``CodeTests`` it passes, in a sandbox.

    Args:
        timeout_s: wall-clock limit per sandboxed run (all assert tests share one run; each stdio pair
            gets its own); the process group is killed past it.
        cpu_s: CPU-seconds rlimit per run (default: ``timeout_s`` rounded up).
        memory_mb: address-space rlimit per process, MiB.
        file_size_mb: largest file the program may write, MiB.
        max_processes: RLIMIT_NPROC for the sandbox uid (enforced when not running as root, or as root
            when the per-run uid drop is active; see :meth:`isolation`).
        max_output_bytes: stdout kept per stdio run; more fails that test.
        require_fence: only accept code inside a fenced block (otherwise an unfenced response that parses
            as Python is taken whole).

    Reasons: ``"passed:k/n"``, ``"tests_failed:f/n"`` (``";timeout"`` or ``";output_limit"`` appended when
    a run was cut), ``"no_code"``, ``"syntax_error"``, ``"sandbox_error:<Type>"``.

    Example:
        >>> from dapo_env.types import CodeTests
        >>> verifier = CodeVerifier(timeout_s=5.0)
        >>> tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0"))
        >>> verifier("```python\\ndef add(a, b):\\n    return a + b\\n```", tests).reason
        'passed:2/2'
    """

    timeout_s: float = 6.0
    cpu_s: int | None = None
    memory_mb: int = 1024
    file_size_mb: int = 16
    max_processes: int = 8
    max_output_bytes: int = 1 << 20
    require_fence: bool = False

    def __post_init__(self) -> None:
        self.limits()  # validates every limit, with a message naming the field

    def limits(self) -> SandboxLimits:
        """The per-run :class:`SandboxLimits` these settings give."""
        return SandboxLimits(
            wall_s=self.timeout_s,
            cpu_s=self.cpu_s,
            memory_mb=self.memory_mb,
            file_size_mb=self.file_size_mb,
            max_processes=self.max_processes,
            max_output_bytes=self.max_output_bytes,
        )

    @staticmethod
    def isolation() -> tuple[str, ...]:
        """The sandbox layers active on this machine (see ``dapo_env.verifiers.sandbox.isolation``)."""
        return isolation()

    @staticmethod
    def prepare_reference(reference: object) -> CodeTests:
        """The tests as :class:`CodeTests`: from ``CodeTests``, a dict of its fields, its JSON string or a
        list of asserts (:func:`~dapo_env.verifiers.references.code_tests`); anything else raises
        ``InvalidReference``."""
        return code_tests(reference)

    def __call__(self, response: str, tests: CodeTests) -> VerifyResult:
        tests = code_tests(tests)  # dict / JSON / list of asserts; a wrong type raises InvalidReference
        code = extract_code(response, require_fence=self.require_fence, prefix=tests.prefix)
        if code is None:
            return VerifyResult(False, 0.0, None, "no_code")
        program = assemble_program(code, tests)
        if not _compiles(program):
            return VerifyResult(False, 0.0, code, "syntax_error")
        try:
            passed, cut = self._run_all(program, tests)
        except Exception as exc:  # the sandbox itself failed (e.g. fork refused): never raise on output
            return VerifyResult(False, 0.0, code, f"sandbox_error:{type(exc).__name__}")
        total = tests.num_tests
        if passed == total:
            return VerifyResult(True, 1.0, code, f"passed:{passed}/{total}")
        suffix = f";{cut}" if cut else ""
        return VerifyResult(False, passed / total, code, f"tests_failed:{total - passed}/{total}{suffix}")

    def _run_all(self, program: str, tests: CodeTests) -> tuple[int, str]:
        limits, passed, cut = self.limits(), 0, ""
        if tests.tests:
            nonce = secrets.token_hex(16)
            job = {"nonce": nonce, "mode": "tests", "code": program, "setup": tests.setup, "tests": list(tests.tests)}
            outcome = run_sandboxed(
                HARNESS, json.dumps(job).encode(), capture_stdout=False, limits=limits, end_marker=_end(nonce)
            )
            passed += len(_passed_indices(outcome.records, nonce, len(tests.tests)))
            cut = "timeout" if outcome.timed_out else cut
        for stdin, expected in tests.stdio:
            nonce = secrets.token_hex(16)
            job = {"nonce": nonce, "mode": "stdio", "code": program, "setup": "", "tests": []}
            outcome = run_sandboxed(
                HARNESS,
                json.dumps(job).encode(),
                stdin=stdin.encode(),
                capture_stdout=True,
                limits=limits,
                end_marker=_end(nonce),
            )
            finished = f"{nonce} S ok" in outcome.records.decode("utf-8", "replace").splitlines()
            stdout = outcome.stdout.decode("utf-8", "replace")
            if finished and not outcome.output_limited and _normalise(stdout) == _normalise(expected):
                passed += 1
            if outcome.timed_out or outcome.output_limited:
                cut = "timeout" if outcome.timed_out else "output_limit"
        return passed, cut


def _end(nonce: str) -> bytes:
    """The harness's last record: once it arrives the run's results are complete."""
    return f"{nonce} E end\n".encode()


def _passed_indices(records: bytes, nonce: str, count: int) -> set[int]:
    """Indices of tests whose ``"<nonce> <index> pass"`` record arrived (anything else counts as failed)."""
    passed: set[int] = set()
    for line in records.decode("utf-8", "replace").splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == nonce and parts[2] == "pass" and parts[1].isdigit():
            index = int(parts[1])
            if index < count:
                passed.add(index)
    return passed


__all__ = ["CodeVerifier", "assemble_program", "extract_code"]
