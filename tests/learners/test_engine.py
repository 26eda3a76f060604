from __future__ import annotations

import copy
import functools

import pytest
import torch

from dapo_env.learners.engines import (
    HFEngine,
    RolloutEngine,
    SamplingParams,
    collect_eos_ids,
    weights_fingerprint,
)
from dapo_env.learners.engines.hf_engine import _filter_logits
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return build_tiny_model(tok, hidden_size=64, layers=2, heads=2, max_positions=64, seed=0)


class BiasedLM(torch.nn.Module):
    """Wraps a causal LM and adds a fixed bias to its logits (to force chosen tokens)."""

    def __init__(self, inner: torch.nn.Module, bias: torch.Tensor) -> None:
        super().__init__()
        self.inner, self.bias = inner, bias
        self.config, self.generation_config = inner.config, inner.generation_config

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=False, logits_to_keep=0):
        out = self.inner(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            cache=cache, use_cache=use_cache, logits_to_keep=logits_to_keep,
        )
        out.logits = out.logits + self.bias
        return out


def teacher_forced_logprobs(model, prompt_ids, response_ids, temperature):
    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    logits = model(input_ids=ids).logits[0].float() / temperature  # (L, V)
    logp = torch.log_softmax(logits, -1)[len(prompt_ids) - 1 : -1]  # predicts response tokens
    return logp.gather(-1, torch.tensor(response_ids)[:, None]).squeeze(-1)


def test_sampling_params_validation() -> None:
    for bad in (dict(temperature=-1), dict(top_p=0), dict(top_p=1.5), dict(top_k=-1), dict(max_response_tokens=0)):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def test_shapes_protocol_and_group_major_order(tok, model) -> None:
    engine = HFEngine(model, tok, batch_size=5)
    assert isinstance(engine, RolloutEngine)
    prompts = ["1+1=", "What is 23*4?", "x"]
    out = engine.generate(prompts, n=3, sampling=SamplingParams(max_response_tokens=6, seed=1))
    assert [len(g) for g in out] == [3, 3, 3]
    for prompt, group in zip(prompts, out):
        for c in group:
            assert c.prompt_token_ids == tuple(tok(prompt)["input_ids"])
            assert c.num_tokens == len(c.token_ids) == len(c.logprobs) <= 6
            assert all(lp <= 0 for lp in c.logprobs)


def test_logprobs_match_teacher_forcing_with_left_padding(tok, model) -> None:
    engine = HFEngine(model, tok, batch_size=8)
    prompts = ["1+1=", "A much longer prompt: 123*45="]  # different lengths -> left padding
    sampling = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_response_tokens=8, seed=3)
    for group in engine.generate(prompts, n=4, sampling=sampling):
        for c in group:
            ref = teacher_forced_logprobs(model, c.prompt_token_ids, c.token_ids, 0.7)
            torch.testing.assert_close(torch.tensor(c.logprobs), ref, atol=1e-4, rtol=1e-4)


def test_seed_determinism_without_global_rng(tok, model) -> None:
    engine = HFEngine(model, tok)
    state = torch.random.get_rng_state()
    a = engine.generate(["12+3="], n=4, sampling=SamplingParams(max_response_tokens=8, seed=7))
    b = engine.generate(["12+3="], n=4, sampling=SamplingParams(max_response_tokens=8, seed=7))
    c = engine.generate(["12+3="], n=4, sampling=SamplingParams(max_response_tokens=8, seed=8))
    assert torch.equal(state, torch.random.get_rng_state())
    assert [x.token_ids for x in a[0]] == [x.token_ids for x in b[0]]
    assert [x.token_ids for x in a[0]] != [x.token_ids for x in c[0]]


def test_finish_reasons_and_every_eos_id(tok, model) -> None:
    x_id = tok.convert_tokens_to_ids("x")
    bias = torch.zeros(len(tok))
    bias[x_id] = 50.0  # the model (almost surely) says "x" forever
    forced = BiasedLM(model, bias)
    sampling = SamplingParams(max_response_tokens=5, seed=0)
    plain = HFEngine(forced, tok).generate(["1+1="], n=2, sampling=sampling)[0]
    assert all(c.finish_reason == "length" and c.text == "xxxxx" and c.num_tokens == 5 for c in plain)
    # "x" as an extra EOS id: the first token ends the response; EOS is in token_ids, not in text.
    stop = HFEngine(forced, tok, eos_token_ids=[x_id]).generate(["1+1="], n=2, sampling=sampling)[0]
    assert all(c.finish_reason == "stop" and c.text == "" and c.token_ids == (x_id,) for c in stop)
    # EOS exactly at the last allowed token is a stop, not a truncation.
    bias2 = torch.zeros(len(tok))
    bias2[x_id] = 50.0
    eng = HFEngine(BiasedLM(model, bias2), tok, eos_token_ids=[x_id])
    one = eng.generate(["1+1="], n=1, sampling=SamplingParams(max_response_tokens=1, seed=0))[0][0]
    assert one.finish_reason == "stop"


def test_collect_eos_ids_from_all_sources(tok, model) -> None:
    m = copy.deepcopy(model)
    m.generation_config.eos_token_id = [2, 7]
    m.config.eos_token_id = 9
    assert collect_eos_ids(tok, m, extra=[11]) == (2, 7, 9, 11)


def test_greedy_stops_at_eos_and_text_is_stripped(tok, model) -> None:
    bias = torch.zeros(len(tok))
    seq = tok("42")["input_ids"] + [tok.eos_token_id]

    class Scripted(BiasedLM):
        step = 0

        def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=False, logits_to_keep=0):
            out = super().forward(input_ids, attention_mask, position_ids, cache, use_cache, logits_to_keep)
            target = seq[min(Scripted.step, len(seq) - 1)]
            out.logits[..., target] += 100.0
            Scripted.step += 1
            return out

    eng = HFEngine(Scripted(model, bias), tok)
    c = eng.generate(["q"], n=1, sampling=SamplingParams(temperature=0, max_response_tokens=10))[0][0]
    assert (c.text, c.finish_reason, c.token_ids) == ("42", "stop", tuple(seq))


def test_prompt_never_truncated(tok, model) -> None:
    engine = HFEngine(model, tok)
    with pytest.raises(ValueError, match="never truncated"):
        engine.generate(["9" * 60], n=1, sampling=SamplingParams(max_response_tokens=8))


def test_filter_logits_top_k_top_p() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(_filter_logits(logits, None, 0.8))
    assert kept.tolist() == [[True, True, False, False]]  # 0.5 + 0.3 reaches 0.8
    kept = torch.isfinite(_filter_logits(logits, None, 0.81))
    assert kept.tolist() == [[True, True, True, False]]
    kept = torch.isfinite(_filter_logits(logits, 1, 1.0))
    assert kept.tolist() == [[True, False, False, False]]


def test_load_weights_version_and_fingerprint(tok, model) -> None:
    engine = HFEngine(copy.deepcopy(model), tok)
    learner = build_tiny_model(tok, hidden_size=64, layers=2, heads=2, max_positions=64, seed=5)
    assert engine.fingerprint() != weights_fingerprint(learner.state_dict())
    engine.load_weights(learner.named_parameters())
    assert engine.weights_version == 1
    assert engine.fingerprint() == weights_fingerprint(learner.state_dict())
    with pytest.raises(KeyError, match="unknown"):
        engine.load_weights({"nope": torch.zeros(1)})
    name, p = next(iter(learner.state_dict().items()))
    with pytest.raises(ValueError, match="shape"):
        engine.load_weights({name: torch.zeros(p.numel() + 1)})


def test_inverse_cdf_sampler_matches_the_distribution() -> None:
    """The per-row CDF inversion draws each token with its probability (chi-square-sized tolerance)."""
    from dapo_env.learners.engines.hf_engine import _sample_from

    probs = torch.tensor([[0.5, 0.0, 0.3, 0.2], [0.0, 0.0, 0.0, 1.0]]).repeat(20000, 1)  # (40000, 4)
    draws = _sample_from(probs, torch.Generator().manual_seed(0))
    first, second = draws[0::2], draws[1::2]
    freq = torch.bincount(first, minlength=4).float() / first.numel()
    assert torch.allclose(freq, torch.tensor([0.5, 0.0, 0.3, 0.2]), atol=0.015)
    assert bool((second == 3).all())  # a zero-probability token is never drawn


def test_shared_prefill_equals_one_prefill_per_row(tok, model) -> None:
    """Each distinct prompt is prefilled once and its cache re-indexed to the group's rows: the samples
    and log-probs equal prefilling every copy, with prompts of different lengths in one batch."""
    prompts = ["1+1=", "A much longer prompt: 123*45=", "x"]
    sampling = SamplingParams(temperature=1.0, max_response_tokens=8, seed=11)
    rows_seen: list[int] = []
    wrapped = copy.deepcopy(model)
    inner_forward = wrapped.forward

    @functools.wraps(inner_forward)  # keeps the signature the engine inspects
    def recording_forward(*args, **kwargs):
        rows_seen.append(int(kwargs["input_ids"].shape[0]))
        return inner_forward(*args, **kwargs)

    wrapped.forward = recording_forward
    shared = HFEngine(wrapped, tok, batch_size=8).generate(prompts, n=4, sampling=sampling)
    reference = HFEngine(model, tok, batch_size=8, share_prefill=False).generate(prompts, n=4, sampling=sampling)
    assert rows_seen[0] == 2  # the first chunk of 8 rows holds 2 distinct prompts (4 + 4 copies)
    for got, ref in zip(shared, reference):
        assert [c.token_ids for c in got] == [c.token_ids for c in ref]
        torch.testing.assert_close(torch.tensor([lp for c in got for lp in c.logprobs]),
                                   torch.tensor([lp for c in ref for lp in c.logprobs]), atol=1e-5, rtol=1e-5)


def test_every_engine_class_implements_the_whole_protocol() -> None:
    """Each registered engine class defines every member of ``RolloutEngine`` (what the trainer and evaluation
    call, single- and multi-turn), with the protocol's parameters first and any extra ones optional."""
    import inspect

    from dapo_env.learners.engines.vllm_engine import VLLMEngine  # importable without vLLM (it loads when built)

    members = {name for name in vars(RolloutEngine) if not name.startswith("_")}
    assert members >= {"generate", "generate_turns", "release", "turn_stats", "load_weights", "fingerprint",
                       "weights_version"}
    for engine_class in (HFEngine, VLLMEngine):
        for name in sorted(members):
            wanted, have = inspect.getattr_static(RolloutEngine, name), inspect.getattr_static(engine_class, name, None)
            assert have is not None, f"{engine_class.__name__} lacks {name}"
            assert isinstance(have, property) == isinstance(wanted, property), (engine_class.__name__, name)
            if callable(wanted):
                expected = list(inspect.signature(wanted).parameters.values())
                actual = list(inspect.signature(have).parameters.values())
                assert [p.name for p in actual[:len(expected)]] == [p.name for p in expected], (engine_class, name)
                assert all(p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD
                           for p in actual[len(expected):]), (engine_class.__name__, name)
