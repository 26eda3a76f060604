"""Record (or replay) the metrics streams of fixed-seed training runs, value for value.

The streams in this folder were recorded on main before the rollout-seam rebuild (issue 22). The replay
test (``tests/learners/test_replay.py``) runs the same commands and asserts that every recorded value comes
back, timing and throughput keys aside: exactly, or for floats within the rounding by which CPUs differ. A deliberate change of behaviour re-records them with::

    python tests/learners/replay/record.py            # rewrites tests/learners/replay/*.jsonl

and says why in the commit that does it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: Shared settings: short warm start, a held-out evaluation every other step, no checkpoint or plot churn.
COMMON = ["--max-steps", "3", "--no-progress", "--seed", "0"]
SMALL = ["warmstart_steps=50", "eval_every=2", "eval_size=32", "checkpoint_every=100", "plot_every=100"]

#: name -> ``dapo-env train`` arguments.
RUNS: dict[str, list[str]] = {
    "default": [*COMMON, "--set", *SMALL],
    "guess": [*COMMON, "--preset", "guess", "--set", *SMALL],
    "staleness1": [*COMMON, "--max-staleness", "1", "--set", *SMALL],
}

#: Keys whose values depend on the clock or the machine's load, not on the computation.
VOLATILE_PREFIXES = ("time/", "perf/")


def stable(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without the timing and throughput keys."""
    return {k: v for k, v in record.items() if not k.startswith(VOLATILE_PREFIXES)}


def run(name: str, out_dir: Path) -> list[dict[str, Any]]:
    """Run the recorded command ``name`` into ``out_dir`` and return its metrics records (stable keys only)."""
    from dapo_env.learners.cli import main

    rc = main(["train", *RUNS[name], "--out-dir", str(out_dir), "--run-name", name])
    if rc not in (0, None):
        raise RuntimeError(f"dapo-env train {' '.join(RUNS[name])} exited {rc}")
    lines = (out_dir / name / "metrics.jsonl").read_text().splitlines()
    return [stable(json.loads(line)) for line in lines if line.strip()]


def reference(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def main() -> None:
    names = sys.argv[1:] or list(RUNS)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            records = run(name, Path(tmp))
        (HERE / f"{name}.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
        print(f"{name}: {len(records)} records")


if __name__ == "__main__":
    main()
