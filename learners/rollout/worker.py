"""A rollout worker: a separate process with its own copy of the engine, fed through one ordered channel.

The learner sends commands, the worker executes them strictly in order and reports events back:

```
learner -> worker   Weights(policy_step, tensors) | Task(ticket, payload) | Stop()
worker  -> learner  Ready(pid) | Loaded(policy_step) | Started(ticket) | Done(ticket, result, seconds) |
                    Failed(ticket, error)
```

Because the channel is ordered, a task runs with exactly the weights of the last ``Weights`` before it:
which training step's weights generate which work is decided by the learner when it sends, not by timing, so an
asynchronous run is as reproducible as a synchronous one. What the worker does with a task is a
:class:`RolloutJob` (built in the learner, pickled to the worker, where :meth:`RolloutJob.build` makes the
engine and environment once); :mod:`~dapo_env.learners.rollout.async_source` defines the job that generates and
verifies rounds of groups.

:class:`RolloutWorker` is the learner's handle. It detects a worker that died (a crash, the OOM killer,
``kill -9``) or hung (no event for ``timeout_s`` while work is outstanding) and raises
:class:`WorkerLost`; the caller replaces it with :meth:`RolloutWorker.restart` (fresh queues, so a worker
killed in the middle of a message cannot corrupt the next one) and resubmits its work. An exception
raised by the job itself is not retried: :class:`RolloutWorkerError` carries the worker's traceback.
The worker exits when the learner does, ``kill -9`` included (``PR_SET_PDEATHSIG`` on Linux, and a
parent check between commands). Processes start with ``spawn`` (safe with torch and CUDA), so a script
that trains must guard its entry point with ``if __name__ == "__main__":``.

Example:
    >>> worker = RolloutWorker(EchoJob(), timeout_s=120)  # doctest: +SKIP
    >>> worker.start(); worker.submit(0, "hello")  # doctest: +SKIP
    >>> worker.wait(0).result  # doctest: +SKIP
    'hello'
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


# --- the protocol -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Weights:
    """Load these tensors (names as in the model's ``state_dict``): the weights after training step ``policy_step``."""

    policy_step: int
    tensors: Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class Task:
    """Run the job on ``payload``; ``ticket`` names the answer."""

    ticket: int
    payload: Any


@dataclass(frozen=True)
class Stop:
    """Finish and exit."""


@dataclass(frozen=True)
class Ready:
    """The worker built its job and waits for commands."""

    pid: int


@dataclass(frozen=True)
class Loaded:
    """The worker loaded the weights of training step ``policy_step`` (its engine holds them now; a server engine
    has pushed and verified them)."""

    policy_step: int


@dataclass(frozen=True)
class Started:
    """The worker began the task ``ticket``."""

    ticket: int


@dataclass(frozen=True)
class Done:
    """The task ``ticket`` finished with ``result`` after ``seconds`` of work."""

    ticket: int
    result: Any
    seconds: float


@dataclass(frozen=True)
class Failed:
    """The job raised (``ticket`` is ``None`` when building the job or loading weights failed)."""

    ticket: int | None
    error: str


@runtime_checkable
class RolloutExecutor(Protocol):
    """What a job builds inside the worker: it loads weights and runs tasks, in the order they arrive."""

    def load_weights(self, policy_step: int, tensors: Mapping[str, torch.Tensor]) -> None: ...

    def run(self, payload: Any) -> Any: ...


@runtime_checkable
class RolloutJob(Protocol):
    """A picklable recipe for the worker's executor (built once per worker process)."""

    def build(self) -> RolloutExecutor: ...


class WorkerLost(RuntimeError):
    """The worker process died or hung; its unfinished tasks must be resubmitted to a replacement."""


class RolloutWorkerError(RuntimeError):
    """The job raised inside the worker (not retried: the same input would fail again)."""


# --- the worker process -----------------------------------------------------------------------------
def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def worker_main(job: RolloutJob, commands: Any, events: Any, parent_pid: int) -> None:
    """The worker's loop: build the job's executor, then execute commands in order until ``Stop``."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    if os.getppid() != parent_pid:  # the learner died before the death signal was armed
        return
    try:
        executor = job.build()
    except BaseException:
        events.put(Failed(None, traceback.format_exc()))
        return
    events.put(Ready(os.getpid()))
    while True:
        try:
            command = commands.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent_pid:  # orphaned (the learner is gone)
                return
            continue
        if isinstance(command, Stop) or os.getppid() != parent_pid:
            return
        try:
            if isinstance(command, Weights):
                executor.load_weights(command.policy_step, command.tensors)
                events.put(Loaded(command.policy_step))
                del command
            elif isinstance(command, Task):
                events.put(Started(command.ticket))
                start = time.perf_counter()
                result = executor.run(command.payload)
                events.put(Done(command.ticket, result, time.perf_counter() - start))
        except BaseException:
            events.put(Failed(getattr(command, "ticket", None), traceback.format_exc()))
            return


# --- the learner's handle ---------------------------------------------------------------------------
class RolloutWorker:
    """Starts, feeds, watches and replaces one rollout worker process.

    Args:
        job: the picklable :class:`RolloutJob` (built once in each worker process).
        timeout_s: the worker counts as hung when it reports nothing (no start, no result) for this long
            while tasks are outstanding: allow for the longest task.
        start_timeout_s: the same limit before the worker reports ready (importing torch, building the
            engine: a large model or vLLM takes minutes).
        name: the process name (shown by ``ps``).

    Every call that waits (:meth:`wait`) raises :class:`WorkerLost` when the worker is dead or hung and
    :class:`RolloutWorkerError` when the job raised; nothing here waits forever.
    """

    def __init__(self, job: RolloutJob, *, timeout_s: float = 600.0, start_timeout_s: float = 600.0,
                 name: str = "dapo-rollout-worker") -> None:
        if not isinstance(job, RolloutJob):
            raise TypeError(f"job must have a build() method returning the worker's executor, got {type(job).__name__}")
        if not (timeout_s > 0 and start_timeout_s > 0):
            raise ValueError(f"timeout_s and start_timeout_s must be > 0 (seconds without progress before a worker "
                             f"counts as hung), got {timeout_s}, {start_timeout_s}")
        self.job, self.name = job, name
        self.timeout_s, self.start_timeout_s = float(timeout_s), float(start_timeout_s)
        self._ready = False
        self._ctx = torch.multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._commands: Any = None
        self._events: Any = None
        self._outstanding: set[int] = set()
        self._done: dict[int, Done] = {}
        self._weights_sent = self._weights_loaded = 0  # Weights commands to, and Loaded events from, this process
        self._last_event = time.monotonic()
        self.restarts = 0
        #: The highest ticket any worker process of this handle has reported starting (``None``: none yet):
        #: every command sent before that ticket has been executed (tickets must grow across restarts).
        self.started_through: int | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The worker process's id (``None`` before :meth:`start`)."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """Start a worker process (fresh queues; nothing outstanding)."""
        self._commands, self._events = self._ctx.Queue(), self._ctx.Queue()
        self._proc = self._ctx.Process(target=worker_main, name=self.name, daemon=True,
                                       args=(self.job, self._commands, self._events, os.getpid()))
        self._proc.start()
        self._outstanding.clear()
        self._done.clear()
        self._weights_sent = self._weights_loaded = 0
        self._ready = False
        self._last_event = time.monotonic()

    def restart(self) -> None:
        """Kill the worker (if still there) and start a fresh one; resubmit the weights and tasks after this."""
        self._kill()
        self.restarts += 1
        self.start()

    def close(self, timeout: float = 10.0) -> None:
        """Ask the worker to stop, wait up to ``timeout`` seconds, then kill it."""
        if self._proc is None:
            return
        if self._proc.is_alive():
            try:
                self._commands.put(Stop())
            except (ValueError, OSError):
                pass
            self._proc.join(timeout)
        self._kill()
        self._proc = None

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(5.0)
        for q in (self._commands, self._events):
            if q is not None:
                q.cancel_join_thread()  # never block interpreter exit on a dead reader
                q.close()

    # -- commands ---------------------------------------------------------------------------------
    def send_weights(self, policy_step: int, tensors: Mapping[str, torch.Tensor], *, copy: bool = True) -> None:
        """Queue the weights of training step ``policy_step``; the tensors go to the worker through shared memory. ``copy=True`` sends a
        CPU copy (the caller may keep training its own tensors); ``copy=False`` sends ``tensors`` themselves
        (CPU tensors the caller never changes; they are moved to shared memory in place)."""
        if copy:
            tensors = {name: t.detach().to("cpu", copy=True) for name, t in tensors.items()}
        if not (self._outstanding or self.loading):
            self._last_event = time.monotonic()  # an idle worker's silence so far is not a hang
        self._weights_sent += 1
        self._commands.put(Weights(int(policy_step), tensors))

    def submit(self, ticket: int, payload: Any) -> None:
        """Queue a task; it runs after every command sent before it."""
        if not self._outstanding:
            self._last_event = time.monotonic()  # an idle worker's silence so far is not a hang
        self._outstanding.add(ticket)
        self._commands.put(Task(ticket, payload))

    def forget(self, ticket: int) -> None:
        """Drop ``ticket``: its result is discarded (now, or when it arrives)."""
        self._outstanding.discard(ticket)
        self._done.pop(ticket, None)

    def finished(self) -> dict[int, Done]:
        """Results that already arrived and were not collected, without waiting (collects them)."""
        done, self._done = self._done, {}
        return done

    @property
    def loading(self) -> bool:
        """Whether weights were sent that the worker has not reported loading yet."""
        return self._weights_loaded < self._weights_sent

    @property
    def outstanding(self) -> frozenset[int]:
        """Tickets submitted whose result has not been collected."""
        return frozenset(self._outstanding | set(self._done))

    # -- events -----------------------------------------------------------------------------------
    def wait(self, ticket: int, *, poll_s: float = 0.2) -> Done:
        """Block until ``ticket`` is done and return its :class:`Done` (results of other tickets that arrive
        meanwhile are kept for their own :meth:`wait`)."""
        if ticket not in self._outstanding and ticket not in self._done:
            raise KeyError(f"ticket {ticket} was never submitted to this worker (or already collected)")
        while ticket not in self._done:
            self._receive(poll_s)
        return self._done.pop(ticket)

    def wait_loaded(self, *, poll_s: float = 0.2) -> None:
        """Block until the worker has loaded every weights command sent to it (after the tasks queued before
        them; their results are kept for :meth:`wait`). Raises as :meth:`wait` does."""
        while self.loading:
            self._receive(poll_s)

    def _receive(self, poll_s: float) -> None:
        try:
            event = self._events.get(timeout=poll_s)
        except queue.Empty:
            self._check_health()
            return
        self._last_event = time.monotonic()
        if isinstance(event, (Started, Done)):
            self.started_through = max(event.ticket, self.started_through if self.started_through is not None else event.ticket)
        if isinstance(event, Ready):
            self._ready = True
        if isinstance(event, Loaded):
            self._weights_loaded += 1
        if isinstance(event, Failed):
            raise RolloutWorkerError(f"the rollout worker's job raised (ticket {event.ticket}):\n{event.error}")
        if isinstance(event, Done) and event.ticket in self._outstanding:  # a forgotten ticket's result is dropped
            self._outstanding.discard(event.ticket)
            self._done[event.ticket] = event

    def _check_health(self) -> None:
        if not self._proc.is_alive():
            code = self._proc.exitcode
            cause = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            raise WorkerLost(f"rollout worker (pid {self._proc.pid}) {cause}")
        silent = time.monotonic() - self._last_event
        if not self._ready and silent > self.start_timeout_s:
            raise WorkerLost(f"rollout worker (pid {self._proc.pid}) hung while starting: not ready after "
                             f"{silent:.0f} s (start_timeout_s={self.start_timeout_s:g})")
        if self._ready and (self._outstanding or self.loading) and silent > self.timeout_s:
            raise WorkerLost(f"rollout worker (pid {self._proc.pid}) hung: no progress for {silent:.0f} s "
                             f"(timeout_s={self.timeout_s:g})")


__all__ = ["Done", "Failed", "Loaded", "Ready", "RolloutExecutor", "RolloutJob", "RolloutWorker", "RolloutWorkerError", "Started",
           "Stop", "Task", "Weights", "WorkerLost", "worker_main"]
