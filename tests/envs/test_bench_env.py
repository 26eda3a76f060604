from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from benchmark_loader import load_benchmark


@pytest.fixture
def bench():
    yield load_benchmark("bench_env")
    sys.modules.pop("bench_env", None)


def test_bench_env_smoke_writes_its_table(bench, tmp_path: Path, capsys) -> None:
    out = tmp_path / "bench_env.json"
    result = bench.main(["--steps", "1", "--groups", "4", "--group-size", "4", "--workers", "1", "--data", "fixture",
                         "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert [r["workers"] for r in result["results"]] == [0, 1]
    assert all(r["responses"] == 16 and r["responses_per_s"] > 0 for r in result["results"])
    assert result["data"] == "generated fixture"
    assert "responses/s" in capsys.readouterr().out
