"""The ``dapo-env`` command line: ``dapo-env train``, ``dapo-env eval`` and ``dapo-env prepare-model``.

``dapo-env train`` with no arguments runs the README's main job (the ``tiny`` preset): a tiny random-init
model, warm-started on Largest-v0, trained with DAPO on the CPU in a few minutes. A preset is an algorithm
(``dapo``, ``grpo``) on a scale: without ``--model`` every preset runs at the tiny model's scale; with
``--model PATH`` at the paper's (the default preset is then ``dapo``).

Example:
    >>> parse_overrides(["group_size=8", "overlong_filter=true", "lr=1e-4", "lr_schedule=cosine"])
    {'group_size': 8, 'overlong_filter': True, 'lr': 0.0001, 'lr_schedule': 'cosine'}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import PRESETS, TrainConfig, build_config
from .engine import engine_names


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs, values parsed as YAML scalars (numbers, booleans, null, lists)."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--set {item!r}: use key=value, e.g. --set group_size=8")
        key, _, value = item.partition("=")
        parsed = yaml.safe_load(value)
        if isinstance(parsed, str):  # YAML 1.1 reads "3e-4" as a string; numbers win
            try:
                parsed = float(parsed)
            except ValueError:
                pass
        out[key.strip()] = parsed
    return out


def _train_parser(sub: Any) -> None:
    p = sub.add_parser("train", help="train a model with DAPO (no arguments: the tiny default run)",
                       description="Train with DAPO. Precedence: preset < --config file < flags/--set.")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="named settings (default: tiny, or dapo when --model is given)")
    p.add_argument("--config", type=Path, help="YAML/TOML/JSON file of TrainConfig fields (may set 'preset')")
    p.add_argument("--task", help="registered task name or Gymnasium id, e.g. Arithmetic-v0")
    p.add_argument("--model", help="local Hugging Face model folder (never downloaded)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run folder of the same name (a fresh run otherwise refuses one)")
    p.add_argument("--verifier", help="custom verifier 'module:function' replacing the task's")
    p.add_argument("--engine", choices=engine_names(), help="rollout engine (default hf)")
    p.add_argument("--run-name", help="run folder name (default <task>-<preset>-s<seed>)")
    p.add_argument("--out-dir", help="parent folder of runs (default ./runs)")
    p.add_argument("--seed", type=int)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--device", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override any config field")
    p.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    p.add_argument("--fsdp", action="store_true",
                   help="under torchrun: shard the learner with FSDP2 (see docs/scaling.md)")


def _eval_parser(sub: Any) -> None:
    p = sub.add_parser("eval", help="accuracy of a model on a task split")
    p.add_argument("--model", required=True, help="local HF model folder (e.g. a run's checkpoints/step_N/model)")
    p.add_argument("--task", default="Arithmetic-v0")
    p.add_argument("--split", default="test")
    p.add_argument("--size", type=int, default=200, help="number of problems")
    p.add_argument("--max-response-tokens", type=int, default=None,
                   help="response budget in tokens (default: min(1024, half the model's context))")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--verifier", help="custom verifier 'module:function'")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="task knobs, e.g. max_value=50")


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, bool]:
    """The run's config and whether to resume, from parsed ``train`` arguments."""
    flags: dict[str, Any] = {}
    for flag, field in (("task", "task"), ("model", "model"), ("verifier", "verifier"), ("engine", "engine"),
                        ("run_name", "name"), ("out_dir", "out_dir"), ("seed", "seed"),
                        ("max_steps", "max_steps"), ("device", "device")):
        value = getattr(args, flag)
        if value is not None:
            flags[field] = value
    flags.update(parse_overrides(args.set))
    if args.no_progress:
        flags["progress"] = False
    if args.resume is not None:
        run_dir = Path(args.resume)
        cfg_file = run_dir / "config.json"
        if not cfg_file.exists():
            raise SystemExit(f"--resume {run_dir}: no config.json there; pass the folder of a run (runs/<name>)")
        cfg = TrainConfig.from_dict(json.loads(cfg_file.read_text()))
        flags.update(out_dir=str(run_dir.parent), name=run_dir.name)
        return cfg.with_overrides(flags), True
    preset_name = args.preset or ("dapo" if args.model else "tiny")
    scale = None if args.model else "tiny"  # without a model every preset runs at the tiny model's scale
    return build_config(preset_name, scale=scale, config_file=args.config, overrides=flags), False


def _cmd_train(args: argparse.Namespace) -> int:
    from .trainer import TrainingInterrupted, train

    cfg, resume = config_from_args(args)
    from .distributed import launched_with_torchrun

    try:
        if launched_with_torchrun():  # torchrun: data-parallel over its ranks; only rank 0 prints
            from .distributed import train_distributed

            rank0 = os.environ.get("RANK", "0") == "0"
            result = train_distributed(cfg, resume=resume, overwrite=args.overwrite, fsdp=args.fsdp)
            if rank0:
                print(f"dapo-env train: {os.environ['WORLD_SIZE']} ranks, run files: {result.run_dir}", flush=True)
            return 0
        if args.fsdp:
            raise ValueError("--fsdp needs several processes: launch with torchrun --nproc-per-node N")
        print(f"dapo-env train: preset={cfg.preset_name} task={cfg.task} model={cfg.model or 'tiny (random init)'} "
              f"run_dir={cfg.run_dir}", flush=True)
        result = train(cfg, resume=resume, overwrite=args.overwrite)
    except TrainingInterrupted as stop:
        if os.environ.get("RANK", "0") == "0":
            print(f"dapo-env train: {stop}", file=sys.stderr, flush=True)
        return 130
    start, end = result.initial_eval_accuracy, result.final_eval_accuracy
    print(f"held-out accuracy ({cfg.eval_split}, {cfg.eval_size} problems): "
          f"{start if start is None else f'{start:.3f}'} -> {end if end is None else f'{end:.3f}'}")
    partial = max((r.get("rollout/partial_batches") or 0 for r in result.metrics), default=0)
    if partial:
        print(f"partial batches: {partial} of {cfg.max_steps} steps had fewer than {cfg.batch_size} informative groups "
              f"(dynamic sampling ran out of its {cfg.max_gen_rounds} generation rounds; rollout/partial in metrics.jsonl)")
    print(f"run files: {result.run_dir} (config.json, metrics.jsonl, curves.png, checkpoints/)")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from .batch import autocast_dtype
    from .engine import make_engine
    from .evaluation import evaluate, load_eval_problems
    from .rollout import resolve_task
    from .trainer import build_model

    knobs = parse_overrides(args.set)
    cfg = build_config("dapo", overrides=dict(model=args.model, task=args.task, eval_split=args.split,
                                              eval_size=args.size, device=args.device, verifier=args.verifier,
                                              seed=args.seed, task_kwargs=knobs, overlong_penalty=False))
    model, tok = build_model(cfg)
    positions = getattr(model.config, "max_position_embeddings", None) or 2048
    engine = make_engine("hf", model, tok, device=args.device, autocast_dtype=autocast_dtype(cfg.precision))
    task = resolve_task(cfg)
    problems = load_eval_problems(task, split=args.split, size=args.size, task_kwargs=knobs)
    result = evaluate(engine, task, problems, max_response_tokens=args.max_response_tokens or min(1024, positions // 2),
                      temperature=args.temperature, seed=args.seed)
    print(json.dumps({"model": args.model, "task": args.task, "split": args.split, "size": len(problems),
                      "temperature": args.temperature, "accuracy": result.accuracy}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dapo-env`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["prepare-model"]:  # its own parser: dapo_env.learners.pretrained.main
        from .pretrained import main as prepare_model

        return prepare_model(argv[1:])
    parser = argparse.ArgumentParser(prog="dapo-env", description="Reasoning environments and a DAPO learner.")
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    _eval_parser(sub)
    sub.add_parser("prepare-model", add_help=False,
                   help="write a GGUF model (default: SmolLM2-135M-Instruct) as a local HF folder for --model")
    args = parser.parse_args(argv)
    try:
        return _cmd_train(args) if args.command == "train" else _cmd_eval(args)
    except (ValueError, FileExistsError, FileNotFoundError) as exc:
        print(f"dapo-env {args.command}: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["config_from_args", "main", "parse_overrides"]


if __name__ == "__main__":
    raise SystemExit(main())
