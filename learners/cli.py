"""The ``dapo-env`` command line: ``dapo-env train``, ``dapo-env eval`` and ``dapo-env prepare-model``.

``dapo-env train`` with no arguments runs the README's main job (the ``tiny`` preset): a tiny random-init
model, warm-started on Arithmetic-v0, trained with DAPO on the CPU in a few minutes. With ``--model PATH``
the default preset is ``dapo`` (the paper's settings).

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
    p.add_argument("--verifier", help="custom verifier 'module:function' replacing the task's")
    p.add_argument("--engine", choices=["hf", "vllm"], help="rollout engine (default hf)")
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
    p = sub.add_parser(
        "eval", help="pass@k / avg@k / maj@k / greedy accuracy of a checkpoint, with one record per sample",
        description="Evaluate a checkpoint. Inside a run folder (runs/<name>/checkpoints/step_N/model, or runs/<name> "
                    "for its newest checkpoint) every setting defaults to the run's own held-out evaluation (task, task "
                    "knobs, split, size, chat template, verifier, response limit, precision, engine); flags override. "
                    "Writes samples.jsonl and summary.json; rerun the same command to resume a killed eval.")
    p.add_argument("--model", required=True, metavar="PATH",
                   help="a model folder (runs/<name>/checkpoints/step_N/model), a checkpoint or a run folder")
    p.add_argument("--task", help="task name or id (default: the run's; required outside a run folder)")
    p.add_argument("--split", help="split to evaluate (default: the run's eval_split, else test)")
    p.add_argument("--size", help="the first N problems, or 'all' (default: the run's eval_size, else 200)")
    p.add_argument("--n", type=int, default=0, metavar="K",
                   help="sampled responses per problem: pass@k for k = 1, 2, 4, ..., K, avg@K and maj@K "
                        "(default 0: greedy only)")
    p.add_argument("--no-greedy", action="store_true", help="skip the greedy response of each problem")
    p.add_argument("--temperature", type=float, help="temperature of the K samples (default: the run's)")
    p.add_argument("--top-p", type=float, help="nucleus mass of the K samples (default: the run's, else 1.0)")
    p.add_argument("--max-response-tokens", type=int,
                   help="response budget (default: the run's, else min(1024, half the model's context))")
    p.add_argument("--chat-template", action=argparse.BooleanOptionalAction, default=None,
                   help="wrap prompts with the tokenizer's chat template (default: as the run did)")
    p.add_argument("--verifier", help="custom verifier 'module:function' replacing the task's")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="task knobs, merged over the run's, e.g. max_value=50 or data_files=path/test.jsonl")
    p.add_argument("--engine", help="rollout engine: hf or vllm (default: the run's, else hf)")
    p.add_argument("--precision", choices=["fp32", "bf16"], help="default: the run's")
    p.add_argument("--device", help="cpu, cuda, ... (default: the run's, else cpu)")
    p.add_argument("--seed", type=int, help="sampling seed (default 0)")
    p.add_argument("--batch-size", type=int, help="responses per generation call (default 256, as the trainer)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="eval folder (default: <run>/evals/step_<N>-<task>-<split>-n<K>, else ./evals/...)")
    p.add_argument("--overwrite", action="store_true", help="start the eval folder over instead of resuming it")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def eval_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The eval settings the ``eval`` flags set (everything else comes from the run, see ``eval_run``)."""
    out: dict[str, Any] = {}
    for flag in ("task", "split", "temperature", "top_p", "max_response_tokens", "chat_template", "verifier",
                 "engine", "precision", "seed", "batch_size"):
        if getattr(args, flag) is not None:
            out[flag] = getattr(args, flag)
    if args.size is not None:
        if args.size != "all" and not args.size.isdigit():
            raise ValueError(f"--size {args.size!r}: pass a number of problems or 'all'")
        out["size"] = None if args.size == "all" else int(args.size)
    if args.set:
        out["task_kwargs"] = parse_overrides(args.set)
    out["n"] = args.n
    if args.no_greedy:
        out["greedy"] = False
    return out


def _report_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write a run folder's self-contained HTML report (curves, evals, samples)")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder, e.g. runs/<name>")
    p.add_argument("--out", type=Path, help="HTML file to write (default RUN_DIR/report.html)")


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
    return build_config(preset_name, config_file=args.config, overrides=flags), False


def _cmd_train(args: argparse.Namespace) -> int:
    from .trainer import train

    cfg, resume = config_from_args(args)
    from .distributed import launched_with_torchrun

    if launched_with_torchrun():  # torchrun: data-parallel over its ranks; only rank 0 prints
        from .distributed import train_distributed

        rank0 = os.environ.get("RANK", "0") == "0"
        result = train_distributed(cfg, resume=resume, fsdp=args.fsdp)
        if rank0:
            print(f"dapo-env train: {os.environ['WORLD_SIZE']} ranks, run files: {result.run_dir}", flush=True)
        return 0
    if args.fsdp:
        raise ValueError("--fsdp needs several processes: launch with torchrun --nproc-per-node N")
    print(f"dapo-env train: preset={cfg.preset_name} task={cfg.task} model={cfg.model or 'tiny (random init)'} "
          f"run_dir={cfg.run_dir}", flush=True)
    result = train(cfg, resume=resume)
    start, end = result.initial_eval_accuracy, result.final_eval_accuracy
    print(f"held-out accuracy ({cfg.eval_split}, {cfg.eval_size} problems): "
          f"{start if start is None else f'{start:.3f}'} -> {end if end is None else f'{end:.3f}'}")
    print(f"run files: {result.run_dir} (config.json, metrics.jsonl, curves.png, checkpoints/)")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from .eval_run import evaluate_checkpoint

    try:
        outcome = evaluate_checkpoint(args.model, out_dir=args.out, device=args.device, overwrite=args.overwrite,
                                      progress=not args.no_progress, **eval_overrides(args))
    except (FileNotFoundError, KeyError) as exc:  # a missing folder, an unknown task: one line, no traceback
        raise ValueError(exc.args[0] if exc.args else str(exc)) from None
    except KeyboardInterrupt:
        print("dapo-env eval: interrupted; rerun the same command to resume (finished problems are kept)",
              file=sys.stderr)
        return 130
    summary = outcome.summary
    settings = summary["settings"]
    what = "greedy" if settings["greedy"] else ""
    if settings["n"]:
        what += f"{' + ' if what else ''}{settings['n']} samples (temperature {settings['temperature']})"
    print(f"dapo-env eval: {settings['task']} {settings['split']}, {summary['problems']} problems, {what}")
    print(f"{'metric':<10} {'value':>7}   95% CI")
    for name, m in summary["metrics"].items():
        print(f"{name:<10} {m['value']:7.3f}   [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]")
    for note in summary["notes"]:
        print(f"note: {note}")
    print(f"files: {outcome.samples_path} (one record per response), {outcome.summary_path}")
    metrics = outcome.metrics
    accuracy = metrics.get("greedy", metrics.get(f"avg@{settings['n']}"))
    print(json.dumps({"model": summary["model"], "task": settings["task"], "split": settings["split"],
                      "size": summary["problems"], "n": settings["n"], "accuracy": accuracy, "metrics": metrics,
                      "out": str(outcome.out_dir)}))
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
    _report_parser(sub)
    sub.add_parser("prepare-model", add_help=False,
                   help="write a GGUF model (default: SmolLM2-135M-Instruct) as a local HF folder for --model")
    args = parser.parse_args(argv)
    try:
        if args.command == "report":
            from .report import write_report

            print(f"dapo-env report: {write_report(args.run_dir, out=args.out)}")
            return 0
        return _cmd_train(args) if args.command == "train" else _cmd_eval(args)
    except ValueError as exc:
        print(f"dapo-env {args.command}: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["config_from_args", "eval_overrides", "main", "parse_overrides"]
