"""Reward shaping and observation wrappers (Gymnasium wrappers, one job each).

Each reward wrapper applies one term through :func:`dapo_env.shaping.shape` (the same function
:class:`~dapo_env.vector.GroupVectorEnv` applies) and records it in ``info["reward_terms"]``, so for any
stack of them ``reward == sum(info["reward_terms"].values())``; a term applied twice raises.
"""

from __future__ import annotations

from typing import Any, Protocol, SupportsFloat

import gymnasium as gym

from dapo_env.shaping import (
    DEFAULT_CACHE_LENGTH,
    DEFAULT_MAX_RESPONSE_TOKENS,
    OverlongPenalty,
    Shaping,
    check_reward_map_args,  # noqa: F401  (re-exported: dapo_env.interop imports it from here)
    map_reward,  # noqa: F401  (re-exported, as above)
    shape,
)


class _ShapingWrapper(gym.Wrapper):
    """Applies a fixed :class:`~dapo_env.shaping.Shaping` to every step's info and reward."""

    shaping: Shaping

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info, delta = shape(info, self.shaping)
        return obs, float(reward) + delta, terminated, truncated, info


class SoftOverlongPenalty(_ShapingWrapper):
    """Adds DAPO's soft overlong penalty (:class:`~dapo_env.shaping.OverlongPenalty`) of the response length.

    The length comes from ``info["response_length"]`` (the Completion's token count). When it is
    unknown (a plain ``str`` action) the penalty is 0, ``info["overlong_penalty_applied"]`` is False and a
    warning says so once.

    Example:
        >>> from dapo_env import ReasoningEnv, Completion
        >>> env = SoftOverlongPenalty(ReasoningEnv("Arithmetic-v0"), max_response_tokens=100, cache_length=20)
        >>> _ = env.reset(seed=0)
        >>> _, reward, *_, info = env.step(Completion("Answer: 0", num_tokens=90))
        >>> info["reward_terms"]["overlong_penalty"]
        -0.5
    """

    def __init__(self, env: gym.Env, max_response_tokens: int = DEFAULT_MAX_RESPONSE_TOKENS,
                 cache_length: int = DEFAULT_CACHE_LENGTH, factor: float = 1.0) -> None:
        penalty = OverlongPenalty(max_response_tokens=max_response_tokens, cache_length=cache_length, factor=factor)
        super().__init__(env)
        self.shaping = Shaping(overlong_penalty=penalty)


class OverlongFilter(_ShapingWrapper):
    """Excludes truncated responses from the loss: ``info["loss_mask"] = False`` when
    ``info["response_truncated"]``. The reward is left alone (no fake reward for a cut response).

    Example:
        >>> from dapo_env import ReasoningEnv, Completion
        >>> env = OverlongFilter(ReasoningEnv("Arithmetic-v0"))
        >>> _ = env.reset(seed=0)
        >>> env.step(Completion("Answer: 0", num_tokens=8, finish_reason="length"))[-1]["loss_mask"]
        False
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.shaping = Shaping(overlong_filter=True)


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


class RewardMap(_ShapingWrapper):
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
        shaping = Shaping(reward_map=(low, high))
        super().__init__(env)
        self.shaping = shaping


__all__ = [
    "ChatTemplate",
    "OverlongFilter",
    "RewardMap",
    "SoftOverlongPenalty",
    "apply_chat_template",
    "chat_messages",
]
