"""A toy chat model behind a real OpenAI-style HTTP server, so the evaluate tutorial runs anywhere (no GPU, no
download): ``/v1/chat/completions`` answers "Largest of ..." questions like a small reasoning model (its
reasoning in ``reasoning_content``, the answer in the content, the ``usage`` counted in words), and
``/v1/completions`` answers raw text the way a chat model often does: with nothing. ``skill`` is the share of
problems it gets right (the others it answers with the smallest number), decided by the question's hash.

    python examples/toy_chat_server.py            # serves http://127.0.0.1:8000/v1 until Ctrl-C

From Python: ``with ToyChatServer(skill=0.8) as server: server.url``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ToyChatServer:
    """``with ToyChatServer() as server:`` serves on ``server.url`` (a free port unless ``port`` is given)."""

    def __init__(self, *, skill: float = 1.0, port: int = 0, name: str = "toy-chat") -> None:
        self.skill, self.name = skill, name
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ToyChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply(self, question: str) -> tuple[str, str]:
        """``(reasoning, answer)`` to a question."""
        numbers = [int(x) for x in re.findall(r"-?\d+", question)] or [0]
        luck = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) / 16 ** 8
        pick = max(numbers) if luck < self.skill else min(numbers)
        return f"Comparing {' and '.join(map(str, numbers))}, the largest is {pick}.", f"Answer: {pick}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        toy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": toy.name, "object": "model"}]})
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                route = self.path.rstrip("/")
                if route == "/v1/chat/completions":
                    question = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
                    reasoning, answer = toy.reply(question)
                    message = {"role": "assistant", "content": answer, "reasoning_content": reasoning}
                    choice = {"index": 0, "message": message, "finish_reason": "stop"}
                    produced = len(answer.split()) + len(reasoning.split())
                    details = {"reasoning_tokens": len(reasoning.split())}
                elif route == "/v1/completions":
                    question = str(body.get("prompt"))
                    choice, produced, details = {"index": 0, "text": "", "finish_reason": "stop"}, 0, {}
                else:
                    self._json(404, {"error": "not found"})
                    return
                prompt = len(question.split())
                self._json(200, {"id": "toy", "model": toy.name, "choices": [choice],
                                 "usage": {"prompt_tokens": prompt, "completion_tokens": produced,
                                           "total_tokens": prompt + produced, "completion_tokens_details": details}})

        return Handler


if __name__ == "__main__":
    with ToyChatServer(port=8000) as running:
        print(f"serving {running.name} at {running.url} (Ctrl-C stops it)")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
