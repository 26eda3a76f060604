"""ProgramVerifier on real compilers and interpreters: C++ (g++), JavaScript (node) and Python programs on
stdin/stdout tests (comparison modes, checker programs in each language, per-test time limits, scoring
modes) and function calls; the languages registry; the old module paths."""

from __future__ import annotations

import importlib
import time

import pytest

from dapo_env.types import CodeTests, InvalidReference
from dapo_env.verifiers import ProgramVerifier
from dapo_env.verifiers.code import CallTest, IOTest, Language, ProgramTests, compare_output, get_language
from dapo_env.verifiers.code.languages import register_language
from dapo_env.verifiers.code.programs import build
from dapo_env.verifiers.code.sandbox import SandboxLimits, isolation, run_command

SANDBOX = isolation("full").ok
needs_sandbox = pytest.mark.skipif(not SANDBOX, reason="the code sandbox needs bubblewrap: apt-get install bubblewrap")


def needs(language: str) -> pytest.MarkDecorator:
    missing = get_language(language).missing()
    return pytest.mark.skipif(not SANDBOX or missing is not None,
                              reason=f"{language}: {missing or 'needs bubblewrap: apt-get install bubblewrap'}")


LIMITS = SandboxLimits(wall_s=10.0, memory_mb=256)
ADD_IO = ProgramTests(io=(IOTest(input="2 3\n", output="5\n"), IOTest(input="10 20\n", output="30\n"),
                          IOTest(input="1 1\n", output="2\n", weight=2.0)))
SOLUTIONS = {
    "cpp": "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                  "console.log(a + b);",
    "python": "a, b = map(int, input().split())\nprint(a + b)",
}
# wrong on the weighted test only (1 1 -> 3)
ALMOST = {
    "cpp": "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b + (a == 1) << '\\n'; }",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                  "console.log(a + b + (a === 1 ? 1 : 0));",
    "python": "a, b = map(int, input().split())\nprint(a + b + (a == 1))",
}
FENCE = {"cpp": "cpp", "javascript": "js", "python": "python"}


def fenced(language: str, code: str) -> str:
    return f"Here it is.\n```{FENCE[language]}\n{code}\n```"


# --- pure parts --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "expected", "actual", "ok"), [
    ("exact", "1 2\n", "1 2\n", True), ("exact", "1 2\n", "1 2", False), ("exact", "a\r\nb\n", "a\nb\n", True),
    ("whitespace", "1 2\n3\n", " 1\t2 3 \n\n", True), ("whitespace", "1 2", "1 2 3", False),
    ("float", "0.5 x\n", "0.5000001 x", True), ("float", "0.5", "0.51", False), ("float", "1e9", "1000000000.5", True),
    ("float", "nan", "nan", True), ("float", "inf", "1e308", False), ("float", "1 2", "1", False),
    ("unordered", "a b\nc\n", "c\na  b\n", True), ("unordered", "a\na\n", "a\n", False),
])
def test_comparison_modes(mode: str, expected: str, actual: str, ok: bool) -> None:
    assert compare_output(mode, expected, actual, tolerance=1e-6) is ok


def test_registry_names_tags_and_bad_entries() -> None:
    assert get_language("C++").name == "cpp" and get_language("node").name == "javascript"
    with pytest.raises(ValueError, match="unknown language 'cobol'"):
        get_language("cobol")
    with pytest.raises(ValueError, match="already names language 'cpp'"):
        register_language(Language(name="cpp2", tags=("c++",), source_file="a.cc", run=("{dir}/a",)))
    with pytest.raises(ValueError, match="unknown placeholder"):
        Language(name="x", tags=(), source_file="x", run=("x", "{nope}"))
    with pytest.raises(ValueError, match="go together"):
        Language(name="x", tags=(), source_file="x", run=("x",), compile=("cc",))


def test_options_are_validated_with_the_fix() -> None:
    with pytest.raises(ValueError, match="compare must be one of"):
        ProgramVerifier(compare="fuzzy")
    with pytest.raises(ValueError, match="scoring must be one of"):
        ProgramVerifier(scoring="best")
    with pytest.raises(ValueError, match="time_limit_s"):
        ProgramVerifier(time_limit_s=0)
    with pytest.raises(ValueError, match="javascript needs memory_mb >= 128"):
        ProgramVerifier(language="js", limits=SandboxLimits(memory_mb=64))
    with pytest.raises(ValueError, match="javascript needs max_processes >= 4"):
        ProgramVerifier(language="js", limits=SandboxLimits(max_processes=2))


def test_references_in_every_form() -> None:
    taco = ProgramTests.from_value('{"inputs": ["1\\n", "2\\n"], "outputs": ["1\\n", ["2", "3"]]}')
    assert [t.output for t in taco.io] == ["1\n", "2\n3\n"]
    rows = ProgramTests.from_value({"io": [{"input": "x", "output": "y", "weight": 3, "time_limit_s": 1.5}],
                                    "calls": [["f(1)", 2]], "checker": "print(1)"})
    assert rows.io[0].weight == 3 and rows.io[0].time_limit_s == 1.5 and rows.calls[0] == CallTest(call="f(1)", expected=2)
    assert ProgramTests.from_value(rows.to_dict()) == rows
    assert ProgramTests.from_value(CodeTests(stdio=(("1", "2"),))).io == (IOTest(input="1", output="2"),)
    assert ProgramTests.from_value([["1", "2"]]).io[0].output == "2"
    for bad, match in (({"io": [{"input": "1", "out": "2"}]}, "unknown IOTest field"),
                       ({"inputs": ["1"], "outputs": []}, "same length"), ({}, "at least one test"),
                       ({"io": [{"input": "1", "output": "2", "weight": 0}]}, "weight"), (3, "cannot read")):
        with pytest.raises(InvalidReference, match=match):
            ProgramTests.from_value(bad)


def test_old_module_paths_are_the_moved_modules() -> None:
    for old, new in (("sandbox", "code.sandbox"), ("seccomp", "code.seccomp"), ("code_plan", "code.plan"),
                     ("code_values", "code.values"), ("code_harness", "code.harness")):
        assert importlib.import_module(f"dapo_env.verifiers.{old}") is importlib.import_module(f"dapo_env.verifiers.{new}")
    from dapo_env.verifiers import CodeVerifier
    from dapo_env.verifiers.code import CodeVerifier as moved
    assert CodeVerifier is moved


# --- every language, real runs ----------------------------------------------------------------------------
@pytest.mark.parametrize("language", ["cpp", "javascript", "python"])
def test_stdio_scoring_modes_and_per_test_verdicts(language: str) -> None:
    if (missing := get_language(language).missing()) or not SANDBOX:
        pytest.skip(f"{language}: {missing or 'needs bubblewrap'}")
    right = ProgramVerifier(language=language, limits=LIMITS)(fenced(language, SOLUTIONS[language]), ADD_IO)
    assert right.correct and right.reason == "passed:3/3" and right.score == 1.0
    scores = {}
    for scoring in ("pass_fail", "fraction", "weighted"):
        report = ProgramVerifier(language=language, scoring=scoring, limits=LIMITS).report(
            fenced(language, ALMOST[language]), ADD_IO)
        assert [t.status for t in report.tests] == ["passed", "passed", "wrong_answer"]
        assert report.result.reason == "tests_failed:1/3;verdicts:PPW"
        assert "printed '3\\n'" in report.tests[2].message and "2\\n" not in report.tests[2].message
        scores[scoring] = report.result.score
    assert scores == {"pass_fail": 0.0, "fraction": pytest.approx(2 / 3), "weighted": pytest.approx(0.5)}


@needs("cpp")
def test_cpp_compile_error_is_trimmed_into_feedback_and_compiled_once() -> None:
    verifier = ProgramVerifier(language="cpp", limits=LIMITS)
    report = verifier.report(fenced("cpp", "int main() { return undefined_name; }"), ADD_IO)
    assert report.result.reason == "compile_error" and report.result.score == 0.0
    assert all(t.status == "compile_error" for t in report.tests)
    assert "undefined_name" in report.tests[0].message and "/tmp/" not in report.tests[0].message
    source = SOLUTIONS["cpp"] + "\n// cache probe"
    start = time.monotonic()
    first = build(get_language("cpp"), source)
    compile_s = time.monotonic() - start
    start = time.monotonic()
    assert build(get_language("cpp"), source) is first and time.monotonic() - start < compile_s / 5


@needs("cpp")
def test_cpp_per_test_time_limits_runtime_errors_and_wrong_language() -> None:
    code = ("#include <iostream>\nint main() { long n; std::cin >> n; if (n < 0) return 3;\n"
            "  volatile unsigned long x = 0; for (long i = 0; i < n; i++) x += i; std::cout << n << '\\n'; }")
    tests = ProgramTests(io=(IOTest(input="5", output="5"), IOTest(input="-1", output="-1"),
                             IOTest(input="100000000000", output="100000000000", time_limit_s=0.5)))
    verifier = ProgramVerifier(language="cpp", scoring="fraction", limits=LIMITS)
    start = time.monotonic()
    report = verifier.report(fenced("cpp", code), tests)
    assert time.monotonic() - start < 9  # the 0.5 s limit, not the verifier's 10 s
    assert [t.status for t in report.tests] == ["passed", "runtime_error", "time_limit"]
    assert "exited with status 3" in report.tests[1].message and "0.5 s" in report.tests[2].message
    assert report.result.reason.endswith(";verdicts:PRT")
    assert verifier(fenced("python", "print(5)"), tests).reason == "wrong_language:python"
    assert verifier("no code at all", tests).reason == "no_code"


CHECKERS = {  # accept any order of the two numbers a+b and a*b
    "python": "import sys\ninp, exp, act = (open(p).read().split() for p in sys.argv[1:4])\n"
              "sys.exit(0 if sorted(act) == sorted(exp) else 1)\n",
    "cpp": "#include <fstream>\n#include <set>\n#include <string>\nstd::multiset<std::string> read(const char* p) {\n"
           "  std::ifstream f(p); std::multiset<std::string> s; std::string w; while (f >> w) s.insert(w); return s; }\n"
           "int main(int argc, char** argv) { return read(argv[2]) == read(argv[3]) ? 0 : 1; }",
    "javascript": "const fs = require('fs');\nconst words = p => fs.readFileSync(p, 'utf8').split(/\\s+/).filter(Boolean).sort();\n"
                  "process.exit(JSON.stringify(words(process.argv[3])) === JSON.stringify(words(process.argv[4])) ? 0 : 1);",
}


@pytest.mark.parametrize("checker_language", ["python", "cpp", "javascript"])
def test_checker_programs_in_each_language(checker_language: str) -> None:
    for needed in ("cpp", checker_language):
        if (missing := get_language(needed).missing()) or not SANDBOX:
            pytest.skip(f"{needed}: {missing or 'needs bubblewrap'}")
    tests = ProgramTests(io=(IOTest(input="2 3", output="5 6"), IOTest(input="4 4", output="8 16")))
    verifier = ProgramVerifier(language="cpp", compare="checker", checker=CHECKERS[checker_language],
                               checker_language=checker_language, scoring="fraction", limits=LIMITS)
    either = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a * b << ' ' << a + b; }"
    assert verifier(fenced("cpp", either), tests).correct
    wrong = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a * b << ' ' << 8; }"
    result = verifier(fenced("cpp", wrong), tests)
    assert (result.correct, result.score, result.reason) == (False, 0.5, "tests_failed:1/2;verdicts:WP")


@needs("cpp")
def test_a_problem_checker_overrides_and_checker_mode_needs_one() -> None:
    accept_all = "import sys\nsys.exit(0)\n"
    tests = ProgramTests(io=(IOTest(input="", output="anything"),), checker=accept_all)
    verifier = ProgramVerifier(language="cpp", compare="checker", checker="import sys\nsys.exit(1)\n", limits=LIMITS)
    assert verifier(fenced("cpp", "int main() {}"), tests).correct
    with pytest.raises(InvalidReference, match="the checker does not compile"):
        ProgramVerifier(language="cpp", compare="checker", checker="int main( {", checker_language="cpp",
                        limits=LIMITS)(fenced("cpp", "int main() {}"), ProgramTests(io=tests.io))
    with pytest.raises(InvalidReference, match="needs a checker program"):
        ProgramVerifier(language="cpp", compare="checker")(fenced("cpp", "int main() {}"), ProgramTests(io=tests.io))


@pytest.mark.parametrize("language", ["javascript", "python"])
def test_function_calls_judged_outside(language: str) -> None:
    if (missing := get_language(language).missing()) or not SANDBOX:
        pytest.skip(f"{language}: {missing or 'needs bubblewrap'}")
    tests = ProgramTests(calls=(CallTest(call="add(1, 2)", expected=3), CallTest(call="add(0.1, 0.2)", expected=0.3),
                                CallTest(call="pair(2)", expected=[2, {"x": 2}]), CallTest(call="isZero(0)", expected=True),
                                CallTest(call="missing(1)", expected=1)))
    code = {"javascript": "function add(a, b) { return a + b; }\nconst pair = a => [a, {x: a}];\n"
                          "const isZero = v => v === 0 ? 1 : 0;",
            "python": "def add(a, b):\n    return a + b\ndef pair(a):\n    return [a, {'x': a}]\n"
                      "def isZero(v):\n    return 1 if v == 0 else 0"}[language]
    report = ProgramVerifier(language=language, scoring="fraction", limits=LIMITS).report(fenced(language, code), tests)
    statuses = [t.status for t in report.tests]
    assert statuses[:3] == ["passed", "passed", "passed"] and statuses[4] == "runtime_error"
    if language == "javascript":  # JSON booleans only equal booleans
        assert statuses[3] == "wrong_answer" and report.tests[3].message == "isZero(0) returned 1"
    assert report.result.score == pytest.approx(0.6 if language == "javascript" else 0.8)


@needs("javascript")
def test_js_values_of_every_kind_and_early_exit() -> None:
    tests = ProgramTests(calls=(CallTest(call="f()", expected=None), CallTest(call="g()", expected=[1, 2]),
                                CallTest(call="h()", expected={"a": [True, "s"]})))
    ok = "const f = () => null, g = () => [1, 2], h = () => ({a: [true, 's']});"
    assert ProgramVerifier(language="js", limits=LIMITS)(fenced("javascript", ok), tests).correct
    odd = ("const f = () => undefined, g = () => new Set([1, 2]), h = () => ({a: [1, 's']});\n"
           "setInterval(() => {}, 1000);")  # a live timer must not stretch the run to the wall limit
    start = time.monotonic()
    report = ProgramVerifier(language="js", scoring="fraction", limits=LIMITS).report(fenced("javascript", odd), tests)
    assert [t.status for t in report.tests] == ["wrong_answer"] * 3 and time.monotonic() - start < 8
    assert report.tests[0].message == "f() returned undefined"
    exits = ProgramVerifier(language="js", limits=LIMITS).report(fenced("javascript", "process.exit(0);"), tests)
    assert [t.status for t in exits.tests] == ["runtime_error"] * 3


@needs_sandbox
def test_run_command_files_are_read_only_and_the_folder_is_private() -> None:
    out = run_command(["/bin/sh", "-c", "cat data; echo x > data || echo refused; pwd; echo ok > new; cat new"],
                      files={"data": b"hello\n"}, limits=LIMITS)
    assert out.returncode == 0 and out.stdout.decode().split("\n")[:1] == ["hello"]
    assert "refused" in out.stdout.decode() and "/tmp\nok" in out.stdout.decode()
    with pytest.raises(ValueError, match="absolute path"):
        run_command(["sh", "-c", "true"])
    with pytest.raises(ValueError, match="plain names"):
        run_command(["/bin/true"], files={"../x": b""})


@needs("cpp")
def test_the_docs_page_examples_run() -> None:
    """docs/code_languages.md: every Python block but the checker (which reads its three files) runs, in a fresh
    interpreter, and prints what its ``# ->`` comment promises."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    from doc_snippets import fenced_blocks

    blocks = [code for _, code in fenced_blocks((repo / "docs" / "code_languages.md").read_text(), "python")]
    runnable = [b for b in blocks if "sys.argv[1:4]" not in b]
    assert len(runnable) == len(blocks) - 1 == 3
    for block in runnable:
        done = subprocess.run([sys.executable, "-c", block], cwd=repo, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        for promise in re.findall(r"# -> (.*)", block):
            assert promise.strip() in done.stdout, (promise, done.stdout)
