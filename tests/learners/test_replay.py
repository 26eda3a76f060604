"""Behaviour is unchanged, proven: fixed-seed runs replay the metrics streams recorded before a refactor.

The reference streams (``tests/learners/replay/*.jsonl``) were recorded on main before the rollout-seam
rebuild: the default run, ``--preset guess`` and ``--max-staleness 1``, three steps each. Every recorded
value (timing and throughput keys aside) must come back identical. A deliberate change of behaviour
re-records them (``python tests/learners/replay/record.py``) in the commit that makes it, saying why.
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


def _differences(expected: list[dict], got: list[dict]) -> list[str]:
    out = []
    if len(expected) != len(got):
        out.append(f"{len(got)} records, recorded {len(expected)}")
    for i, (e, g) in enumerate(zip(expected, got)):
        for key in sorted(set(e) | set(g)):
            ev, gv = e.get(key, "<missing>"), g.get(key, "<missing>")
            same = ev == gv or (isinstance(ev, float) and isinstance(gv, float) and math.isnan(ev) and math.isnan(gv))
            if not same:
                out.append(f"record {i} (step {e.get('step')}): {key}: recorded {ev!r}, replayed {gv!r}")
    return out


@pytest.mark.parametrize("name", sorted(record.RUNS))
def test_fixed_seed_run_replays_its_recorded_metrics(name: str, tmp_path: Path) -> None:
    expected = record.reference(name)
    got = record.run(name, tmp_path)
    diffs = _differences(expected, got)
    assert not diffs, f"{name}: {len(diffs)} values differ from the recorded stream:\n" + "\n".join(diffs[:30])


def test_the_comparison_can_fail() -> None:
    recorded = [{"step": 1, "loss/policy": 0.5, "reward/mean": 0.0}]
    assert _differences(recorded, [{"step": 1, "loss/policy": 0.5000001, "reward/mean": 0.0}])
    assert _differences(recorded, [{"step": 1, "loss/policy": 0.5}])
    assert not _differences(recorded, [dict(recorded[0])])
    assert record.stable({"time/step_s": 1.0, "perf/x": 2.0, "step": 3}) == {"step": 3}
