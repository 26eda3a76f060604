"""Attacks on the code sandbox, as a reward-hacking policy would write them.

Every attack is scored wrong, leaves the host untouched and leaves no process behind. Three families:

- **wrong passes**: code that does not solve the task but tries to make its tests pass anyway (objects whose
  ``__eq__`` is always true, forged result lines, reading the tests or the harness's secrets, patching
  what the tests use, exiting early);
- **probes**: ``assert attack() == "escaped"``, where ``attack()`` returns ``"escaped"`` only if it reached
  something it must not (a host file, the network, the caller's environment, another process); the
  verifier's verdict says whether the attack worked, so a probe that passes is a hole;
- **resource attacks**: loops, fork/thread/memory/disk/output bombs, processes that try to outlive the run.

They run as root (this project's machines and CI) through the full bubblewrap sandbox; the non-root path
is exercised by a forked child that drops to an unprivileged uid before verifying.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path
from textwrap import indent

import pytest

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, VerifierPool
from dapo_env.verifiers.sandbox import SandboxLimits, isolation

pytestmark = pytest.mark.skipif(
    not isolation("full").ok,
    reason=f"the code sandbox needs bubblewrap: {dict(isolation('full').missing).get('bubblewrap', '')}")

LIMITS = SandboxLimits(wall_s=3.0, memory_mb=256, disk_mb=8, max_processes=4, max_output_bytes=10_000)
FAST = CodeVerifier(limits=LIMITS)
# Legitimate candidates get a generous wall limit: on a loaded 2-core machine starting a sandbox alone can
# take seconds, and a correct solution scored wrong for that reason would make these checks flaky.
PATIENT = CodeVerifier(limits=SandboxLimits(wall_s=60.0))
ADD = CodeTests(tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4"))
WRONG_ADD = "def add(a, b):\n    return a - b\n"
PROBE = CodeTests(tests=("assert attack() == 'escaped'",))
UID_BASE = 0x20000000
REPO = Path(__file__).resolve().parents[2]


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _uid_range(pid: int) -> range:
    """The per-run sandbox uids a verifier in process ``pid`` uses (see ``sandbox._next_uid``)."""
    base = UID_BASE + ((pid & 0xFFFFFF) << 4)
    return range(base, base + 16)


def _live_sandbox_processes(marker: str | None = None, pids: tuple[int, ...] = ()) -> list[str]:
    """Host processes of the sandbox uids of this test process (and of ``pids``, e.g. pool workers), or
    whose command line holds ``marker``. Other processes' sandboxes (parallel test runs) are not ours."""
    ours = [_uid_range(pid) for pid in (os.getpid(), *pids)]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rpartition(b")")[2].split()[0] == b"Z":
                    continue
            uid = os.stat(f"/proc/{entry}").st_uid
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, IndexError):
            continue
        if any(uid in r for r in ours) or (marker and marker in cmdline and "pytest" not in cmdline):
            found.append(f"{entry} uid={uid} {cmdline[:120]}")
    return found


def _wrong(code: str, tests: CodeTests = ADD, verifier: CodeVerifier = FAST, marker: str | None = None) -> str:
    start = time.monotonic()
    result = verifier(fenced(code), tests)
    assert not result.correct and result.score == 0.0, result
    assert time.monotonic() - start < 60  # the wall limit holds; a loaded machine starts runs slowly
    deadline = time.monotonic() + 10.0
    while _live_sandbox_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _live_sandbox_processes(marker), _live_sandbox_processes(marker)
    return result.reason


def _probe(body: str, verifier: CodeVerifier = FAST, marker: str | None = None) -> str:
    """Run ``attack()`` (``body`` is its source, returning "escaped" on success); it must not pass."""
    code = "def attack():\n" + indent(f"try:\n{indent(body, '    ')}\nexcept BaseException as exc:\n    return repr(exc)",
                                      "    ")
    return _wrong(code, PROBE, verifier, marker)


# --- wrong passes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [
    "class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\ndef add(a, b):\n    return Any()",
    "class Any(int):\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Any(0)",
    "class Any(str):\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
    "def add(a, b):\n    return Any('x')",
    "class Any(list):\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Any()",
    "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\ndef add(a, b):\n    return 0",
    "import json\njson.dumps = lambda *a, **k: '{\"i\": \"3\"}'\ndef add(a, b):\n    return 0",
    "import sys\nmain = sys.modules['__main__']\nmain.encode = lambda *a, **k: {'i': '4'}\ndef add(a, b):\n    return 0",
    "import sys\nsys.modules['__main__'].evaluate = lambda *a, **k: 3\ndef add(a, b):\n    return 0",
    "import sys\nsys.audit = lambda *a: None\ndef add(a, b):\n    return 0",
])
def test_objects_and_patches_cannot_fake_a_value(code: str) -> None:
    _wrong(code)


@pytest.mark.parametrize("code", [
    "import os\nos._exit(0)",
    "raise SystemExit(0)",
    "import sys\nprint('passed:2/2')\nfor fd in range(3, 40):\n    try:\n        os.write(fd, b'0 V 0 {\"i\": \"3\"}\\n')\n"
    "    except Exception:\n        pass\nimport os",
    "import os\nfor fd in range(0, 64):\n    for line in (b'x V 0 {\"i\": \"3\"}\\n', b'x P 0 0\\n', b'x E 0 end\\n'):\n"
    "        try:\n            os.write(fd, line)\n        except OSError:\n            pass\nos._exit(0)",
    "import threading, os, time\ndef add(a, b):\n    threading.Thread(target=lambda: os._exit(0)).start()\n"
    "    time.sleep(1)\n    return 0",
])
def test_early_exits_and_forged_lines_pass_nothing(code: str) -> None:
    _wrong(code)


def test_reading_the_tests_from_frames_and_memory_finds_no_expected_value() -> None:
    """The expected values never enter the sandbox: frames, the payload pipe, /proc and memory hold none."""
    code = (
        "import sys, os, gc\n"
        "def add(a, b):\n"
        "    seen = []\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        seen.append(repr(frame.f_locals)[:100000])\n"
        "        frame = frame.f_back\n"
        "    for path in ('/proc/self/mem', '/proc/1/fd/3', '/proc/self/fd/3', '/proc/self/environ', '/dev/fd/3'):\n"
        "        try:\n            seen.append(open(path, 'rb').read(1 << 16).decode('latin-1'))\n"
        "        except Exception:\n            pass\n"
        "    try:\n        os.chdir('/proc/self')\n        seen.append(open('mem', 'rb').read(100))\n"
        "    except Exception:\n        pass\n"
        "    try:\n        fd = os.open('/proc', os.O_RDONLY)\n"
        "        seen.append(os.read(os.open('self/environ', os.O_RDONLY, dir_fd=fd), 1000).decode())\n"
        "    except Exception:\n        pass\n"
        "    text = ' '.join(map(str, seen))\n"
        "    needle = 'add(1, 2) =' + '= 3'  # built at run time: the candidate's own source must not match\n"
        "    return 3 if needle in text else -1\n"
    )
    assert _wrong(code, CodeTests(tests=("assert add(1, 2) == 3",))) == "tests_failed:1/1"


def test_nothing_outlives_a_run_to_watch_later_candidates() -> None:
    """A process that setsid()s and double-forks (through ``_posixsubprocess`` to dodge the audit hook) is
    gone when the verifier returns, so it cannot forge a later candidate's result."""
    marker = uuid.uuid4().hex[:12]
    code = (
        "import os, sys, _posixsubprocess\n"
        f"argv = [b'/bin/sh', b'-c', b'sleep 30 # {marker}']\n"
        "try:\n"
        "    r, w = os.pipe()\n"
        "    _posixsubprocess.fork_exec(argv, [argv[0]], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w,\n"
        "                               True, True, 0, None, None, None, -1, None, False)\n"
        "except Exception as exc:\n"
        "    pass\n"
        "try:\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 30 # {marker}'])\n"
        "        os._exit(0)\n"
        "except Exception:\n"
        "    pass\n"
        + WRONG_ADD
    )
    _wrong(code, marker=marker)
    good = PATIENT(fenced("def add(a, b):\n    return a + b"), ADD)  # a later candidate is scored on its own
    assert good.correct, good


# --- probes: the host, the network, secrets, the caller ------------------------------------------------
def test_host_files_cannot_be_written(tmp_path: Path) -> None:
    name = f"dapo-hostile-{uuid.uuid4().hex}"
    targets = [f"/tmp/{name}", f"/dev/shm/{name}", str(tmp_path / name), str(REPO / name), f"/root/{name}",
               f"/var/tmp/{name}", os.path.join(os.getcwd(), name)]
    body = (
        "import os\n"
        "hits = []\n"
        f"for path in {targets!r}:\n"
        "    for how in ('open', 'dirfd', 'mkfifo', 'chdir'):\n"
        "        try:\n"
        "            if how == 'open':\n                open(path, 'w').write('x')\n"
        "            elif how == 'dirfd':\n"
        "                fd = os.open(os.path.dirname(path), os.O_RDONLY)\n"
        "                os.close(os.open(os.path.basename(path), os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n"
        "            elif how == 'mkfifo':\n                os.mkfifo(path)\n"
        "            else:\n"
        "                os.chdir(os.path.dirname(path))\n                open(os.path.basename(path), 'w').write('x')\n"
        "            hits.append(path)\n"
        "        except Exception:\n            pass\n"
        "return 'escaped' if any(not p.startswith('/tmp/') for p in hits) else 'contained'\n"
    )
    _probe(body)
    for target in targets:
        assert not os.path.exists(target), target


def test_the_caller_environment_home_and_shadow_are_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = uuid.uuid4().hex
    monkeypatch.setenv("DAPO_TEST_SECRET", secret)
    body = (
        "import os, glob\n"
        "found = []\n"
        "found.append(str(dict(os.environ)))\n"
        "for path in ['/etc/shadow', '/etc/passwd', '/root', '/home'] + glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        "        found.append(open(path, 'rb').read().decode('latin-1') if os.path.isfile(path) else str(os.listdir(path)))\n"
        "    except Exception:\n        pass\n"
        "try:\n    fd = os.open('/proc', os.O_RDONLY)\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n            found.append(os.read(os.open(pid + '/environ', os.O_RDONLY, dir_fd=fd), 65536).decode('latin-1'))\n"
        "        except Exception:\n            pass\n"
        "except Exception:\n    pass\n"
        "text = ' '.join(found)\n"
        f"return 'escaped' if ({secret!r} in text or 'root:' in text or '.bashrc' in text) else 'contained'\n"
    )
    _probe(body)


def test_no_connection_to_any_address_loopback_included() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    body = (
        "import socket, _socket\n"
        "for make in (socket.socket, _socket.socket):\n"
        f"    for host in ('127.0.0.1', 'localhost', '0.0.0.0', '10.0.0.1', '8.8.8.8'):\n"
        "        try:\n"
        "            s = make(socket.AF_INET, socket.SOCK_STREAM)\n            s.settimeout(0.3)\n"
        f"            s.connect((host, {port}))\n"
        "            return 'escaped'\n"
        "        except Exception:\n            pass\n"
        "return 'contained'\n"
    )
    try:
        _probe(body)
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert not accepted


def test_the_caller_and_its_ancestors_cannot_be_signalled() -> None:
    sentinel = os.fork()
    if sentinel == 0:  # a process of the test's own, which the candidate tries to kill by scanning pids
        time.sleep(60)
        os._exit(0)
    try:
        body = (
            "import os, signal\n"
            "tried = 0\n"
            f"for pid in [os.getppid(), 1, {os.getpid()}, {sentinel}] + list(range(2, 4000)):\n"
            "    for how in ('kill', 'pidfd'):\n"
            "        try:\n"
            "            if how == 'kill':\n                os.kill(pid, signal.SIGKILL)\n"
            "            else:\n                signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)\n"
            "            tried += 1\n"
            "        except Exception:\n            pass\n"
            "try:\n    os.kill(-1, signal.SIGKILL)\nexcept Exception:\n    pass\n"
            "return 'contained'\n"
        )
        _probe(body)
        assert os.waitpid(sentinel, os.WNOHANG) == (0, 0)  # still alive
    finally:
        os.kill(sentinel, 9)
        os.waitpid(sentinel, 0)


def test_only_its_own_processes_are_visible() -> None:
    body = (
        "import os\n"
        "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "return 'escaped' if len(pids) > 8 or os.getuid() == 0 else 'contained'\n"
    )
    _probe(body)


# --- resources ----------------------------------------------------------------------------------------
def test_infinite_loop_is_killed_at_the_wall_limit() -> None:
    start = time.monotonic()
    reason = _wrong("while True:\n    pass\n" + WRONG_ADD)
    # killed by the wall clock or, on an idle machine, the CPU rlimit of the same budget: both count
    assert reason.startswith("tests_failed:2/2") and "timeout" in reason, reason
    assert time.monotonic() - start < LIMITS.wall_s + 10  # generous: a loaded machine starts runs slowly


@pytest.mark.parametrize("code", [
    "import os\nwhile True:\n    try:\n        os.fork()\n    except Exception:\n        pass",
    "import _posixsubprocess, os\nwhile True:\n    try:\n        _posixsubprocess.fork_exec([b'/bin/sh', b'-c', b'sleep 30'], [b'/bin/sh'], True, (), None, None,"
    " -1, -1, -1, -1, -1, -1, *os.pipe(), True, True, 0, None, None, None, -1, None, False)\n    except Exception:\n        pass",
    "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,)).start()",
    "blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))",
    "import time\ntime.sleep(3600)",
    "print('x' * 10 ** 8)",
    "import sys\nwhile True:\n    sys.stderr.write('x' * 10 ** 6)",
    "fh = open('big', 'wb')\nwhile True:\n    fh.write(b'x' * (1 << 20))",
    "files = [open(f'f{i}', 'w') for i in range(10 ** 5)]",
])
def test_resource_bombs_are_contained(code: str) -> None:
    _wrong(code + "\n" + WRONG_ADD)


def test_disk_is_capped_per_run_not_per_file() -> None:
    body = (
        "written = 0\n"
        "for i in range(1000):\n"
        "    try:\n"
        "        with open(f'part{i}', 'wb') as fh:\n            fh.write(b'x' * (1 << 20))\n"
        "        written += 1 << 20\n"
        "    except OSError:\n        break\n"
        f"return 'escaped' if written > {LIMITS.disk_mb} << 20 else 'contained'\n"
    )
    _probe(body)


def test_attacks_through_a_worker_pool_leave_the_pool_working() -> None:
    attacks = ["import os\nos.kill(os.getppid(), 9)", "import os, signal\nos.killpg(0, signal.SIGKILL)",
               "while True:\n    pass", WRONG_ADD]
    responses = [fenced(a + "\n" + WRONG_ADD) for a in attacks]
    with VerifierPool(2, timeout_s=90.0) as pool:
        results = pool.map(FAST, responses, [ADD] * len(responses))
        after = pool.map(PATIENT, [fenced("def add(a, b):\n    return a + b")], [ADD])  # the pool still serves
        workers = tuple(pool.pids())
    assert not _live_sandbox_processes(pids=workers)
    assert [r.correct for r in results] == [False] * len(attacks), [r.reason for r in results]
    assert after[0].correct, after[0].reason


# --- without root --------------------------------------------------------------------------------------
def test_the_non_root_path_isolates_too(tmp_path: Path) -> None:
    """A child drops to an unprivileged uid and verifies with the system's own interpreter (an unprivileged
    user can always run their own Python; ours lives under a 0700 home here)."""
    if os.geteuid() != 0:
        pytest.skip("this check forks a child that drops from root to an unprivileged uid; already unprivileged")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs /usr/bin/python3 (a system interpreter an unprivileged uid can run)")
    from dapo_env.verifiers import sandbox

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            system = os.path.realpath("/usr/bin/python3")
            sandbox.interpreter = lambda: system  # type: ignore[assignment]
            sandbox._prefix = lambda: "/usr"  # type: ignore[assignment]
            sandbox._probe_bwrap.cache_clear()
            good = PATIENT(fenced("def add(a, b):\n    return a + b"), ADD)
            cheat = FAST(fenced("class A:\n    def __eq__(s, o):\n        return True\ndef add(a, b):\n    return A()"),
                         ADD)
            bomb = FAST(fenced("import os\nwhile True:\n    try:\n        os.fork()\n    except Exception:\n        pass\n"
                               + WRONG_ADD), ADD)
            layers = sandbox.isolation("full")
            os.write(write, f"{good.correct} {cheat.correct} {bomb.correct} {layers.ok}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    _, code = os.waitpid(pid, 0)
    answer = os.read(read, 100).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(code) == 0, answer
    assert answer == "True False False True", answer


# --- through the environment layer ---------------------------------------------------------------------
def test_real_tasks_through_the_env_reference_passes_cheats_fail(shared_data: Path) -> None:
    import gymnasium as gym

    import dapo_env  # noqa: F401  (registers the ids)

    cheats = [
        "```python\nclass Any:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
        "        return False\n    __hash__ = object.__hash__\nimport builtins\n"
        "def __getattr__(name):\n    return lambda *a, **k: Any()\n```",
        "```python\nimport os\nos._exit(0)\n```",
    ]
    for env_id, files, solution in (("MBPP-v0", shared_data / "mbpp" / "mbpp.jsonl", "code"),
                                    ("HumanEval-v0", shared_data / "humaneval" / "HumanEval.jsonl.gz",
                                     "canonical_solution")):
        import gzip
        import json

        opener = gzip.open if files.suffix == ".gz" else open
        with opener(files, "rt") as fh:
            rows = [json.loads(line) for _, line in zip(range(5), fh)]
        env = gym.make(env_id, data_files=str(files))
        for index, row in enumerate(rows):
            _, info = env.reset(options={"index": index})
            reference = row[solution] if env_id == "HumanEval-v0" else fenced(row[solution])
            assert env.step(reference)[-1]["correct"], (env_id, index)
            entry = row.get("entry_point") or row["code"].split("def ", 1)[1].split("(", 1)[0]
            for cheat in cheats + [fenced(f"def {entry}(*args, **kwargs):\n    return None")]:
                env.reset(options={"index": index})
                _, reward, *_, info = env.step(cheat)
                assert not info["correct"] and reward == 0.0, (env_id, index, info["reason"])
        env.close()
