"""Smoke test of benchmarks/bench_precision.py on a 1-layer model: both precisions run, the JSON holds
the ratios, and bf16 log-probs stay close to fp32 ones."""

from __future__ import annotations

import json
import sys

import pytest

from benchmark_loader import load_benchmark

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def bench():
    yield load_benchmark("bench_precision")
    sys.modules.pop("bench_precision", None)


def test_one_layer_run_writes_both_precisions(bench, tmp_path) -> None:
    threads = torch.get_num_threads()
    out = tmp_path / "precision.json"
    try:
        assert bench.main(["--threads", "1", "--layers", "1", "--batch", "2", "--prompts", "2",
                           "--group-size", "2", "--repeats", "1", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    result = json.loads(out.read_text())
    assert {f"{k}_{p}_{a}_s" for k in ("learner", "rollout") for p in ("fp32", "bf16") for a in ("sdpa", "eager")} \
        < set(result["seconds"])
    assert all(result[k] > 0 for k in result if k.startswith("speedup_"))
    assert 0 < result["max_abs_logprob_diff"] < 0.5  # bf16 rounding: visible, but small
