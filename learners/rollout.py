"""The trainer's glue to the env layer: the task (with a custom verifier) and the group env + dynamic sampler.

Verification and reward shaping are never re-implemented here: training rewards come from
``GroupVectorEnv`` (verifier, reward map, overlong penalty/filter) through ``DynamicSampler``; for a
multi-turn task (one with an interaction, e.g. ``GuessNumber-v0``) from ``EpisodeGroupEnv``, whose groups
hold whole episodes (:class:`~dapo_env.types.Trajectory`) recorded token by token through the tokenizer's
chat template, filtered on episode returns by the same ``DynamicSampler``.

Example:
    >>> from dapo_env.learners.config import preset
    >>> resolve_task(preset("tiny")).env_id
    'Largest-v0'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .config import TrainConfig


def resolve_task(cfg: TrainConfig) -> Any:
    """The registered task named by ``cfg.task``, with ``cfg.verifier`` swapped in when given (a plain
    function or a ``"module:function"`` string, through :func:`dapo_env.verifiers.callable.load_verifier`)
    and ``cfg.prompt_template`` when given."""
    from dapo_env.tasks import get_task
    from dapo_env.verifiers.callable import load_verifier

    task = get_task(cfg.task)
    if cfg.verifier is not None:
        task = dataclasses.replace(task, verifier=load_verifier(cfg.verifier))
    if cfg.prompt_template is not None:
        task = dataclasses.replace(task, prompt_template=cfg.prompt_template)
    return task


def is_multi_turn(task: Any) -> bool:
    """Whether ``task`` is played over several turns (it has an interaction): its training samples are episodes.

    Example:
        >>> from dapo_env.tasks import get_task
        >>> is_multi_turn(get_task("GuessNumber-v0")), is_multi_turn(get_task("Arithmetic-v0"))
        (True, False)
    """
    return getattr(task, "turns", "single-turn") == "multi-turn"


def shaping_options(cfg: TrainConfig, *, episodes: bool = False) -> dict[str, Any]:
    """The group env's shaping keywords (the fields of :class:`dapo_env.shaping.Shaping`) that ``cfg`` selects.

    For ``episodes`` the soft overlong penalty counts the tokens the model sampled in the whole episode
    against ``max_episode_tokens`` (a multi-turn run with the penalty on must set it)."""
    length = cfg.max_response_tokens
    if episodes and cfg.overlong_penalty:
        if cfg.max_episode_tokens is None:
            raise ValueError(f"{cfg.task} is multi-turn: the soft overlong penalty needs the episode's token budget; "
                             "pass --set max_episode_tokens=N (or --set overlong_penalty=false)")
        length = cfg.max_episode_tokens
    penalty = {"max_response_tokens": length, "cache_length": cfg.overlong_cache_length,
               "factor": cfg.overlong_penalty_factor}
    return {"reward_map": (cfg.reward_low, cfg.reward_high), "overlong_filter": cfg.overlong_filter,
            "overlong_penalty": penalty if cfg.overlong_penalty else None}


def make_group_env(cfg: TrainConfig, task: Any, tokenizer: Any = None) -> Any:
    """The task's group env: :func:`make_episode_env` for a multi-turn task, else B*G sub-envs (shaping from
    ``cfg``, difficulty-aware draws if ``cfg.difficulty_sampling``) made through Gymnasium's registry (also
    what an asynchronous run's rollout worker builds, so both show the same prompts)."""
    import gymnasium as gym

    import dapo_env.tasks  # noqa: F401  (registers the built-in ids)

    if is_multi_turn(task):
        return make_episode_env(cfg, task, tokenizer)
    return gym.make_vec(task.env_id, num_envs=cfg.batch_size * cfg.group_size,
                        vectorization_mode="vector_entry_point", group_size=cfg.group_size, task=task,
                        split=cfg.train_split, max_response_tokens=cfg.max_response_tokens,
                        tokenizer=tokenizer if cfg.chat_template else None, **shaping_options(cfg),
                        difficulty=cfg.difficulty_sampling or None, **dict(cfg.task_kwargs))


def make_sampler(cfg: TrainConfig, task: Any, generate: Callable[[list[str]], list[Any]],
                 tokenizer: Any = None, *, source: Any = None) -> Any:
    """A :class:`~dapo_env.sampler.DynamicSampler` (filtering only if ``cfg.dynamic_sampling``) over
    ``source`` (default: :func:`make_group_env`); the source is ``sampler.source``."""
    from dapo_env.sampler import DynamicSampler

    source = make_group_env(cfg, task, tokenizer) if source is None else source
    return DynamicSampler(source, generate, num_groups=cfg.batch_size, max_rounds=cfg.max_gen_rounds,
                          filter_groups=cfg.dynamic_sampling, seed=cfg.seed)


def make_episode_env(cfg: TrainConfig, task: Any, tokenizer: Any) -> Any:
    """The :class:`~dapo_env.episodes.EpisodeGroupEnv` of a multi-turn run: B prompts x G episodes, recorded
    through ``tokenizer``'s chat template (exact token ids; required), with ``cfg``'s budgets and shaping."""
    from dapo_env.episodes import EpisodeGroupEnv

    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{cfg.task} is multi-turn: episodes are recorded token by token through a chat template; "
                         "use a model whose tokenizer has one (the tiny model's does)")
    return EpisodeGroupEnv(task, num_envs=cfg.batch_size * cfg.group_size, group_size=cfg.group_size, split=cfg.train_split,
                           tokenizer=tokenizer, max_turns=cfg.max_turns, max_episode_tokens=cfg.max_episode_tokens,
                           **shaping_options(cfg, episodes=True), **dict(cfg.task_kwargs))


__all__ = ["is_multi_turn", "make_episode_env", "make_group_env", "make_sampler", "resolve_task", "shaping_options"]
