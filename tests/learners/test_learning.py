"""The default run meets the done-when target on held-out problems (slow: minutes on a CPU).

``dapo-env train`` with no arguments (the ``tiny`` preset) must take held-out accuracy from at most 30%
to at least 80% within 10 minutes, warm start included. Held-out accuracy is ``eval/accuracy``: greedy
decoding on the first 200 problems of the test split, whose questions the model never sees in training
(the procedural splits are disjoint by question hash). The run uses one torch thread, so its CPU time
is the wall time it would take on a free machine; a shared CI box only inflates the wall clock.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dapo_env.learners.config import preset
from dapo_env.learners.trainer import train

CPU_BUDGET_S = 600.0  # the done-when budget: 10 minutes


@pytest.mark.slow
def test_default_run_takes_held_out_accuracy_from_at_most_30_to_at_least_80_percent(tmp_path: Path) -> None:
    cpu0 = time.process_time()
    result = train(preset("tiny").with_overrides({"out_dir": str(tmp_path), "progress": False}))
    cpu_s = time.process_time() - cpu0
    start, end = result.initial_eval_accuracy, result.final_eval_accuracy
    assert start is not None and end is not None
    assert start <= 0.30, f"the warm start should leave held-out accuracy low, got {start:.2f}"
    assert end >= 0.80, f"held-out accuracy {start:.2f} -> {end:.2f}: below the 0.80 target"
    assert cpu_s <= CPU_BUDGET_S, f"the default run took {cpu_s:.0f} CPU-s, over the {CPU_BUDGET_S:.0f} s budget"
    assert (result.run_dir / "curves.png").exists()
