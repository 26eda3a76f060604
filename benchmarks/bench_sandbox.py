"""What full OS isolation costs: CodeVerifier with isolation="weak" vs "full", side by side on MBPP.

"weak" is the path code verification took on root machines before bubblewrap (a fresh process in a
temporary folder, rlimits, a wall-clock kill, the audit hook: the namespace layers never came up there);
"full" is the bubblewrap sandbox. Candidates: each MBPP problem's reference solution and a broken variant
(every result of its function changed), so half should pass. Per-candidate latency is timed in this
process with the two modes alternating candidate by candidate (a busy machine slows both alike);
throughput is a 2-worker ``VerifierPool`` over all candidates, one mode after the other, after a warm-up.

Run:  python benchmarks/bench_sandbox.py [--problems 60] [--workers 2] [--out PATH]
Writes runs/bench_sandbox.json unless --out names another file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path

from dapo_env.types import CodeTests
from dapo_env.verifiers import CodeVerifier, VerifierPool
from dapo_env.verifiers.sandbox import isolation

ROOT = Path(__file__).resolve().parents[1]
MBPP = ROOT.parent / "shared" / "data" / "mbpp" / "mbpp.jsonl"
MODES = ("weak", "full")
BREAK = """
_reference = {name}
def {name}(*args, **kwargs):
    value = _reference(*args, **kwargs)
    return value + 1 if isinstance(value, (int, float)) and not isinstance(value, bool) else [value]
"""


def candidates(n: int) -> tuple[list[str], list[CodeTests], list[bool]]:
    """(responses, tests, should pass) for n MBPP problems (fixtures when the shared data is absent)."""
    rows = []
    if MBPP.exists():
        with open(MBPP) as fh:
            rows = [json.loads(line) for _, line in zip(range(n), fh)]
    if not rows:
        rows = [{"code": f"def f(x):\n    return x + {i}", "test_list": [f"assert f(1) == {i + 1}"],
                 "test_setup_code": ""} for i in range(n)]
    responses, tests, expected = [], [], []
    for row in rows:
        name = row["test_list"][0].split("assert ", 1)[1].split("(", 1)[0].strip()
        reference = tuple(row["test_list"]), row["test_setup_code"]
        for code, ok in ((row["code"], True), (row["code"] + BREAK.format(name=name), False)):
            responses.append(f"```python\n{code}\n```")
            tests.append(CodeTests(tests=reference[0], setup=reference[1]))
            expected.append(ok)
    return responses, tests, expected


def latencies(verifiers: dict[str, CodeVerifier], responses: list[str], tests: list[CodeTests],
              expected: list[bool]) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {mode: [] for mode in verifiers}
    right = dict.fromkeys(verifiers, 0)
    for i, (response, test) in enumerate(zip(responses, tests)):
        order = list(verifiers) if i % 2 == 0 else list(reversed(verifiers))
        for mode in order:
            start = time.perf_counter()
            result = verifiers[mode](response, test)
            times[mode].append(time.perf_counter() - start)
            right[mode] += result.correct == expected[i]
    return {mode: {"median_ms": 1000 * statistics.median(t), "p95_ms": 1000 * statistics.quantiles(t, n=20)[-1],
                   "agreement": right[mode] / len(t)} for mode, t in times.items()}


def throughput(verifier: CodeVerifier, responses: list[str], tests: list[CodeTests], workers: int) -> float:
    with VerifierPool(workers, timeout_s=60.0) as pool:
        pool.map(verifier, responses[:8], tests[:8])  # warm-up: workers started, verifier shipped
        start = time.perf_counter()
        pool.map(verifier, responses, tests)
        return len(responses) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_sandbox.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message='code runs with isolation="weak"')
    responses, tests, expected = candidates(args.problems)
    verifiers = {mode: CodeVerifier(isolation=mode) for mode in MODES}
    verifiers["full"].prepare_reference(tests[0])  # probe bubblewrap once, outside the timings
    rows = latencies(verifiers, responses, tests, expected)
    for mode in MODES:
        rows[mode]["candidates_per_s"] = throughput(verifiers[mode], responses, tests, args.workers)
    ratio = rows["full"]["median_ms"] / rows["weak"]["median_ms"]
    load = os.getloadavg()[0]
    print(f"{len(responses)} MBPP candidates (reference + broken each), {args.workers} workers, "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'isolation':<10}{'median ms':>11}{'p95 ms':>9}{'cand/s':>9}{'agree':>7}")
    for mode in MODES:
        row = rows[mode]
        print(f"{mode:<10}{row['median_ms']:>11.1f}{row['p95_ms']:>9.1f}{row['candidates_per_s']:>9.1f}"
              f"{row['agreement']:>7.2f}")
    print(f"full / weak median latency: {ratio:.2f}x (target <= 2x)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"candidates": len(responses), "workers": args.workers, "load_average": load,
                                    "cpu_count": os.cpu_count(), "layers": list(isolation().active),
                                    "rows": rows, "full_over_weak_median": ratio}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
