"""``dapo-env eval`` on real checkpoints of a short default-preset run: run defaults, metrics recomputed
independently from the sample file, resume after a hard kill, refusals."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from dapo_env.learners.cli import main
from dapo_env.learners.config import preset
from dapo_env.learners.run.eval_run import locate_checkpoint, read_samples
from dapo_env.learners.metrics import read_metrics
from dapo_env.learners.run.report import write_report
from dapo_env.learners.run.run_folder import eval_samples_path, eval_summary_path, read_eval_samples, read_eval_summary
from dapo_env.learners.trainer import train

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default (tiny) preset, shortened: a brief warm start, 2 RL steps, 24 held-out problems."""
    out = tmp_path_factory.mktemp("runs")
    cfg = preset("tiny", out_dir=str(out), name="short", max_steps=2, warmstart_steps=40, batch_size=4, group_size=4,
                 mini_batch_size=2, micro_batch_size=16, eval_size=24, eval_every=1, checkpoint_every=1,
                 keep_checkpoints=2, progress=False)
    train(cfg)
    return out / "short"


def _final_model(run: Path) -> Path:
    return run / "checkpoints" / "step_000002" / "model"


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_eval_with_no_task_flags_reproduces_the_runs_final_held_out_accuracy(run: Path, capsys) -> None:
    held_out = [r["eval/accuracy"] for r in read_metrics(run / "metrics.jsonl") if "eval/accuracy" in r]
    assert main(["eval", "--model", str(_final_model(run)), "--no-progress"]) == 0
    report = _last_json(capsys.readouterr().out)
    assert report["task"] == "Largest-v0" and report["size"] == 24 and report["n"] == 0
    assert report["accuracy"] == held_out[-1]
    folder = Path(report["out"])
    assert folder == run / "evals" / "step_000002-Largest-v0-test-n0"
    settings = json.loads((folder / "eval.json").read_text())["settings"]
    config = json.loads((run / "config.json").read_text())
    assert settings["task_kwargs"] == config["task_kwargs"] and settings["max_response_tokens"] == 16
    records = read_samples(folder / "samples.jsonl")
    assert [r["index"] for r in records] == list(range(24)) and all(r["greedy"] for r in records)
    assert records[0]["prompt"].startswith("Largest of ")
    trainer_records = read_eval_samples(eval_samples_path(run, 2))  # the trainer's own final evaluation
    fields = ("problem_id", "prompt", "completion", "extracted", "correct", "reason", "tokens", "finish_reason")
    assert [{f: r[f] for f in fields} for r in records] == [{f: getattr(r, f) for f in fields} for r in trainer_records]


def test_pass_at_k_avg_and_maj_from_the_sample_file_match_an_independent_computation(run: Path, capsys) -> None:
    assert main(["eval", "--model", str(run), "--n", "4", "--size", "16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    report = _last_json(out)
    folder = Path(report["out"])
    records = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    summary = json.loads((folder / "summary.json").read_text())
    sampled: dict[str, list[dict]] = {}
    for r in records:
        if not r["greedy"]:
            sampled.setdefault(r["problem_id"], []).append(r)
    assert len(sampled) == 16 and all(sorted(r["sample"] for r in g) == [0, 1, 2, 3] for g in sampled.values())
    for k in (1, 2, 4):  # pass@k: the share of k-subsets of the 4 samples holding a correct one
        per_problem = []
        for group in sampled.values():
            subsets = list(itertools.combinations([r["correct"] for r in group], k))
            per_problem.append(Fraction(sum(any(s) for s in subsets), len(subsets)))
        assert summary["metrics"][f"pass@{k}"]["value"] == pytest.approx(float(sum(per_problem) / 16), abs=1e-12)
    avg = Fraction(sum(r["correct"] for g in sampled.values() for r in g), 64)
    assert summary["metrics"]["avg@4"]["value"] == pytest.approx(float(avg), abs=1e-12)
    majority = 0  # Largest-v0 grades with the DAPO rule: one answer = one normalised string; ties: first seen
    for group in sampled.values():
        answers = [r["extracted"] for r in sorted(group, key=lambda r: r["sample"]) if r["extracted"] is not None]
        if answers:
            counts = Counter(answers)
            top = max(counts.values())
            winner = next(a for a in answers if counts[a] == top)
            majority += next(r["correct"] for r in group if r["extracted"] == winner)
    assert summary["metrics"]["maj@4"]["value"] == pytest.approx(majority / 16, abs=1e-12)
    greedy = [r["correct"] for r in records if r["greedy"]]
    assert len(greedy) == 16 and summary["metrics"]["greedy"]["value"] == pytest.approx(sum(greedy) / 16)
    for metric in summary["metrics"].values():
        low, high = metric["ci95"]
        assert 0.0 <= low <= metric["value"] <= high <= 1.0
    assert f"run summary: {eval_summary_path(run, 2)}" in out
    published = read_eval_summary(eval_summary_path(run, 2))  # the run's own held-out set: the report's table
    assert published.metrics == {k: (v["value"], tuple(v["ci95"])) for k, v in summary["metrics"].items()}
    assert published.info["n"] == 4 and published.info["problems"] == 16
    assert 'id="summary-table"' in write_report(run).read_text() and "maj@4" in (run / "report.html").read_text()


KILLER = textwrap.dedent("""
    import os, signal, sys
    from dapo_env.learners.run import eval_run

    calls = 0
    real = eval_run.run_eval

    def run_eval(engine, *args, **kwargs):
        generate = engine.generate

        def dying(*a, **k):  # the third generation call never returns: SIGKILL, no cleanup at all
            global calls
            calls += 1
            if calls == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return generate(*a, **k)

        engine.generate = dying
        return real(engine, *args, **kwargs)

    eval_run.run_eval = run_eval
    from dapo_env.learners.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def test_a_killed_eval_resumes_and_writes_what_an_uninterrupted_one_writes(run: Path, tmp_path: Path) -> None:
    args = ["eval", "--model", str(_final_model(run)), "--n", "3", "--size", "12", "--batch-size", "6",
            "--no-progress"]
    killed = subprocess.run([sys.executable, "-c", KILLER, *args, "--out", str(tmp_path / "a")], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    partial = read_samples(tmp_path / "a" / "samples.jsonl")
    assert 0 < len(partial) < 12 * 4 and not (tmp_path / "a" / "summary.json").exists()
    with (tmp_path / "a" / "samples.jsonl").open("a") as f:
        f.write('{"problem_id": "test-11", "prompt": "Lar')  # a write cut short by the kill
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0

    def key(r: dict) -> tuple:
        return (r["index"], r["greedy"], r["sample"])

    resumed = sorted(read_samples(tmp_path / "a" / "samples.jsonl"), key=key)
    fresh = sorted(read_samples(tmp_path / "b" / "samples.jsonl"), key=key)
    assert len(resumed) == 12 * 4 and resumed == fresh
    summaries = [json.loads((tmp_path / d / "summary.json").read_text())["metrics"] for d in "ab"]
    assert summaries[0] == summaries[1]


def test_other_settings_or_other_weights_in_an_eval_folder_are_refused(run: Path, tmp_path: Path, capsys) -> None:
    out = ["--out", str(tmp_path / "e"), "--size", "4", "--no-progress"]
    assert main(["eval", "--model", str(_final_model(run)), "--n", "2", *out]) == 0
    capsys.readouterr()
    assert main(["eval", "--model", str(_final_model(run)), "--n", "2", "--temperature", "0.5", *out]) == 2
    err = capsys.readouterr().err
    assert "temperature was 1.0, now 0.5" in err and "--overwrite" in err
    older = run / "checkpoints" / "step_000001" / "model"
    assert main(["eval", "--model", str(older), "--n", "2", *out]) == 2
    assert "weights differ" in capsys.readouterr().err
    assert main(["eval", "--model", str(older), "--n", "2", "--overwrite", *out]) == 0
    assert json.loads((tmp_path / "e" / "summary.json").read_text())["checkpoint_step"] == 1
    assert main(["eval", "--model", str(older), "--n", "2", *out[:2], "--size", "6", "--no-progress"]) == 0
    assert len(read_samples(tmp_path / "e" / "samples.jsonl")) == 6 * 3  # a larger --size extends the folder


def test_a_model_outside_a_run_folder_needs_a_task(run: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    model = tmp_path / "my-model"
    shutil.copytree(_final_model(run), model)
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--model", str(model), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--task" in err
    assert main(["eval", "--model", str(model), "--task", "Arithmetic-v0", "--size", "3", "--max-response-tokens",
                 "8", "--no-progress"]) == 0
    report = _last_json(capsys.readouterr().out)
    assert report["size"] == 3 and Path(report["out"]) == Path("evals/my-model-Arithmetic-v0-test-n0")
    assert (tmp_path / report["out"] / "summary.json").exists()


def test_flags_override_the_run_and_knobs_merge(run: Path, tmp_path: Path, capsys) -> None:
    base = ["eval", "--model", str(run), "--size", "4", "--no-progress", "--out"]
    summary_file = eval_summary_path(run, 2)
    before = summary_file.read_text() if summary_file.exists() else None
    assert main([*base, str(tmp_path / "k"), "--set", "max_value=5"]) == 0
    settings = json.loads((tmp_path / "k" / "eval.json").read_text())["settings"]
    assert settings["task_kwargs"] == {"min_value": 0, "max_value": 5, "min_count": 5, "max_count": 6,
                                       "uniform_answer": True}
    assert all(max(map(int, r["prompt"][len("Largest of "):-1].split())) <= 5
               for r in read_samples(tmp_path / "k" / "samples.jsonl"))
    assert main([*base, str(tmp_path / "t"), "--task", "Arithmetic-v0", "--split", "train"]) == 0
    settings = json.loads((tmp_path / "t" / "eval.json").read_text())["settings"]
    assert (settings["task"], settings["task_kwargs"], settings["split"]) == ("Arithmetic-v0", {}, "train")
    assert read_samples(tmp_path / "t" / "samples.jsonl")[0]["prompt"].startswith("Compute ")
    after = summary_file.read_text() if summary_file.exists() else None
    assert after == before  # other problems than the run's held-out set are not published into the run
    capsys.readouterr()
    bads = [(["--task", "Nope-v0"], "unknown task"), (["--size", "ten"], "--size"),
            (["--n", "4", "--temperature", "0"], "temperature")]
    if not torch.cuda.is_available():
        bads.append((["--device", "cuda"], "no CUDA device here (the run trained on 'cpu'); pass --device cpu"))
    for bad, message in bads:
        assert main([*base, str(tmp_path / "bad"), *bad]) == 2
        assert message in capsys.readouterr().err


def test_locate_checkpoint_accepts_a_run_a_step_or_a_model_folder(run: Path) -> None:
    final = locate_checkpoint(run)
    assert (final.model_dir, final.run_dir, final.step) == (_final_model(run), run, 2)
    assert locate_checkpoint(run / "checkpoints" / "step_000001").step == 1
    assert locate_checkpoint(_final_model(run)).run_config["task"] == "Largest-v0"


def test_a_lora_adapter_folder_is_evaluated_through_the_lora_module(run: Path, tmp_path: Path) -> None:
    """A checkpoint folder holding a peft adapter (adapter_config.json) is base model + adapter; it evaluates
    like the merged model. Without peft installed the error names the install command."""
    import importlib.util

    from dapo_env.learners.run.eval_run import evaluate_checkpoint

    args = dict(task="Largest-v0", size=6, max_response_tokens=8, progress=False)
    if importlib.util.find_spec("peft") is None:  # a fresh `pip install -e ".[test]"` has no peft
        import json

        import torch
        from safetensors.torch import save_file

        folder = tmp_path / "adapter"
        folder.mkdir()
        (folder / "adapter_config.json").write_text(json.dumps({
            "peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"],
            "base_model_name_or_path": str(_final_model(run).resolve())}))
        save_file({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(2, 8)},
                  str(folder / "adapter_model.safetensors"))
        with pytest.raises(ImportError, match=r"dapo-env\[lora\]"):
            evaluate_checkpoint(tmp_path / "adapter", out_dir=tmp_path / "e", **args)
        pytest.skip("the adapter round trip needs peft: pip install -e '.[lora]'")
    import torch
    from transformers import AutoModelForCausalLM

    from dapo_env.learners.models import lora

    base = _final_model(run)
    model = lora.add_lora(AutoModelForCausalLM.from_pretrained(str(base)), lora.LoraSettings(rank=2))
    with torch.no_grad():  # a non-zero adapter, so it changes the outputs
        for name, tensor in lora.adapter_state_dict(model).items():
            tensor.copy_(torch.randn(tensor.shape, generator=torch.Generator().manual_seed(len(name))) * 0.5)
    lora.save_adapter(model, tmp_path / "adapter", base_model=str(base.resolve()))
    lora.merged_model(model).save_pretrained(tmp_path / "merged")
    shutil.copy(base / "tokenizer.json", tmp_path / "merged")
    shutil.copy(base / "tokenizer_config.json", tmp_path / "merged")
    adapter = evaluate_checkpoint(tmp_path / "adapter", out_dir=tmp_path / "a", **args)
    merged = evaluate_checkpoint(tmp_path / "merged", out_dir=tmp_path / "m", **args)
    plain = evaluate_checkpoint(shutil.copytree(base, tmp_path / "plain"), out_dir=tmp_path / "p", **args)

    def texts(outcome) -> list[str]:
        return [r["completion"] for r in read_samples(outcome.samples_path)]

    assert texts(adapter) == texts(merged) and texts(adapter) != texts(plain)


def test_a_multi_turn_run_is_evaluated_with_its_own_prompt_and_episode_budgets(tmp_path: Path, capsys) -> None:
    """The guess preset's run replaces the task's prompt (the task's own does not fit the tiny model's
    context) and bounds its episodes: eval with no flags uses all of it and reproduces the run's accuracy."""
    cfg = preset("guess", out_dir=str(tmp_path), name="g", max_steps=1, warmstart_steps=5, eval_size=12,
                 eval_every=1, checkpoint_every=1, progress=False)
    train(cfg)
    run = tmp_path / "g"
    held_out = [r["eval/accuracy"] for r in read_metrics(run / "metrics.jsonl") if "eval/accuracy" in r]
    assert main(["eval", "--model", str(run / "checkpoints" / "step_000001" / "model"), "--no-progress"]) == 0
    report = _last_json(capsys.readouterr().out)
    assert report["task"] == "GuessNumber-v0" and report["accuracy"] == held_out[-1]
    settings = json.loads((Path(report["out"]) / "eval.json").read_text())["settings"]
    config = json.loads((run / "config.json").read_text())
    assert settings["prompt_template"] == config["prompt_template"] is not None
    assert (settings["max_turns"], settings["max_episode_tokens"]) == (config["max_turns"], config["max_episode_tokens"])
