"""The docs site builds with ``mkdocs build --strict``, documents every public name and module, has no broken
internal link, and renders in a real headless Chromium without console errors or requests that leave the site.

Skips without mkdocs (``pip install -e ".[docs]"``); the browser test also skips without Chromium. The site is
built once per test session into a temporary folder and served by a real local HTTP server.
"""

from __future__ import annotations

import functools
import importlib
import os
import posixpath
import subprocess
import sys
import threading
import time
import tomllib
import types
import zlib
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from chromium import BROWSER, DevTools, browser, evaluate, open_page, problems  # noqa: F401  (browser: a fixture)
from doc_snippets import REPO
from optional_extras import require

require("mkdocs", "the docs site (mkdocs build --strict)")

from docs_hooks.api_reference import PACKAGES, public_names  # noqa: E402  (imports mkdocs)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as CI builds it (``mkdocs build --strict``), from this checkout."""
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(REPO), NO_MKDOCS_2_WARNING="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}"
    return out


def inventory(site: Path) -> set[str]:
    """The names in the site's ``objects.inv`` (Sphinx inventory v2: four header lines, then zlib)."""
    body = (site / "objects.inv").read_bytes().split(b"\n", 4)[4]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines()}


def source_modules(package: str, folder: Path) -> list[str]:
    """Every public module under a package's folder, found from the files (not from the docs hook)."""
    layers = {name.rsplit(".", 1)[1] for name in PACKAGES if name.count(".") == 1}
    found = []
    for path in folder.rglob("*.py"):
        parts = path.relative_to(folder).with_suffix("").parts
        if package == "dapo_env" and parts[0] in layers:
            continue  # the symlinked layers are packages of their own
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and not any(part.startswith("_") for part in parts):
            found.append(".".join((package, *parts)))
    return sorted(found)


def test_the_hooks_doctests() -> None:
    import doctest

    from docs_hooks import griffe_docstrings

    result = doctest.testmod(griffe_docstrings, verbose=False)
    assert result.attempted >= 2 and result.failed == 0


# --- the build -----------------------------------------------------------------------------------------
def test_every_installed_package_is_in_the_api_reference() -> None:
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    for package in packages:
        assert any(package == p or package.startswith(p + ".") for p in PACKAGES), (
            f"{package} (pyproject.toml) is under no package of docs_hooks/api_reference.py's PACKAGES")


def test_every_public_module_has_an_api_page(site: Path) -> None:
    names = inventory(site)
    for package, folder in PACKAGES.items():
        modules = source_modules(package, REPO / folder)
        assert modules, package
        for module in [package, *modules]:
            assert module in names, f"{module} has no API page"
            page = site / "reference" / package / module[len(package) + 1:].replace(".", "/") / "index.html"
            assert module == package or page.is_file(), f"{module}: no {page.relative_to(site)}"


def test_every_public_name_is_documented(site: Path) -> None:
    """Each name of a package's ``__all__`` is on the package's page, except a name shadowed by a module of the same
    name (``dapo_env.learners.train``), which is documented where it is defined and linked from there."""
    names = inventory(site)
    for package, folder in PACKAGES.items():
        exported = public_names(package)
        modules = {m.rsplit(".", 1)[1] for m in source_modules(package, REPO / folder)}
        assert exported, package
        for name in exported:
            if name in modules:
                module = importlib.import_module(package)
                obj = getattr(module, name)
                if isinstance(obj, types.ModuleType):  # the submodule was imported and now shadows the lazy name
                    obj = module.__getattr__(name)
                defined = f"{obj.__module__}.{name}"
                assert defined in names, f"{package}.{name} (shadowed by a module): {defined} is not documented"
                page = (site / "reference" / package / "index.html").read_text(encoding="utf-8")
                assert defined in page, f"the {package} page does not link {defined}"
            else:
                assert f"{package}.{name}" in names, f"{package}.{name} is in __all__ but not on the package's page"


class _Links(HTMLParser):
    """The ``href``/``src`` targets and the element ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[tuple[str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)
            elif key in ("href", "src") and value is not None:
                self.targets.append((tag, value))


@functools.cache
def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def test_no_broken_internal_link_and_no_external_asset(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 80, len(pages)
    broken, external, checked = [], [], 0
    for page in pages:
        for tag, target in _parse(page).targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc:
                if tag in ("script", "link", "img") and parts.scheme in ("http", "https"):
                    external.append(f"{page.relative_to(site)}: <{tag}> {target}")
                continue
            path = unquote(parts.path)
            base = site if path.startswith("/") else page.parent  # 404.html links from the site's root
            dest = page if not path else Path(posixpath.normpath(str(base / path.lstrip("/"))))
            if dest.is_dir():
                dest = dest / "index.html"
            checked += 1
            if not dest.exists():
                broken.append(f"{page.relative_to(site)} -> {target}")
            elif parts.fragment and dest.suffix == ".html" and unquote(parts.fragment) not in _parse(dest).ids:
                broken.append(f"{page.relative_to(site)} -> {target} (no such anchor)")
    assert checked > 1000, checked
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:40])
    assert not external, "assets loaded from outside the site:\n" + "\n".join(external[:20])


# --- in a browser --------------------------------------------------------------------------------------
class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path):
    """The built site on a real local HTTP server (Material's search fetches its index: file:// would refuse)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def network_problems(events: list[dict[str, Any]], origin: str) -> list[str]:
    """Failed requests, HTTP errors, and requests to anywhere but the site (fonts, CDNs)."""
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith((origin, "data:", "blob:")):
                out.append(f"request outside the site: {url}")
        elif e["method"] == "Network.loadingFailed" and not p.get("canceled"):
            out.append(f"failed: {p.get('errorText')} ({p.get('type')})")
        elif e["method"] == "Network.responseReceived" and p["response"]["status"] >= 400:
            out.append(f"HTTP {p['response']['status']}: {p['response']['url']}")
    return out


PAGES = {  # path -> (CSS selector, at least this many matches): what the page must show
    "/": ("article a[href^='tutorials/']", 9),
    "/tutorials/math-task/": ("article pre code", 5),
    "/tutorials/evaluate/": ("article pre code", 3),
    "/reference/dapo_env.tasks/": ("article .doc-object", 15),
    "/reference/dapo_env.learners/trainer/": ("article .doc-object", 5),
}


@pytest.mark.skipif(BROWSER is None, reason="Chromium not found: apt-get install chromium (Debian) to run the "
                                            "docs site's browser test")
@pytest.mark.parametrize("path", list(PAGES))
def test_page_renders_in_chromium(path: str, served: str, browser: DevTools) -> None:
    session = open_page(browser, served + path, domains=("Runtime", "Log", "Page", "Network"))
    time.sleep(0.5)  # the search worker fetches its index after load
    browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
    selector, at_least = PAGES[path]
    found = evaluate(browser, session, f"document.querySelectorAll({selector!r}).length")
    assert found >= at_least, f"{path}: {found} x {selector}"
    assert evaluate(browser, session, "document.querySelector('article h1').innerText.trim().length") > 0
    wide = evaluate(browser, session, "Array.from(document.querySelectorAll('article pre > code'))"
                                      ".filter(c => c.scrollWidth > c.clientWidth + 1).length")
    assert wide == 0, f"{path}: {wide} code block(s) scroll sideways at 1400 px (docs/stylesheets/extra.css wraps them)"
    header = evaluate(browser, session, "getComputedStyle(document.querySelector('header.md-header')).backgroundColor")
    assert header not in ("", "rgba(0, 0, 0, 0)"), f"{path}: the theme's stylesheet did not apply ({header})"
    assert problems(browser.events) == [], problems(browser.events)
    assert network_problems(browser.events, served) == [], network_problems(browser.events, served)


@pytest.mark.skipif(BROWSER is None, reason="Chromium not found: apt-get install chromium (Debian)")
def test_search_works_offline(served: str, browser: DevTools) -> None:
    session = open_page(browser, served + "/", domains=("Runtime", "Log", "Page", "Network"))
    time.sleep(0.5)
    evaluate(browser, session, """(() => { const q = document.querySelector('.md-search__input'); q.focus();
        q.value = 'DynamicSampler'; q.dispatchEvent(new Event('input', {bubbles: true})); })()""")
    deadline, hits = time.monotonic() + 20, 0
    while time.monotonic() < deadline and not hits:
        time.sleep(0.3)
        hits = evaluate(browser, session, "document.querySelectorAll('.md-search-result__item').length")
    assert hits > 0, "searching 'DynamicSampler' found nothing"
    assert problems(browser.events) == [] and network_problems(browser.events, served) == []


@pytest.mark.skipif(BROWSER is None, reason="Chromium not found: apt-get install chromium (Debian)")
def test_the_checks_can_fail(served: str, browser: DevTools, site: Path, tmp_path: Path) -> None:
    """Negative controls: a page that asks for a web font and a missing file is caught by the network check."""
    (site / "bad.html").write_text("<!DOCTYPE html><link rel=icon href=data:,><link rel=stylesheet "
                                   "href='https://fonts.googleapis.com/css?family=Roboto'><img src='missing.png'>")
    try:
        session = open_page(browser, served + "/bad.html", domains=("Runtime", "Log", "Page", "Network"))
        time.sleep(0.3)
        browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
        found = network_problems(browser.events, served)
        assert any("fonts.googleapis.com" in p for p in found) and any("404" in p for p in found), found
    finally:
        (site / "bad.html").unlink()
