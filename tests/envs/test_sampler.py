from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from env_helpers import ScriptedPolicy, answer_book

from dapo_env import Completion, DynamicSampler, EnvSource, Group, GroupVectorEnv, RolloutBatch, RolloutSource
from dapo_env.sampler import group_from_dict, group_to_dict, grouped


def _env(dapo_file: Path, b: int = 4, g: int = 4, **kwargs) -> GroupVectorEnv:
    return gym.make_vec("DAPOMath-v0", num_envs=b * g, vectorization_mode="vector_entry_point", group_size=g,
                        data_files=str(dapo_file), **kwargs)


def _policy(env: GroupVectorEnv, p: float, seed: int = 0) -> ScriptedPolicy:
    return ScriptedPolicy(answer_book(env.task, env.problems), p_correct=p, seed=seed)


def test_fills_a_batch_with_informative_groups_only(dapo_file: Path) -> None:
    env = _env(dapo_file)
    policy = _policy(env, 0.5)
    sampler = DynamicSampler(EnvSource(env, policy, seed=0), max_rounds=20)
    batch = sampler.sample()
    assert isinstance(batch, RolloutBatch) and len(batch.groups) == 4
    for group in batch.groups:
        assert group.informative and group.size == 4 and len(set(c.text for c in group.completions)) >= 1
        assert group.correct == tuple(i["reason"].startswith("equal") for i in group.infos)
        assert not {"correct", "loss_mask"} & set(group.infos[0])  # stored once, on the group
        assert group.rewards == tuple(float(c) for c in group.correct)
        assert all(i["problem_id"] == group.problem_id for i in group.infos)
        assert isinstance(group.completions[0], Completion) and group.completions[0].num_tokens == 10
        assert "final_obs" not in group.infos[0] and {"score", "reason", "reward_terms"} <= set(group.infos[0])
    stats = batch.stats
    assert stats["rounds"] == policy.calls and stats["samples_generated"] == 16 * policy.calls
    assert stats["partial"] == 0.0
    assert stats["informative_groups"] == 4 * policy.calls - 4 * policy.calls * (
        stats["all_correct_share"] + stats["all_wrong_share"])
    env.close()


def test_statistics_before_filtering_are_exact(dapo_file: Path) -> None:
    env = _env(dapo_file, b=4, g=4)
    book = answer_book(env.task, env.problems)
    pattern = [4, 0, 2, 1]  # correct answers per group in every round

    def generate(prompts: list[str]) -> list[str]:
        return [f"Answer: {book[p]}" if i % 4 < pattern[i // 4] else "Answer: x" for i, p in enumerate(prompts)]

    batch = DynamicSampler(EnvSource(env, generate, seed=0), num_groups=2, max_rounds=5).sample()
    s = batch.stats
    assert (s["rounds"], s["samples_generated"]) == (1.0, 16.0)
    assert s["accuracy_before_filter"] == 7 / 16
    assert (s["all_correct_share"], s["all_wrong_share"], s["zero_advantage_share"]) == (0.25, 0.25, 0.5)
    assert (s["informative_groups"], s["surplus_groups"], s["partial"]) == (2.0, 0.0, 0.0)
    assert [g.num_correct for g in batch.groups] == [2, 1]
    env.close()


def test_surplus_is_carried_over_first_in_first_out(dapo_file: Path) -> None:
    env = _env(dapo_file, b=4, g=4)
    book = answer_book(env.task, env.problems)

    def half_right(prompts: list[str]) -> list[str]:
        return [f"Answer: {book[p]}" if i % 2 else "Answer: x" for i, p in enumerate(prompts)]

    sampler = DynamicSampler(EnvSource(env, half_right, seed=0), num_groups=3, max_rounds=5)
    first = sampler.sample()
    assert len(first.groups) == 3 and first.stats["surplus_groups"] == 1.0
    kept = sampler.surplus[0]
    second = sampler.sample()
    assert second.groups[0] is kept  # the oldest surplus group leads the next batch
    assert second.stats["rounds"] == 1.0 and second.stats["surplus_groups"] == 2.0
    third = sampler.sample()
    assert third.stats["rounds"] == 1.0  # 2 carried + 4 new
    fourth = sampler.sample()
    assert fourth.stats["rounds"] == 0.0 and fourth.stats["samples_generated"] == 0.0  # all from surplus
    assert (sampler.total_rounds, sampler.total_batches, sampler.total_samples) == (3, 4, 48)
    env.close()


def test_bounded_rounds_warn_and_return_a_partial_batch(dapo_file: Path) -> None:
    env = _env(dapo_file)
    policy = _policy(env, 0.0)  # always wrong: no group is informative
    sampler = DynamicSampler(EnvSource(env, policy, seed=0), max_rounds=3)
    with pytest.warns(RuntimeWarning, match="only 0 of 4 informative groups after 3 generation rounds.*too hard"):
        batch = sampler.sample()
    assert batch.groups == () and batch.stats["partial"] == 1.0 and batch.stats["rounds"] == 3.0
    assert batch.stats["all_wrong_share"] == 1.0 and policy.calls == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same cause again: counted, not warned
        again = sampler.sample()
    assert again.stats["partial"] == 1.0 and again.stats["partial_batches"] == 2.0 == sampler.partial_batches
    sampler.source.generate = _policy(env, 1.0)  # now every group is all right: another cause, warned once
    with pytest.warns(RuntimeWarning, match="too easy"):
        sampler.sample()
    assert sampler.partial_batches == 3
    env.close()


def test_filter_off_returns_the_first_groups_unfiltered(dapo_file: Path) -> None:
    env = _env(dapo_file)
    policy = _policy(env, 0.0)
    sampler = DynamicSampler(EnvSource(env, policy, seed=0), filter_groups=False, max_rounds=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch = sampler.sample()
    assert len(batch.groups) == 4 and batch.stats["rounds"] == 1.0 and batch.stats["zero_advantage_share"] == 1.0
    assert [g.num_correct for g in batch.groups] == [0, 0, 0, 0]
    env.close()


def test_judged_from_correctness_not_the_shaped_reward(dapo_file: Path) -> None:
    # With a reward map and an overlong penalty, rewards differ within a group even when all answers are
    # wrong; such a group is still all-wrong, so it is filtered out.
    env = _env(dapo_file, b=2, g=2, reward_map=(-1.0, 1.0), overlong_penalty={"max_response_tokens": 20, "cache_length": 10})

    def generate(prompts: list[str]) -> list[Completion]:
        return [Completion("Answer: x", num_tokens=5 + 10 * (i % 2)) for i in range(len(prompts))]

    with pytest.warns(RuntimeWarning):
        batch = DynamicSampler(EnvSource(env, generate, seed=0), max_rounds=2).sample()
    assert batch.groups == () and batch.stats["all_wrong_share"] == 1.0 and batch.stats["zero_advantage_share"] == 0.0
    env.close()


def test_state_dict_round_trip_resumes_exactly(dapo_file: Path) -> None:
    def run(resume_at: int | None) -> list[list[tuple[str, tuple[bool, ...]]]]:
        env = _env(dapo_file)
        sampler = DynamicSampler(EnvSource(env, _policy(env, 0.5, seed=9), seed=4), num_groups=3, max_rounds=10)
        out = []
        for step in range(4):
            if step == resume_at:
                state = json.loads(json.dumps(sampler.state_dict()))  # checkpoints are plain JSON
                env.close()
                env = _env(dapo_file)
                policy = _policy(env, 0.5)
                policy.rng.bit_generator.state = sampler.source.generate.rng.bit_generator.state
                sampler = DynamicSampler(EnvSource(env, policy), num_groups=3, max_rounds=10)
                sampler.load_state_dict(state)
            batch = sampler.sample()
            out.append([(g.problem_id, g.correct) for g in batch.groups])
        env.close()
        return out

    assert run(None) == run(2)


def test_completions_reach_the_groups_unchanged(dapo_file: Path) -> None:
    env = _env(dapo_file, b=2, g=2)
    book = answer_book(env.task, env.problems)
    made: list[Completion] = []

    def generate(prompts: list[str]) -> list[Completion]:
        out = [Completion(f"Answer: {book[p]}" if i % 2 else "Answer: x", num_tokens=3, token_ids=(1, 2, 3),
                          logprobs=(-0.1, -0.2, -0.3), prompt_token_ids=(7, 8)) for i, p in enumerate(prompts)]
        made.extend(out)
        return out

    batch = DynamicSampler(EnvSource(env, generate, seed=0), max_rounds=1).sample()
    assert [c for g in batch.groups for c in g.completions] == made[:4]
    assert batch.groups[0].completions[1] is made[1] and batch.groups[0].correct == (False, True)
    env.close()


def test_arguments_and_generate_contract(dapo_file: Path) -> None:
    env = _env(dapo_file)
    with pytest.raises(TypeError, match="rollout source.*lacks.*rollout"):
        DynamicSampler(object())
    with pytest.raises(TypeError, match="rollout source.*lacks.*publish"):
        DynamicSampler(env)  # a group env is not a source: wrap it with its generate in EnvSource
    with pytest.raises(TypeError, match="group env.*lacks"):
        EnvSource(object(), lambda p: p)
    with pytest.raises(TypeError, match="generate must be a callable"):
        EnvSource(env, None)
    with pytest.raises(ValueError, match="max_rounds"):
        DynamicSampler(EnvSource(env, lambda p: p), max_rounds=0)
    with pytest.raises(ValueError, match="num_groups"):
        DynamicSampler(EnvSource(env, lambda p: p), num_groups=0)
    with pytest.raises(ValueError, match="one per prompt"):
        DynamicSampler(EnvSource(env, lambda p: p[:-1], seed=0)).sample()
    env.close()


def test_grouped_adapts_an_engine_style_generate(dapo_file: Path) -> None:
    env = _env(dapo_file, b=2, g=3)
    book = answer_book(env.task, env.problems)
    calls: list[tuple[int, int]] = []

    def generate_n(prompts: list[str], n: int) -> list[list[str]]:
        calls.append((len(prompts), n))
        return [[f"Answer: {book[p]}" if k == 0 else "Answer: x" for k in range(n)] for p in prompts]

    batch = DynamicSampler(EnvSource(env, grouped(generate_n, 3), seed=0), max_rounds=1).sample()
    assert calls == [(2, 3)] and [g.correct for g in batch.groups] == [(True, False, False)] * 2
    with pytest.raises(ValueError, match="group-major"):
        grouped(generate_n, 2)(["a", "b"])
    with pytest.raises(ValueError, match="lists of 2"):
        grouped(lambda p, n: [["x"]], 2)(["a", "a"])
    env.close()


class ListSource:
    """A rollout source that is not a group env: canned rounds of groups (the protocol is all it needs)."""

    def __init__(self, rounds: list[list[Group]]) -> None:
        self.rounds, self.num_prompts, self.group_size = rounds, len(rounds[0]), rounds[0][0].size
        self.positions: list[tuple[int, int]] = []

    def rollout(self, position):
        self.positions.append(position)
        return RolloutBatch(tuple(self.rounds[len(self.positions) - 1]), {"list/round": float(len(self.positions))})

    def publish(self, step, weights):
        pass

    def state_dict(self):
        return {"calls": len(self.positions)}

    def load_state_dict(self, state):
        self.positions = [(0, 0)] * state["calls"]

    def close(self):
        pass


def _group(pid: str, correct: tuple[bool, ...], lengths: tuple[int, ...] = (4, 6)) -> Group:
    comps = tuple(Completion("x", num_tokens=n, finish_reason="length" if n >= 6 else "stop") for n in lengths)
    return Group(pid, "p", comps, tuple(1.0 if c else -1.0 for c in correct), correct, (True,) * len(correct))


def test_any_group_source_defer_position_and_fresh_stats() -> None:
    source = ListSource([[_group("a", (True, False)), _group("b", (True, True), (2, 2))],
                         [_group("c", (False, True), (8, 8)), _group("d", (True, False))]])
    assert isinstance(source, RolloutSource)
    sampler = DynamicSampler(source, num_groups=2)
    first = sampler.sample()
    assert [g.problem_id for g in first.groups] == ["a", "c"] and source.positions == [(0, 0), (0, 1)]
    s = first.stats
    assert s["list/round"] == 2.0  # the source's stats of the batch's last round travel with the batch
    assert (s["rounds"], s["samples_generated"], s["generated_tokens"]) == (2.0, 8.0, 40.0)
    assert (s["response_length_mean"], s["response_length_max"], s["truncation_rate"]) == (5.0, 8.0, 0.5)
    assert [g.problem_id for g in sampler.surplus] == ["d"]
    sampler.defer(first.groups[1:])  # e.g. a data-parallel rank holding more groups than the others
    assert [g.problem_id for g in sampler.surplus] == ["c", "d"]
    second = sampler.sample()
    assert [g.problem_id for g in second.groups] == ["c", "d"] and second.stats["rounds"] == 0.0
    assert "list/round" not in second.stats  # no round: no source stats
    assert math.isnan(second.stats["response_length_mean"])  # nothing fresh: no length to report
    assert sampler.state_dict()["source"] == {"calls": 2}


def test_surplus_round_trips_through_json_with_weights_versions(dapo_file: Path) -> None:
    env = _env(dapo_file, b=4, g=2)
    book = answer_book(env.task, env.problems)

    def generate(prompts: list[str]) -> list[Completion]:
        return [Completion(f"Answer: {book[p]}" if i % 2 else "x", num_tokens=2, token_ids=(5, 2),
                           weights_version=7) for i, p in enumerate(prompts)]

    sampler = DynamicSampler(EnvSource(env, generate, seed=0), num_groups=1)
    sampler.sample()
    state = json.loads(json.dumps(sampler.state_dict()))
    other = DynamicSampler(EnvSource(_env(dapo_file, b=4, g=2), generate), num_groups=1)
    other.load_state_dict(state)
    assert other.surplus == sampler.surplus and other.surplus[0].completions[0].weights_version == 7
    old = group_to_dict(sampler.surplus[0])  # a checkpoint written before the rename: "policy_version"
    old["completions"] = [{**{k: v for k, v in c.items() if k != "weights_version"}, "policy_version": 7}
                          for c in old["completions"]]
    assert group_from_dict(old) == sampler.surplus[0]
    env.close(), other.source.close()


def test_keep_surplus_false_discards_the_groups_beyond_the_batch(dapo_file: Path) -> None:
    env = _env(dapo_file, b=4, g=4)
    book = answer_book(env.task, env.problems)

    def half_right(prompts: list[str]) -> list[str]:
        return [f"Answer: {book[p]}" if i % 2 else "Answer: x" for i, p in enumerate(prompts)]

    sampler = DynamicSampler(EnvSource(env, half_right, seed=0), num_groups=3, max_rounds=5, keep_surplus=False)
    first = sampler.sample()
    assert len(first.groups) == 3 and first.stats["surplus_groups"] == 0.0 and sampler.surplus == ()
    second = sampler.sample()
    assert second.stats["rounds"] == 1.0 and not {id(g) for g in second.groups} & {id(g) for g in first.groups}
    sampler.defer(second.groups[2:])  # balancing across ranks still puts groups back
    assert len(sampler.surplus) == 1
    env.close()
