"""A fault injector: a real local HTTP server speaking enough of the OpenAI API to answer, and misbehaving on cue.

It is not a stand-in for vLLM: it answers ``/v1/completions`` and ``/v1/chat/completions`` with a
deterministic text (``answer(prompt_text) -> str``; the default echoes the largest number in the prompt, so
``Largest-v0`` problems come back right) and no token ids. Faults come from a script (``faults``: one
entry consumed per request, ``"ok"`` when it runs out) or from a rule (``rule(body) -> fault or None``,
checked first):

- ``"drop"``: close the connection without answering;
- ``"stall"``: hold the request for ``stall_s`` seconds, then close it;
- ``"500"`` / ``"503"`` / ``"429"``: that status (``429`` with ``Retry-After: retry_after``);
- ``"malformed"``: status 200 with a body that is not JSON;
- ``"404"``: no such route; ``"400"``: a refused request.

``version`` makes ``GET /version`` answer like vLLM's (``{"version": ...}``), so clients send vLLM's extras.

Tools, as the OpenAI API specifies them: ``message(body) -> dict`` answers a chat request with a whole assistant
message (``content`` and ``tool_calls`` with ids and JSON-string ``arguments``), as a server that parses calls
does. ``refuse_tools`` answers 400 to a chat request with ``tools``: ``"auto"`` unless it asks for
``tool_choice: "none"`` (as vLLM without ``--enable-auto-tool-choice``), ``"all"`` whatever it asks.

A served model, as a chat server presents it: ``reasoning(body) -> str | None`` adds that text to a chat
answer as ``reasoning_content`` (``reasoning_field="reasoning"``: newer vLLM's field) and counts it in
``usage.completion_tokens_details.reasoning_tokens``; ``usage=False`` leaves ``usage`` out of answers;
``raw_text_answer`` is what a chat model says to a raw-text completions request (``""``: it stops at once, as
SmolLM2-Instruct did). A rate limit (``rate_limit=(requests, seconds)``, a sliding window) answers 429 with
``Retry-After`` (the whole seconds until a slot frees) beyond it, counted in ``rejected``. A judge's
verdicts come on cue from ``answer`` itself (see :func:`judging`).

A request's ``n`` gets ``n`` choices (listed in reverse ``index`` order). It counts what a test needs:
``requests`` (every POST), ``max_in_flight`` (the most POSTs being served at
once; each answer waits ``delay_s`` so overlaps show), and ``bodies`` (the decoded requests).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def request_text(body: dict[str, Any]) -> str:
    """What a request asks, as text: a completions request's prompt, or a chat request's messages joined."""
    if "messages" in body:
        return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else " ".join(map(str, prompt or []))


def judging(answer: Callable[[str], str], verdict: Callable[[str], str]) -> Callable[[str], str]:
    """An ``answer`` that plays a judge too: a request holding ``Reference answer:`` (the judge's prompt) gets
    ``verdict(text)``, any other ``answer(text)``."""
    return lambda text: verdict(text) if "Reference answer:" in text else answer(text)


def largest_number(prompt: str) -> str:
    """The default answer: the largest integer in the prompt (the right answer to Largest-v0)."""
    numbers = [int(x) for x in re.findall(r"-?\d+", prompt)]
    return f"Answer: {max(numbers)}" if numbers else "Answer: 0"


class FaultServer:
    """``with FaultServer() as server: server.url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, *, answer: Callable[[str], str] = largest_number, faults: Iterable[str] = (),
                 rule: Callable[[dict[str, Any]], str | None] | None = None, stall_s: float = 5.0,
                 delay_s: float = 0.0, retry_after: str = "0", chat_only: bool = False,
                 version: str | None = None, message: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 refuse_tools: str | None = None, reasoning: Callable[[dict[str, Any]], str | None] | None = None,
                 reasoning_field: str = "reasoning_content", usage: bool = True, raw_text_answer: str | None = None,
                 rate_limit: tuple[int, float] | None = None) -> None:
        self.answer, self.rule, self.stall_s, self.delay_s = answer, rule, stall_s, delay_s
        self.retry_after, self.chat_only, self.version = retry_after, chat_only, version
        self.faults = list(faults)
        self.message, self.refuse_tools = message, refuse_tools
        self.reasoning, self.reasoning_field, self.usage = reasoning, reasoning_field, usage
        self.raw_text_answer, self.rate_limit = raw_text_answer, rate_limit
        self.accepted: list[float] = []  # monotonic times of the requests the rate limit let through
        self.rejected = 0
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _rate_limited(self) -> str | None:
        """``Retry-After`` seconds when the request is over the rate limit (call under the lock)."""
        if self.rate_limit is None:
            return None
        count, window = self.rate_limit
        now = time.monotonic()
        self.accepted = [t for t in self.accepted if now - t < window]
        if len(self.accepted) >= count:
            self.rejected += 1
            return str(max(1, math.ceil(window - (now - self.accepted[0]))))
        self.accepted.append(now)
        return None

    def _next_fault(self, body: dict[str, Any]) -> str:
        with self.lock:
            self.requests += 1
            self.bodies.append(body)
            wait = self._rate_limited()
            if wait is not None:
                return f"429:{wait}"
            ruled = self.rule(body) if self.rule is not None else None
            if ruled is not None:
                return ruled
            return self.faults.pop(0) if self.faults else "ok"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _leave(self) -> None:
                """This request stops counting as in flight (before its answer goes out: a client that has read
                the answer may send the next request at once)."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self._leave()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/version" and server.version:
                    self._send(200, json.dumps({"version": server.version}).encode())
                elif self.path.rstrip("/") == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": "fault", "object": "model"}]}).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._serve(body)
                finally:
                    self._leave()

            def _serve(self, body: dict[str, Any]) -> None:
                fault = server._next_fault(body)
                time.sleep(server.delay_s)
                chat = self.path.rstrip("/") == "/v1/chat/completions"
                if fault == "drop":
                    self._leave()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault == "stall":
                    time.sleep(server.stall_s)
                    self._leave()
                    self.close_connection = True
                    return
                if fault.startswith("429:"):
                    self._send(429, b'{"error": "rate limited"}', {"Retry-After": fault.split(":", 1)[1]})
                    return
                if fault in ("500", "503", "429", "404", "400"):
                    headers = {"Retry-After": server.retry_after} if fault == "429" else None
                    self._send(int(fault), b'{"error": "injected"}', headers)
                    return
                if fault == "malformed":
                    self._send(200, b'{"choices": [{"text": "trunc')
                    return
                if not chat and (server.chat_only or self.path.rstrip("/") != "/v1/completions"):
                    self._send(404, b'{"error": "no such route"}')
                    return
                if chat and body.get("tools") and (server.refuse_tools == "all" or (
                        server.refuse_tools == "auto" and body.get("tool_choice") != "none")):
                    self._send(400, b'{"error": "\\"auto\\" tool choice requires --enable-auto-tool-choice"}')
                    return
                text = server.answer(request_text(body))
                if not chat and server.raw_text_answer is not None:
                    text = server.raw_text_answer
                tokens = len(text.split())
                count = int(body.get("n") or 1)
                reply = server.message(body) if chat and server.message else {"role": "assistant", "content": text}
                thought = server.reasoning(body) if chat and server.reasoning else None
                if thought is not None:
                    reply = {**reply, server.reasoning_field: thought}
                    tokens += len(thought.split())
                choices = [{"index": i, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                            **({"message": reply} if chat else {"text": text})}
                           for i in reversed(range(count))]  # out of order: clients must sort by index
                prompt_tokens = len(request_text(body).split())
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens * count,
                         "total_tokens": tokens * count + prompt_tokens}
                if thought is not None:
                    usage["completion_tokens_details"] = {"reasoning_tokens": len(thought.split()) * count}
                payload = {"id": "x", "object": "chat.completion" if chat else "text_completion", "model": body.get("model"),
                           "choices": choices, **({"usage": usage} if server.usage else {})}
                self._send(200, json.dumps(payload).encode())

        return Handler
