"""``run_eval`` on every registered task id with a scripted engine, and its settings and folder rules."""

from __future__ import annotations

import json
import shutil
import random
import re
import zlib
from pathlib import Path
from typing import Any

import pytest

from dapo_env.learners.run.eval_run import EvalSettings, read_samples, run_eval, settings_from_run
from dapo_env.learners.models.tiny import build_tokenizer
from dapo_env.tasks import get_task, list_tasks
from dapo_env.types import Completion

#: Data files of the dataset tasks in the project's shared data folder.
DATA = {"AIME24-v0": "aime_2024/aime_2024.jsonl", "AIME25-v0": "aime_2025/aime_2025.jsonl",
        "DAPOMath-v0": "dapo_math_17k/dapo_math_17k.jsonl.gz", "GSM8K-v0": "gsm8k/gsm8k_test.jsonl",
        "MATH500-v0": "math_500/math500_test.jsonl", "MBPP-v0": "mbpp/mbpp.jsonl",
        "HumanEval-v0": "humaneval/humaneval.jsonl",
        # multi-turn tasks played over a dataset task's problems
        "MBPPFeedback-v0": "mbpp/mbpp.jsonl", "GSM8KTool-v0": "gsm8k/gsm8k_test.jsonl",
        "DAPOMathTool-v0": "dapo_math_17k/dapo_math_17k.jsonl.gz"}
#: Tasks whose verifier runs code in the bubblewrap sandbox.
CODE = ("MBPP-v0", "HumanEval-v0", "MBPPFeedback-v0")
#: program tasks (the same sandbox) and the compiler or interpreter each needs
PROGRAMS = {"CppPick-v0": "g++", "CppPickFeedback-v0": "g++", "JSFunctions-v0": "node", "JSFunctionsFeedback-v0": "node"}


def _knobs(task_id: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The task's data file (the test skips when the shared data is absent); skips code tasks without a sandbox."""
    if task_id in CODE or task_id in PROGRAMS:
        from dapo_env.verifiers import isolation

        if not isolation().ok:
            pytest.skip(f"code tasks run in a bubblewrap sandbox: {next(iter(isolation().missing.values()))}")
    if task_id in PROGRAMS and shutil.which(PROGRAMS[task_id]) is None:
        pytest.skip(f"{task_id} needs {PROGRAMS[task_id]}: apt-get install -y g++ nodejs")
    if task_id in DATA:
        return {"data_files": str(request.getfixturevalue("shared_data") / DATA[task_id])}
    return {}


class ScriptedEngine:
    """Answers each prompt with its right or a wrong response: greedily by a fixed rule per prompt, when
    sampling by a coin from a generator seeded with ``sampling.seed`` (like a real engine, the draws depend
    on the seed and on the rows of the call)."""

    def __init__(self, right: dict[str, str], wrong: str, *, truncate_right: bool = False) -> None:
        self.right, self.wrong, self.truncate_right, self.calls = right, wrong, truncate_right, 0

    def generate(self, prompts: list[str], n: int, sampling: Any) -> list[list[Completion]]:
        self.calls += 1
        coin = random.Random(sampling.seed)
        out = []
        for prompt in prompts:
            group = []
            for _ in range(n):
                ok = zlib.crc32(prompt.encode()) % 3 != 0 if sampling.temperature == 0 else coin.random() < 0.5
                text = self.right.get(prompt, self.wrong) if ok else self.wrong
                cut = ok and self.truncate_right
                group.append(Completion(text, num_tokens=len(text), finish_reason="length" if cut else "stop"))
            out.append(group)
        return out

    def fingerprint(self) -> str:
        return "scripted"

    def release(self) -> None:  # keeps nothing between turns
        pass


def right_response(task_id: str, task: Any, problem: Any) -> str:
    """A response the task's verifier accepts for ``problem``."""
    if "fence" in problem.metadata:  # a program task (C++, JavaScript): its reference program
        return f"```{problem.metadata['fence']}\n{problem.metadata['solution']}\n```"
    if task_id == "MBPP-v0":
        return f"```python\n{problem.metadata['code']}\n```"
    if task_id == "HumanEval-v0":
        return f"```python\n{problem.question}{problem.metadata['canonical_solution']}\n```"
    if task_id == "Countdown-v0":
        return f"Answer: {problem.metadata['solution']}"
    if task_id == "Sort-v0" or getattr(task.verifier, "answer_format", None) == "dapo":
        return f"Answer: {problem.answer}"
    return f"The answer is $\\boxed{{{problem.answer}}}$."


SINGLE_TURN = [t for t in list_tasks() if get_task(t).turns == "single-turn"]
MULTI_TURN = [t for t in list_tasks() if get_task(t).turns == "multi-turn"]


@pytest.mark.parametrize("task_id", SINGLE_TURN)
def test_every_task_id_evaluates_and_grades(task_id: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    knobs = _knobs(task_id, request)
    task = get_task(task_id)
    loaded = task.load(split="test", **knobs)
    problems = [loaded[i] for i in range(3)]  # procedural splits generate a problem when it is read
    right = {task.format_prompt(p): right_response(task_id, task, p) for p in problems}
    wrong = "```python\ndef nothing():\n    pass\n```" if task_id in CODE else "Answer: -98765"
    if "fence" in problems[0].metadata:  # a program in the task's language that answers nothing
        wrong = f"```{problems[0].metadata['fence']}\n\n```"
    settings = EvalSettings(task=task_id, task_kwargs=knobs, n=2, max_response_tokens=64)
    outcome = run_eval(ScriptedEngine(right, wrong), task, problems, settings, tmp_path, progress=False)
    records = read_samples(outcome.samples_path)
    assert len(records) == 3 * 3
    for r in records:
        assert set(r) >= {"problem_id", "prompt", "completion", "extracted", "correct", "reason", "tokens",
                          "finish_reason", "sample", "greedy", "index"}
        assert r["correct"] == (r["completion"] == right[r["prompt"]]), (r["completion"][:200], r["reason"])
    assert set(outcome.metrics) == {"pass@1", "pass@2", "avg@2", "maj@2", "greedy"}
    assert json.loads(outcome.summary_path.read_text())["task"] == task_id


class Bisection:
    """Plays GuessNumber from the conversation text it is given: halves the range after each reply."""

    def generate(self, prompts: list[str], n: int, sampling: Any) -> list[list[Completion]]:
        out = []
        for text in prompts:
            low, high = 1, int(re.search(r"from 1 to (\d+)", text).group(1))
            for guess, reply in re.findall(r"Answer: (\d+)\s*(higher|lower)", text):
                low, high = (int(guess) + 1, high) if reply == "higher" else (low, int(guess) - 1)
            out.append([Completion(f"Answer: {(low + high) // 2}", num_tokens=3)] * n)
        return out

    def release(self) -> None:  # keeps nothing between turns
        pass

    def fingerprint(self) -> str:
        return "bisection"


@pytest.mark.parametrize("task_id", MULTI_TURN)
def test_every_multi_turn_id_plays_episodes(task_id: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    knobs = _knobs(task_id, request)
    task = get_task(task_id)
    loaded = task.load(split="test", **knobs)
    problems = [loaded[i] for i in range(4)]
    constant = {task.format_prompt(p): "Answer: 1" for p in problems}
    outcome = run_eval(ScriptedEngine(constant, "Answer: 1"), task, problems,
                       EvalSettings(task=task_id, task_kwargs=knobs, n=2), tmp_path, progress=False)
    records = read_samples(outcome.samples_path)
    assert len(records) == 4 * 3 and {r["index"] for r in records} == {0, 1, 2, 3}
    assert all(r["prompt"] == task.format_prompt(problems[r["index"]]) and r["tokens"] > 0 for r in records)
    answered = any(r["extracted"] is not None for r in records if not r["greedy"])  # maj@k needs answers
    assert set(outcome.metrics) == {"pass@1", "pass@2", "avg@2", "greedy"} | ({"maj@2"} if answered else set())


def test_guess_number_episodes_are_played_to_the_end_and_graded_by_the_game(tmp_path: Path) -> None:
    task = get_task("GuessNumber-v0")
    loaded = task.load(split="test")
    problems = [loaded[i] for i in range(12)]
    solved = run_eval(Bisection(), task, problems, EvalSettings(task="GuessNumber-v0", n=2), tmp_path / "b",
                      progress=False)
    records = read_samples(solved.samples_path)
    assert all(r["correct"] and r["reason"] == "correct" and r["extracted"] == r["answer"] for r in records)
    assert any(r["completion"].count("Answer:") >= 3 for r in records)  # several turns, replies in between
    assert "higher" in records[0]["completion"] or "lower" in records[0]["completion"] or records[0]["answer"] == "8"
    constant = {task.format_prompt(p): "Answer: 1" for p in problems}
    blind = run_eval(ScriptedEngine(constant, "Answer: 1"), task, problems, EvalSettings(task="GuessNumber-v0"),
                     tmp_path / "c", progress=False)
    assert [r["correct"] for r in read_samples(blind.samples_path)] == [p.answer == "1" for p in problems]


def _largest(size: int = 6) -> tuple[Any, list, dict[str, str]]:
    task = get_task("Largest-v0")
    loaded = task.load(split="test")
    problems = [loaded[i] for i in range(size)]
    return task, problems, {task.format_prompt(p): f"Answer: {p.answer}" for p in problems}


def test_a_truncated_response_is_wrong_and_chat_templates_wrap_prompts(tmp_path: Path) -> None:
    task, problems, right = _largest()
    tok = build_tokenizer()
    chat_right = {f"<bos>user: {p}\nassistant: ": text for p, text in right.items()}
    settings = EvalSettings(task="Largest-v0", n=4, chat_template=True, max_response_tokens=16)
    outcome = run_eval(ScriptedEngine(chat_right, "Answer: 99", truncate_right=True), task, problems, settings,
                       tmp_path, tokenizer=tok, progress=False)
    records = read_samples(outcome.samples_path)
    assert all(r["prompt"].startswith("<bos>user: Largest of ") for r in records)
    cut = [r for r in records if r["finish_reason"] == "length"]
    assert cut and not any(r["correct"] for r in records) and all(r["reason"] == "equal:string" for r in cut)
    assert outcome.metrics["pass@4"] == 0.0 and outcome.summary["stats"]["sampled"]["truncated"] > 0


def test_units_are_fixed_so_any_split_of_the_work_gives_the_same_records(tmp_path: Path) -> None:
    task, problems, right = _largest(10)
    settings = EvalSettings(task="Largest-v0", n=3, batch_size=6)  # greedy units of 6, sampled units of 2
    whole = run_eval(ScriptedEngine(right, "Answer: 0"), task, problems, settings, tmp_path / "w", progress=False)
    engine = ScriptedEngine(right, "Answer: 0")
    run_eval(engine, task, problems[:3], settings, tmp_path / "p", progress=False)
    assert engine.calls == 1 + 2  # a greedy unit and two sampled units (the second cut short at 3 problems)
    part = run_eval(engine, task, problems, settings, tmp_path / "p", progress=False)  # more problems: extends

    def key(r: dict) -> tuple:
        return (r["index"], r["greedy"], r["sample"])

    a = sorted(read_samples(whole.samples_path), key=key)
    b = sorted(read_samples(part.samples_path), key=key)
    same = [x == y for x, y in zip(a, b)]
    assert len(a) == len(b) == 40
    assert all(s for x, s in zip(a, same) if x["greedy"] or x["index"] >= 4)  # units after the cut are identical
    calls = engine.calls
    again = run_eval(engine, task, problems, settings, tmp_path / "p", progress=False)
    assert engine.calls == calls and again.metrics == part.metrics  # nothing left to generate
    smaller = run_eval(engine, task, problems[:5], settings, tmp_path / "p", progress=False)
    assert smaller.summary["problems"] == 5 and engine.calls == calls


def test_a_corrupt_line_that_is_not_the_last_one_is_an_error_naming_it(tmp_path: Path) -> None:
    task, problems, right = _largest(2)
    settings = EvalSettings(task="Largest-v0")
    run_eval(ScriptedEngine(right, "Answer: 0"), task, problems, settings, tmp_path, progress=False)
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    (tmp_path / "samples.jsonl").write_text("\n".join(["{not json", *lines]) + "\n")
    with pytest.raises(ValueError, match="samples.jsonl line 1: .*--overwrite"):
        run_eval(ScriptedEngine(right, "Answer: 0"), task, problems, settings, tmp_path, progress=False)
    out = run_eval(ScriptedEngine(right, "Answer: 0"), task, problems, settings, tmp_path, overwrite=True,
                   progress=False)
    assert len(read_samples(out.samples_path)) == 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=-1), "n=-1: must be an integer >= 0"),
    (dict(n=0, greedy=False), "nothing to evaluate"),
    (dict(n=2, temperature=0.0), "sampling needs a temperature > 0"),
    (dict(size=0), "size=0: must be >= 1"),
    (dict(top_p=0.0), "top_p"),
    (dict(precision="fp8"), "choose one of"),
    (dict(verifier="nocolon"), "module:function"),
])
def test_settings_errors_name_the_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EvalSettings(task="Largest-v0", **kwargs)


def test_settings_from_run_take_the_runs_held_out_evaluation() -> None:
    config = {"task": "Largest-v0", "task_kwargs": {"max_value": 9}, "eval_split": "test", "eval_size": 50,
              "max_response_tokens": 16, "chat_template": True, "verifier": "mod:fn", "precision": "bf16",
              "engine": "vllm", "temperature": 0.9, "top_p": 0.7, "eval_temperature": 0.0}
    s = settings_from_run(config)
    assert (s.task, s.task_kwargs, s.split, s.size, s.max_response_tokens, s.chat_template, s.verifier,
            s.precision, s.engine, s.temperature, s.top_p) == ("Largest-v0", {"max_value": 9}, "test", 50, 16, True,
                                                               "mod:fn", "bf16", "vllm", 0.9, 0.7)
    assert settings_from_run({**config, "eval_temperature": 0.6}).temperature == 0.6
    assert settings_from_run(config, task="Largest").task_kwargs == {"max_value": 9}  # the same task by name
    other = settings_from_run(config, task="Sort-v0")
    assert (other.task_kwargs, other.verifier) == ({}, None)
    with pytest.raises(ValueError, match="unknown eval setting"):
        settings_from_run(config, max_tokens=3)
    with pytest.raises(ValueError, match="pass --task"):
        settings_from_run({})


@pytest.mark.parametrize("name", ["dapo_env.learners.run.eval_run", "dapo_env.evaluation"])
def test_docstring_examples_run(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_the_one_evaluation_function_plays_multi_turn_episodes() -> None:
    """``learners.evaluation.evaluate`` (the trainer's held-out path too) plays a multi-turn task's episodes."""
    from dapo_env.learners.run.evaluation import evaluate

    task = get_task("GuessNumber-v0")
    loaded = task.load(split="test")
    problems = [loaded[i] for i in range(5)]
    result = evaluate(Bisection(), task, problems, max_response_tokens=8, samples=2)
    assert [(r.problem_id, r.sample) for r in result.records] == [(str(p.id), k) for p in problems for k in (0, 1)]
    assert result.accuracy == 1.0 and all(r.extracted == r.answer for r in result.records)
    assert evaluate(Bisection(), task, [], max_response_tokens=8).records == ()
