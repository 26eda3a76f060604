"""Token-in/token-out: the tokens a learner trains on are the tokens the engine conditioned on, token for token,
at every turn, with three chat templates built offline (one rewrites earlier turns), through the group env and
through the single Gymnasium env. The engine is scripted: it emits token ids and records every context."""

from __future__ import annotations

import pytest
from multiturn_helpers import (CHATML, ROLE_LINES, THINK_DROPPING, Bisection, ScriptedEngine, bisection_policy,
                               bpe_chat_tokenizer, char_chat_tokenizer, engine_view, guesses_in, learner_view,
                               replies_of)

from dapo_env import ChatTokens, Completion, EpisodeGroupEnv, MultiTurnEnv

TEMPLATES = {
    "chatml-bpe": (lambda: bpe_chat_tokenizer(CHATML), False),
    "think-dropping-bpe": (lambda: bpe_chat_tokenizer(THINK_DROPPING), True),
    "role-lines-char": (lambda: char_chat_tokenizer(ROLE_LINES), False),
}


def _rollout(tokenizer, think: bool, **kwargs) -> tuple[list, ScriptedEngine]:
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=6, group_size=2, tokenizer=tokenizer, **kwargs)
    env.reset(seed=1)
    engine = ScriptedEngine(tokenizer, bisection_policy(think=think))
    groups = env.rollout(engine).groups
    env.close()
    return groups, engine


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_learner_tokens_equal_engine_tokens_at_every_turn(name: str) -> None:
    make, think = TEMPLATES[name]
    tok = make()
    groups, engine = _rollout(tok, think)
    turns_seen = set()
    for b, group in enumerate(groups):
        for g, traj in enumerate(group.completions):
            key = f"0:{b}:{g}"
            turns_seen.add(traj.num_turns)
            assert learner_view(traj) == engine_view(engine, key, traj.num_turns)
            for t in range(traj.num_turns):
                assert traj.context(t) == engine.contexts[(key, t)]
            # environment tokens carry log-prob 0.0 and mask 0; sampled counts match
            assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.sampled_mask) if m == 0)
            assert sum(traj.sampled_mask) == traj.num_tokens == sum(len(engine.sampled[(key, t)][0])
                                                                    for t in range(traj.num_turns))
            prompt = tok.apply_chat_template([{"role": "user", "content": _prompt_content()}], tokenize=False,
                                             add_generation_prompt=True)
            assert traj.prompt_token_ids == tuple(tok.encode(prompt, add_special_tokens=False))
            assert group.correct[g] and traj.turns[-1].reply == "correct"
    assert len(turns_seen) > 1, "the episodes should differ in length"


def _prompt_content() -> str:
    from dapo_env.tasks.guess_number import PROMPT

    return PROMPT.format(n=16, k=5)


@pytest.mark.parametrize("name,suffix", [("chatml-bpe", ""), ("role-lines-char", "\n")])
def test_trajectory_is_the_template_rendering_of_the_conversation(name: str, suffix: str) -> None:
    """For templates that do not rewrite history, the incremental tokens are exactly the tokens of the whole
    conversation rendered at once (the model writes what the template would: content, then its closer)."""
    tok = TEMPLATES[name][0]()
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=2, group_size=1, tokenizer=tok)
    env.reset(seed=4)
    policy = bisection_policy()
    groups = env.rollout(ScriptedEngine(tok, lambda r: policy(r) + suffix)).groups
    for group in groups:
        traj = group.completions[0]
        messages = [{"role": "user", "content": _prompt_content()}]
        for turn in traj.turns:
            messages.append({"role": "assistant", "content": turn.text.removesuffix(suffix)})
            messages.append({"role": "user", "content": turn.reply})
        rendered = tok.apply_chat_template(messages[:-1], tokenize=False)  # up to the last assistant turn
        expected = tok.encode(rendered, add_special_tokens=False)
        got = list(traj.prompt_token_ids + traj.token_ids)
        tail = tok.encode("\n", add_special_tokens=False) if name == "chatml-bpe" else []
        assert got + tail == expected, name  # ChatML writes "\n" after the last <|im_end|>; the model stopped before it


def test_rewriting_template_would_drift_if_re_rendered() -> None:
    """The Qwen3-style template drops earlier <think> blocks when the conversation is rendered again: training
    on such a re-rendering would train on tokens the engine never saw. The trajectory keeps what it saw."""
    tok = TEMPLATES["think-dropping-bpe"][0]()
    groups, engine = _rollout(tok, think=True)
    long = [t for g in groups for t in g.completions if t.num_turns >= 3]
    assert long
    for traj in long:
        messages = [{"role": "user", "content": _prompt_content()}]
        for turn in traj.turns[:-1]:
            messages += [{"role": "assistant", "content": turn.text}, {"role": "user", "content": turn.reply}]
        re_rendered_text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        re_rendered = tok.encode(re_rendered_text, add_special_tokens=False)
        last_context = traj.context(traj.num_turns - 1)
        assert tuple(re_rendered) != last_context  # the re-rendering lost the earlier thinking
        assert tok.decode(last_context).count("<think>") == traj.num_turns - 1  # the engine saw every block
        # the appended delta is what the template renders for the newest message
        assert re_rendered_text.endswith(traj.turns[-2].reply_text) and traj.turns[-2].reply_text.startswith("\n")


def test_a_cut_turn_is_closed_by_environment_tokens() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=4, group_size=1, tokenizer=tok)
    env.reset(seed=0)
    engine = ScriptedEngine(tok, bisection_policy(), cut_turns=[0])
    groups = env.rollout(engine).groups
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    for b, group in enumerate(groups):
        traj = group.completions[0]
        assert traj.turns[0].finish_reason == "length"
        if traj.num_turns > 1:
            n0 = traj.turns[0].num_tokens
            assert traj.token_ids[n0] == im_end and traj.sampled_mask[n0] == 0  # the env closed the turn
            assert traj.context(1) == engine.contexts[(f"0:{b}:0", 1)]
    solved_first = [g.completions[0] for g in groups if g.completions[0].num_turns == 1]
    assert all(t.finish_reason == "length" and t.truncated for t in solved_first)  # last turn cut -> "length"


def test_a_different_stop_token_keeps_the_template_closer() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    endoftext, im_end = tok.convert_tokens_to_ids("<|endoftext|>"), tok.convert_tokens_to_ids("<|im_end|>")
    env = EpisodeGroupEnv("GuessNumber-v0", num_envs=2, group_size=1, tokenizer=tok)
    env.reset(seed=2)
    engine = ScriptedEngine(tok, bisection_policy(), stop_id=endoftext)
    for b, group in enumerate(env.rollout(engine).groups):
        traj = group.completions[0]
        for t in range(traj.num_turns - 1):
            end = sum(x.num_tokens + x.num_reply_tokens for x in traj.turns[:t]) + traj.turns[t].num_tokens
            assert traj.token_ids[end - 1] == endoftext and traj.token_ids[end] == im_end
            assert traj.context(t + 1) == engine.contexts[(f"0:{b}:0", t + 1)]


def test_single_env_token_protocol_by_hand() -> None:
    """A Gymnasium user drives MultiTurnEnv with token ids: prompt ids at reset, reply ids per step; the context
    they build equals the trajectory's, and the trajectory comes back in the last step's info."""
    tok = bpe_chat_tokenizer(THINK_DROPPING)
    env = MultiTurnEnv("GuessNumber-v0", tokenizer=tok, system_prompt="You play a guessing game.")
    obs, info = env.reset(seed=5)
    context = list(info["prompt_token_ids"])
    assert tok.decode(context).startswith("<|im_start|>system\nYou play a guessing game.<|im_end|>\n")
    bisect, guesses, replies, contexts = Bisection(think=True), [], [], []
    terminated = truncated = False
    while not (terminated or truncated):
        contexts.append(tuple(context))
        text = bisect.text(guesses, replies)
        ids = tuple(tok.encode(text, add_special_tokens=False)) + (tok.eos_token_id,)
        obs, reward, terminated, truncated, info = env.step(
            Completion(text, num_tokens=len(ids), token_ids=ids, logprobs=(-0.5,) * len(ids)))
        guesses.append(bisect.guess(guesses, replies))
        replies.append(obs)
        context += list(ids) + list(info["reply_token_ids"])
    traj = info["trajectory"]
    assert traj == env.trajectory and reward == 1.0 and obs == "correct"
    assert [traj.context(t) for t in range(traj.num_turns)] == contexts
    assert traj.prompt_token_ids + traj.token_ids == tuple(context)


def test_template_kwargs_reach_every_rendering() -> None:
    tok = bpe_chat_tokenizer(THINK_DROPPING)
    chat = ChatTokens(tok, template_kwargs={"enable_thinking": False})
    text, ids = chat.prompt("hi")
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    reply_text, _ = chat.reply("higher", stop_token=tok.eos_token_id)
    assert reply_text == "\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_string_actions_are_tokenized_and_closed_by_the_env() -> None:
    tok = bpe_chat_tokenizer(CHATML)
    env = MultiTurnEnv("GuessNumber-v0", tokenizer=tok)
    env.reset(seed=0, options={"index": 0})
    target = int(env.episode.problem.answer)
    guess = 1 if target != 1 else 2
    _, _, _, _, info = env.step(f"Answer: {guess}")
    traj = env.trajectory
    n = traj.turns[0].num_tokens
    assert traj.token_ids[:n] == tuple(tok.encode(f"Answer: {guess}", add_special_tokens=False))
    assert traj.logprobs is None  # a plain string has no engine log-probs
    assert info["reply_token_ids"][0] == tok.eos_token_id  # the environment closed the turn
    assert guesses_in([{"role": "assistant", "content": traj.turns[0].text}]) == [guess]
    assert replies_of([{"role": "user", "content": "p"}, {"role": "user", "content": traj.turns[0].reply}]) == [
        "higher" if guess < target else "lower"]
