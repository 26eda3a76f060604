"""The CLI as a newcomer meets it: help texts with defaults, `dapo-env tasks`, one-line errors (tracebacks
only with --debug), Ctrl-C without a traceback, and `--verifier module:function` found from the working
directory even where the console script leaves it off sys.path."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from dapo_env.learners.cli import build_parser, main, task_kind, task_source
from dapo_env.tasks import Task, get_task, list_tasks, register_task, unregister_task
from dapo_env.verifiers import MathVerifier

REPO = Path(__file__).resolve().parents[2]
FAST = ["--set", "warmstart_steps=0", "batch_size=4", "group_size=4", "mini_batch_size=2", "micro_batch_size=8",
        "tiny_hidden_size=64", "tiny_heads=2", "tiny_layers=1", "eval_size=4", "max_response_tokens=8",
        "overlong_cache_length=2", "num_threads=1", "checkpoint_every=1", "eval_every=0", "plot_every=0"]
# What the `dapo-env` console script does: import the CLI with the working directory NOT on sys.path.
CONSOLE_SCRIPT = ("import os, sys; sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]; "
                  "from dapo_env.learners.cli import main; raise SystemExit(main(sys.argv[1:]))")


def _console(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _help_entries(command: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """``{"--flag": "its help text"}`` from ``dapo-env COMMAND --help``."""
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out.split("options:", 1)[1]
    entries: dict[str, str] = {}
    for block in re.split(r"\n(?=  -)", text):
        flags = re.findall(r"(?<![\w-])(--?[\w-]+)", block.strip().split("  ")[0])
        if flags:
            entries[flags[-1]] = " ".join(block.split())
    return entries


# --- help ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["train", "eval", "tasks", "prepare-model"])
def test_every_flag_has_help_that_shows_its_default(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    entries = _help_entries(command, capsys)
    assert len(entries) >= 3
    for flag, text in entries.items():
        if flag == "--help":
            continue
        described = text.split(flag, 1)[1]
        assert len(described.split()) >= 3, f"{command} {flag} has no help text"
        assert "default" in described or "required" in described, f"{command} {flag} does not show its default"


def test_train_help_names_the_preset_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    entries = _help_entries("train", capsys)
    assert "--debug" in entries and "--debug" in _help_entries("eval", capsys)
    assert "(default: 0)" in entries["--seed"]
    assert "tiny: 200" in entries["--max-steps"] and "tiny: Largest-v0" in entries["--task"]
    assert "working directory" in entries["--verifier"] and "VerifyResult" in entries["--verifier"]


def test_lora_is_first_class_in_train(capsys: pytest.CaptureFixture[str]) -> None:
    from dapo_env.learners.cli import config_from_args

    entries = _help_entries("train", capsys)
    assert "(default: 0)" in entries["--lora-rank"] and "dapo-env[lora]" in entries["--lora-rank"]
    assert "(default: 32.0)" in entries["--lora-alpha"] and "q_proj,v_proj" in entries["--lora-target-modules"]
    args = build_parser().parse_args(["train", "--lora-rank", "8", "--lora-alpha", "16",
                                      "--lora-target-modules", "q_proj,v_proj"])
    cfg, _ = config_from_args(args)
    assert (cfg.lora_rank, cfg.lora_alpha, cfg.lora_target_modules) == (8, 16.0, ("q_proj", "v_proj"))
    assert config_from_args(build_parser().parse_args(["train"]))[0].lora is None  # full fine-tuning by default
    with pytest.raises(ValueError, match="lora_target_modules.*set lora_rank >= 1"):
        config_from_args(build_parser().parse_args(["train", "--lora-target-modules", "q_proj"]))


def test_flags_parse_as_documented() -> None:
    parser = build_parser()
    assert parser.parse_args(["tasks", "--json"]).json is True
    args = parser.parse_args(["train", "--verifier", "mymodule:my_verify", "--max-steps", "3"])
    assert (args.verifier, args.max_steps, args.debug) == ("mymodule:my_verify", 3, False)
    repeated = parser.parse_args(["train", "--set", "lr=1e-5", "--seed", "2", "--set", "group_size=4"])
    assert repeated.set == ["lr=1e-5", "group_size=4"]  # a second --set adds to the first, never drops it


# --- dapo-env tasks -----------------------------------------------------------------------------------
def test_tasks_lists_every_registered_id_with_kind_and_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["ID", "KIND", "TURNS", "SOURCE", "ORIGIN"]
    table = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    assert set(table) == set(list_tasks())
    assert table["DAPOMath-v0"] == ["math", "single-turn", "hub:BytedTsinghua-SIA/DAPO-Math-17k"]
    assert table["MBPP-v0"] == ["code", "single-turn", "hub:google-research-datasets/mbpp"]
    assert table["Arithmetic-v0"] == ["procedural", "single-turn", "procedural:ArithmeticConfig"]
    assert table["GuessNumber-v0"] == ["procedural", "multi-turn", "procedural:GuessNumberConfig"]


def test_tasks_json_includes_a_task_registered_later(capsys: pytest.CaptureFixture[str]) -> None:
    base = get_task("GSM8K-v0")
    register_task(Task(name="NewcomerMath", source=base.source, verifier=MathVerifier(), description="mine"))
    try:
        assert main(["tasks", "--json"]) == 0
        rows = {row["id"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    finally:
        unregister_task("NewcomerMath-v0")
    assert rows["NewcomerMath-v0"] == {"id": "NewcomerMath-v0", "kind": "math", "turns": "single-turn",
                                       "source": "hub:openai/gsm8k (main)", "description": "mine", "origin": "python"}
    assert rows["GSM8K-v0"]["origin"] == "built-in"
    assert rows["GuessNumber-v0"]["turns"] == "multi-turn" and rows["GuessNumber-v0"]["kind"] == "procedural"


def test_kind_comes_from_the_task() -> None:
    own = types.SimpleNamespace(kind="game", source=None, verifier=None)
    assert task_kind(own) == "game"  # a task that says what it is is taken at its word
    custom = Task(name="Custom", source=get_task("GSM8K-v0").source, verifier=lambda response, answer: None)
    assert task_kind(custom) == "custom" and task_source(custom).startswith("hub:openai/gsm8k")


# --- errors -------------------------------------------------------------------------------------------
def _one_error_line(err: str, command: str = "train") -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"dapo-env {command}: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--task", "NoSuchTask-v0"], "registered tasks: "),                                     # KeyError
        (["--config", "no-such-config.yaml"], "no-such-config.yaml: no such file"),               # FileNotFoundError
        (["--set", "group_size=1"], "group_size"),                                                # ValueError
        (["--task", "Arithmetic-v0", "--set", "task_kwargs={bogus_knob: 1}"], "valid options"),   # TypeError
        (["--verifier", "no_such_module_here:fn"], "working directory"),                          # before any work
    ],
)
def test_user_errors_are_one_line_naming_the_fix(args: list[str], says: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--out-dir", str(tmp_path), "--no-progress", "--max-steps", "1", *FAST, *args]) == 2
    assert says in _one_error_line(capsys.readouterr().err)


def test_a_missing_extra_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, installed or not
    assert main(["train", "--engine", "vllm", "--out-dir", str(tmp_path), "--no-progress", "--max-steps", "1",
                 *FAST]) == 2
    assert "pip install" in _one_error_line(capsys.readouterr().err)


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="NoSuchTask"):
        main(["train", "--task", "NoSuchTask-v0", "--out-dir", str(tmp_path), "--debug", *FAST])


def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dapo_env.learners.cli", "train", "--out-dir", str(tmp_path), "--run-name", "r",
         "--no-progress", "--max-steps", "100000", *FAST],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert "run_dir=" in proc.stdout.readline()  # inside the command: the interrupt is its business now
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole process group
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert "Traceback" not in err and "interrupted" in err


# --- --verifier from the working directory ------------------------------------------------------------
def test_verifier_module_resolves_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "myverify.py").write_text(
        "def even_length(response, reference):\n"
        "    return len(response) % 2 == 0\n")
    train = _console(["train", "--run-name", "r", "--max-steps", "1", "--no-progress",
                      "--verifier", "myverify:even_length", *FAST], cwd=tmp_path)
    assert train.returncode == 0, train.stderr
    config = json.loads((tmp_path / "runs" / "r" / "config.json").read_text())
    assert config["verifier"] == "myverify:even_length"
    model = tmp_path / "runs" / "r" / "checkpoints" / "step_000001" / "model"
    evaluated = _console(["eval", "--model", str(model), "--task", "Arithmetic-v0", "--size", "4",
                          "--max-response-tokens", "8", "--verifier", "myverify:even_length"], cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["size"] == 4
    elsewhere = _console(["eval", "--model", str(model), "--verifier", "myverify:even_length"], cwd=tmp_path / "runs")
    assert evaluated.returncode == 0 and elsewhere.returncode == 2
    assert "run from the folder that holds myverify.py" in _one_error_line(elsewhere.stderr, "eval")
