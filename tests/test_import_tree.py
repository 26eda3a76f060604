"""One import tree: a checkout's tests import that checkout's code, whatever other copy is installed.

`dapo_env/learners`, `dapo_env/tasks` and `dapo_env/verifiers` are relative symlinks to the top-level
folders, so every layer resolves next to the `dapo_env/` that was imported, and pytest puts the checkout
first on `sys.path` (`pythonpath = ["."]`). The test builds two copies of the project, installs one in
editable mode in a fresh virtual environment and runs a probe test inside the other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("learners", "tasks", "verifiers")

PROBE = '''
from pathlib import Path

import dapo_env
import dapo_env.learners.algo.losses
import dapo_env.tasks.registry
import dapo_env.verifiers.math

ROOT = Path(__file__).resolve().parents[1]

def test_every_layer_comes_from_this_checkout():
    for module in (dapo_env, dapo_env.learners.algo.losses, dapo_env.tasks.registry, dapo_env.verifiers.math):
        assert Path(module.__file__).resolve().is_relative_to(ROOT), (module.__name__, module.__file__)
'''


def _copy_project(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    dest.mkdir()
    for name in ("dapo_env", *LAYERS):
        shutil.copytree(REPO / name, dest / name, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, dest / name)
    (dest / "tests").mkdir()
    (dest / "tests" / "test_probe.py").write_text(PROBE)
    return dest


def test_layer_folders_are_symlinks_into_the_top_level() -> None:
    for layer in LAYERS:
        link = REPO / "dapo_env" / layer
        assert link.is_symlink(), f"dapo_env/{layer} must be a symlink to ../{layer}"
        assert os.readlink(link) == f"../{layer}"
        assert link.resolve() == (REPO / layer).resolve()


def test_static_layout_resolves_every_layer_import() -> None:
    """`dapo_env.learners.X` is a real path under dapo_env/ (through the symlink), as static tools read it."""
    for layer in LAYERS:
        for module in sorted((REPO / layer).glob("*.py")):
            assert (REPO / "dapo_env" / layer / module.name).is_file(), module


def test_a_checkout_imports_its_own_files_when_another_is_installed(tmp_path: Path) -> None:
    installed = _copy_project(tmp_path / "installed")
    checkout = _copy_project(tmp_path / "checkout")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "-e", str(installed)], capture_output=True, text=True)
    if pip.returncode != 0:
        pytest.skip(f"could not make an editable install to test against (pip install -e needs setuptools>=70.1, "
                    f"which the test extra pins): {pip.stderr.strip().splitlines()[-1:]}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import dapo_env.learners.algo.losses as m; print(m.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env=env, check=True)
    assert Path(where.stdout.strip()).resolve().is_relative_to(installed)  # the install itself works
    probe = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_probe.py"],
                           cwd=checkout, capture_output=True, text=True, env=env)
    assert probe.returncode == 0, probe.stdout + probe.stderr
