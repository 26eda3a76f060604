"""More hostile candidates through ``CodeVerifier``, as an attacker who wants the reward would write them
(``test_hostile.py`` has the probe-style suite; this one checks every attack really ran).

Each attack asserts that the candidate is scored wrong, that the host is untouched (no file carrying the
attack's marker anywhere it aimed) and that nothing of it survives the verification. Categories: forging
a pass (objects that equal anything, forged records, exits, patched modules), seeing the expected values,
outliving the run and poisoning later candidates, writing the host, reaching the network, signalling the
caller, exhausting a resource, reading secrets.
"""

from __future__ import annotations

import base64
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from dapo_env.types import CodeTests, VerifyResult
from dapo_env.verifiers import CodeVerifier, SandboxLimits, VerifierPool, isolation
from dapo_env.verifiers.code import CodeReport
from sandbox_checks import (
    RAW_SPAWN,
    assert_host_untouched,
    assert_nothing_survives,
    loopback_listeners,
    new_marker,
    nothing_arrived,
)

pytestmark = pytest.mark.skipif(not isolation("full").ok, reason="the code sandbox needs bubblewrap (apt-get install "
                                "bubblewrap): without it CodeVerifier refuses to run")
LIMITS = SandboxLimits(wall_s=5.0, memory_mb=512, max_processes=4, disk_mb=16, max_output_bytes=10_000)
VERIFIER = CodeVerifier(limits=LIMITS)
SECRET = 918273645  # an expected value the candidate is never shown
TESTS = CodeTests(tests=(f"assert f(1) == {SECRET}", f"assert f(2) == {SECRET + 1}"))
WRONG = "def f(x):\n    return x\n"
RIGHT = f"def f(x):\n    return {SECRET - 1} + x\n"


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def wrong(code: str, tests: CodeTests = TESTS, verifier: CodeVerifier = VERIFIER, marker: str = "") -> CodeReport:
    """Verify an attack (``MARKER`` in it becomes ``marker`` or a fresh one); it must score 0 and leave no
    trace."""
    marker = marker or new_marker()
    start = time.monotonic()
    report = verifier.report(fenced(textwrap.dedent(code).replace("MARKER", marker)), tests)
    assert not report.result.correct and report.result.score == 0.0, report
    assert time.monotonic() - start < 60
    assert_host_untouched(marker)
    assert_nothing_survives(marker)
    return report


def ran(report: CodeReport) -> None:
    """The attack really ran to its end inside the run: its ``f`` reports ``'done'``."""
    assert report.tests[0].message == "f(1) returned 'done'", report.tests[0]


def child(code: str, *, wait: bool = True) -> str:
    """Candidate code that runs ``code`` in a fresh interpreter, without the harness's audit hook (the
    program travels base64-encoded, so it needs no quoting)."""
    program = base64.b64encode(textwrap.dedent(code).encode()).decode()
    return f"unhooked({program!r}, wait={wait})\n"


DONE = "def f(x):\n    return 'done'\n"  # a wrong answer that says the attack code before it ran
UNHOOKED = RAW_SPAWN + """
import sys as _sys, time as _time, os as _os
def unhooked(program, wait=True):
    flag = f"/tmp/unhooked-{_time.monotonic_ns()}"
    code = f"import base64\\nexec(base64.b64decode({program!r}))\\nopen({flag!r}, 'w').close()"
    raw_spawn([_sys.executable, "-c", code])
    for _ in range(1000 if wait else 0):
        if _os.path.exists(flag):
            return
        _time.sleep(0.01)
    if wait:
        raise RuntimeError("the unhooked child did not finish")
"""


def test_the_right_answer_passes_and_is_decided_outside() -> None:
    assert VERIFIER(fenced(RIGHT), TESTS) == VerifyResult(True, 1.0, RIGHT.strip(), "passed:2/2")
    report = VERIFIER.report(fenced(RIGHT), TESTS)
    assert [t.decided for t in report.tests] == ["outside", "outside"]


# -- forging a pass ---------------------------------------------------------------------------------
EQUALS_ANYTHING = {
    "always_equal": "class A:\n    def __eq__(self, other): return True\n    __hash__ = object.__hash__\n"
                    "def f(x):\n    return A()\n",
    "int_subclass": "class I(int):\n    def __eq__(self, other): return True\n    __hash__ = int.__hash__\n"
                    "def f(x):\n    return I(0)\n",
    "str_subclass": "class S(str):\n    def __eq__(self, other): return True\n    __hash__ = str.__hash__\n"
                    "def f(x):\n    return S('0')\n",
    "float_subclass": "class F(float):\n    def __eq__(self, other): return True\n    __hash__ = float.__hash__\n"
                      "    def __float__(self): return 0.0\ndef f(x):\n    return F(0.5)\n",
    "list_subclass": "class L(list):\n    def __eq__(self, other): return True\n    def __iter__(self): return iter([])\n"
                     "def f(x):\n    return L([0])\n",
    "dict_subclass": "class D(dict):\n    def __eq__(self, other): return True\n    def items(self): return []\n"
                     "def f(x):\n    return D(a=1)\n",
    "fake_class": "class A:\n    __class__ = property(lambda self: int)\n    def __eq__(self, other): return True\n"
                  "    def __int__(self): return 0\n    def __index__(self): return 0\ndef f(x):\n    return A()\n",
    "metaclass_instancecheck": "class M(type):\n    def __instancecheck__(cls, obj): return True\n"
                               "    def __subclasscheck__(cls, sub): return True\n"
                               "class A(metaclass=M):\n    def __eq__(self, other): return True\n"
                               "def f(x):\n    return A()\n",
    "reflected_eq": "class A:\n    def __eq__(self, other): return NotImplemented\n"
                    "    def __ne__(self, other): return False\n    def __bool__(self): return True\n"
                    "def f(x):\n    return A()\n",
    "nan": "def f(x):\n    return float('nan')\n",
    "generator": "def f(x):\n    yield " + str(SECRET) + "\n",
    "numbers_registered": "import numbers\nclass N:\n    def __eq__(self, other): return True\n"
                          "    def __int__(self): return 0\nnumbers.Integral.register(N)\ndef f(x):\n    return N()\n",
}


@pytest.mark.parametrize("name", sorted(EQUALS_ANYTHING))
def test_objects_that_claim_equality_fail(name: str) -> None:
    wrong(EQUALS_ANYTHING[name])


@pytest.mark.parametrize("name", ["always_equal", "int_subclass", "list_subclass", "reflected_eq"])
def test_objects_that_claim_equality_fail_in_tests_run_inside_too(name: str) -> None:
    """Loops, computed expected values and HumanEval check functions: every ``==`` is judged as plain data."""
    loop = CodeTests(tests=("for i in range(3):\n    assert f(i) == (i + 1) * 7\n",
                            "expected = [1, 2]\nassert f(expected) == expected[::-1]"))
    wrong(EQUALS_ANYTHING[name], loop)
    check = CodeTests(tests=("def check(candidate):\n    for x in range(4):\n        assert candidate(x) == x * x\n"
                             "    assert candidate(5) == 25\n\ncheck(f)\n",), entry_point="f")
    wrong(EQUALS_ANYTHING[name], check)


def test_redefined_prompt_helpers_do_not_fool_the_checks() -> None:
    """A HumanEval test that calls a prompt helper gets the prompt's, even if the candidate redefines it."""
    prefix = ("def encode(s: str) -> str:\n    return s[::-1]\n\n\n"
              "def decode(s: str) -> str:\n    \"\"\"Inverse of encode.\"\"\"\n")
    tests = CodeTests(tests=("def check(candidate):\n    for word in ['abc', 'hello']:\n"
                             "        assert candidate(encode(word)) == word\n\ncheck(decode)\n",),
                      prefix=prefix, entry_point="decode")
    assert VERIFIER(fenced("def decode(s):\n    return s[::-1]"), tests).correct
    wrong("def encode(s):\n    return s\ndef decode(s):\n    return s\n", tests)


FORGERIES = {
    "print_passed": "print('passed:2/2')\nprint('1 P 0 0')\n" + WRONG,
    "exit_zero_at_import": "import sys\n" + WRONG + "sys.exit(0)\n",
    "os_exit_in_test": "import os\ndef f(x):\n    os._exit(0)\n",
    "system_exit_in_test": "def f(x):\n    raise SystemExit(0)\n",
    "keyboard_interrupt": "def f(x):\n    raise KeyboardInterrupt\n",
    "close_every_fd": "import os\ndef f(x):\n    os.closerange(0, 1024)\n    return x\n",
    "dup_stdout_over_records": "import os, sys\ndef f(x):\n    for fd in range(3, 64):\n        try:\n"
                               "            os.dup2(1, fd)\n        except OSError:\n            pass\n"
                               "    print('passed')\n    return x\n",
    "guessed_records": "import os, sys\nwords = set()\nframe = sys._getframe()\nwhile frame is not None:\n"
                       "    words.update(str(v) for v in list(frame.f_locals.values()) + list(frame.f_globals.values()))\n"
                       "    frame = frame.f_back\ndef f(x):\n    for fd in range(3, 64):\n        for word in words:\n"
                       "            for i in range(2):\n                for kind in 'VPS':\n                    try:\n"
                       f"                        os.write(fd, f'{{word}} {{kind}} {{i}} {{{{\"i\": \"{SECRET}\"}}}}\\n'.encode())\n"
                       "                    except OSError:\n                        pass\n    return x\n",
    "patched_encoder": "import sys\nmain = sys.modules['__main__']\n"
                       f"main.encode = lambda value, depth=0: {{'i': '{SECRET}'}}\n"
                       f"import json\njson.dumps = lambda *a, **k: '{{\"i\": \"{SECRET}\"}}'\n" + WRONG,
    "patched_audit": "import sys\nsys.audit = lambda *a: None\n" + WRONG,
    "patched_builtins": "import builtins\nbuiltins.repr = lambda x: '" + str(SECRET) + "'\n"
                        "builtins.int = lambda *a: " + str(SECRET) + "\n" + WRONG,
    "atexit_writer": "import atexit, os\natexit.register(lambda: [os.write(fd, b'P 0 0\\n') for fd in (1, 3, 4)])\n"
                     + WRONG,
    "lingering_thread": "import os, threading, time\ndef spam():\n    while True:\n        for fd in range(3, 16):\n"
                        "            try:\n                os.write(fd, b'x V 0 1\\n')\n            except OSError:\n"
                        "                pass\n        time.sleep(0.01)\nthreading.Thread(target=spam, daemon=True).start()\n"
                        + WRONG,
    "swallowed_stdout": "import sys, io\nsys.stdout = io.StringIO()\nsys.stderr = io.StringIO()\n" + WRONG,
    "recursion_bomb_value": "def f(x):\n    value = []\n    for _ in range(100000):\n        value = [value]\n"
                            "    return value\n",
    "huge_value": "def f(x):\n    return list(range(10 ** 7))\n",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forging_the_result_channel_fails(name: str) -> None:
    wrong(FORGERIES[name])


def test_stdio_output_is_compared_outside() -> None:
    stdio = CodeTests(stdio=(("3\n", "9\n"), ("4\n", "16\n")))
    assert VERIFIER(fenced("n = int(input())\nprint(n * n)"), stdio).correct
    wrong("import os\nprint('9\\n16', flush=True)\nos._exit(0)", stdio)  # no normal finish
    wrong("print(open('/proc/self/fd/0').read())", stdio)  # echoing its input is not the answer
    wrong("import sys\nsys.stdout.write('9\\n' * 100000)", stdio)


# -- seeing the expected values -----------------------------------------------------------------------
REVERSED = str(SECRET)[::-1]  # the search never holds the needle as text, so it cannot find itself
SEARCH = RAW_SPAWN + f'''
import glob, os, sys, time
REVERSED = "{REVERSED}"

def _scan_memory_from_a_child():
    """A fresh interpreter (no audit hook) reads this process's whole memory through /proc/<pid>/mem."""
    reader = (
        "import sys\\n"
        "pid, rev = int(sys.argv[1]), sys.argv[2].encode(); hit = 'no'\\n"
        "mem = open(f'/proc/{{pid}}/mem', 'rb', buffering=0)\\n"
        "for line in open(f'/proc/{{pid}}/maps'):\\n"
        "    lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\\n"
        "    if 'r' not in line.split()[1]: continue\\n"
        "    try:\\n"
        "        mem.seek(lo); chunk = mem.read(hi - lo)\\n"
        "    except (OSError, OverflowError, ValueError): continue\\n"
        "    if rev in chunk[::-1]: hit = 'yes'\\n"
        "open('/tmp/scan', 'w').write(hit)\\n"
    )
    raw_spawn([sys.executable, "-c", reader, str(os.getpid()), REVERSED])
    for _ in range(200):
        if os.path.exists("/tmp/scan"):
            return open("/tmp/scan").read()
        time.sleep(0.05)
    return "no answer"

def _everything_visible():
    seen = [repr(sys.argv), repr(dict(os.environ))]
    frame = sys._getframe()
    while frame is not None:
        seen.append(repr(frame.f_locals) + repr(frame.f_code.co_consts))
        frame = frame.f_back
    for fd in range(0, 64):
        try:
            seen.append(os.pread(fd, 1 << 20, 0).decode("latin-1"))
        except OSError:
            pass
    for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ") + glob.glob("/proc/self/fd/*"):
        try:
            seen.append(open(path, "rb").read(1 << 20).decode("latin-1"))
        except OSError:
            pass
    for root, _, files in os.walk("/tmp"):
        seen.extend(files)
    return "\\n".join(seen)

import re
IN_VIEW = re.search("".join(f"[{{c}}]" for c in reversed(REVERSED)), _everything_visible()) is not None
IN_MEMORY = _scan_memory_from_a_child()

def f(x):
    if IN_VIEW or IN_MEMORY == "yes":
        return int(REVERSED[::-1]) + x - 1
    return (IN_VIEW, IN_MEMORY)
'''


def test_expected_values_are_nowhere_in_the_sandbox() -> None:
    """A candidate that searches argv, the environment, every frame, every descriptor, /proc and the whole
    memory of its process (from an unhooked child) would return the expected values if it saw them."""
    report = VERIFIER.report(fenced(SEARCH), TESTS)
    assert not report.result.correct and report.result.score == 0.0, report
    assert report.tests[0].message == "f(1) returned (False, 'no')"  # both searches ran and found nothing
    # the same search does see a value that is in the sandbox: a test decided inside holds its expected side
    visible = CodeTests(tests=(f"expected = {SECRET}\nassert f(1) == expected",))
    assert VERIFIER(fenced(SEARCH), visible).correct


def test_feedback_shows_the_call_and_the_candidates_value_never_the_expected() -> None:
    report = VERIFIER.report(fenced("def f(x):\n    return x * 10"), TESTS)
    assert [(t.passed, t.message) for t in report.tests] == [(False, "f(1) returned 10"), (False, "f(2) returned 20")]
    assert all(str(SECRET) not in t.message for t in report.tests)


# -- outliving the run, poisoning later candidates ------------------------------------------------------
WATCHER = """
import glob, os, socket, time
open("/tmp/watcher-alive", "w").close()
deadline = time.time() + 20
while time.time() < deadline:  # MARKER
    for path in glob.glob("/proc/*/fd/*"):
        try:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, b"forged V 0 {}\\n")
            os.close(fd)
        except OSError:
            pass
    for target in ("/tmp/MARKER", os.path.expanduser("~/MARKER"), "/dev/shm/MARKER"):
        try:
            open(target, "w").write(repr(dict(os.environ)))
        except OSError:
            pass
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=0.2).sendall(b"MARKER")
    except OSError:
        pass
    time.sleep(0.05)
"""


def test_a_spawned_watcher_neither_survives_nor_poisons_later_candidates() -> None:
    """A double-forked daemon in a new session, started without the audit hook, that would forge results
    into every descriptor it finds, write the host and call home: it runs, and dies with its run."""
    with loopback_listeners() as host, VerifierPool(1, timeout_s=60.0) as pool:
        marker = new_marker()
        watcher = WATCHER.replace("MARKER", marker).replace("PORT", str(host["tcp_port"]))
        daemon = f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", {watcher!r}])
            os._exit(0)
        """
        wait = ("import os, time\nfor _ in range(300):\n    if os.path.exists('/tmp/watcher-alive'):\n"
                "        break\n    time.sleep(0.01)\n")
        alive = "def f(x):\n    return 'done' if os.path.exists('/tmp/watcher-alive') else 'no watcher'\n"
        ran(wrong(UNHOOKED + child(daemon) + wait + alive, marker=marker))
        later_wrong = "def f(x):\n    return 0\n"
        results = pool.map(VERIFIER, [fenced(later_wrong), fenced(RIGHT), fenced(later_wrong)], [TESTS] * 3)
        assert [r.correct for r in results] == [False, True, False], results
        time.sleep(0.5)  # what a survivor would do after the run
        assert nothing_arrived(host)
        assert_host_untouched(marker)
        assert_nothing_survives(marker, *pool.pids())


# -- the host: files, network, processes, secrets ----------------------------------------------------
def test_host_writes_fail_even_around_the_audit_hook() -> None:
    here = str(Path(__file__).resolve().parent)
    marker = new_marker()
    writes = f"""
    import os, subprocess
    for path in ({here!r} + "/{marker}", "/tmp/../{marker}", "/dev/shm/{marker}", "/var/tmp/{marker}",
                 "/usr/{marker}"):
        subprocess.run(["/bin/sh", "-c", f"echo x > {{path}}; mkdir {{path}}-dir; mkfifo {{path}}-fifo"])
    os.chdir("/")
    for attempt in (lambda: open("{marker}", "w"), lambda: os.mkfifo("{marker}-fifo"),
                    lambda: os.open("{marker}", os.O_CREAT | os.O_WRONLY, dir_fd=os.open({here!r}, os.O_RDONLY)),
                    lambda: os.open("{marker}", os.O_CREAT | os.O_WRONLY, dir_fd=os.open("/", os.O_RDONLY)),
                    lambda: os.chmod({here!r}, 0o777), lambda: os.unlink({__file__!r})):
        try:
            attempt()
        except OSError:
            pass
    """
    ran(wrong(UNHOOKED + child(writes) + DONE, marker=marker))
    assert Path(here).stat().st_mode & 0o777 != 0o777 and Path(__file__).exists()


def test_filling_the_disk_is_capped_per_run() -> None:
    result = wrong("import os\ndef f(x):\n    for i in range(1000):\n        try:\n"
                   "            with open(f'/tmp/MARKER-{i}', 'wb') as fh:\n                fh.write(b'0' * (1 << 24))\n"
                   "        except OSError:\n            break\n    return x\n")
    assert result.result.reason == "tests_failed:2/2"  # ENOSPC at the tmpfs size, then it returned


def test_no_connection_to_any_address() -> None:
    with loopback_listeners() as host:
        connects = f"""
        import socket
        targets = ((socket.AF_INET, ("127.0.0.1", {host["tcp_port"]})), (socket.AF_INET, ("1.1.1.1", 443)),
                   (socket.AF_INET6, ("::1", {host["tcp_port"]})), (socket.AF_UNIX, {host["abstract"]!r}))
        for family, address in targets:
            try:
                sock = socket.socket(family)
                sock.settimeout(0.5)
                sock.connect(address)
                sock.sendall(b"MARKER")
            except OSError:
                pass
        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"MARKER", ("127.0.0.1", {host["udp_port"]}))
        except OSError:
            pass
        """
        ran(wrong(UNHOOKED + child(connects) + DONE))
        assert nothing_arrived(host)


def test_the_caller_and_its_ancestors_cannot_be_signalled() -> None:
    with VerifierPool(1, timeout_s=60.0) as pool:
        targets = [os.getpid(), os.getppid(), *pool.pids()]
        kills = f"""
        import os, signal
        for pid in {targets} + [os.getppid(), 1, -1]:
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
                try:
                    signal.pidfd_send_signal(os.pidfd_open(pid), sig)
                except (OSError, ValueError):
                    pass
        """
        attack = UNHOOKED + child(kills, wait=False) + "import time\ntime.sleep(0.3)\n" + WRONG
        results = pool.map(VERIFIER, [fenced(attack), fenced(RIGHT)], [TESTS, TESTS])
        assert [r.correct for r in results] == [False, True]
        assert pool.replaced == 0  # the worker that ran the sandbox survived


def test_secrets_stay_out_of_results_and_feedback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAPO_TEST_SECRET", "hunter2-secret")
    leak = ("import glob, os\ndef f(x):\n    seen = [repr(dict(os.environ))]\n"
            "    for path in ['/etc/shadow', os.path.expanduser('~')] + glob.glob('/proc/*/environ'):\n"
            "        try:\n            seen.append(repr(os.listdir(path)) if os.path.isdir(path) else open(path).read())\n"
            "        except OSError:\n            pass\n    return ' '.join(seen)\n")
    report = VERIFIER.report(fenced(leak), TESTS)
    assert not report.result.correct
    assert all("hunter2" not in t.message and "root:" not in t.message for t in report.tests), report


# -- exhausting resources ------------------------------------------------------------------------------
def test_infinite_loop_is_killed_at_the_wall_limit() -> None:
    """Killed by the wall clock or its CPU-seconds rlimit (whichever a loaded machine reaches first), both
    reported as a timeout, within the limit plus start-up."""
    verifier = CodeVerifier(limits=SandboxLimits(wall_s=2.0))
    start = time.monotonic()
    result = wrong("while True:\n    pass\n" + WRONG, verifier=verifier)
    assert result.result.reason == "tests_failed:2/2;timeout"
    assert time.monotonic() - start < 2.0 + 15.0


@pytest.mark.parametrize("code", [
    "import time\ntime.sleep(3600)  # MARKER\n",
    "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n",
    RAW_SPAWN + "import sys\nwhile True:\n    try:\n        raw_spawn([sys.executable, '-c', 'import time; time.sleep(60)  # MARKER'])\n"
                "    except OSError:\n        pass\n",
    "blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))\n",
    "x = bytearray(8 * 1024 ** 3)\n",
    "import threading, time\nfor _ in range(1000):\n    threading.Thread(target=time.sleep, args=(60,)).start()\n",
    "import os\nfiles = [open('/dev/null') for _ in range(10000)]\n",
    "import sys\nsys.setrecursionlimit(10 ** 6)\ndef r(n):\n    return r(n + 1)\nr(0)\n",
])
def test_resource_exhaustion_is_contained(code: str) -> None:
    wrong(code + WRONG)


def test_huge_stdio_output_is_cut() -> None:
    stdio = CodeTests(stdio=(("", "x\n"),))
    assert wrong("while True:\n    print('x' * 1000)", stdio).result.reason.endswith(";output_limit")


def test_exit_codes_and_ignored_signals_do_not_count() -> None:
    wrong("import signal\nfor s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n    signal.signal(s, signal.SIG_IGN)\n"
          + WRONG)
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # the caller's handlers are its own


@pytest.mark.parametrize("code", ["x = " + "-" * 100000 + "1", "x = " + "+".join(["1"] * 200000),
                                  "x = " + "(" * 5000 + ")" * 5000, "x = 2 ** 10 ** 10\n" + WRONG])
def test_code_that_exhausts_the_parser_is_scored_not_raised(code: str) -> None:
    result = VERIFIER(fenced(code), TESTS)  # parsed and compiled in the caller's process: must not raise
    assert not result.correct and result.score == 0.0
