"""Reward shaping and observation wrappers, and the pure functions behind them.

Each wrapper adds one term and records it in ``info["reward_terms"]`` so that, for any stack of the
reward wrappers here, ``reward == sum(info["reward_terms"].values())``. The maths live in pure
functions (:func:`soft_overlong_penalty`, :func:`map_reward`) so that :class:`~dapo_env.vector.GroupVectorEnv`
and the learners compute exactly the same numbers.
"""

from __future__ import annotations

from typing import Any, Protocol, SupportsFloat

import gymnasium as gym

DEFAULT_MAX_LENGTH = 20480
DEFAULT_CACHE_LENGTH = 4096


def check_overlong_args(max_length: int, cache_length: int, factor: float) -> None:
    """Validate the soft overlong penalty's settings; errors say how to fix them."""
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
        raise ValueError(f"max_length must be a positive int (tokens), got {max_length!r}")
    if not isinstance(cache_length, int) or isinstance(cache_length, bool) or cache_length < 1:
        raise ValueError(f"cache_length must be a positive int (tokens), got {cache_length!r}")
    if cache_length > max_length:
        raise ValueError(
            f"cache_length ({cache_length}) must be <= max_length ({max_length}): the penalty ramps over the "
            f"last cache_length tokens before max_length; lower cache_length or raise max_length"
        )
    if not factor >= 0:
        raise ValueError(f"factor must be >= 0 (the penalty's size at max_length), got {factor!r}")


def soft_overlong_penalty(length: int, *, max_length: int = DEFAULT_MAX_LENGTH,
                          cache_length: int = DEFAULT_CACHE_LENGTH, factor: float = 1.0) -> float:
    """DAPO's soft overlong punishment (Yu et al. 2025, Eq. 13), scaled by ``factor``.

    With ``start = max_length - cache_length``::

        0                                   if L <= start
        (start - L) / cache_length * factor if start < L <= max_length
        -factor                             if L > max_length

    Example:
        >>> soft_overlong_penalty(16384), soft_overlong_penalty(18432), soft_overlong_penalty(20481)
        (0.0, -0.5, -1.0)
    """
    check_overlong_args(max_length, cache_length, factor)
    start = max_length - cache_length
    if length <= start:
        return 0.0
    if length <= max_length:
        return (start - length) / cache_length * factor
    return -float(factor)


def check_reward_map_args(low: float, high: float) -> None:
    """Validate a reward map's endpoints."""
    if not low < high:
        raise ValueError(f"RewardMap needs low < high (the rewards for a wrong and a right answer), got {low=}, {high=}")


def map_reward(score: float, *, low: float = -1.0, high: float = 1.0) -> float:
    """Map a verifier score in [0, 1] linearly onto [low, high]: 0 -> low, 1 -> high.

    Example:
        >>> map_reward(1.0), map_reward(0.0), map_reward(0.5)
        (1.0, -1.0, 0.0)
    """
    check_reward_map_args(low, high)
    return low + (high - low) * float(score)


def _with_term(info: dict[str, Any], name: str, value: float) -> dict[str, Any]:
    """A copy of ``info`` with ``reward_terms[name] = value`` (the inner env's dict is not mutated)."""
    terms = dict(info.get("reward_terms", {}))
    if name in terms:
        raise ValueError(f"reward term {name!r} is already set: the same shaping wrapper is applied twice")
    terms[name] = value
    return {**info, "reward_terms": terms}


def _response_length(info: dict[str, Any]) -> int | None:
    if "response_length" not in info:
        raise KeyError("info has no 'response_length': wrap a dapo_env ReasoningEnv (or an env whose step info has it)")
    return info["response_length"]


class SoftOverlongPenalty(gym.Wrapper):
    """Adds :func:`soft_overlong_penalty` of the response length (tokens) to the reward.

    The length comes from ``info["response_length"]`` (the Completion's token count). When it is
    unknown (a plain ``str`` action) the penalty is 0 and ``info["overlong_penalty_applied"]`` is False.

    Example:
        >>> from dapo_env import ReasoningEnv, Completion
        >>> env = SoftOverlongPenalty(ReasoningEnv("Arithmetic-v0"), max_length=100, cache_length=20)
        >>> _ = env.reset(seed=0)
        >>> _, reward, *_, info = env.step(Completion("Answer: 0", num_tokens=90))
        >>> info["reward_terms"]["overlong_penalty"]
        -0.5
    """

    def __init__(self, env: gym.Env, max_length: int = DEFAULT_MAX_LENGTH,
                 cache_length: int = DEFAULT_CACHE_LENGTH, factor: float = 1.0) -> None:
        check_overlong_args(max_length, cache_length, factor)
        super().__init__(env)
        self.max_length, self.cache_length, self.factor = max_length, cache_length, factor

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        length = _response_length(info)
        penalty = 0.0 if length is None else soft_overlong_penalty(
            length, max_length=self.max_length, cache_length=self.cache_length, factor=self.factor)
        info = _with_term(info, "overlong_penalty", penalty)
        info["overlong_penalty_applied"] = length is not None
        return obs, float(reward) + penalty, terminated, truncated, info


class OverlongFilter(gym.Wrapper):
    """Excludes truncated responses from the loss: ``info["loss_mask"] = False`` when
    ``info["response_truncated"]``. The reward is left alone (no fake reward for a cut response).

    Example:
        >>> from dapo_env import ReasoningEnv, Completion
        >>> env = OverlongFilter(ReasoningEnv("Arithmetic-v0"))
        >>> _ = env.reset(seed=0)
        >>> env.step(Completion("Answer: 0", num_tokens=8, finish_reason="length"))[-1]["loss_mask"]
        False
    """

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "response_truncated" not in info:
            raise KeyError("info has no 'response_truncated': wrap a dapo_env ReasoningEnv")
        if info["response_truncated"]:
            info = {**info, "loss_mask": False}
        return obs, reward, terminated, truncated, info


class ChatTokenizer(Protocol):
    """What :class:`ChatTemplate` needs from a tokenizer (a ``transformers`` tokenizer has it)."""

    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...


def chat_messages(prompt: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The conversation a chat template renders: an optional system message, then the user prompt."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
    return [*messages, {"role": "user", "content": prompt}]


def apply_chat_template(tokenizer: ChatTokenizer, prompt: str, system_prompt: str | None = None) -> str:
    """Render ``prompt`` through ``tokenizer.apply_chat_template`` as text ending with the generation prompt."""
    if not callable(getattr(tokenizer, "apply_chat_template", None)):
        raise TypeError(
            f"ChatTemplate needs a tokenizer with apply_chat_template (e.g. transformers.AutoTokenizer), "
            f"got {type(tokenizer).__name__}"
        )
    text = tokenizer.apply_chat_template(
        chat_messages(prompt, system_prompt), tokenize=False, add_generation_prompt=True)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template(..., tokenize=False) returned {type(text).__name__}, expected str")
    return text


class ChatTemplate(gym.ObservationWrapper):
    """Formats the prompt with a chat template, ready for a chat model to continue.

    The tokenizer is duck-typed: anything with ``apply_chat_template(messages, tokenize=False,
    add_generation_prompt=True) -> str`` works, so ``transformers`` is never imported here.

    Example:
        >>> from dapo_env import ReasoningEnv
        >>> class Tok:
        ...     def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        ...         return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        >>> obs, _ = ChatTemplate(ReasoningEnv("Arithmetic-v0"), Tok()).reset(seed=0)
        >>> obs.startswith("<user>"), obs.endswith("<assistant>")
        (True, True)
    """

    def __init__(self, env: gym.Env, tokenizer: ChatTokenizer, system_prompt: str | None = None) -> None:
        if not callable(getattr(tokenizer, "apply_chat_template", None)):
            raise TypeError(
                f"ChatTemplate needs a tokenizer with apply_chat_template, got {type(tokenizer).__name__}")
        super().__init__(env)
        self.tokenizer, self.system_prompt = tokenizer, system_prompt

    def observation(self, observation: str) -> str:
        return apply_chat_template(self.tokenizer, observation, self.system_prompt)


class RewardMap(gym.Wrapper):
    """Maps the verifier's score linearly onto ``[low, high]`` (DAPO's +1 / -1 by default).

    Records ``reward_terms["reward_map"] = map_reward(score) - score`` so that the terms still add up
    to the reward, whatever other shaping wrappers are stacked.

    Example:
        >>> from dapo_env import ReasoningEnv
        >>> env = RewardMap(ReasoningEnv("Arithmetic-v0"))
        >>> _ = env.reset(seed=0)
        >>> env.step("no answer")[1]
        -1.0
    """

    def __init__(self, env: gym.Env, low: float = -1.0, high: float = 1.0) -> None:
        check_reward_map_args(low, high)
        super().__init__(env)
        self.low, self.high = float(low), float(high)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        score = float(info["score"])
        delta = map_reward(score, low=self.low, high=self.high) - score
        return obs, float(reward) + delta, terminated, truncated, _with_term(info, "reward_map", delta)


__all__ = [
    "DEFAULT_CACHE_LENGTH",
    "DEFAULT_MAX_LENGTH",
    "ChatTemplate",
    "OverlongFilter",
    "RewardMap",
    "SoftOverlongPenalty",
    "apply_chat_template",
    "chat_messages",
    "check_overlong_args",
    "check_reward_map_args",
    "map_reward",
    "soft_overlong_penalty",
]
