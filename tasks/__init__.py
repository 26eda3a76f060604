"""Tasks: named sources of problems with a prompt template and a verifier.

Importing this package registers every built-in task (and its Gymnasium id) without loading any data,
torch or `datasets`. See ``docs/tasks.md``.
"""

from __future__ import annotations

from .base import DataFiles, ProblemSource, Task, TaskDataError, template_fields
from .registry import get_task, list_tasks, register_task, unregister_task

# Built-in tasks: each module registers its task(s) on import.
from . import arithmetic, code_tasks, countdown, largest, math_tasks, sort  # noqa: E402,F401  (after the registry exists)
from . import guess_number  # noqa: E402,F401  (multi-turn)
from . import multiturn_tasks  # noqa: E402,F401  (multi-turn, on the code sandbox)
from . import hidden_table  # noqa: E402,F401  (multi-turn, tool use)
from .arithmetic import ArithmeticConfig
from .countdown import CountdownAnswer, CountdownConfig, CountdownVerifier
from .largest import LargestConfig
from .loading import DatasetSource
from .procedural import ProceduralSource
from .sort import SortConfig, SortVerifier

__all__ = [
    "ArithmeticConfig",
    "CountdownAnswer",
    "CountdownConfig",
    "CountdownVerifier",
    "DataFiles",
    "DatasetSource",
    "LargestConfig",
    "ProblemSource",
    "ProceduralSource",
    "SortConfig",
    "SortVerifier",
    "Task",
    "TaskDataError",
    "get_task",
    "list_tasks",
    "register_task",
    "template_fields",
    "unregister_task",
]
