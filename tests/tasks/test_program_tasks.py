"""Program tasks: CppPick-v0 (C++ stdin/stdout with checker programs), JSFunctions-v0 (JavaScript call tests),
their feedback twins, and program_task() over a user's JSONL rows; real g++ and node in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dapo_env.tasks import get_task, register_task, unregister_task
from dapo_env.tasks.loading import RowError
from dapo_env.tasks.program_tasks import CppPickConfig, convert_program_row, program_task
from dapo_env.types import Completion, History
from dapo_env.verifiers.code import IOTest, ProgramTests, get_language
from dapo_env.verifiers.code.sandbox import isolation


def needs(language: str) -> pytest.MarkDecorator:
    missing = None if isolation("full").ok else "needs bubblewrap (apt-get install bubblewrap)"
    missing = missing or get_language(language).missing()
    return pytest.mark.skipif(missing is not None, reason=f"{language}: {missing}")


CPP = {
    "sum": "#include <iostream>\nint main() { long n, s = 0, x; std::cin >> n; while (n--) { std::cin >> x; s += x; }\n"
           "  std::cout << s << '\\n'; }",
    # the LAST largest: a different valid answer from the reference's first one when the largest repeats
    "max_index": "#include <iostream>\n#include <vector>\nint main() { int n; std::cin >> n; std::vector<long> a(n); int b = 0;\n"
                 "  for (int i = 0; i < n; i++) { std::cin >> a[i]; if (a[i] >= a[b]) b = i; } std::cout << b + 1 << '\\n'; }",
    # the LAST pair found: again possibly another valid answer than the reference's
    "pair": "#include <iostream>\n#include <vector>\nint main() { int n; long t; std::cin >> n >> t; std::vector<long> a(n);\n"
            "  for (auto& x : a) std::cin >> x; int bi = 0, bj = 0;\n"
            "  for (int i = 0; i < n; i++) for (int j = i + 1; j < n; j++) if (a[i] + a[j] == t) { bi = i; bj = j; }\n"
            "  std::cout << bi + 1 << ' ' << bj + 1 << '\\n'; }",
    "sorted": "#include <algorithm>\n#include <iostream>\n#include <vector>\nint main() { int n; std::cin >> n;\n"
              "  std::vector<long> a(n); for (auto& x : a) std::cin >> x; std::sort(a.begin(), a.end());\n"
              "  for (long x : a) std::cout << x << ' '; }",
}
JS = {
    "sumOf": "const sumOf = a => a.reduce((x, y) => x + y, 0);",
    "largest": "function largest(a) { return Math.max(...a); }",
    "countEven": "function countEven(a) { return a.filter(v => v % 2 === 0).length; }",
    "reversed": "function reversed(a) { return [...a].reverse(); }",
    "countVowels": "function countVowels(s) { return [...s].filter(c => 'aeiouAEIOU'.includes(c)).length; }",
    "isPalindrome": "function isPalindrome(s) { return s === [...s].reverse().join(''); }",
}


def test_problems_are_deterministic_and_carry_their_checkers() -> None:
    task = get_task("CppPick-v0")
    first, again = task.load(split="train", size=12), task.load(split="train", size=12)
    assert [p.question for p in first] == [p.question for p in again]
    assert {p.metadata["kind"] for p in first} == set(CPP)
    assert all(isinstance(p.answer, ProgramTests) and p.answer.checker and len(p.answer.io) == 3 for p in first)
    assert "```cpp" in task.format_prompt(first[0])
    with pytest.raises(ValueError, match="max_count must be an int >= 2"):
        CppPickConfig(max_count=1)


@needs("cpp")
def test_cpp_pick_right_programs_pass_any_valid_answer_wrong_ones_fail() -> None:
    task = get_task("CppPick-v0")
    problems = task.load(split="train", size=12, max_value=3)  # small values: repeated maxima and several pairs
    seen = set()
    for problem in problems:
        kind = problem.metadata["kind"]
        if kind in seen:
            continue
        seen.add(kind)
        assert task.verifier(f"```cpp\n{CPP[kind]}\n```", problem.answer).reason == "passed:3/3", kind
        other = CPP["sum" if kind != "sum" else "sorted"]
        wrong = task.verifier(f"```cpp\n{other}\n```", problem.answer)
        assert not wrong.correct and wrong.reason.startswith("tests_failed"), kind
    assert seen == set(CPP)


@needs("javascript")
def test_js_functions_right_functions_pass() -> None:
    task = get_task("JSFunctions-v0")
    for problem in task.load(split="train", size=8):
        name = problem.metadata["function"]
        assert task.verifier(f"```javascript\n{JS[name]}\n```", problem.answer).correct, name
        wrong = task.verifier(f"```javascript\nfunction {name}() {{ return null; }}\n```", problem.answer)
        assert wrong.score == 0.0 and "verdicts:W" in wrong.reason


@needs("javascript")
def test_feedback_twin_answers_failing_tests_per_test() -> None:
    task = get_task("JSFunctionsFeedback-v0")
    problem = task.load(split="train", size=1, max_attempts=2)[0]
    feedback = task.interaction.fenced
    history = History(problem, ({"role": "user", "content": problem.question},))
    wrong = f"```js\nfunction {problem.metadata['function']}() {{ return 0; }}\n```"
    turn = feedback.respond(history, Completion(wrong), task.verifier(wrong, problem.answer))
    assert not turn.done and turn.reply.startswith(f"{len(problem.answer.calls)} of {len(problem.answer.calls)} tests failed")
    assert "- wrong answer: " in turn.reply and "```javascript" in turn.reply
    expected = json.dumps(problem.answer.calls[1].expected)
    assert f"returned {expected}\n" not in turn.reply or expected == "0"
    python = "```python\nprint(1)\n```"
    reply = feedback.respond(history, Completion(python), task.verifier(python, problem.answer)).reply
    assert reply.startswith("Your code is in Python, but this task takes JavaScript")


def _rows(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_user_rows_in_every_form(tmp_path: Path) -> None:
    problem = convert_program_row({"id": "p1", "question": "Add.", "input_output": json.dumps(
        {"inputs": ["1 2\n"], "outputs": ["3\n"]}), "time_limit_s": 2}, 0, language="cpp")
    assert problem.answer.io == (IOTest(input="1 2\n", output="3\n", time_limit_s=2.0),)
    assert problem.metadata["fence"] == "cpp" and problem.id == "p1"
    calls = convert_program_row({"prompt": "f", "calls": [{"call": "f(1)", "expected": 2}]}, 3, language="js")
    assert calls.answer.calls[0].expected == 2
    with pytest.raises(RowError, match="needs its expected 'output'"):
        convert_program_row({"question": "q", "tests": [{"input": "1"}], "extra": 1}, 0)
    with pytest.raises(RowError, match="must be seconds in"):
        convert_program_row({"question": "q", "tests": [["1", "2"]], "time_limit_s": -1}, 0)


@needs("cpp")
def test_a_users_cpp_jsonl_task_with_a_checker_and_weights(tmp_path: Path) -> None:
    checker = ("import sys\ninp, exp, act = (open(p).read().split() for p in sys.argv[1:4])\n"
               "sys.exit(0 if len(act) == 1 and abs(float(act[0]) - float(exp[0])) <= 1e-3 else 1)\n")
    data = _rows(tmp_path / "problems.jsonl", [
        {"id": "half", "question": "Print n / 2 for the integer n on stdin.",
         "tests": [{"input": "3\n", "output": "1.5\n", "weight": 1}, {"input": "5\n", "output": "2.5\n", "weight": 3}]},
    ])
    task = program_task("UserCpp", language="cpp", compare="checker", checker=checker, scoring="weighted",
                        time_limit_s=5.0)
    register_task(task)
    try:
        problem = get_task("UserCpp-v0").load(split="train", data_files=data)[0]
        assert "```cpp" in task.format_prompt(problem)
        right = "#include <cstdio>\nint main() { double n; scanf(\"%lf\", &n); printf(\"%.4f\\n\", n / 2); }"
        assert task.verifier(f"```cpp\n{right}\n```", problem.answer).correct
        odd_only = "#include <cstdio>\nint main() { int n; scanf(\"%d\", &n); printf(\"%d\\n\", n == 3 ? 9 : n / 2); }"
        result = task.verifier(f"```cpp\n{odd_only}\n```", problem.answer)
        assert (result.score, result.reason) == (0.0, "tests_failed:2/2;verdicts:WW")
        first_only = "#include <cstdio>\nint main() { int n; scanf(\"%d\", &n); printf(n == 3 ? \"1.5\" : \"0\"); }"
        assert task.verifier(f"```cpp\n{first_only}\n```", problem.answer).score == 0.25
    finally:
        unregister_task("UserCpp-v0")


@needs("cpp")
def test_exported_rows_score_through_verl() -> None:
    from dapo_env.interop import compute_score, to_hf_dataset

    row = to_hf_dataset("CppPick-v0", limit=1)[0]
    kind = json.loads(row["extra_info"]["metadata"])["kind"] if isinstance(row["extra_info"].get("metadata"), str) \
        else get_task("CppPick-v0").load(split="train", size=1)[0].metadata["kind"]
    truth = row["reward_model"]["ground_truth"]
    assert ProgramTests.from_value(truth).io  # the tests travel as JSON the verifier reads back
    right = compute_score(row["data_source"], f"```cpp\n{CPP[kind]}\n```", truth, row["extra_info"])
    assert right["score"] == 1.0
    assert compute_score(row["data_source"], "no code", truth, row["extra_info"])["score"] == 0.0


@pytest.mark.parametrize("env_id", ["CppPickFeedback-v0", "JSFunctionsFeedback-v0"])
def test_feedback_twins_play_vector_episodes(env_id: str) -> None:
    """Sync vector envs with default arguments: a policy that never writes code uses every attempt (3), is
    told so each time, and the episode ends with reward 0; a reference program ends it at once with 1."""
    import warnings

    import gymnasium as gym

    language = "cpp" if "Cpp" in env_id else "javascript"
    if (missing := get_language(language).missing()) or not isolation("full").ok:
        pytest.skip(f"{language}: {missing or 'needs bubblewrap (apt-get install bubblewrap)'}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", size=4)
    obs, info = envs.reset(seed=0)
    problems = {p.id: p for p in get_task(env_id).load(split="train", size=4)}
    ended = 0
    for turn in range(3):
        obs, rewards, terminated, _, infos = envs.step(("no code", "no code"))
        ended += int(terminated.sum())
        if turn < 2:
            assert all(o.startswith("No ") and "code found" in o for o in obs), obs
    assert ended == 2 and rewards.tolist() == [0.0, 0.0]
    envs.close()
    env = gym.make(env_id, size=4)
    _, info = env.reset(seed=0)
    problem = problems[info["problem_id"]]
    _, reward, terminated, _, _ = env.step(f"```{problem.metadata['fence']}\n{problem.metadata['solution']}\n```")
    assert terminated and reward == 1.0
    env.close()
