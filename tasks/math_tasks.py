"""Math datasets: DAPOMath-v0, MATH500-v0, AIME24-v0, AIME25-v0, GSM8K-v0.

Each loads from a Hugging Face hub id by default and from local files with ``data_files=``. The row
converters accept the hub schemas and the converted files described in ``../shared/data/README.md``:

- DAPO-Math-17k: verl format (``prompt`` = chat messages with the DAPO template around the problem,
  ``reward_model.ground_truth``, ``extra_info.index``; the template is stripped) or flat rows
  (``problem``, ``answer``, ``index``). Answers must be integers.
- MATH-500: ``problem``, ``answer``, ``unique_id`` (+ ``solution``, ``subject``, ``level``).
- AIME: ``problem`` / ``Problem`` / ``question``, ``answer`` / ``Answer`` (integers; ``"025"`` -> ``"25"``).
- GSM8K: hub ``question`` + ``answer`` holding the solution and a ``#### N`` line, or flat
  ``problem`` + ``answer`` (+ ``solution``). Thousands separators are removed from the answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import Task
from .loading import (
    DatasetSource,
    RowError,
    get_answer_text,
    get_text,
    metadata_of,
    row_id,
)
from .registry import register_task
from dapo_env.types import InvalidReference, Problem
from dapo_env.verifiers import MathVerifier
from dapo_env.verifiers.math_normalize import canonical, parse_number
from dapo_env.verifiers.references import math_gold, solution_answer

# The DAPO paper's training prompt (arXiv:2503.14476; verbatim in the DAPO-Math-17k rows).
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'
DAPO_TEMPLATE = DAPO_PREFIX + "{question}" + DAPO_SUFFIX
# The common "boxed" evaluation prompt (Qwen2.5-Math, DeepSeek-R1 evaluations).
BOXED_TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."

_QUESTION_FIELDS = ("problem", "question", "Problem", "Question", "prompt")
_ANSWER_FIELDS = ("answer", "Answer", "reward_model.ground_truth", "ground_truth", "label")
_ID_FIELDS = ("unique_id", "id", "ID", "task_id", "index", "extra_info.index")
_CONSUMED = set(_QUESTION_FIELDS) | {"answer", "Answer", "reward_model", "ground_truth", "label"}
_INTEGER_RE = re.compile(r"^-?\d+$")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}\b)")
_DAPO_WRAPPED_RE = re.compile(
    r"^\s*" + re.escape(DAPO_PREFIX.strip()) + r"\s*(?P<q>.*?)\s*" + re.escape(DAPO_SUFFIX.strip()) + r"\s*$",
    re.DOTALL,
)


def convert_math_row(row: Mapping[str, Any], index: int) -> Problem:
    """A generic math row: question, answer (string or integer), id; other fields become metadata."""
    question = get_text(row, *_QUESTION_FIELDS)
    answer = get_answer_text(row, *_ANSWER_FIELDS)
    return Problem(
        id=row_id(row, index, *_ID_FIELDS),
        question=question,
        answer=answer,
        metadata=metadata_of(row, _CONSUMED),
    )


def strip_dapo_template(text: str) -> str:
    """The bare problem from a DAPO-templated prompt (text without the template is returned as is)."""
    match = _DAPO_WRAPPED_RE.match(text)
    return match.group("q") if match else text


def convert_dapo_row(row: Mapping[str, Any], index: int) -> Problem:
    """A DAPO-Math-17k row (verl or flat schema); the DAPO template is stripped, the answer must be an integer."""
    problem = convert_math_row(row, index)
    if not _INTEGER_RE.match(problem.answer):
        field = next(name for name in _ANSWER_FIELDS if _has(row, name))
        raise RowError(field, f"DAPO-Math answers are integers, got {problem.answer!r}")
    question = strip_dapo_template(problem.question)
    if not question.strip():
        raise RowError("prompt", "is empty once the DAPO template is removed")
    return Problem(id=problem.id, question=question, answer=problem.answer, metadata=problem.metadata)


def convert_aime_row(row: Mapping[str, Any], index: int) -> Problem:
    """An AIME row; integer answers are written without leading zeros (``"025"`` -> ``"25"``)."""
    problem = convert_math_row(row, index)
    answer = str(int(problem.answer)) if _INTEGER_RE.match(problem.answer) else problem.answer
    return Problem(id=problem.id, question=problem.question, answer=answer, metadata=problem.metadata)


def convert_gsm8k_row(row: Mapping[str, Any], index: int) -> Problem:
    """A GSM8K row: the hub's ``answer`` is a worked solution ending in ``#### N``; N is the reference."""
    problem = convert_math_row(row, index)
    answer, metadata = problem.answer, dict(problem.metadata)
    if "####" in answer:
        metadata.setdefault("solution", answer)
        answer = answer.rsplit("####", 1)[1].strip()
    answer = _THOUSANDS_RE.sub("", answer)
    if not answer:
        raise RowError("answer", "has nothing after '####'")
    return Problem(id=problem.id, question=problem.question, answer=answer, metadata=metadata)


def gsm8k_reference(value: Any, row: Mapping[str, Any]) -> str:
    """A GSM8K reference: the hub's worked solution ending in ``#### N``, or the bare number we export.

    Example:
        >>> gsm8k_reference("She has 3 + 15 = 18.\\n#### 18", {}), gsm8k_reference(18, {})
        ('18', '18')
    """
    answer = solution_answer(math_gold(value))
    if parse_number(canonical(answer)) is None:
        raise InvalidReference(f"GSM8K reference {str(value)[:60]!r} is neither a number nor a solution ending in "
                               "'#### N': pass the dataset's 'answer' column")
    return answer


def integer_reference(value: Any, row: Mapping[str, Any]) -> str:
    """A DAPO-Math / AIME reference: the final answer (a solution's ``####`` or last box), an integer
    written without leading zeros (``"025"`` is ``"25"``); other answers pass as they are (verl routes
    its ``math`` data_source here, whose answers are LaTeX).

    Example:
        >>> integer_reference("025", {}), integer_reference({"ground_truth": 34}, {}), integer_reference("\\\\frac{1}{2}", {})
        ('25', '34', '\\\\frac{1}{2}')
    """
    answer = solution_answer(math_gold(value)).strip()
    return str(int(answer)) if _INTEGER_RE.match(answer) else answer


def _has(row: Mapping[str, Any], dotted: str) -> bool:
    value: Any = row
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value is not None


DAPO_MATH = Task(
    name="DAPOMath",
    source=DatasetSource(
        env_id="DAPOMath-v0",
        hub_id="BytedTsinghua-SIA/DAPO-Math-17k",
        convert=convert_dapo_row,
        dedupe_ids=True,
        example_file="path/to/dapo_math_17k.jsonl.gz",
    ),
    verifier=MathVerifier(answer_format="dapo"),
    prompt_template=DAPO_TEMPLATE,
    split="train",
    reference_reader=integer_reference,
    description="DAPO-Math-17k, the DAPO paper's RL training set (integer answers, 'Answer:' line).",
)
MATH500 = Task(
    name="MATH500",
    source=DatasetSource(
        env_id="MATH500-v0",
        hub_id="HuggingFaceH4/MATH-500",
        convert=convert_math_row,
        example_file="path/to/math500_test.jsonl",
    ),
    verifier=MathVerifier(answer_format="auto"),
    prompt_template=BOXED_TEMPLATE,
    split="test",
    description="MATH-500 (Lightman et al.), LaTeX answers, graded symbolically.",
)
AIME24 = Task(
    name="AIME24",
    source=DatasetSource(
        env_id="AIME24-v0",
        hub_id="HuggingFaceH4/aime_2024",
        convert=convert_aime_row,
        hub_splits={"test": "train"},
        example_file="path/to/aime_2024.jsonl",
    ),
    verifier=MathVerifier(answer_format="auto"),
    prompt_template=DAPO_TEMPLATE,
    split="test",
    reference_reader=integer_reference,
    description="AIME 2024 (30 problems), with the DAPO prompt the paper evaluates with.",
)
AIME25 = Task(
    name="AIME25",
    source=DatasetSource(
        env_id="AIME25-v0",
        hub_id="math-ai/aime25",
        convert=convert_aime_row,
        example_file="path/to/aime_2025.jsonl",
    ),
    verifier=MathVerifier(answer_format="auto"),
    prompt_template=DAPO_TEMPLATE,
    split="test",
    reference_reader=integer_reference,
    description="AIME 2025 I and II (30 problems), with the DAPO prompt.",
)
GSM8K = Task(
    name="GSM8K",
    source=DatasetSource(
        env_id="GSM8K-v0",
        hub_id="openai/gsm8k",
        hub_config="main",
        convert=convert_gsm8k_row,
        example_file="path/to/gsm8k_test.jsonl",
    ),
    verifier=MathVerifier(answer_format="auto"),
    prompt_template=BOXED_TEMPLATE,
    split="test",
    reference_reader=gsm8k_reference,
    description="GSM8K grade-school math (integer answers), boxed prompt.",
)

for _task in (DAPO_MATH, MATH500, AIME24, AIME25, GSM8K):
    register_task(_task)

__all__ = [
    "AIME24",
    "AIME25",
    "BOXED_TEMPLATE",
    "DAPO_MATH",
    "DAPO_TEMPLATE",
    "GSM8K",
    "MATH500",
    "convert_aime_row",
    "convert_dapo_row",
    "convert_gsm8k_row",
    "convert_math_row",
    "gsm8k_reference",
    "integer_reference",
    "strip_dapo_template",
]
