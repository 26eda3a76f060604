"""``dapo-env eval compare``: the paired tests against exact computations on small hand tables, and the table of
real evals (served by the fault injector, tests/fault_server.py) in the terminal, markdown, JSON and HTML."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer

from dapo_env.learners.cli import main
from dapo_env.learners.run.compare import mcnemar_exact, sign_flip_test


def test_exact_mcnemar_matches_hand_computed_binomial_tails() -> None:
    # b + c discordant problems; two-sided p = 2 * P(X <= min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1
    assert mcnemar_exact(1, 7) == pytest.approx(2 * (1 + 8) / 256)       # 0.0703125
    assert mcnemar_exact(0, 6) == pytest.approx(2 * 1 / 64)              # 0.03125
    assert mcnemar_exact(2, 10) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(7, 1) == mcnemar_exact(1, 7)
    with pytest.raises(ValueError, match="discordant"):
        mcnemar_exact(-1, 2)


def test_sign_flip_test_matches_a_hand_enumeration() -> None:
    # differences 0.5, 0.25, -0.25, 0.5 (and a tie, left out): of the 16 sign patterns, 6 give |sum| >= 1.0
    # (+-0.5 +-0.5 = +-1 with the two 0.25s cancelling: 2 x 2 patterns; +-1 with both 0.25s on the same side: 2)
    assert sign_flip_test([0.5, 0.25, -0.25, 0.5, 0.0]) == pytest.approx(6 / 16)
    # binary differences: the sign-flip test is the exact McNemar test
    assert sign_flip_test([1] * 7 + [-1]) == pytest.approx(mcnemar_exact(7, 1))
    assert sign_flip_test([]) == 1.0
    # past the exact limit: 20,000 random sign patterns, close to the exact value
    many = [1] * 15 + [-1] * 5
    assert sign_flip_test(many) == pytest.approx(mcnemar_exact(15, 5), abs=0.01)


def _model(bad: set[int]) -> callable:
    """Right on every problem except those whose largest number is in ``bad``."""
    def answer(text: str) -> str:
        best = max(int(x) for x in re.findall(r"-?\d+", text))
        return "Answer: 0" if best in bad else f"Answer: {best}"
    return answer


def test_compare_tables_two_models_and_tests_their_difference(tmp_path: Path, capsys) -> None:
    args = ["--task", "Largest-v0", "--set", "max_value=30", "--limit", "20", "--no-progress", "--retries", "0"]
    folders = []
    for name, bad in (("strong", set()), ("weak", set(range(0, 31, 2)))):  # weak misses every even answer
        with FaultServer(answer=_model(bad)) as server:
            out = tmp_path / name
            assert main(["eval", "--endpoint", server.url, "--model", name, "--out", str(out), *args,
                         "--price-in", "1", "--price-out", "3"]) == 0
            folders.append(out)
    strong, weak = (json.loads((f / "summary.json").read_text()) for f in folders)
    weak_wrong = round(20 * (1 - weak["metrics"]["greedy"]["value"]))
    capsys.readouterr()
    html, md, js = tmp_path / "cmp.html", tmp_path / "cmp.md", tmp_path / "cmp.json"
    assert main(["eval", "compare", *map(str, folders), "--html", str(html), "--markdown", str(md),
                 "--json", str(js)]) == 0
    printed = capsys.readouterr().out
    assert "strong" in printed and "weak" in printed and "exact McNemar" in printed
    result = json.loads(js.read_text())
    (pair,) = result["pairs"]
    assert pair["problems"] == 20 and pair["difference"] == pytest.approx(weak_wrong / 20)
    assert pair["p_value"] == pytest.approx(mcnemar_exact(weak_wrong, 0))
    assert pair["significant"] is (mcnemar_exact(weak_wrong, 0) < 0.05)
    assert [r["eval"] for r in result["rows"]] == ["strong", "weak"]
    assert result["rows"][0]["cost"] == strong["usage"]["cost"] and strong["usage"]["cost"] > 0
    text = md.read_text()
    assert text.startswith("| eval | task |") and "greedy" in text and "beyond chance" in text
    page = html.read_text()
    assert "<svg" in page and "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_compare_refuses_a_folder_without_a_summary(tmp_path: Path, capsys) -> None:
    assert main(["eval", "compare", str(tmp_path)]) == 2
    assert "holds no summary.json" in capsys.readouterr().err
