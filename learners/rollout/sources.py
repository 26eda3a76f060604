"""Rollout sources: ONE factory, :func:`make_rollout_source`, returns the source of every run.

A rollout source (:class:`~dapo_env.sampler.RolloutSource`) owns its generation and answers
``rollout(position) -> RolloutBatch`` (the round's groups and its stats), ``publish(step, weights)``,
``state_dict``/``load_state_dict`` and ``close``. The factory returns an :class:`EngineSource` (the engine
generates in the learner's process: an HF, vLLM or server engine alike) whose generation is
:class:`ResponseGeneration` (one response per prompt) or :class:`TurnGeneration` (multi-turn episodes,
``engine.generate_turns``), or, with a rollout worker, an
:class:`~dapo_env.learners.rollout.async_source.AsyncGroupSource`. The trainer holds whichever it gets and never
asks which; a new kind of generation is one more class with ``play(env, position, *, seed)``, a new kind of
source one more branch here.

Example:
    >>> from dapo_env.learners.config import preset
    >>> from dapo_env.learners.engines import make_engine
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> cfg = preset("tiny", batch_size=2, group_size=2, mini_batch_size=1, eval_size=4)
    >>> tok = build_tokenizer(); engine = make_engine("hf", build_tiny_model(tok), tok)
    >>> source = make_rollout_source(cfg, resolve_task(cfg), engine, tokenizer=tok)
    >>> source.publish(3, {})  # in-process: the step stamps the groups; the engine already holds the weights
    >>> batch = source.rollout((0, 0))
    >>> len(batch.groups), {g.policy_step for g in batch.groups}
    (2, {3})
    >>> source.close()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dapo_env.sampler import GroupEnv, Position, grouped, play_round
from dapo_env.types import RolloutBatch

from ..config import TrainConfig
from .setup import is_multi_turn, make_group_env, resolve_task, stamp_step  # noqa: F401 (resolve_task: example)


def round_sampling(sampling: Any, seed: int, position: Position, *turn: int) -> Any:
    """``sampling`` with the seed of the generation round at ``position`` (and of ``turn`` within an
    episode): a pure function of the run's seed and the sampler's position, so a resume regenerates exactly."""
    from ..algo.update import derive_seed

    return dataclasses.replace(sampling, seed=derive_seed(seed, *position, *turn))


class ResponseGeneration:
    """One response per prompt: ``engine.generate(prompts, n=G, sampling)`` for a round's B distinct prompts
    (any :class:`~dapo_env.learners.engines.RolloutEngine`: HF, vLLM or a server)."""

    def __init__(self, engine: Any, sampling: Any, *, seed: int, group_size: int) -> None:
        self.engine, self.sampling, self.seed, self.group_size = engine, sampling, seed, group_size

    def play(self, env: GroupEnv, position: Position, *, seed: int | None) -> RolloutBatch:
        sampling = round_sampling(self.sampling, self.seed, position)
        generate = grouped(lambda prompts, n: self.engine.generate(prompts, n=n, sampling=sampling), self.group_size)
        return play_round(env, generate, seed=seed)


#: The episode env's stats a training step records (the report plots them); the rest stay the env's.
EPISODE_METRICS = ("episode/turns_mean", "episode/env_tokens", "episode/solved_share")


class TurnGeneration:
    """Multi-turn episodes: every live episode's next turn through ``engine.generate_turns`` (each episode's KV
    cache kept between its turns, released when the round's episodes have ended), seeded per turn.
    The round's stats keep the episode env's ``episode/turns_mean``, ``episode/env_tokens`` and
    ``episode/solved_share`` (:data:`EPISODE_METRICS`), and for a task with tools the round's tool use
    (``tool/calls_per_episode``, ``tool/no_call_share``, ``tool/failed_share``, ``tool/<status>_share``,
    ``tool/tool_errors``: :func:`~dapo_env.tools.tool_use_stats`)."""

    def __init__(self, engine: Any, sampling: Any, *, seed: int) -> None:
        self.engine, self.sampling, self.seed = engine, sampling, seed

    def play(self, env: GroupEnv, position: Position, *, seed: int | None) -> RolloutBatch:
        def generate(requests: list[Any]) -> list[Any]:
            return self.engine.generate_turns(requests, round_sampling(self.sampling, self.seed, position,
                                                                       1 + requests[0].turn))

        batch = play_round(env, generate, seed=seed)
        self.engine.release()
        kept = {k: float(v) for k, v in batch.stats.items()
                if not k.startswith("episode/") or k in EPISODE_METRICS}
        return RolloutBatch(batch.groups, kept)


class EngineSource:
    """A :class:`~dapo_env.sampler.RolloutSource` that generates in the learner's process: the group env shows
    prompts, ``generation`` samples them with the trainer's engine (which the trainer keeps in sync after
    every optimizer step), the env verifies and shapes. Every group is stamped with the training step whose
    weights generated it (``Group.policy_step``, from :meth:`publish`).

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


def make_rollout_source(cfg: TrainConfig, task: Any, engine: Any, *, tokenizer: Any, model: Any = None,
                        threads: Any = None) -> Any:
    """The rollout source of a run: with ``cfg.uses_rollout_worker`` an
    :class:`~dapo_env.learners.rollout.async_source.AsyncGroupSource` (a worker process with its own engine copy built
    from ``model.config``, sharing the learner's :class:`~dapo_env.learners.rollout.threads.ThreadBudget` ``threads``),
    else an :class:`EngineSource` over ``engine`` (multi-turn tasks play episodes through
    :class:`TurnGeneration`). Incompatible settings are refused by :class:`TrainConfig` itself."""
    from ..engines import SamplingParams

    sampling = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p,
                              max_response_tokens=cfg.max_response_tokens)
    if cfg.uses_rollout_worker:
        from .async_source import make_async_source

        return make_async_source(cfg, task, tokenizer, model, engine=engine, sampling=sampling, threads=threads)
    generation = (TurnGeneration(engine, sampling, seed=cfg.seed) if is_multi_turn(task)
                  else ResponseGeneration(engine, sampling, seed=cfg.seed, group_size=cfg.group_size))
    return EngineSource(make_group_env(cfg, task, tokenizer), generation, seed=cfg.seed)


__all__ = ["EPISODE_METRICS", "EngineSource", "ResponseGeneration", "TurnGeneration", "make_rollout_source", "round_sampling"]
