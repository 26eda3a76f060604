"""Every task id graded through TRL and verl with rows in its hub dataset's own format (and our exported form).

A TRL user passes the dataset's columns as they are (``answer`` of GSM8K is the whole worked solution ending in
``#### 18``); verl passes ``data_source``, ``solution_str``, ``ground_truth`` and ``extra_info``. For each task
id: the right answer scores 1, a wrong one 0, and an unreadable reference raises ``InvalidReference`` (TRL: with
``strict_references=True``; by default the row scores ``None``).
Rows come from the shipped samples (examples/data), from ``$DAPO_ENV_DATA`` where present, or, for hub
datasets with no shipped sample, one row written here in that hub's schema.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from dapo_env.interop import InteropWarning, compute_score, to_hf_dataset, trl_reward_function
from dapo_env.tasks import list_tasks
from dapo_env.types import InvalidReference
from dapo_env.verifiers.sandbox import isolation

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def _jsonl(path: Path, n: int = 2) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


# -- rows in each hub's schema, with a right and a wrong completion -----------------------------------
def gsm8k_rows() -> list[tuple[dict[str, Any], str, str]]:
    rows = _jsonl(EXAMPLES / "gsm8k_sample.jsonl")  # hub openai/gsm8k: question, answer = solution + "#### N"
    return [({"question": r["problem"], "answer": r["solution"]}, f"So \\boxed{{{r['answer']}}}.",
             f"So \\boxed{{{int(r['answer']) + 1}}}.") for r in rows]


def dapo_rows() -> list[tuple[dict[str, Any], str, str]]:
    rows = _jsonl(EXAMPLES / "dapo_math_17k_sample.jsonl")  # hub: verl format
    return [({"data_source": "math_dapo", "prompt": [{"role": "user", "content": r["problem"]}], "ability": "MATH",
              "reward_model": {"ground_truth": r["answer"], "style": "rule"}, "extra_info": {"index": str(i)}},
             f"...\nAnswer: {r['answer']}", f"...\nAnswer: {int(r['answer']) + 1}") for i, r in enumerate(rows)]


MATH500_ROW = {"problem": "What is $\\frac{1}{2}+\\frac{1}{4}$?", "unique_id": "test/algebra/1.json",
               "solution": "Writing both over 4, $\\frac{2}{4}+\\frac{1}{4}=\\boxed{\\frac{3}{4}}$.",
               "answer": "\\frac{3}{4}", "subject": "Algebra", "level": 1}
AIME24_ROW = {"id": 60, "problem": "Find the remainder when 2024 is divided by 1000.", "url": "https://example.org",
              "solution": "2024 = 2 * 1000 + 24, so the remainder is $\\boxed{024}$.", "answer": "024", "year": 2024}
AIME25_ROW = {"problem": "Find 7 * 8.", "answer": "56", "id": "0"}
HUMANEVAL_ROW = {"task_id": "HumanEval/0", "entry_point": "add_two",
                 "prompt": "def add_two(a: int, b: int) -> int:\n    \"\"\"Return a + b.\"\"\"\n",
                 "canonical_solution": "    return a + b\n",
                 "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
                         "    assert candidate(-1, 1) == 0\n"}


def code_answer(code: str) -> str:
    return f"```python\n{code}\n```"


HUB_CASES: dict[str, Any] = {
    "GSM8K-v0": gsm8k_rows, "GSM8KTool-v0": gsm8k_rows, "DAPOMath-v0": dapo_rows, "DAPOMathTool-v0": dapo_rows,
    "MATH500-v0": lambda: [(MATH500_ROW, "so it is $\\boxed{0.75}$", "so it is $\\boxed{\\frac{2}{3}}$")],
    "AIME24-v0": lambda: [(AIME24_ROW, "Answer: 24", "Answer: 240")],
    "AIME25-v0": lambda: [(AIME25_ROW, "Answer: 56", "Answer: 54")],
    "HumanEval-v0": lambda: [(HUMANEVAL_ROW, code_answer("def add_two(a, b):\n    return a + b"),
                              code_answer("def add_two(a, b):\n    return a - b"))],
    "HumanEval-v0 (body only)": lambda: [(HUMANEVAL_ROW, HUMANEVAL_ROW["canonical_solution"], "    return a - b\n")],
}


def mbpp_rows() -> list[tuple[dict[str, Any], str, str]]:
    row = _jsonl(EXAMPLES / "mbpp_sample.jsonl", 1)[0]  # hub google-research-datasets/mbpp "full"
    hub = {k: row[k] for k in ("task_id", "text", "code", "test_list", "test_setup_code", "challenge_test_list")}
    return [(hub, code_answer(row["code"]), code_answer("def remove_Occ(s, ch):\n    return s"))]


HUB_CASES["MBPP-v0"] = HUB_CASES["MBPPFeedback-v0"] = mbpp_rows
HUB_ANSWER = {"GSM8K-v0": "answer", "GSM8KTool-v0": "answer", "MATH500-v0": "answer", "AIME24-v0": "answer",
              "AIME25-v0": "answer"}


def trl_scores(task_id: str, row: dict[str, Any], completions: list[str]) -> list[float]:
    """As TRL calls a reward function: prompts, completions and every other column as a keyword."""
    columns = {k: [v] * len(completions) for k, v in row.items() if k != "prompt"}
    prompt = row.get("prompt", "p")
    return trl_reward_function(task_id.split(" ")[0])(prompts=[prompt] * len(completions), completions=completions,
                                        completion_ids=[[1]] * len(completions), trainer_state=None, **columns)


def verl_score(task_id: str, row: dict[str, Any], completion: str) -> float:
    """As verl's reward managers call compute_score: the row's data_source, ground_truth and extra_info."""
    if "reward_model" in row:  # a verl-format hub (DAPO-Math-17k)
        truth, extra = row["reward_model"]["ground_truth"], row["extra_info"]
    else:  # math: the answer column; code: the tests column, the rest of the row riding in extra_info
        truth, extra = row.get(HUB_ANSWER.get(task_id, ""), row.get("test", row.get("test_list"))), row
    return compute_score(task_id.split(" ")[0], completion, truth, extra)["score"]


def test_every_task_id_has_a_hub_check() -> None:
    procedural = {"Arithmetic-v0", "Countdown-v0", "GuessNumber-v0", "HiddenTable-v0", "Largest-v0", "Sort-v0"}
    assert set(list_tasks()) <= {name.split(" ")[0] for name in HUB_CASES} | procedural


@pytest.mark.parametrize("task_id", sorted(HUB_CASES))
def test_hub_rows_score_right_and_wrong_through_trl_and_verl(task_id: str) -> None:
    if "MBPP" in task_id or "HumanEval" in task_id:
        if not isolation("full").ok:
            pytest.skip("code tasks need bubblewrap (apt-get install bubblewrap)")
    for row, right, wrong in HUB_CASES[task_id]():
        assert trl_scores(task_id, row, [right, wrong]) == [1.0, 0.0], row
        assert (verl_score(task_id, row, right), verl_score(task_id, row, wrong)) == (1.0, 0.0), row


@pytest.mark.parametrize("task_id", ["Arithmetic-v0", "Largest-v0", "Sort-v0", "GuessNumber-v0", "HiddenTable-v0"])
def test_procedural_tasks_score_their_exported_rows(task_id: str) -> None:
    """A procedural task has no hub: its rows are what to_hf_dataset exports."""
    row = to_hf_dataset(task_id, limit=1)[0]
    right, wrong = f"Answer: {row['answer']}", "Answer: 123456789"
    assert trl_scores(task_id, row, [right, wrong]) == [1.0, 0.0]
    assert compute_score(row["data_source"], right, row["reward_model"]["ground_truth"], row["extra_info"])["score"] == 1.0
    assert compute_score(row["data_source"], wrong, row["reward_model"]["ground_truth"], row["extra_info"])["score"] == 0.0


def test_countdown_scores_its_exported_rows() -> None:
    row = to_hf_dataset("Countdown-v0", limit=1)[0]
    spec = json.loads(row["answer"])
    numbers = spec["numbers"]
    candidates = [f"{x}{o}{y}" for x, y in itertools.permutations(map(str, numbers), 2) for o in "+-*"]
    candidates += [f"({x}){o}{z}" for x in candidates for z in map(str, numbers) for o in "+-*"]
    expression = next(e for e in candidates if eval(e) == spec["target"]  # noqa: S307 - our own arithmetic
                      and all(e.count(str(n)) <= numbers.count(n) for n in numbers))
    a, b, c = numbers
    assert trl_scores("Countdown-v0", row, [f"Answer: {expression}", f"Answer: {a}+{b}+{c}+1"]) == [1.0, 0.0]


@pytest.mark.parametrize("task_id", ["GSM8K-v0", "MATH500-v0", "AIME24-v0", "HumanEval-v0", "DAPOMath-v0"])
def test_an_unreadable_reference_raises_instead_of_scoring_zero(task_id: str) -> None:
    if task_id == "HumanEval-v0":
        if not isolation("full").ok:
            pytest.skip("code tasks need bubblewrap")
        reference = HUMANEVAL_ROW["test"]  # the test column without its entry_point
        with pytest.raises(InvalidReference, match="entry_point"):
            compute_score(task_id, "x", reference, {})
        return
    solution = ("We first count the pairs of socks in the drawer.\nThen we multiply the pairs by two to get "
                "the number of socks, which gives the total that we wanted.")
    with pytest.raises(InvalidReference):
        trl_reward_function(task_id, strict_references=True)(prompts=["p"], completions=["\\boxed{4}"],
                                                             answer=[solution])
    with pytest.warns(InteropWarning, match="invalid_reference"):  # by default TRL's unscorable row
        assert trl_scores(task_id, {"answer": solution}, ["\\boxed{4}"]) == [None]
    with pytest.raises(InvalidReference):
        compute_score(task_id, "\\boxed{4}", solution, {})


def test_real_hub_rows_where_the_shared_data_is(shared_data: Path) -> None:
    """The converted real files rebuilt into their hubs' schemas (gsm8k: question + solution as answer)."""
    for record in _jsonl(shared_data / "gsm8k" / "gsm8k_test.jsonl", 20):
        row = {"question": record["problem"], "answer": record["solution"]}
        assert trl_scores("GSM8K-v0", row, [f"\\boxed{{{record['answer']}}}", "\\boxed{-1}"]) == [1.0, 0.0]
    for record in _jsonl(shared_data / "math_500" / "math500_test.jsonl", 40):
        right = f"Thus the answer is $\\boxed{{{record['answer']}}}$."
        assert trl_scores("MATH500-v0", record, [right])[0] == 1.0, record["answer"]
        assert verl_score("MATH500-v0", {"answer": record["solution"]}, right) == 1.0, record["answer"]
    for record in _jsonl(shared_data / "aime_2024" / "aime_2024.jsonl", 30):
        row = {"problem": record["problem"], "answer": record["source_answer"], "solution": record["solution"]}
        assert trl_scores("AIME24-v0", row, [f"Answer: {record['answer']}", "Answer: 1000"]) == [1.0, 0.0]


def test_real_code_hub_rows_where_the_shared_data_is(shared_data: Path) -> None:
    """HumanEval and MBPP rows as their hubs hold them: the canonical solution passes, a stub fails."""
    if not isolation("full").ok:
        pytest.skip("code tasks need bubblewrap (apt-get install bubblewrap)")
    for row in _jsonl(shared_data / "humaneval" / "humaneval.jsonl", 3):
        body_only, stub = row["canonical_solution"], "    return None\n"
        assert trl_scores("HumanEval-v0", row, [body_only, stub]) == [1.0, 0.0], row["task_id"]
        full = code_answer(row["prompt"] + row["canonical_solution"])
        assert verl_score("HumanEval-v0", row, full) == 1.0, row["task_id"]
    for row in _jsonl(shared_data / "mbpp" / "mbpp.jsonl", 3):
        hub = {k: row[k] for k in ("task_id", "text", "code", "test_list", "test_setup_code", "challenge_test_list")}
        assert trl_scores("MBPP-v0", hub, [code_answer(row["code"]), code_answer("x = 1")]) == [1.0, 0.0]
        assert verl_score("MBPP-v0", hub, code_answer(row["code"])) == 1.0


def test_a_whole_code_hub_row_as_the_ground_truth() -> None:
    """verl rows that put the hub row (or its JSON) in ground_truth: the tests and the entry point are found."""
    if not isolation("full").ok:
        pytest.skip("code tasks need bubblewrap (apt-get install bubblewrap)")
    right, wrong = code_answer("def add_two(a, b):\n    return a + b"), code_answer("def add_two(a, b):\n    return a - b")
    for truth in (HUMANEVAL_ROW, json.dumps(HUMANEVAL_ROW)):
        assert compute_score("HumanEval-v0", right, truth, {})["score"] == 1.0
        assert compute_score("HumanEval-v0", wrong, truth, {})["score"] == 0.0
    (row, good, bad), = mbpp_rows()
    assert compute_score("MBPP-v0", good, json.dumps(row), {})["score"] == 1.0
    assert compute_score("MBPP-v0", bad, row, {})["score"] == 0.0
