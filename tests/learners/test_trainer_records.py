"""What the trainer records around its batches and evaluations: an empty batch's batch metrics are null
(never 0.0), and the run report is refreshed after every evaluation."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from dapo_env.learners.run import report
from dapo_env.learners.metrics import is_batch_metric
from dapo_env.learners.run.run_folder import RunFolderError
from dapo_env.learners.trainer import train
from tests.learners.trainer_helpers import tiny_config


def never_right(response: str, reference: Any) -> bool:
    """A toy verifier that grades every response wrong: every group has zero advantage."""
    return False


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_an_empty_batch_records_its_batch_metrics_as_null_not_zero(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, max_steps=2, verifier=f"{__name__}:never_right", max_gen_rounds=1,
                      checkpoint_every=0, plot_every=0, eval_every=0, report_every_eval=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the sampler warns once about the partial batch
        result = train(cfg)
    steps = [r for r in _lines(result.run_dir) if r["step"] > 0]
    assert len(steps) == 2 and all(r["rollout/num_groups"] == 0 for r in steps)
    for record in steps:
        batch = {k: v for k, v in record.items() if is_batch_metric(k)}
        assert {"reward/mean", "rollout/accuracy", "loss/policy", "policy/entropy", "optim/grad_norm"} <= set(batch)
        assert all(v is None for v in batch.values()), batch  # null in the file, never 0.0
        # metrics over every generated sample keep their values
        assert record["rollout/accuracy_before_filter"] == 0.0 and record["response/length_mean"] > 0
        assert record["rollout/samples_generated"] == cfg.batch_size * cfg.group_size


def test_the_report_is_refreshed_after_every_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[int] = []
    real = report.write_report

    def spy(run_dir: str | Path, **kwargs: Any) -> Path:
        written.append(len(_lines(Path(run_dir))))  # the metrics lines the report saw
        return real(run_dir, **kwargs)

    monkeypatch.setattr(report, "write_report", spy)
    cfg = tiny_config(tmp_path, max_steps=3, eval_every=2, checkpoint_every=0, plot_every=0)
    result = train(cfg)
    evals = [r["step"] for r in _lines(result.run_dir) if "eval/accuracy" in r]
    assert evals == [0, 2, 3]
    assert written == [1, 3, 4]  # after steps 0, 2 and 3 were logged, each with its evaluation
    assert (result.run_dir / "report.html").read_text().lower().startswith("<!doctype html")


def test_the_report_refresh_can_be_switched_off_and_a_failing_one_never_stops_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    off = train(tiny_config(tmp_path / "off", max_steps=1, checkpoint_every=0, plot_every=0,
                            report_every_eval=False))
    assert not (off.run_dir / "report.html").exists()

    def broken(run_dir: str | Path, **kwargs: Any) -> Path:
        raise RunFolderError("metrics.jsonl line 2: not JSON")

    monkeypatch.setattr(report, "write_report", broken)
    with pytest.warns(RuntimeWarning, match="report.html not refreshed .*dapo-env report"):
        result = train(tiny_config(tmp_path / "on", max_steps=2, checkpoint_every=0, plot_every=0))
    assert [r["step"] for r in _lines(result.run_dir)] == [0, 1, 2]
    with pytest.raises(ValueError, match="report_every_eval: must be true or false"):
        tiny_config(tmp_path, report_every_eval="yes")
