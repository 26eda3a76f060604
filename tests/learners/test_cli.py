from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_env.learners.cli import main, parse_overrides
from dapo_env.learners.metrics import read_metrics

HERE = Path(__file__).parent
FAST = ["--set", "warmstart_steps=0", "batch_size=4", "group_size=4", "mini_batch_size=2", "micro_batch_size=8",
        "tiny_hidden_size=64", "tiny_heads=2", "tiny_layers=1", "eval_size=8", "max_response_tokens=8",
        "overlong_cache_length=2", "num_threads=1", "checkpoint_every=1"]


def test_parse_overrides() -> None:
    assert parse_overrides(["group_size=8", "packing=off", "overlong_filter=on", "xy=[1, 2]", "d=x"]) == {
        "group_size": 8, "packing": "off", "overlong_filter": True, "task_kwargs": {"xy": [1, 2], "d": "x"}}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_overrides(["novalue"])


def test_train_max_steps_then_resume_then_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    args = ["train", "--out-dir", str(tmp_path), "--run-name", "r", "--max-steps", "1", "--seed", "3",
            "--verifier", "trainer_helpers:even_length", "--no-progress", *FAST]
    assert main(args) == 0
    out = capsys.readouterr().out
    run = tmp_path / "r"
    assert str(run) in out and "held-out accuracy" in out
    config = json.loads((run / "config.json").read_text())
    assert (config["preset_name"], config["seed"], config["max_steps"]) == ("tiny", 3, 1)
    assert main(["train", "--resume", str(run), "--max-steps", "2", "--no-progress"]) == 0
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [0, 1, 2]
    model_dir = run / "checkpoints" / "step_000002" / "model"
    assert main(["eval", "--model", str(model_dir), "--task", "Arithmetic-v0", "--size", "4", "--max-response-tokens", "8"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["size"] == 4 and 0.0 <= report["accuracy"] <= 1.0


def test_config_file_and_bad_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('preset = "grpo"\nmax_steps = 1\neval_every = 0\ncheckpoint_every = 0\nplot_every = 0\n')
    assert main(["train", "--config", str(cfg), "--out-dir", str(tmp_path), "--run-name", "g", "--no-progress",
                 "--verifier", "trainer_helpers:even_length", *FAST]) in (0,)
    assert json.loads((tmp_path / "g" / "config.json").read_text())["loss_agg"] == "seq-mean-token-mean"
    assert main(["train", "--out-dir", str(tmp_path), "--set", "group_size=1"]) == 2
    assert "group_size" in capsys.readouterr().err


def test_module_entry_point_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "dapo_env.learners.train", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "--resume" in proc.stdout


def test_prepare_model_subcommand_reaches_its_parser(capsys) -> None:
    """`dapo-env prepare-model` dispatches to learners.pretrained.main (here: its --help)."""
    from dapo_env.learners.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["prepare-model", "--help"])
    assert exc.value.code == 0
    assert "GGUF" in capsys.readouterr().out
