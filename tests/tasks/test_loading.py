"""Local-file loading, row converters, error messages: all on small files the tests write."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from dapo_env.tasks import TaskDataError, get_task
from dapo_env.tasks.loading import builder_for, clear_cache
from dapo_env.tasks.math_tasks import DAPO_PREFIX, DAPO_SUFFIX, DAPO_TEMPLATE, strip_dapo_template

GSM8K = get_task("GSM8K-v0")
DAPO = get_task("DAPOMath-v0")
MATH500 = get_task("MATH500-v0")
AIME24 = get_task("AIME24-v0")

GSM_HUB_ROWS = [
    {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3+4=<<3+4=7>>7\n#### 7"},
    {"question": "A car costs 1,200 dollars. Twice that?", "answer": "2*1200=2400\n#### 2,400"},
    {"question": "What is 5-9?", "answer": "#### -4"},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


@pytest.mark.parametrize("name", ["gsm.jsonl", "gsm.jsonl.gz", "gsm.parquet"])
def test_local_files_in_every_format(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    (write_parquet if name.endswith(".parquet") else write_jsonl)(path, GSM_HUB_ROWS)
    problems = GSM8K.load(data_files=str(path))
    assert [p.answer for p in problems] == ["7", "2400", "-4"]
    assert [p.id for p in problems] == ["0", "1", "2"]
    assert problems[0].question == GSM_HUB_ROWS[0]["question"]
    assert problems[1].metadata["solution"] == GSM_HUB_ROWS[1]["answer"]
    prompt = GSM8K.format_prompt(problems[0])
    assert prompt.startswith(GSM_HUB_ROWS[0]["question"]) and "\\boxed{}" in prompt


def test_builder_from_extension() -> None:
    assert builder_for("a/b.JSONL") == "json" and builder_for("x.jsonl.gz") == "json"
    assert builder_for("x.parquet") == "parquet"
    with pytest.raises(TaskDataError, match=r"\.jsonl, \.jsonl\.gz"):
        builder_for("x.txt")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TaskDataError, match="does not exist"):
        GSM8K.load(data_files=str(tmp_path / "nope.jsonl"))


def test_list_and_split_mapping_of_files(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", GSM_HUB_ROWS[:2])
    second = write_jsonl(tmp_path / "b.jsonl", GSM_HUB_ROWS[2:])
    both = GSM8K.load(data_files=[str(first), str(second)])
    assert [p.answer for p in both] == ["7", "2400", "-4"]
    by_split = {"train": str(first), "test": str(second)}
    assert [p.answer for p in GSM8K.load(split="train", data_files=by_split)] == ["7", "2400"]
    assert [p.answer for p in GSM8K.load(data_files=by_split)] == ["-4"]  # the task's default split: test
    with pytest.raises(TaskDataError, match="no entry for split 'validation'"):
        GSM8K.load(split="validation", data_files=by_split)


def test_loaded_once_and_reloaded_when_the_file_changes(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "gsm.jsonl", GSM_HUB_ROWS)
    first = GSM8K.load(data_files=str(path))
    assert GSM8K.load(data_files=str(path)) is first
    write_jsonl(path, GSM_HUB_ROWS[:1])
    os.utime(path, ns=(1, 1))  # a different modification time, whatever the clock resolution
    assert len(GSM8K.load(data_files=str(path))) == 1


def test_dapo_verl_rows_strip_the_template_and_dedupe(tmp_path: Path) -> None:
    def verl_row(index: int, problem: str, answer: str) -> dict:
        return {
            "data_source": "math_dapo",
            "prompt": [{"role": "user", "content": DAPO_PREFIX + problem + DAPO_SUFFIX}],
            "ability": "MATH",
            "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": f"idx-{index}"},
        }

    rows = [verl_row(0, "What is $1+1$?", "2"), verl_row(1, "Find $x$ if $x^2=9, x<0$.", "-3"), verl_row(0, "What is $1+1$?", "2")]
    problems = DAPO.load(data_files=str(write_parquet(tmp_path / "dapo.parquet", rows)))
    assert [(p.id, p.question, p.answer) for p in problems] == [
        ("idx-0", "What is $1+1$?", "2"),
        ("idx-1", "Find $x$ if $x^2=9, x<0$.", "-3"),
    ]
    assert DAPO.format_prompt(problems[0]) == DAPO_PREFIX + "What is $1+1$?" + DAPO_SUFFIX
    assert DAPO.prompt_template == DAPO_TEMPLATE
    assert DAPO.verifier("Step.\nAnswer: 2", problems[0].answer).correct


def test_dapo_flat_rows(tmp_path: Path) -> None:
    rows = [{"problem": "Compute $2^5$.", "answer": "32", "index": 7, "lang": "en"}]
    (problem,) = DAPO.load(data_files=str(write_jsonl(tmp_path / "d.jsonl.gz", rows)))
    assert (problem.id, problem.answer, problem.metadata["lang"]) == ("7", "32", "en")
    assert strip_dapo_template("no template here") == "no template here"


def test_aime_answers_drop_leading_zeros(tmp_path: Path) -> None:
    rows = [{"Problem": "P1", "Answer": "025", "ID": "2024-I-1"}, {"Problem": "P2", "Answer": 7, "ID": "2024-I-2"}]
    problems = AIME24.load(data_files=str(write_jsonl(tmp_path / "aime.jsonl", rows)))
    assert [(p.id, p.answer) for p in problems] == [("2024-I-1", "25"), ("2024-I-2", "7")]


@pytest.mark.parametrize(
    ("task", "rows", "row_number", "field", "detail"),
    [
        (MATH500, [{"problem": "a", "answer": "1"}, {"problem": "b", "answer": "2"}, {"problem": "c"}], 3, "answer", "missing"),
        (MATH500, [{"problem": "a", "answer": "1"}, {"problem": "b", "answer": ["2"]}], 2, "answer", "got list"),
        (MATH500, [{"answer": "1"}], 1, "problem", "missing field problem"),
        (MATH500, [{"problem": "", "answer": "1"}], 1, "problem", "empty"),
        (DAPO, [{"problem": "a", "answer": "1"}, {"problem": "b", "answer": "1/2"}], 2, "answer", "integers"),
        (GSM8K, [{"question": "a", "answer": "no final line ####   "}], 1, "answer", "####"),
    ],
)
def test_malformed_rows_name_file_row_and_field(
    tmp_path: Path, task, rows: list[dict], row_number: int, field: str, detail: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TaskDataError) as info:
        task.load(data_files=str(path))
    message = str(info.value)
    assert str(path) in message
    assert f"row {row_number}:" in message
    assert f"field '{field}'" in message
    assert detail in message


def test_offline_hub_error_says_how_to_pass_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(TaskDataError) as info:
        DAPO.load(hub_id="dapo-env-tests/not-a-cached-dataset")
    message = str(info.value)
    assert "DAPOMath-v0" in message and "dapo-env-tests/not-a-cached-dataset" in message
    assert "offline" in message
    assert 'gym.make("DAPOMath-v0", data_files="' in message
    assert ".jsonl.gz, Parquet or CSV" in message and "--set data_files=" in info.value.cli_message


def test_gym_make_passes_data_files_and_template_to_the_task(tmp_path: Path) -> None:
    import gymnasium

    import dapo_env  # noqa: F401  (the env layer behind the registered entry points)

    path = write_jsonl(tmp_path / "gsm.jsonl", GSM_HUB_ROWS)
    env = gymnasium.make("GSM8K-v0", data_files=str(path), prompt_template="Q: {question}\nA:")
    observation, info = env.reset(seed=0)
    problem = next(p for p in GSM8K.load(data_files=str(path)) if p.id == info["problem_id"])
    assert observation == f"Q: {problem.question}\nA:"
    _, reward, terminated, _, step_info = env.step(f"Answer: {problem.answer}")
    assert terminated and step_info["correct"] and reward > 0
    env.close()


def test_a_local_task_needs_no_hub_and_a_converters_own_error_names_file_and_row(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from dapo_env.tasks.loading import DatasetSource
    from dapo_env.types import Problem

    def convert(row: dict, index: int) -> Problem:  # a user's converter: plain indexing, no RowError
        return Problem(id=str(index), question=row["q"].strip(), answer=str(row["a"]))

    source = DatasetSource(env_id="Mine-v0", convert=convert)  # no hub_id: local files only
    with pytest.raises(TaskDataError, match=r"Mine-v0 has no hub dataset.*data_files=") as err:
        source.load("train")
    assert err.value.cli_message is not None and "--set data_files=" in err.value.cli_message
    good = write_jsonl(tmp_path / "mine.jsonl", [{"q": "1+1?", "a": 2}, {"q": "2+2?", "a": 4}])
    capfd.readouterr()
    assert [p.answer for p in source.load("train", data_files=str(good))] == ["2", "4"]
    assert "Generating" not in capfd.readouterr().err  # no hub-library progress bars for a local file
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"q": "1+1?", "a": 2}, {"question": "2+2?", "a": 4}])
    with pytest.raises(TaskDataError, match=r"bad.jsonl: row 2: the converter raised AttributeError: .*'NoneType'"
                                            r".* \(the row has fields \['a', 'question'\]\)"):
        source.load("train", data_files=str(bad))
