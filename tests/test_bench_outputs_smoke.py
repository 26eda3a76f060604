"""Benchmarks write to an untracked place unless asked (``benchmarks/_paths.py``), and read real data from
``$DAPO_ENV_DATA``: the shared helper, every adopting script's ``--out``, and real runs of the cheap ones."""

from __future__ import annotations

import doctest
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_loader import BENCHMARKS, load_benchmark

REPO = BENCHMARKS.parent
ADOPTERS = ["bench_env", "bench_logprobs", "bench_pool", "bench_precision", "vllm_mismatch"]


@pytest.fixture(scope="module")
def paths():
    return load_benchmark("_paths")


def test_helper_doctests_run(paths) -> None:
    assert doctest.testmod(paths, verbose=False).failed == 0


def test_default_destination_is_git_ignored_and_results_are_not(paths) -> None:
    assert paths.UNTRACKED_DIR == REPO / "benchmarks" / "out"
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: cannot ask git what it ignores")
    probe = subprocess.run(["git", "check-ignore", "-q", "benchmarks/out/bench_env.json"], cwd=REPO)
    assert probe.returncode == 0, "benchmarks/out/ must be git-ignored"
    tracked = subprocess.run(["git", "check-ignore", "-q", "benchmarks/results/bench_env.json"], cwd=REPO)
    assert tracked.returncode == 1, "benchmarks/results/*.json must stay trackable"


def test_write_json_is_atomic_and_creates_parents(paths, tmp_path: Path, capsys) -> None:
    target = tmp_path / "a" / "b" / "r.json"
    assert paths.write_json(target, {"x": [1, 2]}) == target
    assert json.loads(target.read_text()) == {"x": [1, 2]}
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]  # no temporary file left behind
    assert "wrote" in capsys.readouterr().out


def test_data_dir_prefers_the_environment_variable(paths, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "gsm8k_test.jsonl").write_text("{}\n")
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path))
    assert paths.data_dir() == tmp_path
    assert paths.data_file("gsm8k/gsm8k_test.jsonl") == tmp_path / "gsm8k" / "gsm8k_test.jsonl"
    assert paths.data_file("mbpp/mbpp.jsonl") is None  # absent: the benchmark generates data instead


@pytest.mark.parametrize("name", ADOPTERS)
def test_every_adopter_defaults_to_the_untracked_folder(name: str, capsys) -> None:
    module = load_benchmark(name)
    try:
        with pytest.raises(SystemExit) as exc:
            module.main(["--help"])
    finally:
        sys.modules.pop(name, None)
    assert exc.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"benchmarks/out/{name}.json" in help_text and f"benchmarks/results/{name}.json" in help_text
    source = (BENCHMARKS / f"{name}.py").read_text()
    for private in ('/ "results"', '"results" /', '/ "shared"'):  # no hard-coded tracked or private paths left
        assert private not in source, (name, private)


def test_bench_pool_runs_and_writes_only_where_told(paths, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "no-data-here"))  # generated data: same on every machine
    monkeypatch.setattr(paths, "UNTRACKED_DIR", tmp_path / "untracked")
    bench = load_benchmark("bench_pool")
    try:
        told = tmp_path / "told.json"
        result = bench.main(["--workers", "1", "--items", "80", "--code-items", "2", "--out", str(told)])
        assert json.loads(told.read_text()) == result
        assert [row["verifier"] for row in result["rows"]] == ["trivial", "math", "code"]
        accuracy = {row["verifier"]: row["accuracy"] for row in result["rows"]}
        assert accuracy == {"trivial": 1.0, "math": 0.75, "code": 1.0}  # a quarter of the math answers are off
        assert not (tmp_path / "untracked").exists()
        bench.main(["--workers", "1", "--items", "80", "--code-items", "2"])
        assert (tmp_path / "untracked" / "bench_pool.json").is_file()
    finally:
        sys.modules.pop("bench_pool", None)
    assert "pool/inline" in capsys.readouterr().out


@pytest.mark.slow
def test_bench_logprobs_tiny_shape_merges_per_device(tmp_path: Path) -> None:
    bench = load_benchmark("bench_logprobs")
    out = tmp_path / "logprobs.json"
    out.write_text(json.dumps({"cuda": {"kept": True}}))
    try:
        bench.main(["--device", "cpu", "--shapes", "1x16", "--chunk-size", "8", "--out", str(out)])
    finally:
        sys.modules.pop("bench_logprobs", None)
    merged = json.loads(out.read_text())
    assert merged["cuda"] == {"kept": True}  # the other device's entry survives
    (row,) = merged["cpu"]["rows"]
    assert (row["batch"], row["length"]) == (1, 16) and row["logp_sum_diff"] < 1e-2
