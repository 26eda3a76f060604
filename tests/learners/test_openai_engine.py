"""OpenAIEngine against a real local HTTP server that misbehaves on cue (tests/fault_server.py): retries then
success, retries exhausted, a stall bounded by the timeout, the concurrency bound, the chat fallback, the
API key from the environment, and the refusal to train on a server without token ids."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer  # noqa: E402

from dapo_env.learners.engines import SamplingParams, make_engine  # noqa: E402
from dapo_env.learners.engines.openai_engine import (  # noqa: E402
    EndpointConfig,
    EndpointError,
    FailedCompletion,
    OpenAIEngine,
    backoff_delay,
    endpoint_error,
)

GREEDY = SamplingParams(temperature=0.0, max_response_tokens=8)


def _engine(server: FaultServer, **kw) -> OpenAIEngine:
    kw = {"retries": 3, "backoff_s": 0.01, "max_backoff_s": 0.05, "timeout_s": 2.0, **kw}
    return OpenAIEngine(EndpointConfig(base_url=server.url, model="fault", **kw))


def test_a_plain_request_answers_with_the_servers_text() -> None:
    with FaultServer() as server:
        (group,) = _engine(server).generate(["Largest of 3 9 2?"], n=2, sampling=GREEDY)
    assert [c.text for c in group] == ["Answer: 9", "Answer: 9"]  # greedy: one request, copied n times
    assert group[0].finish_reason == "stop" and group[0].num_tokens == 2 and group[0].token_ids is None
    assert server.requests == 1 and server.bodies[0]["prompt"] == "Largest of 3 9 2?"
    assert server.bodies[0]["temperature"] == 0.0 and "seed" not in server.bodies[0]


@pytest.mark.parametrize("fault", ["drop", "500", "503", "429", "malformed"])
def test_retries_then_success(fault: str) -> None:
    with FaultServer(faults=[fault, fault]) as server:
        (group,) = _engine(server, on_error="raise").generate(["1 2 3"], n=1, sampling=GREEDY)
    assert group[0].text == "Answer: 3" and server.requests == 3


def test_retries_exhausted_raise_or_record_the_cause() -> None:
    with FaultServer(faults=["500"] * 4) as server:
        with pytest.raises(EndpointError, match=r"HTTP 500.*\(4 attempts"):
            _engine(server, on_error="raise").generate(["1 2"], n=1, sampling=GREEDY)
    with FaultServer(faults=["500"] * 4) as server:
        (group,) = _engine(server, on_error="record").generate(["1 2"], n=1, sampling=GREEDY)
    assert isinstance(group[0], FailedCompletion) and "HTTP 500" in endpoint_error(group[0])
    assert group[0].text == "" and server.requests == 4


def test_a_4xx_is_not_retried() -> None:
    with FaultServer(rule=lambda body: "404" if body.get("prompt") == "x" else None) as server:
        engine = _engine(server, api="completions", on_error="record")
        (group,) = engine.generate(["x"], n=1, sampling=GREEDY)
    assert "no completions API" in endpoint_error(group[0]) and server.requests == 1


def test_retry_after_is_honoured() -> None:
    with FaultServer(faults=["429"], retry_after="0.4") as server:
        start = time.monotonic()
        _engine(server, max_backoff_s=5.0).generate(["1"], n=1, sampling=GREEDY)
        waited = time.monotonic() - start
    assert 0.4 <= waited < 2.0 and server.requests == 2
    assert backoff_delay(10, base=0.5, cap=3.0, retry_after="100") == 3.0  # capped


def test_a_stall_ends_within_the_bound() -> None:
    """A server that holds every request: each attempt ends at its timeout; the whole request within
    (retries + 1) * timeout + retries * max_backoff."""
    with FaultServer(rule=lambda body: "stall", stall_s=3.0) as server:
        engine = _engine(server, timeout_s=0.3, retries=1, on_error="record")
        start = time.monotonic()
        (group,) = engine.generate(["1"], n=1, sampling=GREEDY)
        took = time.monotonic() - start
    assert "no answer within 0.3 s (2 attempts" in endpoint_error(group[0])
    assert 0.6 <= took < 2 * 0.3 + 0.05 + 0.5


def test_the_concurrency_bound_holds_at_the_server() -> None:
    sampling = SamplingParams(temperature=1.0, max_response_tokens=8, seed=0)
    with FaultServer(delay_s=0.05) as server:
        groups = _engine(server, concurrency=3).generate([f"{i} {i + 1}" for i in range(6)], n=4, sampling=sampling)
    assert server.requests == 24 and server.max_in_flight == 3
    assert [g[0].text for g in groups] == [f"Answer: {i + 1}" for i in range(6)]  # answers stay in order
    seeds = [b["seed"] for b in server.bodies]
    assert len(set(seeds)) == 24  # one seed per sample


def test_samples_per_request_sends_a_prompts_group_at_once() -> None:
    sampling = SamplingParams(temperature=1.0, max_response_tokens=8, seed=0)
    with FaultServer() as server:
        groups = _engine(server, samples_per_request=True).generate(["1 5", "7 2", "3 3"], n=4, sampling=sampling)
    assert server.requests == 3 and all(b["n"] == 4 for b in server.bodies)
    assert [[c.text for c in g] for g in groups] == [["Answer: 5"] * 4, ["Answer: 7"] * 4, ["Answer: 3"] * 4]
    assert groups[0][0].num_tokens is None  # usage sums the n samples: no per-sample count without token ids


def test_seeds_do_not_depend_on_the_other_prompts_of_the_call() -> None:
    """A call over a subset samples what the full call did (resuming failed samples repeats them exactly)."""
    sampling = SamplingParams(temperature=1.0, max_response_tokens=8, seed=5)
    with FaultServer() as server:
        engine = _engine(server, concurrency=1)
        engine.generate(["a", "b", "c"], n=2, sampling=sampling)
        full = {(b["prompt"], b["seed"]) for b in server.bodies}
        server.bodies.clear()
        engine.generate(["c"], n=2, sampling=sampling)
    assert {(b["prompt"], b["seed"]) for b in server.bodies} <= full


def test_a_server_refusing_vllms_fields_gets_plain_requests() -> None:
    """A server that answers /version like vLLM but refuses vLLM's extra fields (400): asked once more without
    them, and plainly from then on."""
    with FaultServer(version="0.0-other", rule=lambda b: "400" if "return_token_ids" in b else None) as server:
        engine = _engine(server)
        groups = engine.generate(["1 4", "6 2"], n=1, sampling=GREEDY)
    assert [g[0].text for g in groups] == ["Answer: 4", "Answer: 6"] and not engine.is_vllm
    assert server.requests == 3 and "return_token_ids" in server.bodies[0] and "logprobs" not in server.bodies[-1]


def test_auto_falls_back_to_chat_on_a_chat_only_server() -> None:
    with FaultServer(chat_only=True) as server:
        engine = _engine(server)
        groups = engine.generate(["4 1", "2 8"], n=1, sampling=GREEDY)
    assert [g[0].text for g in groups] == ["Answer: 4", "Answer: 8"]
    chats = [b["messages"] for b in server.bodies if "messages" in b]
    assert sorted(m[0]["content"] for m in chats) == ["2 8", "4 1"] and all(len(m) == 1 for m in chats)


def test_turns_go_as_chat_messages() -> None:
    from dapo_env.multiturn import TurnRequest

    requests = [TurnRequest(key="e0", turn=1, group=0, messages=({"role": "user", "content": "3 5"},
                                                                 {"role": "assistant", "content": "5?"},
                                                                 {"role": "user", "content": "and 7"}), text="..."),
                TurnRequest(key="e1", turn=0, group=0, messages=(), text="", tokens_left=0)]
    with FaultServer() as server:
        out = _engine(server, api="chat").generate_turns(requests, GREEDY)
    assert out[0].text == "Answer: 7" and out[1].finish_reason == "length" and out[1].num_tokens == 0
    assert server.requests == 1 and len(server.bodies[0]["messages"]) == 3


def test_the_api_key_comes_from_the_named_environment_variable(monkeypatch) -> None:
    seen = []
    with FaultServer() as server:
        engine = _engine(server, api_key_env="DAPO_TEST_KEY")
        original = engine.client._headers
        engine.client._headers = lambda: seen.append(original()) or seen[-1]  # observe, not replace
        monkeypatch.delenv("DAPO_TEST_KEY", raising=False)
        engine.generate(["1"], n=1, sampling=GREEDY)
        monkeypatch.setenv("DAPO_TEST_KEY", "sk-test")
        engine.generate(["1"], n=1, sampling=GREEDY)
    assert "Authorization" not in seen[0] and seen[-1]["Authorization"] == "Bearer sk-test"


def test_training_on_a_server_without_token_ids_is_refused_in_one_line() -> None:
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    with FaultServer() as server:
        with pytest.raises(EndpointError) as info:
            make_engine("openai", build_tiny_model(tok), tok, base_url=server.url, served_model="fault",
                        retries=0, timeout_s=2.0)
    message = str(info.value)
    assert "\n" not in message and "not a vLLM server" in message and "token ids" in message
    with pytest.raises(TypeError, match="vllm-server"):
        _engine(FaultServer()).load_weights({})


def test_config_errors_name_the_fix() -> None:
    assert EndpointConfig(base_url="http://h:1/", model="m").base_url == "http://h:1/v1"
    with pytest.raises(ValueError, match="http"):
        EndpointConfig(base_url="h:1", model="m")
    with pytest.raises(ValueError, match="concurrency"):
        EndpointConfig(base_url="http://h:1", model="m", concurrency=0)
