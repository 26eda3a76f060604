"""A task's verifier as a reward function for other RL libraries: TRL and verl.

Neither library is imported: both contracts are plain callables.

* TRL (``GRPOTrainer(reward_funcs=[...])``) calls ``reward_func(prompts=..., completions=...,
  **dataset_columns)`` and expects one float per completion. Completions are strings, or for
  conversational datasets lists of ``{"role", "content"}`` messages.
* verl (``custom_reward_function.path/name``) calls ``compute_score(data_source, solution_str,
  ground_truth, extra_info=None, **reward_kwargs)`` per sample; a returned dict must hold ``"score"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dapo_env.tasks import Task, get_task
from dapo_env.wrappers import check_reward_map_args, map_reward


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or the last assistant message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping) and "content" in completion:
        return str(completion["content"])
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                return str(message.get("content", ""))
        return ""
    raise TypeError(
        f"a TRL completion must be a str or a list of {{'role', 'content'}} messages, got {type(completion).__name__}"
    )


def trl_reward_function(task_or_id: str | Task, *, answer_column: str = "answer",
                        reward_map: tuple[float, float] | None = None, workers: int = 0,
                        timeout_s: float = 10.0) -> Callable[..., list[float]]:
    """A TRL reward function that scores completions with ``task``'s verifier.

    Args:
        task_or_id: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task`.
        answer_column: the dataset column holding the reference answers (TRL passes every column
            as a keyword argument, one value per completion).
        reward_map: ``(low, high)`` maps the score linearly (e.g. ``(-1.0, 1.0)`` for DAPO's rewards).
        workers: verifier worker processes (0: verify in the calling process; use > 0 for code tasks).
        timeout_s: per-item limit in worker processes.

    Returns:
        ``reward_func(prompts, completions, **columns) -> list[float]``, named ``"<task>_reward"``
        (TRL logs rewards under the function's ``__name__``).

    Example:
        >>> reward = trl_reward_function("Arithmetic-v0")
        >>> reward(prompts=["Compute 2+2."] * 2, completions=["Answer: 4", [{"role": "assistant", "content": "5"}]],
        ...        answer=["4", "4"])
        [1.0, 0.0]
    """
    task = get_task(task_or_id)
    if reward_map is not None:
        check_reward_map_args(*reward_map)
    pool: Any = None

    def reward_func(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                    **columns: Any) -> list[float]:
        nonlocal pool
        if completions is None:
            raise TypeError("reward function needs completions=...: TRL passes prompts=, completions= and the dataset columns")
        if answer_column not in columns:
            raise KeyError(
                f"no {answer_column!r} column among the keyword arguments {sorted(columns)}: pass "
                f"answer_column=<the dataset column with the reference answers> to trl_reward_function"
            )
        references = list(columns[answer_column])
        if len(references) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(references)} values in {answer_column!r}")
        if pool is None:
            from dapo_env.verifiers.pool import VerifierPool

            pool = VerifierPool(workers, timeout_s=timeout_s)
        results = pool.map(task.verifier, [completion_text(c) for c in completions], references)
        if reward_map is None:
            return [float(r.score) for r in results]
        return [map_reward(r.score, low=reward_map[0], high=reward_map[1]) for r in results]

    reward_func.__name__ = f"{task.name}_reward"
    reward_func.__qualname__ = reward_func.__name__
    return reward_func


# verl ``data_source`` values (as verl's example preprocessors and public datasets write them) -> task id.
VERL_DATA_SOURCES: dict[str, str] = {
    "math_dapo": "DAPOMath-v0",
    "DAPO-17k": "DAPOMath-v0",
    "BytedTsinghua-SIA/DAPO-Math-17k": "DAPOMath-v0",
    "openai/gsm8k": "GSM8K-v0",
    "HuggingFaceH4/MATH-500": "MATH500-v0",
    "aime24": "AIME24-v0",
    "HuggingFaceH4/aime_2024": "AIME24-v0",
    "aime25": "AIME25-v0",
    "math-ai/aime25": "AIME25-v0",
}


def register_data_source(data_source: str, task_or_id: str | Task, *, overwrite: bool = False) -> None:
    """Route a verl ``data_source`` value to a task's verifier in :func:`verl_compute_score`."""
    env_id = get_task(task_or_id).env_id
    if data_source in VERL_DATA_SOURCES and not overwrite:
        raise ValueError(f"data_source {data_source!r} already maps to {VERL_DATA_SOURCES[data_source]}: pass overwrite=True")
    VERL_DATA_SOURCES[data_source] = env_id


def task_for_data_source(data_source: str) -> Task:
    """The task a verl ``data_source`` names: a known alias, or a task name / Gymnasium id."""
    if data_source in VERL_DATA_SOURCES:
        return get_task(VERL_DATA_SOURCES[data_source])
    try:
        return get_task(data_source)
    except KeyError:
        raise KeyError(
            f"no task for verl data_source {data_source!r}; known: {sorted(VERL_DATA_SOURCES)} or any task id. "
            "Map yours with dapo_env.interop.register_data_source(data_source, task_id)"
        ) from None


def verl_compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                       reward_map: Sequence[float] | None = None, **_: Any) -> dict[str, Any]:
    """verl's ``compute_score``: grade ``solution_str`` with the verifier of ``data_source``'s task.

    Returns ``{"score": float, "acc": bool, "pred": str}`` like verl's DAPO scorer. ``score`` is
    the verifier's score, or mapped onto ``reward_map=(low, high)`` (set it through verl's
    ``custom_reward_function.reward_kwargs``, e.g. ``{reward_map: [-1, 1]}`` for DAPO).

    Example:
        >>> verl_compute_score("Arithmetic-v0", "so... Answer: 12", "12")
        {'score': 1.0, 'acc': True, 'pred': '12'}
    """
    task = task_for_data_source(data_source)
    result = task.verifier(str(solution_str), ground_truth)
    score = float(result.score)
    if reward_map is not None:
        score = map_reward(score, low=float(reward_map[0]), high=float(reward_map[1]))
    return {"score": score, "acc": bool(result.correct), "pred": result.extracted or ""}


compute_score = verl_compute_score
"""verl's default function name, so ``custom_reward_function.name`` can stay ``compute_score``."""

__all__ = [
    "VERL_DATA_SOURCES",
    "completion_text",
    "compute_score",
    "register_data_source",
    "task_for_data_source",
    "trl_reward_function",
    "verl_compute_score",
]
