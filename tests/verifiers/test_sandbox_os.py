"""The OS sandbox alone (``run_python``, no audit hook): what a program can do there and what it cannot
(``test_sandbox.py`` covers the public pieces, ``test_hostile.py`` and ``test_sandbox_attacks.py`` attacks
through ``CodeVerifier``).

Every attack asserts three things: the attack failed (as seen from inside), the host is untouched (no file
with the attack's marker anywhere it aimed) and nothing of the run survives it. The same checks run as a
normal user in ``test_the_non_root_path_holds_too`` (as root, the test stages this interpreter and checkout
for an unprivileged uid and runs there).
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, ProgramRun, SandboxLimits, run_python
from dapo_env.verifiers.sandbox import INSTALL_HINT, SandboxUnavailable, isolation
from dapo_env.verifiers.seccomp import DENIED, filter_program
from sandbox_checks import (
    RAW_SPAWN,
    REPO,
    assert_host_untouched,
    assert_nothing_survives,
    loopback_listeners,
    new_marker,
    nothing_arrived,
    processes_with,
)

LIMITS = SandboxLimits(wall_s=5.0, memory_mb=256, max_processes=4, disk_mb=8, max_output_bytes=100_000)
needs_bwrap = pytest.mark.skipif(not isolation("full").ok, reason="the code sandbox needs bubblewrap (apt-get "
                                 "install bubblewrap)")


def attack(code: str, marker: str, limits: SandboxLimits = LIMITS, **kwargs: str) -> ProgramRun:
    """Run ``code`` (``MARKER`` replaced by ``marker``) and check the host and the process table after it."""
    run = run_python(textwrap.dedent(code).replace("MARKER", marker), limits=limits, **kwargs)
    assert_host_untouched(marker)
    assert_nothing_survives(marker)
    return run


def results(run: ProgramRun) -> dict:
    """The JSON object an attack printed last."""
    assert run.stdout.strip(), run
    return json.loads(run.stdout.strip().splitlines()[-1])


# -- the layers and no silent downgrade -----------------------------------------------------------
@needs_bwrap
def test_full_isolation_is_active_here() -> None:
    layers = isolation()
    assert layers.ok, f"the code sandbox is not complete on this machine: {dict(layers.missing)}"
    assert {"bubblewrap", "user_ns", "pid_ns", "net_ns", "mount_ns", "ipc_ns", "unprivileged_uid", "seccomp",
            "readonly_root", "private_tmpfs", "process_cap"} <= set(layers.active)
    weak = isolation("weak")
    assert weak.ok and "net_ns" not in weak and "weak" in weak.missing["net_ns"]  # all of its own layers
    with pytest.raises(ValueError, match="isolation must be one of"):
        isolation("none")


NO_BWRAP = """
import json, warnings
from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, verify_batch
from dapo_env.verifiers.sandbox import isolation
from dapo_env.verifiers.sandbox import SandboxUnavailable
tests = CodeTests(tests=("assert add(1, 2) == 3",))
good = "```python\\ndef add(a, b):\\n    return a + b\\n```"
out = {"missing": dict(isolation().missing)}
for name, call in (("call", lambda: CodeVerifier()(good, tests)),
                   ("batch", lambda: verify_batch(CodeVerifier(), [good], [tests], workers=0))):
    try:
        call()
        out[name] = "ran"
    except SandboxUnavailable as exc:
        out[name] = str(exc)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out["weak"] = [CodeVerifier(isolation="weak")(good, tests).reason for _ in range(3)]
out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
print(json.dumps(out))
"""


def test_without_bubblewrap_the_verifier_refuses_and_says_how_to_install_it() -> None:
    env = {"PATH": "/nonexistent", "LANG": "C.UTF-8"}  # no bwrap on this PATH
    done = subprocess.run([sys.executable, "-c", NO_BWRAP], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("call", "batch"):
        assert "not installed" in out[name] and "apt-get install bubblewrap" in out[name], out
        assert 'isolation="weak"' in out[name]
    assert set(out["missing"]) >= {"bubblewrap", "net_ns", "pid_ns"}
    assert all("apt-get install bubblewrap" in why for why in out["missing"].values())
    assert out["weak"] == ["passed:1/1"] * 3
    assert len(out["warnings"]) == 1 and "no OS isolation" in out["warnings"][0]  # warned once


def test_limits_are_validated_with_the_fix_named() -> None:
    with pytest.raises(ValueError, match=r"wall_s must be > 0"):
        SandboxLimits(wall_s=0)
    with pytest.raises(ValueError, match=r"disk_mb must be an int >= 1"):
        SandboxLimits(disk_mb=0)
    with pytest.raises(ValueError, match=r"max_processes must be an int >= 1"):
        SandboxLimits(max_processes=True)
    with pytest.raises(ValueError, match="memory_mb must be >= 64"):
        SandboxLimits(memory_mb=32)
    assert SandboxLimits(wall_s=2.5).cpu_s == 3


def test_seccomp_program_is_a_deny_list_behind_an_architecture_check() -> None:
    program = filter_program("x86_64")
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    # load arch; jump to deny unless x86_64; load nr; x32 check; one jeq per number; allow; deny
    assert insns[0] == (0x20, 0, 0, 4) and insns[1][0] == 0x15 and insns[1][3] == 0xC000003E
    assert insns[1][1] + 2 + insns[1][2] == len(insns) - 1  # the wrong-arch branch lands on deny
    assert insns[2] == (0x20, 0, 0, 0) and insns[3][0] == 0x35 and insns[3][3] == 0x40000000
    assert len(insns) == 4 + len(DENIED) + 2
    for i in range(3, len(insns) - 2):
        assert i + 1 + insns[i][1] == len(insns) - 1  # every match lands on deny
    assert insns[-2] == (0x06, 0, 0, 0x7FFF0000) and insns[-1] == (0x06, 0, 0, 0x00050001)  # allow, EPERM
    assert {insn[3] for insn in insns[4:-2]} >= {319, 29, 101}  # memfd_create, shmget, ptrace
    assert filter_program("aarch64") != program and filter_program("mips") is None


# -- run_python: the tool for model-written programs ----------------------------------------------
@needs_bwrap
def test_run_python_returns_output_exit_status_and_flags() -> None:
    run = run_python("import sys\nname = input()\nprint('hi', name)\nprint('oops', file=sys.stderr)\nsys.exit(3)",
                     stdin="Ada\n")
    assert (run.stdout, run.stderr, run.exit_code, run.timed_out, run.output_truncated) == (
        "hi Ada\n", "oops\n", 3, False, False)
    assert not run.ok
    assert run_python("print(sum(range(10)))").ok
    error = run_python("def f():\n    return 1 / 0\nf()")
    assert error.exit_code == 1 and "ZeroDivisionError" in error.stderr and 'File "<program>", line 2' in error.stderr
    assert run_python("print('é' * 3)").stdout == "ééé\n"


@needs_bwrap
def test_run_python_cuts_long_output_and_stops_at_the_time_limit() -> None:
    long = run_python("while True:\n    print('x' * 1000)", limits=SandboxLimits(wall_s=10.0, max_output_bytes=5000))
    assert long.output_truncated and len(long.stdout) == 5000 and not long.ok
    start = time.monotonic()
    slow = run_python("import time\ntime.sleep(60)", limits=SandboxLimits(wall_s=1.0))
    assert slow.timed_out and not slow.ok and time.monotonic() - start < 30
    spin = run_python("while True:\n    pass", limits=SandboxLimits(wall_s=30.0, cpu_s=1))
    assert spin.timed_out  # the CPU-seconds limit counts as a timeout


# -- attacks on the host --------------------------------------------------------------------------
@needs_bwrap
def test_no_host_writes_anywhere() -> None:
    marker = new_marker()
    here = str(Path(__file__).resolve().parent)
    code = f"""
    import json, os, sys
    tried = {{}}
    def attempt(name, fn):
        try:
            fn()
            tried[name] = "ok"
        except OSError as exc:
            tried[name] = type(exc).__name__
    attempt("tests_dir", lambda: open({here!r} + "/MARKER", "w").write("x"))
    attempt("tmp", lambda: open("/tmp/MARKER", "w").write("x"))  # the run's own tmpfs
    attempt("dev_shm", lambda: open("/dev/shm/MARKER", "w").write("x"))
    attempt("var_tmp", lambda: open("/var/tmp/MARKER", "w").write("x"))
    attempt("root", lambda: open("/MARKER", "w").write("x"))
    attempt("prefix", lambda: open(sys.prefix + "/MARKER", "w").write("x"))
    attempt("stdlib", lambda: open(os.__file__, "a").write("x"))
    os.chdir("/")
    attempt("relative", lambda: open("MARKER", "w").write("x"))
    attempt("dir_fd", lambda: os.open("MARKER", os.O_CREAT | os.O_WRONLY, dir_fd=os.open("/usr", os.O_RDONLY)))
    attempt("mkfifo", lambda: os.mkfifo("/MARKER-fifo"))
    attempt("mkdir", lambda: os.mkdir("/usr/MARKER"))
    attempt("symlink", lambda: os.symlink("/tmp", "/MARKER-link"))
    attempt("stdin", lambda: os.write(0, b"x"))
    attempt("proc_sys", lambda: open("/proc/sys/kernel/hostname", "w").write("MARKER"))
    print(json.dumps(tried))
    """
    tried = results(attack(code, marker))
    assert tried.pop("tmp") == "ok"  # writable: its own tmpfs, gone after the run
    assert "ok" not in tried.values(), tried


@needs_bwrap
def test_disk_is_capped_per_run_not_per_file() -> None:
    code = """
    import json, os
    written = 0
    try:
        for i in range(1000):
            with open(f"/tmp/MARKER-{i}", "wb") as fh:
                for _ in range(16):
                    written += fh.write(b"0" * (1 << 20))
    except OSError as exc:
        error = type(exc).__name__
    print(json.dumps({"mib": written >> 20, "error": error}))
    """
    out = results(attack(code, new_marker()))
    assert out["mib"] <= LIMITS.disk_mb and out["error"] == "OSError"  # ENOSPC at the tmpfs size


@needs_bwrap
def test_memory_outside_the_address_space_limit_is_refused() -> None:
    code = """
    import ctypes, json, os
    out = {}
    try:
        os.memfd_create("MARKER")
        out["memfd"] = "ok"
    except OSError as exc:
        out["memfd"] = exc.errno
    libc = ctypes.CDLL(None, use_errno=True)
    out["shmget"] = libc.shmget(0, 1 << 30, 0o1000 | 0o600), ctypes.get_errno()
    out["msgget"] = libc.msgget(0, 0o1000 | 0o600), ctypes.get_errno()
    out["mq_open"] = libc.mq_open(b"/MARKER", 0o100 | 2, 0o600, None), ctypes.get_errno()
    try:
        bytearray(1 << 30)
        out["bytearray"] = "ok"
    except MemoryError:
        out["bytearray"] = "MemoryError"
    print(json.dumps(out))
    """
    out = results(attack(code, new_marker()))
    assert out["memfd"] == 1 and out["bytearray"] == "MemoryError"  # EPERM; RLIMIT_AS
    assert out["shmget"] == [-1, 1] and out["msgget"] == [-1, 1] and out["mq_open"] == [-1, 1]


@needs_bwrap
def test_processes_threads_and_files_are_capped() -> None:
    code = """
    import json, os, threading, time
    forks = threads = files = 0
    try:
        for _ in range(64):
            if os.fork() == 0:
                time.sleep(30)  # MARKER
                os._exit(0)
            forks += 1
    except OSError:
        pass
    try:
        for _ in range(64):
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            threads += 1
    except RuntimeError:
        pass
    handles = []
    try:
        for _ in range(1000):
            handles.append(open("/dev/null"))
    except OSError:
        pass
    print(json.dumps({"forks": forks, "threads": threads, "files": len(handles)}), flush=True)
    os._exit(0)
    """
    out = results(attack(code, new_marker()))
    assert out["forks"] <= LIMITS.max_processes and out["threads"] == 0  # forks used the whole cap
    assert out["files"] < LIMITS.max_open_files


@needs_bwrap
def test_fork_bomb_ends_with_the_run() -> None:
    start = time.monotonic()
    run = attack("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass  # MARKER",
                 new_marker(), limits=SandboxLimits(wall_s=2.0, max_processes=6))
    assert run.timed_out and time.monotonic() - start < 30


@needs_bwrap
def test_nothing_outlives_the_run() -> None:
    marker = new_marker()
    code = """
    import os, sys, time, signal
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if os.fork() == 0:  # a daemon: double fork, new session, ignores hangups and terms
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(60)  # MARKER
        os._exit(0)
    raw_spawn([sys.executable, "-c", "import time; time.sleep(60)  # MARKER"])
    os.posix_spawn("/bin/sleep", ["/bin/sleep", "60", "MARKER"], {})
    time.sleep(0.3)
    print("spawned")
    """
    run = attack(RAW_SPAWN + textwrap.dedent(code), marker)
    assert run.stdout == "spawned\n", run


@needs_bwrap
def test_no_network_not_even_loopback() -> None:
    with loopback_listeners() as host:
        code = f"""
        import json, socket
        out = {{}}
        def attempt(name, fn):
            try:
                fn()
                out[name] = "ok"
            except OSError as exc:
                out[name] = type(exc).__name__
        attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {host["tcp_port"]}), timeout=1))
        attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {host["udp_port"]})))
        attempt("unix", lambda: socket.socket(socket.AF_UNIX).connect({host["abstract"]!r}))
        attempt("internet", lambda: socket.create_connection(("1.1.1.1", 53), timeout=1))
        attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
        attempt("ipv6", lambda: socket.create_connection(("::1", {host["tcp_port"]}), timeout=1))
        print(json.dumps(out))
        """
        out = results(attack(code, new_marker()))
        assert nothing_arrived(host)
    assert out.pop("udp") in ("ok", "OSError")  # a datagram may be sent into the void; none arrived
    assert "ok" not in out.values(), out


@needs_bwrap
def test_the_caller_and_other_processes_cannot_be_signalled() -> None:
    sentinel = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        code = f"""
        import json, os, signal
        out = {{"ppid": os.getppid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}}
        for name, target in (("caller", {os.getpid()}), ("sentinel", {sentinel.pid}), ("parent", os.getppid())):
            try:
                os.kill(target, signal.SIGKILL)
                out[name] = "sent"
            except OSError as exc:
                out[name] = type(exc).__name__
            try:
                os.close(os.pidfd_open(target))
                out[name + "_pidfd"] = "opened"
            except OSError as exc:
                out[name + "_pidfd"] = type(exc).__name__
        print(json.dumps(out), flush=True)
        os.kill(-1, signal.SIGKILL)  # everything it may signal: only its own namespace
        """
        out = results(attack(code, new_marker()))
        assert sentinel.poll() is None  # still running
        assert out["pids"] == [1, 2] and out["ppid"] == 1  # its own pid namespace: nothing else to see
        assert out["caller"] == out["sentinel"] == "ProcessLookupError"
        assert out["caller_pidfd"] == out["sentinel_pidfd"] == "ProcessLookupError"
    finally:
        sentinel.kill()
        sentinel.wait()


@needs_bwrap
def test_secrets_of_the_host_are_not_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAPO_TEST_SECRET", "hunter2-secret")
    code = f"""
    import glob, json, os
    seen = [repr(dict(os.environ))]
    for path in ["/etc/shadow", "/etc/passwd", {str(Path.home())!r}, {str(REPO)!r}, {__file__!r},
                 *glob.glob("/proc/*/environ"), "/proc/1/cmdline"]:
        try:
            seen.append(os.listdir(path) if os.path.isdir(path) else open(path, "rb").read().decode("latin-1"))
        except OSError as exc:
            seen.append(type(exc).__name__)
    print(json.dumps(seen))
    """
    seen = results(attack(code, new_marker()))
    assert "hunter2-secret" not in json.dumps(seen) and "root:" not in json.dumps(seen)
    shadow, passwd, home, checkout, this_file = seen[1:6]
    assert shadow == passwd == checkout == this_file == "FileNotFoundError", seen
    prefix_top = Path(os.path.realpath(sys.base_prefix)).relative_to(Path.home()).parts[:1] \
        if Path(os.path.realpath(sys.base_prefix)).is_relative_to(Path.home()) else ()
    assert home in ("FileNotFoundError", list(prefix_top))  # at most the way to the interpreter


# -- the non-root path ----------------------------------------------------------------------------
NON_ROOT = """
import json, os
from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, run_python
from dapo_env.verifiers.sandbox import isolation
from dapo_env.verifiers.sandbox import SandboxUnavailable
out = {"uid": os.getuid(), "layers": list(isolation().active), "missing": dict(isolation().missing)}
tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(2, 2) == 4"))
try:
    out["good"] = CodeVerifier()("```python\\ndef add(a, b):\\n    return a + b\\n```", tests).reason
    out["forged"] = CodeVerifier()("```python\\nclass A:\\n    __eq__ = lambda s, o: True\\ndef add(a, b):\\n    return A()\\n```", tests).reason
    probe = run_python(MARKER_PROBE)
    out["probe"] = json.loads(probe.stdout)
except SandboxUnavailable as exc:
    out["unavailable"] = str(exc)
print(json.dumps(out))
"""
PROBE = """
import json, os, signal, time
out = {"uid": os.getuid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
try:
    open("/tmp/../MARKER", "w")
except OSError as exc:
    out["write_root"] = type(exc).__name__
if os.fork() == 0:
    os.setsid()
    time.sleep(60)  # MARKER
    os._exit(0)
print(json.dumps(out))
"""
NOBODY = 65534


def _hidden_tops(paths: list[str]) -> list[str]:
    """The topmost folders on the way to ``paths`` that other users cannot traverse (e.g. a 0700 home)."""
    tops: list[str] = []
    for path in paths:
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            folder = str(Path(*parts[:i]))
            if not os.stat(folder).st_mode & 0o001:
                if not any(folder == t or folder.startswith(t + "/") for t in tops):
                    tops.append(folder)
                break
    return tops


def _interpreter_paths() -> list[str]:
    """The folders this interpreter runs from: its venv (anywhere, e.g. ``~/venvs/x``), the base install the
    venv points at, and the folder of ``sys.executable``; each once, none inside another."""
    found = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    found |= {os.path.dirname(os.path.abspath(sys.executable)), str(REPO)}
    return sorted(p for p in found if not any(p.startswith(q + "/") for q in found))


def _run_as_nobody(script: str) -> subprocess.CompletedProcess[str]:
    """As root: run ``script`` with this interpreter and checkout as uid 65534, in a private mount namespace
    of the child where every folder that hides them from other users (a 0700 home) is covered by a tmpfs
    holding only read-only binds of the interpreter's own folders (:func:`_interpreter_paths`) and the
    checkout, at their own paths (the host sees nothing of this)."""
    libc = ctypes.CDLL(None, use_errno=True)
    paths = _interpreter_paths()
    tops = _hidden_tops(paths)

    def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
        args = [None if v is None else v.encode() for v in (source, target, fstype, data)]
        if libc.mount(args[0], args[1], args[2], flags, args[3]) != 0:
            raise OSError(ctypes.get_errno(), f"mount {target}")

    def become_nobody() -> None:
        if libc.unshare(0x00020000) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        mount(None, "/", None, 16384 | (1 << 18), None)  # MS_REC | MS_PRIVATE
        handles = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in paths]
        for top in tops:
            mount("tmpfs", top, "tmpfs", 0, "mode=755")
        for path, handle in zip(paths, handles):
            if any(path.startswith(top + "/") for top in tops):
                os.makedirs(path, exist_ok=True)
                mount(f"/proc/self/fd/{handle}", path, None, 4096 | 16384, None)  # MS_BIND | MS_REC
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    return subprocess.run([sys.executable, "-c", script], cwd=REPO, preexec_fn=become_nobody,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
                          capture_output=True, text=True, timeout=120)


def test_the_non_root_path_holds_too() -> None:
    marker = new_marker()
    script = NON_ROOT.replace("MARKER_PROBE", repr(PROBE.replace("MARKER", marker)))
    if os.geteuid() == 0:
        done = _run_as_nobody(script)
    else:
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["uid"] != 0
    assert_host_untouched(marker)
    assert_nothing_survives(marker)
    if "unavailable" in out:  # this kernel refuses user namespaces to normal users: refused, not downgraded
        assert INSTALL_HINT in out["unavailable"]
        pytest.skip(f"no OS sandbox for a normal user on this machine: {out['unavailable'][:200]}")
    assert out["good"] == "passed:2/2" and out["forged"] == "tests_failed:2/2"
    assert {"pid_ns", "net_ns", "seccomp", "unprivileged_uid"} <= set(out["layers"]), out["missing"]
    assert out["probe"]["uid"] == out["uid"] and out["probe"]["pids"] == [1, 2]
    assert out["probe"]["write_root"] == "OSError"


@needs_bwrap
def test_a_sandbox_unavailable_error_is_a_runtime_error() -> None:
    assert issubclass(SandboxUnavailable, RuntimeError)
    assert CodeVerifier().isolation_layers().ok
    assert "audit_hook" in CodeVerifier().isolation_layers()
    assert CodeVerifier()("```python\nx = 1\n```", CodeTests(tests=("assert x == 1",))).correct


@needs_bwrap
def test_the_checks_see_a_breach_under_weak_isolation() -> None:
    """The host and survivor checks above can fail: without OS isolation the same attacks get through."""
    marker = new_marker()
    here = Path(__file__).resolve().parent
    code = RAW_SPAWN + textwrap.dedent(f"""
    import sys
    open({str(here)!r} + "/{marker}", "w").write("x")
    raw_spawn([sys.executable, "-c", "import time; time.sleep(30)  # {marker}"])
    """)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the once-per-process weak-isolation warning
        run_python(code, limits=LIMITS, isolation="weak")
    try:
        with pytest.raises(AssertionError, match="wrote to the host"):
            assert_host_untouched(marker)
        with pytest.raises(AssertionError, match="survived"):
            assert_nothing_survives(marker)
    finally:
        (here / marker).unlink(missing_ok=True)
        for pid in processes_with(marker):
            os.kill(pid, 9)


@needs_bwrap
def test_the_docs_example_runs() -> None:
    doc = (REPO / "docs" / "code_sandbox.md").read_text(encoding="utf-8")
    block = doc.split("```python\n", 1)[1].split("```\n", 1)[0]
    exec(compile(block, "docs/code_sandbox.md", "exec", dont_inherit=True), {"__name__": "docs_example"})
