"""The default run learns: held-out accuracy rises substantially (slow: minutes on a CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo_env.learners.config import preset
from dapo_env.learners.trainer import train


@pytest.mark.slow
@pytest.mark.xfail(reason="known gap: the tiny default run raises train-prompt accuracy but not yet held-out "
                   "accuracy (see docs/learner.md, 'The default run')", strict=False)
def test_default_run_first_half_improves_held_out_accuracy(tmp_path: Path) -> None:
    cfg = preset("tiny")
    result = train(cfg.with_overrides({"max_steps": cfg.max_steps // 2, "out_dir": str(tmp_path),
                                       "progress": False}))
    start, end = result.initial_eval_accuracy, result.final_eval_accuracy
    assert start is not None and end is not None
    assert start <= 0.30, f"the warm start should leave held-out accuracy low, got {start:.2f}"
    assert end >= start + 0.25, f"held-out accuracy {start:.2f} -> {end:.2f}: DAPO did not learn"
    assert (result.run_dir / "curves.png").exists()
