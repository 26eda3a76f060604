"""Smoke test of benchmarks/tool_task_run.py: a few warm-start and DAPO steps on HiddenTable-v0 in the llama3
format run end to end and report held-out success, the tool-blind bound and tool use (slow: about a minute)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmark_loader import load_benchmark

pytest.importorskip("torch")


@pytest.mark.slow
def test_a_tiny_tool_run_reports_tool_use(tmp_path: Path) -> None:
    run = load_benchmark("tool_task_run")
    try:
        summary = run.main(["--warm-steps", "2", "--steps", "2", "--eval-size", "8", "--out", str(tmp_path / "r.json")])
    finally:
        sys.modules.pop("tool_task_run", None)
    assert json.loads((tmp_path / "r.json").read_text())["steps"] == 2
    assert summary["tool_blind_bound"] == 0.25 and summary["eval_history"][0][0] == 0
    assert 0.0 <= summary["no_call_share"]["first"] <= 1.0
    assert set(summary["tool_use_after"]) >= {"tool/calls_per_episode", "tool/no_call_share", "solved"}


def test_the_warm_start_calls_with_the_asked_key_and_copies_only_when_asked() -> None:
    run = load_benchmark("tool_task_run")
    try:
        from dapo_env.envs import resolve_task

        problems = resolve_task("HiddenTable-v0").load(split="train", **run.TASK_KWARGS)
        episode, other = problems[0], problems[7]  # index 7: draw 7 < 80 calls, < 50 copies
        call = run.warm_turn(episode, other, 0, call_share=0.8, copy_share=0.5)
        assert json.loads(call)["parameters"]["key"] == episode.metadata["key"]
        assert run.warm_turn(episode, other, 1, copy_share=0.5) == episode.answer
        assert run.warm_turn(episode, other, 1, copy_share=0.0) == other.answer
        assert run.warm_turn(episode, other, 0, call_share=0.0) == other.answer
    finally:
        sys.modules.pop("tool_task_run", None)
