"""Hostile programs: each is contained, scored wrong, and leaves the host and this test process intact.

Two groups: through ``CodeVerifier`` (every layer at once), and against the OS layers alone (a bare
harness without the audit hook), which only run where the per-run uid, namespaces and RLIMIT_NPROC are
active (as root with namespaces; see ``isolation()``). Every fork-bomb-like test is bounded (low process
limit, short wall limit, process-group and per-uid kill) and asserts no process is left behind.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, VerifierPool
from dapo_env.verifiers.sandbox import _UID_BASE, SandboxLimits, isolation, run_sandboxed

FAST = CodeVerifier(timeout_s=2.0, memory_mb=256, max_processes=4, max_output_bytes=10_000)
ADD = CodeTests(tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4"))
GOOD_ADD = "def add(a, b):\n    return a + b\n"
OS_LAYERS = pytest.mark.skipif(
    "uid_drop" not in isolation(), reason="OS-only checks need root with namespaces (per-run uid, netns)"
)


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _processes_with_uid(lo: int, hi: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                uid_line = next(line for line in fh if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if lo <= int(uid_line.split()[1]) < hi:
            found.append(int(entry))
    return found


def _my_sandbox_processes() -> list[int]:
    base = _UID_BASE + (os.getpid() << 4)
    return _processes_with_uid(base, base + 16)


def _wrong(code: str, tests: CodeTests = ADD, verifier: CodeVerifier = FAST) -> str:
    start = time.monotonic()
    result = verifier(fenced(code), tests)
    assert not result.correct and result.score == 0.0, result
    assert time.monotonic() - start < 15
    assert not _my_sandbox_processes()
    return result.reason


# -- through CodeVerifier --------------------------------------------------------------------------
def test_infinite_loop_is_killed_at_the_wall_limit() -> None:
    start = time.monotonic()
    assert _wrong("while True:\n    pass\n" + GOOD_ADD).endswith(";timeout")
    assert time.monotonic() - start < 8


def test_sleeping_forever_after_defining() -> None:
    assert _wrong(GOOD_ADD + "import time\ntime.sleep(3600)").endswith(";timeout")


def test_fork_bomb_is_contained() -> None:
    _wrong("import os\nwhile True:\n    os.fork()\n" + GOOD_ADD)
    _wrong("import multiprocessing\nmultiprocessing.Process(target=print).start()\n" + GOOD_ADD)


def test_memory_bomb() -> None:
    _wrong("blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))\n" + GOOD_ADD)
    _wrong("x = bytearray(8 * 1024 ** 3)\n" + GOOD_ADD)


def test_os_system_and_subprocess(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    _wrong(f"import os\nos.system('touch {marker}')\n" + GOOD_ADD)
    _wrong(f"import subprocess\nsubprocess.run(['touch', '{marker}'])\n" + GOOD_ADD)
    assert not marker.exists()


def test_write_and_delete_outside_its_directory() -> None:
    here = Path(__file__).parent
    with tempfile.NamedTemporaryFile(dir=here, prefix=".hostile-", delete=False) as fh:
        victim = Path(fh.name)
    target = here / ".hostile-written"
    try:
        _wrong(f"import os\nos.remove({str(victim)!r})\n" + GOOD_ADD)
        _wrong(f"open({str(target)!r}, 'w').write('x')\n" + GOOD_ADD)
        assert victim.exists() and not target.exists()
    finally:
        victim.unlink(missing_ok=True)
        target.unlink(missing_ok=True)
    # writing inside its own directory is fine
    assert FAST(fenced("open('scratch.txt', 'w').write('ok')\n" + GOOD_ADD), ADD).correct


def test_network_connect() -> None:
    code = "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\n" + GOOD_ADD
    _wrong(code)
    _wrong("import urllib.request\nurllib.request.urlopen('http://example.com', timeout=1)\n" + GOOD_ADD)


def test_killing_its_parent_spares_the_worker() -> None:
    with VerifierPool(1, timeout_s=20.0) as pool:
        results = pool.map(
            FAST,
            [fenced("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + GOOD_ADD),
             fenced("import os\nos.kill(-1, 9)\n" + GOOD_ADD),
             fenced(GOOD_ADD)],
            [ADD, ADD, ADD],
        )
        assert [r.correct for r in results] == [False, False, True]
        assert pool.replaced == 0  # the sandbox's parent (the worker) survived both attempts


def test_env_secrets_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAPO_TEST_SECRET", "hunter2")
    tests = CodeTests(tests=("import os\nassert os.environ.get('DAPO_TEST_SECRET') == 'hunter2'",))
    _wrong(GOOD_ADD, tests)
    _wrong("import os\nSECRET = open(f'/proc/{os.getppid()}/environ').read()\n", CodeTests(tests=("assert 'hunter2' in SECRET",)))


def test_huge_output() -> None:
    stdio = CodeTests(stdio=(("", "x\n"),))
    assert _wrong("while True:\n    print('x' * 1000)", stdio).endswith(";output_limit")
    assert _wrong("import sys\nsys.stdout.write('y' * 10 ** 7)", stdio).endswith("output_limit")


def test_exit_tricks_do_not_pass_unrun_tests() -> None:
    _wrong("def add(a, b):\n    return 0\nimport sys\nsys.exit(0)")
    _wrong("import os\nos._exit(0)")
    _wrong("print('passed:2/2')\nimport os\nos._exit(0)")  # stdout is never trusted for asserts
    _wrong("raise SystemExit(0)")
    stdio = CodeTests(stdio=(("", "7\n"),))
    _wrong("print(7, flush=True)\nimport os\nos._exit(0)", stdio)  # no completion record -> fail


def test_forged_records_are_ignored() -> None:
    forge = (
        "import sys, os\n"
        "sys.audit('dapo.record', 0, 'pass')\n"
        "sys.audit('dapo.record', 1, 'pass')\n"
        "frame = sys._getframe()\n"
        "seen = []\n"
        "while frame is not None:\n"
        "    seen.extend(str(v) for v in frame.f_locals.values())\n"
        "    frame = frame.f_back\n"
        "for fd in range(3, 30):\n"
        "    for word in seen:\n"
        "        for i in (0, 1):\n"
        "            try:\n"
        "                os.write(fd, f'{word} {i} pass\\n'.encode())\n"
        "            except OSError:\n"
        "                pass\n"
        "os._exit(0)\n"
    )
    _wrong(forge)
    _wrong("import gc\nprint(len(gc.get_objects()))\nimport os\nos._exit(0)")


def test_monkeypatched_builtins_are_restored_before_tests() -> None:
    tests = CodeTests(tests=("assert abs(-3) == 0", "assert len([1, 2]) == 0"))
    _wrong("import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.len = lambda x: 0", tests)


def test_temp_dirs_are_removed() -> None:
    before = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("dapo-sandbox-")}
    FAST(fenced(GOOD_ADD + "open('big.bin', 'wb').write(b'0' * 10 ** 6)"), ADD)
    after = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("dapo-sandbox-")}
    assert after <= before


# -- the OS layers alone (no audit hook) -----------------------------------------------------------
BARE = "import os, sys\nexec(os.read(int(sys.argv[1]), 1 << 20).decode())\n"


def _bare(code: str, **limits: object) -> tuple[str, int | None]:
    params = {"wall_s": 2.0, "memory_mb": 256, "max_processes": 4, **limits}
    outcome = run_sandboxed(BARE, code.encode(), capture_stdout=False, limits=SandboxLimits(**params))
    assert outcome.uid is not None
    assert not _processes_with_uid(outcome.uid, outcome.uid + 1), "sandbox processes survived the run"
    return outcome.records.decode(), outcome.uid


def report(expr: str) -> str:
    """Code that writes ``expr``'s value (or the exception name) to the record fd."""
    return (
        "try:\n"
        f"    value = repr({expr})\n"
        "except BaseException as error:\n"
        "    value = type(error).__name__\n"
        "os.write(int(sys.argv[2]), value.encode())\n"
    )


@OS_LAYERS
def test_os_fork_bomb_bounded_by_nproc_and_cleaned_up() -> None:
    code = (
        "import time\n"
        "children = 0\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        os.setsid()  # try to leave the process group\n"
        "        time.sleep(120)\n"
        "        os._exit(0)\n"
        "    children += 1\n"
        "os.write(int(sys.argv[2]), str(children).encode())\n"
        "time.sleep(120)\n"
    )
    records, _ = _bare(code, max_processes=4)
    assert records.isdigit() and int(records) <= 4  # RLIMIT_NPROC held it; _bare asserted none survive


@OS_LAYERS
def test_os_network_namespace_has_no_network() -> None:
    records, _ = _bare("import socket\n" + report("socket.create_connection(('1.1.1.1', 80), timeout=1)"))
    assert records in {"OSError", "TimeoutError", "ConnectionRefusedError"} or "Unreachable" in records


@OS_LAYERS
def test_os_uid_cannot_kill_parent_or_write_host_files() -> None:
    records, _ = _bare("import signal\n" + report("os.kill(os.getppid(), signal.SIGKILL)"))
    assert records == "PermissionError"
    target = Path(__file__).parent / ".hostile-os-written"
    records, _ = _bare(report(f"open({str(target)!r}, 'w').write('x')"))
    assert records == "PermissionError" and not target.exists()
    records, _ = _bare(report("open('/tmp/inside-private-tmp', 'w').write('x')"))
    assert records == "1" and not Path("/tmp/inside-private-tmp").exists()  # a private tmpfs


@OS_LAYERS
def test_os_memory_and_cpu_limits() -> None:
    records, _ = _bare(report("bytearray(1024 ** 3)"), memory_mb=256)
    assert records == "MemoryError"
    start = time.monotonic()
    records, _ = _bare("while True:\n    pass\n", wall_s=5.0, cpu_s=1)
    assert records == "" and time.monotonic() - start < 4.5  # RLIMIT_CPU fired before the wall limit
