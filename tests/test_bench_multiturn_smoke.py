"""Smoke test of benchmarks/bench_multiturn.py: both modes run side by side on a few GuessNumber-v0 episodes of
the tiny model and of a shallow SmolLM2-shaped one, sample the same tokens, and the JSON holds the ratios."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmark_loader import load_benchmark

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def bench():
    yield load_benchmark("bench_multiturn")
    sys.modules.pop("bench_multiturn", None)


def test_bench_multiturn_runs_both_modes_and_writes_where_told(bench, tmp_path: Path, capsys) -> None:
    out = tmp_path / "mt.json"
    assert bench.main(["--models", "tiny", "smollm2", "--smollm2-layers", "2", "--turns", "2", "--prompts", "1",
                       "--group-size", "2", "--max-tokens", "4", "--repeats", "1", "--threads", "1",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [(r["model"], r["turns"]) for r in result["rows"]] == [("tiny", 2), ("smollm2", 2)]
    for row in result["rows"]:
        reuse, again = row["reuse"], row["reprefill"]
        assert reuse["context_tokens_prefilled"] < again["context_tokens_prefilled"]  # the history is not re-run
        assert row["speedup_wall"] == pytest.approx(reuse["tokens_per_s"] / again["tokens_per_s"])
        assert reuse["cpu_s"] > 0 and again["wall_s"] > 0
    table = capsys.readouterr().out
    assert "| tiny | 2 |" in table and "speed-up (CPU)" in table


def test_bench_multiturn_rejects_bad_arguments(bench) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--turns", "0"])


def test_modes_may_part_only_at_a_cdf_boundary(bench) -> None:
    from types import SimpleNamespace as Episode

    same = Episode(token_ids=(5, 6, 7), logprobs=(-1.0, -2.0, -3.0))
    flip = Episode(token_ids=(5, 6, 8), logprobs=(-1.0, -2.0, -3.5))  # neighbouring ids, equal log-probs before
    far = Episode(token_ids=(5, 6, 40), logprobs=(-1.0, -2.0, -3.0))
    drift = Episode(token_ids=(5, 6, 8), logprobs=(-1.0, -2.5, -3.0))
    assert bench.same_samples([same, same], [same, flip], "t") == 1
    with pytest.raises(RuntimeError, match="episode 0 .* token 2"):
        bench.same_samples([same], [far], "t")
    with pytest.raises(RuntimeError, match="log-prob drift 0.5"):
        bench.same_samples([same], [drift], "t")
