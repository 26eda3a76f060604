"""Arithmetic-v0: integer arithmetic expressions, generated offline with difficulty knobs.

The default is easy on purpose (two operands in 0..20, ``+`` and ``-``): a tiny model can learn it
on a CPU. Make it harder with more operands, a larger value range, ``*`` and parentheses::

    gym.make("Arithmetic-v0", max_operands=4, max_value=999, operators=("+", "-", "*"), parentheses=True)

The prompt is just the question, e.g. ``"Compute 12+7."``; the verifier is
``MathVerifier(answer_format="dapo")``, which reads the final ``Answer: 19`` line. The answer is
always an integer, so the strict DAPO format is exact (no symbolic grading) and trains the same
answer format as DAPOMath-v0; a response without an ``Answer:`` line gets no reward, so the
format itself is learned rather than guessed from the last number in the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Task
from .procedural import ProceduralSource, check_size_and_seed
from .registry import register_task
from dapo_env.verifiers import MathVerifier

OPERATORS = ("+", "-", "*")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2}

# An expression tree: an int leaf, or (operator, left, right).
Expr = int | tuple[str, "Expr", "Expr"]


@dataclass(frozen=True, kw_only=True)
class ArithmeticConfig:
    """Difficulty knobs of :func:`generate_arithmetic`.

    Attributes:
        min_operands: the fewest operands in an expression (>= 2).
        max_operands: the most operands; the count is drawn uniformly in between.
        min_value: the smallest operand (negative operands are written in parentheses).
        max_value: the largest operand.
        operators: a non-empty subset of ``("+", "-", "*")``.
        parentheses: combine operands in a random tree and write the parentheses it needs
            (otherwise a flat left-to-right expression with the usual precedence).
        size: the number of problems a split has (what ``len()`` reports).
        seed: the generator seed; the split is mixed in, so splits never share a stream.

    Example:
        >>> ArithmeticConfig(max_operands=3, operators=("+", "*")).max_operands
        3
    """

    min_operands: int = 2
    max_operands: int = 2
    min_value: int = 0
    max_value: int = 20
    operators: tuple[str, ...] = ("+", "-")
    parentheses: bool = False
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.min_operands, int) or self.min_operands < 2:
            raise ValueError(f"min_operands must be an integer >= 2, got {self.min_operands!r}")
        if not isinstance(self.max_operands, int) or self.max_operands < self.min_operands:
            raise ValueError(
                f"max_operands must be an integer >= min_operands={self.min_operands}, got {self.max_operands!r}"
            )
        if not isinstance(self.min_value, int) or not isinstance(self.max_value, int):
            raise ValueError(f"min_value and max_value must be integers, got {self.min_value!r}, {self.max_value!r}")
        if self.max_value < self.min_value:
            raise ValueError(f"max_value ({self.max_value}) must be >= min_value ({self.min_value})")
        operators = tuple(self.operators)  # a string such as "+-" means its characters
        if not operators or any(op not in OPERATORS for op in operators):
            raise ValueError(f"operators must be a non-empty subset of {OPERATORS}, got {self.operators!r}")
        object.__setattr__(self, "operators", tuple(dict.fromkeys(operators)))
        check_size_and_seed(self.size, self.seed)


def evaluate(expr: Expr) -> int:
    """The integer value of an expression tree."""
    if isinstance(expr, int):
        return expr
    op, left, right = expr
    a, b = evaluate(left), evaluate(right)
    return a + b if op == "+" else a - b if op == "-" else a * b


def render(expr: Expr) -> str:
    """The expression as text with only the parentheses its tree needs (``(3+4)*5``, ``3-(4+5)``)."""
    if isinstance(expr, int):
        return f"({expr})" if expr < 0 else str(expr)
    op, left, right = expr
    left_text, right_text = render(left), render(right)
    if not isinstance(left, int) and _PRECEDENCE[left[0]] < _PRECEDENCE[op]:
        left_text = f"({left_text})"
    if not isinstance(right, int) and (
        _PRECEDENCE[right[0]] < _PRECEDENCE[op] or (_PRECEDENCE[right[0]] == _PRECEDENCE[op] and op == "-")
    ):
        right_text = f"({right_text})"
    return f"{left_text}{op}{right_text}"


def _flat_tree(operands: list[int], ops: list[str]) -> Expr:
    """The tree of ``a op b op c ...`` under the usual precedence (``*`` first, then left to right)."""
    terms: list[Expr] = [operands[0]]
    term_ops: list[str] = []
    for op, value in zip(ops, operands[1:]):
        if op == "*":
            terms[-1] = ("*", terms[-1], value)
        else:
            term_ops.append(op)
            terms.append(value)
    tree = terms[0]
    for op, term in zip(term_ops, terms[1:]):
        tree = (op, tree, term)
    return tree


def _random_tree(operands: list[Expr], ops: list[str], rng: np.random.Generator) -> Expr:
    """Combine operands pairwise at random positions until one tree is left."""
    nodes = list(operands)
    for op in ops:
        i = int(rng.integers(len(nodes) - 1))
        nodes[i : i + 2] = [(op, nodes[i], nodes[i + 1])]
    return nodes[0]


def generate_arithmetic(config: ArithmeticConfig, rng: np.random.Generator) -> tuple[str, str, Mapping[str, Any]]:
    """One problem: ``("Compute 12+7.", "19", {"expression": "12+7", ...})``."""
    count = int(rng.integers(config.min_operands, config.max_operands + 1))
    operands = [int(v) for v in rng.integers(config.min_value, config.max_value + 1, size=count)]
    ops = [config.operators[int(i)] for i in rng.integers(len(config.operators), size=count - 1)]
    tree = _random_tree(list(operands), ops, rng) if config.parentheses else _flat_tree(operands, ops)
    expression = render(tree)
    return f"Compute {expression}.", str(evaluate(tree)), {"expression": expression, "num_operands": count}


ARITHMETIC = Task(
    name="Arithmetic",
    source=ProceduralSource(default=ArithmeticConfig(), generate=generate_arithmetic),
    verifier=MathVerifier(answer_format="dapo"),
    prompt_template="{question}",
    split="train",
    version=0,
    description="Procedural integer arithmetic (knobs: operands, value range, operators, parentheses).",
)
register_task(ARITHMETIC)

__all__ = ["ARITHMETIC", "ArithmeticConfig", "evaluate", "generate_arithmetic", "render"]
