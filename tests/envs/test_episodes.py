"""EpisodeGroupEnv: B prompts x G episodes of different lengths, only live episodes stepped, groups of
trajectories with episode returns, shaping, verification in a worker pool, resume, and errors."""

from __future__ import annotations

import doctest
import inspect
import json

import numpy as np
import pytest
from multiturn_helpers import CHATML, ScriptedEngine, bisection_policy, bpe_chat_tokenizer, guesses_in, replies_of

import dapo_env.episodes
from dapo_env import Completion, EpisodeGroupEnv, Group, Trajectory, TurnRequest
from dapo_env.episodes import shape_episode
from dapo_env.shaping import Shaping


def bisect_text(request: TurnRequest) -> str:
    return bisection_policy()(request)


def test_the_module_docstrings_run() -> None:
    assert doctest.testmod(dapo_env.episodes, optionflags=doctest.ELLIPSIS).failed == 0


def test_rollout_steps_only_live_episodes_and_returns_groups_of_trajectories() -> None:
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=12, group_size=3)
    prompts, info = env.reset(seed=0)
    assert len(prompts) == 12 and len(set(prompts)) == 1 and len(info["problem_id"]) == 12
    calls: list[list[TurnRequest]] = []

    def generate(requests: list[TurnRequest]) -> list[str]:
        calls.append(requests)
        # member 0 bisects, member 1 always says 8, member 2 never guesses: three episode lengths
        return [bisect_text(r) if r.key.endswith(":0") else "Answer: 8" if r.key.endswith(":1") else "hmm"
                for r in requests]

    played = env.rollout(generate)
    groups = played.groups
    assert len(groups) == 4 and all(isinstance(g, Group) and g.size == 3 for g in groups)
    assert len(calls) == 5 and len(calls[0]) == 12 and len(calls[-1]) < 12  # finished episodes wait
    ended_at: dict[str, int] = {}
    for turn, requests in enumerate(calls):
        for r in requests:
            assert r.turn == turn and r.key not in ended_at  # no request for an episode after its end
        for key in {r.key for r in calls[turn - 1]} - {r.key for r in requests} if turn else ():
            ended_at[key] = turn
    for b, group in enumerate(groups):
        bisected, constant, silent = group.completions
        assert all(isinstance(t, Trajectory) for t in group.completions)
        assert group.correct[0] and bisected.num_turns <= 5 and group.rewards[0] == 1.0
        assert silent.num_turns == 5 and not group.correct[2] and group.rewards[2] == 0.0
        assert group.correct[1] == (constant.turns[0].reply == "correct")
        assert [i["group_id"] for i in group.infos] == [b] * 3
        assert group.infos[2]["reason"] == "no_guess" and group.infos[2]["num_turns"] == 5
        assert group.rewards == tuple(i["score"] for i in group.infos)  # no shaping configured
    stats = played.stats  # the round's stats travel in what rollout returns
    assert stats["episode/episodes"] == 12 and stats["episode/generate_calls"] == 5 and stats["episode/turns_max"] == 5
    assert 4 / 12 <= stats["episode/solved_share"] <= 8 / 12
    env.close()


def test_requests_carry_the_conversation_and_stable_unique_keys() -> None:
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=4, group_size=2)
    env.reset(seed=3)
    seen: dict[str, list[TurnRequest]] = {}

    def generate(requests):
        for r in requests:
            seen.setdefault(r.key, []).append(r)
        return [bisect_text(r) for r in requests]

    env.rollout(generate)
    first_keys = set(seen)
    env.rollout(generate)
    assert len(seen) == 8 and first_keys.isdisjoint(set(seen) - first_keys)  # keys unique across rollouts
    for key, requests in seen.items():
        assert [r.turn for r in requests] == list(range(len(requests)))
        last = requests[-1]
        assert len(last.messages) == 1 + 2 * last.turn and last.messages[0]["role"] == "user"
        assert replies_of(last.messages) == [r for r in replies_of(last.messages) if r in ("higher", "lower")]
        assert last.text.startswith(last.messages[0]["content"]) and last.context_token_ids is None
        assert len(set(guesses_in(last.messages))) == last.turn  # bisection never repeats a guess
    env.close()


def test_bisection_always_solves_and_reply_ignoring_policies_stay_under_k_over_n() -> None:
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=64, group_size=4)
    env.reset(seed=0)
    groups = [g for _ in range(3) for g in env.rollout(lambda requests: [bisect_text(r) for r in requests]).groups]
    assert all(all(g.correct) for g in groups)
    fixed = [g for _ in range(10) for g in env.rollout(
        lambda requests: [f"Answer: {[8, 4, 12, 2, 14][r.turn]}" for r in requests]).groups]
    rate = np.mean([c for g in fixed for c in g.correct])
    assert rate <= 5 / 16 + 3 * np.sqrt(5 / 16 * 11 / 16 / 640)
    assert all(not g.informative for g in fixed)  # all G episodes of a problem play the same fixed guesses
    env.close()


def test_shaping_reward_map_overlong_penalty_and_filter() -> None:
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=4, group_size=2, max_turns=2, reward_map=(-1.0, 1.0),
                          overlong_penalty={"max_response_tokens": 20, "cache_length": 10, "factor": 1.0},
                          overlong_filter=True)
    env.reset(seed=1)

    def generate(requests):  # member 0 bisects in 4 tokens a turn, member 1 never guesses in 8
        return [Completion(bisect_text(r), num_tokens=4) if r.key.endswith(":0") else Completion("hm", num_tokens=8)
                for r in requests]

    for group in env.rollout(generate).groups:
        for traj, reward, mask, solved, info in zip(group.completions, group.rewards, group.loss_mask, group.correct,
                                                    group.infos):
            terms = info["reward_terms"]
            assert reward == pytest.approx(sum(terms.values()))
            assert terms["reward_map"] == (1.0 - 1.0 if solved else -1.0)
            assert terms["overlong_penalty"] == pytest.approx(min(0.0, (10 - traj.num_tokens) / 10))
            assert mask == (not traj.truncated) and "loss_mask" not in info and "correct" not in info
        silent = group.completions[1]
        assert silent.num_tokens == 16 and silent.truncated and group.infos[1]["reason"] == "truncated:max_turns"
        assert group.rewards[1] == pytest.approx(-1.0 - 0.6) and group.loss_mask[1] is False
    env.close()


def test_shape_episode_by_hand() -> None:
    assert shape_episode(0.0, None, True) == (0.0, {"env": 0.0}, True)
    reward, terms, mask = shape_episode(0.5, 30, True, Shaping(
        reward_map=(-1.0, 1.0), overlong_filter=True,
        overlong_penalty={"max_response_tokens": 20, "cache_length": 10, "factor": 2.0}))
    assert (reward, mask) == (pytest.approx(0.5 - 0.5 - 2.0), False)
    assert terms == {"env": 0.5, "reward_map": 0.0 - 0.5, "overlong_penalty": -2.0}


def test_verification_runs_in_worker_processes() -> None:
    with EpisodeGroupEnv("GuessNumber-v0", num_envs=4, group_size=2, workers=1, timeout_s=30.0) as env:
        env.reset(seed=0)
        groups = env.rollout(lambda requests: [bisect_text(r) for r in requests]).groups
    assert all(all(g.correct) for g in groups)


def test_token_mode_groups_and_json_round_trip() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=4, group_size=2, tokenizer=tok, system_prompt="Play.")
    prompts, _ = env.reset(seed=0)
    assert prompts[0].startswith("<|im_start|>system\nPlay.<|im_end|>")
    groups = env.rollout(ScriptedEngine(tok, bisection_policy())).groups
    for group in groups:
        assert group.prompt == prompts[0]
        for traj in group.completions:
            data = json.loads(json.dumps(traj.to_dict()))
            assert Trajectory.from_dict(data) == traj
            assert traj.logprobs is not None and len(traj.logprobs) == len(traj.token_ids)
        json.dumps([dict(i) for i in group.infos])  # infos are plain values (checkpointable)
    env.close()


def test_state_dict_resumes_the_same_problems() -> None:
    def generate(requests):
        return [bisect_text(r) for r in requests]

    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=6, group_size=2)
    env.reset(seed=11)
    env.rollout(generate)
    state = json.loads(json.dumps(env.state_dict()))
    expected = [g.problem_id for _ in range(2) for g in env.rollout(generate).groups]
    resumed = EpisodeGroupEnv("GuessNumber-v0", num_envs=6, group_size=2)
    assert resumed.needs_reset
    resumed.load_state_dict(state)
    assert not resumed.needs_reset
    assert [g.problem_id for _ in range(2) for g in resumed.rollout(generate).groups] == expected


def test_a_single_turn_task_gives_one_turn_episodes() -> None:
    env = EpisodeGroupEnv("Arithmetic-v0", num_envs=4, group_size=2, size=20)
    env.reset(seed=0)
    played = env.rollout(lambda requests: ["Answer: 0"] * len(requests))
    assert all(t.num_turns == 1 for g in played.groups for t in g.completions)
    assert played.stats["episode/generate_calls"] == 1


def test_errors_name_the_fix() -> None:
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=4, group_size=2)
    with pytest.raises(RuntimeError, match="before reset"):
        env.rollout(lambda requests: ["Answer: 1"] * len(requests))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one Completion .or str. per request"):
        env.rollout(lambda requests: ["Answer: 1"])
    with pytest.raises(TypeError, match="response 1 .episode"):
        env.rollout(lambda requests: ["Answer: 1", 5, "x", "y"])
    with pytest.raises(TypeError, match="generate must be a callable"):
        env.rollout("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_envs"):
        EpisodeGroupEnv("GuessNumber-v0", num_envs=0)
    with pytest.raises(ValueError, match="multiple of group_size"):
        EpisodeGroupEnv("GuessNumber-v0", num_envs=3, group_size=2)
    with pytest.warns(DeprecationWarning, match="num_envs=B \\* group_size"):
        old = EpisodeGroupEnv("GuessNumber-v0", num_prompts=2, group_size=3)  # the old keyword: B
    assert (old.num_envs, old.num_prompts, old.group_size) == (6, 2, 3)
    old.close()
    with pytest.raises(ValueError, match="low < high"):
        EpisodeGroupEnv("GuessNumber-v0", num_envs=1, reward_map=(1.0, -1.0))
    with pytest.raises(ValueError, match="unknown keys"):
        EpisodeGroupEnv("GuessNumber-v0", num_envs=1, overlong_penalty={"max_len": 3})
    with pytest.raises(ValueError, match="options\\['indices'\\]"):
        env.reset(options={"indices": [0]})
    env.close()


def test_it_is_a_group_source_for_dynamic_sampling() -> None:
    """The group env protocol; through an EnvSource, dynamic sampling filters on episode returns."""
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=16, group_size=4)
    for name in ("num_prompts", "group_size", "needs_reset", "reset", "rollout", "state_dict", "load_state_dict"):
        assert hasattr(env, name)
    assert set(inspect.signature(env.reset).parameters) == {"seed", "options"}
    from dapo_env import DynamicSampler, EnvSource

    rng = np.random.default_rng(0)

    def generate(requests):  # bisect half of the time, else guess blindly: mixed groups
        return [bisect_text(r) if rng.random() < 0.5 else f"Answer: {r.turn + 1}" for r in requests]

    sampler = DynamicSampler(EnvSource(env, generate, seed=0))
    batch = sampler.sample()
    assert len(batch.groups) == 4 and all(g.informative for g in batch.groups)
    assert all(isinstance(t, Trajectory) for g in batch.groups for t in g.completions)
    env.close()


def test_threads_answer_turns_concurrently() -> None:
    """An interaction that runs a tool (here: waits at a barrier that opens only when four turns are being
    answered at once) finishes with threads=4; one thread would time out at the barrier."""
    import threading

    from dapo_env import Turn
    from dapo_env.tasks import Task
    from dapo_env.tasks.guess_number import GuessNumberSource, GuessVerifier

    barrier = threading.Barrier(4, timeout=30)

    class ToolCall:
        def respond(self, history, action, verdict):
            barrier.wait()
            return Turn(f"ran {action.text}", reward=1.0, done=True, solved=True)

    task = Task(name="ToolProbe", source=GuessNumberSource(), verifier=GuessVerifier(), interaction=ToolCall())
    with EpisodeGroupEnv(task, num_envs=4, group_size=2, threads=4, size=4) as env:
        env.reset(seed=0)
        groups = env.rollout(lambda requests: [f"print({i})" for i, _ in enumerate(requests)]).groups
    assert [t.turns[0].reply for g in groups for t in g.completions] == [f"ran print({i})" for i in range(4)]
    with pytest.raises(ValueError, match="threads"):
        EpisodeGroupEnv("GuessNumber-v0", num_envs=1, threads=0)
