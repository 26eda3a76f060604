"""References in JSON-serialisable form: what survives a `datasets.Dataset`, a JSON file or a process hop.

A verifier's reference (the gold answer, the tests) often travels through other libraries before it
reaches the verifier: TRL passes dataset columns, verl stores `reward_model.ground_truth`, Ray pickles.
These functions turn every form a user would reasonably pass into the verifier's own type, and raise
:class:`~dapo_env.types.InvalidReference` (a one-line message naming the accepted forms) for anything
else, so a misconfigured reference fails loudly on the first call instead of scoring 0 silently.

Example:
    >>> math_gold({"ground_truth": 34})
    '34'
    >>> code_tests('["assert f(1) == 2", "assert f(2) == 3"]').tests
    ('assert f(1) == 2', 'assert f(2) == 3')
"""

from __future__ import annotations

import ast
import json
import numbers
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from dapo_env.types import CodeTests, InvalidReference

_CODE_FIELDS = ("tests", "stdio", "setup", "prefix", "entry_point")


def math_gold(reference: Any) -> str:
    """A math reference as the gold string the math verifier grades against.

    Accepts a string, a number (``int``, ``Fraction``, ``Decimal``, a finite ``float``; never ``bool``),
    or verl's nested form ``{"ground_truth": ...}`` (as in ``reward_model``).

    Example:
        >>> math_gold("\\\\frac{1}{2}"), math_gold(7), math_gold(Fraction(3, 4)), math_gold({"ground_truth": "x+1"})
        ('\\\\frac{1}{2}', '7', '3/4', 'x+1')
    """
    if isinstance(reference, str):
        return reference
    if isinstance(reference, bool) or reference is None:
        raise InvalidReference(f"math reference {reference!r}: pass the gold answer as a string or a number")
    if isinstance(reference, Fraction):
        return str(reference)
    if isinstance(reference, numbers.Number) and not isinstance(reference, complex):
        if isinstance(reference, float) and reference != reference or reference in (float("inf"), float("-inf")):
            raise InvalidReference(f"math reference {reference!r} is not a finite number")
        text = str(reference)
        return text[:-2] if isinstance(reference, float) and text.endswith(".0") else text
    if hasattr(reference, "item") and callable(reference.item):  # numpy / torch scalars from a dataset
        return math_gold(reference.item())
    if isinstance(reference, Mapping):
        if "ground_truth" in reference:
            return math_gold(reference["ground_truth"])
        raise InvalidReference(
            f"math reference is a mapping with keys {sorted(map(str, reference))}: pass the gold answer as a string, "
            "a number or verl's {'ground_truth': ...}"
        )
    raise InvalidReference(
        f"math reference of type {type(reference).__name__}: pass the gold answer as a string, a number or "
        "verl's {'ground_truth': ...}"
    )


_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_MATH_SPANS = re.compile(r"\$[^$]*\$|\\\[.*?\\\]|\\\(.*?\\\)|\\[A-Za-z]+(?:\{[^{}]*\})?", re.S)
_SOLUTION_WORDS = 12  # a gold with this many words outside its maths, over two lines or sentences, is a solution


def solution_answer(gold: str) -> str:
    """The final answer of a gold that is a worked solution, as datasets hold it: the text after its last
    ``####`` (GSM8K; thousands commas dropped), else its last ``\\boxed{}`` (MATH); any other gold is
    returned as it is.

    Raises:
        InvalidReference: a worked solution (12+ words over several lines or sentences) with neither.

    Example:
        >>> solution_answer("She sells 9 eggs at $2.\\n9 * 2 = 18\\n#### 1,018"), solution_answer("\\\\frac{1}{2}")
        ('1018', '\\\\frac{1}{2}')
    """
    if "####" in gold:
        answer = gold.rsplit("####", 1)[1].strip().splitlines()[0].strip() if gold.rsplit("####", 1)[1].strip() else ""
        if not answer:
            raise InvalidReference("math reference has nothing after its '####': pass the final answer")
        return re.sub(r"(?<=\d),(?=\d{3}\b)", "", answer)
    has_box = "\\boxed" in gold or "\\fbox" in gold
    if not has_box and not _is_solution(gold):
        return gold
    from .math_extract import extract_answer  # lazy: references is imported by the extractor's users

    boxed = extract_answer(gold, answer_format="boxed")
    if boxed is None and has_box and not _is_solution(gold):
        return gold  # a box cut off or hedged inside a short gold: graded as written
    if boxed is None:
        raise InvalidReference(
            f"math reference reads like a worked solution with no final \\boxed{{}} or '#### N' line "
            f"({gold[:60]!r}...): pass the dataset's final-answer column (e.g. 'answer') instead")
    return boxed


def _is_solution(gold: str) -> bool:
    prose = _MATH_SPANS.sub(" ", gold)
    if len(_PROSE_WORD.findall(prose)) < _SOLUTION_WORDS:
        return False
    return "\n" in gold.strip() or len(re.findall(r"[.!?]\s+\S", prose)) >= 1


def code_tests(reference: Any) -> CodeTests:
    """A code reference as :class:`~dapo_env.types.CodeTests`.

    Accepts ``CodeTests``; a mapping with its fields (``tests``, ``stdio`` as ``[stdin, stdout]`` pairs,
    ``setup``, ``prefix``, ``entry_point``; what :meth:`CodeTests.to_dict` writes); a JSON string of
    either; a list of test snippets (e.g. ``assert`` statements); or a string of Python test code, whose
    top-level statements become one test each.

    Example:
        >>> code_tests({"tests": ["assert f() == 1"], "entry_point": "f"}).entry_point
        'f'
        >>> code_tests("assert f(1) == 2\\nassert f(3) == 4").num_tests
        2
    """
    if isinstance(reference, CodeTests):
        return reference
    if isinstance(reference, str):
        return _code_tests_from_text(reference)
    if isinstance(reference, Mapping):
        return _code_tests_from_mapping(reference)
    if isinstance(reference, Sequence) or hasattr(reference, "tolist"):
        items = reference.tolist() if hasattr(reference, "tolist") else list(reference)
        if items and all(isinstance(item, str) for item in items):
            return CodeTests(tests=tuple(items))
    raise InvalidReference(
        f"code reference of type {type(reference).__name__}: pass CodeTests, a dict of its fields "
        f"{list(_CODE_FIELDS)}, its JSON string, or a list of assert statements"
    )


def _code_tests_from_text(text: str) -> CodeTests:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InvalidReference(f"code reference looks like JSON but does not parse ({exc})") from None
        return code_tests(data)
    try:
        module = ast.parse(stripped)
    except SyntaxError as exc:
        raise InvalidReference(
            f"code reference string is neither JSON nor Python test code (line {exc.lineno}: {exc.msg})"
        ) from None
    tests = tuple(ast.get_source_segment(stripped, node) or "" for node in module.body)
    if not tests:
        raise InvalidReference("code reference string holds no test statements")
    _check_called(module)
    return CodeTests(tests=tests)


def _check_called(module: ast.Module) -> None:
    """Test code that only defines a checker (HumanEval's ``def check(candidate)``) would pass anything."""
    defined = {node.name for node in module.body if isinstance(node, ast.FunctionDef)}
    called = {node.func.id for node in ast.walk(module) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    asserts = any(isinstance(node, ast.Assert) for node in module.body)
    if defined and not asserts and not (defined & called):
        raise InvalidReference(
            f"code reference defines {sorted(defined)} but never calls it, so it would pass any program: for "
            "HumanEval pass the row's entry_point too (the task's prepare_reference(test, row)), or append "
            "'check(<entry point>)'")


def _code_tests_from_mapping(data: Mapping[str, Any]) -> CodeTests:
    unknown = sorted(set(map(str, data)) - set(_CODE_FIELDS))
    if unknown:
        raise InvalidReference(f"code reference has unknown keys {unknown}; CodeTests fields are {list(_CODE_FIELDS)}")

    def strings(name: str) -> tuple[str, ...]:
        value = data.get(name) or ()
        if hasattr(value, "tolist"):
            value = value.tolist()
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise InvalidReference(f"code reference field {name!r} must be a list of strings")
        return tuple(value)

    stdio = data.get("stdio") or ()
    if hasattr(stdio, "tolist"):
        stdio = stdio.tolist()
    pairs = []
    for pair in stdio:
        pair = pair.tolist() if hasattr(pair, "tolist") else pair
        if isinstance(pair, Mapping):
            pair = (pair.get("input", pair.get("stdin")), pair.get("output", pair.get("stdout")))
        if isinstance(pair, str) or len(pair) != 2 or not all(isinstance(p, str) for p in pair):
            raise InvalidReference("code reference field 'stdio' must be a list of [stdin, expected_stdout] string pairs")
        pairs.append((pair[0], pair[1]))
    for name in ("setup", "prefix"):
        if not isinstance(data.get(name) or "", str):
            raise InvalidReference(f"code reference field {name!r} must be a string")
    entry = data.get("entry_point")
    if entry is not None and not isinstance(entry, str):
        raise InvalidReference("code reference field 'entry_point' must be a string or null")
    try:
        return CodeTests(tests=strings("tests"), stdio=tuple(pairs), setup=data.get("setup") or "",
                         prefix=data.get("prefix") or "", entry_point=entry or None)
    except ValueError as exc:
        raise InvalidReference(f"code reference: {exc}") from None


__all__ = ["code_tests", "math_gold", "solution_answer"]
