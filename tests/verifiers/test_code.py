"""CodeVerifier correctness: extraction policy, asserts, stdio, HumanEval prefix/check, partial scores,
and the real MBPP / HumanEval canonical solutions."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from dapo_env.types import CodeTests, VerifyResult
from dapo_env.verifiers import CodeVerifier
from dapo_env.verifiers.code import assemble_program, extract_code
from dapo_env.verifiers.sandbox import SandboxLimits

VERIFIER = CodeVerifier(limits=SandboxLimits(wall_s=8.0))
ADD_TESTS = CodeTests(tests=("assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"))


def fenced(code: str, tag: str = "python") -> str:
    return f"Here is my solution.\n```{tag}\n{code}\n```\nDone."


# -- extraction ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("```python\nx = 1\n```", "x = 1"),
        ("```py\nx = 1\n```", "x = 1"),
        ("```\nx = 1\n```", "x = 1"),
        ("```python3\nx = 1\n```", "x = 1"),
        ("```python\nx = 1\n```\ntext\n```python\ny = 2\n```", "y = 2"),  # the last block wins
        ("```python\nx = 1\n```\n```bash\nls -la\n```", "x = 1"),  # other languages are skipped
        ("def f():\n    return 1\n", "def f():\n    return 1"),  # unfenced, parses, has a statement
        ("The answer is 5.", None),  # prose does not parse
        ("hello", None),  # parses, but only a bare expression
        ("```python\nx = 1\n", None),  # an unclosed fence is ignored (and blocks the whole-response policy)
        ("```bash\nls\n```", None),
        ("```python\n\n```", None),
        ("", None),
    ],
)
def test_extract_code(response: str, expected: str | None) -> None:
    assert extract_code(response) == expected


def test_require_fence() -> None:
    assert extract_code("x = 1", require_fence=True) is None
    assert CodeVerifier(require_fence=True)("def add(a, b):\n    return a + b", ADD_TESTS).reason == "no_code"


def test_assemble_program_prefix_rules() -> None:
    prefix = 'from typing import List\n\n\ndef add(a: int, b: int) -> int:\n    """Add."""\n'
    tests = CodeTests(tests=("assert add(1, 1) == 2",), prefix=prefix, entry_point="add")
    assert assemble_program("    return a + b\n", tests) == prefix + "    return a + b\n"  # body continuation
    full = "def add(a: List, b):\n    return a + b"
    assert assemble_program(full, tests).endswith(full) and "from typing import List" in assemble_program(full, tests)
    assert assemble_program("x = 1", CodeTests(tests=("assert x",))) == "x = 1"


# -- scoring ---------------------------------------------------------------------------------------
def test_mbpp_style_asserts_pass_and_partial() -> None:
    good = VERIFIER(fenced("def add(a, b):\n    return a + b"), ADD_TESTS)
    assert good == VerifyResult(True, 1.0, "def add(a, b):\n    return a + b", "passed:3/3")
    partial = VERIFIER(fenced("def add(a, b):\n    return abs(a) + b"), ADD_TESTS)
    assert not partial.correct and partial.score == pytest.approx(2 / 3) and partial.reason == "tests_failed:1/3"
    wrong = VERIFIER(fenced("def add(a, b):\n    return a * b"), ADD_TESTS)
    assert wrong.score == pytest.approx(1 / 3)  # 2 * 2 == 4 passes by accident: scores are honest fractions


def test_setup_runs_after_candidate_and_before_tests() -> None:
    tests = CodeTests(tests=("assert double(X) == 10",), setup="X = 5")
    assert VERIFIER(fenced("def double(v):\n    return 2 * v"), tests).correct


def test_candidate_exception_keeps_earlier_definitions() -> None:
    result = VERIFIER(fenced("def add(a, b):\n    return a + b\nraise ValueError('late')"), ADD_TESTS)
    assert result.correct  # the tests still ran against the function that was defined


def test_syntax_error_and_no_code() -> None:
    assert VERIFIER(fenced("def add(a, b)\n    return a + b"), ADD_TESTS) == VerifyResult(
        False, 0.0, "def add(a, b)\n    return a + b", "syntax_error"
    )
    assert VERIFIER("I don't know.", ADD_TESTS) == VerifyResult(False, 0.0, None, "no_code")


def test_stdio_pairs() -> None:
    tests = CodeTests(stdio=(("3 4\n", "7\n"), ("10 -2", "8"), ("0 0\n", "0   \n\n")))
    program = "a, b = map(int, input().split())\nprint(a + b)"
    assert VERIFIER(fenced(program), tests).reason == "passed:3/3"
    trailing = "a, b = map(int, input().split())\nprint(a + b, end='  \\n\\n')"
    assert VERIFIER(fenced(trailing), tests).correct  # trailing whitespace per line is normalised
    assert VERIFIER(fenced("print(7)"), tests).score == pytest.approx(1 / 3)
    assert VERIFIER(fenced("print(' 7')"), tests).score == 0.0  # leading whitespace matters
    exits = "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)"
    assert VERIFIER(fenced(exits), tests).correct  # a clean exit after printing is a normal finish
    crash = "a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(3)"
    assert VERIFIER(fenced(crash), tests).score == 0.0  # a non-zero exit fails the test


def test_mixed_asserts_and_stdio() -> None:
    tests = CodeTests(tests=("assert f(2) == 4",), stdio=(("2\n", "4\n"),))
    program = "def f(x):\n    return x * x\nif __name__ == '__main__':\n    print(f(int(input())))"
    assert VERIFIER(fenced(program), tests).reason == "passed:2/2"


def test_humaneval_style_prefix_and_check() -> None:
    prefix = 'def incr_list(l: list):\n    """Return list with elements incremented by 1."""\n'
    check = "def check(candidate):\n    assert candidate([1, 2]) == [2, 3]\n    assert candidate([]) == []\n"
    tests = CodeTests(tests=(f"{check}\ncheck(incr_list)\n",), prefix=prefix, entry_point="incr_list")
    assert VERIFIER("    return [x + 1 for x in l]\n", tests).correct  # raw completion, no fence
    assert VERIFIER(fenced("    return [x + 1 for x in l]"), tests).correct  # fenced body
    assert VERIFIER(fenced("def incr_list(l):\n    return [x + 1 for x in l]"), tests).correct  # full def
    assert not VERIFIER(fenced("    return l"), tests).correct


def test_verifier_is_picklable_frozen_and_validated() -> None:
    verifier = CodeVerifier(limits=SandboxLimits(wall_s=3.0, memory_mb=512))
    assert pickle.loads(pickle.dumps(verifier)) == verifier
    with pytest.raises(AttributeError):
        verifier.limits = SandboxLimits()  # type: ignore[misc]
    with pytest.raises(ValueError, match="wall_s"):
        SandboxLimits(wall_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=8)
    with pytest.raises(TypeError, match="SandboxLimits"):
        CodeVerifier(limits={"wall_s": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="isolation"):
        CodeVerifier(isolation="none")
    layers = verifier.isolation_layers()
    assert layers.ok and {"bubblewrap", "pid_ns", "net_ns", "unprivileged_uid"} <= set(layers.active)


# -- real data, through the env layer ---------------------------------------------------------------
# Variants of a reference solution, each as a candidate would write it: the reference, a broken one (every
# result of the entry point changed), two cheats (an object equal to anything; exit before the tests).
BREAK = """
_reference = {name}
def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1 + abs(value)  # beyond any tolerance a test allows
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, (list, tuple)):
        return type(value)([*value, None])
    return "changed" if value is None else None
def {name}(*args, **kwargs):
    return _changed(_reference(*args, **kwargs))
"""
ALWAYS_EQUAL = """
class _Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __bool__(self):
        return True
    __hash__ = object.__hash__
def {name}(*args, **kwargs):
    return _Anything()
"""
EXIT_EARLY = "import sys\nprint('passed')\nsys.exit(0)\n"


def _variants(reference: str, name: str) -> list[str]:
    return [fenced(reference), fenced(reference + BREAK.format(name=name)), fenced(ALWAYS_EQUAL.format(name=name)),
            fenced(EXIT_EARLY + reference)]


def _sweep(env_id: str, data_file: Path, *, limit: int | None, workers: int) -> tuple[list, list]:
    """Every (or the first ``limit``) problem's variants through ``GroupVectorEnv``: (variants that passed,
    references that failed), each as (problem id, the four reasons)."""
    from dapo_env.vector import GroupVectorEnv

    batch = 8 if limit is None else min(8, limit)
    env = GroupVectorEnv(env_id, num_envs=4 * batch, group_size=4, data_files=str(data_file), workers=workers,
                         timeout_s=120.0)
    try:
        n = len(env.problems) if limit is None else min(limit, len(env.problems))
        wrong_passes, failed_references = [], []
        for start in range(0, n, batch):
            indices = [min(i, n - 1) for i in range(start, start + batch)]
            env.reset(options={"indices": indices})
            actions = []
            for index in indices:
                problem = env.problems[index]
                if env_id.startswith("MBPP"):
                    reference = problem.metadata["code"]
                else:
                    reference = problem.question + problem.metadata["canonical_solution"]
                actions += _variants(reference, problem.answer.entry_point)
            _, _, _, _, infos = env.step(actions)
            for k, index in enumerate(indices):
                got, reasons = list(infos["correct"][4 * k:4 * k + 4]), list(infos["reason"][4 * k:4 * k + 4])
                if any(got[1:]):
                    wrong_passes.append((env.problems[index].id, reasons))
                if not got[0]:
                    failed_references.append((env.problems[index].id, reasons))
        return wrong_passes, failed_references
    finally:
        env.close()


def test_real_mbpp_and_humaneval_through_the_env_sample(shared_data: Path) -> None:
    """The first 4 MBPP and HumanEval problems: references pass; broken and cheating variants fail."""
    assert _sweep("MBPP-v0", shared_data / "mbpp" / "mbpp.jsonl", limit=4, workers=2) == ([], [])
    assert _sweep("HumanEval-v0", shared_data / "humaneval" / "HumanEval.jsonl.gz", limit=4, workers=2) == ([], [])


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "file"), [("MBPP-v0", "mbpp/mbpp.jsonl"),
                                              ("MBPP-v0", "mbpp/mbpp_sanitized.jsonl"),
                                              ("HumanEval-v0", "humaneval/HumanEval.jsonl.gz")])
def test_every_real_reference_passes_and_every_variant_fails(shared_data: Path, env_id: str, file: str) -> None:
    """All of MBPP (974 and the 427 sanitized) and HumanEval (164), four variants each (~4 min idle). No
    variant may pass. A reference may miss only the time limit, and at most twice: MBPP 123's needs ~5 s
    of CPU, so a loaded machine can push it past the 6 s default."""
    wrong_passes, failed_references = _sweep(env_id, shared_data / file, limit=None, workers=2)
    assert wrong_passes == []
    assert len(failed_references) <= 2 and all(r[0].endswith(";timeout") for _, r in failed_references), \
        failed_references


def test_ordinary_library_use_is_not_blocked() -> None:
    """Legitimate code that touches frames (namedtuple, typing, dataclasses, enum), files in its own
    directory, recursion limits and threads runs normally under the audit hook."""
    program = (
        "import collections, dataclasses, enum, functools, heapq, re, sys, threading, typing\n"
        "sys.setrecursionlimit(5000)\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "T = typing.TypeVar('T')\n"
        "class Colour(enum.Enum):\n    RED = 1\n"
        "@dataclasses.dataclass\nclass Box:\n    items: typing.List[int]\n"
        "@functools.lru_cache(None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "with open('notes.txt', 'w') as fh:\n    fh.write('hello')\n"
        "def solve():\n"
        "    out = []\n"
        "    worker = threading.Thread(target=lambda: out.append(heapq.nsmallest(2, [5, 1, 3])))\n"
        "    worker.start(); worker.join()\n"
        "    text = open('notes.txt').read()\n"
        "    return (Point(1, 2).x, Colour.RED.value, Box([1]).items, fib(80), depth(3000), out[0],\n"
        "            re.sub('l+', 'L', text))\n"
    )
    tests = CodeTests(tests=("assert solve() == (1, 1, [1], 23416728348467685, 3000, [1, 3], 'heLo')",))
    assert VERIFIER(fenced(program), tests).reason == "passed:1/1"
