"""Verifiers as TRL reward functions (``GRPOTrainer(reward_funcs=[...])``).

TRL's ``GRPOTrainer`` calls ``reward_func(prompts=, completions=, completion_ids=, trainer_state=, log_extra=,
log_metric=, **other_columns)`` with one value per completion; ``AsyncGRPOTrainer``'s rollout worker calls it
with ``completions=, prompts=, completion_ids=`` and the row's columns only (``trl/experimental/async_grpo/
async_rollout_worker.py``, ``_score_group``). Both expect one float per completion, or ``None`` for a row that
cannot be scored (left out of the advantages): :func:`trl_reward_function` returns ``None`` for a row whose
reference cannot be read or whose verification errored (:mod:`dapo_env.interop.unscorable`). It returns a
picklable :class:`TaskReward` object (the async trainer sends reward functions to a spawned process). TRL itself
is never imported.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from dapo_env.interop.routing import code_reference, ground_truth, route, task_for_data_source
from dapo_env.interop.unscorable import INVALID_REFERENCE, TRL_UNSCORABLE_OUTCOME, UnscorableLog, verification_error
from dapo_env.tasks import Task
from dapo_env.tasks.mixture import is_mixture, resolve_task_text
from dapo_env.types import InvalidReference, VerifyResult
from dapo_env.wrappers import check_reward_map_args, map_reward


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or the last assistant message of a conversation
    (its ``content``; a list of content blocks contributes its text blocks)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                return content_text(message.get("content"))
        return ""
    raise TypeError(
        f"a TRL completion must be a str or a list of {{'role', 'content'}} messages, got {type(completion).__name__}"
    )


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content blocks: [{"type": "text", "text": ...}, {"type": "image"}, ...]
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return str(content)


class MissingReferenceColumn(KeyError, ValueError):
    """The dataset has no column with the references; the message names the argument to pass."""

    def __str__(self) -> str:
        return str(self.args[0])


class TaskReward:
    """A TRL reward function (a picklable callable object) that scores completions with a task's verifier.

    Build it with :func:`trl_reward_function`. Its worker pool, if any, starts on the first call that
    needs it, is never pickled, and stops on :meth:`close` or when the object is collected. Calls may
    come from several threads at once (TRL's async trainer runs sync reward functions in threads).
    :attr:`unscorable` counts the rows scored ``None``, by cause.
    """

    def __init__(self, task_or_id: str | Task | None = None, *, answer_column: str = "answer",
                 reward_map: tuple[float, float] | None = None, workers: int = 0,
                 timeout_s: float = 10.0, data_source_tasks: Mapping[str, str] | None = None,
                 strict_references: bool = False) -> None:
        if reward_map is not None:
            check_reward_map_args(*reward_map)
            reward_map = (float(reward_map[0]), float(reward_map[1]))
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
            raise ValueError(f"workers must be an int >= 0 (0: verify in the calling process), got {workers!r}")
        task = None if task_or_id is None else resolve_task_text(task_or_id)
        if is_mixture(task):  # a mixture's exported rows each carry their own task's data_source: route by it
            task = None
        self.task_id = task.env_id if task is not None else None
        self.verifier = task.verifier if task is not None else None  # kept instead of the Task: lean to pickle
        self.reader = task.reference_reader if task is not None else None  # the hub format's reader
        self.reference_columns = task.reference_columns if task is not None else ()
        self.answer_column = answer_column
        self.reward_map = reward_map
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.data_source_tasks = dict(data_source_tasks or {})
        self.strict_references = bool(strict_references)
        self.__name__ = f"{task.name}_reward" if task is not None else "dapo_env_reward"
        self.log = UnscorableLog(self.__name__, TRL_UNSCORABLE_OUTCOME)
        self._lock = threading.Lock()
        self._pool: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock")
        state["_pool"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        task = self.task_id or "route by data_source"
        return f"TaskReward({task}, answer_column={self.answer_column!r}, reward_map={self.reward_map})"

    @property
    def unscorable(self) -> dict[str, int]:
        """Rows scored ``None`` so far, by cause (``invalid_reference``, ``verifier_error:<reason>``)."""
        return dict(self.log.counts)

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Sequence[Any] | None = None, **columns: Any) -> list[float | None]:
        """Score ``completions`` against the references in the dataset columns: one float each, ``None`` for a
        row whose reference cannot be read (raised instead with ``strict_references=True``) or whose
        verification errored."""
        if completions is None:
            raise TypeError("the reward function needs completions=...: TRL passes prompts=, completions= and the "
                            "dataset columns as keywords")
        n = len(completions)
        references = self._references(columns, n)
        verifiers = self._verifiers(columns, n)
        prepared = self._read(references, verifiers, {"prompt": prompts, **columns})
        scorable = [i for i in range(n) if prepared[i] is not _UNREADABLE]
        texts = [completion_text(c) for c in completions]
        verified = self._verify([verifiers[i] for i in scorable], [texts[i] for i in scorable],
                                [prepared[i] for i in scorable])
        results: list[VerifyResult | None] = [None] * n
        for i, result in zip(scorable, verified):
            cause = verification_error(result)
            if cause is None:
                results[i] = result
            else:
                self.log.record(cause, f"row {i}: the verifier said {result.reason!r}")
        log_metric = columns.get("log_metric")
        if callable(log_metric) and n:
            scored = [r for r in results if r is not None]
            if scored:
                log_metric(f"rewards/{self.__name__}/accuracy", sum(r.correct for r in scored) / len(scored))
            log_metric(f"rewards/{self.__name__}/unscorable", (n - len(scored)) / n)
        if self.reward_map is None:
            return [None if r is None else float(r.score) for r in results]
        return [None if r is None else map_reward(r.score, low=self.reward_map[0], high=self.reward_map[1])
                for r in results]

    def close(self) -> None:
        """Stop the worker pool (a later call starts a new one)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _references(self, columns: Mapping[str, Any], n: int) -> list[Any]:
        if self.answer_column in columns:
            references = list(columns[self.answer_column])
        elif self.answer_column == "answer" and "reward_model" in columns:  # verl-style rows
            references = [ground_truth(row) for row in columns["reward_model"]]
        elif self.answer_column == "answer" and set(self.reference_columns) & set(columns):  # the hub's columns
            references = [None] * n
        else:
            passed = sorted(k for k in columns if k not in TRL_KEYWORDS)
            raise MissingReferenceColumn(
                f"no {self.answer_column!r} column among the dataset columns {passed}: pass "
                f"trl_reward_function(..., answer_column=<the column that holds the reference answers>)"
            )
        if len(references) != n:
            raise ValueError(f"{n} completions but {len(references)} values in {self.answer_column!r}")
        return references

    def _read(self, references: list[Any], verifiers: list[Any], columns: Mapping[str, Any]) -> list[Any]:
        """Each reference through its task's reader (the hub dataset's own format), with the row's other columns
        (and its prompt: HumanEval's prompt is the stub a completion may continue), then its verifier's
        ``prepare_reference``. An unreadable one is ``_UNREADABLE`` (logged and counted), or raises with
        ``strict_references=True``."""
        n = len(references)
        rows = [{k: v[i] for k, v in columns.items() if k not in TRL_KEYWORDS and isinstance(v, Sequence)
                 and not isinstance(v, str) and len(v) == n} for i in range(n)]
        if self.verifier is not None:
            readers = [self.reader] * n
        else:
            sources = list(columns["data_source"]) if columns.get("data_source") is not None else [None] * n
            infos = list(columns["extra_info"]) if columns.get("extra_info") is not None else [None] * n
            tasks = [task_for_data_source(s, extra_info=e, data_source_tasks=self.data_source_tasks)
                     for s, e in zip(sources, infos)]
            readers = [t.reference_reader if t is not None else None for t in tasks]
        prepared: list[Any] = []
        for i, (reader, verifier, reference, row) in enumerate(zip(readers, verifiers, references, rows)):
            try:
                reference = reader(code_reference(verifier, reference), row) if reader is not None else reference
                reference = code_reference(verifier, reference)
                prepare = getattr(verifier, "prepare_reference", None)
                prepared.append(prepare(reference) if prepare is not None else reference)
            except InvalidReference as exc:
                if self.strict_references:
                    raise InvalidReference(f"reference {i}: {exc}") from None
                self.log.record(INVALID_REFERENCE, f"reference {i}: {exc}")
                prepared.append(_UNREADABLE)
        return prepared

    def _verifiers(self, columns: Mapping[str, Any], n: int) -> list[Any]:
        if self.verifier is not None:
            return [self.verifier] * n
        sources = list(columns["data_source"]) if columns.get("data_source") is not None else [None] * n
        infos = list(columns["extra_info"]) if columns.get("extra_info") is not None else [None] * n
        return [route(s, extra_info=e, data_source_tasks=self.data_source_tasks)[1] for s, e in zip(sources, infos)]

    def _verify(self, verifiers: list[Any], texts: list[str], references: list[Any]) -> list[VerifyResult]:
        results: list[VerifyResult | None] = [None] * len(texts)
        groups: dict[int, list[int]] = {}
        for i, verifier in enumerate(verifiers):
            groups.setdefault(id(verifier), []).append(i)
        for indices in groups.values():
            verifier = verifiers[indices[0]]
            refs = [code_reference(verifier, references[i]) for i in indices]
            for i, result in zip(indices, self._map(verifier, [texts[i] for i in indices], refs)):
                results[i] = result
        return [r for r in results if r is not None]

    def _map(self, verifier: Any, texts: list[str], references: list[Any]) -> list[VerifyResult]:
        from dapo_env.verifiers.pool import VerifierPool

        if self.workers == 0:
            with VerifierPool(0) as inline:
                return inline.map(verifier, texts, references)
        with self._lock:  # one batch at a time through the pool (it is not thread-safe)
            if self._pool is None:
                self._pool = VerifierPool(self.workers, timeout_s=self.timeout_s)
                weakref.finalize(self, self._pool.close)
            return self._pool.map(verifier, texts, references)


TRL_KEYWORDS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})
_UNREADABLE = object()  # a row whose reference could not be read


def trl_reward_function(task_or_id: str | Task | None = None, *, answer_column: str = "answer",
                        reward_map: tuple[float, float] | None = None, workers: int = 0,
                        timeout_s: float = 10.0, data_source_tasks: Mapping[str, str] | None = None,
                        strict_references: bool = False) -> TaskReward:
    """A TRL reward function that scores completions with a task's verifier.

    Args:
        task_or_id: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task`; ``None`` routes each row
            by its ``data_source`` (and ``extra_info["task"]``) like :func:`verl_compute_score`, so one
            function scores a dataset that mixes tasks.
        answer_column: the dataset column with the references (TRL passes every column but ``prompt``
            as a keyword, one value per completion). Without it, verl-style rows' ``reward_model``
            ``ground_truth`` is used; with neither, the call raises naming this argument.
        reward_map: ``(low, high)`` maps the score linearly (e.g. ``(-1.0, 1.0)`` for DAPO's rewards).
        workers: verifier worker processes; 0 (the default) verifies in the calling process, which is
            fastest for math and safe for code (each test run is its own sandboxed process with a time
            limit). ``workers > 0`` verifies code in parallel; the training script then needs an
            ``if __name__ == "__main__":`` guard (the workers start with ``forkserver``).
        timeout_s: per-item limit in worker processes.
        data_source_tasks: extra ``data_source -> task id`` routes (with ``task_or_id=None``).
        strict_references: raise :class:`~dapo_env.types.InvalidReference` on a reference that cannot be
            read (naming its index), instead of scoring that row ``None``.

    Returns:
        A :class:`TaskReward` named ``"<task>_reward"`` (TRL logs rewards under ``__name__``). Works as a
        reward function of both ``GRPOTrainer`` and ``AsyncGRPOTrainer``. A row whose reference cannot be
        read, or whose verification errored (the verifier raised, its sandbox failed, it ran past its own time
        limit), scores ``None``: TRL leaves it out of the advantages; the first row of each cause is warned
        about (:class:`~dapo_env.interop.InteropWarning`) and all are counted in ``reward.unscorable``. It
        logs ``rewards/<name>/accuracy`` (over the scored rows) and ``rewards/<name>/unscorable`` (the
        fraction scored ``None``) through TRL's ``log_metric`` when TRL passes one (``GRPOTrainer`` does).

    Example:
        >>> reward = trl_reward_function("Arithmetic-v0")
        >>> reward(prompts=["Compute 2+2."] * 2, completions=["Answer: 4", [{"role": "assistant", "content": "5"}]],
        ...        completion_ids=[[1, 2], [3]], answer=["4", "4"], trainer_state=None)
        [1.0, 0.0]
    """
    return TaskReward(task_or_id, answer_column=answer_column, reward_map=reward_map, workers=workers,
                      timeout_s=timeout_s, data_source_tasks=data_source_tasks, strict_references=strict_references)
