from __future__ import annotations

import json
import runpy
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_env.py"


def test_bench_env_smoke_writes_its_table(tmp_path: Path, capsys) -> None:
    main = runpy.run_path(str(BENCH))["main"]
    out = tmp_path / "bench_env.json"
    result = main(["--steps", "1", "--groups", "4", "--group-size", "4", "--workers", "1", "--data", "fixture", "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert [r["workers"] for r in result["results"]] == [0, 1]
    assert all(r["responses"] == 16 and r["responses_per_s"] > 0 for r in result["results"])
    assert result["data"] == "generated fixture"
    assert "responses/s" in capsys.readouterr().out
