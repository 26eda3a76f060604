"""Both group envs return :class:`~dapo_env.types.Group` s under one contract (docs/DESIGN.md, "Shared data
types"), and both shape through the one pure function :func:`~dapo_env.shaping.shape_reward`."""

from __future__ import annotations

import pytest

from dapo_env import Completion, EpisodeGroupEnv, GroupVectorEnv, Shaping, Turn
from dapo_env.sampler import group_from_dict, group_to_dict
from dapo_env.shaping import shape, shape_episode, shape_reward
from dapo_env.tasks import Task
from dapo_env.tasks.guess_number import GuessNumberSource, GuessVerifier

#: every sample's info in either env (an episode env adds its episode keys)
COMMON = {"score", "extracted", "reason", "response_length", "response_truncated", "reward_terms", "problem_id",
          "task", "group_id", "overlong_penalty_applied"}
SHAPING = {"reward_map": (-1.0, 1.0), "overlong_penalty": {"max_response_tokens": 12, "cache_length": 4},
           "overlong_filter": True}


def _check_contract(groups, env) -> None:
    for b, group in enumerate(groups):
        g = env.group_size
        assert len(group.completions) == len(group.rewards) == len(group.correct) == len(group.loss_mask) == g
        assert len(group.infos) == g
        for reward, info in zip(group.rewards, group.infos):
            assert COMMON <= set(info), COMMON - set(info)
            assert "correct" not in info and "loss_mask" not in info  # each fact once: in the Group's fields
            assert reward == sum(info["reward_terms"].values())
            assert info["problem_id"] == group.problem_id and info["group_id"] == b
        assert all(isinstance(c, bool) for c in group.correct + group.loss_mask)
        assert group_from_dict(group_to_dict(group)) == group


def test_both_group_envs_return_groups_under_one_contract() -> None:
    vector = GroupVectorEnv("Arithmetic-v0", num_envs=4, group_size=2, size=20, **SHAPING)
    episodes = EpisodeGroupEnv("Arithmetic-v0", num_envs=4, group_size=2, size=20, **SHAPING)
    vector.reset(seed=0)
    episodes.reset(seed=0)
    lengths = [3, 14]  # within budget; cut at the limit (penalised, filtered)
    reply = [Completion("Answer: 0", num_tokens=n, finish_reason="stop" if n < 12 else "length") for n in lengths]
    v_groups = vector.rollout(lambda prompts: reply * (len(prompts) // 2)).groups
    e_groups = episodes.rollout(lambda requests: reply * (len(requests) // 2)).groups
    _check_contract(v_groups, vector)
    _check_contract(e_groups, episodes)
    for v, e in zip(v_groups, e_groups):  # the same answers to the same problems: the same facts
        assert (v.problem_id, v.correct, v.loss_mask, v.rewards) == (e.problem_id, e.correct, e.loss_mask, e.rewards)
        assert v.loss_mask == (True, False)
    vector.close()
    episodes.close()


def test_shape_reward_by_hand() -> None:
    penalty = {"max_response_tokens": 20, "cache_length": 4}
    # a wrong response of 18 tokens: map 0 -> -1 (term -1), penalty (16 - 18) / 4 = -0.5
    assert shape_reward({"verifier": 0.0}, score=0.0, length=18, truncated=False,
                        shaping=Shaping(reward_map=(-1.0, 1.0), overlong_penalty=penalty)) == (
        -1.5, {"verifier": 0.0, "reward_map": -1.0, "overlong_penalty": -0.5}, True)
    # an episode whose turns scored pass 1.0 and attempt_penalty -0.25 (return 0.75), cut at 30 sampled tokens:
    # map 0.75 -> 0.5 (term -0.25), penalty -factor = -2.0 past the limit, filtered out of the loss
    shaping = Shaping(reward_map=(-1.0, 1.0), overlong_filter=True,
                      overlong_penalty={"max_response_tokens": 20, "cache_length": 10, "factor": 2.0})
    assert shape_reward({"pass": 1.0, "attempt_penalty": -0.25}, score=0.75, length=30, truncated=True,
                        shaping=shaping) == (
        -1.5, {"pass": 1.0, "attempt_penalty": -0.25, "reward_map": -0.25, "overlong_penalty": -2.0}, False)
    assert shape_episode(0.75, 30, True, shaping, {"pass": 1.0, "attempt_penalty": -0.25}) == shape_reward(
        {"pass": 1.0, "attempt_penalty": -0.25}, score=0.75, length=30, truncated=True, shaping=shaping)
    assert shape_reward({"env": 1.0}, score=1.0, length=None, truncated=True, shaping=Shaping()) == (
        1.0, {"env": 1.0}, True)
    with pytest.raises(ValueError, match="applied twice"):
        shape_reward({"verifier": 1.0, "reward_map": 0.0}, score=1.0, length=3, truncated=False,
                     shaping=Shaping(reward_map=(-1.0, 1.0)))


def test_shape_of_a_step_info_is_shape_reward_of_its_fields() -> None:
    shaping = Shaping(reward_map=(-1.0, 1.0), overlong_penalty={"max_response_tokens": 20, "cache_length": 4},
                      overlong_filter=True)
    info = {"score": 1.0, "reward_terms": {"verifier": 1.0}, "response_length": 19, "response_truncated": True,
            "loss_mask": True}
    shaped, delta = shape(info, shaping)
    reward, terms, keep = shape_reward({"verifier": 1.0}, score=1.0, length=19, truncated=True, shaping=shaping)
    assert (shaped["reward_terms"], shaped["loss_mask"], shaped["overlong_penalty_applied"]) == (terms, keep, True)
    assert delta == reward - 1.0 == -0.75


def test_episode_infos_keep_the_turns_own_reward_terms() -> None:
    class Graded:  # two turns: a wrong guess costs 0.25, then a pass worth 1.0
        def respond(self, history, action, verdict):
            if history.turn == 0:
                return Turn("again", reward=-0.25, terms={"attempt_penalty": -0.25})
            return Turn("", reward=1.0, done=True, solved=True, terms={"pass": 1.0})

    task = Task(name="Graded", source=GuessNumberSource(), verifier=GuessVerifier(), interaction=Graded())
    with EpisodeGroupEnv(task, num_envs=2, group_size=2, size=4, reward_map=(-1.0, 1.0)) as env:
        env.reset(seed=0)
        (group,) = env.rollout(lambda requests: ["Answer: 1"] * len(requests)).groups
    info = group.infos[0]
    assert info["reward_terms"] == {"attempt_penalty": -0.25, "pass": 1.0, "reward_map": 0.5 - 0.75}
    assert group.rewards[0] == 0.5 and info["score"] == 0.75 and info["turn_rewards"] == [-0.25, 1.0]
