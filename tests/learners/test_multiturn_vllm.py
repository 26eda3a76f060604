"""VLLMEngine.generate_turns: multi-turn episodes sent as exact token ids, history served by prefix caching.

Skips (reason under ``-rs``) where vLLM is not importable; the vLLM CI stage (``.ci/vllm_stage.sh``) sets
``DAPO_REQUIRE_VLLM=1`` so that it fails there instead.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
import torch
from optional_extras import vllm_marks

from dapo_env import EpisodeGroupEnv, TurnRequest
from dapo_env.learners.engines import SamplingParams, TurnEngine
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

pytestmark = vllm_marks("the vLLM multi-turn tests")


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[object, torch.nn.Module, object]]:
    from dapo_env.learners.engines.vllm_engine import VLLMEngine

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    tok = build_tokenizer()
    learner = build_tiny_model(tok, hidden_size=64, layers=2, heads=2, max_positions=512, seed=0)
    engine = VLLMEngine(learner, tok, dtype="float32", cpu_kv_cache_gib=0.125)
    yield engine, learner, tok
    engine.close()


def play(engine, tok, seed: int, log: list[list[tuple[TurnRequest, object]]]):
    calls = itertools.count()

    def generate(requests: list[TurnRequest]):
        out = engine.generate_turns(requests, SamplingParams(max_response_tokens=8, seed=1000 * seed + next(calls)))
        log.append(list(zip(requests, out)))
        return out

    with EpisodeGroupEnv("GuessNumber-v0", num_envs=6, group_size=3, tokenizer=tok, max_turns=4,
                         max_episode_tokens=200) as env:
        env.reset(seed=seed)
        return [t for g in env.rollout(generate).groups for t in g.completions]


def test_turns_condition_on_the_exact_context_and_reuse_the_prefix_cache(setup) -> None:
    engine, learner, tok = setup
    assert isinstance(engine, TurnEngine)
    engine.load_weights(learner)
    log: list[list[tuple[TurnRequest, object]]] = []
    trajectories = play(engine, tok, seed=0, log=log)
    assert len(log) >= 2
    by_key = {r.key: t for (r, _), t in zip(log[0], trajectories)}
    for call in log:  # every turn was sampled after exactly the trajectory's context at that turn
        for request, completion in call:
            assert completion.prompt_token_ids == request.context_token_ids
            assert by_key[request.key].context(request.turn) == request.context_token_ids
    ids = torch.tensor([trajectories[0].prompt_token_ids + trajectories[0].token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(learner(input_ids=ids).logits[0].float(), -1)  # (L, V)
    t = trajectories[0]
    start = len(t.prompt_token_ids)
    own = logp[start - 1:-1].gather(-1, torch.tensor(t.token_ids)[:, None]).squeeze(-1)
    mask = torch.tensor(t.sampled_mask, dtype=torch.bool)
    torch.testing.assert_close(own[mask], torch.tensor(t.logprobs)[mask], atol=1e-3, rtol=0)
    stats = engine.turn_stats
    assert stats["hits"] >= sum(len(r) for r in log[1:]) and stats["reused_tokens"] > 0
    again: list[list[tuple[TurnRequest, object]]] = []
    assert [x.token_ids for x in play(engine, tok, seed=0, log=again)] == [x.token_ids for x in trajectories]


def test_budgets_and_context_errors(setup) -> None:
    engine, learner, tok = setup
    sampling = SamplingParams(max_response_tokens=6, seed=0)
    short, empty = engine.generate_turns(
        [TurnRequest("a", 0, 0, (), "", (1, 40, 41), tokens_left=2), TurnRequest("b", 0, 0, (), "", (1, 40), tokens_left=0)],
        sampling)
    assert short.num_tokens <= 2 and short.prompt_token_ids == (1, 40, 41)
    assert (empty.num_tokens, empty.finish_reason) == (0, "length")
    with pytest.raises(ValueError, match="max_episode_tokens"):
        engine.generate_turns([TurnRequest("z", 0, 0, (), "", (40,) * 510)], sampling)
