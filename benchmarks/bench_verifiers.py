"""Math verifiers side by side on the labelled tables (tests/verifiers/math_cases.py, math_lenient_cases.py).

Compares, in one run and on the same cases: ``MathVerifier()`` (strict extraction, the RL default),
``MathVerifier(extraction="lenient")`` (evaluation), plain Math-Verify (``verify(parse(gold),
parse(response))``), ``MathVerifier(answer_format="dapo")`` and the bare DAPO string rule (verl's
``math_dapo``: last ``Answer:`` in the last 300 characters, Minerva normalisation, string equality).
For each table and system: accuracy, false positives/negatives, timeouts (a ``timeout`` verdict or a
case over the time limit), median and worst per-case time, cases per second in one process, and the
ratio of cases per second to Math-Verify's. ``--workers N`` adds cases per second pooled through
``dapo_env.verifiers.verify_batch``.

``--peer DIR`` adds a third table: the grader test cases Math-Verify and verl ship with their code, read
from local copies of their test files (``tests/verifiers/peer_cases.py``); a reference a verifier refuses
(``InvalidReference``: strict mode and a gold that is a worked solution with no final answer) counts wrong.

Run:  python benchmarks/bench_verifiers.py [--limit-s 5] [--workers 0] [--peer DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "verifiers")]  # measure this checkout's code and tables

from dapo_env.types import InvalidReference, VerifyResult  # noqa: E402
from dapo_env.verifiers import MathVerifier  # noqa: E402
from dapo_env.verifiers.math_normalize import dapo_normalize  # noqa: E402
from dapo_env.verifiers.math_symbolic import get_helper, warm_up  # noqa: E402
from math_cases import CASES  # noqa: E402
from math_lenient_cases import LENIENT_CASES  # noqa: E402
from peer_cases import peer_cases  # noqa: E402
from _paths import add_out_argument, out_path, write_json  # noqa: E402

_DAPO_ANSWER = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")
BASELINE = "math_verify.verify(parse)"


@dataclass(frozen=True)
class MathVerifyBaseline:
    """Plain Math-Verify with its default extraction: ``verify(parse(gold), parse(response))``."""

    def __call__(self, response: str, gold: str) -> VerifyResult:
        import math_verify

        try:
            ok = bool(math_verify.verify(math_verify.parse(f"${gold}$"), math_verify.parse(response)))
        except Exception as exc:  # noqa: BLE001 - scored wrong like any verifier error
            return VerifyResult(False, 0.0, None, f"error:{type(exc).__name__}")
        return VerifyResult(ok, float(ok), None, "equal" if ok else "not_equal")


@dataclass(frozen=True)
class DapoStringRule:
    """The DAPO paper's scorer as a bare function of the text (no verifier machinery)."""

    def __call__(self, response: str, gold: str) -> VerifyResult:
        matches = _DAPO_ANSWER.findall(response[-300:])
        pred = dapo_normalize(matches[-1] if matches else "[INVALID]")
        ok = pred == dapo_normalize(gold)
        return VerifyResult(ok, float(ok), pred, "equal" if ok else "not_equal")


def run_single(verifier, cases: list[tuple[str, str, bool]], limit_s: float) -> dict[str, float]:
    """Score every ``(response, gold, expected)`` case in this process; accuracy, errors and speed."""
    verifier(cases[0][0], cases[0][1])  # warm imports
    verifier("Answer: \\sqrt{8}", "2\\sqrt{2}")
    times, tp, tn, fp, fn, timeouts = [], 0, 0, 0, 0, 0
    start_all = time.perf_counter()
    for response, gold, expected in cases:
        start = time.perf_counter()
        try:
            result = verifier(response, gold)
        except InvalidReference:  # a gold the verifier refuses to read is scored wrong
            result = VerifyResult(False, 0.0, None, "invalid_reference")
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        timeouts += elapsed > limit_s or result.reason == "timeout"
        if result.correct and expected:
            tp += 1
        elif result.correct:
            fp += 1
        elif expected:
            fn += 1
        else:
            tn += 1
    total = time.perf_counter() - start_all
    return {
        "accuracy": (tp + tn) / len(cases),
        "false_positives": fp,
        "false_negatives": fn,
        "timeouts": timeouts,
        "median_ms": statistics.median(times) * 1e3,
        "worst_ms": max(times) * 1e3,
        "cases_per_s": len(cases) / total,
    }


def run_pooled(verifier, cases: list[tuple[str, str, bool]], workers: int, limit_s: float) -> float:
    """Steady-state cases per second through ``verify_batch`` with ``workers`` processes."""
    from dapo_env.verifiers import VerifierPool, verify_batch

    responses, golds = [c[0] for c in cases], [c[1] for c in cases]
    with VerifierPool(workers, timeout_s=limit_s * 2) as pool:
        # Untimed passes warm every worker's imports and its own symbolic helper.
        verify_batch(verifier, ["Answer: \\frac{1}{0}"] * 64 * workers, ["1"] * 64 * workers, pool=pool)
        verify_batch(verifier, responses, golds, pool=pool)
        start = time.perf_counter()
        verify_batch(verifier, responses, golds, pool=pool)
        return len(cases) / (time.perf_counter() - start)


def print_table(title: str, rows: dict[str, dict[str, float]]) -> None:
    base = rows[BASELINE]["cases_per_s"]
    header = (f"{'system':30s} {'acc':>6s} {'FP':>4s} {'FN':>4s} {'t/o':>4s} {'med ms':>8s} {'worst ms':>9s} "
              f"{'cases/s':>9s} {'x MV':>7s}" + (f" {'pooled/s':>9s}" if "pooled_cases_per_s" in rows[BASELINE] else ""))
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    for name, r in rows.items():
        pooled = f" {r['pooled_cases_per_s']:9.0f}" if "pooled_cases_per_s" in r else ""
        print(f"{name:30s} {r['accuracy']:6.3f} {r['false_positives']:4d} {r['false_negatives']:4d} {r['timeouts']:4d} "
              f"{r['median_ms']:8.3f} {r['worst_ms']:9.1f} {r['cases_per_s']:9.0f} {r['cases_per_s'] / base:7.1f}{pooled}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-s", type=float, default=5.0, help="per-case time limit counted as a timeout")
    parser.add_argument("--workers", type=int, default=0, help="also time verify_batch with this many workers")
    parser.add_argument("--peer", metavar="DIR", default=None,
                        help="also run the grader test cases Math-Verify and verl ship, read from local copies of "
                             "their test files in DIR (tests/verifiers/peer_cases.py says which; never committed)")
    add_out_argument(parser, "bench_verifiers")
    args = parser.parse_args()

    tables = {
        "labelled": [(c.response, c.gold, c.expected) for c in CASES],
        "lenient": [(c.prediction, c.gold, c.expected) for c in LENIENT_CASES],
    }
    if args.peer is not None:
        tables["peer"] = [(c.prediction, c.gold, c.expected) for c in peer_cases(args.peer)]
        if not tables["peer"]:
            parser.error(f"no peer grader cases under {args.peer}: copy Math-Verify's tests/*.py (and verl's "
                         "tests/utils/reward_score/test_sandbox_on_cpu.py) there")
    systems = {
        "MathVerifier() strict": MathVerifier(timeout_s=args.limit_s),
        "MathVerifier(lenient)": MathVerifier(timeout_s=args.limit_s, extraction="lenient"),
        BASELINE: MathVerifyBaseline(),
        "MathVerifier(dapo)": MathVerifier(answer_format="dapo"),
        "DAPO string rule": DapoStringRule(),
    }
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its per-case timeout warnings
    results: dict[str, dict[str, dict[str, float]]] = {}
    for table, cases in tables.items():
        rows: dict[str, dict[str, float]] = {}
        for name, verifier in systems.items():
            if isinstance(verifier, MathVerifier):  # a fresh symbolic helper: no sympy cache from a previous system
                get_helper().close()
                warm_up()
            rows[name] = run_single(verifier, cases, args.limit_s)
            if args.workers > 0:
                rows[name]["pooled_cases_per_s"] = run_pooled(verifier, cases, args.workers, args.limit_s)
            rows[name]["x_math_verify"] = 0.0
        for row in rows.values():
            row["x_math_verify"] = row["cases_per_s"] / rows[BASELINE]["cases_per_s"]
        results[table] = rows
        print_table(f"{table} table: {len(cases)} cases, time limit {args.limit_s}s", rows)
    write_json(out_path(args.out, "bench_verifiers"), {
        "cases": {t: len(c) for t, c in tables.items()}, "limit_s": args.limit_s, "workers": args.workers,
        "command": "python benchmarks/bench_verifiers.py " + " ".join(sys.argv[1:]), "tables": results,
    })


if __name__ == "__main__":
    main()
