"""What full OS isolation costs: the code verifier with bubblewrap (``isolation="full"``) against the path
without it (``isolation="weak"``: a process group, rlimits, a temporary folder, the audit hook; the path a
root machine actually got before bubblewrap), side by side in one run.

Candidates: MBPP reference solutions (which pass) and broken variants (another task's solution, which
fails), from the real MBPP file when it is found (``$DAPO_ENV_DATA``, see ``docs/tasks.md``), else a small
built-in set. Measured per mode: the latency of one candidate run sequentially (median, p95) and the
throughput with a 2-worker ``VerifierPool``. Target: full isolation at most 2x the weak path's median.

Run:  python benchmarks/bench_sandbox.py [--candidates 60] [--workers 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

from _paths import add_out_argument, data_file, out_path, write_json

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, VerifierPool
from dapo_env.verifiers.sandbox import SandboxLimits

BUILTIN = [
    ("def add(a, b):\n    return a + b", ("assert add(1, 2) == 3", "assert add(-1, 1) == 0")),
    ("def rev(s):\n    return s[::-1]", ("assert rev('abc') == 'cba'", "assert rev('') == ''")),
    ("def squares(n):\n    return [i * i for i in range(n)]", ("assert squares(3) == [0, 1, 4]",)),
    ("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)", ("assert fact(5) == 120", "assert fact(0) == 1")),
]


def candidates(count: int) -> tuple[list[str], list[CodeTests], list[bool]]:
    """``count`` (response, tests, expected verdict) triples: half reference solutions, half broken."""
    mbpp = data_file("mbpp/mbpp.jsonl")
    rows: list[tuple[str, tuple[str, ...], str]] = []
    if mbpp is not None:
        with open(mbpp) as fh:
            for line in fh:
                row = json.loads(line)
                if row["task_id"] not in (367, 927):  # their setup needs the solution's own class
                    rows.append((row["code"], tuple(row["test_list"]), row["test_setup_code"]))
                if len(rows) >= count:
                    break
    else:
        rows = [(code, tests, "") for code, tests in BUILTIN]
    responses, references, expect = [], [], []
    for i in range(count):
        code, tests, setup = rows[(i // 2) % len(rows)]
        if i % 2:  # broken: the next task's solution
            code = rows[(i // 2 + 1) % len(rows)][0]
        responses.append(f"```python\n{code}\n```")
        references.append(CodeTests(tests=tests, setup=setup))
        expect.append(i % 2 == 0)
    return responses, references, expect


def measure(verifier: CodeVerifier, responses: list[str], references: list[CodeTests], expect: list[bool],
            workers: int) -> dict[str, float]:
    verifier(responses[0], references[0])  # warm: the probe and imports are not part of a candidate's cost
    latencies, right = [], 0
    for response, reference, ok in zip(responses, references, expect):
        start = time.perf_counter()
        result = verifier(response, reference)
        latencies.append(time.perf_counter() - start)
        right += result.correct == ok
    with VerifierPool(workers, timeout_s=60.0) as pool:
        pool.map(verifier, responses[:workers], references[:workers])  # start the workers
        start = time.perf_counter()
        pooled = pool.map(verifier, responses, references)
        elapsed = time.perf_counter() - start
    right_pooled = sum(r.correct == ok for r, ok in zip(pooled, expect))
    latencies.sort()
    return {"median_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
            "candidates_per_s_pool": len(responses) / elapsed, "verdicts_as_expected": right / len(responses),
            "verdicts_as_expected_pool": right_pooled / len(responses)}


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=60, help="candidates per mode (half pass, half fail)")
    parser.add_argument("--workers", type=int, default=2, help="VerifierPool workers for the throughput column")
    add_out_argument(parser, "bench_sandbox")
    args = parser.parse_args(argv)
    responses, references, expect = candidates(args.candidates)
    limits = SandboxLimits(wall_s=20.0)
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # weak isolation's one-time warning
        for mode in ("weak", "full"):
            rows[mode] = measure(CodeVerifier(limits=limits, isolation=mode), responses, references, expect,
                                 args.workers)
    ratio = rows["full"]["median_ms"] / rows["weak"]["median_ms"]
    print(f"{'isolation':<10} {'median ms':>10} {'p95 ms':>8} {'cand/s (pool)':>14} {'verdicts ok':>12}")
    for mode, row in rows.items():
        print(f"{mode:<10} {row['median_ms']:>10.1f} {row['p95_ms']:>8.1f} {row['candidates_per_s_pool']:>14.1f} "
              f"{row['verdicts_as_expected']:>12.3f}")
    print(f"full / weak median latency: {ratio:.2f}x (target <= 2x)")
    result = {"candidates": args.candidates, "workers": args.workers, "rows": rows, "latency_ratio": ratio,
              "data": "mbpp" if data_file("mbpp/mbpp.jsonl") else "builtin"}
    write_json(out_path(args.out, "bench_sandbox"), result)
    return result


if __name__ == "__main__":
    main()
