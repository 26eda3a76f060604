"""Held-out samples of a run's checkpoints, written as eval records, then the run's HTML report.

The trainer writes ``eval/step_<N>.jsonl`` at every evaluation; for a run folder without them (an older
run), this script makes them: for every kept checkpoint (and step 0: the weights at the start of RL,
``init_weights.pt``) it decodes greedily the run's own held-out problems (``eval_split``, first
``eval_size``, same task knobs, prompt template and token limit as the run's ``eval/accuracy``) through the
project's one evaluation function (``dapo_env.learners.evaluation.evaluate``) and writes
``eval/step_<N>.jsonl`` (one ``EvalSample`` per problem; a truncated response counts as wrong). Then it
writes ``report.html``. CPU is enough for the tiny default run (seconds per checkpoint).

Run:
    python examples/run_report.py runs/<name> [--size 200] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo_env.learners.run.checkpoint import list_checkpoints
from dapo_env.learners.config import TrainConfig
from dapo_env.learners.engines import HFEngine
from dapo_env.learners.evaluation import evaluate, load_eval_problems
from dapo_env.learners.run.report import write_report
from dapo_env.learners.rollout.setup import resolve_task
from dapo_env.learners.run.run_folder import EvalSample, eval_samples_path, write_eval_samples


def eval_samples(model: Any, tokenizer: Any, cfg: TrainConfig, *, size: int, device: str) -> list[EvalSample]:
    """Greedy samples of ``model`` on the first ``size`` problems of the run's eval split, verified."""
    task = resolve_task(cfg)
    problems = load_eval_problems(task, split=cfg.eval_split, size=size, task_kwargs=dict(cfg.task_kwargs))
    engine = HFEngine(model.to(torch.device(device)), tokenizer, device=device)
    result = evaluate(engine, task, problems, max_response_tokens=cfg.max_response_tokens,
                      tokenizer=tokenizer if cfg.chat_template else None)
    return list(result.records)


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--size", type=int, default=None, help="held-out problems (default: the run's eval_size)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    run: Path = args.run_dir
    cfg = TrainConfig.from_dict(json.loads((run / "config.json").read_text()))
    checkpoints = list_checkpoints(run)
    if not checkpoints:
        raise SystemExit(f"{run}: no checkpoints/step_<N>/ folders; train with checkpoint_every > 0")
    size = args.size or cfg.eval_size
    todo: list[tuple[int, Path, Path | None]] = [(int(c.name.split("_")[1]), c / "model", None) for c in checkpoints]
    if (run / "init_weights.pt").exists():  # step 0: the start of RL, in the architecture of any checkpoint
        todo.insert(0, (0, checkpoints[0] / "model", run / "init_weights.pt"))
    for step, model_dir, weights in todo:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        if weights is not None:
            model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True), strict=False)
        samples = eval_samples(model.eval(), tokenizer, cfg, size=size, device=args.device)
        path = write_eval_samples(eval_samples_path(run, step), samples)
        print(f"step {step}: accuracy {sum(s.correct for s in samples) / len(samples):.3f} -> {path}", flush=True)
    report = write_report(run)
    print(f"report: {report}")
    return report


if __name__ == "__main__":
    main()
