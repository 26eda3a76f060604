"""Tools as typed Python functions, tool calls in the model's own format, and what became of every call.

A tool is a function with type hints and a Google docstring (:func:`tool`); its :class:`~dapo_env.types.ToolSpec`
(name, description, parameters' JSON schema) is derived once and rendered through the chat template's
``tools=`` argument, so the model sees tools the way it was trained to. The model answers in its own
format, read by a registered parser (:func:`register_tool_parser`; the parsers live in
:mod:`dapo_env.tool_parsers` and are re-exported here): ``hermes`` (``<tool_call>{json}</tool_call>``:
Qwen2.5/Qwen3/Hermes), ``llama3`` (a JSON object with ``name`` and ``parameters``, optionally after
``<|python_tag|>``), ``mistral`` (``[TOOL_CALLS]`` and a JSON list) and ``fenced`` (the last ```` ```python ````
block: the code tasks' original protocol). Parsers are pure functions of the text and never raise.

**Where calls are read (one rule, every format).** Text inside a reasoning block (``<think>...</think>``;
an unclosed ``<think>`` runs to the end; text before a ``</think>`` that has no opener is reasoning too) is
never a call. For the formats that are not ``fenced``, text inside a markdown code fence (```` ``` ````
to ```` ``` ````, an unclosed fence to the end) is a quoted example, never a call. Everything else is read.

**Every attempted call gets a status** (:data:`TOOL_STATUSES`): ``invalid_json`` (the call's text does not
decode to ``{"name": str, "arguments": object}``), ``unknown_tool``, ``bad_arguments`` (checked against the
JSON schema: required keys, types, no extra keys), ``tool_error`` (the tool raised) or ``ok``. A failed call is
answered with a tool message saying what was wrong (:func:`call_tools`).

Example:
    >>> def lookup(key: str) -> str:
    ...     '''Look a key up in the table.
    ...
    ...     Args:
    ...         key: the row's key
    ...     '''
    ...     return {"apple": "7"}.get(key, "no such key")
    >>> tools = (tool(lookup),)
    >>> calls = parse_tool_calls('<tool_call>\\n{"name": "lookup", "arguments": {"key": "apple"}}\\n</tool_call>', "hermes")
    >>> [(c.name, c.status, c.result) for c in call_tools(calls, tools)]
    [('lookup', 'ok', '7')]
    >>> [(c.status, c.error) for c in call_tools(parse_tool_calls('<tool_call>{"name": "lookup"}</tool_call>', "hermes"), tools)]
    [('bad_arguments', "missing required argument 'key'")]
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from dapo_env.types import Completion, History, Interaction, Problem, ToolSpec, Turn, VerifyResult
from dapo_env.tool_parsers import (TOOL_PARSERS, TOOL_STATUSES, ToolCall, ToolParser, is_json_type,
                                   json_type_name, callable_text, detect_tool_format, format_tool_call,
                                   from_openai_message, from_openai_tool_calls, get_tool_parser, parse_fenced,
                                   parse_hermes, parse_llama3, parse_mistral, parse_tool_calls, register_tool_parser,
                                   to_openai_messages)

_INJECTED = "problem"  # a tool parameter of this name receives the episode's Problem (not shown to the model)


# --- tools ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    """A function the model can call, and its spec.

    Build it with :func:`tool`. Calling ``tool.run(arguments, problem)`` calls the function with the arguments
    (already validated) and, when the function has a ``problem`` parameter, the episode's
    :class:`~dapo_env.types.Problem` (hidden from the model: how a tool reads per-problem state such as a
    hidden table or the problem's tests). The result is turned into a string with ``str``.
    """

    spec: ToolSpec
    function: Callable[..., Any] = field(compare=False)
    takes_problem: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    def run(self, arguments: Mapping[str, Any], problem: Problem | None = None) -> str:
        extra = {_INJECTED: problem} if self.takes_problem else {}
        return str(self.function(**arguments, **extra))


def tool(function: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         parameters: Mapping[str, Any] | None = None) -> Any:
    """A :class:`Tool` from a typed function (usable as ``@tool`` or ``tool(fn, name=...)``).

    The spec is derived once: ``name`` defaults to the function's name, ``description`` to its docstring's
    text before ``Args:``, and ``parameters`` to a JSON schema from the type hints (``str``, ``int``,
    ``float``, ``bool``, ``list[...]``, ``dict``, ``Literal[...]``, ``X | None``) with each parameter's
    description from the docstring's ``Args:`` section; parameters without a default are required. Pass
    ``parameters=`` (a JSON schema) to give the schema explicitly. A parameter named ``problem`` receives the
    episode's problem and is not shown to the model.

    Example:
        >>> @tool
        ... def add(a: int, b: int = 0) -> int:
        ...     '''Add two integers.
        ...
        ...     Args:
        ...         a: the first
        ...         b: the second
        ...     '''
        ...     return a + b
        >>> add.spec.parameters["required"], add.spec.parameters["properties"]["b"]
        (['a'], {'type': 'integer', 'description': 'the second'})
        >>> add.run({"a": 2, "b": 3})
        '5'
    """
    if function is None:
        return lambda f: tool(f, name=name, description=description, parameters=parameters)
    if not callable(function):
        raise TypeError(f"tool() takes a function, got {type(function).__name__}")
    signature = inspect.signature(function)
    takes_problem = _INJECTED in signature.parameters
    text, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
    if parameters is None:
        parameters = _parameters_schema(function, signature, arg_docs)
    spec = ToolSpec(name or function.__name__, text if description is None else description, parameters)
    return Tool(spec, function, takes_problem)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """A Google docstring's text before its sections, and its ``Args:`` descriptions by name (an entry is
    ``name: text`` or ``name (type): text``; deeper-indented lines continue it)."""
    sections = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Example|Examples|Yields|Note):\s*$")
    entry_re = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
    head: list[str] = []
    args: dict[str, str] = {}
    current, section, entry_indent = None, None, None
    for line in doc.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent == 0 and sections.match(line.strip()):
            section, current, entry_indent = sections.match(line.strip()).group(1), None, None  # type: ignore[union-attr]
            continue
        if section is None:
            head.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            entry = entry_re.match(line.strip())
            if entry and (entry_indent is None or indent <= entry_indent):
                entry_indent = indent if entry_indent is None else entry_indent
                current = entry.group(1)
                args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(head).strip(), args


def _parameters_schema(function: Callable[..., Any], signature: inspect.Signature,
                       docs: Mapping[str, str]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(function)
    except Exception as exc:  # unresolvable annotations: say which function
        raise TypeError(f"tool {function.__name__}: its type hints do not resolve ({exc})") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, parameter in signature.parameters.items():
        if pname in ("self", _INJECTED):
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"tool {function.__name__}: *{pname} cannot be described to a model; name each parameter")
        if pname not in hints:
            raise TypeError(f"tool {function.__name__}: parameter {pname!r} needs a type hint (str, int, float, ...)")
        schema = _type_schema(hints[pname], f"{function.__name__}({pname})")
        if pname in docs:
            schema["description"] = docs[pname]
        properties[pname] = schema
        if parameter.default is inspect.Parameter.empty:
            required.append(pname)
    return {"type": "object", "properties": properties, "required": required}


_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _type_schema(hint: Any, where: str) -> dict[str, Any]:
    """The JSON schema of one type hint."""
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        kinds = {_SCALARS[type(a)] for a in args if type(a) in _SCALARS}
        return {"type": kinds.pop() if len(kinds) == 1 else sorted(kinds), "enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        schema = _type_schema(inner[0], where) if len(inner) == 1 else {"anyOf": [_type_schema(a, where) for a in inner]}
        if len(inner) < len(args):
            schema["nullable"] = True
        return schema
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        return {"type": "array", **({"items": _type_schema(args[0], where)} if args else {})}
    if origin in (dict, Mapping) or hint is dict:
        return {"type": "object"}
    if hint is Any:
        return {}
    raise TypeError(f"tool {where}: no JSON schema for the type {hint!r}; use str, int, float, bool, list, dict, "
                    "Literal or a union with None, or pass parameters= explicitly")


# --- argument validation -------------------------------------------------------------------------------------
def _check_value(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    if value is None and schema.get("nullable"):
        return None
    if "anyOf" in schema:
        if all(_check_value(value, option, path) is not None for option in schema["anyOf"]):
            return f"{path} does not match any of its allowed types"
        return None
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if kinds and not any(is_json_type(value, k) for k in kinds):
        return f"{path} must be of type {' or '.join(kinds)}, got {json_type_name(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {json.dumps(schema['enum'])}, got {json.dumps(value)[:60]}"
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            error = _check_value(item, schema["items"], f"{path}[{i}]")
            if error:
                return error
    if isinstance(value, dict) and "properties" in schema:
        return _check_object(value, schema, path)
    return None


def _check_object(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> str | None:
    properties = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            return f"missing required argument {key!r}" if path == "arguments" else f"{path} misses {key!r}"
    extra = sorted(str(k) for k in value if k not in properties)
    if extra and schema.get("additionalProperties", False) is False:
        return (f"unexpected argument{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))[:200]} "
                f"(allowed: {', '.join(map(repr, properties)) or 'none'})")
    for key, item in value.items():
        if key in properties:
            error = _check_value(item, properties[key], f"argument {key!r}" if path == "arguments" else f"{path}.{key}")
            if error:
                return error
    return None


def validate_arguments(arguments: Any, spec: ToolSpec) -> str | None:
    """What is wrong with ``arguments`` for the tool ``spec`` (``None``: nothing): an object with every
    required key, no key the schema does not define, each value of its declared type.

    Example:
        >>> spec = ToolSpec("f", "", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
        >>> validate_arguments({"n": 2}, spec) is None, validate_arguments({"n": "2"}, spec)
        (True, "argument 'n' must be of type integer, got string")
        >>> validate_arguments({"n": 2, "m": 1}, spec)
        "unexpected argument 'm' (allowed: 'n')"
    """
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {json_type_name(arguments)}"
    return _check_object(arguments, spec.parameters, "arguments")


# --- running calls -----------------------------------------------------------------------------------------
def call_tools(calls: Sequence[ToolCall], tools: Sequence[Tool], problem: Problem | None = None, *,
               run: bool = True) -> list[ToolCall]:
    """Settle each parsed call in order: unknown tools, bad arguments, then run the rest (a tool that raises
    is a ``tool_error``; ``run=False`` checks only). Returns the calls with status, error and result; never
    raises.

    Example:
        >>> @tool
        ... def half(n: int) -> float:
        ...     '''Half of n.
        ...
        ...     Args:
        ...         n: an even integer
        ...     '''
        ...     if n % 2:
        ...         raise ValueError("n must be even")
        ...     return n // 2
        >>> [(c.status, c.message) for c in call_tools([ToolCall("half", {"n": 3}), ToolCall("double", {})], [half])]
        [('tool_error', 'Error (tool_error): ValueError: n must be even'), ('unknown_tool', "Error (unknown_tool): no tool named 'double'; the tools are: half")]
    """
    by_name = {t.name: t for t in tools}
    return [_settle(call, by_name, problem, run) for call in calls]


def _settle(call: ToolCall, by_name: Mapping[str, Tool], problem: Problem | None, run: bool = True) -> ToolCall:
    if call.status != "ok" and call.status != "bad_arguments":
        return call
    if call.name not in by_name:
        return replace(call, status="unknown_tool",
                       error=f"no tool named {str(call.name)[:80]!r}; the tools are: {', '.join(by_name) or 'none'}")
    if call.status == "bad_arguments":
        return call
    error = validate_arguments(call.arguments, by_name[call.name].spec)
    if error is not None:
        return replace(call, status="bad_arguments", error=error)
    if not run:
        return call
    try:
        result = by_name[call.name].run(call.arguments or {}, problem)
    except Exception as exc:
        return replace(call, status="tool_error", error=f"{type(exc).__name__}: {exc}"[:500])
    return replace(call, result=result)


# --- the interaction of a tool task -------------------------------------------------------------------------
TOOL_FORMAT_KNOB = "tool_format"


@dataclass(frozen=True, kw_only=True)
class ToolUse:
    """The interaction of a tool task: run the calls of each turn in the problem's tool format, or grade the
    final answer.

    The format is the problem's ``tool_format`` (a load knob; ``default_format`` without one; ``"auto"`` is
    resolved by the episode from the chat template, :meth:`resolve_format`). In a native format (``hermes``,
    ``llama3``, ``mistral``, or ``fenced`` without a ``fenced`` interaction) a turn that attempts at least one
    call is a tool turn: every call is settled in order (:func:`call_tools`) and answered by its own tool
    message (role ``"tool"``; a failed call's message says what was wrong), reward 0. A turn without a call is
    the final answer: the task's verdict decides (reward ``1 - attempt_penalty * tool turns`` when correct,
    ``attempt_penalty`` from the problem's metadata, default 0; else 0) and the episode ends. At most
    ``metadata[budget_knob]`` tool turns (``max_tool_calls`` without that knob): a tool turn after them ends
    the episode unsolved (its calls are checked, not run). In the ``fenced`` format with a ``fenced`` interaction, turns are answered by it (the
    task's original protocol) and a turn it ran code for reports one call of ``fenced_tool``.

    ``Turn.tool_calls``: every attempted call, typed, each with its status (empty for none); step infos report
    them as dicts (:meth:`ToolCall.to_dict`).

    Args:
        tools: the tools the model may call.
        fenced: the interaction that answers turns in the ``fenced`` format (``None``: the native rules, with
            the code block as a call of ``fenced_tool``).
        fenced_tool: the tool a ```` ```python ```` block calls (takes ``code: str``); ``None``: no fenced format.
        default_format: the format without a ``tool_format`` knob, and what ``"auto"`` falls back to.
        budget_knob: the problem metadata key holding the number of tool turns allowed.
        max_tool_calls: the tool turns allowed when a problem's metadata has no ``budget_knob``.

    Example:
        >>> @tool
        ... def lookup(key: str, problem: Problem) -> str:
        ...     '''Look a key up in the hidden table.
        ...
        ...     Args:
        ...         key: the row's key
        ...     '''
        ...     return problem.metadata["table"].get(key, "no such key")
        >>> use = ToolUse(tools=(lookup,))
        >>> problem = Problem("0", "What is b?", "2", {"table": {"b": "2"}, "max_tool_calls": 2, "tool_format": "hermes"})
        >>> history = History(problem, ({"role": "user", "content": "What is b?"},))
        >>> call = format_tool_call("hermes", [("lookup", {"key": "b"}), ("lookup", {"key": "z"})])
        >>> turn = use.respond(history, Completion(call), VerifyResult(False, 0.0, None, "no_answer"))
        >>> turn.reply, turn.role, [c.status for c in turn.tool_calls]
        ('2\\n\\nno such key', 'tool', ['ok', 'ok'])
    """

    tools: tuple[Tool, ...]
    fenced: Interaction | None = None
    fenced_tool: str | None = None
    default_format: str = "hermes"
    budget_knob: str = "max_tool_calls"
    max_tool_calls: int = 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(self.tools))
        if not self.tools or not all(isinstance(t, Tool) for t in self.tools):
            raise TypeError("ToolUse.tools must hold at least one Tool (build each with dapo_env.tools.tool(fn))")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"ToolUse.tools has duplicate names: {names}")
        if self.fenced_tool is not None and self.fenced_tool not in names:
            raise ValueError(f"fenced_tool={self.fenced_tool!r} is not one of the tools {names}")
        if self.fenced is not None and self.fenced_tool is None:
            raise ValueError("a fenced interaction needs fenced_tool= (the tool a ```python block calls)")
        self.check_format(self.default_format)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools' specs (what the chat template renders)."""
        return tuple(t.spec for t in self.tools)

    @property
    def formats(self) -> tuple[str, ...]:
        """The formats this task can be played in (``fenced`` only with a fenced tool)."""
        return tuple(f for f in TOOL_PARSERS if f != "fenced" or self.fenced_tool is not None)

    def check_format(self, tool_format: str) -> str:
        """``tool_format`` if the task can be played in it (or ``"auto"``), else a ValueError naming the choices."""
        if tool_format != "auto" and tool_format not in self.formats:
            raise ValueError(f"tool_format={tool_format!r} is not available here; choose one of "
                             f"{['auto', *self.formats]}")
        return tool_format

    def resolve_format(self, problem: Problem, chat_template: str | None) -> str:
        """The problem's format, with ``"auto"`` read from the chat template's source (``default_format``
        when it names no known format)."""
        chosen = problem.metadata.get(TOOL_FORMAT_KNOB, self.default_format)
        if chosen != "auto":
            return chosen
        detected = detect_tool_format(chat_template, self.default_format)
        return detected if detected in self.formats else self.default_format

    def respond(self, history: History, action: Completion, verdict: VerifyResult) -> Turn:
        problem = history.problem
        tool_format = self.resolve_format(problem, None)
        if tool_format == "fenced" and self.fenced is not None:
            return self._fenced_turn(history, action, verdict)
        calls = parse_tool_calls(action.text, tool_format)
        if tool_format == "fenced":
            calls = [replace(c, name=self.fenced_tool) for c in calls]
        used, allowed = history.turn, int(problem.metadata.get(self.budget_knob, self.max_tool_calls))
        if not calls:
            penalty = float(problem.metadata.get("attempt_penalty", 0.0))
            reward = 1.0 - penalty * used if verdict.correct else 0.0
            return Turn("Final answer recorded.", reward, done=True, solved=bool(verdict.correct),
                        info={"action": "answer"})
        if used >= allowed:
            checked = call_tools(calls, self.tools, problem, run=False)
            return Turn("No tool calls left: the episode is over.", 0.0, done=True, role="tool",
                        info={"action": "tools", "tool_calls_left": 0}, tool_calls=tuple(checked))
        settled = call_tools(calls, self.tools, problem)
        return Turn("\n\n".join(c.message for c in settled), 0.0, role="tool",
                    info={"action": "tools", "tool_calls_left": allowed - used - 1}, tool_calls=tuple(settled))

    def _fenced_turn(self, history: History, action: Completion, verdict: VerifyResult) -> Turn:
        turn = self.fenced.respond(history, action, verdict)  # type: ignore[union-attr]
        calls: tuple[ToolCall, ...] = ()
        if turn.info.get("action") == "code":
            parsed = parse_fenced(action.text)
            arguments = parsed[0].arguments if parsed else None
            calls = (ToolCall(self.fenced_tool, arguments, result=turn.reply),)
        return replace(turn, tool_calls=calls)


def tool_messages(turn: Turn) -> list[dict[str, str]]:
    """The chat messages that answer ``turn``: one ``tool`` message per call when the turn's role is
    ``"tool"`` and it lists its calls, else the one reply message.

    Example:
        >>> turn = Turn("7\\n\\nno such key", role="tool", tool_calls=(ToolCall("f", {}, result="7"),
        ...                                                     ToolCall("f", {}, result="no such key")))
        >>> [m["content"] for m in tool_messages(turn)]
        ['7', 'no such key']
    """
    if turn.role == "tool" and turn.tool_calls:
        return [{"role": "tool", "content": call.message} for call in turn.tool_calls]
    return [{"role": turn.role, "content": turn.reply}]


# --- tool use as a metric ---------------------------------------------------------------------------------------
def tool_use_stats(infos: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Tool use over a batch of episodes: each info is one episode's, with ``tool_calls`` (every call it
    attempted, as :meth:`ToolCall.to_dict` dicts; infos without the key are not tool episodes and are skipped).

    Returns ``tool/calls_per_episode`` (mean attempted calls), ``tool/no_call_share`` (episodes without any
    call), ``tool/failed_share`` (failed calls / attempted calls) and ``tool/<status>_share`` for each failure
    status (share of attempted calls), ``tool/tool_errors`` (count of ``tool_error`` calls). All 0.0 for no
    episodes; the shares of calls are 0.0 when no call was attempted.

    Example:
        >>> stats = tool_use_stats([{"tool_calls": [{"status": "ok"}, {"status": "invalid_json"}]}, {"tool_calls": []}])
        >>> stats["tool/calls_per_episode"], stats["tool/no_call_share"], stats["tool/invalid_json_share"]
        (1.0, 0.5, 0.5)
    """
    return tool_status_stats([[str(call.get("status")) for call in info["tool_calls"]]
                              for info in infos if info.get("tool_calls") is not None])


def tool_status_stats(episodes: Sequence[Sequence[str]]) -> dict[str, float]:
    """:func:`tool_use_stats` from each episode's call statuses (its pure core: the episode group env passes the
    typed calls' statuses, :func:`tool_use_stats` the statuses of info dicts).

    Example:
        >>> tool_status_stats([["ok", "tool_error"], []])["tool/failed_share"]
        0.5
    """
    statuses = [status for calls in episodes for status in calls]
    n_calls = len(statuses)
    stats = {"tool/calls_per_episode": n_calls / len(episodes) if episodes else 0.0,
             "tool/no_call_share": sum(not calls for calls in episodes) / len(episodes) if episodes else 0.0,
             "tool/failed_share": sum(s != "ok" for s in statuses) / n_calls if n_calls else 0.0,
             "tool/tool_errors": float(statuses.count("tool_error"))}
    for status in TOOL_STATUSES[1:]:
        stats[f"tool/{status}_share"] = statuses.count(status) / n_calls if n_calls else 0.0
    return stats


__all__ = ["TOOL_PARSERS", "TOOL_STATUSES", "Tool", "ToolCall", "ToolParser", "ToolSpec", "ToolUse", "call_tools",
           "callable_text", "detect_tool_format", "format_tool_call", "from_openai_message", "from_openai_tool_calls",
           "get_tool_parser", "parse_fenced", "parse_hermes", "parse_llama3", "parse_mistral", "parse_tool_calls",
           "register_tool_parser", "to_openai_messages", "tool", "tool_messages", "tool_status_stats", "tool_use_stats", "validate_arguments"]
