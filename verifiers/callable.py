"""Plain functions as verifiers: TRL-style reward functions returning a bool or a score become verifiers.

The verifier contract is ``verifier(response, reference) -> VerifyResult``. Users often have a simpler
function that returns ``True``/``False`` or a number in [0, 1]; :class:`CallableVerifier` adapts it.
:func:`as_verifier` is where the project wraps plain functions: the environments call it on the task's
verifier (so ``Task(verifier=my_function)`` works in ``ReasoningEnv`` and ``GroupVectorEnv``), and the
learner on ``TrainConfig.verifier``. Verifier *objects* (instances of a class, such as ``MathVerifier``)
are used as they are and must return a ``VerifyResult`` themselves (or be wrapped explicitly).

Example:
    >>> def starts_with_four(response, reference):
    ...     return response.startswith("4")
    >>> verifier = as_verifier(starts_with_four)
    >>> verifier("42", None)
    VerifyResult(correct=True, score=1.0, extracted=None, reason='custom:bool')
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dapo_env.types import VerifyResult


@dataclass(frozen=True)
class CallableVerifier:
    """Adapts ``fn(response, reference)`` returning a ``VerifyResult``, a bool or a number in [0, 1]
    to the verifier contract. A number is clipped to [0, 1] and counts as correct at 1.0. Picklable when
    ``fn`` is a module-level function.

    Example:
        >>> CallableVerifier(lambda response, reference: 0.5)("x", None)
        VerifyResult(correct=False, score=0.5, extracted=None, reason='custom:score')
    """

    fn: Callable[[str, Any], Any]

    def __call__(self, response: str, reference: Any) -> VerifyResult:
        out = self.fn(response, reference)
        if isinstance(out, VerifyResult):
            return out
        if isinstance(out, (bool, np.bool_)):
            return VerifyResult(bool(out), 1.0 if out else 0.0, None, "custom:bool")
        if isinstance(out, (int, float, np.number)):
            score = min(1.0, max(0.0, float(out)))
            return VerifyResult(score >= 1.0, score, None, "custom:score")
        raise TypeError(f"custom verifier {self.fn!r} returned {type(out).__name__}; return a VerifyResult, "
                        "a bool or a float in [0, 1]")


def _is_plain_callable(obj: Any) -> bool:
    """Functions, lambdas, methods, builtins and partials (not instances of verifier classes)."""
    return inspect.isroutine(obj) or isinstance(obj, functools.partial)


def as_verifier(obj: Callable[..., Any]) -> Callable[[str, Any], VerifyResult]:
    """``obj`` as a verifier: a plain function is wrapped in :class:`CallableVerifier`; a verifier object
    (a class instance, e.g. ``MathVerifier()`` or a ``CallableVerifier``) is returned unchanged.

    Example:
        >>> from dapo_env.verifiers import MathVerifier
        >>> m = MathVerifier()
        >>> as_verifier(m) is m, type(as_verifier(len)).__name__
        (True, 'CallableVerifier')
    """
    if not callable(obj):
        raise TypeError(f"a verifier must be callable as verifier(response, reference), got {obj!r}")
    return CallableVerifier(obj) if _is_plain_callable(obj) else obj


def load_verifier(spec: str | Callable[..., Any]) -> Callable[[str, Any], VerifyResult]:
    """A verifier from a callable or a ``"module:function"`` string (``"pkg.mod:Class.attr"`` works),
    passed through :func:`as_verifier`.

    Example:
        >>> load_verifier("operator:eq")("4", "4")
        VerifyResult(correct=True, score=1.0, extracted=None, reason='custom:bool')
    """
    if callable(spec):
        return as_verifier(spec)
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"verifier {spec!r}: pass a callable or a 'module:function' string")
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"verifier {spec!r}: cannot import module {module_name!r} ({exc}); "
                         "check the module is on PYTHONPATH") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"verifier {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj) or not callable(obj):
        raise ValueError(f"verifier {spec!r} is not a function or a verifier object: point at a function "
                         "(response, reference) -> VerifyResult | bool | float, or at an instance")
    return as_verifier(obj)


__all__ = ["CallableVerifier", "as_verifier", "load_verifier"]
