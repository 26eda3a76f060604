"""Rule-based verifiers: math answers and Python code, plus batched verification in worker processes.

Names are imported on first use, so importing the package costs nothing until a verifier is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dapo_env.types import VerifyResult

_LAZY = {
    "CallableVerifier": "dapo_env.verifiers.callable",
    "as_verifier": "dapo_env.verifiers.callable",
    "MathVerifier": "dapo_env.verifiers.math",
    "CodeVerifier": "dapo_env.verifiers.code",
    "VerifierPool": "dapo_env.verifiers.pool",
    "verify_batch": "dapo_env.verifiers.pool",
    "ProgramRun": "dapo_env.verifiers.code.sandbox",
    "SandboxLimits": "dapo_env.verifiers.code.sandbox",
    "SandboxUnavailable": "dapo_env.verifiers.code.sandbox",
    "isolation": "dapo_env.verifiers.code.sandbox",
    "run_python": "dapo_env.verifiers.code.sandbox",
}

if TYPE_CHECKING:
    from .callable import CallableVerifier, as_verifier
    from .code import CodeVerifier
    from .math import MathVerifier
    from .pool import VerifierPool, verify_batch
    from .code.sandbox import ProgramRun, SandboxLimits, SandboxUnavailable, isolation, run_python


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dapo_env.verifiers' has no attribute {name!r}")


__all__ = ["CallableVerifier", "CodeVerifier", "MathVerifier", "ProgramRun", "SandboxLimits", "SandboxUnavailable",
           "VerifierPool", "VerifyResult", "as_verifier", "isolation", "run_python", "verify_batch"]
