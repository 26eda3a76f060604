"""``dapo-env curate`` on a real eval folder: the kept problems are exactly those whose pass rate (recomputed here
from samples.jsonl) lies in the range; the spec trains on them with the source task's prompt and verifier."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from dapo_env.learners.cli import main
from dapo_env.learners.run.curate import parse_range, pass_rates
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.tasks import get_task

VERIFIER = "trainer_helpers:even_length"  # right for about half of the responses that stop (a random-init model
# emits its end token by chance, about once in 100 tokens): pass rates spread over [0, 1]


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 12-problem eval of Largest-v0's train split, 4 samples each, by a tiny random-init model folder."""
    root = tmp_path_factory.mktemp("curate")
    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, seed=0, hidden_size=32, layers=1, heads=1)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    out = root / "eval"
    assert main(["eval", "--model", str(root / "model"), "--task", "Largest-v0", "--split", "train", "--size", "12",
                 "--n", "4", "--max-response-tokens", "48", "--verifier", VERIFIER, "--out", str(out),
                 "--no-progress"]) == 0
    return out


def _rates_by_hand(eval_dir: Path) -> dict[str, float]:
    """problem id -> the share of its sampled responses that were right, from the records alone."""
    tally: dict[str, list[int]] = {}
    for line in (eval_dir / "samples.jsonl").read_text().splitlines():
        r = json.loads(line)
        if not r["greedy"]:
            tally.setdefault(r["problem_id"], []).append(int(r["correct"]))
    return {pid: sum(v) / len(v) for pid, v in tally.items()}


def test_curate_keeps_exactly_the_problems_in_the_range(eval_dir: Path, tmp_path: Path, capsys) -> None:
    rates = _rates_by_hand(eval_dir)
    expected = [pid for pid, rate in rates.items() if 0.25 <= rate <= 0.75]
    assert 0 < len(expected) < len(rates), rates  # the range keeps some and drops some
    out = tmp_path / "curated"
    assert main(["curate", str(eval_dir), "--pass-rate", "0.25:0.75", "--out", str(out)]) == 0
    assert f"kept {len(expected)} of 12 problems" in capsys.readouterr().out
    rows = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == expected
    source = {p.id: p for p in get_task("Largest-v0").load(split="train")[:12]}
    for row in rows:
        assert (row["question"], row["answer"]) == (source[row["id"]].question, source[row["id"]].answer)
        assert row["pass_rate"] == rates[row["id"]] and row["samples"] == 4
    assert len((out / "test.jsonl").read_text().splitlines()) == 12  # the source's held-out problems, unfiltered
    spec = yaml.safe_load((out / "LargestCurated.yaml").read_text())
    assert spec["name"] == "LargestCurated" and spec["data"]["files"] == {"train": "train.jsonl", "test": "test.jsonl"}
    assert spec["prompt"]["template"] == get_task("Largest-v0").prompt_template
    assert spec["verifier"] == {"name": VERIFIER}  # the eval's own verifier graded the rates: it grades the task
    facts = json.loads((out / "curate.json").read_text())
    assert facts["kept"] == len(expected) and facts["measured"] == 12 and sum(facts["histogram"]) == 12


def test_the_spec_loads_the_curated_problems_graded_by_the_source_verifier(eval_dir: Path, tmp_path: Path) -> None:
    if importlib.util.find_spec("dapo_env.tasks.spec") is None:
        pytest.skip("task spec files (dapo_env.tasks.spec) are not in this checkout yet")
    from dapo_env.tasks.spec import load_spec

    out = tmp_path / "curated"
    assert main(["curate", str(eval_dir), "--pass-rate", "0:1", "--out", str(out), "--name", "AllLargest"]) == 0
    task = load_spec(out / "AllLargest.yaml")
    source = get_task("Largest-v0")
    loaded, original = task.load(), source.load(split="train")[:12]
    assert [p.id for p in loaded] == [p.id for p in original]
    assert [task.format_prompt(p) for p in loaded] == [source.format_prompt(p) for p in original]
    assert len(task.load(split="test")) == 12


def test_curate_refuses_bad_input_with_the_fix(eval_dir: Path, tmp_path: Path, capsys) -> None:
    for bad in ("0.9:0.1", "half", "0:2"):
        with pytest.raises(ValueError, match="LOW:HIGH"):
            parse_range(bad)
    assert main(["curate", str(tmp_path), "--pass-rate", "0:1", "--out", str(tmp_path / "x")]) == 2
    assert "not an eval folder" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["curate", str(eval_dir), "--pass-rate", "0:1", "--out", str(tmp_path / "full")]) == 2
    assert "not empty" in capsys.readouterr().err


def test_pass_rates_ignore_failed_requests_and_fall_back_to_greedy() -> None:
    def rec(index: int, greedy: bool, sample: int, correct: bool, reason: str = "ok") -> dict:
        return {"index": index, "greedy": greedy, "sample": sample, "correct": correct, "reason": reason}

    records = [rec(0, False, 0, True), rec(0, False, 1, False, "error:endpoint: HTTP 500"), rec(0, True, 0, False)]
    assert pass_rates(records) == {0: (1.0, 1)}  # the failed sample is no answer; greedy is not a sample
    assert pass_rates([rec(3, True, 0, True)]) == {3: (1.0, 1)}  # a greedy-only eval: its one answer
