"""Reward shaping of verified responses: one configuration (:class:`Shaping`) and one function (:func:`shape`).

DAPO shapes a verified response in up to three ways: the verifier's score in [0, 1] is mapped onto
``[low, high]`` (+1 / -1), a response longer than ``max_response_tokens - cache_length`` tokens pays the
soft overlong penalty (Eq. 13), and a truncated response can be dropped from the loss (overlong
filtering). :func:`shape_reward` is the one pure function that does, for any sample: a single response
(its terms start with ``{"verifier": score}``) or a whole multi-turn episode (its turns' own terms, summed by
name; the episode return is what the reward map maps). :func:`shape` applies a :class:`Shaping` to one
response's step info through it: the single-env wrappers (:mod:`dapo_env.wrappers`, one term each) and
:class:`~dapo_env.vector.GroupVectorEnv` (all terms at once) call it, and
:class:`~dapo_env.episodes.EpisodeGroupEnv` calls :func:`shape_reward` directly, so the numbers, the recorded
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


def shape_reward(terms: Mapping[str, float], *, score: float, length: int | None, truncated: bool,
                 shaping: Shaping) -> tuple[float, dict[str, float], bool]:
    """Shape one sample, a single response or a whole episode: the one pure shaping function.

    Args:
        terms: the sample's reward so far, by name (a response: ``{"verifier": score}``; an episode: its turns'
            terms summed by name, e.g. ``{"env": return}``). A shaping term already among them is an error.
        score: what the reward map maps onto ``[low, high]``: the verifier's score in [0, 1], or the episode's
            return.
        length: the tokens the model sampled (the overlong penalty's length; ``None``: unknown, penalty 0).
        truncated: whether the sample was cut (the overlong filter drops it from the loss).
        shaping: the terms to add.

    Returns:
        ``(reward, terms, loss_mask)``: ``terms`` is ``terms`` then the new ones (``reward_map`` =
        ``map_reward(score) - score``, ``overlong_penalty``), ``reward = sum(terms.values())`` and
        ``loss_mask`` is False only when the overlong filter drops a truncated sample.

    Raises:
        ValueError: a shaping term is already in ``terms`` (the same shaping applied twice).

    Example:
        >>> shape_reward({"verifier": 1.0}, score=1.0, length=90, truncated=False,
        ...              shaping=Shaping(reward_map=(-1.0, 1.0),
        ...                              overlong_penalty={"max_response_tokens": 100, "cache_length": 20}))
        (0.5, {'verifier': 1.0, 'reward_map': 0.0, 'overlong_penalty': -0.5}, True)
    """
    out = dict(terms)

    def add(name: str, value: float) -> None:
        if name in out:
            raise ValueError(f"reward term {name!r} is already set: the same shaping is applied twice (a wrapper "
                             "stacked twice, or a wrapper around an env that already shapes); apply it once")
        out[name] = value

    if shaping.reward_map is not None:
        low, high = shaping.reward_map
        add("reward_map", map_reward(float(score), low=low, high=high) - float(score))
    if shaping.overlong_penalty is not None:
        add("overlong_penalty", 0.0 if length is None else shaping.overlong_penalty(length))
    keep = not (shaping.overlong_filter and truncated)
    return float(sum(out.values())), out, keep


def shape_episode(episode_return: float, length: int | None, truncated: bool, shaping: Shaping = Shaping(),
                  turn_terms: Mapping[str, float] | None = None) -> tuple[float, dict[str, float], bool]:
    """An episode's shaped reward, its terms and its loss mask: :func:`shape_reward` on the episode as one sample
    (pure; :class:`~dapo_env.episodes.EpisodeGroupEnv` and the TRL adapter call it).

    Terms: the turns' own terms summed by name (``turn_terms``; default ``{"env": episode_return}``), then
    ``reward_map`` (``map_reward(return) - return``: the return, 0 for a failed and 1 for a solved episode in
    the built-in tasks, mapped onto ``[low, high]``) and ``overlong_penalty`` (DAPO's soft penalty of the
    tokens the model sampled in the episode). The loss mask is False for a truncated episode when
    ``shaping.overlong_filter`` is on.

    Example:
        >>> shape_episode(1.0, 90, False, Shaping(reward_map=(-1.0, 1.0),
        ...               overlong_penalty={"max_response_tokens": 100, "cache_length": 20}))
        (0.5, {'env': 1.0, 'reward_map': 0.0, 'overlong_penalty': -0.5}, True)
    """
    terms = {"env": float(episode_return)} if turn_terms is None else turn_terms
    return shape_reward(terms, score=float(episode_return), length=length, truncated=bool(truncated), shaping=shaping)


def check_length_known(length: int | None, shaping: Shaping) -> bool:
    """Whether ``shaping``'s overlong penalty can read ``length``; warns once per process when it cannot (the
    penalty is then 0). True when no penalty is configured."""
    if shaping.overlong_penalty is None or length is not None:
        return True
    _warn_once("overlong_penalty_no_length",
               "overlong penalty configured but a response carries no token count (a str action, or a "
               "Completion without num_tokens/token_ids): its penalty is 0 and info['overlong_penalty_applied'] "
               "is False; pass Completions with num_tokens to apply it (warned once)")
    return False


def shape(info: Mapping[str, Any], shaping: Shaping) -> tuple[dict[str, Any], float]:
    """Apply ``shaping`` to one verified response's step info (:func:`shape_reward` on its fields).

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
    before = dict(_require(info, "reward_terms"))
    score = _require(info, "score") if shaping.reward_map is not None else 0.0
    length = _require(info, "response_length") if shaping.overlong_penalty is not None else None
    truncated = bool(_require(info, "response_truncated")) if shaping.overlong_filter else False
    _, terms, keep = shape_reward(before, score=score, length=length, truncated=truncated, shaping=shaping)
    out = {**info, "reward_terms": terms}
    if shaping.overlong_penalty is not None:
        out["overlong_penalty_applied"] = check_length_known(length, shaping)
    if not keep:
        out["loss_mask"] = False
    return out, float(sum(v for k, v in terms.items() if k not in before))


__all__ = ["DEFAULT_CACHE_LENGTH", "DEFAULT_MAX_RESPONSE_TOKENS", "OverlongPenalty", "Shaping", "check_length_known",
           "check_reward_map_args", "map_reward", "shape", "shape_episode", "shape_reward", "soft_overlong_penalty"]
