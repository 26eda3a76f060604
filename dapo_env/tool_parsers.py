"""Tool calls in the model's own format: the call type, the parsers and their registry, and the endpoint mapping.

Re-exported by :mod:`dapo_env.tools` (the public face); see its docstring for the rule for where calls are read
(reasoning blocks and, in the non-fenced formats, markdown code fences are never calls) and the statuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dapo_env.types import TOOL_STATUSES, ToolCall, ToolStatus

# --- calls ------------------------------------------------------------------------------------------------
def _invalid(error: str, name: str | None = None) -> ToolCall:
    return ToolCall(name, None, "invalid_json", error)


# --- JSON types ---------------------------------------------------------------------------------------------
def is_json_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True


def json_type_name(value: Any) -> str:
    for kind in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if is_json_type(value, kind):
            return kind
    return type(value).__name__


# --- the rule for where calls are read ----------------------------------------------------------------------
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


def callable_text(text: str, *, fences: bool) -> str:
    """The part of a turn where tool calls are read: without reasoning blocks, and (``fences=True``, every
    format but ``fenced``) without markdown code fences, which quote examples.

    Example:
        >>> callable_text("<think>maybe <tool_call>x</tool_call></think>ok ```\\n<tool_call>\\n```", fences=True)
        'ok '
        >>> callable_text("still thinking</think>now", fences=False)
        'now'
    """
    closer, opener = text.find("</think>"), text.find("<think>")
    if closer >= 0 and (opener < 0 or closer < opener):
        text = text[closer + len("</think>"):]
    text = _THINK.sub("", text)
    return _FENCE.sub("", text) if fences else text


# --- parsers --------------------------------------------------------------------------------------------------
def _decode(text: str) -> tuple[Any, str | None]:
    """``json.loads`` that never raises: ``(value, None)`` or ``(None, error)``."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON ({_json_error(exc)})"


def _json_error(exc: BaseException) -> str:
    return exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__


def _from_object(value: Any, keys: tuple[str, ...], shape: str, call_id: Any = None) -> ToolCall:
    """A call from a decoded JSON value ``{"name": str, <key>: object}`` (the first of ``keys`` present)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return _invalid(f"expected a JSON object {shape}")
    name = value["name"]
    arguments = next((value[k] for k in keys if k in value), {})
    if isinstance(arguments, str):  # arguments as a JSON string (the OpenAI wire form)
        decoded, error = _decode(arguments)
        if error is not None:
            return _invalid(f"the arguments string is {error}", name)
        arguments = decoded
    if not isinstance(arguments, dict):
        return ToolCall(name, None, "bad_arguments", f"arguments must be a JSON object, got {json_type_name(arguments)}")
    return ToolCall(name, arguments, id=call_id if isinstance(call_id, str) else None)


_HERMES = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)
_HERMES_SHAPE = '{"name": <tool name>, "arguments": {...}} between <tool_call> and </tool_call>'


def parse_hermes(text: str) -> list[ToolCall]:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, any number (Qwen2.5/Qwen3/Hermes).

    Example:
        >>> [c.arguments for c in parse_hermes('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')]
        [{'x': 1}]
        >>> parse_hermes('<tool_call>{"name": "f", "arguments": {"x": 1}')[0].status
        'invalid_json'
    """
    calls = []
    for body, closer in _HERMES.findall(callable_text(text, fences=True)):
        if not closer:
            calls.append(_invalid("the call is not closed: write </tool_call> after its JSON"))
            continue
        value, error = _decode(body.strip())
        calls.append(_invalid(f"{error}; expected {_HERMES_SHAPE}") if error else
                     _from_object(value, ("arguments",), _HERMES_SHAPE))
    return calls


_LLAMA_TAG = "<|python_tag|>"
_LLAMA_SHAPE = '{"name": <tool name>, "parameters": {...}}'


def parse_llama3(text: str) -> list[ToolCall]:
    """Llama 3.x JSON calls: the turn (or what follows ``<|python_tag|>``) is ``{"name": ..., "parameters":
    {...}}``, several separated by ``;`` or whitespace. A turn that neither starts with ``{`` nor holds the
    tag makes no call.

    Example:
        >>> parse_llama3('{"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {}}')[1].name
        'g'
        >>> parse_llama3("The answer is 4."), parse_llama3('{"name": "f", "parameters": ')[0].status
        ([], 'invalid_json')
    """
    body = callable_text(text, fences=True)
    at = body.find(_LLAMA_TAG)
    if at >= 0:
        body = body[at + len(_LLAMA_TAG):]
    elif not body.lstrip().startswith("{"):
        return []
    return _json_sequence(body, ("parameters", "arguments"), _LLAMA_SHAPE)


def _json_sequence(body: str, keys: tuple[str, ...], shape: str) -> list[ToolCall]:
    decoder, calls, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(body) and (body[i].isspace() or body[i] == ";"):
            i += 1
        if i >= len(body):
            return calls
        try:
            value, i = decoder.raw_decode(body, i)
        except (ValueError, RecursionError) as exc:
            return calls + [_invalid(f"not valid JSON ({_json_error(exc)}); expected {shape}")]
        calls.append(_from_object(value, keys, shape))


_MISTRAL_TAG = "[TOOL_CALLS]"
_MISTRAL_SHAPE = '[TOOL_CALLS] followed by a list [{"name": <tool name>, "arguments": {...}}]'
_MISTRAL_NAMED = re.compile(r"(\w+)\[ARGS\]")


def parse_mistral(text: str) -> list[ToolCall]:
    """``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (Mistral; a single object, and the newer
    ``[TOOL_CALLS]name[ARGS]{...}`` form, are read too).

    Example:
        >>> [c.name for c in parse_mistral('[TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]')]
        ['f', 'g']
        >>> parse_mistral('[TOOL_CALLS]f[ARGS]{"x": 2}')[0].arguments
        {'x': 2}
    """
    calls: list[ToolCall] = []
    decoder = json.JSONDecoder()
    for part in callable_text(text, fences=True).split(_MISTRAL_TAG)[1:]:
        part = part.lstrip()
        named = _MISTRAL_NAMED.match(part)
        start = named.end() if named else 0
        try:
            value, _ = decoder.raw_decode(part, start)
        except (ValueError, RecursionError) as exc:
            calls.append(_invalid(f"not valid JSON ({_json_error(exc)}); expected {_MISTRAL_SHAPE}",
                                  named.group(1) if named else None))
            continue
        if named:
            value = {"name": named.group(1), "arguments": value}
        items = value if isinstance(value, list) else [value]
        if not items:
            calls.append(_invalid(f"an empty list of calls; expected {_MISTRAL_SHAPE}"))
        calls += [_from_object(item, ("arguments",), _MISTRAL_SHAPE, item.get("id") if isinstance(item, dict) else None)
                  for item in items]
    return calls


def parse_fenced(text: str) -> list[ToolCall]:
    """The turn's last complete ```` ```python ```` block (outside reasoning) as one call of the task's code tool:
    ``name`` is ``None`` (the task names it) and the code is the ``code`` argument.

    Example:
        >>> parse_fenced("Let me check.\\n```python\\nprint(2 + 2)\\n```")[0].arguments
        {'code': 'print(2 + 2)'}
    """
    from dapo_env.verifiers.code import extract_code

    code = extract_code(callable_text(text, fences=False), require_fence=True)
    return [] if code is None else [ToolCall(None, {"code": code})]


def _render_hermes(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': dict(a)}, ensure_ascii=False)}\n</tool_call>"
                     for n, a in calls)


def _render_llama3(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    return "; ".join(json.dumps({"name": n, "parameters": dict(a)}, ensure_ascii=False) for n, a in calls)


def _render_mistral(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    return _MISTRAL_TAG + json.dumps([{"name": n, "arguments": dict(a)} for n, a in calls], ensure_ascii=False)


def _render_fenced(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    if len(calls) != 1 or set(calls[0][1]) != {"code"}:
        raise ValueError("the fenced format writes one call with a single 'code' argument per turn")
    return f"```python\n{calls[0][1]['code']}\n```"


@dataclass(frozen=True)
class ToolParser:
    """A registered tool-call format: how to read calls, how to write them, and how to recognise it.

    Attributes:
        name: the format's name (``tool_format=``).
        parse: ``text -> list[ToolCall]``: pure, never raises.
        render: ``[(name, arguments), ...] -> text``: how a model in this format writes those calls (what a
            scripted policy writes, and how the TRL adapter plays a call as a turn).
        markers: strings whose presence in a chat template's source selects this format for ``"auto"``.
    """

    name: str
    parse: Callable[[str], list[ToolCall]]
    render: Callable[[Sequence[tuple[str, Mapping[str, Any]]]], str]
    markers: tuple[str, ...] = ()


TOOL_PARSERS: dict[str, ToolParser] = {}


def register_tool_parser(name: str, parse: Callable[[str], list[ToolCall]],
                         render: Callable[[Sequence[tuple[str, Mapping[str, Any]]]], str], *,
                         markers: Sequence[str] = ()) -> ToolParser:
    """Add a tool-call format (a duplicate name raises). ``markers``: template text that makes ``"auto"`` pick it.

    Example:
        >>> sorted(TOOL_PARSERS)
        ['fenced', 'hermes', 'llama3', 'mistral']
    """
    if not isinstance(name, str) or not name or name == "auto":
        raise ValueError(f"a tool format's name must be a non-empty string other than 'auto', got {name!r}")
    if name in TOOL_PARSERS:
        raise ValueError(f"tool format {name!r} is already registered")
    parser = ToolParser(name, parse, render, tuple(markers))
    TOOL_PARSERS[name] = parser
    return parser


def get_tool_parser(name: str) -> ToolParser:
    """The registered format ``name`` (unknown names raise listing the known ones)."""
    try:
        return TOOL_PARSERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown tool format {name!r}; known: {sorted(TOOL_PARSERS)} (or 'auto')") from None


register_tool_parser("mistral", parse_mistral, _render_mistral, markers=(_MISTRAL_TAG,))
register_tool_parser("hermes", parse_hermes, _render_hermes, markers=("<tool_call>",))
register_tool_parser("llama3", parse_llama3, _render_llama3, markers=(_LLAMA_TAG, '"parameters": ', "ipython"))
register_tool_parser("fenced", parse_fenced, _render_fenced)


def detect_tool_format(chat_template: str | None, default: str) -> str:
    """The format ``"auto"`` picks for a chat template's source: the first registered format whose marker it
    holds (``mistral``, ``hermes``, ``llama3`` among the built-ins), else ``default``.

    Example:
        >>> detect_tool_format("{{ '<tool_call>' }}", "fenced"), detect_tool_format(None, "fenced")
        ('hermes', 'fenced')
    """
    if isinstance(chat_template, str):
        for parser in TOOL_PARSERS.values():
            if any(marker in chat_template for marker in parser.markers):
                return parser.name
    return default


def parse_tool_calls(text: str, tool_format: str) -> list[ToolCall]:
    """Every call attempted in ``text`` in the format ``tool_format``, in order; never raises on any text."""
    parser = get_tool_parser(tool_format)
    if not isinstance(text, str):
        return []
    try:
        return list(parser.parse(text))
    except Exception as exc:  # a user-registered parser that broke: the rollout goes on
        return [_invalid(f"the {tool_format} parser failed ({type(exc).__name__})")]


def format_tool_call(tool_format: str, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """How a model in ``tool_format`` writes ``calls`` (``[(name, arguments), ...]``).

    Example:
        >>> format_tool_call("llama3", [("lookup", {"key": "a"})])
        '{"name": "lookup", "parameters": {"key": "a"}}'
    """
    return get_tool_parser(tool_format).render(list(calls))


def from_openai_tool_calls(tool_calls: Any) -> list[ToolCall]:
    """A chat-completions response's ``message.tool_calls`` (``[{"id", "type": "function", "function": {"name",
    "arguments": "<json string>"}}]``) as the same :class:`ToolCall` objects and statuses the parsers give, so
    evaluation through a server reads calls as training does. Never raises.

    Example:
        >>> calls = from_openai_tool_calls([{"id": "c1", "type": "function",
        ...                                  "function": {"name": "lookup", "arguments": '{"key": "a"}'}},
        ...                                 {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{"}}])
        >>> [(c.id, c.status, c.arguments) for c in calls]
        [('c1', 'ok', {'key': 'a'}), ('c2', 'invalid_json', None)]
    """
    if not isinstance(tool_calls, (list, tuple)):
        return []
    calls = []
    for item in tool_calls:
        function = item.get("function") if isinstance(item, Mapping) else None
        if not isinstance(function, Mapping):
            calls.append(_invalid("a tool call without a 'function' object"))
            continue
        shape = '{"function": {"name": <tool name>, "arguments": "<JSON object>"}}'
        call = _from_object(dict(function), ("arguments",), shape, item.get("id"))
        calls.append(replace(call, id=item.get("id") if isinstance(item.get("id"), str) else None))
    return calls


# --- the OpenAI chat wire form ------------------------------------------------------------------------------------
def to_openai_messages(messages: Sequence[Mapping[str, Any]], tool_format: str) -> list[dict[str, Any]]:
    """An episode's chat messages as an OpenAI-spec chat server takes them with ``tools=``.

    An assistant message whose text holds calls in ``tool_format`` becomes ``{"role": "assistant", "content":
    None, "tool_calls": [...]}`` (ids ``call_<message>_<k>``; a call whose arguments could not be read is sent
    with ``{}``), and the ``tool`` messages that follow it get the ``tool_call_id`` of the call they answer, in
    order. The assistant's text around its calls (a reasoning block, say) is not sent: servers render
    ``tool_calls`` themselves, and most templates drop earlier turns' reasoning. Other messages pass as they are.

    Example:
        >>> msgs = to_openai_messages([{"role": "user", "content": "Key a."},
        ...                            {"role": "assistant", "content": '{"name": "lookup", "parameters": {"key": "a"}}'},
        ...                            {"role": "tool", "content": "3"}], "llama3")
        >>> msgs[1]["tool_calls"][0]["function"], msgs[2]["tool_call_id"] == msgs[1]["tool_calls"][0]["id"]
        ({'name': 'lookup', 'arguments': '{"key": "a"}'}, True)
    """
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of the last assistant message's calls not yet answered
    for i, message in enumerate(messages):
        message = dict(message)
        role, content = message.get("role"), message.get("content")
        if role == "assistant" and isinstance(content, str):
            calls = [c for c in parse_tool_calls(content, tool_format) if c.name is not None]
            if calls:
                pending = [f"call_{i}_{k}" for k in range(len(calls))]
                message = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments or {}, ensure_ascii=False)}}
                    for call_id, c in zip(pending, calls)]}
            else:
                pending = []
        elif role == "tool":
            if pending:
                message["tool_call_id"] = pending.pop(0)
            else:  # an answer to a call the server could not be shown (unreadable): plain feedback
                message["role"] = "user"
        out.append(message)
    return out


_RAW = "__dapo_raw_arguments_{}__"


def from_openai_message(message: Mapping[str, Any], tool_format: str) -> str:
    """A chat answer's ``message`` as the text a model in ``tool_format`` writes: its ``content``, then each of
    its ``tool_calls`` written in the format, so the same parser reads them with the same statuses as in
    training. Arguments that are not a JSON object are written as the server sent them (the parser then reports
    ``invalid_json`` or ``bad_arguments``). Never raises.

    Example:
        >>> text = from_openai_message({"content": None, "tool_calls": [
        ...     {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "a"}'}},
        ...     {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"key": '}}]}, "hermes")
        >>> [(c.name, c.status) for c in parse_tool_calls(text, "hermes")]
        [('lookup', 'ok'), (None, 'invalid_json')]
    """
    content = message.get("content") if isinstance(message, Mapping) else None
    text = content if isinstance(content, str) else ""
    items = message.get("tool_calls") if isinstance(message, Mapping) else None
    if not isinstance(items, (list, tuple)) or not items:
        return text
    calls, raws = [], {}
    for k, (item, call) in enumerate(zip(items, from_openai_tool_calls(items))):
        if call.status == "ok" and call.arguments is not None:
            calls.append((call.name or "", call.arguments))
            continue
        function = item.get("function") if isinstance(item, Mapping) else None
        raw = function.get("arguments") if isinstance(function, Mapping) else None
        key = _RAW.format(k)
        raws[json.dumps({key: 0})] = raw if isinstance(raw, str) else json.dumps(raw)
        calls.append((call.name or "", {key: 0}))
    try:
        rendered = format_tool_call(tool_format, calls)
    except Exception:  # a format that cannot write these calls (fenced: one code argument): the text alone
        return text
    for placeholder, raw in raws.items():
        rendered = rendered.replace(placeholder, raw)
    return f"{text}\n{rendered}" if text.strip() else rendered


__all__ = ["TOOL_PARSERS", "TOOL_STATUSES", "ToolCall", "ToolParser", "ToolStatus", "callable_text",
           "detect_tool_format", "format_tool_call", "from_openai_message", "from_openai_tool_calls", "get_tool_parser", "parse_fenced",
           "parse_hermes", "parse_llama3", "parse_mistral", "parse_tool_calls", "register_tool_parser", "to_openai_messages"]
