"""Smoke tests of benchmarks/bench_async.py: run settings, the summary's speedups, and a quick end-to-end run."""

from __future__ import annotations

import json
import sys

import pytest

from benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def bench():
    yield load_benchmark("bench_async")
    sys.modules.pop("bench_async", None)


def test_settings_share_one_cpu_budget(bench, tmp_path):
    sync = bench.run_config("tiny", "sync", seed=1, steps=3, threads=2, out_dir=str(tmp_path))
    stale = bench.run_config("tiny", "staleness_2", seed=1, steps=3, threads=2, out_dir=str(tmp_path),
                             is_correction="token-truncate")
    assert (sync.max_staleness, sync.num_threads, sync.uses_rollout_worker, sync.is_correction) == (0, 1, False, None)
    big = bench.run_config("smollm2", "sync", seed=1, steps=3, threads=2, out_dir=str(tmp_path), model_dir="m")
    assert big.num_threads == 2 and big.model == "m" and big.warmstart_steps == 0
    assert (stale.max_staleness, stale.num_threads, stale.is_correction) == (2, 1, "token-truncate")
    assert sync.run_name != stale.run_name and sync.warmstart_steps == stale.warmstart_steps > 0
    with pytest.raises(ValueError, match="unknown workload"):
        bench.run_config("huge", "sync", seed=0, steps=1, threads=1, out_dir=str(tmp_path))


def test_summary_speedup_is_the_mean_of_per_seed_ratios(bench):
    def run(setting, seed, sps, acc):
        return {"setting": setting, "seed": seed, "steps_per_s": sps, "generated_tokens_per_s": 100 * sps,
                "accuracy": acc, "generated_tokens": 1000.0, "cpu_s": 10.0}

    runs = [run("sync", 0, 1.0, 0.5), run("sync", 1, 2.0, 0.7), run("staleness_1", 0, 2.0, 0.4),
            run("staleness_1", 1, 3.0, 0.6), run("staleness_2", 0, 3.0, 0.5)]
    out = bench.summarize(runs, [0, 1])
    assert out["speedup_staleness_1"] == pytest.approx((2.0 + 1.5) / 2)
    assert out["speedup_staleness_2"] == pytest.approx(3.0)
    assert out["accuracy_sync"] == pytest.approx(0.6) and out["accuracy_sync_std"] == pytest.approx(0.1)
    assert out["accuracy_staleness_2_std"] is None


@pytest.mark.slow
def test_quick_run_writes_the_promised_keys(bench, tmp_path):
    out = tmp_path / "bench_async.json"
    bench.main(["--quick", "--seeds", "1", "--steps", "2", "--out", str(out)])
    data = json.loads(out.read_text())
    assert set(data["accuracy"]) == {"sync", "staleness_1", "staleness_2"}
    assert data["speedup_staleness_1"] > 0 and data["speedup_staleness_2"] > 0
    runs = data["workloads"]["tiny"]["runs"]
    assert len(runs) == 3 and all(r["cpu_s"] > 0 and r["generated_tokens"] > 0 for r in runs)
