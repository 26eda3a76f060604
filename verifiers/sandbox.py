"""Run untrusted Python in a fresh, OS-isolated process: the layers under :class:`CodeVerifier`.

Layers, from the outside in (see ``docs/code_sandbox.md``):

1. a fresh process per run, in its own session/process group, in a new temporary directory that is
   removed afterwards, with a scrubbed environment (no inherited variables: no secrets), stdin from a
   file, ``close_fds``;
2. rlimits: CPU seconds, address space, file size, number of processes, open files, no core dumps;
3. a wall-clock limit enforced by the parent, which then SIGKILLs the whole process group;
4. as root, where the kernel allows it: new network and mount namespaces (no network at all; the
   interpreter is bind-mounted at a private path) and a per-run unprivileged uid/gid, so RLIMIT_NPROC is
   enforced (root is exempt from it), the code cannot signal or write anything of root's, and every
   process of that uid is killed at the end (catches fork-bomb children that left the process group);
   the child also gets ``PR_SET_PDEATHSIG`` so it dies with its verifier;
5. inside the child, a Python audit hook (installed by the harness in ``code.py``) that refuses
   sockets, subprocesses, ``os.system``/exec/fork/kill, ``ctypes``, frame and gc introspection, and
   writes/removals outside the working directory.

:func:`isolation` says which layers are active on this machine.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_NOSUID = 2
_MS_NODEV = 4
_WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # each gets a private tmpfs in the sandbox
_SANDBOX_PY = "/tmp/.py"  # where the interpreter's prefix is bind-mounted inside the sandbox
_SANDBOX_WORK = "/tmp/work"  # the sandbox's working directory (a private tmpfs)
_PR_SET_PDEATHSIG = 1
_UID_BASE = 0x20000000  # per-run sandbox uids live above every normal account: base + (pid << 4) + counter
_SCRUBBED_PATH = "/usr/local/bin:/usr/bin:/bin"

_libc = ctypes.CDLL(None, use_errno=True)
_uid_counter = 0
_uid_lock = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Resource limits for one sandboxed run.

    Args:
        wall_s: wall-clock limit; past it the process group (and the run's uid) is SIGKILLed.
        cpu_s: RLIMIT_CPU in seconds.
        memory_mb: RLIMIT_AS (address space) in MiB.
        file_size_mb: RLIMIT_FSIZE in MiB (largest file the code may write).
        max_processes: RLIMIT_NPROC (processes and threads of the run's uid; enforced for non-root uids).
        max_output_bytes: stdout kept; more is an ``output_limit`` failure (the run is killed).
        max_open_files: RLIMIT_NOFILE.

    Example:
        >>> SandboxLimits(wall_s=2.0).cpu_s
        2
    """

    wall_s: float = 6.0
    cpu_s: int | None = None
    memory_mb: int = 1024
    file_size_mb: int = 16
    max_processes: int = 8
    max_output_bytes: int = 1 << 20
    max_open_files: int = 64

    def __post_init__(self) -> None:
        if not self.wall_s > 0:
            raise ValueError(f"wall_s must be > 0 seconds, got {self.wall_s!r}")
        if self.cpu_s is None:
            object.__setattr__(self, "cpu_s", max(1, int(self.wall_s + 0.999)))
        for name in ("cpu_s", "memory_mb", "file_size_mb", "max_processes", "max_output_bytes", "max_open_files"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb must be >= 64 (the interpreter alone needs ~30 MiB), got {self.memory_mb}")


@dataclass(frozen=True)
class RunOutcome:
    """What one sandboxed run produced: harness records, stdout, and how it ended."""

    records: bytes
    stdout: bytes
    returncode: int | None
    timed_out: bool
    output_limited: bool
    uid: int | None = None


def _interpreter() -> str:
    """The base interpreter's real binary (a venv's python is a symlink to it)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = os.path.join(sys.base_prefix, "bin", version)
    return candidate if os.path.exists(candidate) else os.path.realpath(sys.executable)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def _enter_namespaces(uid: int, tmpfs_mb: int) -> str:
    """Child side, as root: new network + mount namespaces, private throwaway tmpfs over the
    world-writable directories, the interpreter bind-mounted at ``/tmp/.py``, and ``/tmp/work`` (owned
    by ``uid``) as the working directory. Returns the working directory. Nothing is visible to the host."""
    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
    for directory in _WORLD_WRITABLE:
        if os.path.isdir(directory):
            _mount("tmpfs", directory, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={tmpfs_mb}m,mode=1777")
    os.mkdir(_SANDBOX_PY, 0o755)
    _mount(sys.base_prefix, _SANDBOX_PY, None, _MS_BIND | _MS_REC, None)
    os.mkdir(_SANDBOX_WORK, 0o700)
    os.chown(_SANDBOX_WORK, uid, uid)
    os.chdir(_SANDBOX_WORK)
    return _SANDBOX_WORK


@functools.lru_cache(maxsize=1)
def isolation() -> tuple[str, ...]:
    """The isolation layers a run gets on this machine (probed once per process with a forked child).

    Returns names among ``"process_group"``, ``"tempdir"``, ``"scrubbed_env"``, ``"rlimits"``,
    ``"wall_kill"``, ``"netns"``, ``"mountns"``, ``"uid_drop"``, ``"nproc"`` and ``"audit_hook"``.
    Without ``"netns"`` the network is blocked only by the audit hook; without ``"nproc"``, fork bombs are
    held only by the audit hook and the wall-clock kill of the process group.
    """
    layers = ["process_group", "tempdir", "scrubbed_env", "rlimits", "wall_kill"]
    if os.geteuid() == 0 and _probe_namespaces():
        layers += ["netns", "mountns", "uid_drop", "nproc"]
    elif os.geteuid() != 0:
        layers += ["nproc"]
    return (*layers, "audit_hook")


def _probe_namespaces() -> bool:
    pid = os.fork()
    if pid == 0:  # child: try, report through the exit status, never return into the caller
        code = 1
        try:
            _enter_namespaces(_UID_BASE, 1)
            os.setgroups([])
            os.setgid(_UID_BASE)
            os.setuid(_UID_BASE)
            code = 0 if os.access(_sandbox_python(), os.X_OK) and os.access(".", os.W_OK) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _sandbox_python() -> str:
    return os.path.join(_SANDBOX_PY, os.path.relpath(_interpreter(), sys.base_prefix))


def _next_uid() -> int:
    global _uid_counter
    with _uid_lock:
        _uid_counter = (_uid_counter + 1) % 16
        return _UID_BASE + (os.getpid() << 4) + _uid_counter


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def _kill_uid(uid: int, settle_s: float = 3.0) -> None:
    """SIGKILL every process of ``uid`` and wait until none is left (zombies included).

    A child that became ``uid`` calls kill(-1), which reaches every process of that uid, even ones that
    left the process group with setsid, and never the caller itself. Repeated until /proc shows none.
    """
    deadline = time.monotonic() + settle_s
    while True:
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        for _ in range(20):
            if not _pids_of_uid(uid) or time.monotonic() > deadline:
                return
            time.sleep(0.005)


def _preexec(limits: SandboxLimits, uid: int | None, parent: int) -> None:
    """Runs in the child between fork and exec (after setsid)."""
    mib = 1 << 20
    if uid is not None:
        _enter_namespaces(uid, max(limits.file_size_mb, 1) * 4)
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mib, limits.memory_mb * mib))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mib, limits.file_size_mb * mib))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after setuid, which clears it
    if os.getppid() != parent:  # the verifier died before we got here
        os._exit(1)


def run_sandboxed(
    harness: str,
    payload: bytes,
    *,
    stdin: bytes = b"",
    capture_stdout: bool,
    limits: SandboxLimits,
    end_marker: bytes | None = None,
) -> RunOutcome:
    """Run ``python -I -c harness`` isolated; the harness reads ``payload`` from the fd in ``argv[1]`` and
    writes its records to the fd in ``argv[2]``. Returns the records and (if captured) stdout. Once
    ``end_marker`` appears in the records the run is complete: what is buffered is read and the process
    group is killed (so a lingering thread or child cannot stretch the run to the wall limit)."""
    sandboxed = "uid_drop" in isolation()
    uid = _next_uid() if sandboxed else None
    # Sandboxed: the working directory is a private tmpfs made in the child; the host keeps no files.
    root = None if sandboxed else tempfile.mkdtemp(prefix="dapo-sandbox-")
    workdir = _SANDBOX_WORK if root is None else root
    python = _sandbox_python() if sandboxed else _interpreter()
    env = {"PATH": _SCRUBBED_PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
    result_r, result_w = os.pipe()
    payload_file = tempfile.TemporaryFile()
    stdin_file = tempfile.TemporaryFile()
    proc: subprocess.Popen[bytes] | None = None
    try:
        payload_file.write(payload)
        payload_file.seek(0)
        stdin_file.write(stdin)
        stdin_file.seek(0)
        payload_fd = payload_file.fileno()
        proc = subprocess.Popen(
            [python, "-I", "-X", "utf8", "-c", harness, str(payload_fd), str(result_w)],
            stdin=stdin_file,
            stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=root,
            env=env,
            pass_fds=(payload_fd, result_w),
            start_new_session=True,
            preexec_fn=functools.partial(_preexec, limits, uid, os.getpid()),
        )
        os.close(result_w)
        result_w = -1
        outcome = _collect(proc, result_r, limits, end_marker)
        return RunOutcome(outcome.records, outcome.stdout, outcome.returncode, outcome.timed_out,
                          outcome.output_limited, uid)
    finally:
        if proc is not None:
            _killpg(proc)
        if uid is not None:
            _kill_uid(uid)
        for fd in (result_r, result_w):
            if fd >= 0:
                os.close(fd)
        payload_file.close()
        stdin_file.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.stdout is not None:
        proc.stdout.close()
    proc.wait()


def _collect(
    proc: subprocess.Popen[bytes], result_r: int, limits: SandboxLimits, end_marker: bytes | None
) -> RunOutcome:
    """Read records and stdout until both close or the wall limit passes; cap what is kept."""
    deadline = time.monotonic() + limits.wall_s
    chunks: dict[int, list[bytes]] = {result_r: []}
    caps = {result_r: 1 << 20}
    sizes = {result_r: 0}
    out_fd = proc.stdout.fileno() if proc.stdout is not None else -1
    if out_fd >= 0:
        chunks[out_fd], caps[out_fd], sizes[out_fd] = [], limits.max_output_bytes, 0
    timed_out = output_limited = False
    open_fds = set(chunks)
    with selectors.DefaultSelector() as selector:
        for fd in open_fds:
            selector.register(fd, selectors.EVENT_READ)
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            exited = proc.poll() is not None or (
                end_marker is not None and end_marker in b"".join(chunks[result_r][-2:])
            )
            for key, _ in selector.select(timeout=0.0 if exited else min(remaining, 0.25)):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fd)
                    open_fds.discard(key.fd)
                    continue
                sizes[key.fd] += len(data)
                if sizes[key.fd] > caps[key.fd]:
                    output_limited = output_limited or key.fd == out_fd
                    selector.unregister(key.fd)
                    open_fds.discard(key.fd)
                    continue
                chunks[key.fd].append(data)
            if exited and not selector.select(timeout=0.0):
                break  # finished and nothing more is buffered (grandchildren may hold the pipes open)
            if output_limited:
                break
    if timed_out or output_limited:
        _killpg(proc)
    returncode = proc.poll()
    # The CPU-seconds rlimit (SIGXCPU) is the same budget as the wall clock: on an idle machine a busy
    # loop reaches either first, so both count as a timeout.
    timed_out = timed_out or returncode == -signal.SIGXCPU
    stdout = b"".join(chunks[out_fd]) if out_fd >= 0 else b""
    return RunOutcome(b"".join(chunks[result_r]), stdout, returncode, timed_out, output_limited)


__all__ = ["RunOutcome", "SandboxLimits", "isolation", "run_sandboxed"]
