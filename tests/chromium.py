"""A real headless Chromium driven over the DevTools protocol, for the browser tests (the run report, the docs site).

Speaks the DevTools protocol over ``--remote-debugging-pipe`` (fd 3: commands in, fd 4: replies out, each
message a JSON object ended by a NUL byte) with the standard library only. Tests skip when Chromium is absent
(``BROWSER is None``; ``apt-get install chromium`` on Debian).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


class DevTools:
    """A Chromium process driven over its DevTools pipe; ``send`` waits for the reply, events are kept."""

    def __init__(self, binary: str, profile: str, width: int = 1400) -> None:
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
                "--remote-debugging-pipe", f"--window-size={width},900", "about:blank"]
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


@pytest.fixture()
def browser():
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    devtools = DevTools(BROWSER, profile)  # type: ignore[arg-type]
    try:
        yield devtools
    finally:
        devtools.close()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(dt: DevTools, url: str, domains: tuple[str, ...] = ("Runtime", "Log", "Page")) -> str:
    """Attach to the browser's page, enable ``domains`` (add ``"Network"`` to see every request), load ``url`` and
    wait for its load event; returns the session id (events since the navigation are in ``dt.events``)."""
    targets = dt.send("Target.getTargets")["targetInfos"]
    page = next(t for t in targets if t["type"] == "page")
    session = dt.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
    for domain in domains:
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
