"""The report in a real headless Chromium: no console errors, every chart drawn, hostile text inert.

The browser is driven over its DevTools pipe by ``tests/chromium.py`` (shared with the docs site's browser test).
Skips when Chromium is absent.
"""

from __future__ import annotations

import base64
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dapo_env.learners.run.report import write_report

sys.path.insert(0, str(Path(__file__).parent))
from report_helpers import HOSTILE, make_run  # noqa: E402

from chromium import BROWSER, DevTools, browser, evaluate, open_page, problems  # noqa: E402,F401  (browser: a fixture)

pytestmark = pytest.mark.skipif(BROWSER is None, reason="Chromium not found: apt-get install chromium (Debian) "
                                                        "to run the report's browser test")
WIDTH = 1400


def coloured_pixels(rgb: np.ndarray) -> int:
    """Pixels whose channels differ by more than 0.15 (the series' colours; axes and text are grey)."""
    return int((np.abs(rgb - rgb.mean(axis=2, keepdims=True)).max(axis=2) > 0.15).sum())  # rgb: (H, W, 3)


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
