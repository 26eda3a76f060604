"""VLLMEngine in LoRA mode: the frozen base once, the adapter served through vLLM's LoRA support, adapter-only
pushes that take effect (greedy tokens and log-probs equal the HF engine's on the same base + adapter).

Needs vLLM and peft: skipped here (with the reason under ``-rs``); the vLLM CI stage (``.ci/vllm_stage.sh``,
``DAPO_REQUIRE_VLLM=1``) runs it for real on the CPU build and fails instead of skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch
from optional_extras import REQUIRE_VLLM, is_installed, skip_reason, vllm_marks

from dapo_env.learners.engines import HFEngine, SamplingParams, weights_fingerprint
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

pytestmark = [
    *vllm_marks("the vLLM LoRA tests"),
    pytest.mark.skipif(not is_installed("peft") and not REQUIRE_VLLM,
                       reason=skip_reason("peft", "the vLLM LoRA tests")),
]

PROMPTS = ["12+7=", "What is 3*4? Answer:", "<bos>user: 9-2?\nassistant: "]


def train_adapter(model: torch.nn.Module, seed: int, scale: float = 0.3) -> None:
    """Stand-in for an update: move every adapter tensor (B included, so the adapter changes the outputs)."""
    from dapo_env.learners.models.lora import adapter_state_dict

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in adapter_state_dict(model).values():
            tensor.add_(torch.randn(tensor.shape, generator=gen) * scale)


def teacher_forced(model: torch.nn.Module, prompt: list[int], response: list[int]) -> torch.Tensor:
    """HF log p(response[t] | prompt, response[:t]) at temperature 1, fp32. (T,)"""
    ids = torch.tensor([prompt + response])  # (1, P + T)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()  # (T, V)
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None])[:, 0]


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[object, torch.nn.Module, object]]:
    from dapo_env.learners.engines import vllm_engine as ve
    from dapo_env.learners.models.lora import LoraSettings, add_lora

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    tok = build_tokenizer()
    learner = add_lora(build_tiny_model(tok, hidden_size=64, layers=2, heads=2, seed=0), LoraSettings(rank=4))
    train_adapter(learner, seed=0)
    engine = ve.VLLMEngine(learner, tok, dtype="float32", cpu_kv_cache_gib=0.125)
    yield engine, learner, tok
    engine.close()


def test_engine_serves_the_adapter_like_the_hf_engine(setup) -> None:
    engine, learner, tok = setup
    assert engine.serves_lora
    hf = HFEngine(learner, tok, eos_token_ids=engine.eos_token_ids)
    greedy = SamplingParams(temperature=0.0, max_response_tokens=16)
    ours, theirs = engine.generate(PROMPTS, 1, greedy), hf.generate(PROMPTS, 1, greedy)
    for a, b in zip((c for g in ours for c in g), (c for g in theirs for c in g), strict=True):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)


def test_adapter_only_push_takes_effect_every_time(setup) -> None:
    from dapo_env.learners.models.lora import adapter_state_dict, merged_model

    engine, learner, tok = setup
    names = list(adapter_state_dict(learner))
    sampling = SamplingParams(temperature=1.0, max_response_tokens=12, seed=3)
    previous = engine.generate(PROMPTS[:1], 2, sampling)[0]
    start_id = engine.lora_request.lora_int_id
    for step in range(3):
        train_adapter(learner, seed=10 + step)
        start = engine.weights_version
        engine.load_weights(adapter_state_dict(learner))  # the adapter only: no base tensor moves
        assert engine.weights_version == start + 1
        assert engine.fingerprint(names) == weights_fingerprint(adapter_state_dict(learner))
        assert engine.lora_request.lora_int_id == start_id + step + 1  # a new adapter id per push
        out = engine.generate(PROMPTS[:1], 2, sampling)[0]
        plain = merged_model(learner)  # the same policy without peft: what vLLM must now sample from
        for c in out:
            ref = teacher_forced(plain, list(c.prompt_token_ids), list(c.token_ids))
            torch.testing.assert_close(torch.tensor(c.logprobs), ref, atol=1e-4, rtol=0)
        assert [c.logprobs for c in out] != [c.logprobs for c in previous]  # the policy really changed
        previous = out


def test_a_push_must_be_the_whole_adapter(setup) -> None:
    from dapo_env.learners.models.lora import adapter_state_dict

    engine, learner, tok = setup
    adapter = adapter_state_dict(learner)
    with pytest.raises(KeyError, match="whole adapter"):
        engine.load_weights(learner.state_dict())  # base tensors too
    with pytest.raises(KeyError, match="whole adapter"):
        engine.load_weights(dict(list(adapter.items())[:2]))
    engine.load_weights(learner)  # a model carrying the adapter is fine


def test_trainer_runs_lora_with_the_vllm_engine(tmp_path) -> None:
    from dapo_env.learners.config import preset
    from dapo_env.learners.trainer import train

    cfg = preset("tiny", engine="vllm", lora_rank=8, max_steps=2, warmstart_steps=20, warmstart_target_accuracy=None,
                 batch_size=8, mini_batch_size=4, eval_size=10, checkpoint_every=2, out_dir=str(tmp_path),
                 progress=False)
    result = train(cfg)  # every push is adapter-only and checked by fingerprint
    assert result.metrics[-1]["step"] == 2
    assert (result.run_dir / "checkpoints" / "step_000002" / "model" / "adapter_config.json").is_file()
