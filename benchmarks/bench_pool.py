"""VerifierPool throughput: items/s inline (workers=0) vs a persistent pool, side by side.

Verifiers: a trivial string comparison (pure pool overhead), ``MathVerifier`` on DAPO-style responses
(``... Answer: N`` against DAPO-Math-17k integer answers; synthetic gold when the real data is absent;
a quarter of the responses are wrong) and ``CodeVerifier`` on MBPP canonical solutions (fixtures when
the real data is absent). Pool start-up is timed separately; each map is timed after one warm-up map.

Run:  python benchmarks/bench_pool.py [--workers 2] [--items 20000] [--code-items 24] [--out PATH]
Writes benchmarks/out/bench_pool.json (git-ignored); ``--out benchmarks/results/bench_pool.json`` updates
the tracked result. Real data: ``$DAPO_ENV_DATA`` (see ``benchmarks/_paths.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections.abc import Sequence

from _paths import add_out_argument, data_file, out_path, write_json

from dapo_env.types import CodeTests, VerifyResult
from dapo_env.verifiers import CodeVerifier, MathVerifier, VerifierPool


def exact(response: str, reference: str) -> VerifyResult:
    ok = response == reference
    return VerifyResult(ok, float(ok), response, "equal" if ok else "different")


def math_batch(n: int) -> tuple[list[str], list[str]]:
    path = data_file("dapo_math_17k/dapo_math_17k.jsonl.gz")
    if path is not None:
        with gzip.open(path, "rt") as fh:
            golds = [json.loads(line)["answer"] for _, line in zip(range(n), fh)]
    else:
        golds = [str(i * 7 - 300) for i in range(n)]
    golds = [golds[i % len(golds)] for i in range(n)]
    responses = [
        f"Let me think step by step about it.\nSo the total is {g}.\nAnswer: {g if i % 4 else int(g) + 1}"
        for i, g in enumerate(golds)
    ]
    return responses, golds


def code_batch(n: int) -> tuple[list[str], list[CodeTests]]:
    path = data_file("mbpp/mbpp.jsonl")
    rows = []
    if path is not None:
        with open(path) as fh:
            rows = [json.loads(line) for _, line in zip(range(n), fh)]
    if not rows:
        rows = [{"code": f"def f(x):\n    return x + {i}", "test_list": [f"assert f(1) == {i + 1}"],
                 "test_setup_code": ""} for i in range(n)]
    rows = [rows[i % len(rows)] for i in range(n)]
    responses = [f"```python\n{row['code']}\n```" for row in rows]
    tests = [CodeTests(tests=tuple(row["test_list"]), setup=row["test_setup_code"]) for row in rows]
    return responses, tests


def timed_map(pool: VerifierPool, verifier, responses, references) -> tuple[float, list[VerifyResult]]:
    pool.map(verifier, responses[:64], references[:64])  # warm-up: verifier shipped, imports done
    start = time.perf_counter()
    out = pool.map(verifier, responses, references)
    return time.perf_counter() - start, out


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--code-items", type=int, default=24)
    add_out_argument(parser, "bench_pool")
    args = parser.parse_args(argv)

    math_responses, golds = math_batch(args.items)
    code_responses, code_tests = code_batch(args.code_items)
    cases = [
        ("trivial", exact, math_responses, math_responses),
        ("math", MathVerifier(), math_responses, golds),
        ("code", CodeVerifier(), code_responses, code_tests),
    ]
    start = time.perf_counter()
    pool = VerifierPool(args.workers, timeout_s=30.0)
    startup_s = time.perf_counter() - start
    rows = []
    with pool, VerifierPool(0) as inline:
        for name, verifier, responses, references in cases:
            inline_s, inline_out = timed_map(inline, verifier, responses, references)
            pool_s, pool_out = timed_map(pool, verifier, responses, references)
            assert [r.correct for r in inline_out] == [r.correct for r in pool_out], name
            rows.append({
                "verifier": name,
                "items": len(responses),
                "inline_items_per_s": len(responses) / inline_s,
                "pool_items_per_s": len(responses) / pool_s,
                "pool_over_inline": inline_s / pool_s,
                "accuracy": sum(r.correct for r in pool_out) / len(pool_out),
            })
    print(f"pool start-up: {startup_s:.2f} s for {args.workers} workers (os.cpu_count()={os.cpu_count()})")
    print(f"{'verifier':<10}{'items':>8}{'inline/s':>12}{'pool/s':>12}{'pool/inline':>13}{'accuracy':>10}")
    for row in rows:
        print(f"{row['verifier']:<10}{row['items']:>8}{row['inline_items_per_s']:>12.0f}"
              f"{row['pool_items_per_s']:>12.0f}{row['pool_over_inline']:>13.2f}{row['accuracy']:>10.2f}")
    result = {"workers": args.workers, "cpu_count": os.cpu_count(), "startup_s": startup_s, "rows": rows}
    write_json(out_path(args.out, "bench_pool"), result)
    return result


if __name__ == "__main__":
    main()
