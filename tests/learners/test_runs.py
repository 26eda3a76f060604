"""Run folders and presets as a user meets them through `dapo-env train`: a run folder is never silently
reused, a failed start leaves no folder, Ctrl-C checkpoints and says how to resume, presets own their task
knobs and run on the tiny model, and the loss options are reachable with --set."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dapo_env.learners.run.checkpoint import list_checkpoints
from dapo_env.learners.cli import main
from dapo_env.learners.metrics import read_metrics

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FAST = ["--set", "warmstart_steps=0", "batch_size=4", "group_size=4", "mini_batch_size=2", "micro_batch_size=8",
        "tiny_hidden_size=64", "tiny_heads=2", "tiny_layers=1", "eval_size=8", "max_response_tokens=8",
        "overlong_cache_length=2", "num_threads=1", "checkpoint_every=1", "plot_every=0"]


def _train(tmp_path: Path, *extra: str, settings: tuple[str, ...] = ()) -> int:
    return main(["train", "--out-dir", str(tmp_path), "--run-name", "r", "--no-progress", "--verifier",
                 "trainer_helpers:even_length", *extra, *FAST, *settings])


@pytest.fixture(autouse=True)
def _helpers_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def test_a_fresh_run_refuses_an_existing_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _train(tmp_path, "--max-steps", "2") == 0
    run = tmp_path / "r"
    before = (run / "metrics.jsonl").read_text()
    assert _train(tmp_path, "--max-steps", "1") == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err and len(err.splitlines()) == 1
    assert (run / "metrics.jsonl").read_text() == before  # untouched
    assert [p.name for p in list_checkpoints(run)] == ["step_000001", "step_000002"]
    assert _train(tmp_path, "--max-steps", "1", "--overwrite") == 0  # replaces it: nothing of the old run is left
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [0, 1]
    assert [p.name for p in list_checkpoints(run)] == ["step_000001"]
    assert main(["train", "--resume", str(run), "--overwrite", "--no-progress"]) == 2
    assert "not both" in capsys.readouterr().err


def test_a_run_that_fails_to_start_leaves_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The tiny model's context (256) cannot hold the prompts plus 250 response tokens: one line, no folder."""
    code = main(["train", "--out-dir", str(tmp_path), "--run-name", "bad", "--task", "Arithmetic-v0",
                 "--max-steps", "1", "--no-progress", *FAST, "max_response_tokens=250"])
    err = capsys.readouterr().err
    assert code == 2 and "exceed the context" in err and "--model PATH" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_ctrl_c_checkpoints_the_last_step_and_prints_the_resume_command(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    args = [sys.executable, "-m", "dapo_env.learners.cli", "train", "--out-dir", str(tmp_path), "--run-name", "c",
            "--max-steps", "500", "--no-progress", "--verifier", "trainer_helpers:even_length", *FAST,
            "checkpoint_every=0", "eval_every=0"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "c" / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and len(read_metrics(metrics)) >= 3:  # step 0 and two training steps
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "resume with: dapo-env train --resume" in err
    last = read_metrics(metrics)[-1]["step"]
    assert [p.name for p in list_checkpoints(tmp_path / "c")] == [f"step_{last:06d}"]
    assert main(["train", "--resume", str(tmp_path / "c"), "--max-steps", str(last + 1), "--no-progress"]) == 0
    assert [r["step"] for r in read_metrics(metrics)][-2:] == [last, last + 1]


def test_presets_own_their_task_knobs_and_grpo_runs_on_the_tiny_model(tmp_path: Path) -> None:
    from dapo_env.learners.cli import _train_parser, config_from_args  # noqa: PLC2701  (the parser under test)
    import argparse

    parser = argparse.ArgumentParser()
    _train_parser(parser.add_subparsers(dest="command"))
    cfg, _ = config_from_args(parser.parse_args(["train", "--task", "GSM8K-v0"]))
    assert (cfg.preset_name, cfg.task, cfg.task_kwargs) == ("tiny", "GSM8K-v0", {})  # no Largest-v0 knobs
    cfg, _ = config_from_args(parser.parse_args(["train", "--preset", "grpo"]))
    assert (cfg.clip_high, cfg.loss_agg, cfg.dynamic_sampling, cfg.max_response_tokens) == (
        0.2, "seq-mean-token-mean", False, 16)  # GRPO's switches at the tiny model's scale
    cfg, _ = config_from_args(parser.parse_args(["train", "--preset", "grpo", "--model", "some/folder"]))
    assert cfg.max_response_tokens == 20480  # a real model: the paper's scale
    code = main(["train", "--preset", "grpo", "--out-dir", str(tmp_path), "--run-name", "g", "--max-steps", "1",
                 "--no-progress", "--set", "warmstart_steps=0", "eval_size=8", "checkpoint_every=0", "plot_every=0"])
    assert code == 0
    saved = json.loads((tmp_path / "g" / "config.json").read_text())
    assert (saved["preset_name"], saved["task"], saved["clip_high"]) == ("grpo", "Largest-v0", 0.2)
    assert [r["step"] for r in read_metrics(tmp_path / "g" / "metrics.jsonl")] == [0, 1]


def test_gspo_and_tis_from_the_command_line(tmp_path: Path) -> None:
    assert _train(tmp_path, "--max-steps", "1", settings=("ratio_level=sequence", "is_correction=token-truncate",
                                                          "is_cap=2.0")) == 0
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (saved["ratio_level"], saved["is_correction"], saved["is_cap"]) == ("sequence", "token-truncate", 2.0)
    assert read_metrics(tmp_path / "r" / "metrics.jsonl")[-1]["loss/policy"] is not None
