"""Tools as typed functions, the four call parsers, argument validation, statuses, the endpoint mapping and the
tool-use metrics: tables of (text, expected calls), hypothesis for "no text crashes a parser", hand-worked stats."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.tools import (TOOL_PARSERS, TOOL_STATUSES, ToolCall, call_tools, callable_text, detect_tool_format,
                            format_tool_call, from_openai_tool_calls, get_tool_parser, parse_tool_calls,
                            register_tool_parser, tool, tool_use_stats, validate_arguments)
from dapo_env.types import Problem, ToolSpec

FORMATS = ("hermes", "llama3", "mistral")


def lookup(key: str, problem: Problem) -> str:
    """Look a key up.

    Args:
        key: the key
    """
    return problem.metadata["table"].get(key, "missing")


def scale(x: float, times: int = 2, unit: Literal["m", "km"] = "m", tags: list[str] | None = None) -> str:
    """Scale a length.

    Args:
        x: the length
        times (int): how many times
            note: a continuation line
        unit: its unit
        tags: labels
    """
    if times < 0:
        raise ValueError("times must be >= 0")
    return f"{x * times}{unit}"


TOOLS = (tool(lookup), tool(scale))
PROBLEM = Problem("0", "q", "1", {"table": {"a": "1"}})


def test_spec_is_derived_from_hints_and_docstring() -> None:
    spec = tool(scale).spec
    assert spec.name == "scale" and spec.description == "Scale a length."
    assert spec.parameters == {
        "type": "object", "required": ["x"],
        "properties": {"x": {"type": "number", "description": "the length"},
                       "times": {"type": "integer", "description": "how many times note: a continuation line"},
                       "unit": {"type": "string", "enum": ["m", "km"], "description": "its unit"},
                       "tags": {"type": "array", "items": {"type": "string"}, "nullable": True,
                                "description": "labels"}}}
    assert tool(lookup).spec.parameters["properties"] == {"key": {"type": "string", "description": "the key"}}
    assert tool(lookup).takes_problem and not tool(scale).takes_problem


def test_spec_matches_transformers_schema_for_plain_types() -> None:
    from transformers.utils import get_json_schema

    def add(a: int, b: float, name: str, flag: bool) -> str:
        """Add things.

        Args:
            a: first
            b: second
            name: a name
            flag: a flag
        """
        return ""

    ours, theirs = tool(add).spec.to_openai()["function"], get_json_schema(add)["function"]
    assert ours["name"] == theirs["name"] and ours["description"] == theirs["description"]
    assert ours["parameters"]["properties"] == theirs["parameters"]["properties"]
    assert ours["parameters"]["required"] == theirs["parameters"]["required"]


def test_explicit_schema_and_bad_functions() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    t = tool(lambda q: q.upper(), name="shout", description="Shout.", parameters=schema)
    assert t.spec == ToolSpec("shout", "Shout.", schema) and t.run({"q": "hi"}) == "HI"
    with pytest.raises(TypeError, match="needs a type hint"):
        tool(lambda q: q)
    with pytest.raises(TypeError, match=r"\*args"):
        def bad(*args: int) -> str:
            return ""
        tool(bad)
    with pytest.raises(ValueError, match="requires"):
        ToolSpec("f", "", {"type": "object", "properties": {}, "required": ["x"]})
    with pytest.raises(ValueError, match="identifier"):
        ToolSpec("not a name", "")


@pytest.mark.parametrize("arguments,error", [
    ({"x": 1.5}, None),
    ({"x": 2, "times": 3, "unit": "km", "tags": None}, None),
    ({}, "missing required argument 'x'"),
    ({"x": "1"}, "argument 'x' must be of type number, got string"),
    ({"x": 1, "times": 2.0}, "argument 'times' must be of type integer, got number"),
    ({"x": True}, "argument 'x' must be of type number, got boolean"),
    ({"x": 1, "unit": "mi"}, 'argument \'unit\' must be one of ["m", "km"], got "mi"'),
    ({"x": 1, "tags": ["a", 2]}, "argument 'tags'[1] must be of type string, got integer"),
    ({"x": 1, "y": 2}, "unexpected argument 'y' (allowed: 'x', 'times', 'unit', 'tags')"),
    ([1], "arguments must be a JSON object, got array"),
])
def test_arguments_are_validated_against_the_schema(arguments, error) -> None:
    assert validate_arguments(arguments, tool(scale).spec) == error


def _calls(fmt: str, calls) -> str:
    return format_tool_call(fmt, calls)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_round_trips_several_calls(fmt: str) -> None:
    calls = [("lookup", {"key": "a"}), ("scale", {"x": 2, "unit": "km"})]
    parsed = parse_tool_calls("Let me check.\n" * (fmt == "hermes") + _calls(fmt, calls), fmt)
    assert [(c.name, c.arguments, c.status) for c in parsed] == [(n, a, "ok") for n, a in calls]
    settled = call_tools(parsed, TOOLS, PROBLEM)
    assert [c.result for c in settled] == ["1", "4km"] and all(c.status == "ok" for c in settled)


# (text, format, expected statuses (with names)) from the kinds of mistakes models make
MALFORMED = [
    ('<tool_call>{"name": "lookup", "arguments": {"key": "a"</tool_call>', "hermes", [("invalid_json", None)]),
    ('<tool_call>{"name": "lookup", "arguments": {"key": "a"}}', "hermes", [("invalid_json", None)]),
    ("<tool_call>lookup(key='a')</tool_call>", "hermes", [("invalid_json", None)]),
    ('<tool_call>{"arguments": {"key": "a"}}</tool_call>', "hermes", [("invalid_json", None)]),
    ('<tool_call>{"name": "lookup", "arguments": "{\\"key\\": 1"}</tool_call>', "hermes", [("invalid_json", "lookup")]),
    ('<tool_call>{"name": "lookup", "arguments": [1]}</tool_call>', "hermes", [("bad_arguments", "lookup")]),
    ('<tool_call>{"name": "search", "arguments": {}}</tool_call>', "hermes", [("unknown_tool", "search")]),
    ('<tool_call>{"name": "lookup", "arguments": {"k": "a"}}</tool_call>', "hermes", [("bad_arguments", "lookup")]),
    ('<tool_call>{"name": "scale", "arguments": {"x": 1, "times": -1}}</tool_call>', "hermes",
     [("tool_error", "scale")]),
    ('{"name": "lookup", "parameters": {"key": "a"}', "llama3", [("invalid_json", None)]),
    ('{"name": "lookup", "parameters": {"key": "a"}} and then prose', "llama3", [("ok", "lookup"), ("invalid_json", None)]),
    ('<|python_tag|>{"nom": "lookup"}', "llama3", [("invalid_json", None)]),
    ('{"name": "lookup", "parameters": {"key": 3}}', "llama3", [("bad_arguments", "lookup")]),
    ('[TOOL_CALLS][{"name": "lookup", "arguments": {"key": "a"}', "mistral", [("invalid_json", None)]),
    ("[TOOL_CALLS][]", "mistral", [("invalid_json", None)]),
    ('[TOOL_CALLS][{"name": "lookup", "arguments": {}}, 5]', "mistral", [("bad_arguments", "lookup"),
                                                                          ("invalid_json", None)]),
    ('[TOOL_CALLS]{"name": "nope", "arguments": {}}', "mistral", [("unknown_tool", "nope")]),
]


@pytest.mark.parametrize("text,fmt,expected", MALFORMED)
def test_malformed_calls_get_the_right_status_and_a_message(text: str, fmt: str, expected) -> None:
    settled = call_tools(parse_tool_calls(text, fmt), TOOLS, PROBLEM)
    assert [(c.status, c.name) for c in settled] == expected
    for call in settled:
        assert (call.error is None) == (call.status == "ok")
        if call.status != "ok":
            assert call.message.startswith(f"Error ({call.status}): ") and len(call.message) > 25


@pytest.mark.parametrize("fmt", FORMATS)
def test_plain_answers_make_no_call(fmt: str) -> None:
    for text in ("The answer is 4.", "7", "", "I would call lookup but I know it: 3"):
        assert parse_tool_calls(text, fmt) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_calls_in_reasoning_or_quoted_examples_are_not_read(fmt: str) -> None:
    """One rule for every format: <think> blocks and markdown fences never hold calls (fenced: only <think>)."""
    call = _calls(fmt, [("lookup", {"key": "a"})])
    for text in (f"<think>maybe {call}</think>7", f"<think>{call}", f"thinking {call}</think>7",
                 f"For example:\n```\n{call}\n```\nso 7", f"Like this:\n```json\n{call}"):
        assert parse_tool_calls(text, fmt) == [], text
    assert len(parse_tool_calls(f"<think>plan</think>{call}", fmt)) == 1
    assert parse_tool_calls("<think>```python\nprint(1)\n```</think>Answer: 1", "fenced") == []
    assert parse_tool_calls("<think>plan</think>```python\nprint(1)\n```", "fenced")[0].arguments == {"code": "print(1)"}


_PIECES = list('{}[]":,; \n\tabc01-.<>/|_\\') + ["<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>",
                                                 '"name"', '"arguments"', '"parameters"', '"lookup"', "<think>",
                                                 "</think>", "```", "```python\n", "[ARGS]", '{"key": "a"}']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_no_text_crashes_any_parser(text: str) -> None:
    for fmt in TOOL_PARSERS:
        calls = call_tools(parse_tool_calls(text, fmt), TOOLS, PROBLEM)
        assert all(c.status in TOOL_STATUSES for c in calls)
        json.dumps([c.to_dict() for c in calls])  # the info stays serialisable


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_no_unicode_text_crashes_any_parser(text: str) -> None:
    for fmt in TOOL_PARSERS:
        call_tools(parse_tool_calls(text, fmt), TOOLS, PROBLEM)


def test_deeply_nested_json_is_invalid_json_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for fmt, text in (("hermes", f"<tool_call>{deep}</tool_call>"), ("llama3", "{\"a\": " + deep + "}"),
                      ("mistral", f"[TOOL_CALLS]{deep}")):
        assert all(c.status == "invalid_json" for c in parse_tool_calls(text, fmt))


def test_registry_and_auto_detection() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_tool_parser("hermes", lambda t: [], lambda c: "")
    with pytest.raises(ValueError, match=r"known: \['fenced', 'hermes', 'llama3', 'mistral'\]"):
        get_tool_parser("xml")
    assert detect_tool_format("... <tool_call> ...", "fenced") == "hermes"
    assert detect_tool_format("'[TOOL_CALLS]' ~ tool_calls|tojson", "fenced") == "mistral"
    assert detect_tool_format("'<|python_tag|>' or '\"parameters\": '", "fenced") == "llama3"
    assert detect_tool_format("{{ m['content'] }}", "fenced") == "fenced"


def test_openai_tool_calls_map_onto_the_same_calls_and_statuses() -> None:
    wire = [{"id": "a", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "a"}'}},
            {"id": "b", "type": "function", "function": {"name": "lookup", "arguments": '{"key": '}},
            {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "a", "x": 1}'}},
            {"id": "d", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
            {"id": "e", "type": "function"}, "junk"]
    settled = call_tools(from_openai_tool_calls(wire), TOOLS, PROBLEM)
    assert [(c.id, c.status) for c in settled] == [("a", "ok"), ("b", "invalid_json"), ("c", "bad_arguments"),
                                                   ("d", "unknown_tool"), (None, "invalid_json"),
                                                   (None, "invalid_json")]
    # the same call written in text parses to the same object
    text = parse_tool_calls(format_tool_call("hermes", [("lookup", {"key": "a"})]), "hermes")[0]
    assert (text.name, text.arguments) == (settled[0].name, settled[0].arguments)
    assert from_openai_tool_calls(None) == [] and from_openai_tool_calls("x") == []


def test_tool_use_stats_by_hand() -> None:
    infos = [
        {"tool_calls": [{"status": "ok"}, {"status": "invalid_json"}, {"status": "tool_error"}]},
        {"tool_calls": [{"status": "ok"}]},
        {"tool_calls": []},
        {"tool_calls": [{"status": "unknown_tool"}, {"status": "bad_arguments"}, {"status": "ok"}, {"status": "ok"}]},
        {"no": "tools"},  # not a tool episode: skipped
    ]
    stats = tool_use_stats(infos)
    assert stats == {"tool/calls_per_episode": 8 / 4, "tool/no_call_share": 1 / 4, "tool/failed_share": 4 / 8,
                     "tool/tool_errors": 1.0, "tool/invalid_json_share": 1 / 8, "tool/unknown_tool_share": 1 / 8,
                     "tool/bad_arguments_share": 1 / 8, "tool/tool_error_share": 1 / 8}
    assert set(tool_use_stats([])) == set(stats) and all(v == 0.0 for v in tool_use_stats([]).values())


def test_callable_text_rule() -> None:
    assert callable_text("a<think>b</think>c<think>d", fences=False) == "ac"
    assert callable_text("x```y```z```w", fences=True) == "xz"
    assert callable_text("x```y```z", fences=False) == "x```y```z"


def test_call_to_dict_round_trips() -> None:
    call = ToolCall("f", {"a": 1}, "bad_arguments", "nope", None, "id1")
    assert ToolCall(**call.to_dict()) == call
    with pytest.raises(ValueError, match="status"):
        ToolCall("f", None, "broken")
