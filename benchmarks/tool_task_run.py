"""The tiny model on HiddenTable-v0 in a native tool format, through the public training API.

HiddenTable's answer is a number stored under a key in a hidden table that only ``lookup(key)`` reads, so a
policy that never calls the tool is right ``1 / n_values`` of the time (exactly, over whole blocks of
problems). Here ``n_values=4`` (tool-blind: 25 %), two keys per table, one tool turn, the ``llama3`` format
(the shortest native one for a character-level model: ``{"name": "lookup", "parameters": {"key": "apple"}}``)
and the short prompt ``"Key <key>."``.

The warm start teaches the two formats, not the skill: whole episodes through the chat template in which
every turn is drawn from another problem: a lookup call of *that* problem's key or *its* bare answer
(``warm_start(..., response_fn=...)``, the trainer's own multi-turn warm start, passed with
``train(cfg, warm_start=...)``). After it the model calls the tool with a random key about half the time and
answers a random number, so held-out success starts near the tool-blind 25 %. Measured (seed 0, 150 warm-start
steps of 32 episodes): sampled at temperature 1, 44 % of held-out episodes call the tool (0.61 calls per
episode, 26 % of calls invalid JSON) and 19 % are solved; greedy, it calls twice with random keys and never
answers (0 %). With 60 warm-start steps it never called the tool at all (one turn per episode), and 200 DAPO
steps stayed at the tool-blind 25 % held-out, then fell to 0 %. With 150 (``--steps 120``, 486 s): DAPO
stopped calling within 10 steps (turns per episode 1.0 from step 10 on) and held-out success stayed at the
tool-blind 25 %, then fell to 0 % (greedy) from step 75: at the start a call pays less than a guess (its key
is another problem's, mostly absent from the table, and the answer after it is a random number, while a
direct guess wins 1 in 4), so RL rightly drops the call. Learning this needs a warm start that also teaches
reading the tool's reply (the answer turn copies it) and calls of the episode's own keys, or a curriculum. DAPO then trains on whole
episodes (the ``guess`` preset's tiny multi-turn scale); this script reports what happens: held-out success
at each evaluation, and how the trained model's episodes use the tool (``tool_use_stats`` over episodes played
through the env layer with the same parser as training).

    python benchmarks/tool_task_run.py --steps 200            # ~15 CPU-minutes on 2 cores
    python benchmarks/tool_task_run.py --steps 4 --eval-size 40   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

TASK_KWARGS = {"n_values": 4, "n_keys": 2, "max_tool_calls": 1, "tool_format": "llama3"}


#: The share of warm-start episodes whose first turn calls the tool (the rest answer at once).
WARM_CALL_SHARE = 0.8


def warm_turn(problem: Any, other: Any, turn: int) -> str:
    """A format-only target. The first turn calls ``lookup`` with the episode's own asked key in
    :data:`WARM_CALL_SHARE` of the episodes (decided by a randomly drawn other problem's index) and otherwise
    answers directly; every answer is the other problem's number, drawn independently of the table, so nothing
    in the warm start reads the tool's reply."""
    from dapo_env.tools import format_tool_call

    if turn == 0 and int(other.id.rsplit("-", 1)[1]) % 100 < 100 * WARM_CALL_SHARE:
        return format_tool_call(problem.metadata["tool_format"], [("lookup", {"key": problem.metadata["key"]})])
    return str(other.answer)


def tool_use_after(result: Any, cfg: Any, episodes: int) -> dict[str, float]:
    """Play ``episodes`` held-out episodes with the trained model (sampled as in training) and summarise tool use."""
    from dapo_env import EpisodeGroupEnv
    from dapo_env.learners.engine import HFEngine, SamplingParams
    from dapo_env.tools import tool_use_stats

    engine = HFEngine(result.model, result.tokenizer)
    env = EpisodeGroupEnv(cfg.task, num_envs=episodes, group_size=1, tokenizer=result.tokenizer,
                          split=cfg.eval_split, prompt_template=cfg.prompt_template,
                          max_episode_tokens=cfg.max_episode_tokens, **dict(cfg.task_kwargs))
    env.reset(seed=cfg.seed + 1)
    params = SamplingParams(temperature=0.0, max_response_tokens=cfg.max_response_tokens, seed=0)
    groups = env.rollout(lambda requests: engine.generate_turns(requests, params))
    env.close()
    infos = [info for g in groups for info in g.infos]
    solved = [c for g in groups for c in g.correct]  # correctness is a Group field (not repeated in infos)
    return {**tool_use_stats(infos), "solved": sum(solved) / len(solved)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-size", type=int, default=100)
    parser.add_argument("--out", default=None, help="write the summary as JSON here")
    args = parser.parse_args(argv)

    from dapo_env.learners.config import preset
    from dapo_env.learners.trainer import train
    from dapo_env.learners.warmstart import warm_start

    out_dir = tempfile.mkdtemp(prefix="tool-task-run-")
    cfg = preset("guess", task="HiddenTable-v0", task_kwargs=TASK_KWARGS, prompt_template="Key {key}.",
                 max_steps=args.steps, seed=args.seed, eval_size=args.eval_size, max_response_tokens=64,
                 overlong_cache_length=8, max_episode_tokens=160, tiny_max_positions=256, warmstart_steps=500,
                 warmstart_batch_size=32,
                 eval_every=max(1, args.steps // 8), checkpoint_every=10**6, plot_every=10**6, out_dir=out_dir,
                 name="hidden-table")

    def warm(model: Any, tokenizer: Any, task: Any) -> dict[str, Any]:
        return warm_start(model, tokenizer, task, steps=cfg.warmstart_steps, lr=cfg.warmstart_lr,
                          batch_size=cfg.warmstart_batch_size, seed=cfg.seed, max_response_tokens=cfg.max_response_tokens,
                          task_kwargs=dict(cfg.task_kwargs), max_episode_tokens=cfg.max_episode_tokens,
                          turn_response=warm_turn)

    t0 = time.perf_counter()
    result = train(cfg, warm_start=warm)
    seconds = time.perf_counter() - t0
    summary = {"steps": args.steps, "seconds": round(seconds, 1), "tool_blind_bound": 1 / TASK_KWARGS["n_values"],
               "eval_history": result.eval_history, "tool_use_after": tool_use_after(result, cfg, args.eval_size),
               "run_dir": str(result.run_dir)}
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    return summary


if __name__ == "__main__":
    main()
