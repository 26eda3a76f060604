"""benchmarks/bench_learner_gpu.sh --dry-run on the CPU: the GPU run's arguments parse into a valid workload,
its output paths are writable and the packages each side needs are named, without measuring anything (CI
catches a broken GPU script before a GPU session is spent on it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_learner_gpu.sh"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300)


def test_dry_run_checks_every_run_and_measures_nothing() -> None:
    before = {p: p.stat().st_mtime for p in (ROOT / "benchmarks" / "results").glob("bench_learner_gpu*.json")}
    proc = _run("--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert out.count("dry run: ok") == 3
    assert "qwen2-0.5b (494M FLOP parameters) bfloat16 on cuda" in out
    assert "sides ours,trl,floor,rollout_floor" in out and "engine vllm" in out
    assert "bench_learner_gpu.json" in out and "bench_learner_gpu_vllm.json" in out
    assert "engine vllm-server (weight sync auto), packing off; sides ours;" in out  # the server-mode row
    assert "bench_learner_gpu_server.json" in out
    after = {p: p.stat().st_mtime for p in (ROOT / "benchmarks" / "results").glob("bench_learner_gpu*.json")}
    assert after == before  # nothing written


def test_an_unknown_option_is_refused() -> None:
    proc = _run("--frobnicate")
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.parametrize("bad", [["--model-shape", "qwen2-70b"], ["--sides", "ours,nope"], ["--sides", "floor"],
                                 ["--engine", "vllm-server", "--weight-sync", "ipc"],
                                 ["--engine", "vllm-server", "--weight-sync", "nccl"]])  # nccl from a CPU learner
def test_bench_learner_dry_run_refuses_what_would_fail(bad: list[str]) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_learner.py"), "--dry-run", *bad],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode != 0
    if "nccl" in bad:
        assert "--weight-sync nccl broadcasts from the learner's GPU, but the learner is on cpu" in proc.stderr
