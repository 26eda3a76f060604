"""A work-conserving CPU thread budget shared by the learner and its rollout worker.

With a rollout worker (``max_staleness > 0`` or ``rollout_worker=True``) two processes compute at once:
the learner's update and the worker's generation. ``TrainConfig.num_threads`` is then the budget ``T``
of both together. A static split (``T // 2`` each) leaves a core idle whenever one side waits for the
other, and the side that waits is usually the short one: when the update dominates, the worker fills
its staleness window and blocks while the learner runs on half the threads. If compute scales with
threads that is never faster than running the two halves one after the other on all ``T``
(``max(R, U) >= (R + U) / 2`` at half speed each).

:class:`ThreadBudget` hands the idle side's threads to the busy one. Each side publishes whether it is
working in a flag in shared memory (the learner is working except while it waits for a round; the
worker while it runs one); before every forward pass (each micro-batch of the update, each old-log-prob
pass, each decode step of a generation round) a side sets its torch thread count to
:func:`side_threads`: all ``T`` when the other side is idle, its share of ``T`` when both work. A side
that becomes busy while the other holds all ``T`` runs over the budget only until the other's next
forward pass. ``num_threads_split="static"`` keeps the fixed shares (the behaviour before this module).

Thread counts change the rounding of some reductions (gradient sums), so a work-conserving run at
``T >= 2``, whose thread counts follow timing, reproduces an earlier run up to floating-point rounding;
``T = 1`` (both sides always one thread) and ``"static"`` reproduce it exactly.

Example:
    >>> side_threads(LEARNER, total=2, split="work-conserving", other_busy=False)
    2
    >>> side_threads(LEARNER, total=2, split="work-conserving", other_busy=True)
    1
    >>> thread_shares(5)
    (3, 2)
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

#: The two sides of an asynchronous run (indices into the shared flags).
LEARNER, WORKER = 0, 1
#: ``TrainConfig.num_threads_split``: how the budget is split between the learner and a rollout worker.
THREAD_SPLITS = ("work-conserving", "static")


def thread_shares(total: int) -> tuple[int, int]:
    """The (learner, worker) torch threads while both sides work: the learner, whose update usually
    dominates, takes the larger half; each side keeps at least one thread (so ``total=1`` runs 1 + 1).

    Example:
        >>> thread_shares(1), thread_shares(2), thread_shares(3), thread_shares(8)
        ((1, 1), (1, 1), (2, 1), (4, 4))
    """
    worker = max(1, total // 2)
    return max(1, total - total // 2), worker


def side_threads(side: int, *, total: int, split: str, other_busy: bool) -> int:
    """Torch threads for ``side`` (:data:`LEARNER` or :data:`WORKER`) before its next unit of work:
    the whole budget when the split is work-conserving and the other side is idle, else its share.

    Example:
        >>> [side_threads(WORKER, total=4, split=s, other_busy=b) for s in THREAD_SPLITS for b in (False, True)]
        [4, 2, 2, 2]
    """
    if split not in THREAD_SPLITS:
        raise ValueError(f"split must be one of {THREAD_SPLITS}, got {split!r}")
    if split == "work-conserving" and not other_busy:
        return total
    return thread_shares(total)[side]


def mean_threads(counts: Mapping[int, int]) -> float | None:
    """The mean thread count over units of work, from ``{threads: units}`` (``None``: no unit).

    Example:
        >>> mean_threads({1: 3, 2: 1}), mean_threads({})
        (1.25, None)
    """
    passes = sum(counts.values())
    return sum(t * n for t, n in counts.items()) / passes if passes else None


class ThreadBudget:
    """``total`` torch threads shared by the learner and one rollout worker (see the module).

    Built by the learner (which counts as working from the start) and handed to the worker inside its
    job: the flags live in shared memory, which a spawned process receives when the job is pickled to
    start it. Each process keeps its own count of the thread counts its units of work ran with
    (:meth:`take_counts`).

    Args:
        total: the budget ``T`` of both sides together (>= 1).
        split: ``"work-conserving"`` (the idle side's threads go to the busy one) or ``"static"``
            (:func:`thread_shares`, always).

    Example:
        >>> budget = ThreadBudget(2)
        >>> with budget.waiting(LEARNER):  # the learner blocks on a round: the worker may take both threads
        ...     budget.threads(WORKER)
        2
        >>> with budget.working(WORKER):  # the worker generates: the learner keeps its share
        ...     budget.threads(LEARNER)
        1
    """

    def __init__(self, total: int, split: str = "work-conserving") -> None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise ValueError(f"total must be an int >= 1 (torch threads of learner and worker together), got {total!r}")
        if split not in THREAD_SPLITS:
            raise ValueError(f"split must be one of {THREAD_SPLITS}, got {split!r}")
        self.total, self.split = total, split
        self._busy = multiprocessing.get_context("spawn").RawArray("b", 2)  # (learner, worker) working flags
        self._busy[LEARNER] = 1
        self._counts: dict[int, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"total": self.total, "split": self.split, "_busy": self._busy}  # the counts stay per process

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _counts={})

    def busy(self, side: int) -> bool:
        """Whether ``side`` says it is working now."""
        return bool(self._busy[side])

    def threads(self, side: int) -> int:
        """The thread count ``side`` should run its next unit of work with (:func:`side_threads`)."""
        return side_threads(side, total=self.total, split=self.split, other_busy=self.busy(1 - side))

    def apply(self, side: int) -> int:
        """Set this process's torch threads for ``side``'s next unit of work (only when the count changes)
        and count the unit; returns the count."""
        n = self.threads(side)
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
        self._counts[n] = self._counts.get(n, 0) + 1
        return n

    def take_counts(self) -> dict[int, int]:
        """``{threads: units of work}`` applied in this process since the last call (and reset them)."""
        counts, self._counts = self._counts, {}
        return counts

    @contextmanager
    def working(self, side: int) -> Iterator[None]:
        """``side`` works inside the block (its flag is restored after)."""
        with self._flag(side, 1):
            yield

    @contextmanager
    def waiting(self, side: int) -> Iterator[None]:
        """``side`` waits for the other inside the block and lends it its threads."""
        with self._flag(side, 0):
            yield

    @contextmanager
    def _flag(self, side: int, value: int) -> Iterator[None]:
        before, self._busy[side] = self._busy[side], value
        try:
            yield
        finally:
            self._busy[side] = before

    def attach(self, model: torch.nn.Module, side: int) -> list[Any]:
        """Apply the budget for ``side`` at every unit of ``model``'s work: before each forward pass (a
        pre-hook on its input embeddings, where every pass starts, whether through the model, its decoder
        or a decode step), before each layer's forward (every element of its ``ModuleList`` s: a causal LM's
        decoder layers) and, when the pass records gradients, before each layer's backward (a hook on the
        gradient of the layer above's input). A side that starts working while the other holds all ``T``
        threads then runs over the budget for one layer at most. Returns the hooks' handles.
        """
        def before_forward(hooked: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self.apply(side)
            hidden = args[0] if args else kwargs.get("hidden_states")
            if torch.is_grad_enabled() and isinstance(hidden, torch.Tensor) and hidden.requires_grad:
                hidden.register_hook(before_backward)  # runs once the gradient reaches this layer's input

        def before_backward(grad: torch.Tensor) -> None:
            self.apply(side)

        units = [model.get_input_embeddings()]
        units += [layer for module in model.modules() if isinstance(module, torch.nn.ModuleList) for layer in module]
        return [unit.register_forward_pre_hook(before_forward, with_kwargs=True) for unit in units]

    def __repr__(self) -> str:
        return f"ThreadBudget(total={self.total}, split={self.split!r})"


__all__ = ["LEARNER", "THREAD_SPLITS", "WORKER", "ThreadBudget", "mean_threads", "side_threads", "thread_shares"]
