from __future__ import annotations

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


def test_trl_reward_example_runs_as_a_script() -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / "trl_reward.py")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "standard:       [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]" in result.stdout
    assert "conversational: [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]" in result.stdout


@pytest.mark.parametrize("name", ["gym_loop.py", "trl_reward.py"])
def test_examples_have_a_docstring_with_a_run_line(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    assert f"python examples/{name}" in text
