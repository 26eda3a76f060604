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
    assert (sync.max_staleness, sync.num_threads, sync.uses_rollout_worker, sync.is_correction) == (0, 2, False, None)
    big = bench.run_config("smollm2", "sync", seed=1, steps=3, threads=2, out_dir=str(tmp_path), model_dir="m")
    assert big.num_threads == 2 and big.model == "m" and big.warmstart_steps == 0
    assert (stale.max_staleness, stale.num_threads, stale.num_threads_split, stale.is_correction) == (
        2, 2, "work-conserving", "token-truncate")
    static = bench.run_config("smollm2", "staleness_1", seed=1, steps=3, threads=4, out_dir=str(tmp_path),
                              model_dir="m", thread_split="static")
    assert (static.num_threads, static.num_threads_split) == (4, "static")
    # equal total threads: the sync run's T against the async run's learner + worker shares
    assert [bench.total_threads(c) for c in (sync, stale, static)] == [2, 2, 4]
    assert bench.total_threads(bench.run_config("tiny", "staleness_1", seed=1, steps=3, threads=1,
                                                out_dir=str(tmp_path))) == 2  # 1 + 1: over a budget of 1
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


def test_overlap_efficiency_is_the_speedup_over_the_amdahl_bound_of_the_same_seed(bench):
    def run(setting, seed, sps, share, threads):
        return {"setting": setting, "seed": seed, "steps_per_s": sps, "generated_tokens_per_s": 1.0, "accuracy": None,
                "generated_tokens": 1.0, "cpu_s": 1.0, "rollout_share": share, "total_threads": threads}

    runs = [run("sync", 0, 1.0, 0.25, 2), run("sync", 1, 1.0, 0.5, 2),
            run("staleness_1", 0, 1.2, 0.1, 2), run("staleness_1", 1, 1.5, 0.1, 2), run("staleness_2", 0, 0.9, 0.1, 1)]
    out = bench.summarize(runs, [0, 1])
    # bounds: 1 / 0.75 and 1 / 0.5; efficiencies 1.2 * 0.75 = 0.9 and 1.5 * 0.5 = 0.75
    assert out["amdahl_bound_staleness_1"] == pytest.approx((4 / 3 + 2.0) / 2)
    assert out["overlap_efficiency_staleness_1"] == pytest.approx((0.9 + 0.75) / 2)
    assert out["equal_total_threads_staleness_1"] is True and out["equal_total_threads_staleness_2"] is False
    assert bench.amdahl_bound(0.8) == pytest.approx(1.25)
    table = bench.results_table({"workloads": {"tiny": {"steps": 2, **out}}}).splitlines()
    assert table[0].split()[:6] == ["workload", "setting", "steps/s", "speedup", "rollout", "share"]
    # staleness_1: 1.35 steps/s, speed-up 1.35, share 0.10, bound 1.67, efficiency 0.82, equal threads
    assert table[2].split()[:8] == ["tiny", "staleness_1", "1.350", "1.35", "0.10", "1.67", "0.82", "true"]


@pytest.mark.slow
def test_quick_run_writes_the_promised_keys(bench, tmp_path):
    out = tmp_path / "bench_async.json"
    bench.main(["--quick", "--seeds", "1", "--steps", "2", "--out", str(out)])
    data = json.loads(out.read_text())
    assert set(data["accuracy"]) == {"sync", "staleness_1", "staleness_2"}
    assert data["speedup_staleness_1"] > 0 and data["speedup_staleness_2"] > 0
    runs = data["workloads"]["tiny"]["runs"]
    assert len(runs) == 3 and all(r["cpu_s"] > 0 and r["generated_tokens"] > 0 for r in runs)


def test_ablation_settings_cover_each_staleness_with_and_without_correction(bench, tmp_path):
    settings = {(k, c) for _, k, c in bench.ABLATION_SETTINGS}
    assert settings == {(0, None)} | {(k, c) for k in (1, 2, 4) for c in (None, "token-truncate")}
    cfg = bench.run_config("sort", "sync", staleness=4, seed=1, steps=3, threads=2, out_dir=str(tmp_path),
                           is_correction="token-truncate")
    assert (cfg.task, cfg.max_staleness, cfg.is_correction, cfg.eval_temperature) == ("Sort-v0", 4, "token-truncate", 1.0)
    assert cfg.max_response_tokens == 32 and cfg.num_threads == 1


def test_ablation_table_reports_means_and_spreads(bench):
    result = {"table": [{"setting": "sync", "max_staleness": 0, "is_correction": None, "accuracy": 0.25,
                         "accuracy_std": 0.05, "gain": 0.1, "gain_std": None, "staleness_mean": 0.0,
                         "generated_tokens": 1234.0, "is_truncated_share": None, "clip_frac": 0.01,
                         "mismatch_k3": None}]}
    line = bench.ablation_table(result).splitlines()[-1]
    assert line.startswith("| sync | 0 | none | 0.00 | 0.250 +- 0.050 | 0.100 | 1234 | - | 0.010 |")


@pytest.mark.slow
def test_quick_ablation_writes_its_table(bench, tmp_path):
    out = tmp_path / "ablation.json"
    bench.main(["--ablation", "--quick", "--seeds", "1", "--steps", "2", "--settings", "sync",
                "staleness_1_corrected", "--out", str(out)])
    data = json.loads(out.read_text())
    assert [row["setting"] for row in data["table"]] == ["sync", "staleness_1_corrected"]
    stale = data["runs"][1]
    assert stale["max_staleness"] == 1 and stale["is_correction"] == "token-truncate" and stale["generated_tokens"] > 0
