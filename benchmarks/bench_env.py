"""Verified DAPO-style responses per second through `GroupVectorEnv.step`: inline vs a worker pool.

B=64 prompts x G=16 responses per step on DAPOMath-v0 (the real DAPO-Math-17k file from ``$DAPO_ENV_DATA``
when present, else a generated fixture file). Every response is a few hundred characters of working
that ends with ``Answer: N``; half are right. Each configuration runs the same steps (same seed, same
responses); the table compares responses verified per second side by side.

Run:
    python benchmarks/bench_env.py [--steps 5] [--workers 2] [--out PATH]

Writes benchmarks/out/bench_env.json (git-ignored); ``--out benchmarks/results/bench_env.json`` updates the
tracked result.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from _paths import add_out_argument, data_file, out_path, write_json

import dapo_env  # noqa: F401  (registers the ids)
from dapo_env import Completion

DAPO_FILE = "dapo_math_17k/dapo_math_17k.jsonl.gz"


def fixture_file(directory: Path, n: int = 2000, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    path = directory / "dapo_fixture.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            a, b = (int(x) for x in rng.integers(10, 10_000, size=2))
            f.write(json.dumps({"problem": f"Compute ${a} \\cdot {b}$.", "answer": str(a * b), "index": i}) + "\n")
    return path


def responses(prompts: tuple[str, ...], book: dict[str, str], rng: np.random.Generator) -> list[Completion]:
    """DAPO-style responses: some working, then ``Answer: N`` on the last line; half are right."""
    out = []
    for i, prompt in enumerate(prompts):
        gold = book[prompt]
        answer = gold if i % 2 == 0 else str(int(gold) + int(rng.integers(1, 9)))
        working = " ".join(f"step {k}: we simplify the expression and check it." for k in range(8))
        out.append(Completion(f"{working}\nTherefore the result follows.\nAnswer: {answer}", num_tokens=120))
    return out


def run(data_file: Path, workers: int, steps: int, b: int, g: int) -> dict[str, float]:
    env = gym.make_vec("DAPOMath-v0", num_envs=b * g, vectorization_mode="vector_entry_point", group_size=g,
                       data_files=str(data_file), workers=workers, reward_map=(-1.0, 1.0),
                       overlong_penalty={"max_response_tokens": 20480, "cache_length": 4096}, overlong_filter=True)
    book = {env.task.format_prompt(p): p.answer for p in env.problems}
    rng = np.random.default_rng(0)
    prompts, _ = env.reset(seed=0)
    env.step(responses(prompts, book, rng))  # warm-up: workers load the verifier
    prompts = env.prompts
    elapsed, verified, correct = 0.0, 0, 0
    for _ in range(steps):
        batch = responses(prompts, book, rng)
        start = time.perf_counter()
        prompts, rewards, _, _, infos = env.step(batch)
        elapsed += time.perf_counter() - start
        verified += len(batch)
        correct += int(infos["correct"].sum())
    env.close()
    if correct != verified // 2:
        raise RuntimeError(f"expected half the responses right, got {correct}/{verified}: the benchmark is broken")
    return {"workers": workers, "responses": verified, "seconds": elapsed, "responses_per_s": verified / elapsed,
            "ms_per_step": 1000 * elapsed / steps}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the pooled configuration")
    parser.add_argument("--groups", type=int, default=64, help="B")
    parser.add_argument("--group-size", type=int, default=16, help="G")
    parser.add_argument("--data", choices=("auto", "fixture"), default="auto",
                        help="auto: the real DAPO-Math-17k file when $DAPO_ENV_DATA has it; fixture: a generated file")
    add_out_argument(parser, "bench_env")
    args = parser.parse_args(argv)
    real = data_file(DAPO_FILE) if args.data == "auto" else None
    with tempfile.TemporaryDirectory() as tmp:
        data = real if real is not None else fixture_file(Path(tmp))
        rows = [run(data, w, args.steps, args.groups, args.group_size) for w in (0, args.workers)]
    inline = rows[0]["responses_per_s"]
    print(f"GroupVectorEnv.step, DAPOMath-v0 ({'real data' if real is not None else 'fixture'}), "
          f"B={args.groups} G={args.group_size}, {args.steps} steps, {os.cpu_count()} CPUs visible")
    print(f"{'mode':<16}{'responses/s':>14}{'ms/step':>10}{'vs inline':>11}")
    for row in rows:
        mode = "inline" if row["workers"] == 0 else f"pool x{row['workers']}"
        row["ratio_vs_inline"] = row["responses_per_s"] / inline
        print(f"{mode:<16}{row['responses_per_s']:>14,.0f}{row['ms_per_step']:>10.1f}{row['ratio_vs_inline']:>10.2f}x")
    result = {
        "benchmark": "bench_env",
        "command": "python benchmarks/bench_env.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "data": "real DAPO-Math-17k" if real is not None else "generated fixture",
        "B": args.groups, "G": args.group_size, "steps": args.steps,
        "cpus_visible": os.cpu_count(), "python": platform.python_version(),
        "target_responses_per_s": 5000,
        "results": rows,
    }
    write_json(out_path(args.out, "bench_env"), result)
    return result


if __name__ == "__main__":
    main()
