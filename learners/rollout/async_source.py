"""Asynchronous rollouts with bounded staleness: the learner keeps the prompt schedule, a rollout worker
generates and verifies the rounds ahead while the learner updates.

:class:`AsyncGroupSource` is a :class:`~dapo_env.sampler.RolloutSource`, so the unchanged
:class:`~dapo_env.sampler.DynamicSampler` fills batches from it. The prompts of generation round ``n`` are
the ``n``-th draw of the learner's own group env (the same stream a synchronous run steps through); round
``n`` is sampled with the seed :meth:`AsyncGroupSource._round_seed` gives it (the in-process loop's seed at ``max_staleness=0``) and the weights of the policy
training step current when it was *issued*. The worker executes rounds strictly in order after the weights sent
before them (:mod:`~dapo_env.learners.rollout.worker`), so which step's weights generate which round is a function of the
learner's progress, never of timing: an asynchronous run is reproducible, and every sample is stamped with
the engine's weights version (``Completion.weights_version``) and every group with its ``policy_step``.

Staleness (in training steps, ``policy_step``): a round issued after step ``v`` and drawn by the
sampler after step ``k`` is ``k - v`` steps old. The source issues ``max_staleness x`` (the rounds the
last step consumed, at least 1) rounds ahead of the one being drawn, so in steady state every round is
drawn at most ``max_staleness`` steps after it was issued; a round that would be older (the sampler
needed fewer rounds than expected) is regenerated with the current weights and the learner waits for it:
the bound is never exceeded. ``max_staleness=0`` issues each round when it is drawn, with the current
weights: the synchronous loop, through a worker. Groups that dynamic sampling carries over to a later
batch age by the steps they wait, exactly as in the synchronous loop; :func:`staleness_metrics` reports
every consumed sample's true age.

Lossless resume: :meth:`AsyncGroupSource.state_dict` first waits for the rounds in flight, then saves the
env at the issue frontier and every issued, unconsumed round with its generated groups; a resumed run
consumes exactly the groups the uninterrupted run would have, and issues the same later rounds with the
same steps' weights. A dead or hung worker is replaced (one warning per cause) and its unfinished rounds are
regenerated with the current weights; no round is skipped or drawn twice.

Example:
    >>> source = AsyncGroupSource(env, RolloutWorker(job), max_staleness=1, seed=0)  # doctest: +SKIP
    >>> source.publish(0, model.state_dict())  # doctest: +SKIP
    >>> batch = DynamicSampler(source, num_groups=32).sample()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from dapo_env.schedule import PromptSchedule
from dapo_env.types import RolloutBatch

from ..metrics import staleness_metrics  # noqa: F401  (re-exported: its historical home)
from .setup import stamp_step
from .worker import RolloutWorker, WorkerLost
from .threads import LEARNER, WORKER, ThreadBudget, mean_threads

#: A replacement worker that is lost again this many times in a row, without finishing a round, ends the run.
MAX_CONSECUTIVE_LOSSES = 3


@dataclass(frozen=True)
class RoundRequest:
    """One generation round for the worker: show these prompts, sample with this seed and these weights.

    Attributes:
        round: the round's index in the prompt stream (0, 1, 2, ...).
        options: ``reset(options=...)`` that shows the round's prompts (``{"indices": [...]}``).
        problem_ids: the round's problem ids (the worker checks it shows the same problems).
        seed: the sampling seed.
        policy_step: the training step whose weights generate it.
        weights_version: stamped on every sample as ``Completion.weights_version`` (the learner's engine
            ``weights_version`` of those weights; ``None``: ``policy_step``).
    """

    round: int
    options: Mapping[str, Any]
    problem_ids: tuple[str, ...]
    seed: int
    policy_step: int
    weights_version: int | None = None


@dataclass(frozen=True)
class RoundResult:
    """The verified groups of one round, the training step whose weights generated them, and the worker's
    timings; ``units_by_threads``: ``(torch threads, units)`` pairs, the thread counts the worker's units of
    work (each layer of each prefill and decode step) ran with under a :class:`ThreadBudget`."""

    round: int
    policy_step: int
    groups: tuple[Any, ...]
    generate_s: float = 0.0
    verify_s: float = 0.0
    units_by_threads: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from dapo_env.sampler import group_to_dict

        return {"round": self.round, "policy_step": self.policy_step, "groups": [group_to_dict(g) for g in self.groups],
                "generate_s": self.generate_s, "verify_s": self.verify_s,
                "units_by_threads": [list(pair) for pair in self.units_by_threads]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundResult:
        from dapo_env.sampler import group_from_dict

        step = data.get("policy_step", data.get("version"))  # "version": the older key
        return cls(int(data["round"]), int(step), tuple(group_from_dict(g) for g in data["groups"]),
                   float(data["generate_s"]), float(data["verify_s"]),
                   tuple((int(t), int(n)) for t, n in data.get("units_by_threads", ())))


@dataclass
class _WeightBuffer:
    """Published weights in shared memory; ``fence``: the last ticket submitted before they were sent."""

    tensors: dict[str, torch.Tensor]
    fence: int = 0


class AsyncGroupSource:
    """A :class:`~dapo_env.sampler.RolloutSource` whose rounds a :class:`RolloutWorker` generates ahead.

    Args:
        schedule: the learner's :class:`~dapo_env.schedule.PromptSchedule` (the synchronous loop's prompt
            stream, B problems per round); the worker's own group env shows each round's problems.
        worker: the rollout worker (started here if it is not running); its job must run
            :class:`RoundRequest` s and return :class:`RoundResult` s (:class:`GroupRolloutJob`).
        max_staleness: the most training steps between issuing a round and drawing it (0: synchronous).
        seed: the run's seed: the prompt stream's first reset and every round's sampling seed
            (``_round_seed``).
        engine: the learner's engine; its ``weights_version`` at :meth:`publish` is stamped on the samples
            generated with those weights (``None``: the training step).
        threads: the :class:`~dapo_env.learners.rollout.threads.ThreadBudget` shared with the worker (``None``:
            none); the learner lends its threads to the worker while it waits for a round.

    Call :meth:`publish` with the learner's weights before the first draw and after every step. Each
    round's stats: ``async/rounds_expired`` (regenerated to respect the bound), ``async/rounds_ahead``
    (issued, not drawn, now), ``async/worker_restarts`` (over the run), ``time/rollout_wait_s`` (the
    learner blocked on rounds), ``time/worker_generate_s`` (worker time of the rounds drawn) and, with a
    budget, ``perf/worker_threads_mean`` (the mean torch threads of the drawn rounds' units of work),
    counted since the batch's first round.
    """

    def __init__(self, schedule: PromptSchedule, worker: RolloutWorker, *, max_staleness: int, seed: int,
                 engine: Any = None, threads: ThreadBudget | None = None) -> None:
        if not isinstance(max_staleness, int) or max_staleness < 0:
            raise ValueError(f"max_staleness must be an int >= 0 (0 = synchronous), got {max_staleness!r}")
        self.schedule, self.worker, self.max_staleness, self.seed = schedule, worker, max_staleness, seed
        self.engine, self.threads = engine, threads
        self.num_prompts, self.group_size = schedule.num_prompts, schedule.group_size
        self._policy_step: int | None = None
        self._weights_version: int | None = None
        self._weights: Mapping[str, torch.Tensor] | None = None  # the current step's, in shared memory
        self._buffers: list[_WeightBuffer] = []  # shared-memory weight copies, reused once the worker loaded them
        self._started = False
        self._next_issue = 0  # the env shows this round's prompts
        self._consumed = 0  # rounds drawn by the sampler so far
        self._requests: dict[int, RoundRequest] = {}  # issued, not drawn
        self._tickets: dict[int, int] = {}  # round -> its ticket with the current worker
        self._results: dict[int, RoundResult] = {}  # generated, not drawn
        self._ticket = 0
        self._rounds_last_step, self._rounds_this_step = 1, 0
        self._losses_in_a_row = 0
        self._warned: set[str] = set()
        self._stats = self._fresh_stats()
        self._worker_units: dict[int, int] = {}  # threads -> the worker's units of work, this batch
        self._restarts = 0
        if getattr(engine, "shared_server", False):  # the worker's engine copy pushes into the learner engine's
            engine.follow(self._wait_weights)  # own server: one owner of the pushes (the worker), the learner checks

    # -- RolloutSource ------------------------------------------------------------------------------
    def _round_seed(self, n: int, position: tuple[int, int]) -> int:
        """The sampling seed of round ``n``, drawn at sampler ``position``: the synchronous loop's (a function
        of the position) when rounds are issued as they are drawn (``max_staleness=0``), else of ``n`` alone."""
        from ..algo.update import derive_seed

        return derive_seed(self.seed, *position) if self.max_staleness == 0 else derive_seed(self.seed, 2**31 + 1, n)

    def rollout(self, position: tuple[int, int]) -> RolloutBatch:
        """The next round's verified groups and the source's counters (see the class).

        Issues rounds ahead up to the staleness window, waits for this round, and regenerates it if it
        would exceed ``max_staleness``.
        """
        if self._policy_step is None:
            raise RuntimeError("AsyncGroupSource.publish(step, weights) must run before the first rollout")
        if not self._started:  # seed the prompt stream
            self._next_issue, self._started = self._consumed, True
            self.schedule.reset(seed=self.seed)
        if position[1] == 0:  # a new batch: its counters start at 0
            self._stats, self._worker_units = self._fresh_stats(), {}
        n = self._consumed
        self._issue_through(n + self._window(), position)
        result = self._await(n)
        if self._policy_step - result.policy_step > self.max_staleness:
            self._renew_expired()
            result = self._await(n)
        self._drop(n)
        self._consumed += 1
        self._rounds_this_step += 1
        self._stats["generate_s"] += result.generate_s
        for threads, passes in result.units_by_threads:
            self._worker_units[threads] = self._worker_units.get(threads, 0) + passes
        stats = {"async/rounds_expired": self._stats["rounds_expired"], "async/rounds_ahead": float(len(self._requests)),
                 "async/worker_restarts": float(self._restarts), "time/rollout_wait_s": self._stats["wait_s"],
                 "time/worker_generate_s": self._stats["generate_s"]}
        if self.threads is not None and self._worker_units:
            stats["perf/worker_threads_mean"] = float(mean_threads(self._worker_units))
        return RolloutBatch(tuple(stamp_step(g, result.policy_step) for g in result.groups), stats)

    # -- the learner's side -------------------------------------------------------------------------
    def publish(self, step: int, weights: Mapping[str, torch.Tensor]) -> None:
        """The learner's weights after training step ``step``; rounds issued from now on use them and stamp
        their samples with the engine's ``weights_version`` (without an engine: ``step``). Publishing the
        current step again (after a resume) re-sends its weights without a new step."""
        step = int(step)
        self._weights_version = step if self.engine is None else int(self.engine.weights_version)
        if self._policy_step is not None and step < self._policy_step:
            raise ValueError(f"training steps must not decrease: published {self._policy_step}, got {step}")
        if self._policy_step is not None and step > self._policy_step:
            self._rounds_last_step, self._rounds_this_step = self._rounds_this_step, 0
        self._policy_step = step
        self._weights = self._shared_copy(weights)
        if self.worker.pid is not None:
            self._send_weights()
        for n in sorted(self._requests):  # restored rounds without a result (none after a drained save)
            if n not in self._results and n not in self._tickets:
                self._submit(self._reissued(n, step))

    def _shared_copy(self, weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``weights`` copied into a shared-memory buffer that the worker maps without a copy of its own.

        A buffer is reused once the worker has started a ticket submitted after the buffer was last sent
        (commands run in order, so it has copied those weights into its engine) and it is not the current
        step's (kept for a replacement worker); otherwise a new one is allocated. Reusing buffers saves two
        fresh allocations of the whole model per step (a copy and its move to shared memory).
        """
        shapes = {name: (t.shape, t.dtype) for name, t in weights.items()}
        started = self.worker.started_through
        free = [b for b in self._buffers if b.tensors is not self._weights and started is not None
                and started > b.fence and {n: (t.shape, t.dtype) for n, t in b.tensors.items()} == shapes]
        if free:
            buffer = free[0]
        else:
            buffer = _WeightBuffer({name: torch.empty_like(t, device="cpu").share_memory_()
                                    for name, t in weights.items()})
            self._buffers.append(buffer)
        with torch.no_grad():
            for name, t in weights.items():
                buffer.tensors[name].copy_(t.detach())
        return buffer.tensors

    def _send_weights(self) -> None:
        """Send the current step's weights (their shared buffer, no copy); a ticket started after this one
        proves the worker has copied them (the buffer's fence)."""
        self.worker.send_weights(self._policy_step, self._weights, copy=False)
        for buffer in self._buffers:
            if buffer.tensors is self._weights:
                buffer.fence = self._ticket

    def _wait_weights(self) -> None:
        """Block until the worker holds the weights of the last :meth:`publish` (it loads them after the rounds
        issued before them), starting it if no round has yet. A learner's server engine that shares the worker's
        server (:meth:`~dapo_env.learners.engines.server.ServerEngine.follow`) waits here before it samples (evaluation):
        the worker is the one client that pushes weights into that server, in order with its rounds."""
        if self._policy_step is None:
            raise RuntimeError("AsyncGroupSource.publish(step, weights) must run before the worker can hold weights")
        if self.worker.pid is None:
            self.worker.start()
            self._send_weights()
        with self._waiting():
            while True:
                try:
                    self.worker.wait_loaded()
                    return
                except WorkerLost as lost:
                    self._replace(lost)

    def _drain(self) -> None:
        """Wait until every issued round has its result (a checkpoint then holds all of them)."""
        for n in sorted(self._requests):
            if n not in self._results:
                self._await(n)

    def close(self) -> None:
        """Stop the worker."""
        self.worker.close()

    # -- state ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Waits for the rounds in flight, then returns the prompt stream's state and every issued, undrawn
        round with its groups (JSON-serialisable)."""
        self._drain()
        return {
            "started": self._started,
            "schedule": self.schedule.state_dict(),  # shows round next_issue
            "next_issue": self._next_issue,
            "consumed": self._consumed,
            "policy_step": self._policy_step,
            "rounds_last_step": self._rounds_last_step,
            "rounds_this_step": self._rounds_this_step,
            "rounds": [{"request": {**dataclasses.asdict(self._requests[n]), "options": dict(self._requests[n].options)},
                        "result": self._results[n].to_dict()} for n in sorted(self._requests)],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: the next draws return the saved rounds, then the same later rounds."""
        for n in list(self._requests):
            self._drop(n)
        self.schedule.load_state_dict(state.get("schedule", state.get("env")))  # "env": the older key (same format)
        self._started = bool(state["started"])
        self._next_issue, self._consumed = int(state["next_issue"]), int(state["consumed"])
        step = state.get("policy_step", state.get("version"))  # "version": the older key
        self._policy_step = None if step is None else int(step)
        self._rounds_last_step = int(state.get("rounds_last_step", state.get("rounds_last_version")))
        self._rounds_this_step = int(state.get("rounds_this_step", state.get("rounds_this_version")))
        for item in state["rounds"]:
            req = item["request"]
            stamp = req.get("weights_version", req.get("policy_version"))
            request = RoundRequest(int(req["round"]), dict(req["options"]), tuple(req["problem_ids"]), int(req["seed"]),
                                   int(req.get("policy_step", req.get("version"))), None if stamp is None else int(stamp))
            self._requests[request.round] = request
            if item.get("result") is not None:
                self._results[request.round] = RoundResult.from_dict(item["result"])

    # -- internals ------------------------------------------------------------------------------------
    @staticmethod
    def _fresh_stats() -> dict[str, float]:
        return {"wait_s": 0.0, "generate_s": 0.0, "rounds_expired": 0.0}

    def _reissued(self, n: int, step: int) -> RoundRequest:
        """Round ``n``'s request for the weights of ``step`` (the current ones)."""
        return dataclasses.replace(self._requests[n], policy_step=step, weights_version=self._weights_version)

    def _window(self) -> int:
        """Rounds to keep issued beyond the one being drawn: ``max_staleness`` steps' worth."""
        return self.max_staleness * max(1, self._rounds_last_step)

    def _issue_through(self, last: int, position: tuple[int, int]) -> None:
        while self._next_issue <= last:
            n = self._next_issue
            indices = [int(i) for i in self.schedule.indices]
            request = RoundRequest(round=n, options={"indices": indices},
                                   problem_ids=tuple(str(i) for i in self.schedule.problem_ids()),
                                   seed=self._round_seed(n, position), policy_step=int(self._policy_step),
                                   weights_version=self._weights_version)
            self._requests[n] = request
            self._submit(request)
            self.schedule.advance()  # the next draw of the stream: round n + 1
            self._next_issue += 1

    def _submit(self, request: RoundRequest) -> None:
        if self.worker.pid is None:  # the first round: start the worker with the current weights
            self.worker.start()
            self._send_weights()
        self._ticket += 1
        self._tickets[request.round] = self._ticket
        self._requests[request.round] = request
        self.worker.submit(self._ticket, request)

    def _drop(self, n: int) -> None:
        ticket = self._tickets.pop(n, None)
        if ticket is not None:
            self.worker.forget(ticket)
        self._requests.pop(n, None)
        self._results.pop(n, None)

    def _await(self, n: int) -> RoundResult:
        if n in self._results:
            return self._results[n]
        start = time.perf_counter()
        try:
            with self._waiting():
                self._await_result(n)
        finally:
            self._stats["wait_s"] += time.perf_counter() - start
        return self._results[n]

    def _waiting(self) -> Any:
        """The learner blocks on the worker: its threads are the worker's meanwhile."""
        return self.threads.waiting(LEARNER) if self.threads is not None else contextlib.nullcontext()

    def _await_result(self, n: int) -> None:
        while n not in self._results:
            try:
                done = self.worker.wait(self._tickets[n])
            except WorkerLost as lost:
                self._replace(lost)
                continue
            self._losses_in_a_row = 0
            del self._tickets[n]
            self._results[n] = done.result

    def _renew_expired(self) -> None:
        """Regenerate, with the current weights, every issued round that would now exceed the bound."""
        for n in sorted(self._requests):
            request = self._requests[n]
            if self._policy_step - request.policy_step > self.max_staleness:
                ticket = self._tickets.pop(n, None)
                if ticket is not None:
                    self.worker.forget(ticket)
                self._results.pop(n, None)
                self._stats["rounds_expired"] += 1
                self._submit(self._reissued(n, self._policy_step))

    def _replace(self, lost: WorkerLost) -> None:
        """Start a new worker, send it the current weights and every round still to generate."""
        self._losses_in_a_row += 1
        self._restarts += 1
        if self._losses_in_a_row > MAX_CONSECUTIVE_LOSSES:
            raise RuntimeError(f"the rollout worker was lost {self._losses_in_a_row} times in a row without finishing "
                               f"a round (last: {lost}); check its memory use and rollout_timeout_s") from lost
        by_ticket = {t: n for n, t in self._tickets.items()}
        for ticket, done in self.worker.finished().items():  # results that arrived before the loss are kept
            if ticket in by_ticket:
                self._results[by_ticket[ticket]] = done.result
        pending = [n for n in sorted(self._requests) if n not in self._results]
        cause = "hung" if "hung" in str(lost) else "died"
        if cause not in self._warned:
            self._warned.add(cause)
            warnings.warn(f"{lost}; replaced it with a new worker, which regenerates the {len(pending)} round(s) "
                          "in flight with the current weights (later replacements are counted in "
                          "async/worker_restarts)", RuntimeWarning, stacklevel=4)
        self.worker.restart()
        self._tickets.clear()
        self._send_weights()
        for n in pending:
            self._submit(self._reissued(n, self._policy_step))


# --- the worker's side: generate and verify one round ------------------------------------------------
def engine_copy(kind: str, model_config: Any, tokenizer: Any, *, dtype: torch.dtype = torch.float32,
                device: str = "cpu", seed: int = 0, autocast_dtype: torch.dtype | None = None,
                threads: ThreadBudget | None = None, **engine_kwargs: Any) -> Any:
    """A fresh engine of ``kind`` over a model built from ``model_config`` (its weights arrive with the
    first ``Weights`` command): what a rollout worker runs. With ``threads``, every forward pass of the
    model (each prefill and decode step) first takes the worker's threads from the budget. Picklable
    through ``functools.partial``."""
    from transformers import AutoModelForCausalLM

    from ..engines import make_engine

    model = AutoModelForCausalLM.from_config(model_config, dtype=dtype).to(device)
    if threads is not None:
        threads.attach(model, WORKER)
    return make_engine(kind, model, tokenizer, device=device, seed=seed, autocast_dtype=autocast_dtype, **engine_kwargs)


class _GroupExecutor:
    """Inside the worker: the engine copy and the group env that verifies and shapes its samples."""

    def __init__(self, engine: Any, env: Any, sampling: Any, threads: ThreadBudget | None = None) -> None:
        self.engine, self.env, self.sampling, self.threads = engine, env, sampling, threads
        self.policy_step: int | None = None

    def load_weights(self, policy_step: int, tensors: Mapping[str, torch.Tensor]) -> None:
        self.engine.load_weights(tensors)
        self.policy_step = policy_step

    def run(self, request: RoundRequest) -> RoundResult:
        if self.threads is None:
            return self._run(request)
        self.threads.take_counts()  # units outside rounds (none today) are not the round's
        with self.threads.working(WORKER):
            result = self._run(request)
        return dataclasses.replace(result, units_by_threads=tuple(sorted(self.threads.take_counts().items())))

    def _run(self, request: RoundRequest) -> RoundResult:
        from dapo_env.sampler import grouped

        if request.policy_step != self.policy_step:
            raise RuntimeError(f"round {request.round} was issued for the weights of step {request.policy_step} but the "
                               f"worker holds step {self.policy_step}'s: weights and rounds must share one ordered channel")
        _, info = self.env.reset(options=dict(request.options))
        shown = tuple(str(i) for i in info["problem_id"][:: self.env.group_size])
        if shown != request.problem_ids:
            raise RuntimeError("the rollout worker's env shows other problems than the learner's for round "
                               f"{request.round} ({shown[:3]} vs {request.problem_ids[:3]}): build both from the same "
                               "task, split and task_kwargs")
        sampling = dataclasses.replace(self.sampling, seed=request.seed)
        generate_s = 0.0

        def generate_n(prompts: list[str], n: int) -> list[list[Any]]:
            nonlocal generate_s
            start = time.perf_counter()
            rows = self.engine.generate(prompts, n=n, sampling=sampling)
            generate_s += time.perf_counter() - start
            stamp = request.policy_step if request.weights_version is None else request.weights_version
            return [[dataclasses.replace(c, weights_version=stamp) for c in row] for row in rows]

        start = time.perf_counter()
        groups = self.env.rollout(grouped(generate_n, self.env.group_size)).groups
        total = time.perf_counter() - start
        return RoundResult(request.round, request.policy_step, tuple(groups), generate_s, total - generate_s)


@dataclass(frozen=True)
class GroupRolloutJob:
    """The :class:`~dapo_env.learners.rollout.worker.RolloutJob` of asynchronous training: the worker builds
    its own engine copy and group env once, then answers each :class:`RoundRequest` with the round's
    verified, shaped groups (every sample stamped with the request's ``weights_version``).

    Args:
        make_engine: builds the worker's engine (e.g. ``functools.partial(engine_copy, ...)``).
        make_env: builds the worker's group env, configured like the learner's (same task, split, shaping).
        sampling: the sampling settings (each round sets its own seed).
        threads: the :class:`~dapo_env.learners.rollout.threads.ThreadBudget` shared with the learner: the worker
            counts as working while it runs a round (``make_engine`` should attach the same budget to its
            model, as :func:`engine_copy` does with ``threads=``); ``None``: one torch thread, always.
    """

    make_engine: Callable[[], Any]
    make_env: Callable[[], Any]
    sampling: Any
    threads: ThreadBudget | None = None

    def build(self) -> _GroupExecutor:
        torch.set_num_threads(1 if self.threads is None else self.threads.threads(WORKER))
        return _GroupExecutor(self.make_engine(), self.make_env(), self.sampling, self.threads)


def make_async_source(cfg: Any, task: Any, tokenizer: Any, model: Any, *, engine: Any, sampling: Any,
                      threads: ThreadBudget | None = None) -> AsyncGroupSource:
    """The trainer's :class:`AsyncGroupSource` for ``cfg`` (a :class:`~dapo_env.learners.config.TrainConfig`):
    the learner keeps the prompt schedule (a :class:`~dapo_env.schedule.PromptSchedule`); a :class:`RolloutWorker` (``cfg.rollout_timeout_s``)
    runs a :class:`GroupRolloutJob` whose engine copy (``cfg.engine`` over ``model.config``, weights from
    :meth:`AsyncGroupSource.publish`) and group env are configured exactly as the synchronous loop's.
    ``threads``: the learner's :class:`~dapo_env.learners.rollout.threads.ThreadBudget`, shared with the worker.
    Reached through :func:`~dapo_env.learners.rollout.sources.make_rollout_source`."""
    import functools

    from ..algo.batch import autocast_dtype
    from dapo_env.envs import load_problems
    from dapo_env.schedule import schedule_for

    from .setup import make_group_env

    job = GroupRolloutJob(
        make_engine=functools.partial(engine_copy, cfg.engine, model.config, tokenizer, device=cfg.device, seed=cfg.seed,
                                      autocast_dtype=autocast_dtype(cfg.precision), threads=threads,
                                      **cfg.engine_options),
        make_env=functools.partial(make_group_env, cfg, task, tokenizer), sampling=sampling, threads=threads)
    worker = RolloutWorker(job, timeout_s=cfg.rollout_timeout_s)
    schedule = schedule_for(task, load_problems(task, cfg.train_split, None, dict(cfg.task_kwargs)), cfg.batch_size,
                            cfg.group_size)  # TrainConfig refuses difficulty_sampling with a rollout worker
    return AsyncGroupSource(schedule, worker, max_staleness=cfg.max_staleness, seed=cfg.seed, engine=engine,
                            threads=threads)


__all__ = ["MAX_CONSECUTIVE_LOSSES", "AsyncGroupSource", "GroupRolloutJob", "RoundRequest", "RoundResult",
           "engine_copy", "make_async_source", "staleness_metrics"]
