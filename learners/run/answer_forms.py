"""Grading a served model's answers in the forms it uses, for tasks whose prompt is just the question.

``Largest-v0``, ``Arithmetic-v0`` and ``Sort-v0`` show the bare question (``Largest of 87 48 31 76?``): the
tiny default run learns the ``Answer: N`` line from its warm start, and their prompts stay bare so that run
replays unchanged. A capable served model asked the bare question answers "The answer is: 76" or
``\\boxed{76}``, which the task's strict verifier reads as ``no_answer``. :class:`CommonForms` wraps the
task's verifier for ``dapo-env eval``: a response the verifier finds no answer in is read again for the
common forms (:func:`common_answer`), and the answer found there is graded by the same verifier as the line
``Answer: <answer>``. A response the verifier did read keeps its verdict, so a model that writes the
``Answer:`` line is graded exactly as in training.

Example:
    >>> from dapo_env.tasks import get_task
    >>> grade = CommonForms(get_task("Largest-v0").verifier)
    >>> grade("The answer is: 76", "76").correct, grade("The answer is: 76", "76").reason
    (True, 'equal:string (common form)')
    >>> grade("Answer: 76", "76").reason == get_task("Largest-v0").verifier("Answer: 76", "76").reason
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dapo_env.types import VerifyResult

#: The common ways to commit to an answer that a strict ``Answer:``-line verifier does not read, the last one
#: in the response wins: ``\boxed{X}``, "the (final) answer is (:) X", a bold "**Answer:** X".
_FORMS = (
    re.compile(r"\\boxed\{([^{}\n]+)\}"),
    re.compile(r"\banswer\s+is\s*:?\s*([^\n]+)", re.IGNORECASE),
    re.compile(r"\*\*\s*(?:final\s+)?answer\s*:?\s*\*\*\s*:?\s*([^\n]+)", re.IGNORECASE),
)
#: Markup around an answer: bold, math dollars, a closing period.
_WRAPPING = re.compile(r"^[\s*$`]+|[\s*$`.]+$")
#: Where the prompt states the format itself (then the verifier's own reading is the rule).
_STATED = ("Answer", "answer", "boxed", "```", "{tool_protocol}")


def common_answer(response: str) -> str | None:
    """The answer a response commits to in a common form, or ``None``.

    Example:
        >>> common_answer("Comparing them, the largest is 76. The answer is: **76**.")
        '76'
        >>> common_answer("so it is $\\\\boxed{-3}$"), common_answer("I think 76") is None
        ('-3', True)
    """
    found: list[tuple[int, str]] = []
    for form in _FORMS:
        found += [(m.start(), m.group(1)) for m in form.finditer(response)]
    if not found:
        return None
    answer = _WRAPPING.sub("", max(found)[1])
    return answer or None


@dataclass(frozen=True)
class CommonForms:
    """A verifier that also reads the common answer forms (module docstring); picklable like the one it wraps."""

    verifier: Any

    def __call__(self, response: str, reference: Any, /) -> VerifyResult:
        result = self.verifier(response, reference)
        if result.reason != "no_answer" or not isinstance(response, str):
            return result
        answer = common_answer(response)
        if answer is None:
            return result
        again = self.verifier(f"Answer: {answer}", reference)
        return VerifyResult(again.correct, again.score, again.extracted, f"{again.reason} (common form)")

    def prepare_reference(self, reference: Any) -> Any:
        """The wrapped verifier's reading of a reference (as it is when it has none)."""
        prepare = getattr(self.verifier, "prepare_reference", None)
        return reference if prepare is None else prepare(reference)

    def same_answer(self, a: str, b: str) -> bool:
        """Two extracted answers are one answer as the wrapped verifier sees it (maj@k groups by this)."""
        from dapo_env.evaluation import answer_equivalence

        return answer_equivalence(self.verifier)(a, b)


def states_format(task: Any) -> bool:
    """Whether the task's prompt template shows the answer format (then its verifier's reading is the rule)."""
    return any(word in task.prompt_template for word in _STATED)


def with_common_forms(task: Any) -> Any:
    """``task`` graded also in the common answer forms when its prompt does not state the format and it is
    single-turn (an episode's verdicts come from its environment); else ``task`` unchanged."""
    import dataclasses

    if states_format(task) or getattr(task, "interaction", None) is not None:
        return task
    return dataclasses.replace(task, verifier=CommonForms(task.verifier))


__all__ = ["CommonForms", "common_answer", "states_format", "with_common_forms"]
