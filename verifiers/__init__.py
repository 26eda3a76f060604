"""Rule-based verifiers: math answers and code (Python, C++, JavaScript), plus batched verification in workers.

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
    "ProgramVerifier": "dapo_env.verifiers.code",
    "ProgramTests": "dapo_env.verifiers.code",
    "IOTest": "dapo_env.verifiers.code",
    "CallTest": "dapo_env.verifiers.code",
    "register_language": "dapo_env.verifiers.code",
    "run_command": "dapo_env.verifiers.code.sandbox",
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
    from .code import CallTest, CodeVerifier, IOTest, ProgramTests, ProgramVerifier, register_language
    from .math import MathVerifier
    from .pool import VerifierPool, verify_batch
    from .code.sandbox import ProgramRun, SandboxLimits, SandboxUnavailable, isolation, run_command, run_python


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dapo_env.verifiers' has no attribute {name!r}")


__all__ = ["CallTest", "CallableVerifier", "CodeVerifier", "IOTest", "MathVerifier", "ProgramRun", "ProgramTests",
           "ProgramVerifier", "SandboxLimits", "SandboxUnavailable", "VerifierPool", "VerifyResult", "as_verifier",
           "isolation", "register_language", "run_command", "run_python", "verify_batch"]
