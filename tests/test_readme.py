"""The README works as written for a newcomer with a fresh clone.

Every Python snippet runs as pasted: in a fresh interpreter, from a temporary folder that holds only the
clone's ``examples/`` (the README's paths are relative to the clone's root), offline, with the samples
the project ships. A ``# -> text`` comment is the output the snippet promises; it must appear, in order.
Every shell command in a ``bash`` block or inline code exists: ``dapo-env`` lines parse with the CLI's
own parser, scripts exist and know their flags, extras exist in pyproject.toml, modules are importable.
The install section leads with the CPU/GPU choice and agrees with pyproject.toml.
"""

from __future__ import annotations

import doctest
import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import data_folder
import optional_extras
from data_folder import REAL_DATA_FILES, real_data_skip_reason
from optional_extras import INSTALL_HINTS

from dapo_env.learners import cli
from dapo_env.learners.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def fenced_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """``(first line number, code)`` of every ```` ```language ```` block (a fence closes on a bare ```` ``` ````)."""
    blocks, lines, start = [], text.splitlines(), None
    for number, line in enumerate(lines, 1):
        if start is None and line.strip() == f"```{language}":
            start, body = number + 1, []
        elif start is not None and line.strip() == "```":
            blocks.append((start, "\n".join(body) + "\n"))
            start = None
        elif start is not None:
            body.append(line)
    return blocks


def prose(text: str) -> str:
    """The README without its fenced blocks (where inline code spans live)."""
    return re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.DOTALL | re.MULTILINE)


def shell_commands() -> list[tuple[str, list[str]]]:
    """``(where, argv)`` of every command in the bash blocks and the inline code that runs a known tool."""
    found: list[tuple[str, str]] = []
    for line_no, block in fenced_blocks(README, "bash"):
        found += [(f"README.md:{line_no + i}", line) for i, line in enumerate(block.splitlines()) if line.strip()]
    for span in re.findall(r"`([^`\n]+)`", prose(README)):
        if re.match(r"(python|dapo-env|pip|pytest|torchrun)\b ?", span) and span.strip() != "dapo-env":
            found.append(("README.md (inline)", span))
    commands = []
    for where, line in found:
        for part in re.split(r"&&|;", line.split(" #", 1)[0]):
            argv = shlex.split(part)
            while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):  # VAR=value cmd
                argv = argv[1:]
            if argv:
                commands.append((where, argv))
    return commands


PY_BLOCKS = fenced_blocks(README, "python")
COMMANDS = shell_commands()


# --- Python snippets -----------------------------------------------------------------------------------
def test_the_readme_has_its_snippets() -> None:
    assert len(PY_BLOCKS) >= 5 and len(COMMANDS) >= 15


@pytest.mark.parametrize(("line", "code"), PY_BLOCKS, ids=[f"README.md:{line}" for line, _ in PY_BLOCKS])
def test_python_snippet_runs_as_pasted(line: int, code: str, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    (tmp_path / "snippet.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_ENV_", "PYTHON"))}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"README.md:{line} failed:\n{proc.stderr[-3000:]}"
    printed = iter(out.rstrip() for out in proc.stdout.splitlines())
    for promised in re.findall(r"#\s*->\s*(.+?)\s*$", code, flags=re.MULTILINE):
        assert any(out == promised for out in printed), (
            f"README.md:{line} promises {promised!r}; printed:\n{proc.stdout}")


# --- shell commands ------------------------------------------------------------------------------------
def _check_python(argv: list[str]) -> None:
    if argv[:2] == ["-m", "venv"]:
        return
    if argv[0] == "-m":
        assert importlib.util.find_spec(argv[1]) is not None, f"no module {argv[1]}"
        return
    script = REPO / argv[0]
    assert script.is_file(), f"{argv[0]} does not exist"
    source = script.read_text(encoding="utf-8")
    for flag in (a for a in argv[1:] if a.startswith("--")):
        assert f'"{flag.split("=")[0]}"' in source, f"{argv[0]} has no {flag} option"


def _check_pip(argv: list[str]) -> None:
    assert argv[0] == "install", argv
    for arg in argv[1:]:
        extras = re.fullmatch(r"\.\[([\w,-]+)\]", arg)
        if extras:
            assert set(extras.group(1).split(",")) <= EXTRAS, f"unknown extra in {arg}; extras: {sorted(EXTRAS)}"


def _console_scripts() -> set[str]:
    return {ep.name for ep in importlib.metadata.entry_points(group="console_scripts")}


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[" ".join(argv)[:60] for _, argv in COMMANDS])
def test_shell_command_exists(where: str, argv: list[str]) -> None:
    tool, args = argv[0], argv[1:]
    if tool == "dapo-env":
        assert "dapo-env" in PYPROJECT["project"]["scripts"]
        if args[:1] != ["prepare-model"]:  # its own parser; its flags are covered by the CLI's tests
            try:
                build_parser().parse_args(args)
            except SystemExit as exc:  # --help exits 0 after printing; anything else is a parse error
                if exc.code != 0 or "--help" not in args:
                    pytest.fail(f"{where}: `{' '.join(argv)}` does not parse (exit {exc.code})")
    elif tool == "python":
        _check_python(args)
    elif tool == "pip":
        _check_pip(args)
    elif tool in (".", "source"):
        assert args[0].endswith("bin/activate")
    elif tool in ("pytest", "torchrun"):  # from the [test] extra and from torch
        assert tool in _console_scripts(), f"{tool} is not installed by the README's install lines"
        if tool == "torchrun":
            assert importlib.util.find_spec(args[args.index("-m") + 1]) is not None
    else:
        pytest.fail(f"{where}: unknown command {tool!r} in `{' '.join(argv)}`")


# --- install -------------------------------------------------------------------------------------------
def test_quick_start_leads_with_the_cpu_gpu_choice() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    choice = quick.index("CPU or GPU?")
    first_block = fenced_blocks(quick, "bash")[0][1]
    assert choice < quick.index("```bash"), "the CPU/GPU choice must come before the first command"
    torch_line, install_line = (next(line for line in first_block.splitlines() if key in line)
                                for key in ('"torch==', "pip install -e ."))
    assert first_block.index(torch_line) < first_block.index(install_line)
    assert CPU_INDEX in torch_line and "skip with a GPU" in torch_line


def test_pyproject_torch_agrees_with_the_readme_pin() -> None:
    from packaging.requirements import Requirement

    pinned = re.search(r'"torch==([\d.]+)"', README).group(1)
    (torch_req,) = [Requirement(r) for r in PYPROJECT["project"]["dependencies"] if r.startswith("torch")]
    assert torch_req.specifier.contains(pinned) and torch_req.specifier.contains(pinned + "+cpu", prereleases=True)
    assert not torch_req.specifier.contains("2.12.0"), "the floor is the tested version"
    ci = (REPO / ".ci" / "run").read_text()
    assert f'"torch=={pinned}"' in ci, ".ci/run installs the same torch as the README"


def test_install_hints_name_real_extras() -> None:
    for hint in INSTALL_HINTS.values():
        for extras in re.findall(r"\.\[([\w,-]+)\]", hint):
            assert set(extras.split(",")) <= EXTRAS, hint


def test_the_data_folder_is_documented_and_never_a_private_path(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    tasks_doc = (REPO / "docs" / "tasks.md").read_text(encoding="utf-8")
    assert "DAPO_ENV_DATA" in README and "DAPO_ENV_DATA" in tasks_doc
    for name in REAL_DATA_FILES:
        assert name.split("/")[-1] in tasks_doc, f"docs/tasks.md does not describe {name}"
    monkeypatch.setenv("DAPO_ENV_DATA", str(tmp_path / "absent"))
    reason = real_data_skip_reason()
    assert "DAPO_ENV_DATA" in reason and "docs/tasks.md" in reason and "../shared" not in reason
    for name in ("dapo_math_17k_sample.jsonl", "mbpp_sample.jsonl"):
        assert (REPO / "examples" / "data" / name).is_file() and name in README + tasks_doc
    assert "../shared" not in README


@pytest.mark.parametrize("module", [cli, data_folder, optional_extras], ids=lambda m: m.__name__)
def test_doctests_of_the_newcomer_helpers(module) -> None:
    assert doctest.testmod(module, verbose=False).failed == 0
