"""Reward shaping of verified responses: one configuration (:class:`Shaping`) and one function (:func:`shape`).

DAPO shapes a verified response in up to three ways: the verifier's score in [0, 1] is mapped onto
``[low, high]`` (+1 / -1), a response longer than ``max_response_tokens - cache_length`` tokens pays the
soft overlong penalty (Eq. 13), and a truncated response can be dropped from the loss (overlong
filtering). :func:`shape` applies a :class:`Shaping` to one response's step info and is the only code that
does: the single-env wrappers (:mod:`dapo_env.wrappers`, one term each) and
:class:`~dapo_env.vector.GroupVectorEnv` (all terms at once) both call it, so the numbers, the recorded
``info["reward_terms"]``, ``info["overlong_penalty_applied"]`` and the error on a term applied twice are
the same everywhere. The reward is always ``sum(info["reward_terms"].values())``.

Example:
    >>> info = {"score": 1.0, "reward_terms": {"verifier": 1.0}, "response_length": 90,
    ...         "response_truncated": False, "loss_mask": True}
    >>> shaped, delta = shape(info, Shaping(reward_map=(-1.0, 1.0),
    ...                                     overlong_penalty={"max_response_tokens": 100, "cache_length": 20}))
    >>> shaped["reward_terms"], delta
    ({'verifier': 1.0, 'reward_map': 0.0, 'overlong_penalty': -0.5}, -0.5)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_RESPONSE_TOKENS = 20480
DEFAULT_CACHE_LENGTH = 4096


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True, kw_only=True)
class OverlongPenalty:
    """DAPO's soft overlong punishment (Yu et al. 2025, Eq. 13), scaled by ``factor``.

    With ``start = max_response_tokens - cache_length`` the penalty of a response of ``L`` tokens is
    0 for ``L <= start``, ``(start - L) / cache_length * factor`` up to ``max_response_tokens`` and
    ``-factor`` beyond.

    Example:
        >>> penalty = OverlongPenalty()  # the paper's L_max = 20480, L_cache = 4096
        >>> penalty(16384), penalty(18432), penalty(20481)
        (0.0, -0.5, -1.0)
    """

    max_response_tokens: int = DEFAULT_MAX_RESPONSE_TOKENS
    cache_length: int = DEFAULT_CACHE_LENGTH
    factor: float = 1.0

    def __post_init__(self) -> None:
        if not _positive_int(self.max_response_tokens):
            raise ValueError(f"max_response_tokens must be a positive int (tokens), got {self.max_response_tokens!r}")
        if not _positive_int(self.cache_length):
            raise ValueError(f"cache_length must be a positive int (tokens), got {self.cache_length!r}")
        if self.cache_length > self.max_response_tokens:
            raise ValueError(
                f"cache_length ({self.cache_length}) must be <= max_response_tokens ({self.max_response_tokens}): "
                "the penalty ramps over the last cache_length tokens; lower cache_length or raise max_response_tokens")
        if not (isinstance(self.factor, (int, float)) and self.factor >= 0):
            raise ValueError(f"factor must be a number >= 0 (the penalty's size at max_response_tokens), got {self.factor!r}")

    def __call__(self, length: int) -> float:
        start = self.max_response_tokens - self.cache_length
        if length <= start:
            return 0.0
        if length <= self.max_response_tokens:
            return (start - length) / self.cache_length * self.factor
        return -float(self.factor)


def soft_overlong_penalty(length: int, *, max_response_tokens: int = DEFAULT_MAX_RESPONSE_TOKENS,
                          cache_length: int = DEFAULT_CACHE_LENGTH, factor: float = 1.0) -> float:
    """:class:`OverlongPenalty` as a function of the length.

    Example:
        >>> soft_overlong_penalty(18, max_response_tokens=20, cache_length=4)
        -0.5
    """
    return OverlongPenalty(max_response_tokens=max_response_tokens, cache_length=cache_length, factor=factor)(length)


def check_reward_map_args(low: float, high: float) -> None:
    """Validate a reward map's endpoints (the rewards of a wrong and of a right answer)."""
    if not low < high:
        raise ValueError(f"a reward map needs low < high (the rewards for a wrong and a right answer), got {low=}, {high=}")


def map_reward(score: float, *, low: float = -1.0, high: float = 1.0) -> float:
    """Map a verifier score in [0, 1] linearly onto [low, high]: 0 -> low, 1 -> high.

    Example:
        >>> map_reward(1.0), map_reward(0.0), map_reward(0.5)
        (1.0, -1.0, 0.0)
    """
    check_reward_map_args(low, high)
    return low + (high - low) * float(score)


def _overlong(value: OverlongPenalty | Mapping[str, Any] | bool | None) -> OverlongPenalty | None:
    if value is None or value is False:
        return None
    if value is True:
        return OverlongPenalty()
    if isinstance(value, OverlongPenalty):
        return value
    if isinstance(value, Mapping):
        known = {"max_response_tokens", "cache_length", "factor"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"overlong_penalty takes {sorted(known)}; unknown keys {unknown}")
        return OverlongPenalty(**value)
    raise TypeError(f"overlong_penalty must be an OverlongPenalty, a dict of its fields, True or None, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Shaping:
    """Which shaping terms apply to a verified response (all off by default).

    Attributes:
        reward_map: ``(low, high)``: the verifier's score in [0, 1] maps linearly onto it (DAPO: ``(-1, 1)``);
            recorded as the term ``reward_map = mapped - score``.
        overlong_penalty: an :class:`OverlongPenalty` (or a dict of its fields, or ``True`` for the paper's
            20480/4096/1.0); recorded as the term ``overlong_penalty``.
        overlong_filter: exclude truncated responses from the loss (``loss_mask = False``); no reward term.

    Example:
        >>> Shaping(overlong_penalty=True).overlong_penalty.max_response_tokens
        20480
    """

    reward_map: tuple[float, float] | None = None
    overlong_penalty: OverlongPenalty | None = None
    overlong_filter: bool = False

    def __post_init__(self) -> None:
        if self.reward_map is not None:
            pair = tuple(self.reward_map)
            if len(pair) != 2:
                raise ValueError(f"reward_map must be a (low, high) pair, got {self.reward_map!r}")
            check_reward_map_args(pair[0], pair[1])
            object.__setattr__(self, "reward_map", (float(pair[0]), float(pair[1])))
        object.__setattr__(self, "overlong_penalty", _overlong(self.overlong_penalty))
        object.__setattr__(self, "overlong_filter", bool(self.overlong_filter))


_WARNED: set[str] = set()


def _warn_once(cause: str, message: str) -> None:
    """Warn the first time ``cause`` happens in this process (a training loop would repeat it every step)."""
    if cause not in _WARNED:
        _WARNED.add(cause)
        warnings.warn(message, UserWarning, stacklevel=4)


def _require(info: Mapping[str, Any], key: str) -> Any:
    if key not in info:
        raise KeyError(f"info has no {key!r}: shaping applies to a dapo_env ReasoningEnv's step info "
                       "(wrap a ReasoningEnv, or an env whose step info has it)")
    return info[key]


def shape(info: Mapping[str, Any], shaping: Shaping) -> tuple[dict[str, Any], float]:
    """Apply ``shaping`` to one verified response's step info.

    Args:
        info: the step info of :class:`~dapo_env.envs.ReasoningEnv` (``score``, ``reward_terms``,
            ``response_length``, ``response_truncated``, ``loss_mask``), possibly already shaped.
        shaping: the terms to add.

    Returns:
        ``(new_info, delta)``: a new info dict (``info`` itself is not modified) with the new terms in
        ``reward_terms`` (and ``overlong_penalty_applied``, ``loss_mask`` where they apply), and the sum
        of the new terms, to add to the reward.

    Raises:
        ValueError: a term is already in ``reward_terms`` (the same shaping applied twice).
        KeyError: ``info`` lacks a key a term needs.
    """
    terms = dict(_require(info, "reward_terms"))
    out = {**info, "reward_terms": terms}
    added: list[float] = []

    def add(name: str, value: float) -> None:
        if name in terms:
            raise ValueError(f"reward term {name!r} is already set: the same shaping is applied twice (a wrapper "
                             "stacked twice, or a wrapper around an env that already shapes); apply it once")
        terms[name] = value
        added.append(value)

    if shaping.reward_map is not None:
        score = float(_require(info, "score"))
        low, high = shaping.reward_map
        add("reward_map", map_reward(score, low=low, high=high) - score)
    if shaping.overlong_penalty is not None:
        length = _require(info, "response_length")
        if length is None:
            _warn_once("overlong_penalty_no_length",
                       "overlong penalty configured but a response carries no token count (a str action, or a "
                       "Completion without num_tokens/token_ids): its penalty is 0 and info['overlong_penalty_applied'] "
                       "is False; pass Completions with num_tokens to apply it (warned once)")
        add("overlong_penalty", 0.0 if length is None else shaping.overlong_penalty(length))
        out["overlong_penalty_applied"] = length is not None
    if shaping.overlong_filter and _require(info, "response_truncated"):
        out["loss_mask"] = False
    return out, float(sum(added))


__all__ = ["DEFAULT_CACHE_LENGTH", "DEFAULT_MAX_RESPONSE_TOKENS", "OverlongPenalty", "Shaping", "check_reward_map_args",
           "map_reward", "shape", "soft_overlong_penalty"]
