"""Run untrusted Python isolated by the operating system (bubblewrap), with Python-level guards inside.

The isolation comes from bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), a maintained
setuid-free sandbox tool, not from Python code. Each run (``isolation="full"``, the default) gets:

- fresh user, pid, network, mount, ipc, uts and cgroup namespaces (``--unshare-all``): its own ``/proc``
  shows only its own processes, the network has nothing but an isolated loopback, no host process can be
  seen or signalled;
- an unprivileged uid: as root, a fresh per-run uid (the launcher drops to it before ``bwrap`` starts, so
  even the kernel sees an unprivileged user); otherwise the caller's own uid. No capabilities;
- a read-only view of ``/usr`` (and the ``/bin``, ``/lib*`` links or folders) and of the interpreter's
  prefix, nothing else of the host (no ``/etc``, no home, no ``/tmp`` of the host); a fresh size-capped
  tmpfs at ``/tmp`` is the only writable place (the root and ``/dev`` are read-only);
- ``--die-with-parent`` and ``--new-session``; when the run ends its pid namespace ends, which kills every
  process the candidate started, and the caller waits until the namespace's init is gone;
- a seccomp filter (``seccomp.py``) refusing the calls that escape the memory caps or reach into other
  processes (memfd, System V shared memory, ptrace, ...);
- rlimits (CPU seconds, address space, file size, open files, no core dumps) and a process cap applied
  inside the user namespace (so it counts only the run's own processes), a wall-clock limit after which
  the whole process group is killed, a scrubbed environment, no inherited descriptors but the ones given.

``isolation="weak"`` (an explicit opt-in that warns once) runs without bubblewrap: a fresh process in its
own session, a temporary directory, scrubbed environment, rlimits and the wall-clock kill only. A
``"full"`` run on a machine without working bubblewrap raises :class:`SandboxUnavailable` naming the fix:
there is no silent downgrade. :func:`isolation` lists the active layers and why any missing one is missing.

Example:
    >>> limits = SandboxLimits(wall_s=5.0, disk_mb=8)
    >>> (limits.cpu_s, limits.max_processes)
    (5, 8)
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dapo_env.types import VerifierConfigError
from .seccomp import filter_program

ISOLATION_MODES = ("full", "weak")
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`) "
                "and allow unprivileged user namespaces, or pass isolation=\"weak\" to run without OS isolation "
                "(not for RL rewards: generated code could then forge results or touch the host)")
_UID_BASE = 0x20000000  # per-run sandbox uids (as root): base + (pid << 4) + counter, above every real account
_STAGE = "/tmp"  # in the launcher's private mount namespace only: where the interpreter is staged
_SCRUBBED_PATH = "/usr/local/bin:/usr/bin:/bin"
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_SANDBOX_PROCESSES = 2  # bwrap's init and the interpreter itself, on top of max_processes
# Runs first in every sandboxed interpreter: the process cap, set inside the user namespace where it counts
# only this run's processes (setting it outside would count every process of the uid on the host).
_BOOT = "import resource as _r; _r.setrlimit(_r.RLIMIT_NPROC, ({n}, {n})); del _r\n"
_WORKDIR = "/tmp"  # the working folder inside a full sandbox (its tmpfs)
# The launcher of a command run (compilers, programs of other languages): argv = payload fd, result fd, process
# cap (0: none), keep (1: the command uses the two descriptors), fetch (a file to send out once the command
# succeeded, or ""), then the command. Without fetch it becomes the command; with it, it waits for it.
_LAUNCHER = """import os, sys
a = sys.argv
payload, result, nproc, keep, fetch, cmd = int(a[1]), int(a[2]), int(a[3]), a[4] == "1", a[5], a[6:]
if nproc:
    import resource
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
if not keep:
    os.close(payload)
    if not fetch:
        os.close(result)
if not fetch:
    try:
        os.execv(cmd[0], cmd)
    except OSError as exc:
        sys.stderr.write(f"cannot run {cmd[0]}: {exc.strerror}\\n")
        os._exit(127)
pid = os.fork()
if pid == 0:
    try:
        os.close(result)
        os.execv(cmd[0], cmd)
    finally:
        os._exit(127)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
if code == 0:
    with open(fetch, "rb") as f:
        while chunk := f.read(1 << 16):
            os.write(result, chunk)
os.close(result)
sys.stdout.flush()
os._exit(code if code >= 0 else 128 - code)
"""

_libc = ctypes.CDLL(None, use_errno=True)
_SECCOMP = filter_program()
_uid_counter = 0
_uid_lock = threading.Lock()
_weak_warned = False


class SandboxUnavailable(VerifierConfigError, RuntimeError):
    """OS isolation was asked for (``isolation="full"``) but does not work on this machine (a configuration
    error of the caller's: batched verification re-raises it instead of scoring every response 0)."""


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Resource limits for one sandboxed run (one object, used by every code verifier and tool).

    Args:
        wall_s: wall-clock limit; past it the run's process group is SIGKILLed, which ends its namespaces.
        cpu_s: RLIMIT_CPU in seconds (default: ``wall_s`` rounded up).
        memory_mb: RLIMIT_AS (address space) per process, MiB.
        disk_mb: size of the run's tmpfs, its only writable place (and RLIMIT_FSIZE), MiB.
        max_processes: processes and threads the candidate may start besides itself (inside the run's
            user namespace; with ``isolation="weak"`` an RLIMIT_NPROC of the caller's uid).
        max_output_bytes: stdout (and stderr) kept per run; more ends the run as ``output_limit``.
        max_open_files: RLIMIT_NOFILE.

    Example:
        >>> SandboxLimits(wall_s=2.0).cpu_s
        2
    """

    wall_s: float = 6.0
    cpu_s: int | None = None
    memory_mb: int = 1024
    disk_mb: int = 64
    max_processes: int = 8
    max_output_bytes: int = 1 << 20
    max_open_files: int = 64

    def __post_init__(self) -> None:
        if isinstance(self.wall_s, bool) or not isinstance(self.wall_s, (int, float)) or not self.wall_s > 0:
            raise ValueError(f"SandboxLimits.wall_s must be > 0 seconds, got {self.wall_s!r}")
        if self.cpu_s is None:
            object.__setattr__(self, "cpu_s", max(1, int(self.wall_s + 0.999)))
        for name in ("cpu_s", "memory_mb", "disk_mb", "max_processes", "max_output_bytes", "max_open_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SandboxLimits.{name} must be an int >= 1, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(f"SandboxLimits.memory_mb must be >= 64 (the interpreter alone needs ~30 MiB), "
                             f"got {self.memory_mb}")


@dataclass(frozen=True)
class Isolation:
    """The layers a sandboxed run gets on this machine in one mode; ``"net_ns" in isolation()`` works.

    Attributes:
        mode: ``"full"`` or ``"weak"``.
        active: names of the active layers.
        missing: layer name -> why it is missing (for ``"weak"``: the full mode's layers it leaves off).
    """

    mode: str
    active: tuple[str, ...]
    missing: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "missing", MappingProxyType(dict(self.missing)))

    def __contains__(self, layer: object) -> bool:
        return layer in self.active

    def __iter__(self) -> Iterator[str]:
        return iter(self.active)

    @property
    def ok(self) -> bool:
        """True when every layer of the mode is active (``missing`` may still name the layers of the other
        mode, e.g. what ``"weak"`` leaves off)."""
        return not any(layer in self.missing for layer in (FULL_LAYERS if self.mode == "full" else WEAK_LAYERS))


FULL_LAYERS = ("bubblewrap", "user_ns", "pid_ns", "net_ns", "mount_ns", "ipc_ns", "uts_ns", "unprivileged_uid",
               "no_new_userns", "readonly_root", "private_tmpfs", "die_with_parent", "seccomp", "process_cap",
               "rlimits", "wall_kill", "scrubbed_env")
WEAK_LAYERS = ("process_group", "tempdir", "rlimits", "wall_kill", "scrubbed_env")


@dataclass(frozen=True)
class RunOutcome:
    """What one sandboxed run produced: harness records, captured output, and how it ended."""

    records: bytes
    stdout: bytes
    stderr: bytes
    returncode: int | None
    timed_out: bool
    output_limited: bool


@dataclass(frozen=True)
class ProgramRun:
    """The result of :func:`run_python`: what a program printed and how it ended.

    Attributes:
        stdout, stderr: decoded output (UTF-8, invalid bytes replaced), at most ``max_output_bytes`` each.
        exit_code: the process's exit status (negative: killed by that signal), ``None`` if unknown.
        timed_out: the wall or CPU limit ended it.
        output_truncated: it printed more than ``max_output_bytes`` and was stopped.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    output_truncated: bool

    @property
    def ok(self) -> bool:
        """Finished by itself with exit status 0."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated


# --- what this machine can do ----------------------------------------------------------------------------
def interpreter() -> str:
    """The base interpreter's real binary (a venv's python is a link to it; it needs only its prefix)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = os.path.join(sys.base_prefix, "bin", version)
    return candidate if os.path.exists(candidate) else os.path.realpath(sys.executable)


def _prefix() -> str:
    return os.path.realpath(sys.base_prefix)


def _needs_prefix_bind() -> bool:
    return not (_prefix() + "/").startswith("/usr/")


def isolation(mode: str = "full") -> Isolation:
    """The isolation layers a run gets on this machine in ``mode`` (probed once per process), and for each
    missing one why it is missing.

    Example:
        >>> layers = isolation("weak")
        >>> "wall_kill" in layers, layers.missing["net_ns"]
        (True, 'off: isolation="weak" was asked for')
    """
    if mode not in ISOLATION_MODES:
        raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {mode!r}")
    if mode == "weak":
        off = 'off: isolation="weak" was asked for'
        return Isolation("weak", WEAK_LAYERS, {layer: off for layer in FULL_LAYERS if layer not in WEAK_LAYERS})
    problem = _probe_bwrap()
    if problem is not None:
        return Isolation("full", (), {layer: problem for layer in FULL_LAYERS})
    if _SECCOMP is None:
        reason = f"no seccomp filter for this architecture ({platform.machine()}): memfd and System V shared " \
                 "memory are not refused, so memory is capped per process only"
        return Isolation("full", tuple(layer for layer in FULL_LAYERS if layer != "seccomp"), {"seccomp": reason})
    return Isolation("full", FULL_LAYERS)


@functools.lru_cache(maxsize=1)
def _bwrap() -> str | None:
    """bubblewrap's absolute path, found on the caller's ``PATH`` once per process."""
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def _probe_bwrap() -> str | None:
    """None when a full sandbox works here, else why not (one line, with the fix)."""
    if _bwrap() is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    probe = ("import os\n"
             "assert os.getuid() != 0 and os.getpid() <= 3, 'no pid namespace or uid 0'\n"
             "open('/tmp/probe', 'w').write('ok')\n"
             "try:\n    open('/probe', 'w')\n    raise SystemExit('the root is writable')\nexcept OSError:\n    pass\n"
             f"if {_SECCOMP is not None}:\n"
             "    try:\n        os.memfd_create('probe')\n        raise SystemExit('seccomp filter not applied')\n"
             "    except PermissionError:\n        pass\n"
             "print('sandbox-ok')\n")
    try:
        run = _run(probe.encode(), mode="full", payload=b"", stdin=b"", capture_stdout=True,
                   capture_stderr=True, limits=SandboxLimits(wall_s=20.0), end_marker=None)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:  # e.g. no mount namespace for root here
        return f"bubblewrap could not start ({exc}): {INSTALL_HINT}"
    if b"sandbox-ok" in run.stdout:
        return None
    detail = run.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {run.returncode}"]
    return f"bubblewrap does not work here ({detail[0][:200]}): {INSTALL_HINT}"


def require_isolation(mode: str) -> None:
    """Raise :class:`SandboxUnavailable` when ``mode="full"`` cannot run here; warn once for ``"weak"``."""
    global _weak_warned
    if mode == "weak":
        if not _weak_warned:
            _weak_warned = True
            warnings.warn("code runs with isolation=\"weak\": no OS isolation (rlimits, a temporary folder and a "
                          "wall-clock kill only); generated code can read the host and forge results. "
                          f"For RL rewards {INSTALL_HINT.split(', or pass')[0]}", RuntimeWarning, stacklevel=3)
        return
    problem = isolation(mode).missing.get("bubblewrap")
    if problem is not None:
        raise SandboxUnavailable(f"code sandbox unavailable: {problem}")


# --- launching -------------------------------------------------------------------------------------------
def _next_uid() -> int:
    global _uid_counter
    with _uid_lock:
        _uid_counter = (_uid_counter + 1) % 16
        return _UID_BASE + ((os.getpid() & 0xFFFFFF) << 4) + _uid_counter


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def _set_rlimits(limits: SandboxLimits, *, nproc: bool, address_space_mb: int | None = None) -> None:
    mib = 1 << 20
    space = (address_space_mb or limits.memory_mb) * mib
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.disk_mb * mib, limits.disk_mb * mib))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))


def _launcher_preexec(limits: SandboxLimits, uid: int | None, stage: bool, address_space_mb: int | None = None) -> None:
    """Between fork and exec of ``bwrap``. As root: stage the interpreter where an unprivileged uid can
    reach it (in a private mount namespace of the launcher only: the host sees nothing), then drop to the
    per-run uid. The prefix is opened before the staging tmpfs covers ``/tmp``, so a prefix under ``/tmp``
    works too."""
    if uid is not None:
        _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
        if stage:
            prefix_fd = os.open(_prefix(), os.O_PATH | os.O_DIRECTORY)
            _mount("tmpfs", _STAGE, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64k,mode=755")
            os.mkdir(f"{_STAGE}/py", 0o755)
            _mount(f"/proc/self/fd/{prefix_fd}", f"{_STAGE}/py", None, _MS_BIND | _MS_REC, None)
            _mount(None, f"{_STAGE}/py", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_REC, None)
            os.close(prefix_fd)
    _set_rlimits(limits, nproc=False, address_space_mb=address_space_mb)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _weak_preexec(limits: SandboxLimits, address_space_mb: int | None = None) -> None:
    _set_rlimits(limits, nproc=os.geteuid() != 0, address_space_mb=address_space_mb)


def _bwrap_command(argv: list[str], limits: SandboxLimits, *, staged: bool, seccomp_fd: int | None,
                   info_fd: int, files: Sequence[tuple[int, str]] = ()) -> list[str]:
    """bubblewrap's arguments: every namespace, no capabilities, a read-only root holding ``/usr``, the
    system links and the interpreter's prefix, a fresh ``/proc`` and ``/dev``, a size-capped tmpfs at
    ``/tmp`` (mounted before the prefix, so a prefix under ``/tmp`` stays visible) and a clean environment."""
    cmd = [_bwrap() or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL", "--hostname", "sandbox", "--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.disk_mb << 20), "--tmpfs", "/tmp",
            "--ro-bind", "/usr", "/usr"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
    if _needs_prefix_bind():
        cmd += ["--ro-bind", f"{_STAGE}/py" if staged else _prefix(), _prefix()]
    for fd, path in files:  # read-only, executable, owned by the host: the program cannot change them
        cmd += ["--perms", "0555", "--ro-bind-data", str(fd), path]
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", _WORKDIR, "--clearenv"]
    for name, value in _sandbox_env("/tmp").items():
        cmd += ["--setenv", name, value]
    return cmd + ["--", *argv]


def _sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a sandboxed program: nothing of the caller's (no secrets), one thread per
    numeric library (threads count against the process cap)."""
    return {"PATH": _SCRUBBED_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run(harness: bytes, *, mode: str, payload: bytes, stdin: bytes, capture_stdout: bool, capture_stderr: bool,
         limits: SandboxLimits, end_marker: bytes | None, command: Sequence[str] = (),
         files: Mapping[str, bytes] = MappingProxyType({}), fetch: str = "", address_space_mb: int | None = None,
         records_cap: int = 4 << 20) -> RunOutcome:
    """Start ``python -I -c harness <payload_fd> <result_fd>`` sandboxed in ``mode``; collect its output.

    With ``command`` the interpreter is only a launcher (``_LAUNCHER``) that sets the process cap and
    executes the command (its ``{dir}``, ``{payload_fd}`` and ``{result_fd}`` filled in; the descriptors are
    closed unless the command names them); with ``fetch`` it waits for the command instead and, when it
    succeeded, sends that file of the working folder out through the records pipe (a compiler's output).
    ``files`` (name -> bytes) are placed read-only and executable in the working folder before the run.
    The payload and then stdin go through pipes (nothing of the host is writable through them)."""
    full = mode == "full"
    uid = _next_uid() if full and os.geteuid() == 0 else None
    nproc = limits.max_processes + _SANDBOX_PROCESSES if full else 0
    boot = _BOOT.format(n=nproc) if full else ""
    fds: dict[str, int] = {}
    workdir = None if full else tempfile.mkdtemp(prefix="dapo-sandbox-")
    stage = uid is not None and _needs_prefix_bind()
    proc: subprocess.Popen[bytes] | None = None
    try:
        fds["payload_r"], fds["payload_w"] = os.pipe()
        fds["stdin_r"], fds["stdin_w"] = os.pipe()
        fds["result_r"], fds["result_w"] = os.pipe()
        passed = [fds["payload_r"], fds["result_w"]]
        if command:
            where = {"dir": workdir or _WORKDIR, "payload_fd": str(fds["payload_r"]),
                     "result_fd": str(fds["result_w"])}
            filled = [part.format(**where) for part in command]
            keep = int(any("{payload_fd}" in part or "{result_fd}" in part for part in command))
            argv = [interpreter(), "-I", "-S", "-c", _LAUNCHER, *map(str, passed), str(nproc), str(keep),
                    fetch and f"{where['dir']}/{fetch}", *filled]
        else:
            argv = [interpreter(), "-I", "-X", "utf8", "-c", boot + harness.decode(), *map(str, passed)]
        placed: list[tuple[int, str]] = []
        for name, data in files.items():
            if full:
                fds[f"file:{name}"] = _memfd_with(data)
                passed.append(fds[f"file:{name}"])
                placed.append((fds[f"file:{name}"], f"{_WORKDIR}/{name}"))
            else:
                path = os.path.join(workdir, name)
                with open(path, "wb") as handle:
                    handle.write(data)
                os.chmod(path, 0o555)
        if full:
            fds["info_r"], fds["info_w"] = os.pipe()
            passed.append(fds["info_w"])
            if _SECCOMP is not None:
                fds["seccomp"] = _pipe_with(_SECCOMP)
                passed.append(fds["seccomp"])
            argv = _bwrap_command(argv, limits, staged=stage, seccomp_fd=fds.get("seccomp"), info_fd=fds["info_w"],
                                  files=placed)
            env = {"PATH": _SCRUBBED_PATH, "LANG": "C.UTF-8"}
            preexec = functools.partial(_launcher_preexec, limits, uid, stage, address_space_mb)
        else:
            env = _sandbox_env(workdir)
            preexec = functools.partial(_weak_preexec, limits, address_space_mb)
        proc = _popen(
            argv, stdin=fds["stdin_r"], stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
            stderr=subprocess.PIPE if capture_stderr else subprocess.DEVNULL, cwd=workdir, env=env,
            pass_fds=passed, start_new_session=True, preexec_fn=preexec)
        for name in ("payload_r", "stdin_r", "result_w", "seccomp", "info_w", *(f"file:{f}" for f in files)):
            if name in fds:
                os.close(fds.pop(name))
        # the harness drains the payload before any candidate code runs; stdin follows it
        writer = threading.Thread(target=_write_all, args=((fds.pop("payload_w"), payload),
                                                           (fds.pop("stdin_w"), stdin)), daemon=True)
        writer.start()
        outcome = _collect(proc, fds["result_r"], limits, end_marker, signal_base=128 if full else 0,
                           records_cap=records_cap)
    finally:
        if proc is not None:
            _killpg(proc)
        if "info_w" in fds:  # Popen failed: nothing will write there
            os.close(fds.pop("info_w"))
        init = _namespace_init(fds["info_r"]) if "info_r" in fds else None
        if init is not None:
            _wait_namespace_gone(init)
        for fd in fds.values():
            os.close(fd)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    if full and init is None:  # never a silent "tests failed" for a sandbox that did not come up
        said = outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise RuntimeError(f"bubblewrap did not start the sandbox (exit status {outcome.returncode}"
                           + (f": {said[0][:200]})" if said else ")"))
    return outcome


def _popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` with no Python trace hook in the forked child (a debugger's or a property-test
    tool's tracer fails there, before exec), tried again (twice, after a short pause) when the launcher's
    pre-exec step still fails: harmless to retry, since the child died before ``exec`` and nothing of the
    candidate ran. A persistent failure raises as before."""
    tracer = sys.gettrace()  # a debugger's or tracing tool's hook would run inside the forked child's pre-exec
    sys.settrace(None)
    try:
        for attempt in range(3):
            try:
                return subprocess.Popen(argv, **kwargs)
            except subprocess.SubprocessError:  # "Exception occurred in preexec_fn"
                if attempt == 2:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")
    finally:
        sys.settrace(tracer)


def _memfd_with(data: bytes) -> int:
    """A descriptor of an anonymous in-memory file holding ``data``, at offset 0 (bubblewrap copies it)."""
    fd = os.memfd_create("dapo-sandbox-file", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _pipe_with(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` (small: it must fit the pipe's buffer) and is closed."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


def _write_all(*targets: tuple[int, bytes]) -> None:
    """Write each ``(fd, data)`` in turn and close the fd; a reader that went away ends that write."""
    for fd, data in targets:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass  # the run ended (or closed its stdin) before reading everything
        finally:
            os.close(fd)


def _namespace_init(info_r: int) -> int | None:
    """The host pid of the run's pid-namespace init, from bubblewrap's ``--info-fd`` (read once it closed)."""
    raw = b""
    while chunk := os.read(info_r, 4096):
        raw += chunk
    try:
        pid = json.loads(raw or b"{}").get("child-pid")
    except ValueError:
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _wait_namespace_gone(pid: int, timeout_s: float = 5.0) -> None:
    """Return once the namespace init ``pid`` is dead. The kernel kills every process of a pid namespace
    and waits for them before its init becomes a zombie, so then nothing of the run is left."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                if stat.read().rpartition(b")")[2].split()[0] in (b"Z", b"X"):
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.001)


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    proc.wait()


def _collect(proc: subprocess.Popen[bytes], result_r: int, limits: SandboxLimits,
             end_marker: bytes | None, signal_base: int, records_cap: int = 4 << 20) -> RunOutcome:
    """Read records, stdout and stderr until the run ends or the wall limit passes; cap what is kept.

    The run has ended when its process exited (then what is still buffered is read) or, with
    ``end_marker``, once the marker is among the records (then lingering threads or children are killed).
    """
    deadline = time.monotonic() + limits.wall_s
    streams = {result_r: "records"}
    caps = {result_r: records_cap}
    for name in ("stdout", "stderr"):
        stream = getattr(proc, name)
        if stream is not None:
            streams[stream.fileno()] = name
            caps[stream.fileno()] = limits.max_output_bytes
    chunks: dict[int, list[bytes]] = {fd: [] for fd in streams}
    sizes = dict.fromkeys(streams, 0)
    timed_out = output_limited = False
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            done = proc.poll() is not None or (end_marker is not None
                                               and end_marker in b"".join(chunks[result_r][-2:]))
            ready = selector.select(timeout=0.0 if done else min(remaining, 0.1)) if selector.get_map() else []
            if done and not ready:
                break  # finished and nothing more is buffered (grandchildren may hold the pipes open)
            if not ready and not selector.get_map():
                time.sleep(min(remaining, 0.01))  # every pipe closed: wait for the exit status
            for key, _ in ready:
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fd)
                    continue
                sizes[key.fd] += len(data)
                if sizes[key.fd] > caps[key.fd]:
                    chunks[key.fd].append(data[:max(0, caps[key.fd] - (sizes[key.fd] - len(data)))])
                    output_limited = True
                    break
                chunks[key.fd].append(data)
            if output_limited:
                break
    if timed_out or output_limited:
        _killpg(proc)
    returncode = proc.poll()
    if returncode is not None and signal_base and signal_base < returncode <= signal_base + 64:
        returncode = signal_base - returncode  # bwrap reports death by signal N as 128 + N, like a shell
    # The CPU-seconds rlimit is the same budget as the wall clock: count its SIGXCPU, and a SIGKILL (its hard
    # limit, for a program that ignores SIGXCPU) after at least that long, as a timeout too.
    used = time.monotonic() - (deadline - limits.wall_s)
    timed_out = timed_out or (not output_limited and (returncode == -signal.SIGXCPU or (
        returncode == -signal.SIGKILL and used >= limits.cpu_s)))  # our own kill at the output cap is not one
    joined = {streams[fd]: b"".join(parts) for fd, parts in chunks.items()}
    return RunOutcome(joined["records"], joined.get("stdout", b""), joined.get("stderr", b""), returncode,
                      timed_out, output_limited)


def run_sandboxed(harness: str, payload: bytes, *, stdin: bytes = b"", capture_stdout: bool = False,
                  capture_stderr: bool = False, limits: SandboxLimits = SandboxLimits(),
                  end_marker: bytes | None = None, isolation: str = "full") -> RunOutcome:
    """Run ``python -I -c harness`` sandboxed. The harness reads ``payload`` from the descriptor in
    ``sys.argv[1]`` (drain it first: it is a pipe) and writes its records to the one in ``sys.argv[2]``.

    Once ``end_marker`` appears in the records the run is complete: what is buffered is read and the
    process group is killed, so a lingering thread or child cannot stretch the run to the wall limit.
    Raises :class:`SandboxUnavailable` for ``isolation="full"`` where bubblewrap does not work.
    """
    require_isolation(isolation)
    return _run(harness.encode(), mode=isolation, payload=payload, stdin=stdin, capture_stdout=capture_stdout,
                capture_stderr=capture_stderr, limits=limits, end_marker=end_marker)


def run_command(command: Sequence[str], *, files: Mapping[str, bytes] = MappingProxyType({}), stdin: bytes = b"",
                payload: bytes = b"", limits: SandboxLimits = SandboxLimits(), isolation: str = "full",
                capture_stdout: bool = True, capture_stderr: bool = True, fetch: str = "",
                address_space_mb: int | None = None, end_marker: bytes | None = None) -> RunOutcome:
    """Run a command (a compiler, a compiled program, another language's interpreter) in the same sandbox.

    ``command[0]`` is an absolute path visible inside (under ``/usr`` or the interpreter's prefix). In the
    command, ``{dir}`` is the working folder (the run's tmpfs; a temporary folder with ``"weak"``), and
    ``{payload_fd}`` / ``{result_fd}`` are the descriptors of ``payload`` (read it first) and of the records
    pipe (``RunOutcome.records``), closed before the command starts unless it names them. ``files`` (name
    -> bytes) lie read-only and executable in the working folder. With ``fetch`` (a file name) the run waits
    for the command and, if it exited 0, returns that file's bytes as ``records`` (up to ``disk_mb``): how a
    compiled program leaves its compile run. ``address_space_mb`` replaces ``limits.memory_mb`` as the
    address-space limit (V8 reserves far more address space than it uses).

    Example:
        >>> out = run_command(["/bin/sh", "-c", "read x; echo $((x * 2))"], stdin=b"21\\n",
        ...                   limits=SandboxLimits(wall_s=10.0))
        >>> out.stdout, out.returncode
        (b'42\\n', 0)
    """
    require_isolation(isolation)
    if not command or not (os.path.isabs(command[0]) or command[0].startswith("{dir}/")):
        raise ValueError(f"run_command needs a command whose first item is an absolute path (or under {dir}/), got {list(command)!r}")
    for name in files:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"run_command files are plain names in the working folder, got {name!r}")
    return _run(b"", mode=isolation, payload=payload, stdin=stdin, capture_stdout=capture_stdout,
                capture_stderr=capture_stderr, limits=limits, end_marker=end_marker, command=tuple(command),
                files=files, fetch=fetch, address_space_mb=address_space_mb,
                records_cap=(limits.disk_mb << 20) if fetch else 4 << 20)


_PROGRAM_HARNESS = """
import os, sys
os.close(int(sys.argv[1])); os.close(int(sys.argv[2]))
sys.argv = ["program"]
sys.stdout.flush()
"""


def run_python(code: str, *, stdin: str = "", limits: SandboxLimits = SandboxLimits(),
               isolation: str = "full") -> ProgramRun:
    """Run a Python program (e.g. a model's tool call) in the sandbox and return what it printed.

    The program runs as ``__main__`` with ``stdin``; stdout and stderr are captured up to
    ``limits.max_output_bytes`` each. Nothing of the host is visible or writable (see the module doc).

    Example:
        >>> run = run_python("print(sum(range(10)))", limits=SandboxLimits(wall_s=10.0))
        >>> run.stdout, run.ok
        ('45\\n', True)
    """
    require_isolation(isolation)
    program = _PROGRAM_HARNESS + f"exec(compile({code!r}, '<program>', 'exec'), {{'__name__': '__main__'}})\n"
    outcome = _run(program.encode(), mode=isolation, payload=b"", stdin=stdin.encode(), capture_stdout=True,
                   capture_stderr=True, limits=limits, end_marker=None)
    return ProgramRun(outcome.stdout.decode("utf-8", "replace"), _clean_stderr(outcome.stderr),
                      outcome.returncode, outcome.timed_out, outcome.output_limited)


def _clean_stderr(raw: bytes) -> str:
    """The program's stderr, its traceback pointing at ``<program>`` lines only."""
    text = raw.decode("utf-8", "replace")
    lines = [line for line in text.splitlines(keepends=True) if 'File "<string>"' not in line]
    return "".join(lines)





__all__ = ["FULL_LAYERS", "INSTALL_HINT", "ISOLATION_MODES", "WEAK_LAYERS", "Isolation", "ProgramRun", "RunOutcome", "SandboxLimits",
           "SandboxUnavailable", "isolation", "require_isolation", "run_command", "run_python", "run_sandboxed"]
