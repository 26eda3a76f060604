"""Gymnasium vector infos for group envs: per-sample dicts stacked into ``key -> array`` (plus ``_key`` masks)
and per-group statistics broadcast to every sample (what :meth:`GroupVectorEnv.step
<dapo_env.vector.GroupVectorEnv.step>`, the thin Gymnasium adapter of its native groups, returns).

Example:
    >>> infos = to_vector_infos([{"score": 1.0, "reason": "ok"}, {"score": 0.0, "reason": "no_answer"}])
    >>> infos["score"].tolist(), infos["reason"].tolist(), infos["_score"].tolist()
    ([1.0, 0.0], ['ok', 'no_answer'], [True, True])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# Per-sample info keys whose values are Python objects (str / None) rather than numbers.
_OBJECT_KEYS = ("extracted", "reason", "problem_id", "task", "response_length")


def group_stats(correct: np.ndarray) -> dict[str, np.ndarray]:
    """Per-group statistics, broadcast to every sample of the group.

    Args:
        correct: bool array of shape (B, G), the verifier's verdicts.

    Returns:
        ``group_accuracy`` (float), ``group_num_correct`` (int) and ``group_informative`` (bool,
        ``0 < #correct < G``), each of shape (B*G,).
    """
    num_groups, group_size = correct.shape
    num_correct = correct.sum(axis=1)  # (B,)
    informative = (num_correct > 0) & (num_correct < group_size)  # (B,)
    return {
        "group_accuracy": np.repeat(num_correct / group_size, group_size),  # (B*G,)
        "group_num_correct": np.repeat(num_correct, group_size),
        "group_informative": np.repeat(informative, group_size),
    }


def to_vector_infos(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Stack per-sample info dicts into Gymnasium vector infos: ``key -> array`` plus ``_key`` masks.

    Nested dicts (``reward_terms``) become nested vector infos. Every sample has every key here.
    """
    n = len(infos)
    out: dict[str, Any] = {}
    for key in infos[0]:
        values = [info[key] for info in infos]
        if isinstance(values[0], Mapping):
            out[key] = to_vector_infos(values)
        else:
            if key in _OBJECT_KEYS:
                array = np.empty(n, dtype=object)
                array[:] = values
            else:
                array = np.asarray(values)
            out[key] = array
        out[f"_{key}"] = np.ones(n, dtype=bool)
    return out


__all__ = ["group_stats", "to_vector_infos"]
