"""Smoke test of benchmarks/bench_difficulty.py: both arms train from the same warm start under the same
token budget, and the JSON holds the per-arm table and the ratios."""

from __future__ import annotations

import json
import sys

import pytest

from benchmark_loader import load_benchmark


def test_both_arms_side_by_side(tmp_path) -> None:
    bench = load_benchmark("bench_difficulty")
    try:
        out = tmp_path / "difficulty.json"
        assert bench.main(["--quick", "--cache-dir", "none", "--out", str(out)]) == 0
    finally:
        for name in ("bench_difficulty", "ablation"):
            sys.modules.pop(name, None)
    saved = json.loads(out.read_text())
    assert [row["arm"] for row in saved["table"]] == ["plain dynamic sampling", "difficulty-aware"]
    for runs in saved["runs"].values():
        (run,) = runs
        assert run["tokens"] >= saved["settings"]["budget_tokens"] and run["groups_generated"] > 0
        assert 0.0 <= run["zero_adv_share"] <= 1.0
    assert saved["settings"]["pool"] == 64
    assert "tokens_per_informative_group_ratio" in saved and "final_accuracy_diff" in saved
    assert saved["runs"]["plain dynamic sampling"][0]["initial_accuracy"] == pytest.approx(
        saved["runs"]["difficulty-aware"][0]["initial_accuracy"])  # the same warm start
