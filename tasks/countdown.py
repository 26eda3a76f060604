"""Countdown-v0: reach a target with + - * / from given numbers, each used at most once.

The answer is an arithmetic expression, e.g. ``Answer: (25-7)*3``. :class:`CountdownVerifier` extracts
the final expression (the last ``Answer:`` line, else the last ``\\boxed{...}``), parses it with
:mod:`ast` into a whitelist of nodes (integer literals, ``+ - * /``, parentheses; never ``eval``),
checks that it uses only the given numbers (each at most as often as given) and evaluates it exactly
with fractions. Harder settings: more numbers, larger values, ``operators`` including ``"/"``::

    gym.make("Countdown-v0", num_numbers=5, max_value=50, max_target=500)
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .base import Task, TaskDataError
from .procedural import ProceduralSource, check_size_and_seed
from .registry import register_task
from dapo_env.types import VerifyResult

OPERATORS = ("+", "-", "*", "/")
MAX_EXPRESSION_CHARS = 200
MAX_DRAWS = 1000
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_ANSWER_RE = re.compile(r"Answer\s*:\s*(.+)", re.IGNORECASE)
_REPLACEMENTS = {"\\times": "*", "\\cdot": "*", "\\div": "/", "×": "*", "·": "*", "÷": "/", "−": "-", "$": ""}


@dataclass(frozen=True, kw_only=True)
class CountdownAnswer:
    """The reference of a Countdown problem: the numbers and the target (picklable, JSON-able).

    Example:
        >>> CountdownAnswer(numbers=(3, 5, 7), target=22).to_json()
        '{"numbers": [3, 5, 7], "target": 22}'
    """

    numbers: tuple[int, ...]
    target: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "numbers", tuple(int(n) for n in self.numbers))
        object.__setattr__(self, "target", int(self.target))
        if not self.numbers:
            raise ValueError("CountdownAnswer needs at least one number")

    def to_json(self) -> str:
        return json.dumps({"numbers": list(self.numbers), "target": self.target})

    @classmethod
    def coerce(cls, reference: Any) -> CountdownAnswer:
        """Accept a CountdownAnswer, a mapping with ``numbers`` and ``target``, or its JSON string."""
        if isinstance(reference, CountdownAnswer):
            return reference
        if isinstance(reference, str):
            reference = json.loads(reference)
        if isinstance(reference, Mapping):
            return cls(numbers=tuple(reference["numbers"]), target=reference["target"])
        raise TypeError(
            "a Countdown reference must be a CountdownAnswer, a mapping or a JSON string with 'numbers' and "
            f"'target', got {type(reference).__name__}"
        )


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None


def extract_expression(response: str) -> str | None:
    """The final expression: the last ``Answer:`` line, else the last ``\\boxed{}``; ``None`` if absent.

    LaTeX and Unicode operators are mapped to ``* / -``; a trailing ``= value`` and a final period are
    dropped.
    """
    matches = _ANSWER_RE.findall(response)
    text = matches[-1] if matches else _last_boxed(response)
    if text is None:
        return None
    boxed = _last_boxed(text)
    text = boxed if boxed is not None else text
    for old, new in _REPLACEMENTS.items():
        text = text.replace(old, new)
    text = text.replace("\\left", "").replace("\\right", "").replace("{", "(").replace("}", ")")
    text = text.split("=")[0].strip().rstrip(".").strip()
    return text or None


def evaluate_expression(expression: str) -> tuple[Fraction, list[int]]:
    """Parse ``expression`` safely and return its exact value and the integer literals it uses.

    Raises:
        ValueError: for anything but integer literals, binary ``+ - * /`` and parentheses
            (``"parse_error"``), or a division by zero (``"division_by_zero"``).
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError("parse_error")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise ValueError("parse_error") from exc
    used: list[int] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
            left, right = walk(node.left), walk(node.right)
            op = _AST_OPS[type(node.op)]
            if op == "+":
                return left + right
            if op == "-":
                return left - right
            if op == "*":
                return left * right
            if right == 0:
                raise ValueError("division_by_zero")
            return left / right
        raise ValueError("parse_error")

    return walk(tree.body), used


@dataclass(frozen=True)
class CountdownVerifier:
    """Checks a Countdown response: allowed numbers only, each at most once, value equals the target.

    Called as ``verifier(response, reference)`` with a :class:`CountdownAnswer` (or its mapping/JSON
    form). Never raises on model output. Reasons: ``"equal:countdown"``, ``"no_answer"``,
    ``"parse_error"``, ``"division_by_zero"``, ``"numbers_not_allowed"``, ``"wrong_value"``.

    Example:
        >>> CountdownVerifier()("Answer: (7-3)*5", CountdownAnswer(numbers=(3, 5, 7), target=20)).correct
        True
    """

    def __call__(self, response: str, reference: Any, /) -> VerifyResult:
        answer = CountdownAnswer.coerce(reference)
        expression = extract_expression(response) if isinstance(response, str) else None
        if expression is None:
            return VerifyResult(False, 0.0, None, "no_answer")
        try:
            value, used = evaluate_expression(expression)
        except ValueError as exc:
            return VerifyResult(False, 0.0, expression, str(exc))
        except RecursionError:
            return VerifyResult(False, 0.0, expression, "parse_error")
        if Counter(used) - Counter(answer.numbers):
            return VerifyResult(False, 0.0, expression, "numbers_not_allowed")
        if value != answer.target:
            return VerifyResult(False, 0.0, expression, "wrong_value")
        return VerifyResult(True, 1.0, expression, "equal:countdown")


@dataclass(frozen=True, kw_only=True)
class CountdownConfig:
    """Difficulty knobs of :func:`generate_countdown`.

    Attributes:
        num_numbers: how many numbers are given (>= 2).
        min_value: the smallest given number (>= 1).
        max_value: the largest given number.
        max_target: targets are in ``1..max_target``.
        operators: the operators the hidden solution uses, a subset of ``("+", "-", "*", "/")``
            (division only where it is exact); responses may use all four.
        size: the number of problems a split has (what ``len()`` reports).
        seed: the generator seed.

    Example:
        >>> CountdownConfig(num_numbers=4).num_numbers
        4
    """

    num_numbers: int = 3
    min_value: int = 1
    max_value: int = 10
    max_target: int = 100
    operators: tuple[str, ...] = ("+", "-", "*")
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.num_numbers, int) or self.num_numbers < 2:
            raise ValueError(f"num_numbers must be an integer >= 2, got {self.num_numbers!r}")
        if not isinstance(self.min_value, int) or self.min_value < 1:
            raise ValueError(f"min_value must be an integer >= 1, got {self.min_value!r}")
        if not isinstance(self.max_value, int) or self.max_value < self.min_value:
            raise ValueError(f"max_value must be an integer >= min_value={self.min_value}, got {self.max_value!r}")
        if not isinstance(self.max_target, int) or self.max_target < 1:
            raise ValueError(f"max_target must be an integer >= 1, got {self.max_target!r}")
        operators = tuple(self.operators)
        if not operators or any(op not in OPERATORS for op in operators):
            raise ValueError(f"operators must be a non-empty subset of {OPERATORS}, got {self.operators!r}")
        object.__setattr__(self, "operators", tuple(dict.fromkeys(operators)))
        check_size_and_seed(self.size, self.seed)


def _combine(a: Fraction, b: Fraction, op: str) -> Fraction | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return a / b if b != 0 and (a / b).denominator == 1 else None


def _solve_once(numbers: list[int], config: CountdownConfig, rng: np.random.Generator) -> tuple[str, int] | None:
    """Combine a random subset of ``numbers`` (at least two) in a random tree; None if out of range."""
    count = int(rng.integers(2, len(numbers) + 1))
    picked = [int(i) for i in rng.permutation(len(numbers))[:count]]
    nodes: list[tuple[str, Fraction, int]] = [(str(numbers[i]), Fraction(numbers[i]), 3) for i in picked]
    while len(nodes) > 1:
        i = int(rng.integers(len(nodes) - 1))
        op = config.operators[int(rng.integers(len(config.operators)))]
        (lt, lv, lp), (rt, rv, rp) = nodes[i], nodes[i + 1]
        value = _combine(lv, rv, op)
        if value is None:
            return None
        prec = 1 if op in "+-" else 2
        lt = f"({lt})" if lp < prec else lt
        rt = f"({rt})" if rp < prec or (rp == prec and op in "-/") else rt
        nodes[i : i + 2] = [(f"{lt}{op}{rt}", value, prec)]
    text, value, _ = nodes[0]
    if value.denominator != 1 or not 1 <= value <= config.max_target:
        return None
    return text, int(value)


def generate_countdown(config: CountdownConfig, rng: np.random.Generator) -> tuple[str, CountdownAnswer, Mapping[str, Any]]:
    """One problem; its metadata carries an oracle ``solution`` expression that reaches the target."""
    for _ in range(MAX_DRAWS):  # most draws succeed; the rng makes the retries deterministic
        numbers = [int(v) for v in rng.integers(config.min_value, config.max_value + 1, size=config.num_numbers)]
        solved = _solve_once(numbers, config, rng)
        if solved is not None:
            break
    else:
        raise TaskDataError(
            f"no Countdown problem with a target in 1..{config.max_target} found in {MAX_DRAWS} draws for "
            f"{config}: raise max_target or allow more operators"
        )
    solution, target = solved
    numbers_text = ", ".join(str(n) for n in numbers)
    question = (
        f"Using the numbers {numbers_text}, each at most once, and + - * / with parentheses, "
        f"write an expression equal to {target}."
    )
    metadata = {"numbers": numbers_text, "target": target, "solution": solution}
    return question, CountdownAnswer(numbers=tuple(numbers), target=target), metadata


COUNTDOWN = Task(
    name="Countdown",
    source=ProceduralSource(default=CountdownConfig(), generate=generate_countdown),
    verifier=CountdownVerifier(),
    prompt_template="{question} End with a line 'Answer: <expression>'.",
    split="train",
    version=0,
    description="Procedural Countdown: reach the target from given numbers (knobs: count, range, target).",
)
register_task(COUNTDOWN)

__all__ = [
    "COUNTDOWN",
    "CountdownAnswer",
    "CountdownConfig",
    "CountdownVerifier",
    "evaluate_expression",
    "extract_expression",
    "generate_countdown",
]
