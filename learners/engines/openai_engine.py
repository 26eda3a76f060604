"""An engine over any OpenAI-compatible server (vLLM, SGLang, an API model): registry name ``openai``.

:class:`OpenAIEngine` implements the rollout engine protocol's ``generate`` and ``generate_turns`` with HTTP
requests to a server, one request per sample, at most ``concurrency`` in flight:

- **completions** (``/v1/completions``): the prompt goes as text, or as token ids when the engine holds a
  tokenizer (exactly the ids an in-process engine would sample after). A vLLM server (found by its
  ``GET /version``) is also asked for what training needs, with vLLM's own request fields
  (``vllm/entrypoints/openai/completion/protocol.py``, 0.32): ``return_token_ids`` (the choice's
  ``token_ids`` and ``prompt_token_ids``), ``logprobs: 0`` (the sampled token's log-prob in
  ``logprobs.token_logprobs``) and ``stop_token_ids`` (every EOS id of the tokenizer);
- **chat** (``/v1/chat/completions``): the prompt as one user message (after the engine's ``system_prompt``,
  if any), or a multi-turn episode's messages; text only (evaluation). A reasoning server's
  ``reasoning_content`` (vLLM's and SGLang's reasoning parsers, DeepSeek-style APIs; ``reasoning`` in newer
  vLLM) comes back apart from the content, in :class:`ServedCompletion`'s ``reasoning``.

Every answer is a :class:`ServedCompletion` carrying the server's ``usage`` for that sample (prompt, completion
and reasoning tokens, when the server reports them). ``rpm``/``tpm`` pace the requests (:mod:`.pacing`), and a
429 pauses every request of the engine for the server's ``Retry-After``.

``api="auto"`` uses completions and falls back to chat when the server has no completions route (404/405/
501). Every request has a timeout (``timeout_s``) and is retried on connection errors, timeouts, 5xx, 429
and malformed answers, ``retries`` times with exponential backoff (``backoff_s * 2**attempt``, at most
``max_backoff_s``; a ``Retry-After`` header wins, capped the same way), so one request gives up after at
most ``(retries + 1) * timeout_s + retries * max_backoff_s`` seconds. Other 4xx answers are not retried.

A request that still fails is an error, never a wrong answer: with ``on_error="record"`` (evaluation) the
sample is a :class:`FailedCompletion` (empty text, the cause in ``error``); with ``"raise"`` (training) the
call raises :class:`EndpointError`. Training needs the sampled token ids and log-probs:
``require_token_ids=True`` (what :func:`~dapo_env.learners.engines.make_engine` asks for) refuses a server
that does not return them, in one line. The API key is read from the environment variable named by
``api_key_env`` (``OPENAI_API_KEY`` by default), never from a flag or a file; without one no
``Authorization`` header is sent (a local vLLM needs none).

Only the standard library is used (``http.client`` and threads).

Example:
    >>> cfg = EndpointConfig(base_url="http://127.0.0.1:8000", model="tiny")
    >>> cfg.base_url, cfg.api, cfg.concurrency
    ('http://127.0.0.1:8000/v1', 'auto', 8)
    >>> backoff_delay(3, base=0.5, cap=30.0), backoff_delay(0, base=0.5, cap=30.0, retry_after="7")
    (4.0, 7.0)
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from dapo_env.tools import from_openai_message, to_openai_messages
from dapo_env.types import Completion

from .engine_io import WeightsLike
from .base import SamplingParams
from .pacing import Pacer, estimate_tokens


APIS = ("auto", "completions", "chat")
ON_ERROR = ("record", "raise")
#: The ``reason`` of an evaluation record whose request failed (its cause follows after a colon).
ENDPOINT_ERROR = "error:endpoint"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_NO_ROUTE = frozenset({404, 405, 501})
#: How a chat request offers tools, tried in order until the server takes one: automatic tool choice (the
#: server parses calls), ``tool_choice: "none"`` (tools shown, calls left in the text), no tools at all.
_TOOL_MODES: tuple[dict[str, str] | None, ...] = ({}, {"tool_choice": "none"}, None)


class EndpointError(OSError):
    """A request to the server failed after its retries (the message names the cause), or the server cannot
    do what was asked of it."""


class _Retryable(Exception):
    """One attempt failed in a way worth retrying; ``retry_after``: the server's ``Retry-After`` header."""

    def __init__(self, cause: str, retry_after: str | None = None, status: int | None = None) -> None:
        super().__init__(cause)
        self.retry_after, self.status = retry_after, status


class NoRoute(Exception):
    """The server has no such route (404/405/501)."""


@dataclass(frozen=True, slots=True)
class FailedCompletion(Completion):
    """A sample whose request failed after its retries: empty text, no tokens, finish reason ``"length"`` (a
    multi-turn episode ends there), and the cause in ``error``. Evaluation records it with
    ``reason="error:endpoint: <cause>"``, out of every metric's denominator.

    Example:
        >>> FailedCompletion("", num_tokens=0, error="HTTP 500 (4 attempts)").error
        'HTTP 500 (4 attempts)'
    """

    error: str = ""


@dataclass(frozen=True, slots=True)
class ServedCompletion(Completion):
    """A served answer with what the server said about it beyond the text.

    Attributes:
        reasoning: the server's ``reasoning_content`` (or ``reasoning``) of a chat answer, apart from ``text``;
            ``None`` when it sent none.
        usage: the server's token counts for this sample, ``{"prompt_tokens", "completion_tokens",
            "reasoning_tokens"}`` (a count the server did not report is ``None``); ``None`` when the answer had
            no ``usage`` or served several samples in one request.

    Example:
        >>> ServedCompletion("4", reasoning="2 + 2", usage={"prompt_tokens": 9}).reasoning
        '2 + 2'
    """

    reasoning: str | None = None
    usage: Mapping[str, int | None] | None = None


def endpoint_error(completion: Completion) -> str | None:
    """The cause of a failed request, or ``None`` for a real sample.

    Example:
        >>> endpoint_error(Completion("4")), endpoint_error(FailedCompletion("", error="timeout"))
        (None, 'timeout')
    """
    return completion.error if isinstance(completion, FailedCompletion) else None


def backoff_delay(attempt: int, *, base: float, cap: float, retry_after: str | None = None) -> float:
    """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After`` (seconds) when it sent one,
    else ``base * 2**attempt``; never more than ``cap``."""
    if retry_after is not None:
        try:
            return min(cap, max(0.0, float(retry_after)))
        except ValueError:
            pass  # an HTTP date: fall back to our own schedule
    return min(cap, base * 2.0 ** attempt)


@dataclass(frozen=True, kw_only=True)
class EndpointConfig:
    """Where the server is and how to talk to it.

    Attributes:
        base_url: the server's OpenAI base URL (``http://host:8000/v1``; ``/v1`` is added to a bare host).
        model: the served model's name (the ``model`` field of every request).
        api: ``"completions"``, ``"chat"`` or ``"auto"`` (completions, chat when the server has none).
        api_key_env: the environment variable holding the API key (read when a request is sent).
        concurrency: the most requests in flight at once.
        timeout_s: one attempt's limit (connect and answer) in seconds.
        retries: further attempts after a connection error, timeout, 5xx, 429 or malformed answer.
        backoff_s, max_backoff_s: the first retry's wait (doubling after each) and the cap of any wait.
        on_error: ``"record"`` (a :class:`FailedCompletion`) or ``"raise"`` (:class:`EndpointError`).
        require_token_ids: refuse a server that returns no token ids and log-probs (training needs them).
        samples_per_request: send a prompt's ``n`` samples in one request (``n`` field; vLLM gives sample ``j``
            the seed ``seed + j``): ``n`` times fewer requests (server-mode training), a failure takes the
            whole group; default: one request per sample.
        rpm, tpm: the most requests and tokens per minute (:class:`~.pacing.Pacer`); ``None``: no limit.
    """

    base_url: str
    model: str
    api: str = "auto"
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    on_error: str = "raise"
    require_token_ids: bool = False
    samples_per_request: bool = False
    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint {self.base_url!r}: pass an http(s) URL such as http://127.0.0.1:8000/v1")
        path = parts.path.rstrip("/") or "/v1"
        object.__setattr__(self, "base_url", f"{parts.scheme}://{parts.netloc}{path}")
        checks = [(bool(self.model), f"model {self.model!r}: name the served model (its /v1/models id)"),
                  (self.api in APIS, f"api {self.api!r}: choose one of {APIS}"),
                  (self.on_error in ON_ERROR, f"on_error {self.on_error!r}: choose one of {ON_ERROR}"),
                  (self.concurrency >= 1, f"concurrency {self.concurrency}: must be >= 1"),
                  (self.timeout_s > 0, f"timeout_s {self.timeout_s}: must be > 0"),
                  (self.retries >= 0, f"retries {self.retries}: must be >= 0"),
                  (0 <= self.backoff_s <= self.max_backoff_s, "backoff: need 0 <= backoff_s <= max_backoff_s"),
                  (bool(self.api_key_env), "api_key_env: name an environment variable (e.g. OPENAI_API_KEY)"),
                  (self.rpm is None or self.rpm > 0, f"rpm {self.rpm}: must be > 0 (or left out: no limit)"),
                  (self.tpm is None or self.tpm > 0, f"tpm {self.tpm}: must be > 0 (or left out: no limit)")]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"endpoint {message}")

    @property
    def root(self) -> str:
        """The server's root URL (``base_url`` without its ``/v1``): vLLM serves ``/version`` there."""
        return self.base_url.removesuffix("/v1")


class HTTPClient:
    """JSON over HTTP(S) with the config's timeout, retries and backoff; one connection per attempt
    (thread-safe: nothing but the pacer is shared between calls). Every attempt first waits for the pacer
    (``rpm``/``tpm``, and the pause after a 429); a 429 pauses the pacer for everyone."""

    def __init__(self, config: EndpointConfig, pacer: Pacer | None = None) -> None:
        self.config = config
        self.pacer = pacer if pacer is not None else Pacer(rpm=config.rpm, tpm=config.tpm)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _attempt(self, method: str, url: str, body: bytes | None, timeout: float) -> Any:
        parts = urlsplit(url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = kind(parts.hostname, parts.port, timeout=timeout)
        try:
            conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body,
                         headers=self._headers())
            response = conn.getresponse()
            data = response.read()
        except (TimeoutError, socket.timeout) as exc:
            raise _Retryable(f"no answer within {timeout:g} s") from exc
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Retryable(f"connection failed ({type(exc).__name__}: {exc})") from exc
        finally:
            conn.close()
        if response.status in _RETRY_STATUS:
            detail = f": {_snippet(data, 300)}" if response.status == 500 and data else ""
            raise _Retryable(f"HTTP {response.status}{detail}", response.getheader("Retry-After"), response.status)
        if response.status in _NO_ROUTE:
            raise NoRoute(f"HTTP {response.status} for {parts.path}")
        if response.status >= 400:
            raise EndpointError(f"HTTP {response.status} from {url}: {_snippet(data)}")
        try:
            return json.loads(data)
        except ValueError as exc:
            raise _Retryable(f"malformed JSON answer ({_snippet(data)})") from exc

    def request(self, method: str, url: str, payload: Mapping[str, Any] | None = None, *,
                retries: int | None = None, timeout: float | None = None) -> Any:
        """The decoded JSON answer; raises :class:`EndpointError` once the retries are spent (or at once
        for a 4xx other than 429) and ``NoRoute`` for 404/405/501."""
        cfg = self.config
        retries = cfg.retries if retries is None else retries
        body = None if payload is None else json.dumps(payload).encode()
        estimate = _prompt_tokens_estimate(payload)
        for attempt in range(retries + 1):
            if payload is not None:
                self.pacer.acquire(estimate)
            try:
                answer = self._attempt(method, url, body, timeout or cfg.timeout_s)
            except _Retryable as exc:
                if attempt == retries:
                    raise EndpointError(f"{exc} ({attempt + 1} attempt{'s' * bool(attempt)} to {url})") from None
                delay = backoff_delay(attempt, base=cfg.backoff_s, cap=cfg.max_backoff_s, retry_after=exc.retry_after)
                if exc.status == 429:  # the server asks everyone to wait: the next acquire() waits for it
                    self.pacer.pause(delay)
                else:
                    time.sleep(delay)
                continue
            if payload is not None:
                usage = answer.get("usage") if isinstance(answer, dict) else None
                total = usage.get("total_tokens") if isinstance(usage, dict) else None
                self.pacer.settle(estimate, total if isinstance(total, int) else None)
            return answer
        raise AssertionError("unreachable")


def _prompt_tokens_estimate(payload: Mapping[str, Any] | None) -> int:
    """The pacer's estimate of a request's prompt tokens: its prompt's or messages' text (token ids counted as
    they are)."""
    if payload is None:
        return 0
    prompt = payload.get("prompt")
    if isinstance(prompt, list):
        return max(1, len(prompt))
    if isinstance(prompt, str):
        return estimate_tokens(prompt)
    messages = payload.get("messages") or []
    return estimate_tokens("".join(str(m.get("content") or "") for m in messages if isinstance(m, dict)))


def _snippet(data: bytes, limit: int = 120) -> str:
    text = " ".join(data.decode("utf-8", "replace").split())
    return text[:limit] + ("..." if len(text) > limit else "")


@dataclass(frozen=True)
class _Call:
    """One HTTP request of a generate call: ``row`` its place in the answer, ``budget`` its token limit."""

    row: int
    budget: int
    seed: int | None
    prompt: str | tuple[int, ...] | None = None
    messages: tuple[Mapping[str, str], ...] | None = None
    n: int = 1
    tools: tuple[Mapping[str, Any], ...] | None = None
    tool_format: str | None = None


class OpenAIEngine:
    """A rollout engine over an OpenAI-compatible server (see the module docstring).

    Args:
        config: the server and how to talk to it (:class:`EndpointConfig`).
        tokenizer: optional; with it prompts go as token ids (completions API) and EOS ids stop responses,
            as in the in-process engines. Without it prompts go as text.
        eos_token_ids: extra ids that end a response (with a tokenizer).
        add_special_tokens: how the tokenizer encodes prompts (as the in-process engines).
        system_prompt: a system message sent before each prompt over the chat API (the task's, in an eval).

    Example:
        >>> engine = OpenAIEngine(EndpointConfig(base_url="http://127.0.0.1:9", model="m"))
        >>> engine.weights_version, engine.fingerprint() == OpenAIEngine(engine.config).fingerprint()
        (0, True)
    """

    def __init__(self, config: EndpointConfig, tokenizer: Any = None, *, eos_token_ids: Iterable[int] = (),
                 add_special_tokens: bool = True, system_prompt: str | None = None) -> None:
        self.config = config
        self.client = HTTPClient(config)
        self.system_prompt = system_prompt
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens
        self.eos_token_ids: tuple[int, ...] = ()
        if tokenizer is not None:
            from .engine_io import collect_eos_ids

            self.eos_token_ids = collect_eos_ids(tokenizer, None, eos_token_ids)
        self._api = None if config.api == "auto" else config.api
        self._vllm: bool | None = None
        self._turns = {"requests": 0, "failed": 0}
        self._tool_mode = 0  # index into _TOOL_MODES: how this server takes tools (learned on its first refusal)
        if config.require_token_ids:
            self.check_trainable()

    # ---- what the server can do ------------------------------------------------------------------
    @property
    def is_vllm(self) -> bool:
        """Whether the server is vLLM (it answers ``GET /version``); asked once, with one retry."""
        if self._vllm is None:
            try:
                answer = self.client.request("GET", f"{self.config.root}/version", retries=1,
                                             timeout=min(10.0, self.config.timeout_s))
                self._vllm = isinstance(answer, dict) and "version" in answer
            except (EndpointError, NoRoute):
                self._vllm = False
        return self._vllm

    def check_trainable(self) -> None:
        """Raise :class:`EndpointError` (one line) unless the server returns token ids and log-probs."""
        if self.tokenizer is None or not self.is_vllm or self.config.api == "chat":
            why = ("no tokenizer was given to send token-id prompts" if self.tokenizer is None else
                   "the chat API returns text only" if self.config.api == "chat" else
                   "it is not a vLLM server (no GET /version), so it returns no token ids or log-probs")
            raise EndpointError(f"cannot train through {self.config.base_url}: {why}; training needs the sampled "
                                "token ids and their log-probs (use it for `dapo-env eval --endpoint`, or serve "
                                "the model with vLLM: `dapo-env serve`)")

    # ---- the engine protocol -------------------------------------------------------------------------
    @property
    def weights_version(self) -> int:
        """Always 0: a plain endpoint's weights are the server's business."""
        return 0

    def fingerprint(self, names: Iterable[str] | None = None) -> str:
        """The endpoint's identity (a hash of its URL and model name), not of any weights."""
        return hashlib.sha256(f"{self.config.base_url}|{self.config.model}".encode()).hexdigest()[:16]

    def load_weights(self, weights: WeightsLike) -> None:
        raise TypeError(f"the openai engine cannot receive weights (it only talks to {self.config.base_url}): train "
                        "with --engine vllm-server, which pushes and verifies weights after every step")

    @property
    def turn_stats(self) -> dict[str, int]:
        """Requests sent by :meth:`generate_turns` and how many of them failed."""
        return dict(self._turns)

    def release(self) -> None:
        """Nothing is kept between turns (the server's own prefix cache handles reuse)."""

    def close(self) -> None:
        """Nothing to close: every request opens and closes its own connection."""

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams) -> list[list[Completion]]:
        """``n`` responses per prompt, one request per sample (greedy: one request, copied ``n`` times).

        Sample ``j`` of a prompt gets a seed drawn from ``(sampling.seed, the prompt's text, its occurrence
        among equal prompts of the call, j)``: a call over a subset of the prompts samples what the full call
        would have for them (an eval resumed over its failed samples writes what an uninterrupted one would)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        greedy = sampling.temperature == 0
        draws = 1 if greedy else n
        seen: dict[str, int] = {}
        calls = []
        for i, prompt in enumerate(prompts):
            occurrence = seen[prompt] = seen.get(prompt, -1) + 1
            encoded = self._encode(prompt) if self.tokenizer is not None else prompt
            if self.config.samples_per_request and draws > 1:
                seed = _request_seed(sampling.seed, prompt, occurrence, 0)
                calls.append(_Call(row=i, budget=sampling.max_response_tokens, seed=seed, prompt=encoded, n=draws))
                continue
            for j in range(draws):
                seed = None if greedy else _request_seed(sampling.seed, prompt, occurrence, j)
                calls.append(_Call(row=i * draws + j, budget=sampling.max_response_tokens, seed=seed, prompt=encoded))
        flat = self._run(calls, sampling)
        groups = [flat[i * draws:(i + 1) * draws] for i in range(len(prompts))]
        return [group * n for group in groups] if greedy else groups

    def generate_turns(self, requests: Sequence[Any], sampling: SamplingParams) -> list[Completion]:
        """The next turn of each live episode (:class:`~dapo_env.multiturn.TurnRequest`): after exactly its
        ``context_token_ids`` (completions API) when there are token ids and the server takes them, else from
        its ``messages`` (chat API); at most ``min(max_response_tokens, request.tokens_left)`` new tokens."""
        calls, results = [], [None] * len(requests)
        for i, request in enumerate(requests):
            left = request.tokens_left
            budget = sampling.max_response_tokens if left is None else max(0, min(sampling.max_response_tokens,
                                                                                   int(left)))
            if budget == 0:  # nothing left in the episode's budget: an empty, cut turn
                results[i] = Completion("", num_tokens=0, finish_reason="length", token_ids=(), logprobs=())
                continue
            seed = None if sampling.temperature == 0 else _request_seed(sampling.seed, request.key, request.turn, 0)
            ids = request.context_token_ids
            if ids is not None and self.tokenizer is not None and self._resolved_api() == "completions":
                calls.append(_Call(row=i, budget=budget, seed=seed, prompt=tuple(int(t) for t in ids)))
            else:
                calls.append(_Call(row=i, budget=budget, seed=seed, messages=tuple(request.messages),
                                   tools=request.tools, tool_format=request.tool_format))
        answers = self._run(calls, sampling)
        for call, answer in zip(calls, answers):
            results[call.row] = answer
        self._turns["requests"] += len(calls)
        self._turns["failed"] += sum(endpoint_error(a) is not None for a in answers)
        return results

    # ---- requests --------------------------------------------------------------------------------------
    def _encode(self, prompt: str) -> tuple[int, ...]:
        ids = tuple(self.tokenizer(prompt, add_special_tokens=self.add_special_tokens)["input_ids"])
        if not ids:
            raise ValueError(f"prompt {prompt[:40]!r} encodes to no tokens; give it text or a BOS token")
        return ids

    def _resolved_api(self) -> str:
        return self._api or "completions"

    def _run(self, calls: Sequence[_Call], sampling: SamplingParams) -> list[Completion]:
        """Answer ``calls`` with at most ``concurrency`` requests in flight, in order (a call's ``n`` answers in a row)."""
        if not calls:
            return []
        first = [self._answer(calls[0], sampling)] if self._api is None else []  # auto: learn the API once
        rest = calls[len(first):]
        if len(rest) <= 1 or self.config.concurrency == 1:
            answers = first + [self._answer(c, sampling) for c in rest]
        else:
            with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(rest)),
                                    thread_name_prefix="openai-engine") as pool:
                answers = first + list(pool.map(lambda c: self._answer(c, sampling), rest))
        return [c for group in answers for c in group]

    def _answer(self, call: _Call, sampling: SamplingParams) -> list[Completion]:
        try:
            return self._send(call, sampling)
        except EndpointError as exc:
            if self.config.on_error == "raise":
                raise
            return [FailedCompletion("", num_tokens=0, finish_reason="length", error=str(exc))] * call.n

    def _send(self, call: _Call, sampling: SamplingParams) -> list[Completion]:
        if call.messages is None and self._resolved_api() == "completions":
            try:
                answer = self._completions(call, sampling)
                self._api = self._api or "completions"
                return answer
            except NoRoute as exc:
                if self.config.api != "auto":
                    raise EndpointError(f"{exc}: the server has no completions API; pass --api chat") from None
                self._api = "chat"  # auto: this server speaks chat only
        messages = call.messages
        if messages is None:
            if not isinstance(call.prompt, str):
                raise EndpointError("the server speaks chat only, which takes text: build the engine without a "
                                    "tokenizer (text prompts)")
            system = ({"role": "system", "content": self.system_prompt},) if self.system_prompt else ()
            messages = (*system, {"role": "user", "content": call.prompt})
        try:
            return self._chat(messages, call, sampling)
        except NoRoute as exc:
            raise EndpointError(f"{exc}: the server has neither a completions nor a chat API at "
                                f"{self.config.base_url}") from None

    def _sampling_fields(self, call: _Call, sampling: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.config.model, "max_tokens": call.budget,
                                "temperature": sampling.temperature, "n": call.n}
        if sampling.temperature > 0:
            body["top_p"] = sampling.top_p
            if call.seed is not None:
                body["seed"] = call.seed
            if sampling.top_k:
                body["top_k"] = sampling.top_k  # a vLLM/SGLang extra; OpenAI ignores or refuses it
        return body

    def _completions(self, call: _Call, sampling: SamplingParams) -> list[Completion]:
        body = self._sampling_fields(call, sampling)
        body["prompt"] = list(call.prompt) if isinstance(call.prompt, tuple) else call.prompt
        extras = self.is_vllm
        if extras:  # vLLM's extras (completion/protocol.py): ids and the sampled token's log-prob
            body.update(return_token_ids=True, logprobs=0)
            if self.eos_token_ids:
                body["stop_token_ids"] = list(self.eos_token_ids)
        try:
            answer = self.client.request("POST", f"{self.config.base_url}/completions", body)
        except EndpointError as exc:
            if not (extras and "HTTP 400" in str(exc)):
                raise
            self._vllm = False  # a server that answers /version but refuses vLLM's fields: plain OpenAI from now on
            for key in ("return_token_ids", "logprobs", "stop_token_ids"):
                body.pop(key, None)
            answer = self.client.request("POST", f"{self.config.base_url}/completions", body)
        choices = _choices(answer, call.n)
        out = []
        for choice in choices:
            ids = choice.get("token_ids")
            logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
            if ids is not None and (logprobs is None or len(logprobs) != len(ids) or None in logprobs):
                logprobs = None
            prompt_ids = choice.get("prompt_token_ids") or (call.prompt if isinstance(call.prompt, tuple) else None)
            out.append(self._completion(choice, answer if call.n == 1 else {}, ids, logprobs, prompt_ids, call.budget))
        return out

    def _chat(self, messages: Sequence[Mapping[str, str]], call: _Call, sampling: SamplingParams) -> list[Completion]:
        """``call.n`` answers from the chat API. With tools, the episode's calls go as ``tool_calls`` and the
        server's parsed calls come back as text in the episode's format (one parser for every call). A server
        that refuses ``tools`` with automatic tool choice (vLLM without ``--enable-auto-tool-choice``: HTTP 400)
        is asked with ``tool_choice: "none"`` (the template still shows the tools, the model's text carries its
        calls), and without tools if it refuses that too: then the episode's messages go as the in-process engine
        renders them (calls left in the assistant's text, no ``tool_calls``). What worked is kept for later
        requests."""
        body = self._sampling_fields(call, sampling)
        fmt = call.tool_format if call.tools else None
        plain = [dict(m) for m in messages]
        url = f"{self.config.base_url}/chat/completions"
        if not fmt:
            answer = self.client.request("POST", url, {**body, "messages": plain})
        else:
            wire = to_openai_messages(messages, fmt)
            for mode in range(self._tool_mode, len(_TOOL_MODES)):
                choice_mode = _TOOL_MODES[mode]
                if choice_mode is not None:
                    body.update(messages=wire, tools=[dict(t) for t in call.tools or ()], **choice_mode)
                else:  # no tools: nothing in the request may refer to them
                    body.pop("tools", None)
                    body.pop("tool_choice", None)
                    body["messages"] = plain
                try:
                    answer = self.client.request("POST", url, body)
                    break
                except EndpointError as exc:
                    if "HTTP 400" not in str(exc) or choice_mode is None:
                        raise
                    self._tool_mode = max(self._tool_mode, mode + 1)  # refused: the next mode, from now on
        out = []
        for choice in _choices(answer, call.n):
            message = choice.get("message")
            if not isinstance(message, dict):
                raise EndpointError(f"malformed chat answer: no message in {str(choice)[:120]}")
            text = from_openai_message(message, fmt) if fmt else (message.get("content") or "")
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            out.append(self._completion({**choice, "text": text}, answer if call.n == 1 else {}, None, None, None,
                                        call.budget, reasoning=reasoning if isinstance(reasoning, str) else None))
        return out

    def _completion(self, choice: Mapping[str, Any], answer: Mapping[str, Any], ids: Sequence[int] | None,
                    logprobs: Sequence[float] | None, prompt_ids: Sequence[int] | None, budget: int, *,
                    reasoning: str | None = None) -> Completion:
        text = choice.get("text")
        if not isinstance(text, str):
            raise EndpointError(f"malformed answer: choice has no text ({str(choice)[:120]})")
        usage = answer.get("usage") or {}
        count = len(ids) if ids is not None else usage.get("completion_tokens")
        cut = choice.get("finish_reason") == "length"
        if ids is not None and self.eos_token_ids:  # the in-process convention: an EOS ends it, else the budget
            cut = not (ids and ids[-1] in self.eos_token_ids) and len(ids) >= budget
        if self.config.require_token_ids and (ids is None or logprobs is None):
            raise EndpointError(f"{self.config.base_url} returned no token ids or log-probs for a sample; training "
                                "needs both (serve the model with vLLM)")
        return ServedCompletion(text=text, num_tokens=int(count) if isinstance(count, int) else None,
                                finish_reason="length" if cut else "stop",
                                token_ids=None if ids is None else tuple(int(t) for t in ids),
                                logprobs=None if logprobs is None else tuple(float(x) for x in logprobs),
                                prompt_token_ids=None if prompt_ids is None else tuple(int(t) for t in prompt_ids),
                                weights_version=self.weights_version, reasoning=reasoning, usage=_usage(usage))


def _usage(usage: Any) -> dict[str, int | None] | None:
    """A sample's token counts from an answer's ``usage`` (OpenAI's fields; reasoning tokens from
    ``completion_tokens_details``), or ``None`` when it has none.

    Example:
        >>> _usage({"prompt_tokens": 5, "completion_tokens": 9, "completion_tokens_details": {"reasoning_tokens": 6}})
        {'prompt_tokens': 5, 'completion_tokens': 9, 'reasoning_tokens': 6}
    """
    if not isinstance(usage, dict) or not usage:
        return None
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None

    def count(value: Any) -> int | None:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    return {"prompt_tokens": count(usage.get("prompt_tokens")), "completion_tokens": count(usage.get("completion_tokens")),
            "reasoning_tokens": count(reasoning)}


def _choices(answer: Any, n: int) -> list[Mapping[str, Any]]:
    """The answer's first ``n`` choices in ``index`` order (an answer with fewer is malformed)."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or len(choices) < n or not all(isinstance(c, dict) for c in choices):
        raise EndpointError(f"malformed answer: expected {n} choice(s) in {str(answer)[:120]}")
    return sorted(choices, key=lambda c: c.get("index", 0))[:n]


def _request_seed(seed: int | None, prompt: Any, occurrence: int, sample: int) -> int | None:
    """A 31-bit seed for one request, from the call's seed and what identifies the sample (never its position
    in the call)."""
    if seed is None:
        return None
    digest = hashlib.sha256(json.dumps([seed, str(prompt), occurrence, sample]).encode()).digest()
    return int(np.frombuffer(digest[:4], dtype=np.uint32)[0] >> 1)


def build_openai(model: Any, tokenizer: Any, *, device: Any = None, seed: int = 0, autocast_dtype: Any = None,
                 eos_token_ids: Iterable[int] = (), add_special_tokens: bool = True, base_url: str | None = None,
                 served_model: str | None = None, **config: Any) -> OpenAIEngine:
    """The ``openai`` entry of the engine registry (``make_engine("openai", model, tokenizer, base_url=...)``):
    the trainer's path, so it raises on failed requests and refuses a server without token ids."""
    if not base_url:
        raise ValueError("engine 'openai' needs base_url=... (the server's URL, e.g. http://127.0.0.1:8000/v1)")
    name = served_model or getattr(getattr(model, "config", None), "_name_or_path", None)
    if not name:
        raise ValueError("engine 'openai' needs served_model=... (the model's name on the server)")
    cfg = EndpointConfig(base_url=base_url, model=str(name), on_error="raise", require_token_ids=True, **config)
    return OpenAIEngine(cfg, tokenizer, eos_token_ids=eos_token_ids, add_special_tokens=add_special_tokens)


__all__ = ["APIS", "ENDPOINT_ERROR", "EndpointConfig", "EndpointError", "FailedCompletion", "HTTPClient",
           "OpenAIEngine", "ServedCompletion", "backoff_delay", "build_openai", "endpoint_error"]
