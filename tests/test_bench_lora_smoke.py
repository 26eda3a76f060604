"""Smoke tests of benchmarks/bench_lora.py on a micro model: each mode in-process (fast) with the memory
accounting checked by hand, and the whole side-by-side run in subprocesses (slow)."""

from __future__ import annotations

import json
import sys

import pytest
from benchmark_loader import load_benchmark
from optional_extras import require

torch = pytest.importorskip("torch")
require("peft", "the LoRA benchmark")


@pytest.fixture(scope="module")
def bench():
    yield load_benchmark("bench_lora")
    sys.modules.pop("bench_lora", None)


def test_config_validation_says_how_to_fix(bench) -> None:
    with pytest.raises(ValueError, match="choose one of"):
        bench.BenchConfig(shape="huge")
    with pytest.raises(ValueError, match="full fine-tuning always runs"):
        bench.BenchConfig(ranks=(8, 0))
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        bench.BenchConfig(group_size=1)
    assert bench.BenchConfig(ranks=(4, 16)).modes == ("full", "lora-r4", "lora-r16")


def test_the_default_shape_is_smollm2_135m(bench) -> None:
    shape = bench.SHAPES["smollm2-135m"]
    with torch.device("meta"):  # the real shape, without allocating it
        model = bench.build_model(bench.BenchConfig())
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    assert 134e6 < params < 135e6  # SmolLM2-135M: 134.5M parameters (tied embeddings)
    assert model.config.num_key_value_heads == shape["kv_heads"] == 3


def test_modes_run_the_same_update_and_account_memory(bench) -> None:
    cfg = bench.BenchConfig(shape="micro", ranks=(4,), prompts=2, group_size=2, prompt_len=8, response_len=8,
                            micro_batch=2, warmup=1, steps=1)
    full, lora = bench.run_mode("full", cfg), bench.run_mode("lora-r4", cfg)
    for row in (full, lora):
        assert len(row["per_step"]) == 2 and all(s["loss_tokens"] == cfg.tokens_per_update == 32 for s in row["per_step"])
        assert row["update_tokens_per_s"] >= row["update_tokens_per_s_mean"] > 0 and row["update_tokens_per_cpu_s"] > 0
        assert row["peak_rss_mb"] >= row["rss_after_build_mb"] >= row["rss_after_imports_mb"] > 0
        assert row["total_params"] >= row["trainable_params"] > 0
    # The first update's loss sees the same model and batch in both modes (B = 0: the adapter adds nothing yet).
    assert full["per_step"][0]["loss"] == pytest.approx(lora["per_step"][0]["loss"], abs=1e-6)
    assert full["trainable_params"] == full["total_params"]
    # micro shape, rank 4: per layer 4 x (64 + 64) [q, o] + 4 x (64 + 32) [k, v: 1 kv head of 32] + 3 x 4 x (64 + 128)
    assert lora["trainable_params"] == 2 * (4 * 128 * 2 + 4 * 96 * 2 + 3 * 4 * 192)
    mb = 2**20
    # AdamW keeps two fp32 moments per trainable parameter (plus a one-element step counter per tensor).
    assert full["optimizer_state_mb"] == pytest.approx(2 * 4 * full["trainable_params"] / mb, rel=0.01)
    assert lora["optimizer_state_mb"] == pytest.approx(2 * 4 * lora["trainable_params"] / mb, rel=0.05)
    assert lora["push_mb"] == pytest.approx(4 * lora["trainable_params"] / mb)  # the adapter only
    assert full["push_mb"] > 4 * full["total_params"] / mb  # every tensor of the state dict (the tied head twice)


def test_table_has_one_row_per_mode(bench) -> None:
    row = dict(mode="full", trainable_params=10, peak_rss_mb=100.0, peak_rss_growth_mb=50.0, optimizer_state_mb=1.0,
               push_mb=0.5, update_tokens_per_s=10.0, update_tokens_per_cpu_s=9.0, ratio_update_tokens_per_s=1.0,
               ratio_update_tokens_per_cpu_s=1.0, ratio_peak_rss=1.0)
    table = bench.format_table({"modes": {"full": row, "lora-r8": {**row, "mode": "lora-r8"}}})
    lines = table.splitlines()
    assert len(lines) == 3 and "peak RSS MB" in lines[0] and lines[2].startswith("lora-r8")
    assert len({len(line) for line in lines}) == 1  # columns line up


@pytest.mark.slow
def test_side_by_side_run_writes_json(bench, tmp_path, capsys) -> None:
    out = tmp_path / "bench_lora.json"
    result = bench.main(["--shape", "micro", "--ranks", "2,8", "--prompts", "1", "--group-size", "2",
                         "--prompt-len", "8", "--response-len", "8", "--micro-batch", "2", "--steps", "1",
                         "--out", str(out)])
    assert json.loads(out.read_text())["modes"].keys() == {"full", "lora-r2", "lora-r8"}
    assert result["modes"]["full"]["ratio_update_tokens_per_s"] == 1.0
    r2, r8 = result["modes"]["lora-r2"], result["modes"]["lora-r8"]
    assert r2["trainable_params"] * 4 == r8["trainable_params"]
    printed = capsys.readouterr().out
    assert "lora-r8" in printed and "wrote" in printed
