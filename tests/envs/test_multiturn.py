"""MultiTurnEnv through Gymnasium: check_env on every multi-turn id, scripted policies on GuessNumber-v0,
budgets, determinism, no answer leaks, clear errors, and the one-method recipe for a new environment."""

from __future__ import annotations

import doctest
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from multiturn_helpers import CHATML, OFFLINE_DATA, Bisection, bpe_chat_tokenizer, offline_kwargs

import dapo_env
import dapo_env.multiturn
from dapo_env import Completion, MultiTurnEnv, Trajectory, Turn
from dapo_env.tasks import Task, get_task, list_tasks, register_task, unregister_task
from dapo_env.tasks.guess_number import GuessNumberSource, GuessVerifier


def _play(env: gym.Env, policy, *, seed: int | None = None, options: dict | None = None) -> tuple[list[str], list, dict]:
    """Run one episode; ``policy(guesses, replies) -> text``. Returns the replies, the rewards, the last info."""
    obs, info = env.reset(seed=seed, options=options)
    replies, rewards, guesses = [], [], []
    terminated = truncated = False
    while not (terminated or truncated):
        text = policy(guesses, replies)
        guesses.append(text)
        obs, reward, terminated, truncated, info = env.step(text)
        replies.append(obs)
        rewards.append(reward)
    return replies, rewards, info


def _bisect(n: int):
    bisect = Bisection(n)
    return lambda guesses, replies: bisect.text([int(g.split()[-1]) for g in guesses], replies)


def test_the_module_docstrings_run() -> None:
    assert doctest.testmod(dapo_env.multiturn, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.parametrize("env_id", list_tasks("multi-turn"))
def test_check_env_passes_without_warnings_on_every_multi_turn_id(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(env_id, **offline_kwargs(env_id))
        check_env(env.unwrapped)
        obs, info = env.reset(seed=3)  # and through gym.make's checker wrappers
        assert isinstance(obs, str) and obs and "answer" not in info
        obs, reward, terminated, truncated, info = env.step("no idea")
        assert isinstance(obs, str) and isinstance(reward, float) and not truncated
        assert {"turn", "reward_terms", "verifier", "solved"} <= set(info)
        env.close()


def test_check_env_with_a_tokenizer_bound() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("GuessNumber-v0", tokenizer=bpe_chat_tokenizer(CHATML))
        check_env(env.unwrapped)


def test_multi_turn_ids_are_registered_with_their_own_entry_point() -> None:
    assert "GuessNumber-v0" in list_tasks("multi-turn") and "GuessNumber-v0" not in list_tasks("single-turn")
    assert set(list_tasks("multi-turn")) | set(list_tasks("single-turn")) == set(list_tasks())
    spec = gym.spec("GuessNumber-v0")
    assert spec.entry_point == "dapo_env.multiturn:MultiTurnEnv" and spec.vector_entry_point is None
    assert get_task("GuessNumber-v0").turns == "multi-turn" and get_task("Arithmetic-v0").turns == "single-turn"
    assert isinstance(gym.make("dapo_env:GuessNumber-v0").unwrapped, MultiTurnEnv)
    with pytest.raises(ValueError, match="turns must be one of"):
        list_tasks("multiturn")


def test_bisection_solves_every_target_within_k() -> None:
    env = gym.make("GuessNumber-v0", size=400)
    problems = env.unwrapped.problems
    index_of = {}
    for i, p in enumerate(problems):
        index_of.setdefault(int(p.answer), i)
    assert sorted(index_of) == list(range(1, 17))  # every target occurs, so every target is tried below
    for target, index in index_of.items():
        replies, rewards, info = _play(env, _bisect(16), options={"index": index})
        assert replies[-1] == "correct" and sum(rewards) == 1.0 and len(replies) <= 5, target
        assert info["solved"] and info["episode_return"] == 1.0 and info["trajectory"].num_turns == len(replies)
    for seed in range(200):  # and on random draws of the default env
        replies, rewards, _ = _play(env, _bisect(16), seed=seed)
        assert replies[-1] == "correct" and len(replies) <= 5


@pytest.mark.parametrize("n,k", [(2, 2), (7, 3), (100, 7), (1000, 10)])
def test_bisection_wins_with_the_bisection_bound_for_other_knobs(n: int, k: int) -> None:
    env = gym.make("GuessNumber-v0", n=n, k=k, size=100)
    assert k == n.bit_length()
    for seed in range(60):
        replies, _, _ = _play(env, _bisect(n), seed=seed)
        assert replies[-1] == "correct" and len(replies) <= k


def _rate(env: gym.Env, policy, episodes: int) -> float:
    wins = sum(_play(env, policy, seed=s)[2]["solved"] for s in range(episodes))
    return wins / episodes


def test_policies_that_ignore_the_replies_succeed_at_most_k_over_n() -> None:
    env = gym.make("GuessNumber-v0")
    episodes, bound = 1500, 5 / 16
    slack = 3 * np.sqrt(bound * (1 - bound) / episodes)  # three standard errors of a rate at the bound
    rng = np.random.default_rng(0)
    fixed = lambda guesses, replies: f"Answer: {len(guesses) + 1}"  # noqa: E731  1, 2, 3, 4, 5
    spread = lambda guesses, replies: f"Answer: {[8, 4, 12, 2, 14][len(guesses)]}"  # noqa: E731
    random_distinct = lambda guesses, replies: f"Answer: {rng.permutation(16)[len(guesses)] + 1}"  # noqa: E731
    same = lambda guesses, replies: "Answer: 8"  # noqa: E731
    for policy in (fixed, spread):
        assert _rate(env, policy, episodes) <= bound + slack
    assert _rate(env, random_distinct, episodes) <= bound + slack
    assert _rate(env, same, episodes) <= 1 / 16 + 3 * np.sqrt(1 / 16 * 15 / 16 / episodes)
    assert _rate(env, _bisect(16), 300) == 1.0


def test_unparseable_and_out_of_range_turns_are_wasted_with_a_reply_saying_how_to_answer() -> None:
    env = MultiTurnEnv("GuessNumber-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("I have no idea")
    assert 'Answer: <integer>' in obs and "from 1 to 16" in obs and reward == 0.0 and not terminated
    assert info["verifier"]["reason"] == "no_guess" and info["turn_info"]["guesses_left"] == 4
    obs, *_ , info = env.step("Answer: 40")
    assert "out of range" in obs and "1 to 16" in obs and info["turn_info"]["guesses_left"] == 3
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step("pass")
    assert terminated and not truncated and info["num_turns"] == 5 and not info["solved"]
    assert info["episode_return"] == 0.0 and info["truncated_by"] is None


def test_the_answer_never_leaks_into_observations_or_reset_info() -> None:
    env = MultiTurnEnv("GuessNumber-v0", size=300)
    by_target: dict[int, list[int]] = {}
    for i, p in enumerate(env.problems):
        by_target.setdefault(int(p.answer), []).append(i)
    seen = set()
    for target, indices in by_target.items():
        obs, info = env.reset(options={"index": indices[0]})
        seen.add((obs, tuple(sorted((k, v) for k, v in info.items() if k != "problem_id"))))
        reply = env.step("Answer: 8")[0]  # a reply depends only on how the guess compares with the target
        assert reply == ("correct" if target == 8 else "higher" if target > 8 else "lower")
    assert len(seen) == 1  # the first observation and reset info are the same whatever the target


def test_determinism_under_a_seed() -> None:
    def run(seed: int) -> tuple:
        env = MultiTurnEnv("GuessNumber-v0")
        replies, rewards, info = _play(env, _bisect(16), seed=seed)
        return replies, rewards, info["problem_id"], info["trajectory"]

    assert run(7) == run(7)
    assert len({run(s)[2] for s in range(6)}) > 1


def test_step_errors_are_clear() -> None:
    env = MultiTurnEnv("GuessNumber-v0")
    with pytest.raises(RuntimeError, match="before reset"):
        env.step("Answer: 3")
    env.reset(seed=0)
    for bad in (3, None, ["Answer: 3"], b"Answer: 3"):
        with pytest.raises(TypeError, match="str or a dapo_env.Completion"):
            env.step(bad)
    _play(env, _bisect(16), seed=0)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("Answer: 3")
    with pytest.raises(ValueError, match="max_turns"):
        MultiTurnEnv("GuessNumber-v0", max_turns=0)
    with pytest.raises(ValueError, match="need a tokenizer"):
        MultiTurnEnv("GuessNumber-v0", system_prompt="hi")
    with pytest.raises(TypeError, match="apply_chat_template"):
        MultiTurnEnv("GuessNumber-v0", tokenizer=object())
    with pytest.raises(ValueError, match="render_mode"):
        MultiTurnEnv("GuessNumber-v0", render_mode="rgb_array")


def test_max_turns_truncates() -> None:
    env = MultiTurnEnv("GuessNumber-v0", k=10, max_turns=3)
    env.reset(seed=0)
    for turn in range(3):
        obs, reward, terminated, truncated, info = env.step("pass")
    assert truncated and not terminated and info["truncated_by"] == "max_turns" and info["num_turns"] == 3
    assert info["trajectory"].truncated and info["trajectory"].finish_reason == "length"


def test_max_episode_tokens_truncates_before_the_context_overflows() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    env = MultiTurnEnv("GuessNumber-v0", tokenizer=tok, max_episode_tokens=40)
    env.reset(seed=0)
    truncated = terminated = False
    while not (truncated or terminated):
        _, _, terminated, truncated, info = env.step("pass")  # never a guess: only the budget can end it early
    traj = info["trajectory"]
    assert truncated and info["truncated_by"] == "max_episode_tokens" and len(traj.token_ids) < 40
    assert traj.num_turns < 5 and traj.turns[-1].num_reply_tokens == 0


def test_a_single_turn_task_is_a_one_turn_episode() -> None:
    env = MultiTurnEnv("Arithmetic-v0")
    env.reset(seed=0)
    answer = env.episode.problem.answer
    obs, reward, terminated, truncated, info = env.step(f"Answer: {answer}")
    assert (obs, reward, terminated, truncated, info["solved"]) == ("", 1.0, True, False, True)
    assert info["verifier"]["reason"].startswith("equal") and info["trajectory"].num_turns == 1


def test_sync_vector_env_plays_episodes_of_different_lengths() -> None:
    envs = gym.make_vec("GuessNumber-v0", num_envs=3, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    finished = 0
    for _ in range(12):
        obs, rewards, terminated, truncated, infos = envs.step(["Answer: 8"] * 3)
        finished += int(np.sum(terminated | truncated))
    assert finished >= 3
    envs.close()


def test_render_ansi_shows_the_transcript() -> None:
    env = MultiTurnEnv("GuessNumber-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step("Answer: 8")
    text = env.render()
    assert text.startswith("[prompt] I am thinking") and "[assistant] Answer: 8" in text and "[env] " in text


# -- the one-method recipe ------------------------------------------------------------------------------------
class Countdown:
    """Say "go" after the assistant counts down from 3 to 1, one number per turn (a wrong number costs 0.1)."""

    def respond(self, history, action, verdict):
        expected = 3 - sum(m["content"] == "next" for m in history.messages[1:] if m["role"] == "user")
        if action.text.strip() != str(expected):
            return Turn(f"say {expected}", reward=-0.1, done=history.turn >= 4)
        return Turn("go" if expected == 1 else "next", reward=1.0 if expected == 1 else 0.0,
                    done=expected == 1, solved=expected == 1)


def test_a_new_environment_is_one_method() -> None:
    task = Task(name="CountDownGame", source=GuessNumberSource(), verifier=GuessVerifier(), interaction=Countdown(),
                prompt_template="Count down from 3, one number per turn.")
    register_task(task)
    try:
        env = gym.make("CountDownGame-v0", size=3)
        check_env(env.unwrapped)
        env.reset(seed=0)
        steps = [env.step(text) for text in ("3", "7", "2", "1")]
        assert [s[0] for s in steps] == ["next", "say 2", "next", "go"]
        assert [s[1] for s in steps] == [0.0, -0.1, 0.0, 1.0] and steps[-1][2]
        info = steps[-1][-1]
        assert info["episode_return"] == pytest.approx(0.9) and info["solved"]
    finally:
        unregister_task("CountDownGame-v0")


def test_a_respond_that_returns_something_else_is_a_clear_error() -> None:
    class Broken:
        def respond(self, history, action, verdict):
            return "lower", 0.0, False

    task = Task(name="Broken", source=GuessNumberSource(), verifier=GuessVerifier(), interaction=Broken())
    env = MultiTurnEnv(task, size=2)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="Broken.respond must return a dapo_env.types.Turn"):
        env.step("Answer: 3")
    with pytest.raises(TypeError, match="respond"):
        Task(name="NoRespond", source=GuessNumberSource(), verifier=GuessVerifier(), interaction=object())


def test_turn_and_trajectory_validation() -> None:
    with pytest.raises(ValueError, match="must sum to reward"):
        Turn("x", 1.0, terms={"a": 0.5})
    with pytest.raises(TypeError, match="reply must be a str"):
        Turn(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role"):
        Turn("x", role="assistant")
    env = MultiTurnEnv("GuessNumber-v0", tokenizer=bpe_chat_tokenizer(CHATML))
    _play(env, _bisect(16), seed=1)
    traj = env.trajectory
    with pytest.raises(ValueError, match="aligned"):
        Trajectory(traj.prompt, traj.turns, prompt_token_ids=traj.prompt_token_ids, token_ids=traj.token_ids,
                   sampled_mask=traj.sampled_mask[:-1])
    with pytest.raises(ValueError, match="account for"):
        Trajectory(traj.prompt, traj.turns[:1], prompt_token_ids=traj.prompt_token_ids, token_ids=traj.token_ids,
                   sampled_mask=traj.sampled_mask)
    with pytest.raises(ValueError, match="at least one"):
        Trajectory("p", ())


def test_completion_actions_carry_lengths_and_finish_reasons() -> None:
    env = MultiTurnEnv("GuessNumber-v0")
    env.reset(seed=0)
    _, _, _, _, info = env.step(Completion("Answer: 1", num_tokens=4, finish_reason="length"))
    assert info["response_length"] == 4 and info["response_truncated"]
    assert "reply_token_ids" not in info  # no tokenizer bound: text only
    assert env.trajectory.token_ids is None and env.trajectory.turns[0].reply_text.startswith("\n")


def test_any_actions_end_within_k_turns_with_replies_that_only_compare() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    env = MultiTurnEnv("GuessNumber-v0", size=64)
    actions = st.one_of(st.text(max_size=40), st.integers(-5, 25).map(lambda g: f"Answer: {g}"),
                        st.integers(1, 16).map(str))

    @settings(max_examples=150, deadline=None)
    @given(st.integers(0, 63), st.lists(actions, min_size=5, max_size=5))
    def check(index: int, texts: list[str]) -> None:
        env.reset(options={"index": index})
        target = int(env.episode.problem.answer)
        for turn, text in enumerate(texts):
            reply, reward, terminated, truncated, info = env.step(text)
            guess = info["turn_info"]["guess"]
            if guess is not None and 1 <= guess <= 16:
                assert reply == ("correct" if guess == target else "higher" if guess < target else "lower")
            elif guess is None:  # the how-to-answer replies are fixed texts: they cannot depend on the target
                assert reply == 'no guess found: answer with "Answer: <integer>", an integer from 1 to 16'
            else:
                assert reply == f"{guess} is out of range: guess an integer from 1 to 16"
            assert reward == (1.0 if reply == "correct" else 0.0) and not truncated
            if terminated:
                assert reply == "correct" or turn == 4
                assert info["episode_return"] == reward and info["solved"] == (reply == "correct")
                break
        assert terminated

    check()


# (the data-backed ids play other games: their vector test is in tests/tasks/test_multiturn_tasks.py; HiddenTable's
# is in tests/tasks/test_hidden_table.py; the program feedback tasks' in tests/tasks/test_program_tasks.py)
@pytest.mark.parametrize("env_id", [i for i in list_tasks("multi-turn") if i not in OFFLINE_DATA
                                    and i not in ("HiddenTable-v0", "CppPickFeedback-v0", "JSFunctionsFeedback-v0")])
def test_make_vec_with_gymnasiums_defaults_on_every_multi_turn_id(env_id: str) -> None:
    """Sync and async vector envs with default arguments play whole episodes (same-step autoreset: the step
    that ends an episode returns the next episode's prompt, its last reply in final_obs)."""
    for mode in ("sync", "async"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode)
        obs, _ = envs.reset(seed=0)
        prompt = obs[0]
        ended = 0
        for _ in range(5):  # a never-guessing policy wastes every turn: 5 turns end every game
            obs, rewards, terminated, truncated, infos = envs.step(("pass", "pass"))
            ended += int(terminated.sum())
        assert ended == 2 and tuple(obs) == (prompt, prompt) and rewards.tolist() == [0.0, 0.0]
        assert infos["_final_obs"].all() and all("Answer: <integer>" in o for o in infos["final_obs"])
        envs.close()
