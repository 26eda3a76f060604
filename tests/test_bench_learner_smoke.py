"""Smoke tests of benchmarks/bench_learner.py: our side in-process on a micro model (fast), the qwen2/bf16
path that the CUDA benchmark uses (on CPU, tiny shape), and the full side-by-side run against TRL
(slow; skipped when trl is not installed)."""

from __future__ import annotations

import dataclasses
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
    for key in ("ratio_update_tokens_per_cpu_s_vs_floor", "ratio_peak_rss_vs_floor",
                "ratio_rollout_tokens_per_cpu_s_vs_floor"):  # the floors ran in the same call
        assert saved[key] > 0, key


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


# --- the floors and the padding sweep --------------------------------------------------------------------
def _micro_batch(bench, tmp_path, *, packing="off"):
    """A saved update batch of 2 groups x 2 samples of different lengths, as our side saves it."""
    from dapo_env.learners.algo.batch import build_sequence_batch
    from dapo_env.types import Completion, Group

    cfg = bench.BenchConfig(model_shape="micro", group_size=2, prompts_per_step=2, micro_batch=2, length=8)
    tok, model = bench.build_tokenizer_and_model(cfg)
    comps = [Completion("x", token_ids=tuple(range(10, 10 + n)), prompt_token_ids=(1, 5, 6)[:p])
             for n, p in ((3, 3), (7, 3), (1, 2), (5, 2))]
    groups = [Group(str(g), "p", tuple(comps[2 * g:2 * g + 2]), (1.0, -1.0), (True, False), (True, True))
              for g in range(2)]
    batch = build_sequence_batch(groups, pad_id=0)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    path = tmp_path / "step0.pt"
    bench.save_update_batch(path, batch, adv)
    return cfg, model, batch, adv, torch.load(path, weights_only=False)


def test_floor_update_step_is_the_same_computation_as_our_update(bench, tmp_path):
    """On the same batch and weights (SGD, lr 1: the parameter change is minus the gradient), the floor's
    hand-written step and our update_policy move every parameter the same way: the floor measures the
    same work, written bare."""
    import copy

    from dapo_env.learners.config import preset
    from dapo_env.learners.algo.update import update_policy

    cfg, model, batch, adv, saved = _micro_batch(bench, tmp_path)
    ours, floor = copy.deepcopy(model), copy.deepcopy(model)
    tcfg = preset("dapo", group_size=2, batch_size=2, mini_batch_size=2, micro_batch_size=2, grad_clip=1e9,
                  max_response_tokens=8, overlong_penalty=False)
    result = update_policy(ours, torch.optim.SGD(ours.parameters(), lr=1.0), batch, adv, tcfg, key=(0, 0))
    loss = bench.floor_update_step(floor, torch.optim.SGD(floor.parameters(), lr=1.0), saved, micro_batch=2,
                                   grad_clip=1e9)
    assert loss == pytest.approx(result.metrics["loss"], abs=1e-6)
    for (name, a), b, c in zip(ours.named_parameters(), floor.parameters(), model.parameters()):
        assert not torch.equal(a, c), name
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


def test_floor_sides_run_in_process_and_the_ratios_are_reported(bench, tmp_path):
    cfg = bench.BenchConfig(model_shape="micro", group_size=2, prompts_per_step=2, micro_batch=2, length=8,
                            warmup=1, steps=1)
    before = torch.get_num_threads()
    try:
        ours = bench.run_ours(cfg, str(tmp_path))
        floor = bench.run_floor(cfg, str(tmp_path))
        rollout = bench.run_rollout_floor(cfg)
    finally:
        torch.set_num_threads(before)
    assert [s["loss_tokens"] for s in floor["steps"]] == [s["loss_tokens"] for s in ours["steps"]]  # same batches
    assert all(0.0 <= s["padded_share"] < 1.0 for s in ours["steps"])
    assert all(0 < s["floor_tokens"] <= 2 * 2 * 8 and 0 < s["ours_tokens"] <= 2 * 2 * 8 for s in rollout["steps"])
    result = {"config": dataclasses.asdict(cfg), "sides": {"ours": {**ours, **bench.summarize(ours, cfg.warmup)}}}
    bench.summarize_floors(result, floor, rollout, cfg.warmup)
    for key in ("ratio_update_tokens_per_cpu_s_vs_floor", "ratio_update_tokens_per_s_vs_floor",
                "ratio_peak_rss_vs_floor", "ratio_rollout_tokens_per_cpu_s_vs_floor",
                "ratio_rollout_tokens_per_s_vs_floor"):
        assert result[key] > 0, key
    assert result["sides"]["ours"]["padded_share"] == ours["steps"][1]["padded_share"]
    expected = ours_rate = result["sides"]["ours"]["update_tokens_per_cpu_s"]
    assert result["ratio_update_tokens_per_cpu_s_vs_floor"] == pytest.approx(
        expected / result["sides"]["floor"]["update_tokens_per_cpu_s"]) and ours_rate > 0


def test_floor_generate_stops_rows_at_eos_and_at_the_limit(bench):
    cfg = bench.BenchConfig(model_shape="micro", length=8)
    tok, model = bench.build_tokenizer_and_model(cfg)
    gen = torch.Generator().manual_seed(0)
    rows = bench.floor_generate(model, [[1, 5], [1, 6, 7]], 3, max_tokens=6, eos_id=tok.eos_token_id,
                                pad_id=tok.pad_token_id, generator=gen)
    assert len(rows) == 6 and all(1 <= len(r) <= 6 for r in rows)
    assert all(tok.eos_token_id not in r[:-1] for r in rows)  # nothing after an EOS
    one = bench.floor_generate(model, [[1, 5]], 2, max_tokens=1, eos_id=tok.eos_token_id, pad_id=0, generator=gen)
    assert [len(r) for r in one] == [1, 1]


def test_packing_sweep_worker_keeps_the_loss_and_cuts_padding(bench):
    cfg = bench.BenchConfig(model_shape="micro", group_size=4, prompts_per_step=2, micro_batch=2, length=24,
                            warmup=0, steps=2)
    before = torch.get_num_threads()
    try:
        runs = {p: bench.run_packing(dataclasses.replace(cfg, packing=p)) for p in ("off", "length", "pack")}
    finally:
        torch.set_num_threads(before)
    for p, run in runs.items():
        for a, b in zip(run["steps"], runs["off"]["steps"]):
            assert a["loss"] == pytest.approx(b["loss"], abs=1e-6), p
            assert a["loss_tokens"] == b["loss_tokens"]
    share = {p: sum(s["padded_share"] for s in r["steps"]) for p, r in runs.items()}
    assert share["pack"] < share["length"] < share["off"]


@pytest.mark.slow
def test_packing_sweep_main_writes_the_modes(bench, tmp_path):
    out = tmp_path / "packing.json"
    bench.main(["--packing-sweep", "--model-shape", "micro", "--group-size", "4", "--prompts", "2", "--micro-batch",
                "2", "--length", "16", "--warmup", "0", "--steps", "1", "--out", str(out)])
    saved = json.loads(out.read_text())["packing_sweep"]["modes"]
    assert set(saved) == {"off", "length", "pack"}
    assert saved["pack"]["padded_share"] < saved["off"]["padded_share"]
    assert all(m["loss_max_abs_diff_vs_off"] < 1e-5 for m in saved.values())


def test_mfu_counts_6n_per_update_token_and_2n_per_generated_token(bench):
    shape = bench.MODEL_SHAPES["micro"]
    n = bench.flop_parameters(shape)
    assert n == 1 * (64 * 64 * 4 + 3 * 64 * 128) + 2048 * 64  # q, k, v, o (2 heads of 32) + MLP + lm_head
    result = {"model": shape, "sides": {"ours": {"update_tokens_per_s": 1e6, "rollout_tokens_per_s": 2e6}}}
    bench.add_mfu(result, 100.0)
    assert result["sides"]["ours"]["update_mfu"] == pytest.approx(6 * n * 1e6 / 100e12)
    assert result["sides"]["ours"]["rollout_mfu"] == pytest.approx(2 * n * 2e6 / 100e12)
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0 and bench.peak_tflops("cpu") is None
