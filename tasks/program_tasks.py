"""Program tasks in any sandbox language: stdin/stdout problems with checkers, and function problems.

* :func:`program_task` builds a task from plain options (``language``, ``compare``, ``checker``,
  ``scoring``, ``time_limit_s``, ...; what a task spec maps its fields to) over a user's JSONL/Parquet
  rows (:func:`convert_program_row`): ``gym.make(...)`` or the CLI then loads ``data_files=...``.
* ``CppPick-v0`` (built in, procedural, offline): C++ programs reading a list from stdin; some problems
  accept any of several answers (an index of the largest number, a pair summing to a target), so every
  problem carries its checker program, run sandboxed.
* ``JSFunctions-v0`` (built in, procedural, offline): JavaScript functions judged on call tests.

Every built-in problem's metadata holds a reference program (``solution``) and its fence tag (``fence``).

Example:
    >>> task = program_task("MyCpp", language="cpp", compare="float", tolerance=1e-6, scoring="fraction")
    >>> task.verifier.language, task.verifier.compare, task.verifier.scoring
    ('cpp', 'float', 'fraction')
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Task
from .loading import DatasetSource, RowError, get_field, get_text, metadata_of, row_id
from .procedural import ProceduralSource, check_size_and_seed
from .registry import register_task
from dapo_env.types import InvalidReference, Problem
from dapo_env.verifiers.code import CallTest, IOTest, ProgramTests, ProgramVerifier, get_language
from dapo_env.verifiers.code.sandbox import SandboxLimits

_FENCE_TAG = {"python": "python", "cpp": "cpp", "javascript": "javascript"}
STDIO_TEMPLATE = ("{question}\n\nWrite a complete {language_title} program that reads standard input and writes "
                  "standard output, in one ```{fence} code block.")
FUNCTION_TEMPLATE = "{question}\n\nWrite the function in {language_title}, in one ```{fence} code block."
_TITLES = {"python": "Python", "cpp": "C++17", "javascript": "JavaScript (Node.js)"}


# --- a user's rows -------------------------------------------------------------------------------------------
def convert_program_row(row: Mapping[str, Any], index: int, *, language: str = "python") -> Problem:
    """A row -> Problem with :class:`ProgramTests`.

    Fields: ``question`` (or ``prompt``/``description``), the tests as ``tests`` (a list of ``{"input",
    "output", "weight"?, "time_limit_s"?}``), ``inputs`` + ``outputs`` lists, or ``input_output`` (APPS/TACO:
    their JSON), function tests as ``calls`` (``[{"call", "expected"}]``), an optional ``checker`` (the
    problem's checker source), an optional ``time_limit_s`` (each test's default) and ``id``/``task_id``.
    """
    question = get_text(row, "question", "prompt", "description")
    source: Any = {key: row[key] for key in ("tests", "inputs", "outputs", "calls", "checker", "weights")
                   if row.get(key) is not None}
    if row.get("input_output") is not None:
        value = row["input_output"]
        try:
            source.update(json.loads(value) if isinstance(value, str) else dict(value))
        except (ValueError, TypeError):
            raise RowError("input_output", "is not a JSON object with 'inputs' and 'outputs'") from None
    try:
        tests = ProgramTests.from_value(source)
    except InvalidReference as exc:
        raise RowError("tests", str(exc)) from None
    limit = get_field(row, "time_limit_s", required=False)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit <= 600:
            raise RowError("time_limit_s", f"must be seconds in (0, 600], got {limit!r}")
        tests = ProgramTests(io=tuple(t if t.time_limit_s else IOTest(input=t.input, output=t.output, weight=t.weight,
                                                                      time_limit_s=float(limit)) for t in tests.io),
                             calls=tests.calls, checker=tests.checker)
    metadata = metadata_of(row, {"question", "prompt", "description", "tests", "inputs", "outputs", "calls",
                                 "checker", "input_output", "weights"})
    metadata.update(_language_fields(language))
    return Problem(id=row_id(row, index, "id", "task_id"), question=question, answer=tests, metadata=metadata)


def _language_fields(language: str) -> dict[str, str]:
    name = get_language(language).name
    return {"language": name, "language_title": _TITLES.get(name, name), "fence": _FENCE_TAG.get(name, name)}


def program_task(name: str, *, language: str = "python", compare: str = "whitespace", tolerance: float = 1e-6,
                 checker: str = "", checker_language: str = "python", scoring: str = "pass_fail",
                 time_limit_s: float | None = None, memory_mb: int = 1024, function: bool = False,
                 prompt_template: str | None = None, hub_id: str = "", split: str = "train",
                 description: str = "", version: int = 0) -> Task:
    """A program task over rows read by :func:`convert_program_row`, verified by a :class:`ProgramVerifier`
    built from the plain options (see its arguments). Register it, then load it with ``data_files=``.

    ``function=True`` picks the function prompt (call tests) instead of the stdin/stdout one.
    """
    verifier = ProgramVerifier(language=language, compare=compare, tolerance=tolerance, checker=checker,
                               checker_language=checker_language, scoring=scoring, time_limit_s=time_limit_s,
                               limits=SandboxLimits(wall_s=time_limit_s or 6.0, memory_mb=memory_mb))
    source = DatasetSource(env_id=f"{name}-v{version}", hub_id=hub_id,
                           convert=functools.partial(convert_program_row, language=verifier.language),
                           example_file="path/to/problems.jsonl")
    return Task(name=name, source=source, verifier=verifier,
                prompt_template=prompt_template or (FUNCTION_TEMPLATE if function else STDIO_TEMPLATE),
                split=split, version=version,
                description=description or f"{_TITLES.get(verifier.language, verifier.language)} programs from "
                                           f"your rows ({compare}, {scoring}).")


# --- CppPick-v0 ------------------------------------------------------------------------------------------------
_SAME_TOKENS = ("import sys\n"
                "_, expected, actual = (open(p).read().split() for p in sys.argv[1:4])\n"
                "sys.exit(0 if expected == actual else 1)\n")
_ANY_MAX_INDEX = ("import sys\n"
                  "data, _, actual = (open(p).read().split() for p in sys.argv[1:4])\n"
                  "n, a = int(data[0]), [int(v) for v in data[1:]]\n"
                  "ok = len(actual) == 1 and actual[0].lstrip('-').isdigit() and 1 <= int(actual[0]) <= n\n"
                  "sys.exit(0 if ok and a[int(actual[0]) - 1] == max(a) else 1)\n")
_ANY_PAIR = ("import sys\n"
             "data, _, actual = (open(p).read().split() for p in sys.argv[1:4])\n"
             "n, target, a = int(data[0]), int(data[1]), [int(v) for v in data[2:]]\n"
             "ok = len(actual) == 2 and all(t.isdigit() for t in actual)\n"
             "i, j = (int(t) for t in actual) if ok else (0, 0)\n"
             "sys.exit(0 if ok and 1 <= i < j <= n and a[i - 1] + a[j - 1] == target else 1)\n")


# Reference programs (a problem's metadata "solution"): what a right response holds
_CPP_SOLUTIONS = {
    "sum": "#include <iostream>\nint main() { long n, s = 0, x; std::cin >> n; while (n--) { std::cin >> x; s += x; }\n"
           "  std::cout << s << '\\n'; }",
    "max_index": "#include <iostream>\n#include <vector>\nint main() { int n; std::cin >> n; std::vector<long> a(n);\n"
                 "  int b = 0; for (int i = 0; i < n; i++) { std::cin >> a[i]; if (a[i] > a[b]) b = i; }\n"
                 "  std::cout << b + 1 << '\\n'; }",
    "pair": "#include <iostream>\n#include <vector>\nint main() { int n; long t; std::cin >> n >> t; std::vector<long> a(n);\n"
            "  for (auto& x : a) std::cin >> x;\n  for (int i = 0; i < n; i++) for (int j = i + 1; j < n; j++)\n"
            "    if (a[i] + a[j] == t) { std::cout << i + 1 << ' ' << j + 1 << '\\n'; return 0; } }",
    "sorted": "#include <algorithm>\n#include <iostream>\n#include <vector>\nint main() { int n; std::cin >> n;\n"
              "  std::vector<long> a(n); for (auto& x : a) std::cin >> x; std::sort(a.begin(), a.end());\n"
              "  for (long x : a) std::cout << x << ' '; std::cout << '\\n'; }",
}


@dataclass(frozen=True, kw_only=True)
class CppPickConfig:
    """Knobs of ``CppPick-v0``.

    Attributes:
        tests: stdin/stdout tests per problem.
        max_count: the longest list in a test (>= 2).
        max_value: numbers lie in ``[-max_value, max_value]``.
        size, seed: the procedural split's size and seed.
    """

    tests: int = 3
    max_count: int = 8
    max_value: int = 50
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("tests", 1), ("max_count", 2), ("max_value", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        check_size_and_seed(self.size, self.seed)


def _numbers(rng: np.random.Generator, config: CppPickConfig) -> list[int]:
    return [int(v) for v in rng.integers(-config.max_value, config.max_value + 1,
                                         size=int(rng.integers(2, config.max_count + 1)))]


def generate_cpp_pick(config: CppPickConfig, rng: np.random.Generator) -> tuple[str, ProgramTests, Mapping[str, Any]]:
    """One problem: a task on a list read from stdin, its tests and its checker."""
    kind = ("sum", "max_index", "pair", "sorted")[int(rng.integers(4))]
    io = []
    for _ in range(config.tests):
        a = _numbers(rng, config)
        if kind == "pair":
            i, j = sorted(int(v) for v in rng.choice(len(a), size=2, replace=False))
            target = a[i] + a[j]
            io.append(IOTest(input=f"{len(a)} {target}\n{' '.join(map(str, a))}\n", output=f"{i + 1} {j + 1}\n"))
            continue
        head = f"{len(a)}\n{' '.join(map(str, a))}\n"
        answer = {"sum": str(sum(a)), "max_index": str(a.index(max(a)) + 1),
                  "sorted": " ".join(map(str, sorted(a)))}[kind]
        io.append(IOTest(input=head, output=answer + "\n"))
    what = {"sum": "the sum of the numbers",
            "max_index": "the 1-based position of the largest number (any one of them if it occurs more than once)",
            "pair": "two 1-based positions i < j whose numbers add up to the target (any such pair; one exists)",
            "sorted": "the numbers in non-decreasing order, separated by spaces"}[kind]
    first = "a count n and a target t" if kind == "pair" else "a count n"
    example = io[0]
    question = (f"Standard input holds {first} on the first line, then n integers on the second. Print {what}.\n"
                f"Example input:\n{example.input}Example output:\n{example.output}")
    checker = {"max_index": _ANY_MAX_INDEX, "pair": _ANY_PAIR}.get(kind, _SAME_TOKENS)
    metadata = {"kind": kind, "solution": _CPP_SOLUTIONS[kind], **_language_fields("cpp")}
    return question, ProgramTests(io=tuple(io), checker=checker), metadata


CPP_PICK = Task(
    name="CppPick",
    source=ProceduralSource(default=CppPickConfig(), generate=generate_cpp_pick),
    verifier=ProgramVerifier(language="cpp", compare="checker", scoring="fraction",
                             limits=SandboxLimits(wall_s=4.0, memory_mb=256)),
    prompt_template=STDIO_TEMPLATE,
    split="train",
    description="Procedural C++ stdin/stdout problems on a list; any valid answer passes (per-problem checker "
                "programs, run sandboxed); score = share of tests passed (knobs: tests, max_count, max_value).",
)


# --- JSFunctions-v0 --------------------------------------------------------------------------------------------
_JS_SOLUTIONS = {
    "sumOf": "const sumOf = a => a.reduce((x, y) => x + y, 0);",
    "largest": "function largest(a) { return Math.max(...a); }",
    "countEven": "function countEven(a) { return a.filter(v => v % 2 === 0).length; }",
    "reversed": "function reversed(a) { return [...a].reverse(); }",
    "countVowels": "function countVowels(s) { return [...s].filter(c => 'aeiouAEIOU'.includes(c)).length; }",
    "isPalindrome": "function isPalindrome(s) { return s === [...s].reverse().join(''); }",
}
_JS_FUNCTIONS = {
    "sumOf": ("takes an array of numbers and returns their sum", lambda a: sum(a), "array"),
    "largest": ("takes a non-empty array of numbers and returns the largest", lambda a: max(a), "array"),
    "countEven": ("takes an array of integers and returns how many are even", lambda a: sum(v % 2 == 0 for v in a),
                  "array"),
    "reversed": ("takes an array and returns a new array with the elements in reverse order", lambda a: a[::-1],
                 "array"),
    "countVowels": ("takes a string and returns how many of its letters are vowels (a, e, i, o, u, either case)",
                    lambda s: sum(c in "aeiouAEIOU" for c in s), "string"),
    "isPalindrome": ("takes a string and returns true when it reads the same backwards", lambda s: s == s[::-1],
                     "string"),
}


@dataclass(frozen=True, kw_only=True)
class JSFunctionsConfig:
    """Knobs of ``JSFunctions-v0``: call tests per problem, the longest array/string, size and seed."""

    tests: int = 4
    max_length: int = 6
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("tests", 1), ("max_length", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        check_size_and_seed(self.size, self.seed)


def generate_js_function(config: JSFunctionsConfig, rng: np.random.Generator
                         ) -> tuple[str, ProgramTests, Mapping[str, Any]]:
    """One problem: a function to write, its call tests (JSON values) and one shown example."""
    names = sorted(_JS_FUNCTIONS)
    name = names[int(rng.integers(len(names)))]
    what, reference, kind = _JS_FUNCTIONS[name]
    calls = []
    for _ in range(config.tests):
        length = int(rng.integers(1, config.max_length + 1))
        if kind == "array":
            arg: Any = [int(v) for v in rng.integers(-20, 21, size=length)]
        else:
            letters = "abeiourst"
            arg = "".join(letters[int(i)] for i in rng.integers(len(letters), size=length))
            if rng.random() < 0.3:
                arg = arg + arg[::-1]
        calls.append(CallTest(call=f"{name}({json.dumps(arg)})", expected=reference(arg)))
    shown = calls[0]
    question = (f"Write a JavaScript function `{name}` that {what}.\n"
                f"Example: {shown.call} returns {json.dumps(shown.expected)}.")
    metadata = {"function": name, "solution": _JS_SOLUTIONS[name], **_language_fields("javascript")}
    return question, ProgramTests(calls=tuple(calls)), metadata


JS_FUNCTIONS = Task(
    name="JSFunctions",
    source=ProceduralSource(default=JSFunctionsConfig(), generate=generate_js_function),
    verifier=ProgramVerifier(language="javascript", scoring="fraction", limits=SandboxLimits(wall_s=4.0)),
    prompt_template=FUNCTION_TEMPLATE,
    split="train",
    description="Procedural JavaScript functions judged on call tests (values compared outside the sandbox); "
                "score = share of calls passed (knobs: tests, max_length).",
)

for _task in (CPP_PICK, JS_FUNCTIONS):
    register_task(_task)

__all__ = ["CPP_PICK", "FUNCTION_TEMPLATE", "JS_FUNCTIONS", "STDIO_TEMPLATE", "CppPickConfig", "JSFunctionsConfig",
           "convert_program_row", "generate_cpp_pick", "generate_js_function", "program_task"]
