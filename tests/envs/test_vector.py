from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from env_helpers import ScriptedPolicy, answer_book, fixture_kwargs

from dapo_env import Completion, GroupVectorEnv
from dapo_env.tasks import get_task, list_tasks
from dapo_env.shaping import OverlongPenalty, map_reward, soft_overlong_penalty


def _make(dapo_file: Path, b: int = 4, g: int = 4, **kwargs) -> GroupVectorEnv:
    env = gym.make_vec("DAPOMath-v0", num_envs=b * g, vectorization_mode="vector_entry_point", group_size=g,
                       data_files=str(dapo_file), **kwargs)
    assert isinstance(env, GroupVectorEnv)
    return env


def test_make_vec_builds_the_group_env_with_group_major_prompts(dapo_file: Path) -> None:
    env = _make(dapo_file, b=3, g=5)
    assert (env.num_envs, env.group_size, env.num_prompts) == (15, 5, 3)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    prompts, info = env.reset(seed=0)
    assert env.observation_space.contains(prompts) and len(prompts) == 15
    for group in range(3):
        block = prompts[group * 5:(group + 1) * 5]
        assert len(set(block)) == 1
    assert len(set(prompts)) == 3  # drawn without replacement within a step
    assert info["group_id"].tolist() == [0] * 5 + [1] * 5 + [2] * 5
    env.close()


def test_reset_is_deterministic_under_seed(dapo_file: Path) -> None:
    def draws(seed: int) -> list[tuple[str, ...]]:
        env = _make(dapo_file)
        out = [env.reset(seed=seed)[0]]
        for _ in range(3):
            out.append(env.step(["Answer: 1"] * 16)[0])
        env.close()
        return out

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)


def test_step_verifies_groups_and_reports_group_statistics(dapo_file: Path) -> None:
    env = _make(dapo_file, b=3, g=4)
    prompts, _ = env.reset(seed=0)
    book = answer_book(env.task, env.problems)
    # group 0: all right; group 1: 2 of 4 right; group 2: all wrong (no answer at all)
    right = [True] * 4 + [True, False, True, False] + [False] * 4
    actions = [Completion(f"Answer: {book[p]}" if ok else "I give up.", num_tokens=7) for p, ok in zip(prompts, right)]
    next_prompts, rewards, terminated, truncated, infos = env.step(actions)
    assert rewards.tolist() == [1.0 if ok else 0.0 for ok in right]
    assert terminated.all() and not truncated.any()
    assert infos["correct"].tolist() == right
    assert infos["group_num_correct"].tolist() == [4] * 4 + [2] * 4 + [0] * 4
    assert infos["group_accuracy"].tolist() == [1.0] * 4 + [0.5] * 4 + [0.0] * 4
    assert infos["group_informative"].tolist() == [False] * 4 + [True] * 4 + [False] * 4
    assert infos["reason"][8] == "no_answer" and infos["response_length"].tolist() == [7] * 12
    assert infos["reward_terms"]["verifier"].tolist() == rewards.tolist()
    assert all(infos[f"_{k}"].all() for k in ("correct", "group_id", "problem_id", "loss_mask"))
    # same-step autoreset: the returned observations are already the next prompts
    assert tuple(infos["final_obs"]) == prompts
    assert next_prompts == env.prompts and next_prompts != prompts
    assert list(infos["next_problem_id"][::4]) == [env.problems[i].id for i in env.state_dict()["indices"]]
    env.close()


def test_shaping_options_match_the_pure_functions(dapo_file: Path) -> None:
    env = _make(dapo_file, b=2, g=4, max_response_tokens=20, reward_map=(-1.0, 1.0), overlong_filter=True,
                overlong_penalty={"max_response_tokens": 20, "cache_length": 8, "factor": 1.0})
    prompts, _ = env.reset(seed=0)
    book = answer_book(env.task, env.problems)
    lengths = [5, 12, 13, 20, 25, 16, 3, 9]
    finish = ["stop"] * 4 + ["length"] + ["stop"] * 3
    actions = [Completion(f"Answer: {book[p]}" if i % 2 else "Answer: -1", num_tokens=n, finish_reason=f)
               for i, (p, n, f) in enumerate(zip(prompts, lengths, finish))]
    _, rewards, _, _, infos = env.step(actions)
    for i, (n, f) in enumerate(zip(lengths, finish)):
        score = float(i % 2)
        want = map_reward(score) + soft_overlong_penalty(n, max_response_tokens=20, cache_length=8)
        assert rewards[i] == pytest.approx(want)
        assert infos["loss_mask"][i] == (f == "stop" and n < 20)
        terms = infos["reward_terms"]
        assert terms["verifier"][i] + terms["reward_map"][i] + terms["overlong_penalty"][i] == pytest.approx(rewards[i])
    env.close()


def test_shaping_arguments_are_validated(dapo_file: Path) -> None:
    with pytest.raises(ValueError, match="lower cache_length"):
        _make(dapo_file, overlong_penalty={"max_response_tokens": 4, "cache_length": 8})
    with pytest.raises(ValueError, match="unknown keys"):
        _make(dapo_file, overlong_penalty={"max_len": 4})
    with pytest.raises(ValueError, match="low < high"):
        _make(dapo_file, reward_map=(1.0, -1.0))
    with pytest.raises(ValueError, match="multiple of group_size"):
        GroupVectorEnv("DAPOMath-v0", num_envs=4, group_size=3, data_files=str(dapo_file))
    with pytest.raises(TypeError, match="apply_chat_template"):
        _make(dapo_file, tokenizer="not a tokenizer")
    env = _make(dapo_file, overlong_penalty=True)
    assert env.shaping.overlong_penalty == OverlongPenalty(max_response_tokens=20480, cache_length=4096, factor=1.0)
    env.close()


def test_step_errors(dapo_file: Path) -> None:
    env = _make(dapo_file, b=2, g=2)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(["a"] * 4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="expects 4 responses"):
        env.step(["a"] * 3)
    with pytest.raises(TypeError, match="str or a dapo_env.Completion"):
        env.step([1, 2, 3, 4])
    env.close()


def test_reset_options_pick_problems(dapo_file: Path) -> None:
    env = _make(dapo_file, b=2, g=2)
    prompts, info = env.reset(options={"indices": [5, 1]})
    assert list(info["problem_id"]) == [env.problems[5].id] * 2 + [env.problems[1].id] * 2
    _, info = env.reset(options={"ids": [env.problems[3].id, env.problems[0].id]})
    assert info["problem_id"][0] == env.problems[3].id
    with pytest.raises(ValueError, match="indices"):
        env.reset(options={"indices": [1]})
    with pytest.raises(ValueError, match="ids"):
        env.reset(options={"ids": ["nope", "x"]})
    env.close()


def test_chat_template_option(dapo_file: Path) -> None:
    class Tok:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return "".join(f"[{m['role']}]{m['content']}" for m in messages) + "[assistant]"

    env = _make(dapo_file, b=1, g=2, tokenizer=Tok(), system_prompt="sys")
    prompts, _ = env.reset(seed=0)
    assert prompts[0].startswith("[system]sys[user]Solve the following") and prompts[0].endswith("[assistant]")
    env.close()
    with pytest.warns(DeprecationWarning, match="tokenizer=tokenizer"):  # the older keyword still works
        old = _make(dapo_file, b=1, g=2, chat_template=Tok(), system_prompt="sys")
    assert old.reset(seed=0)[0] == prompts
    old.close()


def test_state_dict_round_trip_resumes_the_same_prompts(dapo_file: Path) -> None:
    env = _make(dapo_file)
    env.reset(seed=3)
    env.step(["x"] * 16)
    state = env.state_dict()
    expected = [env.prompts] + [env.step(["x"] * 16)[0] for _ in range(3)]
    env.close()
    fresh = _make(dapo_file)
    assert fresh.needs_reset
    fresh.load_state_dict(state)
    assert [fresh.prompts] + [fresh.step(["x"] * 16)[0] for _ in range(3)] == expected
    fresh.close()


def test_pooled_verification_matches_inline(dapo_file: Path) -> None:
    inline, pooled = _make(dapo_file, b=4, g=4), _make(dapo_file, b=4, g=4, workers=2)
    prompts, _ = inline.reset(seed=5)
    assert pooled.reset(seed=5)[0] == prompts
    policy = ScriptedPolicy(answer_book(inline.task, inline.problems), p_correct=0.5, seed=1)
    actions = policy(list(prompts))
    a, b = inline.step(actions), pooled.step(actions)
    assert a[1].tolist() == b[1].tolist() and a[4]["reason"].tolist() == b[4]["reason"].tolist()
    assert 0 < a[1].sum() < 16
    pids = pooled._pool.pids()
    assert len(pids) == 2
    pooled.close()
    assert pooled._pool._closed
    inline.close()


def _check_std_vector_env(env_id: str, tmp_path: Path, mode: str) -> None:
    kwargs = fixture_kwargs(env_id, tmp_path)
    vector_kwargs = {"shared_memory": False} if mode == "async" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make_vec(env_id, num_envs=4, vectorization_mode=mode, vector_kwargs=vector_kwargs, **kwargs)
    task = get_task(env_id)
    problems = {p.id: p for p in task.load(**kwargs)}
    obs, info = env.reset(seed=0)
    assert isinstance(obs, tuple) and len(obs) == 4
    for _ in range(2):
        for prompt, pid in zip(obs, info["problem_id"]):
            assert prompt == task.format_prompt(problems[pid])  # the right, not stale, string
        obs, rewards, terminated, truncated, info = env.step(("Answer: 0",) * 4)
        assert terminated.all() and not truncated.any() and rewards.shape == (4,)
        if env.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP:
            obs, rewards, terminated, _, info = env.step(("Answer: 0",) * 4)  # the reset step
            assert not terminated.any()
    env.close()


@pytest.mark.parametrize("env_id", list_tasks("single-turn"))
def test_sync_vector_env_on_every_id(env_id: str, tmp_path: Path) -> None:
    _check_std_vector_env(env_id, tmp_path, "sync")


@pytest.mark.parametrize("env_id", list_tasks("single-turn"))
def test_async_vector_env_without_shared_memory_on_every_id(env_id: str, tmp_path: Path) -> None:
    _check_std_vector_env(env_id, tmp_path, "async")


def test_data_task_via_shared_data(shared_data: Path) -> None:
    env = gym.make_vec("DAPOMath-v0", num_envs=64, vectorization_mode="vector_entry_point", group_size=16,
                       data_files=str(shared_data / "dapo_math_17k/dapo_math_17k.jsonl.gz"))
    prompts, _ = env.reset(seed=0)
    book = answer_book(env.task, [env.problems[i] for i in env.state_dict()["indices"]])
    _, rewards, _, _, infos = env.step([f"Answer: {book[p]}" for p in prompts])
    assert rewards.tolist() == [1.0] * 64 and infos["group_informative"].sum() == 0
    assert np.unique(infos["problem_id"]).size == 4
    env.close()


def test_code_task_verifies_in_worker_processes(tmp_path: Path) -> None:
    env = gym.make_vec("MBPP-v0", num_envs=2, vectorization_mode="vector_entry_point", group_size=2, workers=2,
                       **fixture_kwargs("MBPP-v0", tmp_path))
    env.reset(options={"indices": [1]})  # neg(a)
    _, rewards, _, _, infos = env.step(["def neg(a):\n    return -a", "def neg(a):\n    return a"])
    assert rewards.tolist() == [1.0, 0.0]
    assert infos["group_num_correct"].tolist() == [1, 1] and infos["group_informative"].all()
    env.close()


def test_step_groups_is_the_native_output_and_step_its_adapter(dapo_file: Path) -> None:
    a, b = _make(dapo_file, b=2, g=3, reward_map=(-1.0, 1.0)), _make(dapo_file, b=2, g=3, reward_map=(-1.0, 1.0))
    prompts = a.reset(seed=4)[0]
    b.reset(seed=4)
    book = answer_book(a.task, a.problems)
    actions = [Completion(f"Answer: {book[p]}" if i in (0, 4) else "Answer: x", num_tokens=5) for i, p in enumerate(prompts)]
    groups = a.step_groups(actions)
    next_prompts, rewards, _, _, infos = b.step(actions)
    assert next_prompts == a.prompts  # both drew the same next prompts
    assert [g.prompt for g in groups] == list(prompts[::3]) and [len(g.completions) for g in groups] == [3, 3]
    assert [g.correct for g in groups] == [(True, False, False), (False, True, False)]
    assert rewards.tolist() == [r for g in groups for r in g.rewards] == [1.0, -1.0, -1.0, -1.0, 1.0, -1.0]
    assert infos["correct"].tolist() == [c for g in groups for c in g.correct]
    assert infos["loss_mask"].tolist() == [m for g in groups for m in g.loss_mask]
    assert list(infos["reason"]) == [i["reason"] for g in groups for i in g.infos]
    assert groups[0].completions[0] is actions[0]
    a.close(), b.close()


def test_group_env_and_wrapper_stack_shape_identically(dapo_file: Path) -> None:
    """One shaping function: the group env's rewards, terms and masks equal a stack of single-env wrappers'."""
    from dapo_env import OverlongFilter, ReasoningEnv, RewardMap, SoftOverlongPenalty

    shaping = dict(reward_map=(-1.0, 1.0), overlong_penalty={"max_response_tokens": 20, "cache_length": 8, "factor": 0.5},
                   overlong_filter=True)
    vec = _make(dapo_file, b=4, g=4, max_response_tokens=20, **shaping)
    prompts, info = vec.reset(seed=2)
    book = answer_book(vec.task, vec.problems)
    rng = np.random.default_rng(0)
    actions = [Completion(f"Answer: {book[p]}" if rng.random() < 0.5 else "Answer: 0", num_tokens=int(rng.integers(1, 30)),
                          finish_reason="length" if rng.random() < 0.3 else "stop") for p in prompts]
    groups = vec.step_groups(actions)
    single = RewardMap(OverlongFilter(SoftOverlongPenalty(
        ReasoningEnv("DAPOMath-v0", data_files=str(dapo_file), max_response_tokens=20),
        max_response_tokens=20, cache_length=8, factor=0.5)))
    samples = [(g, k) for g in groups for k in range(g.size)]
    for (group, k), action, pid in zip(samples, actions, info["problem_id"]):
        single.reset(options={"id": pid})
        _, reward, _, _, s_info = single.step(action)
        assert group.rewards[k] == pytest.approx(reward, abs=1e-12)
        assert group.loss_mask[k] == s_info["loss_mask"] and group.correct[k] == s_info["correct"]
        assert group.infos[k]["reward_terms"] == pytest.approx(s_info["reward_terms"])
        assert group.infos[k]["overlong_penalty_applied"] is s_info["overlong_penalty_applied"] is True
    vec.close()


def test_rollout_shows_the_prompts_to_generate(dapo_file: Path) -> None:
    env = _make(dapo_file, b=2, g=2)
    env.reset(seed=0)
    seen: list[list[str]] = []

    def generate(prompts: list[str]) -> list[str]:
        seen.append(prompts)
        return ["Answer: 1"] * len(prompts)

    shown = env.prompts
    groups = env.rollout(generate).groups
    assert seen == [list(shown)] and [g.prompt for g in groups] == list(shown[::2])
    with pytest.raises(ValueError, match="one per prompt"):
        env.rollout(lambda prompts: prompts[:-1])
    env.close()


def test_a_plain_function_verifier_returning_a_bool_is_graded(toy_task) -> None:
    """An env user's TRL-style verifier (returns a bool) is wrapped, not scored error:bad_return."""
    import dataclasses

    def ends_with_nine(response: str, reference: str) -> bool:
        return response.endswith("9")

    task = dataclasses.replace(toy_task, verifier=ends_with_nine)
    env = GroupVectorEnv(task, num_envs=2, group_size=2)
    env.reset(seed=0)
    (group,) = env.step_groups(["Answer: 9", "Answer: 8"])
    assert group.correct == (True, False) and group.rewards == (1.0, 0.0)
    assert [i["reason"] for i in group.infos] == ["custom:bool", "custom:bool"]
    env.close()
