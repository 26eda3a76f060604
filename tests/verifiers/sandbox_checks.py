"""What the sandbox attack tests assert afterwards: the host is untouched and nothing of a run survives.

Attack programs carry a unique marker (a file name they try to create on the host, and a string in the
command line of every process they leave behind), so the checks find only this test's traces and work
as root and as a normal user, wherever the checkout lives.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

UID_BASE = 0x20000000  # as root, every run gets a uid at or above this (see docs/code_sandbox.md)
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def new_marker() -> str:
    return f"dapo-pwned-{uuid.uuid4().hex[:12]}"


def host_dirs() -> list[Path]:
    """Every writable place an attack aims at, as the host sees it."""
    dirs = [HERE, REPO, Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"),
            Path.home(), Path("/"), Path.cwd()]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def host_traces(marker: str) -> list[str]:
    """Host files or folders whose name holds ``marker`` (one level deep in every attacked place)."""
    found = []
    for folder in host_dirs():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found += [str(folder / name) for name in names if marker in name]
    return found


def processes_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker`` (zombies excluded: they are dead already)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def sandbox_uid_processes(caller_pid: int | None = None) -> list[int]:
    """As root: live host processes running under a sandbox uid of ``caller_pid`` (default: this process)."""
    base = UID_BASE + (((caller_pid or os.getpid()) & 0xFFFFFF) << 4)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if base <= os.stat(f"/proc/{entry}").st_uid < base + 16:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if fh.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X"):
                        found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def assert_nothing_survives(marker: str, *caller_pids: int) -> None:
    """No process of the run is left: none holds the marker, and as root none runs under a sandbox uid."""
    assert not processes_with(marker), f"processes of the run survived: {processes_with(marker)}"
    if os.geteuid() == 0:
        for pid in caller_pids or (os.getpid(),):
            assert not sandbox_uid_processes(pid), f"sandbox-uid processes survived: {sandbox_uid_processes(pid)}"


def assert_host_untouched(marker: str) -> None:
    assert not host_traces(marker), f"the run wrote to the host: {host_traces(marker)}"


@contextmanager
def loopback_listeners() -> Iterator[dict[str, object]]:
    """A TCP and a UDP socket on the host's 127.0.0.1 and an abstract unix socket, all non-blocking, for
    attacks to try to reach; ``ports`` and ``abstract`` say where they are."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract = "\0" + new_marker()
    try:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)
        udp.bind(("127.0.0.1", 0))
        unix.bind(abstract)
        unix.listen(8)
        for sock in (tcp, udp, unix):
            sock.setblocking(False)
        yield {"tcp": tcp, "udp": udp, "unix": unix, "tcp_port": tcp.getsockname()[1],
               "udp_port": udp.getsockname()[1], "abstract": abstract}
    finally:
        for sock in (tcp, udp, unix):
            sock.close()


def nothing_arrived(listeners: dict[str, object]) -> bool:
    """True when no connection or datagram reached any listener."""
    time.sleep(0.05)
    for name in ("tcp", "unix"):
        try:
            conn, _ = listeners[name].accept()  # type: ignore[attr-defined]
        except BlockingIOError:
            continue
        conn.close()
        return False
    try:
        listeners["udp"].recvfrom(64)  # type: ignore[attr-defined]
    except BlockingIOError:
        return True
    return False


# Attack code: fork+exec through ``_posixsubprocess`` directly (no ``subprocess`` audit event, no process
# group of the caller's), in a new session; the signature is Python 3.11's.
RAW_SPAWN = '''
import os as _os, _posixsubprocess
def raw_spawn(args):
    errpipe_read, errpipe_write = _os.pipe()
    _posixsubprocess.fork_exec([a.encode() for a in args], [args[0].encode()], True, (errpipe_write,), None, None,
                               -1, -1, -1, -1, -1, -1, errpipe_read, errpipe_write, False, True, -1, None, None,
                               -1, -1, None, False)
    _os.close(errpipe_write)
    _os.read(errpipe_read, 100)
    _os.close(errpipe_read)
'''
