"""Math verifiers side by side on the labelled table (tests/verifiers/math_cases.py).

Compares, in one run: ``MathVerifier`` (``auto`` and ``dapo``), plain Math-Verify
(``verify(parse(gold), parse(response))``) and the pure DAPO string rule (verl ``math_dapo``: last
``Answer:`` in the last 300 characters, Minerva normalisation, string equality). Reports accuracy,
false positives/negatives, cases over the time limit, median and worst per-case time, cases per second
in one process and pooled through ``dapo_env.verifiers.verify_batch``.

Run:  python benchmarks/bench_verifiers.py [--workers 2] [--limit-s 5]
Writes benchmarks/results/bench_verifiers.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dapo_env.types import VerifyResult
from dapo_env.verifiers import MathVerifier
from dapo_env.verifiers.math_normalize import dapo_normalize
from dapo_env.verifiers.math_symbolic import warm_up

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "verifiers"))
from math_cases import CASES  # noqa: E402

_DAPO_ANSWER = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


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


def run_single(verifier, limit_s: float) -> dict[str, float]:
    verifier(CASES[0].response, CASES[0].gold)  # warm imports
    verifier("Answer: \\sqrt{8}", "2\\sqrt{2}")
    if isinstance(verifier, MathVerifier):
        warm_up()  # start the symbolic helper before timing (otherwise the first case pays its start-up)
    times, tp, tn, fp, fn, over = [], 0, 0, 0, 0, 0
    start_all = time.perf_counter()
    for case in CASES:
        start = time.perf_counter()
        result = verifier(case.response, case.gold)
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        over += elapsed > limit_s
        if result.correct and case.expected:
            tp += 1
        elif result.correct:
            fp += 1
        elif case.expected:
            fn += 1
        else:
            tn += 1
    total = time.perf_counter() - start_all
    return {
        "accuracy": (tp + tn) / len(CASES),
        "false_positives": fp,
        "false_negatives": fn,
        "over_limit": over,
        "median_ms": statistics.median(times) * 1e3,
        "worst_ms": max(times) * 1e3,
        "cases_per_s": len(CASES) / total,
    }


def run_pooled(verifier, workers: int, limit_s: float) -> float | None:
    try:
        from dapo_env.verifiers import VerifierPool, verify_batch
    except (ImportError, AttributeError):
        return None
    responses, golds = [c.response for c in CASES], [c.gold for c in CASES]
    with VerifierPool(workers, timeout_s=limit_s * 2) as pool:
        # Steady state: untimed passes warm every worker's imports and its own symbolic helper (a pair
        # only the symbolic stage decides, spread over many chunks so that every worker gets some).
        verify_batch(verifier, ["Answer: \\frac{1}{0}"] * 64 * workers, ["1"] * 64 * workers, pool=pool)
        verify_batch(verifier, responses, golds, pool=pool)
        start = time.perf_counter()
        verify_batch(verifier, responses, golds, pool=pool)
        return len(CASES) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=5.0, help="per-case time limit counted as a timeout")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_verifiers.json")
    args = parser.parse_args()

    systems = {
        "MathVerifier(auto)": MathVerifier(timeout_s=args.limit_s),
        "MathVerifier(dapo)": MathVerifier(answer_format="dapo"),
        "math_verify.verify(parse)": MathVerifyBaseline(),
        "DAPO string rule": DapoStringRule(),
    }
    rows: dict[str, dict[str, float | None]] = {}
    for name, verifier in systems.items():
        row: dict[str, float | None] = dict(run_single(verifier, args.limit_s))
        row["pooled_cases_per_s"] = run_pooled(verifier, args.workers, args.limit_s)
        rows[name] = row

    base = rows["math_verify.verify(parse)"]
    header = f"{'system':28s} {'acc':>6s} {'FP':>4s} {'FN':>4s} {'>lim':>5s} {'med ms':>8s} {'worst ms':>9s} " \
             f"{'cases/s':>9s} {'x MV':>7s} {'pooled/s':>9s}"
    print(f"{len(CASES)} labelled cases, time limit {args.limit_s}s, pooled workers={args.workers}")
    print(header)
    print("-" * len(header))
    for name, r in rows.items():
        pooled = "n/a" if r["pooled_cases_per_s"] is None else f"{r['pooled_cases_per_s']:.0f}"
        print(f"{name:28s} {r['accuracy']:6.3f} {r['false_positives']:4d} {r['false_negatives']:4d} "
              f"{r['over_limit']:5d} {r['median_ms']:8.3f} {r['worst_ms']:9.1f} {r['cases_per_s']:9.0f} "
              f"{r['cases_per_s'] / base['cases_per_s']:7.1f} {pooled:>9s}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "cases": len(CASES), "limit_s": args.limit_s, "workers": args.workers,
        "command": "python benchmarks/bench_verifiers.py", "systems": rows,
        "speedup_vs_math_verify": {n: r["cases_per_s"] / base["cases_per_s"] for n, r in rows.items()},
    }, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
