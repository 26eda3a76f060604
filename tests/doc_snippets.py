"""Run the code of a Markdown page as a newcomer would paste it, and check that its shell commands exist.

Shared by the README's test (``tests/test_readme.py``) and the docs site's tutorials (``tests/test_tutorials.py``).
A Python block runs in a fresh interpreter, from a temporary folder that holds only the clone's ``examples/`` (the
pages' paths are relative to the clone's root), offline, with the samples the project ships. A ``# -> text``
comment is output the code promises; it must appear, in order. A shell command in a ``bash`` block or inline code
must exist: ``dapo-env`` lines parse with the CLI's own parser, scripts exist and know their flags, extras exist
in pyproject.toml, modules are importable.

Example:
    >>> fenced_blocks("text\\n```python\\nprint(1)  # -> 1\\n```\\n", "python")
    [(3, 'print(1)  # -> 1\\n')]
    >>> promises("x = 1\\nprint(x)  # -> 1\\n")
    ['1']
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])


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
    """The page without its fenced blocks (where inline code spans live)."""
    return re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.DOTALL | re.MULTILINE)


def promises(code: str) -> list[str]:
    """The outputs a snippet promises with ``# -> text`` comments, in order."""
    return re.findall(r"#\s*->\s*(.+?)\s*$", code, flags=re.MULTILINE)


def shell_commands(text: str, name: str) -> list[tuple[str, list[str]]]:
    """``(where, argv)`` of every command in the page's bash blocks and inline code that runs a known tool."""
    found: list[tuple[str, str]] = []
    for line_no, block in fenced_blocks(text, "bash"):
        found += [(f"{name}:{line_no + i}", line) for i, line in enumerate(block.splitlines()) if line.strip()]
    for span in re.findall(r"`([^`\n]+)`", prose(text)):
        if re.match(r"(python|dapo-env|pip|pytest|torchrun|mkdocs)(\s|$)", span) and span.strip() != "dapo-env":
            found.append((f"{name} (inline)", span))
    commands = []
    for where, line in found:
        for part in re.split(r"&&|;", line.split(" #", 1)[0]):
            argv = shlex.split(part)
            while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):  # VAR=value cmd
                argv = argv[1:]
            if argv:
                commands.append((where, argv))
    return commands


def run_snippet(code: str, where: str, folder: Path, *, timeout: float = 300) -> str:
    """Run ``code`` as ``snippet.py`` in ``folder`` (beside a link to the clone's ``examples/``), check its exit
    status and its promised outputs, and return what it printed."""
    (folder / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    (folder / "snippet.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_ENV_", "PYTHON"))}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "snippet.py"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{where} failed:\n{proc.stderr[-3000:]}"
    printed = iter(out.rstrip() for out in proc.stdout.splitlines())
    for promised in promises(code):
        assert any(out == promised for out in printed), f"{where} promises {promised!r}; printed:\n{proc.stdout}"
    return proc.stdout


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


def check_shell_command(where: str, argv: list[str]) -> None:
    """Fail the calling test unless ``argv`` is a command a reader of a clone can run (see the module doc)."""
    from dapo_env.learners.cli import build_parser

    tool, args = argv[0], argv[1:]
    if tool == "dapo-env":
        assert "dapo-env" in PYPROJECT["project"]["scripts"]
        if args[:1] == ["prepare-model"]:  # its own parser; its flags are covered by the CLI's tests
            pass
        elif args[:2] == ["eval", "compare"]:  # its own parser (dapo_env.learners.run.compare)
            from dapo_env.learners.run.compare import build_parser as compare_parser

            compare_parser().parse_args(args[2:])
        elif len(args) == 1 and not args[0].startswith("-"):  # a subcommand named in prose: it must exist
            with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exc:
                build_parser().parse_args([args[0], "--help"])
            assert exc.value.code == 0, f"{where}: no subcommand `dapo-env {args[0]}`"
        else:
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
    elif tool == "mkdocs":  # from the [docs] extra
        assert any(r.startswith("mkdocs") for r in PYPROJECT["project"]["optional-dependencies"]["docs"]), \
            "the docs extra installs mkdocs"
        assert args[:1] in (["build"], ["serve"]), f"{where}: unknown mkdocs command {args}"
    elif tool in ("pytest", "torchrun"):  # from the [test] extra and from torch
        assert tool in _console_scripts(), f"{tool} is not installed by the install lines"
        if tool == "torchrun" and args:  # a bare `torchrun` in prose names the tool only
            assert importlib.util.find_spec(args[args.index("-m") + 1]) is not None
    else:
        pytest.fail(f"{where}: unknown command {tool!r} in `{' '.join(argv)}`")
