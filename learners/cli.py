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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dapo_env.tasks.spec_cli import add_parsers as task_spec_parsers, resolve_task_argument, spec_defaults
from dapo_env.tasks.spec_cli import run as run_task_spec_command

from .cli_settings import add_config_flags, given_flags, parse_set
from .config import PRESETS, TrainConfig, build_config, load_overrides, preset
from .engines import engine_names
from .settings import field_specs

#: The exit statuses every command shares (each command's ``--help`` adds what makes it exit 1).
EXIT_STATUS = "Exit status: 0 done; 2 a user error (one line naming the fix); 130 interrupted (Ctrl-C);"

#: What a user can get wrong: reported in one line (exit status 2) unless ``--debug``.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError, LookupError, OSError, ImportError)


def parse_overrides(items: Sequence[str], *, task: str | None = None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as ``TrainConfig`` overrides, by the one ``--set`` grammar
    (:func:`~dapo_env.learners.cli_settings.parse_set`): fields read as their type, task knobs (of ``task``,
    when given) and dotted keys gathered under their mapping field (``{"task_kwargs": {...}}``)."""
    got = parse_set(items, TrainConfig, task=task)
    return {**got.fields, **got.merges}


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
                       usage="dapo-env train [--preset P] [--model PATH] [--task TASK] [--FIELD VALUE ...] "
                             "[--set KEY=VALUE ...] [--resume RUN_DIR]",
                       description="Train with DAPO. Precedence: preset < --config file < flags/--set. Every "
                                   "TrainConfig field has a flag (--FIELD-NAME, grouped below as in the config) "
                                   "and a --set spelling (--set FIELD_NAME=VALUE).",
                       epilog=EXIT_STATUS + " 1: the run finished but learned nothing (no step had an informative "
                                            "group).",
                       formatter_class=_HelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="named settings: dapo (the paper's), grpo (naive GRPO baseline), tiny (the CPU default "
                        "run); without --model every preset runs at the tiny model's scale "
                        "(default: tiny, or dapo when --model is given)")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="YAML/TOML/JSON file of TrainConfig fields, may set 'preset' (default: none)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its newest checkpoint (default: start a new run)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run folder of the same name (default: a fresh run refuses one)")
    p.add_argument("--server-url", metavar="URL",
                   help="with --engine vllm-server: the server `dapo-env serve` started (sets engine_options.server_url; "
                        "default: $DAPO_SERVER_URL, else the engine starts its own)")
    p.add_argument("--weight-sync", choices=("auto", "file", "nccl"),
                   help="with --engine vllm-server: how pushes reach the server: file (a safetensors file on this "
                        "machine), nccl (vLLM's weight-transfer API; GPU learner and GPU server) or auto (nccl where "
                        "both are on GPUs and the server offers it) (sets engine_options.weight_sync; default: auto)")
    p.add_argument("--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                   help="set a TrainConfig field (group_size=8, packing=off), a key of a mapping field "
                        "(task_kwargs.data_files=F, engine_options.server_url=U) or a task knob (data_files=F, "
                        "max_value=50), each read as its type; may be repeated (default: none)")
    p.add_argument("--fsdp", action="store_true",
                   help="under torchrun: shard the learner with FSDP2, see docs/scaling.md (default: off)")
    _common(p)
    add_config_flags(p, TrainConfig, default_text=_preset_default)


def _eval_parser(sub: Any) -> None:
    p = sub.add_parser(
        "eval", help="pass@k / avg@k / maj@k / greedy accuracy of a checkpoint, with one record per response",
        formatter_class=_HelpFormatter,
        description="Evaluate a checkpoint. Inside a run folder (runs/<name>/checkpoints/step_N/model, or runs/<name> "
                    "for its newest checkpoint) every setting defaults to the run's own held-out evaluation (task, task "
                    "knobs, split, size, chat template, verifier, response limit, precision, engine); flags override. "
                    "Writes samples.jsonl and summary.json; rerun the same command to resume a killed eval. With "
                    "--endpoint, evaluate a served model over chat. `dapo-env eval compare DIR...` compares evals "
                    "(see `dapo-env eval compare --help`).",
        epilog=EXIT_STATUS + " 1: nothing was scored, or more than --max-failed requests failed (a summary of the "
                             "failures is printed; rerun the same command to retry them).")
    p.add_argument("--model", required=True, metavar="PATH|NAME",
                   help="a model folder (runs/<name>/checkpoints/step_N/model), a checkpoint or a run folder; with "
                        "--endpoint, the served model's name (required, no default)")
    p.add_argument("--endpoint", metavar="URL",
                   help="evaluate the model an OpenAI-compatible server serves (vLLM, SGLang, an API), e.g. "
                        "http://127.0.0.1:8000/v1; the API key is read from $OPENAI_API_KEY (or --api-key-env) "
                        "(default: none, evaluate a local checkpoint)")
    p.add_argument("--concurrency", type=int, default=8, metavar="N",
                   help="with --endpoint: the most requests in flight (default: 8)")
    p.add_argument("--api", choices=["chat", "completions", "auto"],
                   help="with --endpoint: chat = the prompt as the user message (after the task's system prompt), the "
                        "server's chat template applied; completions = the prompt as raw text (base models); auto = "
                        "completions, chat when the server has none (default: chat; multi-turn tasks always chat)")
    p.add_argument("--rpm", type=float, metavar="N",
                   help="with --endpoint: at most N requests per minute, evenly spaced (default: no limit)")
    p.add_argument("--tpm", type=float, metavar="N",
                   help="with --endpoint: at most N tokens (prompt + completion) per minute (default: no limit)")
    p.add_argument("--price-in", type=float, metavar="USD",
                   help="with --endpoint: price per million prompt tokens; with --price-out the summary gives the "
                        "run's cost (default: no cost)")
    p.add_argument("--price-out", type=float, metavar="USD",
                   help="with --endpoint: price per million completion tokens, reasoning included (default: no cost)")
    p.add_argument("--tokenizer", metavar="PATH",
                   help="with --endpoint: a tokenizer folder counting the tokens the server does not report in "
                        "`usage` (marked as counted; default: such counts stay unknown)")
    p.add_argument("--judge-endpoint", metavar="URL",
                   help="with --endpoint: a judge model's server; answers the rule verifier scores 0 go to it, and "
                        "the summary shows rule-only and rule+judge scores (default: rules only)")
    p.add_argument("--judge-model", metavar="NAME",
                   help="with --judge-endpoint: the judge model's served name (required with it; default: none)")
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
                   help="a task knob merged over the run's (data_files=test.jsonl, max_value=50, or dotted: "
                        "task_kwargs.data_files=F) or an eval setting (n=8, prompt_template=...), each read as its "
                        "type, as train's --set; may be repeated (default: the run's knobs)")
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
    p.add_argument("--max-failed", type=int, default=0, metavar="N",
                   help="failed requests (after their retries) tolerated before the exit status is 1; the "
                        "records are kept either way and a rerun retries exactly the failed ones (default: 0)")
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
    out["n"] = args.n
    if args.no_greedy:
        out["greedy"] = False
    if args.set:
        from .run.eval_run import EvalSettings

        items = parse_set(args.set, EvalSettings, task=out.get("task") or _run_task(args))
        out.update(items.fields)
        if "task_kwargs" in items.merges:  # merged over the run's knobs (eval_run.settings_from_run)
            out["task_kwargs"] = {**out.get("task_kwargs", {}), **items.merges["task_kwargs"]}
    return out


def _run_task(args: argparse.Namespace) -> str | None:
    """The task of the run ``eval --model`` points into, or ``None`` (an endpoint, a bare model folder)."""
    if getattr(args, "endpoint", None):
        return None
    from .run.eval_run import locate_checkpoint

    try:
        return (locate_checkpoint(args.model).run_config or {}).get("task")
    except (OSError, ValueError):
        return None


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

    from .engines.server import SERVER_URL_ENV, VLLMServer
    from .engines.vllm_engine import INSTALL_HINT, vllm_installed

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
                                   "changed) beside the eval's own files.",
                       epilog=EXIT_STATUS + " 1: nothing was re-scored, or the verifier raised on more than "
                                            "--max-failed responses.")
    p.add_argument("eval_dir", type=Path, metavar="EVAL_DIR", help="an eval folder written by `dapo-env eval`")
    p.add_argument("--max-failed", type=int, default=0, metavar="N",
                   help="responses whose grading raised (reason error:<exception>) tolerated before the exit "
                        "status is 1 (default: 0)")
    p.add_argument("--verifier", metavar="MODULE:FUNCTION",
                   help="another verifier, imported from the working directory first (default: the eval's own)")
    _common(p)


def _cmd_reverify(args: argparse.Namespace) -> int:
    from .run.reverify import reverify

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
    from .run.evaluation import is_failed

    records = [json.loads(line) for line in outcome.samples_path.read_text().splitlines() if line.strip()]
    raised = [r for r in records if str(r.get("reason") or "").startswith("error:") and not is_failed(r)]
    if not outcome.summary["metrics"]:
        print("dapo-env reverify: nothing was re-scored; exit status 1", file=sys.stderr)
        return 1
    if len(raised) > args.max_failed:
        print(f"dapo-env reverify: the verifier raised on {len(raised)} response(s), more than --max-failed "
              f"{args.max_failed} ({failure_summary(raised)}); exit status 1", file=sys.stderr)
        return 1
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
    from .run.curate import add_curate_parser

    _common(add_curate_parser(sub, _HelpFormatter))


def _cmd_curate(args: argparse.Namespace) -> int:
    from .run.curate import cmd_curate

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
    task_spec_parsers(sub, _HelpFormatter)  # dapo-env task init|validate (dapo_env.tasks.spec_cli)
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
    from .run.report import write_report

    print(f"dapo-env report: {write_report(args.run_dir, out=args.out)}")
    return 0


def config_from_args(args: argparse.Namespace) -> tuple[TrainConfig, bool]:
    """The run's config and whether to resume, from parsed ``train`` arguments: the preset (or the resumed
    run's ``config.json``), then ``--config``, then the flags and ``--set`` (later wins)."""
    flags = given_flags(args, TrainConfig)
    server_options = {"server_url": args.server_url, "weight_sync": args.weight_sync}
    if any(server_options.values()):  # the vllm-server engine's keywords (also in a rollout worker's engine copy)
        flags["engine_options"] = {**flags.get("engine_options", {}),
                                   **{key: value for key, value in server_options.items() if value}}
    specs = field_specs(TrainConfig)  # the fields first: the task they name decides what the task knobs are
    flags.update(parse_set([i for i in args.set if i.partition("=")[0].strip() in specs], TrainConfig).fields)
    if args.resume is None:  # a spec's reward/overlong/eval settings start a new run (a resumed one keeps its own)
        file_keys = load_overrides(args.config) if args.config else {}
        flags = {**spec_defaults(flags.get("task"), exclude=[*file_keys, *flags]), **flags}
    if args.resume is not None:
        run_dir = Path(args.resume)
        cfg_file = run_dir / "config.json"
        if not cfg_file.exists():
            raise SystemExit(f"--resume {run_dir}: no config.json there; pass the folder of a run (runs/<name>)")
        cfg = TrainConfig.from_dict(json.loads(cfg_file.read_text()))
        flags.update(out_dir=str(run_dir.parent), name=run_dir.name)
        cfg = cfg.with_overrides(flags)
    else:
        preset_name = args.preset or ("dapo" if flags.get("model") else _tiny_preset_for(flags.get("task")))
        # without a model every preset runs at a tiny-model scale: its own (e.g. ``guess``) or ``tiny``
        own_scale = PRESETS[preset_name][1]
        scale = None if flags.get("model") or own_scale != "paper" else "tiny"
        cfg = build_config(preset_name, scale=scale, config_file=args.config, overrides=flags)
    items = parse_set(args.set, TrainConfig, task=cfg.task)
    if items.merges:
        cfg = cfg.with_overrides(items.apply(cfg.to_dict()))
    return cfg, args.resume is not None


def _tiny_preset_for(task: str | None) -> str:
    """The default preset without ``--model``: ``guess`` (the multi-turn tiny scale) for a multi-turn task,
    else ``tiny``."""
    if task is None:
        return "tiny"
    from dapo_env.tasks import get_task

    from .rollout.setup import is_multi_turn

    try:
        return "guess" if is_multi_turn(get_task(task)) else "tiny"
    except (KeyError, ValueError):
        return "tiny"  # an unknown task is reported where the config is used, with the known ids


def _cmd_train(args: argparse.Namespace) -> int:
    from .run.heldout import describe_run_rows
    from .rollout.setup import resolve_task
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
    from .run.evaluation import load_eval_problems

    task = resolve_task(cfg)
    rows = describe_run_rows(result.run_dir, task, cfg.eval_split, cfg.task_kwargs)
    count = len(load_eval_problems(task, split=cfg.eval_split, size=cfg.eval_size, task_kwargs=dict(cfg.task_kwargs)))
    print(f"held-out accuracy ({rows}; {count} problems): "
          f"{start if start is None else f'{start:.3f}'} -> {end if end is None else f'{end:.3f}'}")
    trained = [r.get("rollout/num_groups") for r in result.metrics if "rollout/num_groups" in r]
    partial = max((r.get("rollout/partial_batches") or 0 for r in result.metrics), default=0)
    if partial:
        print(f"partial batches: {partial} of {cfg.max_steps} steps had fewer than {cfg.batch_size} informative groups "
              f"(dynamic sampling ran out of its {cfg.max_gen_rounds} generation rounds; rollout/partial in metrics.jsonl)")
    print(f"run files: {result.run_dir} (config.json, metrics.jsonl, curves.png, checkpoints/)")
    if trained and not any(trained):
        print("dapo-env train: no step had an informative group (every group all right or all wrong, "
              "rollout/accuracy_before_filter in metrics.jsonl says which), so nothing was learned; a longer warm "
              "start (--warmstart-steps N), a larger --group-size or an easier task gives informative groups; "
              "exit status 1", file=sys.stderr)
        return 1
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from .run.eval_run import evaluate_checkpoint, evaluate_endpoint

    try:
        if args.endpoint:
            overrides = eval_overrides(args)
            if overrides.pop("engine", None) or args.device or overrides.pop("precision", None):
                raise ValueError("--engine, --precision and --device choose a local engine: drop them with --endpoint")
            outcome = evaluate_endpoint(args.endpoint, args.model, out_dir=args.out, api=args.api,
                                        concurrency=args.concurrency, timeout_s=args.timeout, retries=args.retries,
                                        api_key_env=args.api_key_env, overwrite=args.overwrite,
                                        progress=not args.no_progress, rpm=args.rpm, tpm=args.tpm,
                                        price_in=args.price_in, price_out=args.price_out, tokenizer=args.tokenizer,
                                        judge_endpoint=args.judge_endpoint, judge_model=args.judge_model, **overrides)
        else:
            served_only = [f"--{name.replace('_', '-')}" for name in ("api", "rpm", "tpm", "price_in", "price_out",
                                                                         "tokenizer", "judge_endpoint", "judge_model")
                           if getattr(args, name) is not None]
            if served_only:
                raise ValueError(f"{', '.join(served_only)} apply to a served model: add --endpoint URL (a local "
                                 "checkpoint is evaluated as its run trained)")
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
    print(f"dapo-env eval: {settings['task']} {settings['split']} ({summary.get('rows', 'rows: not recorded')}), "
          f"{summary['problems']} problems, {what}")
    from .run.compare import eval_console_lines

    for line in eval_console_lines(summary):
        print(line)
    for warning in summary.get("warnings") or ():
        print(f"dapo-env eval: warning: {warning}", file=sys.stderr)
    failed = summary.get("failed", {}).get("samples", 0)
    if failed:
        print(f"failed requests: {failed} ({failure_summary(summary['failed']['list'])}); rerun the same command "
              "to re-run them", file=sys.stderr)
    print(f"files: {outcome.samples_path} (one record per response), {outcome.summary_path}")
    if outcome.published is not None:
        print(f"run summary: {outcome.published} (`dapo-env report {outcome.published.parent.parent}` shows it)")
    metrics = outcome.metrics
    accuracy = metrics.get("greedy", metrics.get(f"avg@{settings['n']}"))
    print(json.dumps({"model": summary["model"], "task": settings["task"], "split": settings["split"],
                      "size": summary["problems"], "n": settings["n"], "accuracy": accuracy, "metrics": metrics,
                      "failed": failed, "out": str(outcome.out_dir)}))
    if not summary["problems"] or not metrics:
        print(f"dapo-env eval: nothing was scored ({failed} failed request(s)); exit status 1", file=sys.stderr)
        return 1
    if failed > args.max_failed:
        print(f"dapo-env eval: {failed} failed request(s), more than --max-failed {args.max_failed}; exit status 1 "
              "(the scored problems are kept: rerun the same command to retry the failed ones)", file=sys.stderr)
        return 1
    return 0


def failure_summary(failed: Sequence[Mapping[str, Any]], *, shown: int = 3) -> str:
    """The failures of an eval's summary (``summary["failed"]["list"]``) by reason, most frequent first.

    Example:
        >>> failure_summary([{"index": 0, "reason": "error:endpoint: refused"},
        ...                  {"index": 3, "reason": "error:endpoint: refused"}])
        '2 x error:endpoint: refused (first: problem 0)'
    """
    from collections import Counter

    counts = Counter(str(f.get("reason")) for f in failed)
    first = {}
    for f in failed:
        first.setdefault(str(f.get("reason")), f.get("index"))
    parts = [f"{n} x {reason} (first: problem {first[reason]})" for reason, n in counts.most_common(shown)]
    more = len(counts) - shown
    return "; ".join(parts) + (f"; and {more} other reason(s)" if more > 0 else "")


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
    if hasattr(source, "hub_id"):  # a dataset source without a hub dataset
        return "local files (data_files=)"
    return type(source).__name__


def _cmd_tasks(args: argparse.Namespace) -> int:
    from dapo_env.tasks import get_task, list_tasks

    from dapo_env.tasks.registry import broken_tasks, task_origin

    rows = [{"id": env_id, "kind": task_kind(task), "turns": task.turns, "source": task_source(task),
             "description": task.description, "origin": task_origin(env_id)}
            for env_id in list_tasks() for task in [get_task(env_id)]]
    rows += [{"id": env_id, "kind": "broken", "turns": "-", "source": "-", "description": f"error: {message}",
              "origin": task_origin(env_id)} for env_id, message in sorted(broken_tasks().items())]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    columns = ("id", "kind", "turns", "source", "origin")
    header = {"id": "ID", "kind": "KIND", "turns": "TURNS", "source": "SOURCE", "origin": "ORIGIN",
              "description": "DESCRIPTION"}
    widths = [max(len(str(row[key])) for row in [header, *rows]) for key in columns]
    for row in [header, *rows]:
        cells = [str(row[key]).ljust(width) for key, width in zip(columns, widths)]
        print("  ".join([*cells, row["description"]]).rstrip())
    return 0


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line (a KeyError's without the quotes repr adds)."""
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename}: no such file or folder (relative paths start at {os.getcwd()})"
    cli = next((e.cli_message for e in _chain(exc) if getattr(e, "cli_message", None)), None)
    text = cli or (exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc))
    return " ".join(str(text).split()) or type(exc).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (a task's data error inside a trainer's error)."""
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


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
    if argv[:1] == ["prepare-model"]:  # its own parser: dapo_env.learners.models.pretrained.main
        from .models.pretrained import main as prepare_model

        return prepare_model(argv[1:])
    if argv[:2] == ["eval", "compare"]:  # its own parser: dapo_env.learners.run.compare.main
        from .run.compare import main as compare

        return compare(argv[2:])
    args = build_parser().parse_args(argv)
    commands = {"train": _cmd_train, "eval": _cmd_eval, "tasks": _cmd_tasks, "report": _cmd_report,
                "reverify": _cmd_reverify, "serve": _cmd_serve, "task": run_task_spec_command,
                "curate": _cmd_curate}
    try:
        if getattr(args, "task", None) and args.command in ("train", "eval"):
            args.task = resolve_task_argument(args.task)  # a spec file's path -> its id, registered here and in workers
        if args.command in ("train", "eval", "reverify"):
            _import_from_working_directory(getattr(args, "verifier", None))
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
