"""Tool tasks through an OpenAI chat endpoint (the fault injector, tests/fault_server.py, answering as the OpenAI
API specifies tool calls): the tools go in the request, the server's parsed ``tool_calls`` are read by the
episode's own parser with the statuses training gives, earlier calls go back as ``tool_calls`` paired with
their ``tool`` messages by id, and a server that refuses automatic tool choice is still evaluated."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer  # noqa: E402

from dapo_env.learners.cli import main  # noqa: E402
from dapo_env.learners.run.eval_run import read_samples  # noqa: E402
from dapo_env.tools import from_openai_message, parse_tool_calls, to_openai_messages  # noqa: E402

FAST = ["--retries", "1", "--timeout", "5", "--no-progress"]


def _eval(server: FaultServer, out: Path, *extra: str) -> dict:
    assert main(["eval", "--endpoint", server.url, "--model", "fault", "--out", str(out), *FAST, *extra]) == 0
    return json.loads((out / "summary.json").read_text())


def _call(name: str, arguments: Any, call_id: str = "call_x") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _asked_key(body: dict) -> str:
    return re.search(r"key (\w+)", body["messages"][0]["content"]).group(1)


def _parsing_server_policy(body: dict) -> dict:
    """Call lookup with the asked key, then answer with what the tool said."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": last["content"]}
    return {"role": "assistant", "content": None,
            "tool_calls": [_call("lookup", json.dumps({"key": _asked_key(body)}), "call_abc")]}


@pytest.mark.parametrize("tool_format", ["hermes", "llama3", "mistral"])
def test_a_server_that_parses_calls_solves_hidden_table_through_chat(tool_format: str, tmp_path: Path) -> None:
    args = ("--task", "HiddenTable-v0", "--limit", "4", "--set", f"tool_format={tool_format}")
    with FaultServer(message=_parsing_server_policy, chat_only=True) as server:
        summary = _eval(server, tmp_path / "eval", *args)
    assert summary["metrics"]["greedy"]["value"] == 1.0 and summary["failed"]["samples"] == 0
    first = server.bodies[0]
    second = next(b for b in server.bodies if len(b["messages"]) == 3)  # an episode's second turn
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup"] and "tool_choice" not in first
    assert first["tools"][0]["function"]["parameters"]["properties"]["key"]["type"] == "string"
    assistant, reply = second["messages"][-2], second["messages"][-1]
    assert assistant["role"] == "assistant" and assistant["content"] is None
    (call,) = assistant["tool_calls"]
    assert call["type"] == "function" and json.loads(call["function"]["arguments"]) == {"key": _asked_key(second)}
    assert reply["role"] == "tool" and reply["tool_call_id"] == call["id"] and reply["content"].isdigit()
    records = read_samples(tmp_path / "eval" / "samples.jsonl")
    assert records and all(r["correct"] for r in records)


def _malformed_then_right(body: dict) -> dict:
    """Turn by turn: unreadable arguments, an unknown tool, arguments of the wrong type, a right call, the answer."""
    turn = sum(m["role"] == "assistant" for m in body["messages"])
    key = _asked_key(body)
    script = [_call("lookup", '{"key": '), _call("search", json.dumps({"key": key})),
              _call("lookup", json.dumps({"key": 7})), _call("lookup", json.dumps({"key": key}))]
    if turn < len(script):
        return {"role": "assistant", "content": None, "tool_calls": [script[turn]]}
    return {"role": "assistant", "content": body["messages"][-1]["content"]}


def test_malformed_server_calls_get_the_training_statuses_and_tool_feedback(tmp_path: Path) -> None:
    args = ("--task", "HiddenTable-v0", "--limit", "2", "--set", "tool_format=hermes", "--set", "max_tool_calls=4")
    with FaultServer(message=_malformed_then_right, chat_only=True) as server:
        summary = _eval(server, tmp_path / "eval", *args)
    assert summary["metrics"]["greedy"]["value"] == 1.0  # the episode went on after every failure
    last = max(server.bodies, key=lambda b: len(b["messages"]))["messages"]
    feedback = [m["content"] for m in last if m["role"] in ("tool", "user")][1:]
    assert [f.split(")")[0] for f in feedback[:3]] == ["Error (invalid_json", "Error (unknown_tool",
                                                      "Error (bad_arguments"]
    assert feedback[3].isdigit()
    # the unreadable call is answered as feedback (it has no name to show the server), the others by id
    calls = [m for m in last if m["role"] == "assistant"]
    assert "tool_calls" not in calls[0] and [c["tool_calls"][0]["function"]["name"] for c in calls[1:4]] == [
        "search", "lookup", "lookup"]


def _text_calls(body: dict) -> dict:
    """A server that leaves calls in the text (hermes), as vLLM does with tool_choice "none"."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": last["content"]}
    call = json.dumps({"name": "lookup", "arguments": {"key": _asked_key(body)}})
    return {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"}


@pytest.mark.parametrize(("refuse", "expected_choice"), [("auto", "none"), ("all", None)])
def test_a_server_refusing_automatic_tool_choice_is_still_evaluated(refuse: str, expected_choice: str | None,
                                                                   tmp_path: Path) -> None:
    args = ("--task", "HiddenTable-v0", "--limit", "4", "--set", "tool_format=hermes", "--concurrency", "1")
    with FaultServer(message=_text_calls, chat_only=True, refuse_tools=refuse) as server:
        summary = _eval(server, tmp_path / "eval", *args)
    assert summary["metrics"]["greedy"]["value"] == 1.0 and summary["failed"]["samples"] == 0
    answered = server.bodies[refuse == "auto" and 1 or 2:]  # the refused attempts are learned once
    assert all(b.get("tool_choice") == expected_choice for b in answered)
    assert all(("tools" in b) == (expected_choice is not None) for b in answered)
    assert len(server.bodies) == (1 if refuse == "auto" else 2) + 8  # 4 episodes x (call, answer)
    second = [m for b in answered if len(b["messages"]) == 3 for m in b["messages"]]  # the answer turns
    assert len(second) == 4 * 3
    calls = [m for m in second if m["role"] == "assistant"]
    if expected_choice is None:  # no tools: the call stays in the model's text, as in-process
        assert all("tool_calls" not in m and "<tool_call>" in m["content"] for m in calls)
        assert all("tool_call_id" not in m for m in second)
    else:  # tools shown: the call goes as tool_calls, answered by id
        assert all(m["tool_calls"][0]["function"]["name"] == "lookup" for m in calls)
        assert all(m["tool_call_id"] == c["tool_calls"][0]["id"]
                   for c, m in zip(calls, [m for m in second if m["role"] == "tool"]))


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(message=st.dictionaries(st.sampled_from(["content", "tool_calls", "role"]), _json | st.lists(
    st.fixed_dictionaries({"function": st.fixed_dictionaries({"name": _json, "arguments": _json | st.text(max_size=30)})}),
    max_size=3), max_size=3), tool_format=st.sampled_from(["hermes", "llama3", "mistral", "fenced"]))
def test_any_server_message_becomes_text_the_parser_reads_without_raising(message: dict, tool_format: str) -> None:
    text = from_openai_message(message, tool_format)
    assert isinstance(text, str)
    calls = parse_tool_calls(text, tool_format)
    sent = message.get("tool_calls")
    if tool_format != "fenced" and isinstance(sent, list) and sent:
        content = message.get("content")
        before = parse_tool_calls(content, tool_format) if isinstance(content, str) else []
        assert len(calls) > len(before)  # a server call is never lost
        if tool_format == "hermes":  # delimited: one attempted call per server call, whatever it holds
            assert len(calls) == len(before) + len(sent)
        readable = [(c["function"]["name"], c["function"]["arguments"]) for c in sent
                    if isinstance(c, dict) and isinstance(c.get("function"), dict)]
        if len(readable) == len(sent) and all(isinstance(n, str) and isinstance(a, str) and isinstance(_loads(a), dict) for n, a in readable):
            assert [(c.name, c.arguments) for c in calls[len(before):]] == [(n, _loads(a)) for n, a in readable]
        messages = to_openai_messages([{"role": "user", "content": "q"}, {"role": "assistant", "content": text},
                                       *[{"role": "tool", "content": "r"}] * len(calls)], tool_format)
        ids = [c["id"] for c in messages[1].get("tool_calls", [])]
        assert [m.get("tool_call_id") for m in messages[2:] if m["role"] == "tool"] == ids


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
