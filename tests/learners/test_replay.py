"""Behaviour is unchanged, proven: fixed-seed runs replay the metrics streams recorded before a refactor.

The reference streams (``tests/learners/replay/*.jsonl``) were recorded on main before the rollout-seam
rebuild: the default run, ``--preset guess`` and ``--max-staleness 1``, three steps each. Every recorded
value (timing and throughput keys aside) must come back: integers, booleans and strings identical (every
reward, count, length and sampled-token statistic), floats to within the rounding by which one CPU's kernels
differ from another's (:data:`REL_TOL`, :data:`ABS_TOL`). The streams were recorded on a Xeon with AMX; on an
AMD EPYC the update's floats (loss, grad norm, KL, entropy) replay within 1.3e-4 relative after three steps,
the engine-vs-learner log-prob mismatch (a 1e-7 rounding quantity) within 8e-7 absolute, and every rollout
value exactly. A deliberate change of behaviour re-records them (``python tests/learners/replay/record.py``)
in the commit that makes it, saying why.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parent / "replay" / "record.py"
_spec = importlib.util.spec_from_file_location("replay_record", RECORD)
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)


#: Float tolerance: a changed computation moves these values by far more (a different advantage, clip or
#: denominator changes the loss in its first digits), while another CPU's kernels round differently.
REL_TOL, ABS_TOL = 1e-3, 1e-5


def _same(expected: object, got: object) -> bool:
    if isinstance(expected, float) and isinstance(got, float):
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        return math.isclose(expected, got, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return expected == got and type(expected) is type(got)


def _differences(expected: list[dict], got: list[dict]) -> list[str]:
    out = []
    if len(expected) != len(got):
        out.append(f"{len(got)} records, recorded {len(expected)}")
    for i, (e, g) in enumerate(zip(expected, got)):
        for key in sorted(set(e) | set(g)):
            ev, gv = e.get(key, "<missing>"), g.get(key, "<missing>")
            if not _same(ev, gv):
                out.append(f"record {i} (step {e.get('step')}): {key}: recorded {ev!r}, replayed {gv!r}")
    return out


@pytest.mark.parametrize("name", sorted(record.RUNS))
def test_fixed_seed_run_replays_its_recorded_metrics(name: str, tmp_path: Path) -> None:
    expected = record.reference(name)
    got = record.run(name, tmp_path)
    diffs = _differences(expected, got)
    assert not diffs, f"{name}: {len(diffs)} values differ from the recorded stream:\n" + "\n".join(diffs[:30])


def test_the_comparison_can_fail() -> None:
    recorded = [{"step": 1, "loss/policy": 0.5, "reward/mean": 0.0, "rollout/samples": 64}]
    assert _differences(recorded, [{**recorded[0], "loss/policy": 0.501}])  # a changed computation
    assert _differences(recorded, [{**recorded[0], "reward/mean": 0.001}])
    assert _differences(recorded, [{**recorded[0], "rollout/samples": 65}])
    assert _differences(recorded, [{**recorded[0], "rollout/samples": 64.0}])
    assert _differences(recorded, [{"step": 1, "loss/policy": 0.5, "reward/mean": 0.0}])  # a key lost
    assert _differences(recorded, [{**recorded[0], "loss/policy": float("nan")}])
    assert not _differences(recorded, [dict(recorded[0])])
    assert not _differences(recorded, [{**recorded[0], "loss/policy": 0.5000001}])  # another CPU's rounding
    assert record.stable({"time/step_s": 1.0, "perf/x": 2.0, "step": 3}) == {"step": 3}
