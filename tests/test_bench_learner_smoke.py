"""Smoke tests of benchmarks/bench_learner.py: our side in-process on a micro model (fast), the qwen2/bf16
path that the CUDA benchmark uses (on CPU, tiny shape), and the full side-by-side run against TRL
(slow; skipped when trl is not installed)."""

from __future__ import annotations

import json
import sys

import pytest

from benchmark_loader import load_benchmark
from optional_extras import is_installed, skip_reason

torch = pytest.importorskip("torch")



@pytest.fixture(scope="module")
def bench():
    yield load_benchmark("bench_learner")
    sys.modules.pop("bench_learner", None)


def test_vocab_alphabet_gives_exact_distinct_vocabulary(bench):
    alphabet = bench.vocab_alphabet(5000)
    assert len(alphabet) == len(set(alphabet)) == 5000 - 4
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in alphabet)
    cfg = bench.BenchConfig(model_shape="micro", length=8)
    tok, model = bench.build_tokenizer_and_model(cfg)
    assert len(tok) == model.config.vocab_size == bench.MODEL_SHAPES["micro"]["vocab"]


def test_config_validation_says_how_to_fix(bench):
    with pytest.raises(ValueError, match="choose one of"):
        bench.BenchConfig(model_shape="huge")
    with pytest.raises(ValueError, match="must divide"):
        bench.BenchConfig(group_size=4, prompts_per_step=1, micro_batch=3)
    with pytest.raises(ValueError, match="group_size"):
        bench.BenchConfig(group_size=1, micro_batch=1)


def _check_side(bench, raw, cfg):
    assert raw["side"] == "ours"
    assert len(raw["steps"]) == cfg.warmup + cfg.steps
    n_seqs = cfg.group_size * cfg.prompts_per_step
    for step in raw["steps"]:
        assert step["sequences"] == n_seqs
        assert 0 < step["loss_tokens"] <= n_seqs * cfg.length
        assert step["generated_tokens"] == step["loss_tokens"]  # every generated token is in the loss
        assert 0 < step["update_s"] <= step["learner_s"] < step["step_s"]
        assert 0 < step["rollout_s"] < step["step_s"]
    summary = bench.summarize(raw, cfg.warmup)
    assert summary["measured_steps"] == cfg.steps
    assert summary["update_tokens_per_s"] >= summary["learner_tokens_per_s"] > 0
    assert raw["peak_rss_mb"] >= raw["peak_rss_growth_mb"] >= 0
    assert raw["torch_threads"] == cfg.threads


def _run_ours(bench, cfg):
    """Our side of the benchmark in this process (it sets torch's thread count: restore it after)."""
    before = torch.get_num_threads()
    try:
        return bench.run_ours(cfg)
    finally:
        torch.set_num_threads(before)


def test_our_side_runs_and_measures(bench):
    cfg = bench.BenchConfig(model_shape="micro", group_size=2, prompts_per_step=2, micro_batch=2, length=8,
                            warmup=1, steps=1)
    _check_side(bench, _run_ours(bench, cfg), cfg)


def test_qwen2_bf16_path_of_the_gpu_benchmark_runs_on_cpu(bench):
    """The CUDA benchmark's model family and dtype (Qwen2 config, bf16), on a tiny shape on CPU."""
    cfg = bench.BenchConfig(model_shape="qwen2-tiny", dtype="bfloat16", group_size=2, prompts_per_step=2,
                            micro_batch=4, length=8, warmup=0, steps=1)
    tok, model = bench.build_tokenizer_and_model(cfg)
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.dtype == torch.bfloat16
    assert model.config.num_key_value_heads == 2
    _check_side(bench, _run_ours(bench, cfg), cfg)


def test_summarize_rejects_no_measured_steps(bench):
    with pytest.raises(RuntimeError, match="no measured steps"):
        bench.summarize({"side": "ours", "steps": [{"step_s": 1.0}]}, 1)


@pytest.mark.slow
@pytest.mark.skipif(not is_installed("trl"), reason=skip_reason("trl", "the side-by-side benchmark against TRL"))
def test_side_by_side_against_trl_writes_ratios(bench, tmp_path):
    out = tmp_path / "bench.json"
    result = bench.main(["--model-shape", "micro", "--group-size", "2", "--prompts", "2", "--micro-batch", "4",
                         "--length", "8", "--warmup", "1", "--steps", "1", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["trl_version"] == result["trl_version"]
    trl_side = saved["sides"]["trl"]
    assert trl_side["per_step"][0]["sequences"] == 4
    assert 0 < trl_side["loss_tokens_per_step"] <= 4 * 8
    for key in ("ratio_update_tokens_per_s", "ratio_rollout_tokens_per_s", "ratio_peak_rss"):
        assert saved[key] > 0
    expected = saved["sides"]["ours"]["update_tokens_per_s"] / trl_side["update_tokens_per_s"]
    assert saved["ratio_update_tokens_per_s"] == pytest.approx(expected)


def test_inverse_cdf_sampler_matches_the_distribution_and_skips_zero_probabilities(bench):
    sample = bench.inverse_cdf_multinomial(torch.multinomial)
    probs = torch.tensor([[0.0, 0.1, 0.0, 0.4, 0.5], [1.0, 0.0, 0.0, 0.0, 0.0]])  # (2, 5)
    gen = torch.Generator().manual_seed(0)
    draws = torch.cat([sample(probs, 1, generator=gen) for _ in range(4000)], dim=1)  # (2, 4000)
    assert draws.shape == (2, 4000)
    freq = torch.stack([torch.bincount(row, minlength=5).float() / row.numel() for row in draws])  # (2, 5)
    assert freq[0, [0, 2]].sum() == 0 and freq[1, 0] == 1.0  # zero-probability tokens never drawn
    assert torch.allclose(freq[0], probs[0], atol=0.03)
    assert sample(probs, 2, generator=gen).shape == (2, 2)  # other calls fall back to torch.multinomial
