"""Shared plumbing of the benchmark scripts: where results go and where real data is found.

Results go to an untracked folder (``runs/benchmarks/``, git-ignored) unless ``--out`` names a file; the
tracked tables under ``benchmarks/results/`` are only written when asked for by path. Real datasets are
looked up in ``$DAPO_ENV_DATA`` (a folder with ``mbpp/``, ``gsm8k/``, ... as in the project's data README),
then ``../shared/data`` next to the checkout.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
UNTRACKED = ROOT / "runs" / "benchmarks"


def add_out_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """``--out PATH`` (default ``runs/benchmarks/<name>.json``, untracked)."""
    parser.add_argument("--out", type=Path, default=UNTRACKED / f"{name}.json",
                        help=f"where to write the JSON results (default: runs/benchmarks/{name}.json, untracked; "
                             f"pass benchmarks/results/{name}.json to update the tracked table)")


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` (parents created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def data_dir() -> Path | None:
    """The folder of real datasets: ``$DAPO_ENV_DATA``, else ``../shared/data``; ``None`` when neither exists."""
    for candidate in (os.environ.get("DAPO_ENV_DATA"), ROOT.parent / "shared" / "data"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


__all__ = ["ROOT", "UNTRACKED", "add_out_argument", "data_dir", "write_json"]
