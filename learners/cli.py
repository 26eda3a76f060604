"""The ``dapo-env`` command line: ``train``, ``eval``, ``reverify``, ``serve``, ``tasks`` and ``prepare-model``.

``dapo-env train`` with no arguments runs the README's main job (the ``tiny`` preset): a tiny random-init
model, warm-started on a procedural task, trained with DAPO on the CPU in a few minutes. A preset is an
algorithm (``dapo``, ``grpo``) on a scale: without ``--model`` every preset runs at the tiny model's scale;
with ``--model PATH`` at the paper's (the default preset is then ``dapo``). A fresh run refuses a run
folder that already holds files (``--resume`` continues it, ``--overwrite`` replaces it); Ctrl-C during
training finishes the step, checkpoints it and prints the resume command. ``dapo-env tasks`` lists the
registered task ids with their kind and data source.

A user error (a bad flag value, an unknown task, a missing file or optional extra) ends the command with
one line naming the fix and exit status 2; ``--debug`` shows the traceback instead. Ctrl-C exits with
status 130 and no traceback. ``--verifier module:function`` imports from the working directory first,
as ``python -m`` would (the console script alone does not put it on ``sys.path``).

Example:
    >>> parse_overrides(["group_size=8", "overlong_filter=true", "lr=1e-4", "lr_schedule=cosine"])
    {'group_size': 8, 'overlong_filter': True, 'lr': 0.0001, 'lr_schedule': 'cosine'}
    >>> eval_overrides(build_parser().parse_args(["eval", "--model", "runs/r", "--n", "8", "--size", "all"]))
    {'size': None, 'n': 8}
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import PRESETS, TrainConfig, build_config, preset
from .engine import engine_names

#: What a user can get wrong: reported in one line (exit status 2) unless ``--debug``.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError, LookupError, OSError, ImportError)


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


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default: ``(default: X)`` is added where the text gives none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.nargs == 0 or any(action.default is v for v in (None, argparse.SUPPRESS)):
            return text
        return f"{text} (default: %(default)s)"


def _preset_default(name: str) -> str:
    """``TrainConfig.<name>`` in each preset, e.g. ``'tiny: 200, dapo: 100, grpo: 100'`` (one value if equal)."""
    values = {key: getattr(preset(key), name) for key in sorted(PRESETS, key=lambda k: (k != "tiny", k))}
    distinct = set(map(repr, values.values()))
    if len(distinct) == 1:
        return str(next(iter(values.values())))
    return ", ".join(f"{key}: {value}" for key, value in values.items())


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--debug", action="store_true",
                   help="on an error, show the full traceback (default: a one-line message naming the fix)")
    return p


def _train_parser(sub: Any) -> None:
    p = sub.add_parser("train", help="train a model with DAPO (no arguments: the tiny default run)",
                       description="Train with DAPO. Precedence: preset < --config file < flags/--set.",
                       formatter_class=_HelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="named settings: dapo (the paper's), grpo (naive GRPO baseline), tiny (the CPU default "
                        "run); without --model every preset runs at the tiny model's scale "
                        "(default: tiny, or dapo when --model is given)")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="YAML/TOML/JSON file of TrainConfig fields, may set 'preset' (default: none)")
    p.add_argument("--task", help="registered task id or name, e.g. GSM8K-v0, or a mixture "
                   "'GSM8K-v0:0.7,MyMath-v0:0.3' (each group from one task by weight); `dapo-env tasks` lists them "
                                  f"(default: the preset's, {_preset_default('task')})")
    p.add_argument("--model", metavar="PATH", help="local Hugging Face model folder, never downloaded "
                                                   "(default: a tiny random-init model built locally)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its newest checkpoint (default: start a new run)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run folder of the same name (default: a fresh run refuses one)")
    p.add_argument("--verifier", metavar="MODULE:FUNCTION",
                   help="your verifier, fn(response, reference) -> VerifyResult, bool or score in [0, 1], "
                        "imported from the working directory first (default: the task's)")
    p.add_argument("--engine", choices=engine_names(),
                   help="rollout engine: hf (transformers, CPU/GPU), vllm (optional extra) or auto (vllm where it "
                        "can run) (default: hf)")
    p.add_argument("--server-url", metavar="URL",
                   help="with --engine vllm-server: the server `dapo-env serve` started (sets engine_options.server_url; "
                        "default: $DAPO_SERVER_URL, else the engine starts its own)")
    p.add_argument("--weight-sync", choices=("auto", "file", "nccl"),
                   help="with --engine vllm-server: how pushes reach the server: file (a safetensors file on this "
                        "machine), nccl (vLLM's weight-transfer API; GPU learner and GPU server) or auto (nccl where "
                        "both are on GPUs and the server offers it) (sets engine_options.weight_sync; default: auto)")
    p.add_argument("--run-name", metavar="NAME", help="run folder name (default: <task>-<preset>-s<seed>)")
    p.add_argument("--out-dir", metavar="DIR", help="parent folder of runs (default: runs)")
    p.add_argument("--seed", type=int, help=f"seed of the model init, sampling and data order "
                                            f"(default: {_preset_default('seed')})")
    p.add_argument("--max-steps", type=int, metavar="N",
                   help=f"training steps, one rollout batch each (default: {_preset_default('max_steps')})")
    p.add_argument("--device", help=f"torch device: cpu, cuda, cuda:1, ... (default: {_preset_default('device')})")
    p.add_argument("--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                   help="override any TrainConfig field, e.g. --set group_size=8 lr=1e-5; may be repeated "
                        "(default: none)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: show one)")
    p.add_argument("--fsdp", action="store_true",
                   help="under torchrun: shard the learner with FSDP2, see docs/scaling.md (default: off)")
    p.add_argument("--gradient-checkpointing", action="store_true", default=None,
                   help="recompute the decoder's activations in the backward: memory for long responses "
                        "(default: off)")
    _async_arguments(p)
    _lora_arguments(p)
    _common(p)


def _lora_arguments(p: argparse.ArgumentParser) -> None:
    """LoRA (TrainConfig fields lora_rank, lora_alpha, lora_target_modules; optional extra peft)."""
    p.add_argument("--lora-rank", type=int, metavar="R",
                   help="train a rank-R LoRA adapter on a frozen base (needs pip install 'dapo-env[lora]'); 0 = full "
                        f"fine-tuning (default: {_preset_default('lora_rank')})")
    p.add_argument("--lora-alpha", type=float, metavar="A",
                   help="scale of the adapter's update: lora_alpha / lora_rank "
                        f"(default: {_preset_default('lora_alpha')})")
    p.add_argument("--lora-target-modules", metavar="NAMES",
                   help="comma-separated module names the adapter wraps, e.g. q_proj,v_proj, or all-linear "
                        "(default: the architecture's attention + MLP projections)")


def _async_arguments(p: argparse.ArgumentParser) -> None:
    """Policy loss, rollout correction and asynchronous rollouts (TrainConfig fields of the same names)."""
    from .losses import IS_CORRECTIONS, POLICY_LOSSES

    p.add_argument("--loss", choices=sorted(POLICY_LOSSES),
                   help=f"policy loss: ppo-clip (DAPO's clipped surrogate) or cispo (MiniMax-M1's clipped IS "
                        f"weight), see docs/losses.md (default: {_preset_default('loss')})")
    p.add_argument("--max-staleness", type=int, metavar="K",
                   help="generate in a worker process with weights up to K training steps old while the learner "
                        f"updates; 0 = synchronous (default: {_preset_default('max_staleness')})")
    p.add_argument("--is-correction", choices=sorted(IS_CORRECTIONS),
                   help="importance weights between the rollout engine and the learner: truncate or mask, per "
                        "token or sequence (default: off)")
    p.add_argument("--is-cap", type=float, metavar="C",
                   help=f"bound of --is-correction: min(w, C) or keep [1/C, C] (default: {_preset_default('is_cap')})")


def _eval_parser(sub: Any) -> None:
    p = sub.add_parser(
        "eval", help="pass@k / avg@k / maj@k / greedy accuracy of a checkpoint, with one record per response",
        formatter_class=_HelpFormatter,
        description="Evaluate a checkpoint. Inside a run folder (runs/<name>/checkpoints/step_N/model, or runs/<name> "
                    "for its newest checkpoint) every setting defaults to the run's own held-out evaluation (task, task "
                    "knobs, split, size, chat template, verifier, response limit, precision, engine); flags override. "
                    "Writes samples.jsonl and summary.json; rerun the same command to resume a killed eval.")
    p.add_argument("--model", required=True, metavar="PATH|NAME",
                   help="a model folder (runs/<name>/checkpoints/step_N/model), a checkpoint or a run folder; with "
                        "--endpoint, the served model's name (required, no default)")
    p.add_argument("--endpoint", metavar="URL",
                   help="evaluate the model an OpenAI-compatible server serves (vLLM, SGLang, an API), e.g. "
                        "http://127.0.0.1:8000/v1; the API key is read from $OPENAI_API_KEY (or --api-key-env) "
                        "(default: none, evaluate a local checkpoint)")
    p.add_argument("--concurrency", type=int, default=8, metavar="N",
                   help="with --endpoint: the most requests in flight (default: 8)")
    p.add_argument("--api", choices=["auto", "completions", "chat"], default="auto",
                   help="with --endpoint: the API to use; auto = completions, chat when the server has none "
                        "(default: auto; --chat-template and multi-turn tasks use chat)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="with --endpoint: seconds one attempt of a request may take (default: 120)")
    p.add_argument("--retries", type=int, default=4, metavar="N",
                   help="with --endpoint: retries of a request after a connection error, timeout, 5xx or 429, "
                        "with exponential backoff (default: 4)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="with --endpoint: the environment variable holding the API key (default: OPENAI_API_KEY)")
    p.add_argument("--task", help="registered task id or name, or a mixture 'A-v0:0.7,B-v0:0.3' (summary per task); "
                                  "`dapo-env tasks` lists them (default: the run's; required outside a run folder)")
    p.add_argument("--split", help="split to evaluate (default: the run's eval_split, else test)")
    p.add_argument("--size", "--limit", dest="size", metavar="N|all",
                   help="the first N problems, or all (default: the run's eval_size, else 200)")
    p.add_argument("--n", type=int, default=0, metavar="K",
                   help="sampled responses per problem: pass@k for k = 1, 2, 4, ..., K, avg@K and maj@K "
                        "(default: 0, greedy only)")
    p.add_argument("--no-greedy", action="store_true", help="skip the greedy response of each problem (default: keep it)")
    p.add_argument("--temperature", type=float,
                   help="temperature of the K samples (default: the run's eval_temperature if > 0, else its temperature)")
    p.add_argument("--top-p", type=float, help="nucleus mass of the K samples (default: the run's, else 1.0)")
    p.add_argument("--max-response-tokens", type=int, metavar="N",
                   help="response budget in tokens (default: the run's, else min(1024, half the model's context))")
    p.add_argument("--chat-template", action=argparse.BooleanOptionalAction, default=None,
                   help="wrap prompts with the tokenizer's chat template (default: as the run did, else off)")
    p.add_argument("--verifier", metavar="MODULE:FUNCTION",
                   help="your verifier, imported from the working directory first (default: the run's, else the task's)")
    p.add_argument("--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                   help="task knobs merged over the run's, e.g. --set max_value=50 or data_files=test.jsonl; may be "
                        "repeated (default: the run's knobs)")
    p.add_argument("--engine", choices=engine_names(),
                   help="rollout engine, from the trainer's engine registry (default: the run's, else hf)")
    p.add_argument("--precision", choices=["fp32", "bf16"], help="default: the run's, else fp32")
    p.add_argument("--device", help="torch device (default: the run's, else cpu)")
    p.add_argument("--seed", type=int, help="sampling seed of the K samples (default: 0)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="responses per generation call (default: 256, the trainer's)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="eval folder (default: <run>/evals/step_<N>-<task>-<split>-n<K>, else ./evals/...)")
    p.add_argument("--overwrite", action="store_true", help="start the eval folder over (default: resume it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: show one)")
    _common(p)


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


def _serve_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="start vLLM's OpenAI server on a model folder, ready for eval --endpoint and "
                                     "server-mode training", formatter_class=_HelpFormatter,
                       description="Starts `vllm serve` (python -m vllm.entrypoints.openai.api_server) on 127.0.0.1 "
                                   "with processed log-probs and dapo-env's weight-sync worker extension, waits until "
                                   "it answers, prints its URL, and keeps it running until Ctrl-C.")
    p.add_argument("--model", required=True, metavar="PATH", help="a local Hugging Face model folder (required)")
    p.add_argument("--served-model-name", metavar="NAME", help="the name requests use (default: the folder's name)")
    p.add_argument("--port", type=int, help="the port (default: a free one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on; 0.0.0.0 lets learners on other machines in (a trusted network only: "
                        "the server takes weights from anyone who can reach it) (default: 127.0.0.1)")
    p.add_argument("--dtype", default="float32", help="vLLM's dtype (default: float32, as the learner)")
    p.add_argument("--max-model-len", type=int, metavar="N", help="context length (default: the model's)")
    p.add_argument("--no-weight-sync", action="store_true",
                   help="serve for evaluation only: no development routes or worker extension (default: sync on)")
    p.add_argument("--weight-sync", choices=("auto", "file", "nccl"), default="auto",
                   help="nccl also configures vLLM's NCCL weight transfer (train --weight-sync nccl; GPU only), file "
                        "does not, auto does where this interpreter sees CUDA (default: auto)")
    p.add_argument("--log", type=Path, metavar="FILE", help="the server's output (default: vllm-server.log)")
    p.add_argument("--startup", type=float, default=600.0, metavar="S",
                   help="seconds to wait for the server to answer (default: 600)")
    _common(p)


def _serve_transfer(args: argparse.Namespace) -> str | None:
    """vLLM's weight-transfer backend for ``dapo-env serve`` (``--weight-sync``; auto: nccl where CUDA is visible)."""
    if args.no_weight_sync or args.weight_sync == "file":
        return None
    if args.weight_sync == "auto":
        import torch

        return "nccl" if torch.cuda.is_available() else None
    return "nccl"


def _cmd_serve(args: argparse.Namespace) -> int:
    import time

    from .server import SERVER_URL_ENV, VLLMServer
    from .vllm_engine import INSTALL_HINT, vllm_installed

    if not vllm_installed():
        raise ImportError(f"dapo-env serve runs vLLM in this interpreter: {INSTALL_HINT}")
    server = VLLMServer(args.model, served_model=args.served_model_name, port=args.port, host=args.host,
                        dtype=args.dtype, max_model_len=args.max_model_len, weight_sync=not args.no_weight_sync,
                        weight_transfer=_serve_transfer(args), startup_s=args.startup,
                        log=args.log or Path("vllm-server.log"))
    try:
        try:
            server.wait()
        except RuntimeError as exc:  # it exited or never answered: the log's tail says why
            raise OSError(str(exc).splitlines()[0] + f" (see {server.log_path})") from None
        print(f"dapo-env serve: {server.url} serves {server.served_model!r} (log: {server.log_path})")
        if args.host != "127.0.0.1":
            import socket

            print(f"  from other machines: http://{socket.gethostname()}:{server.port}/v1")
        print(f"  dapo-env eval --endpoint {server.url} --model {server.served_model} --task TASK")
        if not args.no_weight_sync:
            print(f"  dapo-env train --engine vllm-server --server-url {server.url} ...  (or export "
                  f"{SERVER_URL_ENV}={server.url})")
        print("Ctrl-C stops it.", flush=True)
        while server.process.poll() is None:
            time.sleep(1.0)
        print(f"dapo-env serve: the server exited with status {server.process.returncode} (log: {server.log_path})",
              file=sys.stderr)
        return 1
    finally:
        server.close()


def _reverify_parser(sub: Any) -> None:
    p = sub.add_parser("reverify", help="grade an eval's stored responses again with today's (or another) verifier",
                       formatter_class=_HelpFormatter,
                       description="Re-score every response of an eval folder without calling any model; writes "
                                   "reverify-<name>.summary.json, .samples.jsonl and .flips.jsonl (the verdicts that "
                                   "changed) beside the eval's own files.")
    p.add_argument("eval_dir", type=Path, metavar="EVAL_DIR", help="an eval folder written by `dapo-env eval`")
    p.add_argument("--verifier", metavar="MODULE:FUNCTION",
                   help="another verifier, imported from the working directory first (default: the eval's own)")
    _common(p)


def _cmd_reverify(args: argparse.Namespace) -> int:
    from .reverify import reverify

    outcome = reverify(args.eval_dir, verifier=args.verifier)
    old = json.loads((args.eval_dir / "summary.json").read_text()) if (args.eval_dir / "summary.json").is_file() else {}
    print(f"dapo-env reverify: {args.eval_dir}, {len(outcome.flips)} verdict(s) flipped")
    print(f"{'metric':<10} {'stored':>7} {'now':>7}")
    for name, m in outcome.summary["metrics"].items():
        before = old.get("metrics", {}).get(name, {}).get("value")
        print(f"{name:<10} {'-' if before is None else f'{before:7.3f}':>7} {m['value']:7.3f}")
    print(f"files: {outcome.summary_path}, {outcome.flips_path}")
    print(json.dumps({"flips": len(outcome.flips), "metrics": {k: v["value"] for k, v in outcome.summary["metrics"].items()},
                      "summary": str(outcome.summary_path)}))
    return 0


def _report_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write a run folder's self-contained HTML report (curves, evals, samples)")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder, e.g. runs/<name>")
    p.add_argument("--out", type=Path, help="HTML file to write (default RUN_DIR/report.html)")


def _tasks_parser(sub: Any) -> None:
    p = sub.add_parser("tasks", help="list the registered task ids with their kind and data source",
                       formatter_class=_HelpFormatter,
                       description="The registered task ids (built-in and any registered on import), their "
                                   "kind (math, code, procedural, ...) and data source (hub id or generator).")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table (default: a table)")
    _common(p)


def _curate_parser(sub: Any) -> None:
    from .curate import add_curate_parser

    _common(add_curate_parser(sub, _HelpFormatter))


def _cmd_curate(args: argparse.Namespace) -> int:
    from .curate import cmd_curate

    return cmd_curate(args)


def build_parser() -> argparse.ArgumentParser:
    """The ``dapo-env`` argument parser (``prepare-model`` only named here: it has its own parser)."""
    parser = argparse.ArgumentParser(prog="dapo-env", description="Reasoning environments and a DAPO learner.",
                                     epilog="`dapo-env COMMAND --help` describes each command's flags.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _train_parser(sub)
    _eval_parser(sub)
    _reverify_parser(sub)
    _serve_parser(sub)
    _tasks_parser(sub)
    _report_parser(sub)
    _curate_parser(sub)
    sub.add_parser("prepare-model", add_help=False,
                   help="write a GGUF model (default: SmolLM2-135M-Instruct) as a local HF folder for --model")
    return parser


def _report_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write a run folder's self-contained HTML report (curves, evals, samples)",
                       formatter_class=_HelpFormatter,
                       description="One self-contained HTML file (no network) with the run's curves, eval tables "
                                   "and sampled completions; open it in any browser.")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder, e.g. runs/<name>")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="HTML file to write (default: RUN_DIR/report.html)")
    _common(p)


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    print(f"dapo-env report: {write_report(args.run_dir, out=args.out)}")
    return 0


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, bool]:
    """The run's config and whether to resume, from parsed ``train`` arguments."""
    flags: dict[str, Any] = {}
    for flag, field in (("task", "task"), ("model", "model"), ("verifier", "verifier"), ("engine", "engine"),
                        ("run_name", "name"), ("out_dir", "out_dir"), ("seed", "seed"),
                        ("max_steps", "max_steps"), ("device", "device"), ("loss", "loss"),
                        ("max_staleness", "max_staleness"), ("is_correction", "is_correction"), ("is_cap", "is_cap"),
                        ("lora_rank", "lora_rank"), ("lora_alpha", "lora_alpha"),
                        ("lora_target_modules", "lora_target_modules"),
                        ("gradient_checkpointing", "gradient_checkpointing")):
        value = getattr(args, flag)
        if value is not None:
            flags[field] = value
    server_options = {"server_url": args.server_url, "weight_sync": args.weight_sync}
    if any(server_options.values()):  # the vllm-server engine's keywords (also in a rollout worker's engine copy)
        flags["engine_options"] = {key: value for key, value in server_options.items() if value}
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
    preset_name = args.preset or ("dapo" if args.model else _tiny_preset_for(flags.get("task")))
    # without a model every preset runs at a tiny-model scale: its own (e.g. ``guess``) or ``tiny``
    own_scale = PRESETS[preset_name][1]
    scale = None if args.model or own_scale != "paper" else "tiny"
    return build_config(preset_name, scale=scale, config_file=args.config, overrides=flags), False


def _tiny_preset_for(task: str | None) -> str:
    """The default preset without ``--model``: ``guess`` (the multi-turn tiny scale) for a multi-turn task,
    else ``tiny``."""
    if task is None:
        return "tiny"
    from dapo_env.tasks import get_task

    from .rollout import is_multi_turn

    try:
        return "guess" if is_multi_turn(get_task(task)) else "tiny"
    except (KeyError, ValueError):
        return "tiny"  # an unknown task is reported where the config is used, with the known ids


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
    from .eval_run import evaluate_checkpoint, evaluate_endpoint

    try:
        if args.endpoint:
            overrides = eval_overrides(args)
            if overrides.pop("engine", None) or args.device or overrides.pop("precision", None):
                raise ValueError("--engine, --precision and --device choose a local engine: drop them with --endpoint")
            outcome = evaluate_endpoint(args.endpoint, args.model, out_dir=args.out, api=args.api,
                                        concurrency=args.concurrency, timeout_s=args.timeout, retries=args.retries,
                                        api_key_env=args.api_key_env, overwrite=args.overwrite,
                                        progress=not args.no_progress, **overrides)
        else:
            outcome = evaluate_checkpoint(args.model, out_dir=args.out, device=args.device, overwrite=args.overwrite,
                                          progress=not args.no_progress, **eval_overrides(args))
    except KeyboardInterrupt:
        if args.debug:
            raise
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
    failed = summary.get("failed", {}).get("samples", 0)
    if failed:
        first = summary["failed"]["list"][0]
        print(f"failed requests: {failed} (first: problem {first['index']}: {first['reason']}); rerun the same "
              "command to re-run them", file=sys.stderr)
    print(f"files: {outcome.samples_path} (one record per response), {outcome.summary_path}")
    if outcome.published is not None:
        print(f"run summary: {outcome.published} (`dapo-env report {outcome.published.parent.parent}` shows it)")
    metrics = outcome.metrics
    accuracy = metrics.get("greedy", metrics.get(f"avg@{settings['n']}"))
    print(json.dumps({"model": summary["model"], "task": settings["task"], "split": settings["split"],
                      "size": summary["problems"], "n": settings["n"], "accuracy": accuracy, "metrics": metrics,
                      "failed": failed, "out": str(outcome.out_dir)}))
    return 0


def task_kind(task: Any) -> str:
    """What kind of task this is: the task's own ``kind`` when it has one, else read off its parts.

    A generated source makes it ``procedural``; otherwise the verifier decides (``code`` for
    :class:`~dapo_env.verifiers.CodeVerifier`, ``math`` for :class:`~dapo_env.verifiers.MathVerifier`,
    ``custom`` for anything else).

    Example:
        >>> from dapo_env.tasks import get_task
        >>> [task_kind(get_task(env_id)) for env_id in ("DAPOMath-v0", "MBPP-v0", "Sort-v0", "GSM8KTool-v0")]
        ['math', 'code', 'procedural', 'math']
    """
    own = getattr(task, "kind", None)  # a task class may say what it is
    if isinstance(own, str) and own:
        return own
    from dapo_env.tasks.procedural import ProceduralSource
    from dapo_env.verifiers import CodeVerifier, MathVerifier

    if isinstance(task.source, ProceduralSource) or getattr(task.source, "default", None) is not None:
        return "procedural"  # generated problems (a procedural source, or one with a default config)
    if isinstance(task.verifier, CodeVerifier):
        return "code"
    # a verifier that grades with a MathVerifier it holds (e.g. the tool tasks' final-answer grader) is math
    if isinstance(task.verifier, MathVerifier) or isinstance(getattr(task.verifier, "math", None), MathVerifier):
        return "math"
    return "custom"


def task_source(task: Any) -> str:
    """Where a task's problems come from: ``hub:<id> (<config>)``, ``procedural:<Config>`` or the source type.

    Example:
        >>> from dapo_env.tasks import get_task
        >>> task_source(get_task("GSM8K-v0")), task_source(get_task("Arithmetic-v0"))
        ('hub:openai/gsm8k (main)', 'procedural:ArithmeticConfig')
    """
    source = task.source
    hub_id = getattr(source, "hub_id", None)
    if hub_id:
        config = getattr(source, "hub_config", None)
        return f"hub:{hub_id}" + (f" ({config})" if config else "")
    default = getattr(source, "default", None)
    if default is not None:
        return f"procedural:{type(default).__name__}"
    return type(source).__name__


def _cmd_tasks(args: argparse.Namespace) -> int:
    from dapo_env.tasks import get_task, list_tasks

    rows = [{"id": env_id, "kind": task_kind(task), "turns": task.turns, "source": task_source(task),
             "description": task.description} for env_id in list_tasks() for task in [get_task(env_id)]]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    columns = ("id", "kind", "turns", "source")
    header = {"id": "ID", "kind": "KIND", "turns": "TURNS", "source": "SOURCE", "description": "DESCRIPTION"}
    widths = [max(len(str(row[key])) for row in [header, *rows]) for key in columns]
    for row in [header, *rows]:
        cells = [str(row[key]).ljust(width) for key, width in zip(columns, widths)]
        print("  ".join([*cells, row["description"]]).rstrip())
    return 0


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line (a KeyError's without the quotes repr adds)."""
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename}: no such file or folder (relative paths start at {os.getcwd()})"
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(str(text).split()) or type(exc).__name__


def _import_from_working_directory(verifier: str | None) -> None:
    """Let ``--verifier mymodule:fn`` find ``./mymodule.py``, as ``python -m`` would; a module found nowhere
    is reported with the fix before any work starts."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)
    if not verifier or ":" not in verifier:
        return  # no custom verifier, or a malformed one that the config rejects with its own message
    module = verifier.partition(":")[0]
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # a missing parent package
        found = False
    if not found:
        raise ValueError(f"--verifier {verifier}: no module {module!r} in the working directory {cwd} or on "
                         f"sys.path; run from the folder that holds {module.replace('.', '/')}.py or add its "
                         "folder to PYTHONPATH")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dapo-env`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["prepare-model"]:  # its own parser: dapo_env.learners.pretrained.main
        from .pretrained import main as prepare_model

        return prepare_model(argv[1:])
    args = build_parser().parse_args(argv)
    commands = {"train": _cmd_train, "eval": _cmd_eval, "tasks": _cmd_tasks, "report": _cmd_report,
                "reverify": _cmd_reverify, "serve": _cmd_serve, "curate": _cmd_curate}
    try:
        if args.command in ("train", "eval", "reverify"):
            _import_from_working_directory(args.verifier)
        return commands[args.command](args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"\ndapo-env {args.command}: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as exc:
        if args.debug:
            raise
        hint = "" if isinstance(exc, (ValueError, OSError)) else " (--debug shows the traceback)"
        print(f"dapo-env {args.command}: error: {_one_line(exc)}{hint}", file=sys.stderr)
        return 2


__all__ = ["USER_ERRORS", "build_parser", "config_from_args", "eval_overrides", "main", "parse_overrides", "task_kind",
           "task_source"]


if __name__ == "__main__":
    raise SystemExit(main())
