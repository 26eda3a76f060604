"""DifficultySampler: the closed form against simulation, the floor, decay, state, and that it cuts the
share of uninformative groups on a population of easy, hard and middling problems."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.difficulty import DifficultySampler


@settings(max_examples=30, deadline=None)
@given(st.floats(0.5, 20), st.floats(0.5, 20), st.integers(1, 10))
def test_expected_informative_probability_matches_monte_carlo(a: float, b: float, g: int) -> None:
    sampler = DifficultySampler(1, g, prior=(a, b), decay=1.0)
    rng = np.random.default_rng(0)
    p = rng.beta(a, b, size=200_000)
    simulated = float(np.mean(1 - p ** g - (1 - p) ** g))
    assert sampler.informative_probability()[0] == pytest.approx(simulated, abs=0.01)


def test_hand_worked_values() -> None:
    sampler = DifficultySampler(2, 8, prior=(1.0, 1.0), decay=1.0)
    assert sampler.informative_probability()[0] == pytest.approx(7 / 9)  # Beta(1, 1): 1 - 2 / (G + 1)
    sampler.update([1], [0])  # all wrong: Beta(1, 9)
    expected = 1 - np.prod([(1 + i) / (10 + i) for i in range(8)]) - np.prod([(9 + i) / (10 + i) for i in range(8)])
    assert sampler.informative_probability()[1] == pytest.approx(expected)  # = 1 - 9/17 - tiny


def test_floor_keeps_every_problem_drawable() -> None:
    sampler = DifficultySampler(3, 4, floor=0.1, decay=1.0)
    for _ in range(50):
        sampler.update([0, 1], [4, 0])
    weights = sampler.weights()
    assert weights[0] == pytest.approx(0.1) and weights[1] == pytest.approx(0.1) and weights[2] > 0.4
    draws = np.concatenate([sampler.draw(np.random.default_rng(s), 1) for s in range(2000)])
    counts = np.bincount(draws, minlength=3)
    assert counts[0] > 50 and counts[1] > 50 and counts[2] > counts[0] * 3


def test_decay_lets_old_evidence_fade() -> None:
    slow, fast = DifficultySampler(1, 4, decay=1.0), DifficultySampler(1, 4, decay=0.5)
    for sampler in (slow, fast):
        for _ in range(10):
            sampler.update([0], [0])
        sampler.update([0], [2])  # the policy starts solving it
    assert fast.informative_probability()[0] > slow.informative_probability()[0]


def test_state_round_trip_and_bad_input() -> None:
    sampler = DifficultySampler(4, 4)
    sampler.update([0, 3, 3], [1, 4, 4])
    copy = DifficultySampler(4, 4)
    copy.load_state_dict(sampler.state_dict())
    assert np.array_equal(copy.weights(), sampler.weights())
    with pytest.raises(ValueError, match="problems"):
        DifficultySampler(5, 4).load_state_dict(sampler.state_dict())
    with pytest.raises(ValueError, match="num_correct"):
        sampler.update([0], [5])
    with pytest.raises(ValueError, match="indices"):
        sampler.update([9], [1])
    with pytest.raises(ValueError, match="floor"):
        DifficultySampler(2, 4, floor=0)


def test_fewer_uninformative_groups_than_uniform_draws() -> None:
    """A population of 100 problems: 40 always solved, 40 never, 20 in the middle (p = 0.5), G = 8, 8 groups per
    round for 200 rounds. Uniform draws waste ~80 % of groups; difficulty-aware draws half as many."""
    rng = np.random.default_rng(0)
    rates = np.array([1.0] * 40 + [0.0] * 40 + [0.5] * 20)

    def zero_advantage_share(weighted: bool) -> float:
        sampler = DifficultySampler(100, 8)
        wasted = total = 0
        for _ in range(200):
            picked = sampler.draw(rng, 8) if weighted else rng.choice(100, 8, replace=False)
            right = rng.binomial(8, rates[picked])
            sampler.update(picked, right)
            wasted += int(np.sum((right == 0) | (right == 8)))
            total += len(picked)
        return wasted / total

    uniform, aware = zero_advantage_share(False), zero_advantage_share(True)
    assert uniform > 0.75 and aware < 0.45, (uniform, aware)


# -- in the group envs -------------------------------------------------------------------------------------


def _population_policy(env, seed: int):
    """A fixed policy over the env's problems: 40 % always right, 40 % always wrong, 20 % a coin flip."""
    rng = np.random.default_rng(seed)
    kind = {p.id: k for p, k in zip(env.problems, np.random.default_rng(1).choice(3, len(env.problems), p=[.4, .4, .2]))}
    by_prompt = {env.task.format_prompt(p): p for p in env.problems}

    def generate(prompts):
        out = []
        for prompt in prompts:
            problem = by_prompt[prompt]
            right = {0: True, 1: False, 2: bool(rng.random() < 0.5)}[kind[problem.id]]
            out.append(f"Answer: {problem.answer if right else 'none'}")
        return out

    return generate


def _informative_share(difficulty: bool, steps: int = 60) -> float:
    from dapo_env import GroupVectorEnv

    env = GroupVectorEnv("Arithmetic-v0", num_envs=32, group_size=4, size=120, difficulty=difficulty)
    generate = _population_policy(env, seed=0)
    env.reset(seed=0)
    informative = [g.informative for _ in range(steps) for g in env.rollout(generate).groups]
    env.close()
    return float(np.mean(informative[len(informative) // 3:]))  # after a first pass over the problems


def test_group_env_draws_by_difficulty_and_makes_more_informative_groups() -> None:
    plain, aware = _informative_share(False), _informative_share(True)
    # uniform draws: 0.2 * (1 - 2 / 16) = 0.175 informative; by difficulty the coin-flip problems are drawn
    # far more often (an always-right problem seen once already weighs ~0.28 against ~0.8)
    assert plain == pytest.approx(0.175, abs=0.06)
    assert aware > 1.6 * plain


def test_group_env_difficulty_state_resumes_the_same_draws() -> None:
    from dapo_env import GroupVectorEnv

    def run(env, steps):
        generate = _population_policy(env, seed=3)
        return [g.problem_id for _ in range(steps) for g in env.rollout(generate).groups]

    a = GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4, size=40, difficulty=True)
    a.reset(seed=5)
    run(a, 5)
    state = a.state_dict()
    assert sum(state["difficulty"]["seen"]) == 10
    b = GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4, size=40, difficulty=True)
    b.load_state_dict(state)
    assert np.array_equal(a.difficulty.alpha, b.difficulty.alpha)
    # the same policy randomness from here on: both draw the same problems
    assert run(a, 4) == run(b, 4)
    a.close(), b.close()


def test_episode_env_updates_its_beliefs_with_solved_counts() -> None:
    from dapo_env import EpisodeGroupEnv

    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=6, group_size=3, difficulty=True)
    env.reset(seed=0)
    drawn = env.state_dict()["indices"]
    env.rollout(lambda requests: ["Answer: 1"] * len(requests))
    seen = np.asarray(env.state_dict()["difficulty"]["seen"])
    assert seen.sum() == 2 and all(seen[i] >= 1 for i in drawn)
    env.close()


def test_a_sampler_built_for_other_problems_is_refused() -> None:
    from dapo_env import GroupVectorEnv

    with pytest.raises(ValueError, match="build it with those"):
        GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4, size=40, difficulty=DifficultySampler(39, 4))
    with pytest.raises(TypeError, match="DifficultySampler, True or None"):
        GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4, size=40, difficulty="yes")
