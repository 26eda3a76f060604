"""``verify_batch(..., backend="ray")``: batched verification on a Ray cluster, with the pool's guarantees.

A :class:`RayVerifierPool` keeps ``workers`` Ray actors (one CPU each by default, spread over the
cluster's nodes). Like :class:`~dapo_env.verifiers.pool.VerifierPool` it ships the pickled verifier
once per actor, gives each idle actor one item at a time (so an item's clock starts when it is sent to
an idle actor, never while it queues), kills and replaces an actor whose item runs past the per-item
limit (that item is scored ``"timeout"``), replaces an actor that died (its item is scored
``"worker_died"``), and returns results in input order. A verifier that raises gives ``error:<Type>``.
Code verification isolates each candidate exactly as in a local worker: :class:`CodeVerifier` starts
its sandboxed run from inside the actor's process.

Ray is an optional dependency (``pip install "ray>=2.40"``), imported only when a Ray pool starts.
Connect to a cluster by calling ``ray.init(address=...)`` first, or set ``RAY_ADDRESS``; otherwise a
local Ray instance is started. Worker nodes need ``dapo_env`` installed (and any module a custom
verifier lives in): the driver's ``sys.path`` is sent along, which is enough on one machine.

Example:
    >>> from dapo_env.verifiers import MathVerifier, verify_batch
    >>> out = verify_batch(MathVerifier(), ["Answer: 4"], ["4"], backend="ray")  # doctest: +SKIP
    >>> out[0].correct  # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dill

from dapo_env.types import VerifyResult
from .pool import register_backend, verify_one

_INSTALL_HINT = ('verify_batch(backend="ray") needs Ray, an optional dependency: pip install "ray>=2.40" '
                 '(or pip install "dapo-env[ray]")')


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return ray


class _VerifierWorker:
    """The actor's body: holds one unpickled verifier and verifies one item per call."""

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.verifier: Callable[[str, Any], VerifyResult] | None = None

    def load(self, key: bytes, blob: bytes, sys_path: list[str]) -> int:
        """Unpickle the verifier (driver modules import by reference through ``sys_path``); return the pid."""
        for entry in reversed(sys_path):
            if entry not in sys.path and os.path.isdir(entry or "."):
                sys.path.insert(0, entry)
        if key != self.key:
            try:
                self.verifier = dill.loads(blob)
            except Exception as exc:
                reason = f"error:{type(exc).__name__}"
                self.verifier = lambda response, reference: VerifyResult(False, 0.0, None, reason)
            self.key = key
        return os.getpid()

    def verify(self, response: str, reference: Any) -> tuple[bool, float, str | None, str]:
        if self.verifier is None:
            return (False, 0.0, None, "error:no_verifier")
        r = verify_one(self.verifier, response, reference)
        return (r.correct, r.score, r.extracted, r.reason)


@dataclass
class _Slot:
    """The driver's view of one actor."""

    actor: Any
    loading: Any = None  # ObjectRef of a pending load (the actor is not usable until it resolves)
    loading_since: float = 0.0
    key: bytes | None = None
    item: int | None = None  # index in flight
    ref: Any = None
    sent_at: float = 0.0


class RayVerifierPool:
    """A pool of Ray actors that verify batches in input order; hung or dead actors are replaced.

    Args:
        workers: number of actors; ``None`` means the cluster's CPU count.
        timeout_s: per-item wall-clock limit, counted from when the item is sent to an idle actor.
        cpus_per_worker: Ray CPU resources each actor reserves.
        startup_timeout_s: how long an actor may take to start and load a verifier.
        address: passed to ``ray.init`` when Ray is not initialised yet (``None``: ``RAY_ADDRESS`` or a
            local instance).

    Example:
        >>> from dapo_env.verifiers import MathVerifier
        >>> with RayVerifierPool(2, timeout_s=5.0) as pool:  # doctest: +SKIP
        ...     [r.correct for r in pool.map(MathVerifier(), ["Answer: 4", "5"], ["4", "4"])]
        [True, False]
    """

    def __init__(self, workers: int | None = None, *, timeout_s: float = 10.0, cpus_per_worker: float = 1.0,
                 startup_timeout_s: float = 120.0, address: str | None = None) -> None:
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise ValueError(f"workers must be None or an int >= 1 (Ray actors), got {workers!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s!r}")
        if not cpus_per_worker > 0:
            raise ValueError(f"cpus_per_worker must be > 0, got {cpus_per_worker!r}")
        self._ray = ray = _import_ray()
        if not ray.is_initialized():
            ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                     log_to_driver=False)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus_per_worker))
        self.workers, self.timeout_s = workers, float(timeout_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self._actor_cls = ray.remote(num_cpus=cpus_per_worker, max_restarts=0, max_task_retries=0,
                                     scheduling_strategy="SPREAD")(_VerifierWorker)
        self._slots = [_Slot(actor=self._actor_cls.remote()) for _ in range(workers)]
        self.replaced = 0  # actors killed or found dead and replaced, over the pool's life
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Kill every actor; idempotent."""
        if self._closed:
            return
        self._closed = True
        for slot in self._slots:
            self._kill(slot)
        self._slots.clear()

    def __enter__(self) -> RayVerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _kill(self, slot: _Slot) -> None:
        try:
            self._ray.kill(slot.actor, no_restart=True)
        except Exception:  # already gone
            pass

    def _replace(self, slot: _Slot) -> None:
        self._kill(slot)
        self.replaced += 1
        slot.actor = self._actor_cls.remote()
        slot.key, slot.loading, slot.item, slot.ref = None, None, None, None

    # -- mapping ---------------------------------------------------------------------------------
    def map(self, verifier: Callable[[str, Any], VerifyResult], responses: Sequence[str],
            references: Sequence[Any]) -> list[VerifyResult]:
        """Verify ``responses[i]`` against ``references[i]`` for every i on the actors; results in input order.

        Never raises on model output: exceptions become ``error:<Type>``, a hang ``"timeout"`` and a
        lost actor ``"worker_died"`` (for its one item only).
        """
        if self._closed:
            raise RuntimeError("RayVerifierPool is closed: create a new one (or use it as a context manager)")
        if len(responses) != len(references):
            raise ValueError(f"responses and references must have the same length, got {len(responses)} and "
                             f"{len(references)}")
        n = len(responses)
        if n == 0:
            return []
        ray = self._ray
        blob = dill.dumps(verifier, protocol=pickle.HIGHEST_PROTOCOL, recurse=True)
        key = hashlib.sha1(blob).digest()
        blob_ref = ray.put(blob)
        queue: deque[int] = deque(range(n))
        results: list[VerifyResult | None] = [None] * n
        left = n
        while left:
            now = time.monotonic()
            for slot in self._slots:
                if slot.key != key and slot.loading is None and slot.item is None:
                    slot.loading = slot.actor.load.remote(key, blob_ref, list(sys.path))
                    slot.loading_since, slot.key = now, key
                if slot.loading is None and slot.item is None and queue:
                    slot.item = queue.popleft()
                    slot.ref = slot.actor.verify.remote(responses[slot.item], references[slot.item])
                    slot.sent_at = now
            left -= self._collect(results)
        return [r for r in results if r is not None]

    def _collect(self, results: list[VerifyResult | None]) -> int:
        """Wait for one answer, load or deadline; return how many items got their final result."""
        ray = self._ray
        waiting: dict[Any, _Slot] = {}
        deadlines = [time.monotonic() + 1.0]
        for slot in self._slots:
            if slot.loading is not None:
                waiting[slot.loading] = slot  # an actor still waiting for a free CPU: poll it each second
            elif slot.item is not None:
                waiting[slot.ref] = slot
                deadlines.append(slot.sent_at + self.timeout_s)
        if not waiting:
            return 0
        wait_s = max(0.0, min(deadlines) - time.monotonic())
        ready, _ = ray.wait(list(waiting), num_returns=1, timeout=wait_s)
        finished = 0
        for ref in ready:
            slot = waiting[ref]
            if slot.loading is not None and ref == slot.loading:
                try:
                    ray.get(ref)
                    slot.loading = None
                except ray.exceptions.RayActorError:  # died while starting: start another
                    self._replace(slot)
                continue
            index, slot.item, slot.ref = slot.item, None, None
            try:
                results[index] = VerifyResult(*ray.get(ref))
            except ray.exceptions.RayActorError:  # the actor's process died with this item
                results[index] = VerifyResult(False, 0.0, None, "worker_died")
                self._replace(slot)
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                results[index] = VerifyResult(False, 0.0, None, f"error:{type(cause or exc).__name__}")
            finished += 1
        now = time.monotonic()
        for slot in self._slots:
            if slot.item is not None and now > slot.sent_at + self.timeout_s:
                results[slot.item] = VerifyResult(False, 0.0, None, "timeout")
                finished += 1
                self._replace(slot)
        if all(slot.loading is not None and now > slot.loading_since + self.startup_timeout_s
               for slot in self._slots):  # none usable; an actor that cannot be placed while others work is fine
            raise RuntimeError(f"a Ray verifier actor did not start within {self.startup_timeout_s:.0f} s: "
                               "check the cluster has free CPUs (ray status) and dapo_env installed on every node")
        return finished


def _ray_backend(verifier: Callable[[str, Any], VerifyResult], responses: Sequence[str],
                 references: Sequence[Any], *, workers: int | None, timeout: float, pool: Any) -> list[VerifyResult]:
    """The ``"ray"`` entry of ``verify_batch``'s backend registry (``pool``: an open :class:`RayVerifierPool`)."""
    if pool is not None:
        if not isinstance(pool, RayVerifierPool):
            raise ValueError(f'backend="ray" reuses a RayVerifierPool, got {type(pool).__name__}; pass '
                             'backend="process" for a VerifierPool')
        return pool.map(verifier, responses, references)
    with RayVerifierPool(workers or None, timeout_s=timeout) as one_shot:
        return one_shot.map(verifier, responses, references)


register_backend("ray", _ray_backend, overwrite=True)

__all__ = ["RayVerifierPool"]
