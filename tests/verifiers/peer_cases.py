"""The grader test cases other projects ship, read from a local copy of their test files (never committed here).

``peer_cases(folder)`` walks every ``*.py`` file under ``folder`` and collects:

* each ``pytest.mark.parametrize`` table whose argument names include ``gold``, ``pred`` and ``expected``
  (or ``result``): Math-Verify's ``tests/test_*.py`` (one case per row; extra columns such as a precision
  or a strictness flag are ignored, so a row pair that differs only there counts both ways);
* Math-Verify's string-extraction table (``pred``, ``expected`` = ``[lowercase, original]``, a config):
  the gold is the original letter, a row that expects nothing is left out;
* verl's ``prime_math_answers`` / ``prime_math_gts`` lists (``tests/utils/reward_score/``): every pair
  is correct.

Point it at a folder holding copies of those files, e.g. from a clone of each project::

    mkdir -p /tmp/peer && cp Math-Verify/tests/*.py verl/tests/utils/reward_score/test_sandbox_on_cpu.py /tmp/peer/
    python benchmarks/bench_verifiers.py --peer /tmp/peer

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "test_x.py").write_text(
    ...     "import pytest\\n@pytest.mark.parametrize('gold,pred,expected', [('1', '$1$', 1), ('2', '3', 0)])\\n"
    ...     "def test_x(gold, pred, expected): ...\\n")
    >>> [(c.prediction, c.gold, c.expected) for c in peer_cases(folder)]
    [('$1$', '1', True), ('3', '2', False)]
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PeerCase:
    """One peer grader case: grade ``prediction`` against ``gold``; ``where`` is ``file:line``."""

    prediction: str
    gold: str
    expected: bool
    where: str


def peer_cases(folder: str | Path) -> list[PeerCase]:
    """Every case in the test files under ``folder``, in file and line order."""
    cases: list[PeerCase] = []
    for path in sorted(Path(folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if _is_parametrize(node):
                cases += _table_cases(node, path.name)
        cases += _verl_cases(tree, path.name)
    return cases


def _is_parametrize(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parametrize"
            and len(node.args) >= 2 and isinstance(node.args[1], (ast.List, ast.Tuple)))


def _names(node: ast.Call) -> list[str]:
    names = ast.literal_eval(node.args[0])
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


def _table_cases(node: ast.Call, file: str) -> list[PeerCase]:
    names = _names(node)
    verdict = "expected" if "expected" in names else "result"
    out = []
    for row in node.args[1].elts:
        values = _literal_prefix(row)
        if values is None:
            continue
        cell = dict(zip(names, values))
        where = f"{file}:{row.lineno}"
        if {"gold", "pred", verdict} <= set(cell):
            out.append(PeerCase(str(cell["pred"]), str(cell["gold"]), bool(cell[verdict]), where))
        elif set(names[:2]) == {"pred", "expected"} and isinstance(cell.get("expected"), list) and cell["expected"]:
            out.append(PeerCase(str(cell["pred"]), str(cell["expected"][-1]), True, where))
    return out


def _literal_prefix(row: ast.AST) -> list[object] | None:
    """The row's leading literal values (a config object at the end is dropped); None if none is literal."""
    if not isinstance(row, ast.Tuple):
        return None
    values = []
    for element in row.elts:
        try:
            values.append(ast.literal_eval(element))
        except ValueError:
            break
    return values or None


def _verl_cases(tree: ast.Module, file: str) -> list[PeerCase]:
    lists: dict[str, tuple[list[str], int]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("prime_math_answers", "prime_math_gts"):
                lists[name] = (ast.literal_eval(node.value), node.lineno)
    if len(lists) != 2:
        return []
    (answers, line), (golds, _) = lists["prime_math_answers"], lists["prime_math_gts"]
    return [PeerCase(a, g, True, f"{file}:{line}") for a, g in zip(answers, golds)]


__all__ = ["PeerCase", "peer_cases"]
