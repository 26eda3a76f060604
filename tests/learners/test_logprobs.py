from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dapo_env.learners.engines import HFEngine, SamplingParams
from dapo_env.learners.algo.logprobs import (
    chunked_head_logprobs,
    naive_logprobs_and_entropy,
    pack_batch,
    supports_chunked_head,
    token_logprobs_and_entropy,
)
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def batch():
    return pack_batch([[1, 5, 6, 7], [1, 8], [1, 40, 41]], [[9, 10, 2], [11], [12, 13, 14, 2]], pad_id=0)


def test_pack_batch_layout_and_errors() -> None:
    b = pack_batch([[1, 5], [1]], [[6], [7, 8]], pad_id=0, rollout_logprobs=[[-0.5], [-1.0, -2.0]])
    assert b.input_ids.tolist() == [[1, 5, 6, 0], [0, 1, 7, 8]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 0], [0, 1, 1, 1]]
    assert b.response_mask.tolist() == [[1, 0], [1, 1]]
    assert b.response_len == 2
    assert b.rollout_logprobs.tolist() == [[-0.5, 0.0], [-1.0, -2.0]]
    with pytest.raises(ValueError, match="as many"):
        pack_batch([[1]], [[2], [3]], pad_id=0)
    with pytest.raises(ValueError, match="at least one token"):
        pack_batch([[]], [[2]], pad_id=0)
    with pytest.raises(ValueError, match="rollout logprobs"):
        pack_batch([[1]], [[2, 3]], pad_id=0, rollout_logprobs=[[-1.0]])


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("temperature,chunk_size", [(1.0, 1), (0.7, 3), (1.3, 4096)])
def test_chunked_equals_naive_values_and_gradients(tok, tie, temperature, chunk_size) -> None:
    model = build_tiny_model(tok, max_positions=32, tie_embeddings=tie, seed=1)
    b = batch()
    assert supports_chunked_head(model)
    args = (model, b.input_ids, b.attention_mask, b.response_len)
    lp, ent = token_logprobs_and_entropy(*args, temperature=temperature, chunk_size=chunk_size)
    lp_ref, ent_ref = naive_logprobs_and_entropy(*args, temperature=temperature)
    m = b.response_mask
    torch.testing.assert_close(lp * m, lp_ref * m, atol=1e-5, rtol=0)
    torch.testing.assert_close(ent * m, ent_ref * m, atol=1e-5, rtol=0)
    params = [p for p in model.parameters()]
    weights = torch.randn(lp.shape, generator=torch.Generator().manual_seed(0))
    objective = lambda a, e: (a * weights * m).sum() + 0.1 * (e * m).sum()  # noqa: E731
    grads = torch.autograd.grad(objective(lp, ent), params)
    grads_ref = torch.autograd.grad(objective(lp_ref, ent_ref), params)
    for g, r in zip(grads, grads_ref):
        torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)


def test_head_function_gradcheck_float64() -> None:
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(7, 4, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(7, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 7, (2, 3), generator=g)

    def fn(h, w, b):  # both outputs (log-probs and entropies) are checked
        return chunked_head_logprobs(h, SimpleNamespace(weight=w, bias=b), targets, temperature=0.8, chunk_size=2)

    assert torch.autograd.gradcheck(fn, (hidden, weight, bias))
    lp, ent = fn(hidden, weight, bias)
    z = (hidden @ weight.t() + bias) / 0.8
    torch.testing.assert_close(lp, torch.log_softmax(z, -1).gather(-1, targets[..., None]).squeeze(-1))
    torch.testing.assert_close(ent, -(torch.softmax(z, -1) * torch.log_softmax(z, -1)).sum(-1))


def test_without_entropy_and_no_grad(tok) -> None:
    model = build_tiny_model(tok, max_positions=32, seed=2)
    b = batch()
    with torch.no_grad():
        lp, ent = token_logprobs_and_entropy(model, b.input_ids, b.attention_mask, b.response_len,
                                             with_entropy=False)
    assert ent is None and lp.shape == (3, 4) and not lp.requires_grad
    with pytest.raises(ValueError, match="response_len"):
        token_logprobs_and_entropy(model, b.input_ids, b.attention_mask, 0)


class NoDecoder(torch.nn.Module):
    """A causal LM without get_decoder(): must take the naive path."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, **kw):
        return self.inner(**kw)


def test_fallback_for_models_without_a_decoder(tok) -> None:
    inner = build_tiny_model(tok, max_positions=32, seed=3)
    wrapped = NoDecoder(inner)
    b = batch()
    assert not supports_chunked_head(wrapped)
    lp, _ = token_logprobs_and_entropy(wrapped, b.input_ids, b.attention_mask, b.response_len)
    ref, _ = token_logprobs_and_entropy(inner, b.input_ids, b.attention_mask, b.response_len)
    torch.testing.assert_close(lp * b.response_mask, ref * b.response_mask, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="chunked=True"):
        token_logprobs_and_entropy(wrapped, b.input_ids, b.attention_mask, b.response_len, chunked=True)


def test_matches_engine_sampling_logprobs(tok) -> None:
    model = build_tiny_model(tok, max_positions=48, seed=4)
    engine = HFEngine(model, tok)
    groups = engine.generate(["1+2=", "What is 17*3?"], n=3,
                             sampling=SamplingParams(temperature=0.8, max_response_tokens=6, seed=0))
    flat = [c for g in groups for c in g]
    b = pack_batch([c.prompt_token_ids for c in flat], [c.token_ids for c in flat], pad_id=tok.pad_token_id,
                   rollout_logprobs=[c.logprobs for c in flat])
    with torch.no_grad():
        lp, _ = token_logprobs_and_entropy(model, b.input_ids, b.attention_mask, b.response_len,
                                           temperature=0.8, with_entropy=False)
    torch.testing.assert_close(lp * b.response_mask, b.rollout_logprobs, atol=1e-4, rtol=0)
