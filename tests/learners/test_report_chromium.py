"""The report in a real headless Chromium: no console errors, every chart drawn, hostile text inert.

Speaks the DevTools protocol over ``--remote-debugging-pipe`` (fd 3: commands in, fd 4: replies out, each
message a JSON object ended by a NUL byte) with the standard library only. Skips when Chromium is absent.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dapo_env.learners.report import write_report

sys.path.insert(0, str(Path(__file__).parent))
from report_helpers import HOSTILE, make_run  # noqa: E402

BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="Chromium not found: apt-get install chromium (Debian) "
                                                        "to run the report's browser test")
WIDTH = 1400


class DevTools:
    """A Chromium process driven over its DevTools pipe; ``send`` waits for the reply, events are kept."""

    def __init__(self, binary: str, profile: str) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w)]
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def child_fds() -> None:  # the pipe ends become fds 3 and 4 of the browser (dup2 clears CLOEXEC)
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # --no-sandbox: the sandbox cannot start as root or inside most containers; the page is our own file
        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--hide-scrollbars", "--mute-audio", f"--user-data-dir={profile}",
                "--remote-debugging-pipe", f"--window-size={WIDTH},900", "about:blank"]
        self._log = Path(profile) / "chromium-stderr.log"  # a file, not a pipe nobody drains
        with open(self._log, "wb") as log:
            self.proc = subprocess.Popen(args, preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log)
        for fd in high:
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        reply = self._read_until(lambda m: m.get("id") == self._next_id, timeout, method)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        for e in self.events:
            if e.get("method") == method:
                return e
        return self._read_until(lambda m: m.get("method") == method, timeout, method)

    def _read_until(self, done: Any, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                msg = json.loads(raw)
                if "method" in msg:
                    self.events.append(msg)
                if done(msg):
                    return msg
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                tail = self._log.read_text(errors="replace")[-800:]
                raise TimeoutError(f"Chromium gave no answer to {what} (exit code {self.proc.poll()}); its stderr "
                                   f"ends with:\n{tail}")
            ready, _, _ = select.select([self._from_chrome], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium closed its DevTools pipe during {what}")
                self._buffer += chunk

    def close(self) -> None:
        try:
            os.write(self._to_chrome, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)


def problems(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and error log entries (CSP violations, failed loads)."""
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                               for a in p.get("args", [])))
        elif e["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log ({p['entry'].get('source')}): {p['entry'].get('text')} {p['entry'].get('url', '')}")
    return out


def coloured_pixels(rgb: np.ndarray) -> int:
    """Pixels whose channels differ by more than 0.15 (the series' colours; axes and text are grey)."""
    return int((np.abs(rgb - rgb.mean(axis=2, keepdims=True)).max(axis=2) > 0.15).sum())  # rgb: (H, W, 3)


@pytest.fixture()
def browser():
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    devtools = DevTools(BROWSER, profile)  # type: ignore[arg-type]
    try:
        yield devtools
    finally:
        devtools.close()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(dt: DevTools, url: str) -> str:
    targets = dt.send("Target.getTargets")["targetInfos"]
    page = next(t for t in targets if t["type"] == "page")
    session = dt.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Page"):
        dt.send(f"{domain}.enable", session=session)
    dt.events.clear()
    dt.send("Page.navigate", {"url": url}, session=session)
    dt.wait_event("Page.loadEventFired")
    return session


def evaluate(dt: DevTools, session: str, expression: str) -> Any:
    result = dt.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
    if "exceptionDetails" in result:
        raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
    return result["result"].get("value")


def test_report_renders_in_chromium(tmp_path: Path, browser: DevTools) -> None:
    import matplotlib.image

    run = make_run(tmp_path, hostile=True, summary=True)
    path = write_report(run)
    html, url = path.read_text(), path.resolve().as_uri()
    session = open_page(browser, url)
    time.sleep(0.3)  # let any late console message arrive
    browser.send("Runtime.evaluate", {"expression": "1"}, session=session)

    # hostile model output and config strings are text: nothing of theirs ran or became an element
    assert evaluate(browser, session, "typeof window.pwned") == "undefined"
    assert evaluate(browser, session, "document.scripts.length") == 2
    assert evaluate(browser, session, "document.images.length") == 0
    assert HOSTILE in evaluate(browser, session, "document.querySelector('section.sample-step:not([hidden])').innerText")

    # open the folded charts, lay the whole page out in one viewport, find every chart's box, screenshot
    evaluate(browser, session, "document.querySelectorAll('details').forEach(d => { d.open = true; })")
    height = evaluate(browser, session, "document.documentElement.scrollHeight")
    browser.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": height, "deviceScaleFactor": 1,
                                                        "mobile": False}, session=session)
    boxes = evaluate(browser, session, """JSON.stringify(Array.from(document.querySelectorAll('figure.chart')).map(
        f => { const r = f.querySelector('svg').getBoundingClientRect();
               return [f.id, r.left + scrollX, r.top + scrollY, r.width, r.height]; }))""")
    boxes = json.loads(boxes)
    assert len(boxes) == html.count('<figure class="chart"') >= 20
    shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                        session=session, timeout=120)
    img = matplotlib.image.imread(io.BytesIO(base64.b64decode(shot["data"])), format="png")[..., :3]  # (H, W, 3)
    for chart_id, x, y, w, h in boxes:
        assert w > 200 and h > 80, (chart_id, w, h)
        crop = img[int(y):int(y + h), int(x):int(x + w)]  # (h, w, 3) in [0, 1]
        coloured = coloured_pixels(crop)
        assert crop.std() > 0.02, f"{chart_id} looks blank (pixel std {crop.std():.3f})"  # axes, ticks, lines
        assert coloured >= 12, f"{chart_id}: {coloured} coloured pixels, no series drawn"  # a dot is ~18

    # the step selector switches the shown samples; hovering a chart shows its values
    evaluate(browser, session, """(() => { const s = document.getElementById('sample-step'); s.value = '0';
        s.dispatchEvent(new Event('change')); })()""")
    shown = evaluate(browser, session, """Array.from(document.querySelectorAll('section.sample-step'))
        .filter(s => !s.hidden).map(s => s.dataset.step).join(',')""")
    assert shown == "0"
    _, x, y, w, h = next(b for b in boxes if b[0] == "chart-reward")
    browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x + w * 0.5, "y": y + h * 0.5},
                 session=session)
    tip = evaluate(browser, session, "(t => t.hidden ? '' : t.textContent)(document.getElementById('tooltip'))")
    assert tip.startswith("step ") and "reward/mean: " in tip
    assert problems(browser.events) == [], problems(browser.events)

    # negative control: the same pixel test on the reward chart with its series removed finds no line
    def reward_chart() -> np.ndarray:
        clip = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
        png = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                           session=session, timeout=120)["data"]
        return matplotlib.image.imread(io.BytesIO(base64.b64decode(png)), format="png")[..., :3]

    assert coloured_pixels(reward_chart()) >= 12
    evaluate(browser, session, "document.querySelectorAll('#chart-reward g.series').forEach(g => g.remove())")
    assert coloured_pixels(reward_chart()) < 12


def test_minimal_run_loads_without_errors(tmp_path: Path, browser: DevTools) -> None:
    """One record, no config, no eval files: the script still finds what it needs (no selector, one chart)."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 0, "eval/accuracy": 0.25}\n{"step": 1, "reward/me')
    session = open_page(browser, write_report(run).resolve().as_uri())
    time.sleep(0.3)
    assert evaluate(browser, session, "document.querySelectorAll('figure.chart').length") == 1
    assert problems(browser.events) == [], problems(browser.events)


def test_console_errors_are_caught(tmp_path: Path, browser: DevTools) -> None:
    """The check above can fail: errors, exceptions and a script blocked by the page's policy all show."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><link rel=icon href=data:,><p>x</p>"
                    "<script>console.error('boom'); undefined_function()</script>")
    open_page(browser, page.as_uri())
    time.sleep(0.3)
    found = problems(browser.events)
    assert any("boom" in p for p in found) and any("undefined_function" in p for p in found), found
    blocked = tmp_path / "blocked.html"
    blocked.write_text("<!DOCTYPE html><meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">"
                       "<link rel=icon href=data:,><p>x</p><script>window.ran = 1</script>")
    session = open_page(browser, blocked.as_uri())
    time.sleep(0.3)
    assert evaluate(browser, session, "typeof window.ran") == "undefined"
    assert any("Content Security Policy" in p for p in problems(browser.events)), problems(browser.events)
