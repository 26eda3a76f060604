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
    return CodeTests(tests=tests)


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


__all__ = ["code_tests", "math_gold"]
