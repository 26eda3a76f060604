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


def _module_name(folder: Path, path: Path) -> str:
    """``engines.hf_engine`` for ``folder/engines/hf_engine.py``; ``engines`` for its ``__init__.py``."""
    parts = list(path.relative_to(folder).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool, package: str) -> list[str]:
    """The package-relative modules (or names, resolved later) an import statement points at."""
    if node.level:
        base = importer.split(".") if importer else []
        if not is_package:
            base = base[:-1]
        base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
        prefix = ".".join([*base, *(node.module.split(".") if node.module else [])])
    elif node.module and (node.module == package or node.module.startswith(package + ".")):
        prefix = node.module[len(package) + 1:]
    else:
        return []
    return [f"{prefix}.{a.name}".strip(".") for a in node.names] + [prefix]


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """module -> the package's modules it imports (relative or absolute ``dapo_env.<package>.x`` imports), for
    every module of ``folder`` and its sub-packages; ``from .pkg import name`` counts as importing ``pkg.name``
    where that is a module, else ``pkg``."""
    paths = {_module_name(folder, p): p for p in folder.rglob("*.py")}
    modules = set(paths) - {""}
    graph: dict[str, set[str]] = {}
    for name in modules:
        path = paths[name]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found = _resolve(node, name, path.name == "__init__.py", package)
                named = [f for f in found[:-1] if f in modules]
                targets |= set(named) or ({found[-1]} if found else set())
            else:
                targets |= {a.name[len(package) + 1:] for a in node.names if a.name.startswith(package + ".")}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def private_imports(folder: Path, package: str) -> list[str]:
    """``file:line: name`` for every private name (``_x``) imported from another module of the package."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(package)):
                found += [f"{path.relative_to(folder)}:{node.lineno}: {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


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


@pytest.mark.parametrize("folder", ["learners", "verifiers", "tasks", "dapo_env"])
def test_no_import_cycle(folder: str) -> None:
    graph = import_graph(ROOT / folder, f"dapo_env.{folder}" if folder != "dapo_env" else "dapo_env")
    assert len(graph) > 5  # the package was read
    assert find_cycle(graph) is None, f"import cycle in {folder}/: {' -> '.join(find_cycle(graph) or [])}"


def test_the_graph_reads_rooms() -> None:
    """Sub-packages count: ``engines.registry`` imports ``engines.hf_engine``, which imports ``engines.base``."""
    graph = import_graph(ROOT / "learners", "dapo_env.learners")
    assert "engines.hf_engine" in graph["engines.registry"]
    assert "engines.base" in graph["engines.hf_engine"]
    assert graph["engines.base"] <= {"engines.engine_io"}  # the family's leaf: no engine imported


@pytest.mark.parametrize("folder", ["learners", "verifiers", "tasks", "dapo_env"])
def test_no_private_name_crosses_modules(folder: str) -> None:
    package = f"dapo_env.{folder}" if folder != "dapo_env" else "dapo_env"
    assert private_imports(ROOT / folder, package) == []


@pytest.mark.parametrize("module", ["dapo_env.learners.engines.hf_engine", "dapo_env.learners.engines.vllm_engine",
                                    "dapo_env.learners.engines.base", "dapo_env.learners.engines",
                                    "dapo_env.learners.rollout.setup", "dapo_env.learners.config",
                                    "dapo_env.verifiers.ray_backend"])
def test_formerly_cyclic_modules_import_alone(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
