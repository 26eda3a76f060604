"""``MathVerifier``: extract a response's final answer, then grade it against the gold answer.

Extraction (:mod:`dapo_env.verifiers.math_extract`) and grading are separate stages. Grading is a
cascade, cheapest first:

1. normalised string equality (:func:`~dapo_env.verifiers.math_normalize.canonical`);
2. exact numeric comparison with :class:`fractions.Fraction` (never float equality), plus
   multiple-choice letters, short text answers and element-wise tuples / intervals / sets;
3. symbolic equivalence (Math-Verify + sympy) in a helper process under a hard time limit
   (:mod:`dapo_env.verifiers.math_symbolic`), only for what stages 1-2 cannot decide.

``answer_format="dapo"`` instead reproduces the DAPO paper's scorer exactly (verl ``math_dapo.py``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from dapo_env.types import VerifyResult

from . import math_lenient
from .math_choices import choice_gold
from .math_extract import EXTRACTIONS, extract_answer
from .math_grade import grade, symbolic_grade
from .math_normalize import dapo_normalize
from .references import math_gold, solution_answer

_FORMATS = ("auto", "dapo", "boxed")

@dataclass(frozen=True, kw_only=True)
class MathVerifier:
    """Rule-based grader for math answers: ``verifier(response, gold) -> VerifyResult``.

    Args:
        answer_format: ``"auto"`` (every kind of commitment: boxes, ``Answer:`` lines, "the answer is"
            statements, a bare answer, a concluding sentence; the last one wins), ``"boxed"`` (only
            ``\\boxed{}``/``\\fbox{}``), or ``"dapo"`` (exactly the DAPO paper's scorer: last ``Answer: X``
            in the last 300 characters, Minerva normalisation, string equality).
        extraction: ``"strict"`` (only committed answers count; use this for RL rewards) or
            ``"lenient"`` (for evaluating outputs: when nothing is committed, the last math span or
            number anywhere counts, like Math-Verify; it rewards uncommitted text, so never train on it).
        timeout_s: hard limit in seconds for the symbolic stage of one call (the fast path takes
            well under a millisecond).
        symbolic: set False to skip the symbolic stage (undecided pairs are then wrong).
        max_chars: deprecated and ignored: the whole response is scanned with bounded work.
        last_number_fallback: deprecated: ``True`` means ``extraction="lenient"``.

    Example:
        >>> v = MathVerifier()
        >>> v("... so the area is $\\\\frac{28}{6}$.\\n\\nAnswer: $\\\\boxed{4\\\\frac{2}{3}}$", "\\\\frac{14}{3}").reason
        'equal:numeric'
        >>> v("The answer is 7?", "7").reason, MathVerifier(extraction="lenient")("The answer is 7?", "7").reason
        ('no_answer', 'equal:string')
    """

    answer_format: str = "auto"
    extraction: str = "strict"
    timeout_s: float = 5.0
    symbolic: bool = True
    max_chars: int | None = None
    last_number_fallback: bool | None = None

    def __post_init__(self) -> None:
        if self.answer_format not in _FORMATS:
            raise ValueError(f"answer_format must be one of {_FORMATS}, got {self.answer_format!r}")
        if self.max_chars is not None:
            warnings.warn("MathVerifier(max_chars=...) is deprecated and ignored: the whole response is scanned "
                          "with bounded work; remove the argument", DeprecationWarning, stacklevel=3)
        if self.last_number_fallback is not None:
            warnings.warn("MathVerifier(last_number_fallback=...) is deprecated: use extraction='lenient' "
                          "(evaluation) or the default extraction='strict' (RL rewards)", DeprecationWarning,
                          stacklevel=3)
            if self.last_number_fallback:
                object.__setattr__(self, "extraction", "lenient")
        if self.extraction not in EXTRACTIONS:
            raise ValueError(f"extraction must be one of {EXTRACTIONS}, got {self.extraction!r}")
        if self.answer_format == "dapo" and self.extraction != "strict":
            raise ValueError("answer_format='dapo' is the paper's exact rule: it must be used with extraction='strict'")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s}")

    def prepare_reference(self, reference: object) -> str:
        """The gold answer as a string: a string, a number or verl's ``{"ground_truth": ...}``
        (:func:`~dapo_env.verifiers.references.math_gold`); a worked solution as datasets hold it gives
        its ``#### N`` or last ``\\boxed{}`` (:func:`~dapo_env.verifiers.references.solution_answer`);
        anything else, or a solution with neither, raises ``InvalidReference``. Lenient extraction keeps
        the text: it reads any gold like a response when grading."""
        gold = math_gold(reference)
        if self.extraction != "lenient":
            return solution_answer(gold)
        choices = _choices_of(reference)
        return choice_gold(gold, choices) if choices is not None else gold

    def __call__(self, response: str, gold: str, /) -> VerifyResult:
        """Grade ``response`` against ``gold``. Never raises on model output."""
        start = time.monotonic()
        if not isinstance(response, str):
            return VerifyResult(False, 0.0, None, "error:TypeError")
        lenient = self.extraction == "lenient"
        # A wrong reference raises InvalidReference (configuration, not output); lenient reads any gold text.
        gold = self.prepare_reference(gold)
        try:
            gold = math_lenient.lenient_gold(gold) if lenient else gold
            if self.answer_format == "dapo":
                return _dapo_score(response, gold)
            if lenient:
                extracted = math_lenient.lenient_extract(response, self.answer_format)
            else:
                extracted = extract_answer(response, answer_format=self.answer_format, extraction=self.extraction)
            if extracted is None or not extracted.strip():
                return VerifyResult(False, 0.0, None, "no_answer")
            verdict, reason = math_lenient.grade_lenient(extracted, gold) if lenient else grade(extracted, gold)
            if verdict is None:
                if not self.symbolic:
                    verdict, reason = False, "not_equal"
                else:
                    remaining = self.timeout_s - (time.monotonic() - start)
                    verdict, reason = symbolic_grade(extracted, gold, remaining)
            return VerifyResult(verdict, 1.0 if verdict else 0.0, extracted.strip(), reason)
        except Exception as exc:  # noqa: BLE001 - never raise on model output
            return VerifyResult(False, 0.0, None, f"error:{type(exc).__name__}")


def _choices_of(reference: object) -> object | None:
    """The options a mapping reference names (``choices`` or ``options``), else ``None``."""
    if isinstance(reference, Mapping):
        for key in ("choices", "options"):
            if reference.get(key):
                return reference[key]
    return None


def _dapo_score(response: str, gold: str) -> VerifyResult:
    """The DAPO paper's rule (verl ``math_dapo.compute_score``), scored 1.0/0.0."""
    extracted = extract_answer(response, answer_format="dapo")
    pred = dapo_normalize(extracted if extracted is not None else "[INVALID]")
    ok = pred == dapo_normalize(gold)
    if extracted is None:
        return VerifyResult(False, 0.0, None, "no_answer")
    return VerifyResult(ok, 1.0 if ok else 0.0, pred, "equal:string" if ok else "not_equal")

__all__ = ["MathVerifier", "grade"]
