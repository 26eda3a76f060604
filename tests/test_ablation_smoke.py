"""Smoke tests of benchmarks/ablation.py: the token-budget bookkeeping and summaries as pure functions,
and the whole pipeline (warm start, two rows of the paper's table, JSON) on a micro budget."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from benchmark_loader import load_benchmark

torch = pytest.importorskip("torch")



@pytest.fixture(scope="module")
def ablation():
    yield load_benchmark("ablation")
    sys.modules.pop("ablation", None)


def test_settings_validation_says_how_to_fix(ablation):
    with pytest.raises(ValueError, match="at least one seed"):
        ablation.AblationSettings(budget_tokens=10, seeds=())
    with pytest.raises(ValueError, match="rows must be"):
        ablation.AblationSettings(budget_tokens=10, seeds=(0,), rows=(9,))


def test_rows_follow_the_papers_cumulative_switches(ablation, tmp_path):
    settings = ablation.AblationSettings(budget_tokens=10, seeds=(0,), base=ablation.BASE)
    first = ablation.row_config(settings, 0, 0, str(tmp_path))
    last = ablation.row_config(settings, 5, 0, str(tmp_path))
    assert (first.clip_high, first.loss_agg, first.dynamic_sampling, first.overlong_penalty) == (
        0.2, "seq-mean-token-mean", False, False)
    assert (last.clip_high, last.loss_agg, last.dynamic_sampling, last.overlong_penalty, last.overlong_filter) == (
        0.28, "token-mean", True, True, True)
    assert first.group_size == last.group_size and first.max_response_tokens == last.max_response_tokens


def test_counting_engine_counts_training_rollouts_only(ablation):
    from dapo_env.learners.engines import HFEngine, SamplingParams
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    counter = ablation.CountingEngine(HFEngine(build_tiny_model(tok, seed=0), tok))
    sampling = SamplingParams(max_response_tokens=5, seed=0)
    out = counter.generate(["1+1="], n=3, sampling=sampling)
    assert counter.samples == 3 and counter.tokens == sum(c.num_tokens for c in out[0])
    assert counter.truncated == sum(c.finish_reason == "length" for c in out[0])
    counter.counting = False
    counter.generate(["2+2="], n=3, sampling=sampling)
    assert counter.samples == 3


def test_summary_and_mean_curves(ablation):
    runs = [
        {"row": 0, "seed": s, "final_accuracy": a, "initial_accuracy": 0.1, "final_entropy": 0.5,
         "truncation_rate": 0.1, "tokens": 100, "steps": 4, "evals": [(0, 0.1), (100, a)],
         "history": [{"tokens": 50, "entropy": 1.0}, {"tokens": 100, "entropy": 0.5}]}
        for s, a in ((0, 0.2), (1, 0.4))
    ]
    (row,) = ablation.summarise(runs, [0])
    assert row["accuracy_mean"] == pytest.approx(0.3) and row["accuracy_std"] == pytest.approx(np.std([0.2, 0.4], ddof=1))
    assert (row["accuracy_min"], row["accuracy_max"]) == (0.2, 0.4)
    curve = ablation._mean_curve(runs, np.array([0.0, 50.0, 100.0]), "accuracy")
    assert curve == pytest.approx([0.1, 0.2, 0.3])
    assert "naive GRPO" in ablation.format_table([row])


def test_quick_mode_runs_end_to_end(ablation, tmp_path):
    out = tmp_path / "ablation_quick.json"
    assert ablation.main(["--quick", "--out", str(out), "--cache-dir", "none"]) == 0
    data = json.loads(out.read_text())
    budget = data["settings"]["budget_tokens"]
    assert [t["config"] for t in data["table"]] == ["naive GRPO", "+ dynamic sampling (DAPO)"]
    for run in data["runs"]:
        assert run["tokens"] >= budget  # every run spends (at least) the same generated-token budget
        assert len(run["evals"]) >= 2 and run["evals"][-1][0] == run["tokens"]
        assert 0.0 <= run["truncation_rate"] <= 1.0
    img = tmp_path / "img"
    assert ablation.main(["--plot-only", str(out), "--img-dir", str(img)]) == 0
    assert {p.name for p in img.iterdir()} == {f"ablation_quick_{k}.png" for k in ("accuracy", "entropy", "dynamics")}
    redrawn = json.loads(out.read_text())
    assert "zero_adv_share" in redrawn["table"][0] and "accuracy_over_budget" in redrawn["table"][0]
    (versus,) = redrawn["comparisons"]
    assert versus["baseline"] == "naive GRPO" and versus["other"] == "+ dynamic sampling (DAPO)"


def test_shared_settings_come_from_the_tiny_preset(ablation, tmp_path):
    from dapo_env.learners.config import preset

    tiny = preset("tiny")
    for base, task_fields in ((ablation.BASE, ablation.SORT_TASK), (ablation.LARGEST_BASE, {})):
        settings = ablation.AblationSettings(budget_tokens=10, seeds=(0,), base=base)
        for row in range(len(ablation.ROWS)):
            cfg = ablation.row_config(settings, row, 0, str(tmp_path))
            for name in ablation.TINY_FIELDS:
                expected = task_fields.get(name, getattr(tiny, name))
                assert getattr(cfg, name) == expected, name
    assert ablation.BASE["task"] == "Sort-v0" and ablation.LARGEST_BASE["task"] == "Largest-v0"
    assert ablation.FULL.warmstart_target == tiny.warmstart_target_accuracy
    assert ablation.ARITHMETIC.base["task"] == "Arithmetic-v0"


def test_sort_regime_leaves_room_for_every_correct_answer(ablation):
    """The soft penalty starts above the longest correct answer, so only rambling is shaped or cut."""
    kw = ablation.SORT_TASK["task_kwargs"]
    longest = len("Answer: ") + 2 * kw["max_count"] - 1 + 1  # char-level tokens, + EOS
    assert longest <= ablation.SORT_TASK["max_response_tokens"] - ablation.SORT_TASK["overlong_cache_length"]


def test_preset_row_is_the_last_rung_without_filtering(ablation, tmp_path):
    from dapo_env.learners.config import preset

    settings = ablation.AblationSettings(budget_tokens=10, seeds=(0,), base=ablation.BASE)
    shipped = ablation.row_config(settings, len(ablation.ROWS) - 1, 0, str(tmp_path))
    dapo = preset("dapo")
    for name in ("clip_low", "clip_high", "loss_agg", "dynamic_sampling", "overlong_penalty", "overlong_filter"):
        assert getattr(shipped, name) == getattr(dapo, name), name


def test_paired_comparison_and_separation(ablation):
    def run(row, seed, acc):
        return {"row": row, "seed": seed, "final_accuracy": acc}

    runs = [run(0, 0, 0.10), run(0, 1, 0.30), run(5, 0, 0.25), run(5, 1, 0.35), run(1, 0, 0.05)]
    c = ablation.compare(runs, 0, 5)
    assert c["differences"] == pytest.approx([0.15, 0.05]) and c["wins"] == 2
    assert c["mean_difference"] == pytest.approx(0.10) and c["std_difference"] == pytest.approx(np.std([0.15, 0.05], ddof=1))
    assert not c["ranges_separate"]  # 0.25 is not above 0.30: paired wins, overlapping spreads
    assert ablation.compare([run(0, 0, 0.1), run(5, 0, 0.2)], 0, 5)["ranges_separate"]
    assert ablation.compare(runs, 0, 1)["seeds"] == [0] and ablation.compare(runs, 0, 3) is None
    assert [c["other"] for c in ablation.comparisons(runs, [0, 1, 5])] == ["+ overlong filtering",
                                                                          "+ dynamic sampling (DAPO)"]
    assert "| + dynamic sampling (DAPO) | +0.150 / +0.050 |" in ablation.format_comparisons([c])
