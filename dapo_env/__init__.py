"""dapo-env: reasoning tasks as Gymnasium environments with rule-based verifiers.

Importing this package registers every built-in task as a Gymnasium id. It never imports torch.
"""

from __future__ import annotations

from dapo_env.types import CodeTests, Completion, Group, Problem, RolloutBatch, VerifyResult

__version__ = "0.1.0"

__all__ = ["CodeTests", "Completion", "Group", "Problem", "RolloutBatch", "VerifyResult", "__version__"]
