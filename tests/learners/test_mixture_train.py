"""A mixture trains like a task: per-task metrics in metrics.jsonl and the report, exact resume, per-task eval."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from trainer_helpers import tiny_config

from dapo_env.learners.metrics import progress_postfix, read_metrics, strip_timing
from dapo_env.learners.trainer import train

MIX = "Largest-v0:0.7,Arithmetic-v0:0.3"
IDS = ("Largest-v0", "Arithmetic-v0")
PER_TASK = ("reward_mean", "accuracy", "accuracy_before_filter", "informative_share", "response_length_mean",
            "tokens_per_informative_group", "groups", "groups_generated")


def _exact(records: list[dict]) -> list[dict]:
    """Records without timing and the engine-vs-learner log-prob mismatch (a 1e-7 rounding quantity that a resumed
    single-task run reproduces only to rounding too)."""
    return [{k: v for k, v in r.items() if not k.startswith("policy/logprob_mismatch")} for r in strip_timing(records)]


def test_a_mixture_run_reports_each_task_and_resumes_exactly(tmp_path: Path) -> None:
    cfg = dict(task=MIX, max_steps=2, eval_every=0, eval_size=4, checkpoint_every=1, plot_every=0, batch_size=4,
               group_size=2, mini_batch_size=4, max_gen_rounds=1, max_response_tokens=6)
    full = train(tiny_config(tmp_path / "full", **cfg))
    steps = [r for r in full.metrics if r["step"] >= 1]
    for record in steps:
        for task_id in IDS:
            assert {f"task/{task_id}/{name}" for name in PER_TASK} <= set(record)
        generated = sum(record[f"task/{t}/groups_generated"] for t in IDS)
        assert generated * 2 == record["rollout/samples_generated"]  # every generated group counted under its task
        assert sum(record[f"task/{t}/groups"] for t in IDS) == record["rollout/num_groups"]
        shares = [record[f"task/{t}/informative_share"] for t in IDS]
        assert all(s is None or 0.0 <= s <= 1.0 for s in shares)
        assert set(progress_postfix(record, [])) >= set(IDS)
    drawn = sum(r["task/Largest-v0/groups_generated"] for r in steps) / sum(
        r[f"task/{t}/groups_generated"] for r in steps for t in IDS)
    assert drawn > 0.4  # the 0.7 task drew most of the 8 groups

    # a run stopped after step 1's checkpoint resumes to the uninterrupted run's step 2, value for value
    shutil.copytree(full.run_dir, tmp_path / "split" / "t")
    shutil.rmtree(tmp_path / "split" / "t" / "checkpoints" / "step_000002")
    resumed = train(tiny_config(tmp_path / "split", **cfg), resume=True)
    assert _exact(resumed.metrics) == _exact(full.metrics)

    from dapo_env.learners.run.report import write_report

    html = write_report(full.run_dir).read_text()
    assert "Per task (a mixture)" in html and "chart-task-informative-share" in html
    eval_ids = {line.split('"problem_id": "')[1].split("/")[0]
                for line in (full.run_dir / "eval" / "step_000002.jsonl").read_text().splitlines()}
    assert eval_ids == set(IDS)  # the held-out set holds both tasks


def test_a_single_task_run_has_no_per_task_keys(tmp_path: Path) -> None:
    result = train(tiny_config(tmp_path, max_steps=1, eval_size=2, checkpoint_every=0, plot_every=0, batch_size=2,
                               group_size=2, mini_batch_size=2, max_gen_rounds=1, max_response_tokens=4))
    assert not any(k.startswith("task/") for r in read_metrics(result.run_dir / "metrics.jsonl") for k in r)
    assert not math.isnan(result.metrics[-1]["rollout/accuracy_before_filter"])


def test_an_eval_of_a_mixture_summarises_each_task() -> None:
    from dapo_env.learners.run.eval_run import EvalSettings, eval_task, summarize_eval

    settings = EvalSettings(task=MIX, size=4)
    task = eval_task(settings)
    records = [{"index": i, "problem_id": pid, "greedy": True, "sample": 0, "correct": ok, "reason": "r",
                "tokens": 3, "finish_reason": "stop", "extracted": None}
               for i, (pid, ok) in enumerate([("Largest-v0/test-0", True), ("Largest-v0/test-1", False),
                                              ("Arithmetic-v0/test-0", False), ("Largest-v0/test-2", True)])]
    summary = summarize_eval(records, task, settings, 4, {})
    assert summary["metrics"]["greedy"]["value"] == 0.5
    assert {t: m["greedy"]["value"] for t, m in summary["tasks"].items()} == {"Largest-v0": 2 / 3, "Arithmetic-v0": 0.0}
