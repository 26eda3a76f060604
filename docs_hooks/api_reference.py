"""MkDocs hook: the API reference pages, generated from the packages' module lists at build time.

The reference hard-codes only the four package names in ``PACKAGES``. Each package gets a page of its public
names (``::: dapo_env.learners``) and one page per module found in its folder (``::: dapo_env.learners.trainer``),
so a module that is added, moved or split needs no edit here; a new sub-package (a folder with an
``__init__.py``, e.g. ``dapo_env/interop/``) gets its own pages the same way. Nothing is imported: the modules
are listed from the file system and mkdocstrings reads them statically; only the four packages are imported,
for their ``__all__`` (and a public name that a module of the same name shadows, to link where it is defined:
``dapo_env.learners.train``, which imports torch).

It also lists under "How-to guides" any page of ``docs/`` that ``mkdocs.yml``'s nav leaves out, so a guide added
by someone who did not edit the nav is still reachable (and ``--strict`` stays green).
"""

from __future__ import annotations

import importlib
import logging
import posixpath
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

#: package name -> its folder, relative to the repository root (the sub-layers are symlinked under dapo_env/).
PACKAGES: dict[str, str] = {
    "dapo_env": "dapo_env",
    "dapo_env.verifiers": "verifiers",
    "dapo_env.tasks": "tasks",
    "dapo_env.learners": "learners",
}
REFERENCE = "reference"  # the docs folder the generated pages live in (virtual: never written to docs/)
NAV_TITLE = "API reference"
GUIDES_TITLE = "How-to guides"  # where pages of docs/ that the nav does not list are put
log = logging.getLogger("mkdocs.hooks.api_reference")


def package_modules(name: str, folder: Path) -> list[str]:
    """Dotted names of the public modules and sub-packages under ``folder`` (recursively), sorted.

    Skips private names (``_x``), the sibling layers symlinked into ``dapo_env/`` (they are packages of their
    own in ``PACKAGES``) and anything that is not a ``.py`` file or a folder with an ``__init__.py``.
    """
    found = []
    for path in sorted(folder.iterdir()):
        stem = path.stem if path.suffix == ".py" else path.name
        if stem.startswith("_") or f"{name}.{stem}" in PACKAGES:
            continue
        if path.is_file() and path.suffix == ".py":
            found.append(f"{name}.{stem}")
        elif path.is_dir() and (path / "__init__.py").is_file():
            found.append(f"{name}.{stem}")
            found += package_modules(f"{name}.{stem}", path)
    return found


def api_pages(root: Path) -> dict[str, list[tuple[str, str]]]:
    """``{package: [(dotted name, page path under docs/), ...]}``; the package's own page comes first."""
    pages = {}
    for package, folder in PACKAGES.items():
        base = f"{REFERENCE}/{package}"
        entries = [(package, f"{base}/index.md")]
        entries += [(module, f"{base}/{module[len(package) + 1:].replace('.', '/')}.md")
                    for module in package_modules(package, root / folder)]
        pages[package] = entries
    return pages


def page_text(dotted: str, is_package: bool, modules: list[tuple[str, str]], here: str) -> str:
    """The Markdown of one reference page: a heading, the mkdocstrings directive, and (for a package page)
    links to its module pages."""
    if not is_package:
        return f"# `{dotted}`\n\n::: {dotted}\n"
    links = "\n".join(f"- [`{name}`]({posixpath.relpath(path, posixpath.dirname(here))})" for name, path in modules)
    submodules = {name.rsplit(".", 1)[-1] for name, _ in modules}
    names = public_names(dotted)
    shadowed = [name for name in names if name in submodules]  # e.g. learners: the function train, the module train
    members = "".join(f"\n        - {name}" for name in names if name not in shadowed)
    notes = "".join(f"- `{dotted}.{name}` (a module of the same name exists): [`{defined_in(dotted, name)}`]"
                    f"[{defined_in(dotted, name)}]\n" for name in shadowed)
    return (f"# `{dotted}`\n\nThe package's public names (its `__all__`); each is also documented in the module "
            f"that defines it. Modules:\n\n{links}\n\n{notes}\n::: {dotted}\n    options:\n"
            f"      show_submodules: false\n      members:{members}\n")


def defined_in(package: str, name: str) -> str:
    """The dotted path where the package's public ``name`` is defined (imports it)."""
    return f"{getattr(importlib.import_module(package), name).__module__}.{name}"


def public_names(package: str) -> list[str]:
    """The package's ``__all__`` (imported: two of the packages compute it from their lazy-import table, which
    static analysis cannot evaluate; importing them is cheap and never imports torch), dunder names left out."""
    module = importlib.import_module(package)
    return [name for name in module.__all__ if not name.startswith("__")]


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def on_config(config: Any) -> Any:
    """Put every generated page into the nav under ``API reference``, after the pages listed there, and every page
    of the docs folder that the nav does not list under ``How-to guides`` (so a guide added to ``docs/`` is never
    unreachable; list it in ``mkdocs.yml`` to give it a better place)."""
    nav = config["nav"] or []
    sections = {title: entry[title] for entry in nav if isinstance(entry, dict) for title in entry}
    for title in (NAV_TITLE, GUIDES_TITLE):
        if not isinstance(sections.get(title), list):
            raise ValueError(f"mkdocs.yml: the nav needs a section titled {title!r} (a list of pages)")
    for package, pages in api_pages(_root(config)).items():
        sections[NAV_TITLE].append({package: [{name: path} for name, path in pages]})
    listed = set(nav_paths(nav))
    docs = Path(config["docs_dir"])
    for page in sorted(docs.rglob("*.md")):
        path = page.relative_to(docs).as_posix()
        if path not in listed and not path.startswith(f"{REFERENCE}/"):
            log.info("api_reference hook: %s is not in mkdocs.yml's nav; listed under %s", path, GUIDES_TITLE)
            sections[GUIDES_TITLE].append(path)
    return config


def nav_paths(nav: Any) -> list[str]:
    """Every page path in a nav structure (lists of paths, ``{title: path}`` and ``{title: [...]}``)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_paths(value)]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_paths(item)]
    return []


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages (in memory) to the site's files."""
    for package, pages in api_pages(_root(config)).items():
        modules = pages[1:]
        for dotted, path in pages:
            text = page_text(dotted, dotted == package, modules, path)
            files.append(File.generated(config, path, content=text))
    return files
