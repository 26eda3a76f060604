"""Token-in/token-out on the sandbox-backed multi-turn tasks: on tool and feedback episodes (replies are program
output and test reports, several lines with code fences), the tokens a learner trains on are the tokens the
engine conditioned on, token for token, at every turn, with two chat templates (one rewrites earlier turns),
through the group env and through the single Gymnasium env. The engine is scripted and records every context."""

from __future__ import annotations

import re

import pytest
from multiturn_helpers import engine_view, learner_view, CHATML, OFFLINE_DATA, THINK_DROPPING, ScriptedEngine, bpe_chat_tokenizer

from dapo_env import Completion, EpisodeGroupEnv, MultiTurnEnv, TurnRequest

TEMPLATES = {"chatml": CHATML, "think-dropping": THINK_DROPPING}


def tool_policy(think: bool):
    """Turn 0: a program printing a fixed expression (18, Janet's ducks); turn 1: a program that prints, then
    fails; turn 2: box what the first program printed, read from the conversation."""

    def policy(request: TurnRequest) -> str:
        replies = [m["content"] for m in request.messages if m["role"] == "user"][1:]
        thought = f"<think>\nturn {request.turn}\n</think>\n\n" if think else ""
        if request.turn == 0:
            return thought + "I will compute it.\n```python\nx = (16 - 3 - 4) * 2\nprint(x)\n```"
        if request.turn == 1:
            return thought + "Check a detail.\n```python\nprint('partial')\nraise ValueError('oops')\n```"
        printed = re.search(r"```output\n(.*?)\n```", replies[0], re.DOTALL).group(1)
        return thought + f"The program printed {printed}, so the answer is \\boxed{{{printed}}}."

    return policy


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_tool_episodes_are_token_exact_at_every_turn(name: str) -> None:
    tok = bpe_chat_tokenizer(TEMPLATES[name])
    think = name == "think-dropping"
    env = EpisodeGroupEnv("GSM8KTool-v0", num_envs=4, group_size=2, tokenizer=tok, **OFFLINE_DATA["GSM8KTool-v0"])
    env.reset(seed=0)
    engine = ScriptedEngine(tok, tool_policy(think))
    groups = env.rollout(engine).groups
    env.close()
    for b, group in enumerate(groups):
        for g, traj in enumerate(group.completions):
            key = f"0:{b}:{g}"
            assert traj.num_turns == 3 and traj.turns[0].reply.startswith("```output\n18\n```")
            assert "ValueError: oops" in traj.turns[1].reply and "partial" in traj.turns[1].reply
            assert learner_view(traj) == engine_view(engine, key, traj.num_turns)
            for t in range(traj.num_turns):
                assert traj.context(t) == engine.contexts[(key, t)]
            assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.sampled_mask) if m == 0)
            assert sum(traj.sampled_mask) == traj.num_tokens
            # the reply tokens decode to the reply the environment sent (code fences and all)
            for t, turn in enumerate(traj.turns[:-1]):
                assert turn.reply in tok.decode(traj.context(t + 1)[len(traj.context(t)):])
            if think:  # the engine saw every earlier <think> block: the template's re-rendering would drop them
                assert tok.decode(traj.context(2)).count("<think>") == 2
            assert group.rewards[g] == float(group.correct[g])


def test_feedback_episode_token_protocol_by_hand() -> None:
    """A Gymnasium user drives MBPPFeedback-v0 with token ids: prompt ids at reset, reply ids per step; the
    context built by hand equals the trajectory's at every turn."""
    tok = bpe_chat_tokenizer(THINK_DROPPING)
    env = MultiTurnEnv("MBPPFeedback-v0", tokenizer=tok, system_prompt="You write Python.",
                       **OFFLINE_DATA["MBPPFeedback-v0"])
    obs, info = env.reset(options={"id": "11"})
    context = list(info["prompt_token_ids"])
    attempts = ["<think>\nfirst try\n</think>\n\n```python\ndef remove_Occ(s, ch):\n    return s[1:]\n```",
                "<think>\nthe feedback shows my values\n</think>\n\n```python\ndef remove_Occ(s, ch):\n"
                "    s = s.replace(ch, '', 1)\n    i = s.rfind(ch)\n    return s if i < 0 else s[:i] + s[i + 1:]\n```"]
    contexts = []
    for text in attempts:
        contexts.append(tuple(context))
        ids = tuple(tok.encode(text, add_special_tokens=False)) + (tok.eos_token_id,)
        obs, reward, terminated, truncated, info = env.step(
            Completion(text, num_tokens=len(ids), token_ids=ids, logprobs=(-0.25,) * len(ids)))
        context += list(ids) + list(info["reply_token_ids"])
        if terminated:
            break
    traj = info["trajectory"]
    assert terminated and reward == pytest.approx(0.9) and traj.num_turns == 2
    assert [traj.context(t) for t in range(traj.num_turns)] == contexts
    assert traj.prompt_token_ids + traj.token_ids == tuple(context)
    assert "returned 'ello'" in tok.decode(contexts[1])


@pytest.mark.parametrize("env_id", sorted(OFFLINE_DATA))
def test_check_env_with_a_tokenizer_bound(env_id: str) -> None:
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    tok = bpe_chat_tokenizer(CHATML)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(env_id, tokenizer=tok, **OFFLINE_DATA[env_id])
        check_env(env.unwrapped)
    obs, info = env.reset(seed=1)
    assert tok.decode(info["prompt_token_ids"]).endswith("<|im_start|>assistant\n")
    obs, _, _, _, info = env.step("no idea")
    assert tok.decode(info["reply_token_ids"]).startswith("<|im_end|>") and obs in tok.decode(info["reply_token_ids"])
    env.close()
