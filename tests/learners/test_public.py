"""The learner's public face: the names a user imports from ``dapo_env.learners`` (imported lazily)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_public_names_are_lazy_and_are_the_real_objects() -> None:
    code = ("import sys\n"
            "import dapo_env.learners as L\n"
            "print('torch' in sys.modules)\n"
            "from dapo_env.learners import (train, Trainer, TrainConfig, preset, policy_loss, group_advantages,\n"
            "                               HFEngine, SamplingParams, update_policy, evaluate, LocalCollective)\n"
            "from dapo_env.learners import trainer, config, losses, engine, update, evaluation, collective\n"
            "print(train is trainer.train and Trainer is trainer.Trainer and TrainConfig is config.TrainConfig\n"
            "      and preset is config.preset and policy_loss is losses.policy_loss\n"
            "      and group_advantages is losses.group_advantages and HFEngine is engine.HFEngine\n"
            "      and SamplingParams is engine.SamplingParams and update_policy is update.update_policy\n"
            "      and evaluate is evaluation.evaluate and LocalCollective is collective.LocalCollective)\n"
            "print(sorted(L.__all__) == L.__all__ and 'train' in L.__all__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True", "True"]
