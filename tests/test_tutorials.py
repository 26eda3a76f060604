"""The docs site's own pages work as written: every Python block runs and every shell command exists.

Each page's Python blocks run as one script (a tutorial builds on its earlier blocks), the way
``tests/test_readme.py`` runs the README's snippets: a fresh interpreter in a temporary folder holding only the
clone's ``examples/``, offline, every ``# -> text`` promise checked in order. Pages whose code needs an optional
extra skip with the command that installs it. The in-depth guides that predate the site (``docs/*.md``) have their
own tests (``tests/tasks/test_docs.py``, ``tests/envs/test_multiturn_docs.py``); these are the site's new pages.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_snippets import SESSION_MARK, REPO, check_shell_command, fenced_blocks, run_session, run_snippet, shell_commands
from optional_extras import is_installed, skip_reason

DOCS = REPO / "docs"
SITE_PAGES = sorted([DOCS / "index.md", DOCS / "getting-started.md",
                     *(p for folder in ("tutorials", "howto", "concepts", "evidence", "reference")
                       for p in (DOCS / folder).glob("*.md"))])
TUTORIALS = ["math-task", "code-task", "multi-turn-tool", "pytorch-loop", "trl", "verl", "own-verifier", "evaluate",
             "gpu", "share-task", "mixtures-curation"]
RUNNABLE = [p for p in SITE_PAGES if fenced_blocks(p.read_text(encoding="utf-8"), "python")]
COMMANDS = [(where, argv) for p in SITE_PAGES
            for where, argv in shell_commands(p.read_text(encoding="utf-8"), p.relative_to(REPO).as_posix())]


def page_id(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def optional_imports(code: str) -> list[str]:
    """The optional extras a page's code imports (``trl``, ``ray``, ...): see ``optional_extras.INSTALL_HINTS``."""
    from optional_extras import INSTALL_HINTS

    imported = set(re.findall(r"^\s*(?:from|import)\s+(\w+)", code, flags=re.MULTILINE))
    return sorted(imported & set(INSTALL_HINTS))


def test_every_tutorial_is_listed_and_runs_code() -> None:
    index = (DOCS / "tutorials" / "index.md").read_text(encoding="utf-8")
    for number, name in enumerate(TUTORIALS, 1):
        assert f"| {number} | [" in index and f"]({name}.md)" in index, f"tutorials/index.md does not list {name}"
        assert DOCS / "tutorials" / f"{name}.md" in RUNNABLE, f"tutorials/{name}.md runs no Python code"
    assert len(RUNNABLE) >= 12 and len(COMMANDS) >= 30


def test_the_gpu_page_says_it_was_not_run_on_a_gpu() -> None:
    text = (DOCS / "tutorials" / "gpu.md").read_text(encoding="utf-8")
    assert '!!! warning "Not yet run on a GPU"' in text.split("\n## ", 1)[0], "the warning must open the page"


@pytest.mark.parametrize("page", RUNNABLE, ids=page_id)
def test_page_code_runs_as_written(page: Path, tmp_path: Path) -> None:
    text = page.read_text(encoding="utf-8")
    if SESSION_MARK in text:  # a shell session: bash and python blocks in page order
        run_session(text, f"docs/{page_id(page)}", tmp_path, timeout=300)
        return
    blocks = fenced_blocks(text, "python")
    for module in optional_imports("".join(code for _, code in blocks)):
        if not is_installed(module):
            pytest.skip(skip_reason(module, f"docs/{page_id(page)}"))
    script = "".join(f"# --- docs/{page_id(page)}:{line}\n{code}" for line, code in blocks)
    run_snippet(script, f"docs/{page_id(page)}", tmp_path, timeout=300)


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[f"{w.split(':')[0]} {' '.join(a)[:50]}" for w, a in COMMANDS])
def test_shell_command_exists(where: str, argv: list[str]) -> None:
    check_shell_command(where, argv)
