"""No import cycle inside ``learners/`` or ``verifiers/``: every import statement between a package's modules,
module-level or inside a function (a lazy import is still a dependency), points one way. Imports under
``if TYPE_CHECKING:`` are for annotations only and do not count. The modules that used to close a cycle also
import alone, each in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """module -> the sibling modules it imports (relative or absolute ``dapo_env.<package>.x`` imports)."""
    modules = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in modules:
        targets: set[str] = set()
        for node in _imports(ast.parse((folder / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == package:
                    targets |= {a.name for a in node.names}
                elif node.module.startswith(package + "."):
                    targets.add(node.module[len(package) + 1:].split(".")[0])
            elif isinstance(node, ast.Import):
                targets |= {a.name[len(package) + 1:].split(".")[0] for a in node.names
                            if a.name.startswith(package + ".")}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("folder", ["learners", "verifiers"])
def test_no_import_cycle(folder: str) -> None:
    graph = import_graph(ROOT / folder, f"dapo_env.{folder}")
    assert len(graph) > 5  # the package was read
    assert find_cycle(graph) is None, f"import cycle in {folder}/: {' -> '.join(find_cycle(graph) or [])}"


@pytest.mark.parametrize("module", ["dapo_env.learners.hf_engine", "dapo_env.learners.vllm_engine",
                                    "dapo_env.learners.engine", "dapo_env.verifiers.ray_backend"])
def test_formerly_cyclic_modules_import_alone(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
