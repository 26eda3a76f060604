"""The trainer's rollout seam: the task, the group env, and ONE factory of rollout sources.

A rollout source (:class:`~dapo_env.sampler.RolloutSource`) owns its generation and answers
``rollout(position) -> RolloutBatch`` (the round's groups and its stats), ``publish(step, weights)``,
``state_dict``/``load_state_dict`` and ``close``. :func:`make_rollout_source` returns the one a config
needs: an :class:`EngineSource` (the engine generates in the learner's process: an HF, vLLM or server
engine alike) whose generation is :class:`ResponseGeneration` (one response per prompt) or
:class:`TurnGeneration` (multi-turn episodes, ``engine.generate_turns``), or, with a rollout worker, an
:class:`~dapo_env.learners.async_rollout.AsyncGroupSource`. The trainer holds whichever it gets and never
asks which.

Verification and reward shaping are never re-implemented here: training rewards come from
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dapo_env.sampler import GroupEnv, Position, grouped, play_round
from dapo_env.types import Group, RolloutBatch

from .config import TrainConfig

#: ``info`` key of every training sample: the training step whose weights generated it (its ``policy_step``).
POLICY_STEP = "policy_step"


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
    return gym.make_vec(task.env_id, num_envs=cfg.batch_size * cfg.group_size,
                        vectorization_mode="vector_entry_point", group_size=cfg.group_size, task=task,
                        split=cfg.train_split, max_response_tokens=cfg.max_response_tokens,
                        chat_template=tokenizer if cfg.chat_template else None, **shaping_options(cfg),
                        difficulty=cfg.difficulty_sampling or None, **dict(cfg.task_kwargs))


def make_episode_env(cfg: TrainConfig, task: Any, tokenizer: Any) -> Any:
    """The :class:`~dapo_env.episodes.EpisodeGroupEnv` of a multi-turn run: B prompts x G episodes, recorded
    through ``tokenizer``'s chat template (exact token ids; required), with ``cfg``'s budgets and shaping."""
    from dapo_env.episodes import EpisodeGroupEnv

    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{cfg.task} is multi-turn: episodes are recorded token by token through a chat template; "
                         "use a model whose tokenizer has one (the tiny model's does)")
    return EpisodeGroupEnv(task, num_prompts=cfg.batch_size, group_size=cfg.group_size, split=cfg.train_split,
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
                             f"fit the model's context ({positions} positions): pass --set max_episode_tokens=N with "
                             f"N <= {positions - longest}" + ("" if cfg.model else " (or raise tiny_max_positions)"))
        return
    if longest + cfg.max_response_tokens > positions:
        which = f"--model {cfg.model}" if cfg.model else "the tiny model (preset 'tiny' scale)"
        raise ValueError(f"{cfg.task}'s prompts (up to {longest} tokens) plus max_response_tokens="
                         f"{cfg.max_response_tokens} exceed the context of {which} ({positions} positions): pass "
                         f"--set max_response_tokens=N with N <= {positions - longest}"
                         + ("" if cfg.model else ", or --model PATH (a local HF model folder) for this task"))


def stamp_step(group: Group, step: int) -> Group:
    """``group`` with ``info["policy_step"] = step`` on every sample (kept through checkpoints: the staleness
    of carried-over groups survives a resume).

    Example:
        >>> from dapo_env.types import Completion
        >>> g = Group("1", "p", (Completion("a"),), (1.0,), (True,), (True,), ({"score": 1.0},))
        >>> stamp_step(g, 7).infos[0]
        {'score': 1.0, 'policy_step': 7}
    """
    return dataclasses.replace(group, infos=tuple({**dict(info), POLICY_STEP: int(step)} for info in group.infos))


def round_sampling(sampling: Any, seed: int, position: Position, *turn: int) -> Any:
    """``sampling`` with the seed of the generation round at ``position`` (and of ``turn`` within an
    episode): a pure function of the run's seed and the sampler's position, so a resume regenerates exactly."""
    from .update import derive_seed

    return dataclasses.replace(sampling, seed=derive_seed(seed, *position, *turn))


class ResponseGeneration:
    """One response per prompt: ``engine.generate(prompts, n=G, sampling)`` for a round's B distinct prompts
    (any :class:`~dapo_env.learners.engine.RolloutEngine`: HF, vLLM or a server)."""

    def __init__(self, engine: Any, sampling: Any, *, seed: int, group_size: int) -> None:
        self.engine, self.sampling, self.seed, self.group_size = engine, sampling, seed, group_size

    def play(self, env: GroupEnv, position: Position, *, seed: int | None) -> RolloutBatch:
        sampling = round_sampling(self.sampling, self.seed, position)
        generate = grouped(lambda prompts, n: self.engine.generate(prompts, n=n, sampling=sampling), self.group_size)
        return play_round(env, generate, seed=seed)


class TurnGeneration:
    """Multi-turn episodes: every live episode's next turn through ``engine.generate_turns`` (each episode's KV
    cache kept between its turns, released when the round's episodes have ended), seeded per turn.
    The round's stats add the episodes' ``episode/turns_mean``, ``episode/env_tokens`` and
    ``episode/solved_share``."""

    def __init__(self, engine: Any, sampling: Any, *, seed: int) -> None:
        self.engine, self.sampling, self.seed = engine, sampling, seed

    def play(self, env: GroupEnv, position: Position, *, seed: int | None) -> RolloutBatch:
        def generate(requests: list[Any]) -> list[Any]:
            return self.engine.generate_turns(requests, round_sampling(self.sampling, self.seed, position,
                                                                       1 + requests[0].turn))

        batch = play_round(env, generate, seed=seed)
        self.engine.release()
        episodes = env.rollout_stats  # the round's episodes (EpisodeGroupEnv)
        stats = {f"episode/{k}": float(episodes[k]) for k in ("turns_mean", "env_tokens", "solved_share")}
        return RolloutBatch(batch.groups, {**batch.stats, **stats})


class EngineSource:
    """A :class:`~dapo_env.sampler.RolloutSource` that generates in the learner's process: the group env shows
    prompts, ``generation`` samples them with the trainer's engine (which the trainer keeps in sync after
    every optimizer step), the env verifies and shapes. Every group is stamped with the training step whose
    weights generated it (``info["policy_step"]``, from :meth:`publish`).

    Args:
        env: the group env (:func:`make_group_env`).
        generation: :class:`ResponseGeneration` or :class:`TurnGeneration` (anything with
            ``play(env, position, *, seed) -> RolloutBatch``).
        seed: the env's first reset.
    """

    def __init__(self, env: GroupEnv, generation: Any, *, seed: int | None) -> None:
        self.env, self.generation, self.seed = env, generation, seed
        self.num_prompts, self.group_size = env.num_prompts, env.group_size
        self.policy_step = 0

    def rollout(self, position: Position) -> RolloutBatch:
        batch = self.generation.play(self.env, position, seed=self.seed)
        return RolloutBatch(tuple(stamp_step(g, self.policy_step) for g in batch.groups), batch.stats)

    def publish(self, step: int, weights: Mapping[str, Any]) -> None:
        """Record the training step (the engine already holds ``weights``: the trainer pushed them)."""
        self.policy_step = int(step)

    def state_dict(self) -> dict[str, Any]:
        return self.env.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.env.load_state_dict(state)

    def close(self) -> None:
        self.env.close()


def make_rollout_source(cfg: TrainConfig, task: Any, engine: Any, *, tokenizer: Any, model: Any = None) -> Any:
    """The rollout source of a run: with ``cfg.uses_rollout_worker`` an
    :class:`~dapo_env.learners.async_rollout.AsyncGroupSource` (a worker process with its own engine copy built
    from ``model.config``), else an :class:`EngineSource` over ``engine`` (multi-turn tasks play episodes
    through :class:`TurnGeneration`). Incompatible settings are refused by :class:`TrainConfig` itself."""
    from .engine import SamplingParams

    sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p,
                              max_response_tokens=cfg.max_response_tokens)
    if cfg.uses_rollout_worker:
        from .async_rollout import make_async_source

        return make_async_source(cfg, task, tokenizer, model, engine=engine, sampling=sampling)
    generation = (TurnGeneration(engine, sampling, seed=cfg.seed) if is_multi_turn(task)
                  else ResponseGeneration(engine, sampling, seed=cfg.seed, group_size=cfg.group_size))
    return EngineSource(make_group_env(cfg, task, tokenizer), generation, seed=cfg.seed)


def make_sampler(cfg: TrainConfig, source: Any) -> Any:
    """The run's :class:`~dapo_env.sampler.DynamicSampler` over ``source`` (filtering only if
    ``cfg.dynamic_sampling``)."""
    from dapo_env.sampler import DynamicSampler

    return DynamicSampler(source, num_groups=cfg.batch_size, max_rounds=cfg.max_gen_rounds,
                          filter_groups=cfg.dynamic_sampling)


__all__ = ["POLICY_STEP", "EngineSource", "chat_tokenizer", "check_context", "ResponseGeneration", "TurnGeneration", "is_multi_turn", "make_episode_env",
           "make_group_env", "make_rollout_source", "make_sampler", "resolve_task", "round_sampling", "shaping_options",
           "stamp_step"]
