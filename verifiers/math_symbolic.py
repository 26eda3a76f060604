"""The slow symbolic stage of math grading, run in a helper process under a hard time limit.

Python cannot kill a thread, and Math-Verify's own ``SIGALRM`` timeout works on the main thread only,
so symbolic equivalence (``math_verify.parse`` + ``math_verify.verify``, which use sympy) runs in a
child process started with ``subprocess.Popen([sys.executable, "-m", "dapo_env.verifiers.math_symbolic"])``
and spoken to over pipes with one JSON object per line. The parent waits with ``poll()`` up to the
caller's deadline; when the deadline passes, the child is killed and the next request starts a fresh one.

* started lazily on first need, one per process (a forked child notices ``os.getpid()`` changed and
  starts its own instead of sharing the parent's pipes);
* a lock serialises requests, so any number of threads may call it; waiting for the lock counts
  against the caller's deadline;
* killed at interpreter exit; the child also caps its own memory (``RLIMIT_AS``) and exits when its
  stdin closes, so it cannot outlive its parent.

Plain ``subprocess`` rather than ``multiprocessing``: verifier calls may run inside daemonic pool
workers, which may not start ``multiprocessing`` children.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

MEMORY_LIMIT_BYTES = 3 * 1024**3


class SymbolicHelper:
    """Client side of the helper process: one instance per process (see :func:`get_helper`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = os.getpid()
        self._ready = False
        self._buffer = b""
        self.restarts = 0

    # -- process management -------------------------------------------------------------------------
    def _start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "dapo_env.verifiers.math_symbolic"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
        self._ready = False
        self._buffer = b""
        self.restarts += 1

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        self._ready = False
        self._buffer = b""
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            try:
                proc.kill()
            except OSError:
                pass
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Kill the helper process (a later request starts a new one)."""
        with self._lock:
            if self._pid == os.getpid():
                self._kill()

    def _read_line(self, deadline: float) -> dict[str, Any] | None:
        """Next JSON line from the helper, or ``None`` if the deadline passes or it died."""
        if self._proc is None or self._proc.stdout is None:
            raise BrokenPipeError("symbolic helper is not running")
        fd = self._proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not poller.poll(max(1, int(remaining * 1000))):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise BrokenPipeError("symbolic helper closed its output")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    # -- requests -------------------------------------------------------------------------------------
    def request(self, payload: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send one request; the reply, or ``None`` when ``deadline`` (``time.monotonic()``) passes.

        On a timeout mid-request the helper is killed (it may be stuck in sympy); a helper that is
        still starting up is left to finish starting for the next call.
        """
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return None
        try:
            if self._pid != os.getpid():  # forked: the parent's helper and pipes are not ours
                self._proc, self._pid, self._ready, self._buffer = None, os.getpid(), False, b""
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._start()
                _register_exit(self)
            try:
                if self._proc is None or self._proc.stdin is None:
                    raise BrokenPipeError("symbolic helper did not start")
                if not self._ready:
                    hello = self._read_line(deadline)
                    if hello is None:
                        return None
                    self._ready = True
                self._proc.stdin.write((json.dumps(payload) + "\n").encode())
                self._proc.stdin.flush()
                reply = self._read_line(deadline)
            except (OSError, ValueError):
                self._kill()
                return {"equal": False, "reason": "error:HelperDied"}
            if reply is None:
                self._kill()
            return reply
        finally:
            self._lock.release()


_HELPER: SymbolicHelper | None = None
_HELPER_LOCK = threading.Lock()
_EXIT_REGISTERED: set[int] = set()


def _register_exit(helper: SymbolicHelper) -> None:
    pid = os.getpid()
    if pid not in _EXIT_REGISTERED:
        _EXIT_REGISTERED.add(pid)
        atexit.register(helper.close)


def _after_fork_in_child() -> None:
    """A fork may copy a lock held by another thread: the child starts with a fresh client."""
    global _HELPER, _HELPER_LOCK
    _HELPER, _HELPER_LOCK = None, threading.Lock()
    _EXIT_REGISTERED.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def get_helper() -> SymbolicHelper:
    """The process-wide helper client (created on first use)."""
    global _HELPER
    if _HELPER is None:
        with _HELPER_LOCK:
            if _HELPER is None:
                _HELPER = SymbolicHelper()
    return _HELPER


def warm_up(timeout_s: float = 60.0) -> bool:
    """Start this process's helper now and wait until it is ready; True if it answered in time.

    Optional: the helper otherwise starts on the first pair that needs the symbolic stage, and that
    first call then spends part of its time limit waiting for the start-up (a few seconds).
    """
    reply = get_helper().request({"op": "sleep", "seconds": 0}, time.monotonic() + timeout_s)
    return reply is not None


def symbolic_equal(pred: str, gold: str, timeout_s: float, *, gold_decimals: int | None = None) -> tuple[bool, str]:
    """Symbolic equivalence of two canonical answers, decided within ``timeout_s`` seconds.

    Returns ``(equal, reason)`` with reason ``equal:symbolic``, ``not_equal``, ``timeout`` or
    ``error:<Type>``. Never raises.
    """
    deadline = time.monotonic() + timeout_s
    inner = max(1, int(timeout_s * 0.7))
    try:
        reply = get_helper().request(
            {"pred": pred, "gold": gold, "timeout": inner, "gold_decimals": gold_decimals}, deadline
        )
    except Exception as exc:  # noqa: BLE001 - the verifier must never raise on model output
        return False, f"error:{type(exc).__name__}"
    if reply is None:
        return False, "timeout"
    return bool(reply.get("equal", False)), str(reply.get("reason", "not_equal"))


# ---------------------------------------------------------------------------------------------------
# Server side: runs in the helper process.
def _serve_one(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "sleep":  # lets tests exercise the kill-on-timeout path deterministically
        time.sleep(float(request.get("seconds", 0)))
        return {"equal": False, "reason": "slept"}
    import math_verify
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    timeout = int(request.get("timeout", 3))
    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    try:
        gold = math_verify.parse(f"${request['gold']}$", extraction_config=configs, parsing_timeout=timeout)
        pred = math_verify.parse(f"${request['pred']}$", extraction_config=configs, parsing_timeout=timeout)
        if not gold or not pred:
            return {"equal": False, "reason": "not_equal"}
        quick = _numeric_difference(pred[0], gold[0])
        if quick is not None:
            return quick
        decimals = request.get("gold_decimals")
        if decimals is not None and _rounds_to(pred[0], gold[0], int(decimals)):
            return {"equal": True, "reason": "equal:numeric"}
        ok = math_verify.verify(gold, pred, timeout_seconds=timeout)
    except TimeoutError:
        return {"equal": False, "reason": "timeout"}
    except Exception as exc:  # noqa: BLE001
        return {"equal": False, "reason": f"error:{type(exc).__name__}"}
    return {"equal": bool(ok), "reason": "equal:symbolic" if ok else "not_equal"}


def _numeric_difference(pred: Any, gold: Any) -> dict[str, Any] | None:
    """Constants that differ at 60 significant digits are not equal: answered before ``verify``."""
    import sympy

    if not isinstance(pred, sympy.Expr) or not isinstance(gold, sympy.Expr):
        return None
    if pred.free_symbols or gold.free_symbols:
        return None
    diff, scale = sympy.N(pred - gold, 60), sympy.N(abs(gold), 60)
    if not (diff.is_number and scale.is_number) or diff.has(sympy.nan, sympy.zoo, sympy.oo):
        return None
    if abs(diff) > sympy.Float(10, 60) ** -40 * max(sympy.Float(1), scale):
        return {"equal": False, "reason": "not_equal"}
    return None


def _rounds_to(pred: Any, gold: Any, decimals: int) -> bool:
    """Whether an exact symbolic ``pred`` rounds (half up) to the decimal ``gold``."""
    import sympy

    if not isinstance(pred, sympy.Expr) or not isinstance(gold, sympy.Expr) or pred.free_symbols:
        return False
    value = sympy.N(pred, 50)
    if not value.is_real:
        return False
    scaled = sympy.floor(abs(value) * sympy.Integer(10) ** decimals + sympy.Rational(1, 2))
    rounded = sympy.sign(value) * scaled / sympy.Integer(10) ** decimals
    return bool(sympy.nsimplify(gold) == rounded)


def main() -> None:
    """Helper process loop: one JSON request per stdin line, one JSON reply per stdout line."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    # Warm every lazy import (the LaTeX parser, sympy's printers) before announcing readiness, so the
    # first real request is as fast as the rest.
    _serve_one({"pred": "\\frac{\\sqrt{2}}{2}+x", "gold": "(1,2)\\cup[3,\\infty)", "timeout": 30})

    parent = os.getppid()

    def watch_parent() -> None:  # forked siblings may hold our stdin open after the parent died
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply = _serve_one(json.loads(line))
        except MemoryError:
            reply = {"equal": False, "reason": "error:MemoryError"}
        except Exception as exc:  # noqa: BLE001
            reply = {"equal": False, "reason": f"error:{type(exc).__name__}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
