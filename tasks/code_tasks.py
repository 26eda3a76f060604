"""Code datasets: MBPP-v0 and HumanEval-v0, verified by running tests (``CodeVerifier``).

MBPP rows (hub ``google-research-datasets/mbpp`` "full" or "sanitized", or ``mbpp.jsonl`` /
``mbpp_sanitized.jsonl``): the tests are the ``test_list`` asserts, the setup is ``test_imports``
plus ``test_setup_code``. Where the setup uses a name that only the solution defines (tasks 367 and
927 build a tree of the solution's ``Node`` class), the setup cannot run before the solution, so it
is prepended to each test instead (tests run after the candidate).

HumanEval rows (hub ``openai/openai_humaneval`` or ``HumanEval.jsonl(.gz)``): the candidate completes
the prompt (``prefix``), the single test is ``test`` followed by ``check(entry_point)``.
"""

from __future__ import annotations

import ast
import builtins
import json
import warnings
from collections.abc import Mapping
from typing import Any

from .base import Task
from .loading import DatasetSource, RowError, get_field, get_text, metadata_of, row_id
from .registry import register_task
from dapo_env.types import CodeTests, InvalidReference, Problem
from dapo_env.verifiers import CodeVerifier
from dapo_env.verifiers.references import code_tests

MBPP_TEMPLATE = (
    "You are an expert Python programmer, and here is your task: {question} "
    "Your code should pass these tests:\n\n{test_examples}\n\n"
    "Write the complete solution in one ```python code block."
)
HUMANEVAL_TEMPLATE = (
    "Complete the following Python function. Reply with the complete function (signature included) "
    "in one ```python code block.\n\n```python\n{question}```"
)
_BUILTINS = frozenset(dir(builtins))


def _parse(code: str) -> ast.Module | None:
    """Parse code from a data row quietly (rows hold strings like '\\d' that warn); None if invalid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(code)
        except SyntaxError:
            return None


def _string_list(row: Mapping[str, Any], name: str, *, required: bool) -> list[str]:
    value = get_field(row, name, required=required)
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise RowError(name, f"expected a list of strings, got {type(value).__name__}")
    items = list(value)
    if required and not items:
        raise RowError(name, "is an empty list; a code problem needs at least one test")
    return items


def _defined_names(code: str) -> set[str]:
    """Top-level names a module defines (functions, classes, assignments, imports)."""
    tree = _parse(code)
    if tree is None:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _loaded_names(code: str) -> set[str]:
    tree = _parse(code)
    if tree is None:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def setup_needs_solution(setup: str, solution: str) -> bool:
    """True when ``setup`` reads a name that it does not define but the reference ``solution`` does."""
    free = _loaded_names(setup) - _defined_names(setup) - _BUILTINS
    return bool(free & _defined_names(solution))


def called_function(test: str, solution: str = "") -> str | None:
    """The function a test calls: the first called name the solution defines, else the first non-builtin."""
    tree = _parse(test)
    if tree is None:
        return None
    called = [
        node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    defined = _defined_names(solution)
    for name in called:
        if name in defined:
            return name
    return next((name for name in called if name not in _BUILTINS), None)


def convert_mbpp_row(row: Mapping[str, Any], index: int) -> Problem:
    """An MBPP row (full or sanitized schema) -> Problem with :class:`CodeTests`."""
    question = get_text(row, "prompt", "text")
    tests = _string_list(row, "test_list", required=True)
    imports = _string_list(row, "test_imports", required=False)
    setup_code = get_field(row, "test_setup_code", required=False) or ""
    if not isinstance(setup_code, str):
        raise RowError("test_setup_code", f"expected a string, got {type(setup_code).__name__}")
    solution = get_field(row, "code", required=False) or ""
    if not isinstance(solution, str):
        raise RowError("code", f"expected a string, got {type(solution).__name__}")
    setup = "\n".join([*imports, setup_code]).strip()
    run_tests = list(tests)
    if setup and setup_needs_solution(setup, solution):
        run_tests, setup = [f"{setup}\n{test}" for test in tests], ""
    entry_point = called_function(tests[0], solution)
    metadata = metadata_of(row, {"prompt", "text"})
    metadata.update(test_examples="\n".join(tests), entry_point=entry_point or "")
    return Problem(
        id=row_id(row, index, "task_id"),
        question=question,
        answer=CodeTests(tests=tuple(run_tests), setup=setup, entry_point=entry_point),
        metadata=metadata,
    )


def convert_humaneval_row(row: Mapping[str, Any], index: int) -> Problem:
    """A HumanEval row -> Problem whose tests call ``check(entry_point)`` after the candidate."""
    prompt = get_text(row, "prompt")
    test = get_text(row, "test")
    entry_point = get_text(row, "entry_point").strip()
    if not entry_point.isidentifier():
        raise RowError("entry_point", f"is not a Python identifier: {entry_point!r}")
    tests = CodeTests(tests=(f"{test}\n\ncheck({entry_point})\n",), prefix=prompt, entry_point=entry_point)
    return Problem(
        id=row_id(row, index, "task_id"),
        question=prompt,
        answer=tests,
        metadata=metadata_of(row, {"prompt", "test"}),
    )


def _hub_fields(value: Any, row: Mapping[str, Any], key: str) -> tuple[Any, Mapping[str, Any]]:
    """A whole hub row given as the reference (a dict or its JSON, e.g. a verl ``ground_truth``): its ``key``
    field is the value and its other fields join the row."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return value, row
    if isinstance(value, Mapping) and key in value:
        return value[key], {**row, **value}
    return value, row


def mbpp_reference(value: Any, row: Mapping[str, Any]) -> CodeTests:
    """MBPP tests as the hub holds them (``test_list``, with the row's ``test_setup_code``/``test_imports``)
    or as we export them (``CodeTests`` JSON)."""
    value, row = _hub_fields(row.get("test_list") if value is None else value, row, "test_list")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        hub = {"text": "-", "test_list": list(value), "test_setup_code": row.get("test_setup_code") or "",
               "test_imports": list(row.get("test_imports") or []), "code": row.get("code") or ""}
        return convert_mbpp_row(hub, 0).answer
    if value is None:
        raise InvalidReference("MBPP row has neither an 'answer' nor a 'test_list' column")
    return code_tests(value)


def humaneval_reference(value: Any, row: Mapping[str, Any]) -> CodeTests:
    """HumanEval tests as the hub holds them (``test``, which defines ``check(candidate)``, with the row's
    ``entry_point``) or as we export them (``CodeTests`` JSON)."""
    value, row = _hub_fields(row.get("test") if value is None else value, row, "test")
    if isinstance(value, str) and "def check(" in value and not value.lstrip().startswith("{"):
        entry = row.get("entry_point")
        if not isinstance(entry, str) or not entry.strip().isidentifier():
            raise InvalidReference("HumanEval's 'test' column calls check(<entry point>): pass the row's "
                                   "'entry_point' column too (TRL passes every column; verl: put it in extra_info)")
        prefix = row.get("prompt") if isinstance(row.get("prompt"), str) else ""
        return CodeTests(tests=(f"{value}\n\ncheck({entry.strip()})\n",), prefix=prefix, entry_point=entry.strip())
    if value is None:
        raise InvalidReference("HumanEval row has neither an 'answer' nor a 'test' column")
    return code_tests(value)


MBPP = Task(
    name="MBPP",
    source=DatasetSource(
        env_id="MBPP-v0",
        hub_id="google-research-datasets/mbpp",
        hub_config="full",
        convert=convert_mbpp_row,
        example_file="path/to/mbpp.jsonl",
    ),
    verifier=CodeVerifier(),
    prompt_template=MBPP_TEMPLATE,
    split="test",
    reference_reader=mbpp_reference,
    reference_columns=("test_list",),
    description="MBPP (Austin et al. 2021): short Python functions checked by asserts.",
)
HUMANEVAL = Task(
    name="HumanEval",
    source=DatasetSource(
        env_id="HumanEval-v0",
        hub_id="openai/openai_humaneval",
        convert=convert_humaneval_row,
        example_file="path/to/HumanEval.jsonl.gz",
    ),
    verifier=CodeVerifier(),
    prompt_template=HUMANEVAL_TEMPLATE,
    split="test",
    reference_reader=humaneval_reference,
    reference_columns=("test",),
    description="HumanEval (Chen et al. 2021): complete a function from its docstring; unit tests.",
)

for _task in (MBPP, HUMANEVAL):
    register_task(_task)

__all__ = [
    "HUMANEVAL",
    "HUMANEVAL_TEMPLATE",
    "MBPP",
    "MBPP_TEMPLATE",
    "called_function",
    "convert_humaneval_row",
    "convert_mbpp_row",
    "humaneval_reference",
    "mbpp_reference",
    "setup_needs_solution",
]
