from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_gym_loop_example_runs_and_reports() -> None:
    module = runpy.run_path(str(EXAMPLES / "gym_loop.py"))
    summary = module["main"](["--episodes", "30", "--p-correct", "1.0"])
    assert summary["accuracy"] == 1.0 and summary["episodes"] == 30
    # every response is right (+1) minus its overlong penalty, and some are cut at 64 tokens and masked
    assert 0.0 < summary["mean_reward"] <= 1.0 and summary["loss_masked"] > 0
    summary = module["main"](["--episodes", "30", "--p-correct", "0.0"])
    assert summary["accuracy"] == 0.0 and summary["mean_reward"] < -1.0 + 1e-9


def test_trl_reward_example_trains_two_grpo_steps_as_a_script() -> None:
    pytest.importorskip("trl")
    result = subprocess.run([sys.executable, str(EXAMPLES / "trl_reward.py")], capture_output=True, text=True,
                            timeout=300, cwd=EXAMPLES.parent, env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)})
    assert result.returncode == 0, result.stderr[-3000:]
    # the call GRPOTrainer makes, on one right and three wrong completions per prompt, mapped to +-1
    assert "'Arithmetic_reward' on right/wrong completions: [1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0]" in result.stdout
    assert "step 2: rewards/Arithmetic_reward/mean = " in result.stdout
    assert "trained 2 GRPOTrainer steps" in result.stdout


def test_verl_reward_example_writes_parquet_and_scores_like_verl(tmp_path: Path) -> None:
    module = runpy.run_path(str(EXAMPLES / "verl_reward.py"))
    summary = module["main"](["--task", "Countdown-v0", "--limit", "3", "--out", str(tmp_path)])
    assert summary["scores"] == [1.0, -1.0] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.parquet", "train.parquet"]


@pytest.mark.parametrize("name", ["gym_loop.py", "trl_reward.py", "verl_reward.py"])
def test_examples_have_a_docstring_with_a_run_line(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    assert f"python examples/{name}" in text
