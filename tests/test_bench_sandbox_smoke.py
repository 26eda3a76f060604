"""Smoke test of benchmarks/bench_sandbox.py: both isolation modes run side by side, every verdict is as
expected, and the JSON holds the latency ratio."""

from __future__ import annotations

import json
import sys

import pytest

from benchmark_loader import load_benchmark
from dapo_env.verifiers import isolation


@pytest.mark.skipif(not isolation("full").ok, reason="the code sandbox needs bubblewrap (apt-get install bubblewrap)")
def test_both_modes_side_by_side(tmp_path) -> None:
    bench = load_benchmark("bench_sandbox")
    try:
        out = tmp_path / "sandbox.json"
        result = bench.main(["--candidates", "6", "--workers", "2", "--out", str(out)])
    finally:
        sys.modules.pop("bench_sandbox", None)
    saved = json.loads(out.read_text())
    assert set(saved["rows"]) == {"weak", "full"}
    for row in saved["rows"].values():
        assert row["verdicts_as_expected"] == 1.0 and row["verdicts_as_expected_pool"] == 1.0
        assert row["median_ms"] > 0 and row["candidates_per_s_pool"] > 0
    assert saved["latency_ratio"] == pytest.approx(result["latency_ratio"])
