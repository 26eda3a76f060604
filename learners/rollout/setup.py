"""The trainer's glue to the env layer: the task, the group env, the sampler, and the run's prompt rendering.

The rollout sources that use them live in :mod:`~dapo_env.learners.rollout.sources` (in-process) and
:mod:`~dapo_env.learners.rollout.async_source` (a worker process). Verification and reward shaping are never re-implemented here: training rewards come from
``GroupVectorEnv`` (verifier, reward map, overlong penalty/filter); for a multi-turn task (one with an
interaction, e.g. ``GuessNumber-v0``) from ``EpisodeGroupEnv``, whose groups hold whole episodes
(:class:`~dapo_env.types.Trajectory`) recorded token by token through the tokenizer's chat template.

Example:
    >>> from dapo_env.learners.config import preset
    >>> resolve_task(preset("tiny")).env_id
    'Largest-v0'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from dapo_env.types import Group

from ..config import TrainConfig


def resolve_task(cfg: TrainConfig) -> Any:
    """The registered task named by ``cfg.task``, with ``cfg.verifier`` and ``cfg.prompt_template`` swapped in
    when given (:func:`task_with`), and its rows split into training and held-out ones when both splits would
    read the same rows (:func:`~dapo_env.learners.run.heldout.split_if_shared`)."""
    from ..run.heldout import split_if_shared

    task = task_with(cfg.task, verifier=cfg.verifier, prompt_template=cfg.prompt_template)
    return split_if_shared(task, train_split=cfg.train_split, eval_split=cfg.eval_split,
                           task_kwargs=cfg.task_kwargs, eval_size=cfg.eval_size)


def task_with(name: Any, *, verifier: Any = None, prompt_template: str | None = None) -> Any:
    """The registered task ``name`` with ``verifier`` swapped in when given (a plain function or a
    ``"module:function"`` string, through :func:`dapo_env.verifiers.callable.load_verifier`) and
    ``prompt_template`` when given. A mixture (``"GSM8K-v0:0.7,MyMath-v0:0.3"`` or a registered mixture spec,
    :mod:`dapo_env.tasks.mixture`) gets them in each of its tasks.

    Example:
        >>> task_with("Arithmetic-v0", prompt_template="Q: {question}").prompt_template
        'Q: {question}'
        >>> task_with("Arithmetic-v0:1,Largest-v0:1", prompt_template="Q: {question}").load(size=1)[0].question
        'Q: Compute 17-13.'
    """
    from dapo_env.tasks.mixture import is_mixture, map_components, resolve_task_text
    from dapo_env.verifiers.callable import load_verifier

    task = resolve_task_text(name)
    if is_mixture(task):
        if verifier is None and prompt_template is None:
            return task
        return map_components(task, lambda t: task_with(t, verifier=verifier, prompt_template=prompt_template))
    if verifier is not None:
        task = dataclasses.replace(task, verifier=load_verifier(verifier))
    if prompt_template is not None:
        task = dataclasses.replace(task, prompt_template=prompt_template)
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
    against ``max_episode_tokens`` (:class:`TrainConfig` refuses a multi-turn run with the penalty on without it)."""
    length = cfg.max_episode_tokens if episodes and cfg.overlong_penalty else cfg.max_response_tokens
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
    options = dict(num_envs=cfg.batch_size * cfg.group_size, group_size=cfg.group_size, task=task,
                   split=cfg.train_split, max_response_tokens=cfg.max_response_tokens,
                   tokenizer=tokenizer if cfg.chat_template else None, **shaping_options(cfg),
                   difficulty=cfg.difficulty_sampling or None, **dict(cfg.task_kwargs))
    if task.env_id not in gym.registry:  # a mixture written on the command line has no Gymnasium id
        from dapo_env.vector import GroupVectorEnv

        return GroupVectorEnv(**options)
    return gym.make_vec(task.env_id, vectorization_mode="vector_entry_point", **options)


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





def chat_tokenizer(cfg: TrainConfig, task: Any, tokenizer: Any) -> Any:
    """The tokenizer whose chat template renders the run's prompts (``chat_template``; always for a multi-turn
    task, whose episodes are recorded token by token), else ``None`` (plain prompts)."""
    return tokenizer if cfg.chat_template or is_multi_turn(task) else None


def check_context(model: Any, tokenizer: Any, cfg: TrainConfig, task: Any, problems: Sequence[Any]) -> None:
    """Raise a one-line ``ValueError`` naming the fix when the task's prompts (those of ``problems``, rendered
    as the run renders them) plus ``max_response_tokens`` (for a multi-turn task: plus ``max_episode_tokens``)
    cannot fit the model's context (before any data is generated)."""
    from dapo_env.envs import render_prompt

    prompts = [render_prompt(task, p, chat_tokenizer(cfg, task, tokenizer)) for p in problems]
    episodes = is_multi_turn(task)
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not positions or not prompts:
        return
    longest = max(len(tokenizer(p)["input_ids"]) for p in prompts)
    if episodes:
        budget = cfg.max_episode_tokens
        if budget is None or longest + budget > positions:
            raise ValueError(f"{cfg.task} is multi-turn: its prompts (up to {longest} tokens) plus a whole episode must "
                             f"fit the model's context ({positions} positions): "
                             + _context_fix(cfg, longest, positions, "max_episode_tokens", budget or 1))
        return
    if longest + cfg.max_response_tokens > positions:
        which = f"--model {cfg.model}" if cfg.model else "the tiny model"
        raise ValueError(f"{cfg.task}'s prompts (up to {longest} tokens) plus max_response_tokens="
                         f"{cfg.max_response_tokens} exceed the context of {which} ({positions} positions): "
                         + _context_fix(cfg, longest, positions, "max_response_tokens", cfg.max_response_tokens))


#: The fewest response (or episode) tokens a shorter budget may leave before the hint stops suggesting it.
_MIN_BUDGET = 8


def _context_fix(cfg: TrainConfig, longest: int, positions: int, budget_field: str, budget: int) -> str:
    """The flags that make prompts of ``longest`` tokens plus the ``budget_field`` budget fit: a smaller budget
    when one of at least :data:`_MIN_BUDGET` tokens is left, else a larger context (the tiny model's
    ``tiny_max_positions``, or a model with a longer context)."""
    flag = "--" + budget_field.replace("_", "-")
    room = positions - longest
    options = [f"{flag} {room}"] if room >= _MIN_BUDGET else []
    if cfg.model:
        options.append("--model PATH (a model with a longer context)")
    else:
        options.append(f"--tiny-max-positions {longest + budget}")
        options.append("--model PATH (a local HF model folder)")
    lead = "pass " if room >= _MIN_BUDGET else f"the prompts leave {max(room, 0)} tokens: pass "
    return lead + " or ".join(options)


def stamp_step(group: Group, step: int) -> Group:
    """``group`` with ``policy_step = step`` (kept through checkpoints: the staleness of carried-over groups
    survives a resume).

    Example:
        >>> from dapo_env.types import Completion
        >>> g = Group("1", "p", (Completion("a"),), (1.0,), (True,), (True,), ({"score": 1.0},))
        >>> stamp_step(g, 7).policy_step
        7
    """
    return dataclasses.replace(group, policy_step=int(step))


def make_sampler(cfg: TrainConfig, source: Any, task: Any = None) -> Any:
    """The run's :class:`~dapo_env.sampler.DynamicSampler` over ``source`` (filtering only if
    ``cfg.dynamic_sampling``; surplus groups discarded when ``cfg.keep_surplus`` is false); for a mixture
    ``task`` its batches' stats hold each task's (``task/<id>/...``)."""
    from dapo_env.sampler import DynamicSampler
    from dapo_env.tasks.mixture import mixture_task_ids

    return DynamicSampler(source, num_groups=cfg.batch_size, max_rounds=cfg.max_gen_rounds,
                          filter_groups=cfg.dynamic_sampling, keep_surplus=cfg.keep_surplus,
                          advice=partial_batch_advice(cfg), task_ids=mixture_task_ids(task))


def partial_batch_advice(cfg: TrainConfig) -> str:
    """What the partial-batch warning of the run's sampler suggests, in the command line's spelling: more
    generation rounds (``max_gen_rounds``) or a smaller batch that ``mini_batch_size`` still divides.

    Example:
        >>> from dapo_env.learners.config import preset
        >>> partial_batch_advice(preset("tiny"))
        'Raise max_gen_rounds (--max-gen-rounds 4, now 2), lower batch_size (--batch-size 16, a multiple of mini_batch_size=8) or change the data'
    """
    advice = f"Raise max_gen_rounds (--max-gen-rounds {2 * cfg.max_gen_rounds}, now {cfg.max_gen_rounds})"
    smaller = (cfg.batch_size // 2) // cfg.mini_batch_size * cfg.mini_batch_size
    if smaller >= cfg.mini_batch_size:
        advice += f", lower batch_size (--batch-size {smaller}, a multiple of mini_batch_size={cfg.mini_batch_size})"
    return advice + " or change the data"



__all__ = ["chat_tokenizer", "check_context", "is_multi_turn", "make_episode_env", "make_group_env",
           "make_sampler", "partial_batch_advice", "resolve_task", "shaping_options", "stamp_step", "task_with"]
