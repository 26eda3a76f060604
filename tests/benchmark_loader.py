"""Import a benchmark script (benchmarks/ is a folder of scripts, not a package) for its smoke test.

The folder goes on ``sys.path`` as it does when a script runs (``python benchmarks/x.py``), so the scripts'
shared helpers (``from _paths import ...``) import the same way in tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.append(str(BENCHMARKS))


def load_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` as module ``<name>``, kept in sys.modules so that pickling by
    reference works; callers pop it when done."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
