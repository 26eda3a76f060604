from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dapo_env import ChatTemplate, Completion, OverlongFilter, ReasoningEnv, RewardMap, SoftOverlongPenalty
from dapo_env.shaping import map_reward, soft_overlong_penalty

REPO = Path(__file__).resolve().parents[2]
MAX, CACHE = 20480, 4096  # the paper's defaults: the penalty starts after 16384 tokens


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (0, 0.0),
        (MAX - CACHE, 0.0),
        (MAX - CACHE + 1, -1 / CACHE),
        (MAX - CACHE // 2, -0.5),
        (MAX, -1.0),
        (MAX + 1, -1.0),
        (10**7, -1.0),
    ],
)
def test_soft_overlong_penalty_boundaries(length: int, expected: float) -> None:
    assert soft_overlong_penalty(length) == pytest.approx(expected, abs=1e-12)
    assert soft_overlong_penalty(length, max_response_tokens=MAX, cache_length=CACHE, factor=0.5) == pytest.approx(expected / 2)


def test_soft_overlong_penalty_small_settings_exact_values() -> None:
    values = [soft_overlong_penalty(n, max_response_tokens=10, cache_length=4, factor=2.0) for n in range(4, 13)]
    assert values == pytest.approx([0.0, 0.0, 0.0, -0.5, -1.0, -1.5, -2.0, -2.0, -2.0])
    assert soft_overlong_penalty(10, max_response_tokens=10, cache_length=10) == -1.0  # cache == max: ramp from 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_response_tokens": 10, "cache_length": 11}, "lower cache_length"),
        ({"max_response_tokens": 0, "cache_length": 1}, "max_response_tokens"),
        ({"max_response_tokens": 10, "cache_length": 0}, "cache_length"),
        ({"max_response_tokens": 10, "cache_length": 4, "factor": -1.0}, "factor"),
    ],
)
def test_overlong_arguments_are_validated(kwargs: dict, match: str, toy_task) -> None:
    with pytest.raises(ValueError, match=match):
        soft_overlong_penalty(5, **kwargs)
    with pytest.raises(ValueError, match=match):
        SoftOverlongPenalty(ReasoningEnv(toy_task), **kwargs)


def test_map_reward() -> None:
    assert (map_reward(0.0), map_reward(1.0), map_reward(0.25)) == (-1.0, 1.0, -0.5)
    assert map_reward(1.0, low=0.0, high=5.0) == 5.0
    with pytest.raises(ValueError, match="low < high"):
        map_reward(1.0, low=1.0, high=1.0)


def _step(env, action, index: int = 4):
    env.reset(options={"index": index})  # toy problem 4: "What is 4 + 5?", answer 9
    return env.step(action)


@pytest.mark.parametrize(
    ("length", "penalty"), [(16, 0.0), (17, -0.25), (20, -1.0), (21, -1.0)]
)
def test_soft_overlong_wrapper_adds_and_records_the_term(toy_task, length: int, penalty: float) -> None:
    env = SoftOverlongPenalty(ReasoningEnv(toy_task), max_response_tokens=20, cache_length=4)
    _, reward, _, _, info = _step(env, Completion("Answer: 9", num_tokens=length))
    assert info["reward_terms"] == {"verifier": 1.0, "overlong_penalty": penalty}
    assert reward == pytest.approx(1.0 + penalty)
    assert info["overlong_penalty_applied"] is True


def test_soft_overlong_wrapper_ignores_unknown_length(toy_task) -> None:
    env = SoftOverlongPenalty(ReasoningEnv(toy_task), max_response_tokens=20, cache_length=4)
    _, reward, _, _, info = _step(env, "Answer: 9")
    assert reward == 1.0 and info["reward_terms"]["overlong_penalty"] == 0.0 and not info["overlong_penalty_applied"]


def test_overlong_filter_masks_only_truncated_and_keeps_reward(toy_task) -> None:
    env = OverlongFilter(ReasoningEnv(toy_task, max_response_tokens=50))
    _, reward, _, _, info = _step(env, Completion("Answer: 9", num_tokens=12, finish_reason="length"))
    assert (reward, info["loss_mask"], info["response_truncated"]) == (1.0, False, True)
    _, _, _, _, info = _step(env, Completion("Answer: 9", num_tokens=50))
    assert info["loss_mask"] is False
    _, _, _, _, info = _step(env, Completion("Answer: 9", num_tokens=49))
    assert info["loss_mask"] is True and info["reward_terms"] == {"verifier": 1.0}


def test_reward_map_and_stack_terms_sum_to_the_reward(toy_task) -> None:
    base = ReasoningEnv(toy_task)
    env = RewardMap(OverlongFilter(SoftOverlongPenalty(base, max_response_tokens=20, cache_length=4, factor=0.5)))
    for text, length, finish, want in [
        ("Answer: 9", 18, "stop", 1.0 - 0.25),
        ("Answer: 8", 18, "stop", -1.0 - 0.25),
        ("Answer: 9", 30, "length", 1.0 - 0.5),
        ("Answer: 8", 3, "stop", -1.0),
    ]:
        _, reward, _, _, info = _step(env, Completion(text, num_tokens=length, finish_reason=finish))
        assert reward == pytest.approx(want)
        assert sum(info["reward_terms"].values()) == pytest.approx(reward)
        assert info["loss_mask"] is (finish != "length")
    with pytest.raises(ValueError, match="low < high"):
        RewardMap(base, low=1.0, high=0.0)
    twice = RewardMap(RewardMap(base))
    with pytest.raises(ValueError, match="applied twice"):
        _step(twice, "Answer: 9")


class FakeChatTokenizer:
    """Duck-typed stand-in for a transformers tokenizer's chat template."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        self.calls.append({"tokenize": tokenize, "add_generation_prompt": add_generation_prompt})
        body = "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages)
        return body + ("<|assistant|>" if add_generation_prompt else "")


def test_chat_template_formats_reset_and_step_observations(toy_task) -> None:
    tok = FakeChatTokenizer()
    env = ChatTemplate(ReasoningEnv(toy_task), tok, system_prompt="Be brief.")
    obs, _ = env.reset(options={"index": 4})
    assert obs == "<|system|>Be brief.<|end|><|user|>Solve: What is 4 + 5?\nEnd with 'Answer: N'.<|end|><|assistant|>"
    assert tok.calls[-1] == {"tokenize": False, "add_generation_prompt": True}
    step_obs, reward, *_ = env.step("Answer: 9")
    assert step_obs == obs and reward == 1.0
    assert env.observation_space.contains(obs)
    no_system, _ = ChatTemplate(ReasoningEnv(toy_task), tok).reset(options={"index": 4})
    assert no_system.startswith("<|user|>")
    with pytest.raises(TypeError, match="apply_chat_template"):
        ChatTemplate(ReasoningEnv(toy_task), object())


def test_every_shaping_term_applied_twice_raises(toy_task) -> None:
    base = ReasoningEnv(toy_task)
    for wrapper in (lambda e: SoftOverlongPenalty(e, max_response_tokens=20, cache_length=4), RewardMap):
        with pytest.raises(ValueError, match="applied twice"):
            _step(wrapper(wrapper(base)), Completion("Answer: 9", num_tokens=3))


def test_missing_token_count_warns_once_per_process() -> None:
    """A penalty configured but no token count: the penalty is 0, flagged per response, warned once."""
    code = textwrap.dedent("""
        import warnings
        from dapo_env import GroupVectorEnv, ReasoningEnv, SoftOverlongPenalty
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = SoftOverlongPenalty(ReasoningEnv("Arithmetic-v0"), max_response_tokens=20, cache_length=4)
            for _ in range(3):
                env.reset(seed=0)
                info = env.step("Answer: 1")[-1]
                assert info["overlong_penalty_applied"] is False and info["reward_terms"]["overlong_penalty"] == 0.0
            vec = GroupVectorEnv("Arithmetic-v0", num_envs=4, group_size=2, overlong_penalty=True)
            vec.reset(seed=0)
            groups = vec.step_groups(["Answer: 1"] * 4)
            assert all(i["overlong_penalty_applied"] is False for g in groups for i in g.infos)
        print(sum("no token count" in str(w.message) for w in caught))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "1"
