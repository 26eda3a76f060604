"""Where the real-data tests find the datasets: ``$DAPO_ENV_DATA`` (docs/tasks.md), and why they skip without it.

Example:
    >>> "dapo_math_17k/dapo_math_17k.jsonl.gz" in REAL_DATA_FILES
    True
"""

from __future__ import annotations

from pathlib import Path

from benchmark_loader import load_benchmark

_paths = load_benchmark("_paths")  # one lookup of the real-data folder for tests and benchmarks alike
DATA_ENV = _paths.DATA_ENV

#: The real datasets the real-data tests read, relative to the data folder (docs/tasks.md, "Real data").
REAL_DATA_FILES = (
    "dapo_math_17k/dapo_math_17k.jsonl.gz",
    "math_500/math500_test.jsonl",
    "aime_2024/aime_2024.jsonl",
    "aime_2025/aime_2025.jsonl",
    "gsm8k/gsm8k_test.jsonl",
    "gsm8k/gsm8k_train.jsonl",
    "mbpp/mbpp.jsonl",
    "mbpp/mbpp_sanitized.jsonl",
    "humaneval/HumanEval.jsonl.gz",
    "humaneval/humaneval.jsonl",
)
_DATASETS = "DAPO-Math-17k, MATH-500, AIME 2024/2025, GSM8K, MBPP and HumanEval"
_LAYOUT = "layout: docs/tasks.md, 'Real data for the tests'"


def real_data_skip_reason() -> str | None:
    """Why the real-data tests cannot run here (None when they can): said to a user, with the fix."""
    folder = _paths.data_dir()
    if folder is None:
        return (f"real-data test: needs local copies of {_DATASETS}: set {DATA_ENV} to a folder holding them "
                f"({_LAYOUT})")
    if not folder.is_dir():
        return f"real-data test: {DATA_ENV}={folder} is not a folder: point it at one holding {_DATASETS} ({_LAYOUT})"
    missing = [name for name in REAL_DATA_FILES if not (folder / name).is_file()]
    if missing:
        return f"real-data test: the data folder {folder} lacks {', '.join(missing)}: add them ({_LAYOUT})"
    return None


def data_folder() -> Path | None:
    """The folder of real datasets (``$DAPO_ENV_DATA``, else the project's fallback), or None."""
    return _paths.data_dir()

