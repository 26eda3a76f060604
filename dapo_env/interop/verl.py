"""Verifiers as verl's ``custom_reward_function`` (``path=pkg://dapo_env.interop``, ``name=compute_score``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)`` per
sample (naive, dapo and prime reward managers, the reward loop) or with plural keywords
(``data_sources=, solution_strs=, ground_truths=, extra_infos=``: the batch manager);
:func:`verl_compute_score` (alias :data:`compute_score`) takes both. verl may load this file (or the
package's ``__init__.py``) by path as a module copy under a made-up name: the copy then hands out the
installed module's objects (see the end of this file).

verl has no way for ``compute_score`` to skip a sample: its naive and dapo reward managers and its reward loop
write the returned score into the reward tensor (a ``None`` fails there), and its prime manager scores a failed
or timed-out row 0.0. So a reference that cannot be read raises :class:`~dapo_env.types.InvalidReference`
naming the data_source and the fix (drop or repair the row in the parquet), and a verification that errored is
scored 0.0 like verl's own failed rows, warned about once per cause and counted in :data:`UNSCORABLE`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dapo_env.interop.routing import code_reference, route, task_for_data_source, warn_once
from dapo_env.interop.unscorable import UnscorableLog, verification_error
from dapo_env.types import InvalidReference
from dapo_env.wrappers import check_reward_map_args, map_reward


class VerlScore(dict):
    """verl's result dict ``{"score", "acc", "pred"}`` (like verl's own DAPO scorer). ``result[0]`` is the
    score too: verl's prime reward manager reads ``float(result[0])`` from anything not a number."""

    def __missing__(self, key: Any) -> Any:
        if key == 0:
            return self["score"]
        raise KeyError(key)


UNSCORABLE = UnscorableLog("verl_compute_score", "scored 0.0, as verl cannot skip a sample (counted in "
                                                 "dapo_env.interop.verl.UNSCORABLE)")
"""Samples whose verification errored in this process (scored 0.0: verl cannot skip a sample), by cause."""

# Keywords verl itself may add to a compute_score call; accepted and ignored.
_VERL_EXTRA_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer", "sandbox_fusion_url",
                                "concurrent_semaphore", "memory_limit_mb"})


def verl_compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                       extra_info: Any = None, *, data_sources: Sequence[Any] | None = None,
                       solution_strs: Sequence[Any] | None = None, ground_truths: Sequence[Any] | None = None,
                       extra_infos: Sequence[Any] | None = None, task: str | None = None,
                       data_source_tasks: Mapping[str, str] | None = None,
                       reward_map: Sequence[float] | None = None, **kwargs: Any) -> VerlScore | list[VerlScore]:
    """verl's ``compute_score``: grade ``solution_str`` with the verifier ``data_source`` routes to.

    Per sample (naive, dapo, prime managers, the reward loop; positional or keyword) it returns a
    :class:`VerlScore` ``{"score": float, "acc": bool, "pred": str}``; with verl's batch-manager keywords
    (``data_sources=, solution_strs=, ground_truths=, extra_infos=``) a list of them.

    Routing (:func:`task_for_data_source`): ``task`` > ``data_source_tasks`` > verl's own names
    (:data:`VERL_DATA_SOURCES`) > a task id > ``extra_info["task"]``; anything else is graded by the
    auto math verifier after a one-time warning. ``task``, ``data_source_tasks`` and ``reward_map``
    (``(low, high)``, e.g. ``[-1, 1]`` for DAPO) come from verl's ``custom_reward_function.reward_kwargs``,
    so they reach every worker. A reference of a wrong form raises
    :class:`~dapo_env.types.InvalidReference` naming the data_source (verl has no way to skip a sample;
    ``trl_reward_function`` scores such a row ``None`` instead). A verification that errored (the verifier
    raised, its sandbox failed, it ran past its own limit) scores 0.0, as verl's prime manager scores its
    failed rows, and is counted in :data:`UNSCORABLE` (warned about once per cause).

    Example:
        >>> verl_compute_score("openai/gsm8k", "... so she has 12 left.\\n#### 12", "12", {"index": 0})
        {'score': 1.0, 'acc': True, 'pred': '12'}
        >>> verl_compute_score("my_source", "Answer: 7", "7", {}, task="Arithmetic-v0", reward_map=[-1, 1])["score"]
        1.0
    """
    unknown = sorted(set(kwargs) - _VERL_EXTRA_KWARGS)
    if unknown:
        warn_once(f"kwargs:{unknown}", f"verl_compute_score ignores the keyword(s) {unknown}; it takes task=, "
                   "data_source_tasks= and reward_map= (set them in custom_reward_function.reward_kwargs)")
    routing = {"task": task, "data_source_tasks": data_source_tasks}
    if reward_map is not None:
        reward_map = (float(reward_map[0]), float(reward_map[1]))
        check_reward_map_args(*reward_map)
    if solution_strs is not None:
        n = len(solution_strs)
        sources = list(data_sources) if data_sources is not None else [None] * n
        truths = list(ground_truths) if ground_truths is not None else [None] * n
        infos = list(extra_infos) if extra_infos is not None else [None] * n
        return [_score_one(s, str(r), g, e, routing, reward_map) for s, r, g, e in zip(sources, solution_strs, truths, infos)]
    if solution_str is None:
        raise TypeError("verl_compute_score needs solution_str (per sample) or solution_strs= (batch)")
    return _score_one(data_source, str(solution_str), ground_truth, extra_info, routing, reward_map)


def _score_one(data_source: Any, solution: str, ground_truth: Any, extra_info: Any, routing: dict[str, Any],
               reward_map: tuple[float, float] | None) -> VerlScore:
    from dapo_env.verifiers.pool import verify_one

    task_id, verifier = route(data_source, extra_info=extra_info, **routing)
    task = task_for_data_source(data_source, extra_info=extra_info, **routing)
    row = extra_info if isinstance(extra_info, Mapping) else {}
    try:
        reference = code_reference(verifier, ground_truth)
        reference = task.prepare_reference(reference, row) if task is not None else reference
        result = verify_one(verifier, solution, reference)  # a verifier that raises is an error:<Type> result
    except InvalidReference as exc:
        raise InvalidReference(
            f"data_source {data_source!r} ({task_id}): {exc} (verl cannot skip a sample: drop or repair this row "
            "in the parquet)") from None
    cause = verification_error(result)
    if cause is not None:
        UNSCORABLE.record(cause, f"data_source {data_source!r} ({task_id}): the verifier said {result.reason!r}")
    score = float(result.score)
    if reward_map is not None:
        score = map_reward(score, low=reward_map[0], high=reward_map[1])
    return VerlScore(score=score, acc=bool(result.correct), pred=result.extracted or "")


compute_score = verl_compute_score
"""verl's default function name, so ``custom_reward_function.name`` can stay ``compute_score``."""

__all__ = ["UNSCORABLE", "VerlScore", "compute_score", "verl_compute_score"]

if __name__ != "dapo_env.interop.verl":
    # Loaded from its file path as a module copy (verl's ``custom_reward_function.path`` runs
    # ``spec_from_file_location`` under a made-up name): hand out the installed module's objects instead,
    # so there is one routing table and everything pickles by reference (Ray, the prime manager's
    # process pool), which functions of an unimportable module copy cannot.
    import importlib as _importlib

    _canonical = _importlib.import_module("dapo_env.interop.verl")
    globals().update({_name: getattr(_canonical, _name) for _name in __all__})
