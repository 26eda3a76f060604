"""Where the benchmarks read real data and write their results (shared by every script in this folder).

A benchmark run never touches the tracked ``benchmarks/results/`` unless asked: by default its JSON goes
to the git-ignored ``benchmarks/out/<name>.json``; ``--out PATH`` chooses, and
``--out benchmarks/results/<name>.json`` is how a tracked result is refreshed on purpose.

Real datasets come from the folder named by the ``DAPO_ENV_DATA`` environment variable (laid out as in
``docs/tasks.md``); a ``shared/data`` folder next to the checkout is the fallback. Benchmarks fall back to
generated data when neither has the file they want.

Scripts import this module by name (``from _paths import ...``): running ``python benchmarks/x.py`` puts
this folder first on ``sys.path``.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_out_argument(parser, "bench_demo")
    >>> out_path(parser.parse_args([]).out, "bench_demo").relative_to(REPO).as_posix()
    'benchmarks/out/bench_demo.json'
    >>> out_path("elsewhere/run.json", "bench_demo").name
    'run.json'
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The default, git-ignored destination of benchmark JSON.
UNTRACKED_DIR = REPO / "benchmarks" / "out"
#: The tracked results quoted by the docs; written only when ``--out`` points here.
TRACKED_DIR = REPO / "benchmarks" / "results"
#: The environment variable naming a folder of the real datasets (layout: docs/tasks.md).
DATA_ENV = "DAPO_ENV_DATA"


def add_out_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """Add ``--out PATH`` (default ``None``: the untracked ``benchmarks/out/<name>.json``)."""
    parser.add_argument(
        "--out", type=Path, default=None, metavar="PATH",
        help=f"JSON file to write (default: benchmarks/out/{name}.json, git-ignored; "
             f"pass benchmarks/results/{name}.json to update the tracked result)",
    )


def out_path(out: str | os.PathLike[str] | None, name: str) -> Path:
    """The file a benchmark writes: ``out`` when given, else ``benchmarks/out/<name>.json``."""
    return Path(out) if out is not None else UNTRACKED_DIR / f"{name}.json"


def write_json(path: str | os.PathLike[str], payload: Any, *, indent: int = 2) -> Path:
    """Write ``payload`` as JSON to ``path`` atomically (parents created) and say where; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=indent) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print(f"wrote {_shown(path)}", flush=True)
    return path


def data_dir() -> Path | None:
    """The folder of real datasets: ``$DAPO_ENV_DATA``, else ``shared/data`` beside the checkout, else None."""
    named = os.environ.get(DATA_ENV)
    if named:
        return Path(named).expanduser()
    fallback = REPO.parent / "shared" / "data"
    return fallback if fallback.is_dir() else None


def data_file(relative: str) -> Path | None:
    """``data_dir() / relative`` when that file exists, else None (the caller generates data instead)."""
    folder = data_dir()
    path = folder / relative if folder is not None else None
    return path if path is not None and path.is_file() else None


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a benchmark's worker process: this checkout first on ``PYTHONPATH`` (so the
    child imports the same code as the parent, installed or not), plus ``extra`` variables."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


__all__ = ["DATA_ENV", "REPO", "TRACKED_DIR", "UNTRACKED_DIR", "add_out_argument", "child_env", "data_dir", "data_file",
           "out_path", "write_json"]
