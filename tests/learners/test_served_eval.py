"""Served-model evaluation as people do it, against the fault injector (tests/fault_server.py, a real HTTP server on
127.0.0.1 speaking the OpenAI protocol): chat by default with a warning when answers are missing, reasoning kept
apart and counted, token usage and cost, rpm/tpm pacing against a rate-limited server, and rules-then-judge
grading that ``reverify`` re-runs without the judge."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer, judging, request_text  # noqa: E402

from dapo_env.learners.cli import main  # noqa: E402
from dapo_env.learners.engine import SamplingParams  # noqa: E402
from dapo_env.learners.eval_run import read_samples  # noqa: E402
from dapo_env.learners.openai_engine import EndpointConfig, OpenAIEngine  # noqa: E402
from dapo_env.learners.engines.pacing import Pacer  # noqa: E402

FAST = ["--retries", "1", "--timeout", "5", "--no-progress"]
LARGEST = ("--task", "Largest-v0", "--set", "max_value=50")


def _eval(server: FaultServer, out: Path, *extra: str) -> dict:
    assert main(["eval", "--endpoint", server.url, "--model", "fault", "--out", str(out), *FAST, *extra]) == 0
    return json.loads((out / "summary.json").read_text())


def _best(text: str) -> int:
    return max(int(x) for x in re.findall(r"-?\d+", text))


# --- chat by default ----------------------------------------------------------------------------------------------
def test_chat_is_the_default_and_raw_completions_to_a_chat_model_warn(tmp_path: Path, capsys) -> None:
    with FaultServer(raw_text_answer="") as server:  # a chat model: raw text makes it stop at once
        chat = _eval(server, tmp_path / "chat", *LARGEST, "--limit", "8")
        assert all(b["messages"] == [{"role": "user", "content": b["messages"][0]["content"]}] for b in server.bodies)
        assert capsys.readouterr().err == ""
        raw = _eval(server, tmp_path / "raw", *LARGEST, "--limit", "8", "--api", "completions")
    assert chat["metrics"]["greedy"]["value"] == 1.0 and chat["warnings"] == [] and chat["api"] == "chat"
    assert all(r["completion"] for r in read_samples(tmp_path / "chat" / "samples.jsonl"))
    assert raw["metrics"]["greedy"]["value"] == 0.0 and len(raw["warnings"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "8 of 8 answers" in err[0] and "drop --api completions" in err[0]
    assert "drop --api completions" in raw["warnings"][0]


def test_the_system_prompt_goes_first_over_chat() -> None:
    with FaultServer() as server:
        engine = OpenAIEngine(EndpointConfig(base_url=server.url, model="m", api="chat"), system_prompt="Be brief.")
        (answer,), = engine.generate(["Largest of 3 9 4?"], n=1, sampling=SamplingParams(temperature=0.0))
    assert answer.text == "Answer: 9"
    assert server.bodies[0]["messages"] == [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Largest of 3 9 4?"}]


def test_a_local_checkpoint_refuses_served_only_flags(capsys) -> None:
    assert main(["eval", "--model", "/nonexistent", "--task", "Largest-v0", "--rpm", "10"]) == 2
    assert "--rpm apply to a served model" in capsys.readouterr().err


# --- reasoning, usage and cost --------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_is_stored_counted_and_never_graded(tmp_path: Path, field: str) -> None:
    def answer(text: str) -> str:  # odd problems also think inline, in the content
        best = _best(text)
        return f"<think>the numbers; {best} wins</think>Answer: {best}" if best % 2 else f"Answer: {best}"

    def thought(body: dict) -> str:  # the reasoning field names a wrong number: grading it would fail
        return "maybe it is 0 or -1 hmm"

    with FaultServer(answer=answer, reasoning=thought, reasoning_field=field) as server:
        summary = _eval(server, tmp_path / "eval", *LARGEST, "--limit", "6", "--n", "2",
                        "--price-in", "2", "--price-out", "10")
    records = read_samples(tmp_path / "eval" / "samples.jsonl")
    assert summary["metrics"]["greedy"]["value"] == 1.0 and summary["metrics"]["avg@2"]["value"] == 1.0
    for r in records:
        best = int(r["answer"])
        assert r["completion"] == f"Answer: {best}"  # the final content only
        expected = "maybe it is 0 or -1 hmm" + (f"\n\nthe numbers; {best} wins" if best % 2 else "")
        assert r["reasoning"] == expected
        assert r["usage"]["reasoning_tokens"] == 7 and r["usage"]["counted"] == []
    usage = summary["usage"]
    assert usage["samples"] == 18 and usage["reasoning_tokens"] == 18 * 7
    assert usage["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in records)
    assert all(r["usage"]["completion_tokens"] == r["tokens"] for r in records)
    assert usage["completion_tokens"] == sum(r["tokens"] for r in records)
    assert usage["cost"] == pytest.approx((usage["prompt_tokens"] * 2 + usage["completion_tokens"] * 10) / 1e6)


def test_counts_the_server_does_not_report_come_from_the_tokenizer_and_are_marked(tmp_path: Path) -> None:
    from dapo_env.learners.tiny import build_tokenizer

    build_tokenizer().save_pretrained(tmp_path / "tok")  # one token per character
    with FaultServer(usage=False, reasoning=lambda body: "abc") as server:
        summary = _eval(server, tmp_path / "eval", *LARGEST, "--limit", "3", "--tokenizer", str(tmp_path / "tok"),
                        "--price-in", "1", "--price-out", "1")
        no_tok = _eval(server, tmp_path / "plain", *LARGEST, "--limit", "3")
    for r in read_samples(tmp_path / "eval" / "samples.jsonl"):
        assert r["usage"] == {"prompt_tokens": len(r["prompt"]), "completion_tokens": len("abc\n" + r["completion"]),
                              "reasoning_tokens": 3, "counted": ["prompt_tokens", "completion_tokens",
                                                                  "reasoning_tokens"]}
    assert summary["usage"]["samples_counted_locally"] == 3 and summary["usage"]["cost"] is not None
    assert no_tok["usage"]["samples_missing"] == {"prompt_tokens": 3, "completion_tokens": 3, "reasoning_tokens": 3}
    assert no_tok["usage"]["cost"] is None


# --- pacing --------------------------------------------------------------------------------------------------------
def _fake_pacer(**limits: float) -> tuple[Pacer, list[float]]:
    clock = [0.0]
    pacer = Pacer(**limits, clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    return pacer, clock


def test_token_buckets_space_requests_and_carry_token_debt() -> None:
    pacer, clock = _fake_pacer(rpm=60)
    assert [pacer.acquire() for _ in range(3)] == [0.0, 1.0, 1.0] and clock[0] == 2.0
    pacer, clock = _fake_pacer(tpm=600)  # 10 tokens/s, a bucket of 10
    assert pacer.acquire(10) == 0.0
    pacer.settle(10, 40)  # the answer was long: 30 tokens of debt
    assert pacer.acquire(5) == pytest.approx(3.5)  # pay 30 back, then 5 more
    pacer, clock = _fake_pacer()
    for _ in range(10):  # 10 answers in 1 s, then a 429 asking for 2 s: at most 0.9 * 10 / 2 requests a second
        pacer.acquire()
        pacer.settle(1, None)
        clock[0] += 0.1
    pacer.pause(2.0)
    pacer.pause(2.0)  # a request that was in flight: the same pause, learned once
    assert pacer.acquire() == pytest.approx(2.0) and pacer.stats()["pauses_after_429"] == 1
    assert pacer.learned_rpm == pytest.approx(0.9 * 10 / 2.0 * 60)
    assert pacer.acquire() == pytest.approx(1 / 4.5)  # spaced at the learned rate


def test_a_rate_limited_server_is_evaluated_without_a_request_storm(tmp_path: Path) -> None:
    args = (*LARGEST, "--limit", "12", "--concurrency", "8", "--retries", "6")
    with FaultServer(rate_limit=(4, 1.0)) as server:  # 4 requests a second, 429 + Retry-After beyond
        unpaced = _eval(server, tmp_path / "unpaced", *args)
        storm = server.rejected
    # without limits, the first 429 pauses every request for its Retry-After and sets a request rate under the
    # one the server let through: the requests in flight then get their 429s, and few more come (no storm)
    assert unpaced["failed"]["samples"] == 0 and unpaced["metrics"]["greedy"]["value"] == 1.0
    assert storm <= 8 + 2 and unpaced["pacing"]["pauses_after_429"] >= 1
    assert 0 < unpaced["pacing"]["learned_rpm"] < 4 * 60
    with FaultServer(rate_limit=(4, 1.0)) as server:
        paced = _eval(server, tmp_path / "paced", *args, "--rpm", "180")  # 3 a second: under the limit
        assert server.rejected == 0 and server.requests == 12
    assert paced["pacing"]["rpm"] == 180 and paced["pacing"]["waited_s"] > 0


# --- rules, then a judge -------------------------------------------------------------------------------------------
def _words(text: str) -> str:
    """The evaluated model: 'Answer: N' on even problems, the right number in words-and-digits prose on those
    divisible by 3 and odd, a wrong 'Answer: 0' otherwise."""
    best = _best(text)
    if best % 2 == 0:
        return f"Answer: {best}"
    return f"I am sure the largest one is {best}." if best % 3 == 0 else "Answer: 0"


def _verdict(text: str) -> str:
    """The judge: correct when the response names the reference; no verdict when it ends in 5 (on cue)."""
    reference = re.search(r"Reference answer:\n(\S+)", text).group(1)
    response = text.split("Response:\n", 1)[1]
    if reference.endswith("5"):
        return "I cannot decide."
    named = re.search(rf"\b{reference}\b", response) is not None
    return f"Compared.\nVERDICT: {'CORRECT' if named else 'INCORRECT'}"


def test_a_judge_sees_only_the_rules_negatives_and_its_errors_stay_out(tmp_path: Path, capsys) -> None:
    out = tmp_path / "eval"
    with FaultServer(answer=judging(_words, _verdict)) as server:
        summary = _eval(server, out, *LARGEST, "--limit", "30", "--judge-endpoint", server.url, "--judge-model", "judge")
        judge_bodies = [b for b in server.bodies if "Reference answer:" in request_text(b)]
    records = read_samples(out / "samples.jsonl")
    latest = {r["index"]: r for r in records}
    assert len(latest) == 30
    answers = {i: int(r["answer"]) for i, r in latest.items()}
    negatives = [i for i, a in answers.items() if a % 2]
    assert len(judge_bodies) == len(negatives)  # only the rules' negatives were asked about
    flipped = [i for i in negatives if answers[i] % 3 == 0 and not str(answers[i]).endswith("5")]
    errors = [i for i in negatives if str(answers[i]).endswith("5")]
    for i in negatives:
        judged = latest[i]["judge"]
        assert judged["model"] == "judge" and "Reference answer:" in judged["prompt"] and judged["answer"]
        assert judged["verdict"] is (None if i in errors else i in flipped)
        assert (judged["error"] is not None) == (i in errors)
    assert all(not latest[i].get("judge") for i in answers if i not in negatives)
    rules = sum(a % 2 == 0 for a in answers.values()) / 30
    assert summary["metrics"]["greedy"]["value"] == pytest.approx(rules)
    j = summary["judge"]
    assert j["flipped"] == len(flipped) and j["errors"] == len(errors) and j["problems"] == 30 - len(errors)
    assert j["metrics"]["greedy"]["value"] == pytest.approx((30 * rules + len(flipped)) / (30 - len(errors)))
    printed = capsys.readouterr().out
    assert "+judge" in printed and f"flipped {len(flipped)}" in printed
    # reverify re-runs the rules and keeps the stored verdicts: no judge (no server at all) is asked
    assert main(["reverify", str(out)]) == 0
    again = json.loads((out / "reverify-task.summary.json").read_text())
    assert again["judge"] == summary["judge"] and again["metrics"] == summary["metrics"]


def test_a_dead_judge_is_a_judge_error_and_the_next_run_asks_again(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = (*LARGEST, "--limit", "10", "--judge-model", "judge")
    with FaultServer(answer=judging(_words, _verdict)) as server:
        dead = _eval(server, out, *args, "--judge-endpoint", "http://127.0.0.1:9/v1")  # nothing listens there
        evaluated = server.requests
        asked = dead["judge"]["asked"]
        assert asked > 0 and dead["judge"]["errors"] == asked and dead["judge"]["flipped"] == 0
        # the errors (all the negatives) leave the rule+judge score: what is left was right by the rules
        assert dead["judge"]["metrics"]["greedy"]["value"] == 1.0 and dead["judge"]["problems"] == 10 - asked
        again = _eval(server, out, *args, "--judge-endpoint", server.url)
        assert server.requests - evaluated == asked  # only the judge's questions: no answer generated again
    assert again["metrics"] == dead["metrics"] and again["judge"]["asked"] == asked
    assert again["judge"]["errors"] + again["judge"]["flipped"] <= asked


def test_judge_and_api_misuse_is_refused_in_one_line(capsys) -> None:
    base = ["eval", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*base, "--task", "GuessNumber-v0", "--judge-endpoint", "http://127.0.0.1:9/v1",
                 "--judge-model", "j"]) == 2
    assert "no single answer for a judge" in capsys.readouterr().err
    assert main([*base, "--task", "Largest-v0", "--api", "chat", "--no-chat-template"]) == 2
    assert "disagree" in capsys.readouterr().err
    assert main([*base, "--task", "Largest-v0", "--judge-model", "j"]) == 2
    assert "needs both --judge-endpoint URL and --judge-model NAME" in capsys.readouterr().err
    assert main([*base, "--task", "Largest-v0", "--price-in", "1"]) == 2
    assert "pass both --price-in and --price-out" in capsys.readouterr().err
