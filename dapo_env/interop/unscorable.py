"""Rows a reward function cannot score, and how they are reported.

TRL's contract (``GRPOTrainer`` and ``AsyncGRPOTrainer`` alike): a reward of ``None`` means "unscorable";
the row is left out of its group's baseline and gets advantage 0. A row is unscorable when its reference
cannot be read (:class:`~dapo_env.types.InvalidReference`: a data problem, not the model's) or when its
verification errored (:func:`verification_error`: the verifier raised, its sandbox failed, or it ran past
its own time limit). Scoring such a row 0 would teach the model that a possibly right answer is wrong.

Each cause is warned about once per reward function (:class:`InteropWarning`) and every row is counted
(:attr:`UnscorableLog.counts`), so a run keeps going and the count says how much data it lost.
"""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from typing import Any

from dapo_env.interop.routing import InteropWarning
from dapo_env.types import VerifyResult

#: Reasons (``VerifyResult.reason``) that say the verification itself failed, not the response: the worker
#: pool's per-item limit (``timeout``) or a lost worker (``worker_died``), the symbolic stage's own limit
#: (``timeout``), a verifier that raised (``error:<Type>``), a sandbox that failed (``sandbox_error:<Type>``).
VERIFIER_ERROR_REASONS = frozenset({"timeout", "worker_died"})
VERIFIER_ERROR_PREFIXES = ("error:", "sandbox_error:")

INVALID_REFERENCE = "invalid_reference"
TRL_UNSCORABLE_OUTCOME = ("its reward is None, which TRL leaves out of the advantages (reward.unscorable counts them; "
                          "strict_references=True raises on an unreadable reference instead)")


def verification_error(result: VerifyResult) -> str | None:
    """The cause when ``result`` says the verification failed (``"verifier_error:<reason>"``), else ``None``.

    Example:
        >>> verification_error(VerifyResult(False, 0.0, None, "sandbox_error:OSError"))
        'verifier_error:sandbox_error:OSError'
        >>> verification_error(VerifyResult(False, 0.0, "x", "timeout"))  # the verifier's own limit
        'verifier_error:timeout'
        >>> verification_error(VerifyResult(False, 0.5, "...", "tests_failed:1/2")) is None  # the model's failure
        True
    """
    reason = str(result.reason)
    if reason in VERIFIER_ERROR_REASONS or reason.startswith(VERIFIER_ERROR_PREFIXES):
        return f"verifier_error:{reason}"
    return None


class UnscorableLog:
    """Counts unscorable rows by cause and warns once per cause. Picklable (the counts travel; the lock does not).

    Args:
        name: who scores (the reward function's name), first in the warning.
        outcome: what happens to such a row, said in the warning.

    Example:
        >>> log = UnscorableLog("demo_reward", "its reward is None")
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     log.record("invalid_reference", "row 3: no answer")
        ...     log.record("invalid_reference", "row 4: no answer")
        >>> len(caught), dict(log.counts)
        (1, {'invalid_reference': 2})
    """

    def __init__(self, name: str, outcome: str) -> None:
        self.name, self.outcome = name, outcome
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"UnscorableLog({self.name!r}, {dict(self.counts)})"

    def record(self, cause: str, detail: str) -> None:
        """Count one unscorable row; the first row of each cause is also warned about, with ``detail``."""
        with self._lock:
            first = cause not in self.counts
            self.counts[cause] += 1
        if first:
            warnings.warn(f"{self.name}: a row is unscorable ({cause}): {detail}; {self.outcome}. Later rows with "
                          "this cause are only counted", InteropWarning, stacklevel=3)


__all__ = ["INVALID_REFERENCE", "TRL_UNSCORABLE_OUTCOME", "VERIFIER_ERROR_PREFIXES", "VERIFIER_ERROR_REASONS",
           "UnscorableLog", "verification_error"]
