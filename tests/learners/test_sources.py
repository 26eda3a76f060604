"""The rollout seam: every source kind answers the same public methods, and each one's rollout returns its
groups with their stats; the trainer holds one source and never asks which."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from dapo_env import GroupVectorEnv
from dapo_env.learners.rollout.async_source import AsyncGroupSource
from dapo_env.learners.config import preset
from dapo_env.learners.engines import make_engine
from dapo_env.learners.rollout.setup import resolve_task
from dapo_env.learners.rollout.worker import RolloutWorker
from dapo_env.learners.rollout.sources import EngineSource, ResponseGeneration, TurnGeneration, make_rollout_source
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.sampler import DynamicSampler, EnvSource, RolloutSource
from dapo_env.schedule import PromptSchedule
from dapo_env.tasks import get_task
from dapo_env.types import RolloutBatch

from async_helpers import FakeRoundJob

PROTOCOL = {"rollout", "publish", "state_dict", "load_state_dict", "close"}


def _public_methods(obj: Any) -> set[str]:
    return {name for name, _ in inspect.getmembers(type(obj), callable) if not name.startswith("_")}


@pytest.fixture(scope="module")
def tok() -> Any:
    return build_tokenizer()


def _tiny(task: str, **overrides: Any) -> Any:
    if task == "guess":
        return preset("guess", batch_size=2, group_size=2, mini_batch_size=1, eval_size=4, **overrides)
    return preset("tiny", batch_size=2, group_size=2, mini_batch_size=1, eval_size=4, **overrides)


def _sources(tok: Any) -> dict[str, Any]:
    """One source of every kind the factory makes, plus the env layer's own."""
    engine = make_engine("hf", build_tiny_model(tok, hidden_size=64, layers=1, heads=2), tok, seed=0)
    single = _tiny("tiny", difficulty_sampling=True)
    episodes = _tiny("guess")
    env = GroupVectorEnv("Arithmetic-v0", num_envs=4, group_size=2, size=20)
    schedule = PromptSchedule(get_task("Arithmetic-v0").load(split="train", size=20), 2, 2)
    return {
        "env": EnvSource(env, lambda prompts: ["Answer: 0"] * len(prompts), seed=0),
        "engine": make_rollout_source(single, resolve_task(single), engine, tokenizer=tok),
        "episodes": make_rollout_source(episodes, resolve_task(episodes), engine, tokenizer=tok),
        "worker": AsyncGroupSource(schedule, RolloutWorker(FakeRoundJob(group_size=2), timeout_s=60), max_staleness=1,
                                   seed=0),
    }


def test_every_source_answers_the_same_public_methods_and_returns_stats(tok: Any) -> None:
    sources = _sources(tok)
    try:
        assert isinstance(sources["engine"], EngineSource) and isinstance(sources["engine"].generation,
                                                                         ResponseGeneration)
        assert isinstance(sources["episodes"].generation, TurnGeneration)
        for name, source in sources.items():
            assert isinstance(source, RolloutSource), name
            assert _public_methods(source) == PROTOCOL, (name, _public_methods(source) ^ PROTOCOL)
            source.publish(5, {"w": torch.zeros(2)})
            batch = source.rollout((0, 0))
            assert isinstance(batch, RolloutBatch) and len(batch.groups) == source.num_prompts, name
            assert all(g.size == source.group_size for g in batch.groups), name
            assert all("/" in key for key in batch.stats), (name, batch.stats)  # namespaced: they travel as they are
            json.dumps(source.state_dict())  # a checkpoint is plain JSON
        stats = {name: sources[name].rollout((0, 1)).stats for name in ("engine", "episodes", "worker")}
        assert {"difficulty/expected_informative", "difficulty/seen_share"} <= set(stats["engine"])
        assert {"episode/turns_mean", "episode/env_tokens", "episode/solved_share"} <= set(stats["episodes"])
        assert {"async/rounds_expired", "async/rounds_ahead", "async/worker_restarts",
                "time/rollout_wait_s", "time/worker_generate_s"} <= set(stats["worker"])
        for name in ("engine", "episodes"):  # in-process: every group is stamped with the published step
            assert {g.policy_step for g in sources[name].rollout((1, 0)).groups} == {5}
    finally:
        for source in sources.values():
            source.close()


def test_an_engine_source_is_seeded_by_the_position_alone(tok: Any) -> None:
    """The same position gives the same samples; another position other samples (the seed is a pure function
    of the run's seed and (batch, round), so a resumed run regenerates exactly)."""
    cfg = _tiny("tiny")
    engine = make_engine("hf", build_tiny_model(tok, hidden_size=64, layers=1, heads=2), tok, seed=0)

    def texts(position: tuple[int, int]) -> list[str]:
        source = make_rollout_source(cfg, resolve_task(cfg), engine, tokenizer=tok)
        try:
            return [c.text for g in source.rollout(position).groups for c in g.completions]
        finally:
            source.close()

    assert texts((3, 1)) == texts((3, 1)) != texts((3, 0))


def test_the_sampler_passes_its_position_and_merges_the_last_rounds_stats(tok: Any) -> None:
    class Recorder:
        """A rollout source that records the positions it is asked for (two informative groups per round)."""

        num_prompts, group_size = 2, 2

        def __init__(self, inner: Any) -> None:
            self.inner, self.positions = inner, []

        def rollout(self, position):
            self.positions.append(position)
            batch = self.inner.rollout(position)
            return RolloutBatch(batch.groups, {**batch.stats, "test/round": float(position[1])})

        def publish(self, step, weights):
            self.inner.publish(step, weights)

        def state_dict(self):
            return self.inner.state_dict()

        def load_state_dict(self, state):
            self.inner.load_state_dict(state)

        def close(self):
            self.inner.close()

    env = GroupVectorEnv("Arithmetic-v0", num_envs=4, group_size=2, size=20)
    answers = {env.task.format_prompt(p): p.answer for p in env.problems}
    source = Recorder(EnvSource(env, lambda ps: [f"Answer: {answers[p]}" if i % 2 else "x" for i, p in enumerate(ps)],
                                seed=0))
    sampler = DynamicSampler(source, num_groups=3, max_rounds=4)
    first, second = sampler.sample(), sampler.sample()
    assert source.positions == [(0, 0), (0, 1), (1, 0)]  # 2 + 2 groups, 1 surplus; then 1 + 2
    assert first.stats["test/round"] == 1.0 and second.stats["test/round"] == 0.0
    source.close()


def test_the_trainer_holds_one_source_and_never_asks_which() -> None:
    """Structure: no multi-turn branch and no probe of a collaborator in the trainer."""
    path = Path(__file__).resolve().parents[2] / "learners" / "trainer.py"
    text = path.read_text()
    assert len(text.splitlines()) < 450
    tree = ast.parse(text)
    probes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id in ("hasattr", "getattr")]
    assert not probes and "multi_turn" not in text
    step = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "train_step")
    assert step.end_lineno - step.lineno + 1 <= 36
