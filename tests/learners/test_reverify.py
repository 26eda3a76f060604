"""``dapo-env reverify``: an unchanged verifier reproduces the stored summary with no flip; another verifier
flips exactly the verdicts it disagrees on, failed requests stay failed, and no model is called."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer, request_text  # noqa: E402

from dapo_env.learners.cli import main  # noqa: E402
from dapo_env.learners.run.eval_run import read_samples  # noqa: E402
from dapo_env.learners.run.reverify import reverify  # noqa: E402


def _half_right(prompt: str) -> str:
    best = max(int(x) for x in re.findall(r"-?\d+", prompt))
    return f"Answer: {best}" if best % 2 == 0 else "Answer: 0"


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An endpoint eval (greedy + 4 samples of 10 problems), with the requests of two problems failing."""
    out = tmp_path_factory.mktemp("evals") / "eval"
    failing: list[str] = []

    def rule(body: dict) -> str | None:
        text = request_text(body)
        if len(failing) < 2 and text not in failing:
            failing.append(text)
        return "500" if text in failing else None

    with FaultServer(answer=_half_right, rule=rule) as server:
        assert main(["eval", "--endpoint", server.url, "--model", "fault", "--task", "Largest-v0", "--limit", "10",
                     "--n", "4", "--retries", "0", "--out", str(out), "--no-progress", "--max-failed", "10"]) == 0
    return out


def test_an_unchanged_verifier_reproduces_the_stored_summary(eval_dir: Path, capsys) -> None:
    stored = json.loads((eval_dir / "summary.json").read_text())
    assert stored["failed"]["samples"] == 10 and 0 < stored["metrics"]["greedy"]["value"] < 1
    assert main(["reverify", str(eval_dir)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["flips"] == 0
    again = json.loads((eval_dir / "reverify-task.summary.json").read_text())
    assert again.pop("reverify")["flips"] == 0
    assert again == stored
    assert (eval_dir / "reverify-task.flips.jsonl").read_text() == ""


def test_another_verifier_flips_exactly_the_verdicts_it_disagrees_on(eval_dir: Path, tmp_path: Path,
                                                                       monkeypatch) -> None:
    (tmp_path / "lenient_checks.py").write_text(
        "def zero_is_fine(response, reference):\n    return response.strip() == 'Answer: 0' or "
        "response.strip() == f'Answer: {reference}'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    records = read_samples(eval_dir / "samples.jsonl")
    wrong = [r for r in records if not r["correct"] and not r["reason"].startswith("error:endpoint")]
    outcome = reverify(eval_dir, verifier="lenient_checks:zero_is_fine")
    assert len(outcome.flips) == len(wrong) > 0
    assert all(f["old_correct"] is False and f["new_correct"] is True for f in outcome.flips)
    metrics = outcome.summary["metrics"]
    assert metrics["greedy"]["value"] == 1.0 and metrics["pass@1"]["value"] == 1.0
    assert outcome.summary["failed"]["samples"] == 10  # failed requests stay failed, out of the metrics
    assert outcome.summary_path.name == "reverify-lenient_checks.zero_is_fine.summary.json"
    assert json.loads((eval_dir / "summary.json").read_text())["metrics"]["greedy"]["value"] < 1  # untouched


def test_a_folder_without_an_eval_is_refused(tmp_path: Path, capsys) -> None:
    assert main(["reverify", str(tmp_path)]) == 2
    assert "no eval.json" in capsys.readouterr().err
