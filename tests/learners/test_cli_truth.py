"""The command line tells the truth (issue 38): held-out is held out, one ``--set`` grammar for ``train`` and
``eval``, hints whose suggestion works when fed back through the real parser, exit codes a script can trust,
and a served model's common answer forms graded as answers. The exit-code and hint cases run the real entry,
``python -m dapo_env.learners.cli``, in a subprocess."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer  # noqa: E402

from dapo_env.learners.cli import build_parser, config_from_args, eval_overrides, main  # noqa: E402
from dapo_env.learners.settings import SettingError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "warmstart_steps=0", "batch_size=2", "group_size=2", "mini_batch_size=2", "micro_batch_size=8",
        "tiny_hidden_size=64", "tiny_heads=2", "tiny_layers=1", "max_response_tokens=8", "overlong_cache_length=2",
        "num_threads=1", "checkpoint_every=1", "eval_every=0", "plot_every=0"]


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The real entry point in a fresh interpreter (this checkout's code: it runs from the checkout's root)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "dapo_env.learners.cli", *args], capture_output=True, text=True,
                          timeout=300, env=environ, cwd=cwd)


def _train_config(*args: str):  # noqa: ANN202
    return config_from_args(build_parser().parse_args(["train", *args]))[0]


def _suggested(message: str) -> list[str]:
    """The flags a hint suggests, as argv: ``--flag VALUE`` pairs and ``--set KEY=VALUE`` items (shell-quoted
    ones unquoted), in order; placeholders such as ``--model PATH`` are left out."""
    argv: list[str] = []
    for match in re.finditer(r"--set\s+('[^']*'|\S+)|(--[a-z][a-z-]+)(?:\s+(-?[\w./]+(?:,[\w./]+)*))?", message):
        if match.group(1):
            argv += ["--set", shlex.split(match.group(1))[0]]
        elif match.group(3) and not match.group(3).isupper():
            argv += [match.group(2), match.group(3)]
    return argv


def _gsm8k_file(path: Path, rows: int) -> Path:
    path.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?", "answer": f"{i}+{i}.\n#### {2 * i}"})
                            + "\n" for i in range(rows)))
    return path


# --- one --set grammar ----------------------------------------------------------------------------------------
def test_set_reads_fields_by_type_task_knobs_and_dotted_paths_on_train_and_eval(tmp_path: Path) -> None:
    cfg = _train_config("--task", "GSM8K-v0", "--set", "packing=off", "data_files=my.jsonl", "prompt_template=Q: {question}",
                        "engine_options.server_url=http://h:1/v1", "num_threads=null")
    assert (cfg.packing, cfg.task_kwargs, cfg.prompt_template) == ("off", {"data_files": "my.jsonl"}, "Q: {question}")
    assert (cfg.engine_options, cfg.num_threads) == ({"server_url": "http://h:1/v1"}, None)
    dotted = _train_config("--task", "GSM8K-v0", "--set", "task_kwargs.data_files={train: a.jsonl, test: b.jsonl}")
    assert dotted.task_kwargs == {"data_files": {"train": "a.jsonl", "test": "b.jsonl"}}
    knobs = _train_config("--set", "max_value=50", "overlong_filter=on")  # the tiny preset's Largest-v0 knobs
    assert knobs.task_kwargs["max_value"] == 50 and knobs.task_kwargs["min_count"] == 5 and knobs.overlong_filter
    args = build_parser().parse_args(["eval", "--model", str(tmp_path), "--task", "GSM8K-v0", "--set",
                                      "data_files=t.jsonl", "task_kwargs.hub_config=main", "n=4", "prompt_template=Q: {question}"])
    assert eval_overrides(args) == {"task": "GSM8K-v0", "n": 4, "prompt_template": "Q: {question}",
                                    "task_kwargs": {"data_files": "t.jsonl", "hub_config": "main"}}


def test_set_refuses_an_unknown_key_with_its_close_matches_and_names_the_quoting_of_bad_yaml() -> None:
    with pytest.raises(SettingError, match=r"--set max_rounds=4: 'max_rounds' .* did you mean max_gen_rounds"):
        _train_config("--set", "max_rounds=4")
    with pytest.raises(SettingError, match=r"not an option of Largest-v0 .* did you mean max_value"):
        _train_config("--set", "task_kwargs.max_valu=4")
    with pytest.raises(ValueError, match=r"TrainConfig.packing: choose one of \[.*'off'.*\].*\(got 'false'\)"):
        _train_config("--set", "packing=false")  # a string field keeps the word: no boolean sneaks in
    with pytest.raises(SettingError) as err:
        _train_config("--task", "GSM8K-v0", "--set", "data_files={question")
    message = str(err.value)
    assert message.startswith("--set data_files={question: the value is not valid YAML")
    fixed = _train_config("--task", "GSM8K-v0", *_suggested(message.split("quote it", 1)[1]))
    assert fixed.task_kwargs == {"data_files": "{question"}


# --- hints that work, fed back through the parser -----------------------------------------------------------
def test_the_offline_hub_error_names_the_cli_way_and_it_works(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = _cli("train", "--task", "GSM8K-v0", "--out-dir", str(tmp_path), "--no-progress", env=env)
    assert proc.returncode == 2, proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert "--set data_files=" in error and "gym.make" not in error
    suggestion = _suggested(error)
    assert suggestion[:1] == ["--set"] and suggestion[1].startswith("data_files=")
    data = _gsm8k_file(tmp_path / "gsm8k.jsonl", 5)
    cfg = _train_config("--task", "GSM8K-v0", "--set", f"data_files={data}")
    from dapo_env.tasks import get_task

    assert len(get_task(cfg.task).load(split="train", **cfg.task_kwargs)) == 5


def test_the_context_hint_names_a_fix_that_fits(tmp_path: Path) -> None:
    data = _gsm8k_file(tmp_path / "g.jsonl", 5)
    proc = _cli("train", "--task", "GSM8K-v0", "--set", f"data_files={data}", *TINY[1:], "--tiny-max-positions", "16",
                "--out-dir", str(tmp_path), "--no-progress")
    assert proc.returncode == 2, proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert "N <=" not in error and "--tiny-max-positions" in error
    suggestion = _suggested(error)
    cfg = _train_config("--task", "GSM8K-v0", "--set", f"data_files={data}", *TINY[1:], "--tiny-max-positions", "16",
                        *suggestion)
    from dapo_env.learners.rollout.setup import check_context, resolve_task
    from dapo_env.learners.run.checkpoint import build_model

    model, tokenizer = build_model(cfg)
    task = resolve_task(cfg)
    check_context(model, tokenizer, cfg, task, task.load(split="test", **cfg.task_kwargs))  # fits now


def test_the_partial_batch_warning_names_real_flags() -> None:
    from dapo_env.learners.rollout.setup import partial_batch_advice

    cfg = _train_config()
    advice = partial_batch_advice(cfg)
    assert "max_gen_rounds" in advice and "max_rounds," not in advice
    fixed = _train_config(*_suggested(advice))
    assert fixed.max_gen_rounds > cfg.max_gen_rounds and fixed.batch_size < cfg.batch_size


# --- exit codes -----------------------------------------------------------------------------------------------
def test_eval_against_a_dead_endpoint_exits_non_zero_with_a_summary(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    proc = _cli("eval", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--task", "Largest-v0", "--size", "2",
                "--retries", "0", "--timeout", "2", "--out", str(tmp_path / "e"), "--no-progress")
    assert proc.returncode == 1, proc.stderr
    assert "failed requests: 2 (2 x error:endpoint" in proc.stderr and "nothing was scored" in proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["size"] == 0 and report["failed"] == 2
    for command in ("eval", "train", "reverify"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert "Exit status: 0 done; 2 a user error" in help_text and " 1: " in help_text, command


def test_failed_requests_up_to_max_failed_pass(tmp_path: Path) -> None:
    def fail_nines(body: dict) -> str | None:  # the requests of problems whose prompt holds a 9 fail
        return "500" if "9" in str(body.get("messages", body.get("prompt"))) else None

    with FaultServer(rule=fail_nines) as server:
        args = ["eval", "--endpoint", server.url, "--model", "m", "--task", "Largest-v0", "--size", "6", "--retries",
                "0", "--no-progress", "--out", str(tmp_path / "e")]
        assert main(args) == 1
        failed = json.loads((tmp_path / "e" / "summary.json").read_text())["failed"]["samples"]
        assert 0 < failed < 6
        assert main([*args, "--max-failed", str(failed)]) == 0


# --- held-out is held out, formats a served model can follow -------------------------------------------------
def test_one_file_is_split_into_training_and_held_out_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _gsm8k_file(tmp_path / "mine.jsonl", 10)
    status = main(["train", "--task", "GSM8K-v0", "--set", f"data_files={data}", *TINY[1:], "--max-steps", "1",
                   "--out-dir", str(tmp_path), "--run-name", "r", "--no-progress"])
    out, err = capsys.readouterr()
    assert status in (0, 1)  # 1: a random tiny model on GSM8K learned nothing, and says so
    assert status == 0 or "nothing was learned" in err
    record = json.loads((tmp_path / "r" / "heldout.json").read_text())
    assert (record["rows"], record["held_out"], record["train"]) == (10, 2, 8) and "data_files" in record["source"]
    assert "held-out: 2 of the 10 rows of data_files" in out and "held-out accuracy (2 of the 10 rows" in out
    from dapo_env.learners.rollout.setup import resolve_task

    cfg = _train_config("--task", "GSM8K-v0", "--set", f"data_files={data}", *TINY[1:])
    task = resolve_task(cfg)
    train = {p.question for p in task.load(split="train", **cfg.task_kwargs)}
    held = {p.question for p in task.load(split="test", **cfg.task_kwargs)}
    assert len(train) == 8 and len(held) == 2 and not train & held
    assert main(["eval", "--model", str(tmp_path / "r"), "--no-progress"]) == 0
    summary = json.loads(next((tmp_path / "r" / "evals").glob("*/summary.json")).read_text())
    assert summary["problems"] == 2 and "held out" in summary["rows"]
    assert {r["prompt"].split("\n")[0] for r in map(json.loads, next((tmp_path / "r" / "evals").glob(
        "*/samples.jsonl")).read_text().splitlines())} == held


def test_a_single_row_cannot_be_held_out(tmp_path: Path) -> None:
    data = _gsm8k_file(tmp_path / "one.jsonl", 1)
    from dapo_env.learners.rollout.setup import resolve_task

    with pytest.raises(ValueError, match=r"too few to hold any out: pass a file per split, --set 'data_files="):
        resolve_task(_train_config("--task", "GSM8K-v0", "--set", f"data_files={data}"))


def test_a_served_models_common_answer_forms_are_graded_as_answers(tmp_path: Path) -> None:
    def say(prompt: str) -> str:
        best = max(int(x) for x in re.findall(r"-?\d+", prompt))
        return f"Comparing them one by one, the largest is {best}.\n\nThe answer is: **{best}**."

    with FaultServer(answer=say) as server:
        assert main(["eval", "--endpoint", server.url, "--model", "m", "--task", "Largest-v0", "--size", "5",
                     "--no-progress", "--out", str(tmp_path / "e")]) == 0
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["metrics"]["greedy"]["value"] == 1.0


def test_a_dataset_with_a_single_split_holds_out_from_it() -> None:
    from dapo_env.learners.run.heldout import heldout_of, split_if_shared
    from dapo_env.tasks import Task, TaskDataError
    from dapo_env.types import Problem
    from dapo_env.verifiers import MathVerifier

    class OneSplit:  # a hub dataset with a train split only
        def load(self, split: str, data_files: object = None, **kwargs: object) -> list[Problem]:
            if split != "train":
                raise TaskDataError(f"no split {split!r}")
            return [Problem(id=str(i), question=f"{i}+1?", answer=str(i + 1)) for i in range(10)]

    task = split_if_shared(Task(name="OneSplit", source=OneSplit(), verifier=MathVerifier()), train_split="train",
                           eval_split="test", task_kwargs={}, eval_size=200)
    held = heldout_of(task)
    assert held is not None and held.describe().startswith("2 of the 10 rows of OneSplit-v0's source (it has no "
                                                           "'test' split) held out")
    assert len(task.load(split="test")) == 2 and len(task.load(split="train")) == 8
