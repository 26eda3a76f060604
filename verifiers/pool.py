"""Batched verification in a persistent pool of worker processes that survives hangs and crashes.

A :class:`VerifierPool` keeps ``workers`` non-daemonic processes (a verifier may start its own
subprocesses inside a worker). ``pool.map`` sends the pickled verifier once per worker (cached by a hash
of its pickle), dispatches items in chunks, and reads results back per chunk. Each worker writes the index
and start time of the item it is working on into a small shared array, so the parent knows exactly which
item hangs: a worker past the per-item limit is killed with its process group and replaced, that one item
is scored ``VerifyResult(False, 0.0, None, "timeout")`` (``"worker_died"`` when the worker died on its
own), and the rest of its chunk is re-queued. The batch always completes, in input order.

``verify_batch`` is the one-shot form; its ``backend`` names an entry of a small registry
(:func:`register_backend`) so other execution backends can be added with the same guarantees.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dill
import multiprocess
from multiprocess import connection as mp_connection
from multiprocess import util as mp_util

from dapo_env.types import InvalidReference, VerifierConfigError, VerifyResult

_IDLE = -1.0  # progress[0] while a worker waits for work
_LOADING = -2.0  # progress[0] while a worker unpickles a verifier
_LOAD_GRACE_S = 30.0  # extra time allowed for unpickling (importing) a verifier in a fresh worker
_FLUSH_S = 0.05  # a worker sends partial chunk results at least this often
_MAX_CHUNK = 256
_START_METHODS = ("forkserver", "spawn", "fork")


def _error_result(exc: BaseException) -> VerifyResult:
    return VerifyResult(False, 0.0, None, f"error:{type(exc).__name__}")


class _CtrlC:
    """Tells a real Ctrl-C from a verifier's own ``raise KeyboardInterrupt`` while verifying inline.

    In the main thread, while active, a SIGINT handler that wraps the current one records that a signal
    came. Elsewhere (other threads, workers that ignore SIGINT) no signal can raise there, so every
    ``KeyboardInterrupt`` was raised by the verifier itself.
    """

    def __init__(self) -> None:
        self.seen = False
        self._previous: Callable[..., Any] | None = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.seen = True
        if self._previous is not None:
            self._previous(signum, frame)

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def verify_one(verifier: Callable[[str, Any], VerifyResult], response: str, reference: Any,
                ctrl_c: _CtrlC | None = None) -> VerifyResult:
    """Call the verifier on one item, turning anything it raises (``SystemExit`` and a ``KeyboardInterrupt`` of
    its own included; a real Ctrl-C still stops the caller) or a wrong return type into a wrong result: what
    every backend runs per item (the process workers, the inline path, Ray's actors).

    Example:
        >>> verify_one(lambda response, reference: 1 / 0, "x", "y").reason
        'error:ZeroDivisionError'
    """
    try:
        result = verifier(response, reference)
    except VerifierConfigError:  # a misconfigured verifier or reference is the caller's error: say so
        raise
    except BaseException as exc:  # a verifier must never take the batch down
        if isinstance(exc, KeyboardInterrupt) and ctrl_c is not None and ctrl_c.seen:
            raise
        return _error_result(exc)
    if not isinstance(result, VerifyResult):
        return VerifyResult(False, 0.0, None, f"error:bad_return:{type(result).__name__}")
    return result


def prepare_references(verifier: Any, references: Sequence[Any]) -> list[Any]:
    """``verifier.prepare_reference`` applied to each reference in the calling process (a verifier without
    it gets them as they are): JSON forms become the verifier's own type once, before any worker sees them,
    and a wrong form raises :class:`~dapo_env.types.InvalidReference` naming its index."""
    prepare = getattr(verifier, "prepare_reference", None)
    if prepare is None:
        return list(references)
    prepared: list[Any] = []
    for i, reference in enumerate(references):
        try:
            prepared.append(prepare(reference))
        except InvalidReference as exc:
            raise InvalidReference(f"reference {i}: {exc}") from None
    return prepared


def _dumps(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return b"D" + dill.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(data: bytes) -> Any:
    if data[:1] == b"D":
        return dill.loads(data[1:])
    return pickle.loads(data)


class _BrokenVerifier:
    """Stands in for a verifier that failed to unpickle in a worker: every item gets the error."""

    def __init__(self, exc: BaseException) -> None:
        self.reason = f"error:{type(exc).__name__}"

    def __call__(self, response: str, reference: Any) -> VerifyResult:
        return VerifyResult(False, 0.0, None, self.reason)


def _worker_main(conn: Any, progress: Any, sys_path: list[str]) -> None:
    """Worker loop: receive ("verifier", key, blob) and ("items", indices, pairs); send results."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; it closes us
    try:
        os.setpgid(0, 0)  # own process group: the parent kills us and our helpers together
    except OSError:
        pass
    sys.path[:] = sys_path  # so verifiers defined in the parent's modules unpickle by reference
    conn.send_bytes(_dumps(("ready",)))
    verifier: Callable[[str, Any], VerifyResult] | None = None
    while True:
        try:
            message = _loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "verifier":
            progress[1] = time.monotonic()
            progress[0] = _LOADING
            try:
                verifier = dill.loads(message[2])
            except Exception as exc:
                verifier = _BrokenVerifier(exc)
            progress[0] = _IDLE
            continue
        _, indices, responses, references = message
        if verifier is None:
            verifier = _BrokenVerifier(RuntimeError("items arrived before a verifier"))
        # results travel as plain tuples: pickling slots dataclasses goes through Python-level __getstate__
        done: list[tuple[int, bool, float, str | None, str]] = []
        last_flush = time.monotonic()
        for index, response, reference in zip(indices, responses, references):
            progress[1] = time.monotonic()
            progress[0] = float(index)
            try:  # SIGINT is ignored here: every KeyboardInterrupt is the verifier's own
                r = verify_one(verifier, response, reference)
            except VerifierConfigError as exc:  # the caller already had its chance to see it (prepare_references)
                r = _error_result(exc)
            done.append((index, r.correct, r.score, r.extracted, r.reason))
            if progress[1] - last_flush > _FLUSH_S:
                conn.send_bytes(_dumps(("results", done, False)))
                done, last_flush = [], time.monotonic()
        progress[0] = _IDLE
        conn.send_bytes(_dumps(("results", done, True)))


@dataclass
class _Slot:
    """The parent's view of one worker."""

    process: Any
    conn: Any
    progress: Any
    verifier_key: bytes | None = None
    pending: list[int] = field(default_factory=list)  # indices sent and not yet answered
    assigned_at: float = 0.0


def _kill_slot(slot: _Slot) -> None:
    pid = slot.process.pid
    if pid is not None:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError, OSError):
                continue
    slot.process.join(timeout=5.0)
    try:
        slot.conn.close()
    except OSError:
        pass


def _shutdown(slots: list[_Slot]) -> None:
    """Stop every worker: polite stop message, short join, then SIGKILL of its process group."""
    for slot in slots:
        try:
            slot.conn.send_bytes(_dumps(("stop",)))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 1.0
    for slot in slots:
        slot.process.join(timeout=max(0.0, deadline - time.monotonic()))
    for slot in slots:
        _kill_slot(slot)
    slots.clear()


class VerifierPool:
    """A persistent pool of verifier worker processes; hung or dead workers are replaced.

    Args:
        workers: number of worker processes; ``None`` means ``os.cpu_count()``; ``0`` verifies in the
            calling process (no process overhead, but no per-item time limit: a hanging verifier hangs
            the caller, so use it only for verifiers that bound their own time, like the math fast path).
        timeout_s: per-item wall-clock limit in a worker; past it the worker is killed and replaced and
            that item is scored ``VerifyResult(False, 0.0, None, "timeout")``.
        start_method: how workers start: ``"forkserver"`` (default: safe when the caller has threads,
            e.g. torch), ``"spawn"`` or ``"fork"`` (fastest start; unsafe in multi-threaded callers).
        chunk_size: items per dispatch message; ``None`` picks ``ceil(n / (4 * workers))`` capped at 256.
        startup_timeout_s: how long the constructor waits for every worker to report ready.

    Raises:
        RuntimeError: a worker did not start (with ``"forkserver"``/``"spawn"`` the worker re-imports the
            caller's ``__main__`` script: guard the script with ``if __name__ == "__main__":``, or use
            ``start_method="fork"``).

    Example:
        >>> from dapo_env.types import VerifyResult
        >>> def exact(response, reference):
        ...     ok = response.strip() == reference
        ...     return VerifyResult(ok, float(ok), response.strip(), "equal" if ok else "different")
        >>> with VerifierPool(workers=0) as pool:
        ...     [r.correct for r in pool.map(exact, ["4", "5"], ["4", "4"])]
        [True, False]
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        timeout_s: float = 10.0,
        start_method: str = "forkserver",
        chunk_size: int | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
            raise ValueError(f"workers must be an int >= 0 (0 = verify in the calling process), got {workers!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s!r}")
        if start_method not in _START_METHODS:
            raise ValueError(f"start_method must be one of {_START_METHODS}, got {start_method!r}")
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
            raise ValueError(f"chunk_size must be None or an int >= 1, got {chunk_size!r}")
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.chunk_size = chunk_size
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if start_method != "fork" and main_file is not None and not os.path.isfile(main_file):
            start_method = "fork"  # `python -` / `-c`: there is no __main__ file the workers could import
        self.start_method = start_method
        self._ctx = multiprocess.get_context(start_method)
        if start_method == "forkserver":
            # The fork server imports these once; every worker (and replacement) forks from it warm.
            # Ignored when this process's fork server is already running.
            self._ctx.set_forkserver_preload(["__main__", __name__])
        self._slots: list[_Slot] = []
        self._closed = False
        self.replaced = 0  # workers killed or found dead and replaced, over the pool's life
        self._finalizer = mp_util.Finalize(self, _shutdown, args=(self._slots,), exitpriority=10)
        for _ in range(workers):
            self._slots.append(self._start_worker())
        self._await_ready(startup_timeout_s)

    # -- lifecycle -------------------------------------------------------------------------------
    def _start_worker(self) -> _Slot:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        progress = self._ctx.RawArray("d", 2)
        progress[0] = _IDLE
        process = self._ctx.Process(
            target=_worker_main, args=(child_conn, progress, list(sys.path)), name="dapo-verifier", daemon=False
        )
        process.start()
        child_conn.close()
        return _Slot(process=process, conn=parent_conn, progress=progress)

    def _await_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for slot in self._slots:
            ok = False
            try:
                if slot.conn.poll(max(0.0, deadline - time.monotonic())):
                    ok = _loads(slot.conn.recv_bytes()) == ("ready",)
            except (EOFError, OSError):
                ok = False
            if not ok:
                self.close()
                raise RuntimeError(
                    "a VerifierPool worker did not report ready (waited up to "
                    f"{timeout_s:.0f} s); with start_method 'forkserver' or 'spawn' workers re-import the "
                    "caller's __main__ script: guard it with `if __name__ == \"__main__\":` or pass "
                    "start_method=\"fork\""
                )

    def _replace(self, slot: _Slot) -> _Slot:
        _kill_slot(slot)
        self.replaced += 1
        new = self._start_worker()
        self._slots[self._slots.index(slot)] = new
        return new

    def close(self) -> None:
        """Stop all workers and their process groups; idempotent."""
        if not self._closed:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """Process ids of the current workers (for monitoring and tests)."""
        return [slot.process.pid for slot in self._slots if slot.process.pid is not None]

    # -- mapping ---------------------------------------------------------------------------------
    def map(
        self, verifier: Callable[[str, Any], VerifyResult], responses: Sequence[str], references: Sequence[Any]
    ) -> list[VerifyResult]:
        """Verify ``responses[i]`` against ``references[i]`` for every i; results in input order.

        Never raises on model output: verifier exceptions become ``error:<Type>`` results, a hang
        becomes ``"timeout"`` and a crashed worker ``"worker_died"`` (for its current item only).
        """
        if self._closed:
            raise RuntimeError("VerifierPool is closed: create a new one (or use it as a context manager)")
        if len(responses) != len(references):
            raise ValueError(
                f"responses and references must have the same length, got {len(responses)} and {len(references)}"
            )
        n = len(responses)
        if n == 0:
            return []
        references = prepare_references(verifier, references)
        if self.workers == 0:
            with _CtrlC() as ctrl_c:
                return [verify_one(verifier, r, ref, ctrl_c) for r, ref in zip(responses, references)]
        try:
            blob = dill.dumps(verifier, protocol=pickle.HIGHEST_PROTOCOL, recurse=True)
        except Exception as exc:
            raise TypeError(
                f"the verifier {verifier!r} cannot be pickled for the worker processes ({exc}); use a "
                "module-level function or a picklable class instance, or VerifierPool(workers=0)"
            ) from exc
        key = hashlib.sha1(blob).digest()
        size = self.chunk_size or max(1, min(_MAX_CHUNK, -(-n // (4 * self.workers))))
        queue: deque[list[int]] = deque(list(range(s, min(n, s + size))) for s in range(0, n, size))
        results: list[VerifyResult | None] = [None] * n
        remaining = n
        try:
            while remaining:
                for slot in list(self._slots):
                    if not slot.pending and queue:
                        slot = self._dispatch(slot, queue.popleft(), key, blob, responses, references, queue)
                remaining -= self._collect(results, queue)
        except BaseException:
            # Interrupted (Ctrl-C, a failing input sequence): busy workers hold items of this call, whose
            # late results must never reach the next call, so they are replaced before re-raising.
            for slot in list(self._slots):
                if slot.pending:
                    slot.pending = []
                    self._replace(slot)
            raise
        return [r for r in results if r is not None]

    def _dispatch(
        self,
        slot: _Slot,
        chunk: list[int],
        key: bytes,
        blob: bytes,
        responses: Sequence[str],
        references: Sequence[Any],
        queue: deque[list[int]],
    ) -> _Slot:
        try:
            if not slot.process.is_alive():
                raise BrokenPipeError("worker exited while idle")
            if slot.verifier_key != key:
                slot.conn.send_bytes(_dumps(("verifier", key, blob)))
                slot.verifier_key = key
            slot.conn.send_bytes(
                _dumps(("items", chunk, [responses[i] for i in chunk], [references[i] for i in chunk]))
            )
        except (OSError, ValueError, BrokenPipeError):
            queue.appendleft(chunk)  # the worker is gone: replace it; the chunk waits for the next round
            return self._replace(slot)
        slot.pending = list(chunk)
        slot.assigned_at = time.monotonic()
        return slot

    def _deadline(self, slot: _Slot) -> float:
        current, started = slot.progress[0], slot.progress[1]
        if current == _LOADING or int(current) not in slot.pending:
            return max(started, slot.assigned_at) + self.timeout_s + _LOAD_GRACE_S
        return started + self.timeout_s

    def _culprit(self, slot: _Slot) -> int:
        current = int(slot.progress[0])
        return current if current in slot.pending else slot.pending[0]

    def _fail(self, slot: _Slot, reason: str, results: list[VerifyResult | None], queue: deque[list[int]]) -> int:
        """Kill/replace a busy worker: its current item gets ``reason``, the rest of its chunk is re-queued."""
        _kill_slot(slot)
        culprit = self._culprit(slot)
        results[culprit] = VerifyResult(False, 0.0, None, reason)
        rest = [i for i in slot.pending if i != culprit]
        if rest:
            queue.appendleft(rest)
        slot.pending = []
        self._replace(slot)
        return 1

    def _collect(self, results: list[VerifyResult | None], queue: deque[list[int]]) -> int:
        """Wait for results, deaths or deadlines; return how many items got their final result."""
        busy = [slot for slot in self._slots if slot.pending]
        if not busy:
            return 0
        now = time.monotonic()
        wait_s = min(self._deadline(slot) for slot in busy) - now
        by_handle: dict[Any, _Slot] = {}
        for slot in busy:
            by_handle[slot.conn] = slot
            by_handle[slot.process.sentinel] = slot
        ready = mp_connection.wait(list(by_handle), timeout=max(0.0, min(wait_s, 1.0)))
        finished = 0
        handled: set[int] = set()
        for handle in ready:
            slot = by_handle[handle]
            if id(slot) in handled:
                continue
            handled.add(id(slot))
            finished += self._read(slot, results)
            if slot.pending and not slot.process.is_alive():
                finished += self._fail(slot, "worker_died", results, queue)
        now = time.monotonic()
        for slot in list(self._slots):
            if slot.pending and now > self._deadline(slot):
                finished += self._fail(slot, "timeout", results, queue)
        return finished

    def _read(self, slot: _Slot, results: list[VerifyResult | None]) -> int:
        """Drain every result message the worker has sent so far."""
        finished = 0
        try:
            while slot.conn.poll():
                message = _loads(slot.conn.recv_bytes())
                if message[0] != "results":
                    continue  # a replacement worker's "ready"
                done = message[1]
                for index, correct, score, extracted, reason in done:
                    if results[index] is None:
                        results[index] = VerifyResult(correct, score, extracted, reason)
                        finished += 1
                done_set = {item[0] for item in done}
                slot.pending = [i for i in slot.pending if i not in done_set]
        except (EOFError, OSError):
            pass
        return finished


# -- one-shot form and backends -------------------------------------------------------------------
BatchBackend = Callable[..., list[VerifyResult]]


def _inline_backend(
    verifier: Callable[[str, Any], VerifyResult],
    responses: Sequence[str],
    references: Sequence[Any],
    *,
    workers: int | None,
    timeout: float,
    pool: VerifierPool | None,
) -> list[VerifyResult]:
    return VerifierPool(0, timeout_s=timeout).map(verifier, responses, references)


def _process_backend(
    verifier: Callable[[str, Any], VerifyResult],
    responses: Sequence[str],
    references: Sequence[Any],
    *,
    workers: int | None,
    timeout: float,
    pool: VerifierPool | None,
) -> list[VerifyResult]:
    if pool is not None:
        return pool.map(verifier, responses, references)
    if workers is None:
        workers = min(os.cpu_count() or 1, max(1, len(responses)))
    with VerifierPool(workers, timeout_s=timeout) as one_shot:
        return one_shot.map(verifier, responses, references)


_BACKENDS: dict[str, BatchBackend] = {"process": _process_backend, "inline": _inline_backend}
#: Backends in modules of their own that register themselves on import (this module never imports them).
_OPTIONAL_BACKENDS = {"ray": "dapo_env.verifiers.ray_backend"}


def register_backend(name: str, backend: BatchBackend, *, overwrite: bool = False) -> None:
    """Add a ``verify_batch`` backend.

    A backend is called as ``backend(verifier, responses, references, *, workers, timeout, pool)`` and must
    give the same guarantees as ``"process"``: results in input order, one result per item, a hung item
    scored ``"timeout"`` and a lost worker ``"worker_died"`` for its item only, never raising on model output.
    """
    if name in _BACKENDS and not overwrite:
        raise ValueError(f"verify_batch backend {name!r} is already registered; pass overwrite=True to replace it")
    _BACKENDS[name] = backend


def verify_batch(
    verifier: Callable[[str, Any], VerifyResult],
    responses: Sequence[str],
    references: Sequence[Any],
    *,
    workers: int | None = None,
    timeout: float = 10.0,
    backend: str = "process",
    pool: VerifierPool | None = None,
) -> list[VerifyResult]:
    """Verify a batch; the one-shot form of :meth:`VerifierPool.map` (reuses ``pool`` when given).

    Args:
        verifier: a picklable ``(response, reference) -> VerifyResult`` callable.
        responses: model outputs.
        references: one reference per response (gold answer, ``CodeTests``, ...).
        workers: worker processes for a one-shot pool (``None``: ``os.cpu_count()`` capped at the batch
            size; ``0``: in the calling process).
        timeout: per-item wall-clock limit in seconds.
        backend: ``"process"`` (worker processes), ``"inline"`` (calling process), ``"ray"`` (Ray actors,
            :mod:`dapo_env.verifiers.ray_backend`), or a registered one.
        pool: an open :class:`VerifierPool` to reuse (``"process"`` backend).

    Example:
        >>> from dapo_env.types import VerifyResult
        >>> def exact(response, reference):
        ...     ok = response == reference
        ...     return VerifyResult(ok, float(ok), response, "equal" if ok else "different")
        >>> [r.score for r in verify_batch(exact, ["a", "b"], ["a", "a"], backend="inline")]
        [1.0, 0.0]
    """
    if backend in _OPTIONAL_BACKENDS and backend not in _BACKENDS:
        importlib.import_module(_OPTIONAL_BACKENDS[backend])  # registers itself (its extra loads lazily)
    if backend not in _BACKENDS:
        raise ValueError(f"unknown verify_batch backend {backend!r}; valid: {sorted(_BACKENDS)}")
    if len(responses) != len(references):
        raise ValueError(
            f"responses and references must have the same length, got {len(responses)} and {len(references)}"
        )
    if workers == 0 and backend == "process" and pool is None:
        backend = "inline"
    references = prepare_references(verifier, references)  # every backend gets the verifier's own type
    return _BACKENDS[backend](verifier, responses, references, workers=workers, timeout=timeout, pool=pool)


__all__ = ["VerifierPool", "prepare_references", "register_backend", "verify_batch", "verify_one"]
