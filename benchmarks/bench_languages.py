"""Programs verified per second in each sandbox language, and what compiling costs.

Candidates: small stdin/stdout programs (read n numbers, print their sum), each made distinct by a comment
so that no compile is shared, with ``--tests`` tests each and half of them wrong (they print the sum plus
one). Per language (``ProgramVerifier``, full bubblewrap isolation): the latency of one candidate verified
sequentially (median, p95: compile once, then one sandboxed run per test), the throughput with a
``VerifierPool``, the median compile time (C++: ``-std=c++17 -O2`` with ``<iostream>``, and with
``<bits/stdc++.h>``), the median run of one test, and what compiling once per response saves against
compiling once per test.

Run:  python benchmarks/bench_languages.py [--candidates 12] [--tests 3] [--workers 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _paths import add_out_argument, out_path, write_json

from dapo_env.verifiers import VerifierPool
from dapo_env.verifiers.code import IOTest, ProgramTests, ProgramVerifier, get_language
from dapo_env.verifiers.code.programs import build
from dapo_env.verifiers.code.sandbox import SandboxLimits, run_command

SOURCES = {
    "python": "import sys\nv = list(map(int, sys.stdin.read().split()))\nprint(sum(v[1:]) + {bump})  # {tag}",
    "cpp": "#include <iostream>\n// {tag}\nint main() {{ long n, s = 0, x; std::cin >> n;\n"
           "  for (long i = 0; i < n; i++) {{ std::cin >> x; s += x; }} std::cout << s + {bump} << '\\n'; }}",
    "javascript": "const v = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);  // {tag}\n"
                  "console.log(v.slice(1).reduce((a, b) => a + b, 0) + {bump});",
}
STDCXX = "#include <bits/stdc++.h>\n// {tag}\nint main() {{ long n; std::cin >> n; std::cout << n << '\\n'; }}"


def tests(count: int) -> ProgramTests:
    cases = []
    for k in range(count):
        values = list(range(k, k + 5))
        cases.append(IOTest(input=f"{len(values)}\n{' '.join(map(str, values))}\n", output=f"{sum(values)}\n"))
    return ProgramTests(io=tuple(cases))


def _median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def measure(language: str, count: int, test_count: int, workers: int, run_id: str) -> dict[str, float]:
    verifier = ProgramVerifier(language=language, limits=SandboxLimits(wall_s=20.0))
    reference = tests(test_count)
    responses = [f"```{language}\n{SOURCES[language].format(tag=f'{run_id}-{i}', bump=i % 2)}\n```" for i in range(count)]
    expect = [i % 2 == 0 for i in range(count)]
    verifier(responses[0].replace(run_id, run_id + "warm"), reference)  # warm: the probe and the imports
    latencies, right = [], 0
    for response, ok in zip(responses, expect):
        start = time.perf_counter()
        right += verifier(response, reference).correct == ok
        latencies.append(time.perf_counter() - start)
    pooled_responses = [r.replace(run_id, run_id + "pool") for r in responses]  # no compile cached by the above
    with VerifierPool(workers, timeout_s=120.0) as pool:
        pool.map(verifier, pooled_responses[:workers], [reference] * workers)
        start = time.perf_counter()
        pooled = pool.map(verifier, pooled_responses, [reference] * count)
        elapsed = time.perf_counter() - start
    right_pooled = sum(r.correct == ok for r, ok in zip(pooled, expect))
    lang = get_language(language)
    compile_s, stdcxx_s = [], []
    if lang.compiled:
        for i in range(max(3, count // 3)):
            start = time.perf_counter()
            build(lang, SOURCES[language].format(tag=f"{run_id}-compile-{i}", bump=0))
            compile_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            build(lang, STDCXX.format(tag=f"{run_id}-stdcxx-{i}"))
            stdcxx_s.append(time.perf_counter() - start)
    program = build(lang, SOURCES[language].format(tag=f"{run_id}-run", bump=0))
    run_s = []
    command = lang.command("run", memory_mb=verifier.limits.memory_mb)
    for case in reference.io * max(2, 9 // test_count):
        start = time.perf_counter()
        run_command(command, files=program.files, stdin=case.input.encode(), limits=verifier.limits,
                    address_space_mb=verifier.limits.memory_mb + lang.address_space_extra_mb)
        run_s.append(time.perf_counter() - start)
    latencies.sort()
    row = {"median_ms": _median_ms(latencies),
           "p95_ms": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
           "programs_per_s": count / sum(latencies), "programs_per_s_pool": count / elapsed,
           "run_ms": _median_ms(run_s), "verdicts_as_expected": right / count,
           "verdicts_as_expected_pool": right_pooled / count}
    if compile_s:
        row.update(compile_ms=_median_ms(compile_s), compile_bits_stdcxx_ms=_median_ms(stdcxx_s),
                   saved_per_response_ms=(test_count - 1) * _median_ms(compile_s))
    return row


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=12, help="programs per language (half right, half wrong)")
    parser.add_argument("--tests", type=int, default=3, help="stdin/stdout tests per program")
    parser.add_argument("--workers", type=int, default=2, help="VerifierPool workers for the throughput column")
    parser.add_argument("--languages", default="python,cpp,javascript", help="comma-separated registry names")
    add_out_argument(parser, "bench_languages")
    args = parser.parse_args(argv)
    run_id = f"bench{time.time_ns()}"
    rows = {}
    for language in args.languages.split(","):
        missing = get_language(language).missing()
        if missing:
            print(f"{language}: skipped ({missing})")
            continue
        rows[language] = measure(language, args.candidates, args.tests, args.workers, run_id)
    print(f"{'language':<11} {'median ms':>9} {'p95 ms':>8} {'prog/s':>7} {'prog/s pool':>11} {'run ms':>7} "
          f"{'compile ms':>10} {'bits/stdc++ ms':>14} {'verdicts ok':>11}")
    for language, row in rows.items():
        compiled = f"{row['compile_ms']:>10.0f} {row['compile_bits_stdcxx_ms']:>14.0f}" if "compile_ms" in row else \
            f"{'-':>10} {'-':>14}"
        print(f"{language:<11} {row['median_ms']:>9.0f} {row['p95_ms']:>8.0f} {row['programs_per_s']:>7.2f} "
              f"{row['programs_per_s_pool']:>11.2f} {row['run_ms']:>7.0f} {compiled} {row['verdicts_as_expected']:>11.3f}")
    for language, row in rows.items():
        if "saved_per_response_ms" in row:
            print(f"{language}: compiling once per response, not once per test, saves "
                  f"{row['saved_per_response_ms']:.0f} ms per response at {args.tests} tests")
    result = {"candidates": args.candidates, "tests": args.tests, "workers": args.workers, "rows": rows}
    write_json(out_path(args.out, "bench_languages"), result)
    return result


if __name__ == "__main__":
    main()
