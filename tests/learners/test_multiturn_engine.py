"""HFEngine.generate_turns: multi-turn generation with each episode's KV cache kept across turns.

The reference is the same engine with ``reuse_kv=False``, which prefills the whole history every turn:
under the same seeds both must sample the same tokens with the same log-probs, on real GuessNumber
episodes (chat template bound, token-exact contexts), while the reusing engine prefills only the
environment's new tokens.
"""

from __future__ import annotations

import copy
import functools
import itertools

import pytest
import torch

from dapo_env import EpisodeGroupEnv, TurnRequest
from dapo_env.learners.engines import HFEngine, SamplingParams
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

torch.set_num_threads(1)
SAMPLING = dict(temperature=1.0, max_response_tokens=8)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return build_tiny_model(tok, hidden_size=64, layers=2, heads=2, max_positions=512, seed=0)


def play(engine: HFEngine, tok, *, seed: int = 0, num_prompts: int = 3, group_size: int = 3,
         log: list[list[TurnRequest]] | None = None):
    """Roll out GuessNumber episodes through ``engine.generate_turns`` (a fresh seed per turn call)."""
    calls = itertools.count()

    def generate(requests: list[TurnRequest]):
        if log is not None:
            log.append(list(requests))
        return engine.generate_turns(requests, SamplingParams(**SAMPLING, seed=1000 * seed + next(calls)))

    with EpisodeGroupEnv("GuessNumber-v0", num_envs=num_prompts * group_size, group_size=group_size, tokenizer=tok,
                         max_turns=4, max_episode_tokens=200) as env:
        env.reset(seed=seed)
        return [t for g in env.rollout(generate).groups for t in g.completions]


def assert_same_episodes(a, b) -> None:
    assert [t.token_ids for t in a] == [t.token_ids for t in b]
    assert [t.sampled_mask for t in a] == [t.sampled_mask for t in b]
    for x, y in zip(a, b):
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=2e-5, rtol=0)


def test_kv_reuse_samples_equal_a_full_reprefill(tok, model) -> None:
    reuse, log = HFEngine(model, tok, batch_size=64), []
    again = HFEngine(model, tok, batch_size=64, reuse_kv=False)
    a, b = play(reuse, tok, log=log), play(again, tok)
    assert_same_episodes(a, b)
    assert len(log) >= 3  # several turns, so later turns ran on kept caches
    stats, full = reuse.turn_stats, again.turn_stats
    assert stats["hits"] == sum(len(r) for r in log[1:]) and stats["misses"] == len(log[0])
    # after the first turn only the environment's reply and the one sampled token whose keys were never
    # computed (the turn's last) are prefilled; the shared prompt is prefilled once for all episodes
    prompt = len(log[0][0].context_token_ids)
    replies = sum(1 + turn.num_reply_tokens for t in a for turn in t.turns[:-1])
    assert stats["prefilled_tokens"] == prompt + replies
    history = sum(len(r.context_token_ids) for requests in log[1:] for r in requests)
    assert stats["reused_tokens"] == history - replies
    assert full["prefilled_tokens"] == prompt + history and full["reused_tokens"] == 0


def test_logprobs_equal_teacher_forcing_on_the_whole_trajectory(tok, model) -> None:
    """What the learner computes on the trajectory (one forward over prompt + all turns and replies)
    equals the engine's log-probs of every sampled token."""
    trajectories = play(HFEngine(model, tok), tok, seed=3, num_prompts=2, group_size=2)
    for t in trajectories:
        ids = torch.tensor([t.prompt_token_ids + t.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)  # (L, V)
        start = len(t.prompt_token_ids)
        own = logp[start - 1:-1].gather(-1, torch.tensor(t.token_ids)[:, None]).squeeze(-1)
        mask = torch.tensor(t.sampled_mask, dtype=torch.bool)
        torch.testing.assert_close(own[mask], torch.tensor(t.logprobs)[mask], atol=2e-5, rtol=0)


def test_chunks_and_evictions_still_equal_the_reference(tok, model) -> None:
    """Batches split into chunks, and a memory bound that evicts caches (mixed cached / uncached rows in
    one batch), sample exactly what the re-prefilling engine samples."""
    small = HFEngine(model, tok, batch_size=4, max_kv_bytes=1_000_000)
    a = play(small, tok, seed=5)
    b = play(HFEngine(model, tok, batch_size=4, reuse_kv=False), tok, seed=5)
    assert_same_episodes(a, b)
    stats = small.turn_stats
    assert stats["evictions"] > 0 and stats["hits"] > 0 and stats["kv_bytes"] <= 1_000_000


def test_caches_are_dropped_when_episodes_end_or_weights_change(tok, model) -> None:
    engine = HFEngine(copy.deepcopy(model), tok)
    sampling = SamplingParams(max_response_tokens=4, seed=0)
    requests = [TurnRequest(key=k, turn=0, group=0, messages=(), text="", context_token_ids=(1, 40 + i, 41))
                for i, k in enumerate("abc")]
    out = engine.generate_turns(requests, sampling)
    assert len(engine.kv) == 3
    follow = [TurnRequest(key="a", turn=1, group=0, messages=(), text="",
                          context_token_ids=requests[0].context_token_ids + out[0].token_ids + (42,))]
    engine.generate_turns(follow, sampling)
    assert len(engine.kv) == 1 and engine.turn_stats["dropped"] == 2  # b and c ended
    engine.load_weights(engine.model.state_dict())
    engine.generate_turns(follow, sampling)
    assert engine.turn_stats["hits"] == 1 and engine.turn_stats["misses"] == 4  # new weights: re-prefilled
    engine.release()
    assert len(engine.kv) == 0 and engine.turn_stats["kv_bytes"] == 0


def test_a_foreign_cache_under_the_same_key_is_never_used(tok, model) -> None:
    engine, fresh = HFEngine(model, tok), HFEngine(model, tok, reuse_kv=False)
    sampling = SamplingParams(max_response_tokens=6, seed=3)
    first = TurnRequest(key="0:0:0", turn=0, group=0, messages=(), text="", context_token_ids=(1, 40, 41, 42))
    engine.generate_turns([first], sampling)
    other = TurnRequest(key="0:0:0", turn=1, group=0, messages=(), text="", context_token_ids=(1, 50, 51, 52, 53))
    got, = engine.generate_turns([other], sampling)
    want, = fresh.generate_turns([other], sampling)
    assert got.token_ids == want.token_ids and engine.turn_stats["hits"] == 0


def test_budgets_text_requests_and_errors(tok, model) -> None:
    engine = HFEngine(model, tok)
    sampling = SamplingParams(temperature=1.0, max_response_tokens=6, seed=0)
    requests = [TurnRequest(key="a", turn=0, group=0, messages=(), text="", context_token_ids=(1, 40), tokens_left=2),
                TurnRequest(key="b", turn=0, group=0, messages=(), text="12+3=", tokens_left=None),
                TurnRequest(key="c", turn=0, group=0, messages=(), text="", context_token_ids=(1, 40), tokens_left=0)]
    short, text, empty = engine.generate_turns(requests, sampling)
    assert short.num_tokens <= 2 and (short.finish_reason == "stop" or short.num_tokens == 2)
    assert text.prompt_token_ids == tuple(tok("12+3=")["input_ids"]) and text.num_tokens <= 6
    assert (empty.num_tokens, empty.finish_reason, empty.token_ids) == (0, "length", ())
    with pytest.raises(ValueError, match="share an episode key"):
        engine.generate_turns(requests[:1] * 2, sampling)
    long = TurnRequest(key="z", turn=0, group=0, messages=(), text="", context_token_ids=(40,) * 510)
    with pytest.raises(ValueError, match="max_episode_tokens"):
        engine.generate_turns([long], sampling)


def test_greedy_turns_match_generate(tok, model) -> None:
    """A first turn through generate_turns samples what generate samples for the same prompt ids."""
    engine = HFEngine(model, tok)
    sampling = SamplingParams(temperature=0.8, max_response_tokens=8, seed=9)
    ids = tuple(tok("What is 3*4?")["input_ids"])
    turns = engine.generate_turns([TurnRequest(key=str(i), turn=0, group=0, messages=(), text="",
                                               context_token_ids=ids) for i in range(3)], sampling)
    plain = engine.generate(["What is 3*4?"], n=3, sampling=sampling)[0]
    assert [c.token_ids for c in turns] == [c.token_ids for c in plain]


def test_only_new_tokens_reach_the_model(tok, model) -> None:
    """The model's forward sees the new tokens of each turn, not the history (widths recorded)."""
    wrapped = copy.deepcopy(model)
    inner = wrapped.forward
    widths: list[int] = []

    @functools.wraps(inner)
    def recording(*args, **kwargs):
        widths.append(int(kwargs["input_ids"].shape[1]))
        return inner(*args, **kwargs)

    wrapped.forward = recording
    engine = HFEngine(wrapped, tok)
    prompt = tuple(4 + i % 90 for i in range(100))  # 100 tokens
    sampling = SamplingParams(max_response_tokens=3, seed=0)
    first, = engine.generate_turns([TurnRequest("e", 0, 0, (), "", prompt)], sampling)
    assert widths[0] == 100
    widths.clear()
    engine.generate_turns([TurnRequest("e", 1, 0, (), "", prompt + first.token_ids + (7, 8, 9))], sampling)
    assert widths[0] == 4  # the last sampled token + 3 reply tokens
