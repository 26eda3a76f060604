"""The run report (``dapo_env.learners.run.report``): charts for the keys present, gaps for empty batches,
escaped model output, tolerant and strict reading of the run folder, atomic writes, the CLI."""

from __future__ import annotations

import base64
import doctest
import hashlib
import json
import re
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dapo_env.learners.run import report as report_module
from dapo_env.learners.run import run_folder, svg_chart
from dapo_env.learners.cli import main
from dapo_env.learners.run.report import write_report
from dapo_env.learners.run.run_folder import (
    EvalSample,
    RunFolderError,
    eval_samples_path,
    load_run,
    read_eval_samples,
    write_eval_samples,
)
from dapo_env.learners.run.svg_chart import Series, line_chart_svg, nice_ticks

sys.path.insert(0, str(Path(__file__).parent))
from report_helpers import EMPTY_STEPS, HOSTILE, HOSTILE_KEY, REASONS, Page, make_run, samples  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_CHARTS = {"reward", "accuracy", "heldout", "entropy", "clip", "length", "truncation", "zero-adv", "rounds",
              "groups", "mismatch", "drift", "loss", "kl", "grad-norm", "lr", "m-async-staleness-mean", "m-is-ratio-max"}
OTHER_CHARTS = {"m-rollout-samples-generated", "m-optim-steps", "m-time-step-s"}  # no chart of their own


def page_of(run: Path, **kw: object) -> Page:
    return Page(write_report(run, **kw).read_text())  # type: ignore[arg-type]


def charts(page: Page) -> set[str]:
    return {a["id"].removeprefix("chart-") for a in page.find("figure", class_="chart")}


def vertices(page: Page, chart: str, key: str) -> list[list[float]]:
    """The x coordinates of each drawn segment of ``key`` in ``chart`` (one list per segment)."""
    (path,) = [a for t, a, anc in page.elements
               if t == "path" and any(x.get("data-key") == key for _, x in anc)
               and any(x.get("id") == f"chart-{chart}" for _, x in anc)]
    return [[float(p.split(",")[0]) for p in seg.strip().split(" L")] for seg in path["d"].split("M")[1:]]


def step_x(page: Page, chart: str, step: float) -> float:
    (svg,) = page.find("svg", inside=f"chart-{chart}")
    x0, x1, p0, p1 = (float(svg[k]) for k in ("data-x0", "data-x1", "data-px0", "data-px1"))
    return round(p0 + (step - x0) / (x1 - x0) * (p1 - p0), 1)


def embedded_data(page: Page) -> dict:
    (text,) = [d for d, anc in page.texts if anc and anc[-1][1].get("id") == "report-data"]
    return json.loads(text)


# --- charts ---------------------------------------------------------------------------------------
def test_every_expected_chart_for_the_keys_present(tmp_path: Path) -> None:
    page = page_of(make_run(tmp_path))
    assert charts(page) == ALL_CHARTS | OTHER_CHARTS
    folded = {a["id"].removeprefix("chart-") for t, a, anc in page.elements
              if t == "figure" and any(x[0] == "details" for x in anc)}
    assert folded == OTHER_CHARTS  # in a collapsed block, so no key is left out of the report
    legend = {a["data-keys"] for a in page.find("figure", id="chart-accuracy")}
    assert legend == {json.dumps(["rollout/accuracy_before_filter", "rollout/accuracy"])}

    sparse = tmp_path / "sparse"
    sparse.mkdir()
    lines = [{"step": 0, "eval/accuracy": 0.2}, {"step": 1, "reward/mean": -0.5, "policy/logprob_mismatch_mean": None},
             {"step": 2, "reward/mean": -0.25, "eval/accuracy": 0.4, "policy/logprob_mismatch_mean": None}]
    (sparse / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert charts(page_of(sparse)) == {"reward", "heldout"}  # an always-null key gets no empty chart
    assert not Page((sparse / "report.html").read_text()).find("details")  # nothing else to fold (no config)


def test_empty_batch_steps_are_gaps_not_zeros(tmp_path: Path) -> None:
    page = page_of(make_run(tmp_path))
    segs = vertices(page, "reward", "reward/mean")
    xs = [x for seg in segs for x in seg]
    for s in EMPTY_STEPS:
        assert step_x(page, "reward", s) not in xs
    assert len(segs) == 3  # steps 1-24, 27-32, 34-40
    assert segs[0][-1] == step_x(page, "reward", 24) and segs[1][0] == step_x(page, "reward", 27)
    (svg,) = page.find("svg", inside="chart-reward")
    assert float(svg["data-y0"]) > 0.15  # the trainer's 0.0 did not pull the axis down: rewards are >= 0.2
    bands = {(a["data-first"], a["data-last"]) for a in page.find("rect", class_="gap-band", inside="chart-reward")}
    assert bands == {("25", "26"), ("33", "33")}
    # accuracy before filtering describes every generated sample: continuous through the empty steps
    before = [x for seg in vertices(page, "accuracy", "rollout/accuracy_before_filter") for x in seg]
    assert step_x(page, "accuracy", 25) in before
    after = [x for seg in vertices(page, "accuracy", "rollout/accuracy") for x in seg]
    assert step_x(page, "accuracy", 25) not in after
    assert not page.find("rect", class_="gap-band", inside="chart-drift")  # not a batch metric
    data = embedded_data(page)
    i = data["reward/mean"]["steps"].index(25)
    assert data["reward/mean"]["values"][i] is None and data["rollout/accuracy_before_filter"]["values"][i] > 0
    note = page.find("p", id="empty-batches")
    assert note and "25-26, 33" in page.text(inside_tag="p", class_="note")


def test_a_point_between_two_gaps_is_a_dot(tmp_path: Path) -> None:
    svg = line_chart_svg([Series("r", [1, 2, 3, 4, 5], [0.1, None, 0.3, None, 0.5])], x_range=(1, 5))
    page = Page(f'<div id="chart-x">{svg}</div>')
    assert len(page.find("circle")) == 3
    assert page.find("path")[0]["d"].count("M") == 3


# --- escaping and isolation -------------------------------------------------------------------------
def test_hostile_text_renders_as_text(tmp_path: Path) -> None:
    run = make_run(tmp_path, hostile=True)
    html = write_report(run).read_text()
    page = Page(html)
    scripts = page.find("script")
    assert len(scripts) == 2 and scripts[0].get("type") == "application/json" and "type" not in scripts[1]
    assert not page.find("img") and not page.find("iframe")
    shown = page.text(inside_tag="pre", class_="completion")
    assert HOSTILE in shown  # the exact characters, as text
    assert HOSTILE in page.text(inside_tag="h1")  # the run name from config.json
    assert "window.pwned" not in "".join(d for d, anc in page.texts if anc and anc[-1][0] == "script"
                                         and anc[-1][1].get("type") != "application/json")
    assert embedded_data(page)[HOSTILE_KEY]["values"]  # a hostile metric key survives the JSON block intact
    assert "m-is-script-script-window-pwned-3-script" in charts(page)
    twins = tmp_path / "twins"
    twins.mkdir()
    (twins / "metrics.jsonl").write_text(json.dumps({"step": 1, "is/a_b": 1.0, "is/a-b": 2.0}) + "\n")
    assert charts(page_of(twins)) == {"m-is-a-b", "m-is-a-b-1"}  # ids stay unique


def test_csp_allows_only_the_pages_own_script_and_no_network(tmp_path: Path) -> None:
    html = write_report(make_run(tmp_path, hostile=True)).read_text()
    page = Page(html)
    (meta,) = page.find("meta", **{"http-equiv": "Content-Security-Policy"})
    csp = meta["content"]
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    (own,) = [d for d, anc in page.texts if anc and anc[-1][0] == "script" and "type" not in anc[-1][1]]
    digest = base64.b64encode(hashlib.sha256(own.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    for _, attrs, _ in page.elements:
        for name in ("src", "href", "action", "xlink:href"):
            value = attrs.get(name)
            assert value is None or value.startswith(("#", "data:")), (name, value)
    assert not re.search(r"https?://", html.replace("http-equiv", ""))


# --- samples and evaluation tables ------------------------------------------------------------------
def test_samples_right_and_wrong_side_by_side_with_a_step_selector(tmp_path: Path) -> None:
    page = page_of(make_run(tmp_path, eval_steps=(0, 20, 40)))
    options = page.find("option")
    assert [o["value"] for o in options] == ["0", "20", "40"] and "selected" in options[-1]
    sections = page.find("section", class_="sample-step")
    assert [(s["data-step"], "hidden" in s) for s in sections] == [("0", True), ("20", True), ("40", False)]
    # step 40: 6 right, 4 wrong of 10; a few per side, each wrong reason shown
    step40 = [(t, a, anc) for t, a, anc in page.elements
              if t == "article" and any(x.get("data-step") == "40" for _, x in anc)]
    right = [a for _, a, _ in step40 if a["class"] == "sample right"]
    wrong = [a for _, a, _ in step40 if a["class"] == "sample wrong"]
    assert len(right) == report_module.SAMPLES_PER_SIDE and len(wrong) == 4
    text = page.text(inside_tag="section", class_="sample-step")
    assert "right: 6 of 10" in text and "wrong: 4 of 10" in text
    for reason in REASONS:
        assert reason in text
    assert "cut at the token limit" in text


def test_pick_samples_covers_every_reason_before_repeating_one() -> None:
    wrong = [s for s in samples(0, n=30, right=0)]
    picked = report_module.pick_samples(wrong, 4)
    assert [s.reason for s in picked[:3]] == ["not_equal", "no_answer", "truncated_answer"] and len(picked) == 4
    assert report_module.pick_samples(wrong[:2], 4) == wrong[:2]


def test_run_without_eval_files(tmp_path: Path) -> None:
    page = page_of(make_run(tmp_path, eval_steps=()))
    assert not page.find("select") and not page.find("section", class_="sample-step")
    assert "No eval sample files" in page.text()
    rows = page.find("tr", inside="heldout-table")
    assert len(rows) == 1 + 5  # header + steps 0, 10, 20, 30, 40 from metrics.jsonl


def test_eval_tables(tmp_path: Path) -> None:
    page = page_of(make_run(tmp_path, summary=True))
    heldout = page.text(inside_tag="table", class_="eval")
    assert "0.500" in heldout  # eval/accuracy at step 20 (0.1 + 0.02 * 20)
    summary = [d for d, anc in page.texts if any(a.get("id") == "summary-table" for _, a in anc)]
    joined = "".join(summary)
    for text in ("pass@1", "pass@8", "avg@8", "maj@8", "greedy", "0.812", "[0.780, 0.840]", "n=8", "task=Largest-v0"):
        assert text in joined, text


# --- reading the run folder --------------------------------------------------------------------------
def test_torn_last_lines_are_skipped(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 41, "reward/me')  # a writer killed mid-line
    path = eval_samples_path(run, 40)
    with open(path, "a") as f:
        f.write('{"problem_id": "test-99", "prom')
    folder = load_run(run)
    assert folder.metrics[-1]["step"] == 40 and len(folder.samples[40]) == 10
    assert "step 40 of 40" in Page(write_report(run).read_text()).text(inside_tag="p", class_="facts")


@pytest.mark.parametrize("line,message", [
    ("not json", "line 2: not JSON"),
    ('{"problem_id": 1, "prompt": "p", "completion": "c", "extracted": null, "correct": true, "tokens": 3, '
     '"finish_reason": "stop"}', "line 2: missing reason"),
    ('{"problem_id": 1, "prompt": "p", "completion": "c", "extracted": null, "correct": "yes", "reason": "r", '
     '"tokens": 3, "finish_reason": "stop"}', "line 2: EvalSample.correct must be true or false"),
    ('{"problem_id": 1, "prompt": "p", "completion": "c", "extracted": null, "correct": true, "reason": "r", '
     '"tokens": 3, "finish_reason": "eos"}', "finish_reason must be 'stop' or 'length'"),
])
def test_a_malformed_sample_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = eval_samples_path(tmp_path, 5)
    write_eval_samples(path, samples(5, n=1))
    with open(path, "a") as f:
        f.write(line + "\n" + json.dumps({"problem_id": "x"}) + "\n")
    with pytest.raises(RunFolderError, match=re.escape(message)) as err:
        read_eval_samples(path)
    assert "step_000005.jsonl" in str(err.value)


def test_sample_records_round_trip_and_accept_numbers_as_answers(tmp_path: Path) -> None:
    originals = samples(3, n=5, hostile=True)
    path = write_eval_samples(eval_samples_path(tmp_path, 3), originals)
    assert read_eval_samples(path) == originals
    path.write_text(json.dumps({"problem_id": 7, "prompt": "p", "completion": "c", "extracted": 7, "correct": True,
                                "reason": "r", "tokens": 3, "finish_reason": "stop", "future_field": 1}) + "\n")
    (s,) = read_eval_samples(path)
    assert (s.problem_id, s.extracted, s.sample, s.answer) == ("7", "7", 0, None)


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="no such folder"):
        write_report(tmp_path / "missing")
    with pytest.raises(RunFolderError, match="no metrics.jsonl"):
        write_report(tmp_path)
    run = make_run(tmp_path)
    (run / "eval" / "step_40.jsonl").write_text("")
    with pytest.raises(RunFolderError, match="both step 40; remove one"):
        write_report(run)
    (run / "eval" / "step_40.jsonl").unlink()
    (run / "eval" / "step_000040.summary.json").write_text('{"metrics": {"pass@1": "high"}}')
    with pytest.raises(RunFolderError, match="'pass@1' must be a number"):
        write_report(run)


# --- writing ----------------------------------------------------------------------------------------
def test_write_is_atomic(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    path = write_report(run)
    seen, stop = [], threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.append(path.read_text())

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(15):
            write_report(run)
    finally:
        stop.set()
        thread.join()
    assert seen and all(text.endswith("</html>\n") for text in seen)
    assert sorted(p.name for p in run.iterdir() if "report" in p.name) == ["report.html"]  # no temp files left
    before = path.read_bytes()
    eval_samples_path(run, 40).write_text("broken\n")
    with pytest.raises(RunFolderError):
        write_report(run)
    assert path.read_bytes() == before  # a failed refresh leaves the last good report


def test_out_path_and_cost(tmp_path: Path) -> None:
    run = make_run(tmp_path, steps=200, eval_steps=(0, 50, 100, 150, 200))
    for s in (0, 50, 100, 150, 200):
        write_eval_samples(eval_samples_path(run, s), samples(s, n=200, right=120))
    t = time.perf_counter()
    out = write_report(run, out=tmp_path / "elsewhere" / "r.html")
    elapsed = time.perf_counter() - t
    assert out == tmp_path / "elsewhere" / "r.html" and out.exists() and not (run / "report.html").exists()
    assert elapsed < 5.0  # ~0.05 s on an idle machine: cheap enough to refresh after every evaluation


def test_cli_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path)
    assert main(["report", str(run)]) == 0
    assert str(run / "report.html") in capsys.readouterr().out and (run / "report.html").exists()
    assert main(["report", str(run), "--out", str(tmp_path / "x.html")]) == 0
    assert (tmp_path / "x.html").read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "dapo-env report: error:" in capsys.readouterr().err


def test_report_module_does_not_import_torch() -> None:
    code = "import sys, dapo_env.learners.run.report; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False", out.stderr


def test_real_run_with_eval_samples_from_its_checkpoints(tmp_path: Path) -> None:
    """A real (seconds-long) training run; examples/run_report.py decodes each checkpoint's held-out problems
    exactly as the trainer's evaluation did, so every step's sample accuracy equals its eval/accuracy."""
    import torch
    from trainer_helpers import tiny_config

    from dapo_env.learners.trainer import train

    torch.set_num_threads(1)
    result = train(tiny_config(tmp_path, max_steps=2, keep_checkpoints=3))
    out = runpy.run_path(str(EXAMPLES / "run_report.py"))["main"]([str(result.run_dir)])
    folder = load_run(result.run_dir)
    assert sorted(folder.samples) == [0, 1, 2] and all(len(v) == 8 for v in folder.samples.values())
    for step, acc in result.eval_history:
        got = folder.samples[step]
        assert sum(x.correct for x in got) / len(got) == pytest.approx(acc), step
    page = Page(out.read_text())
    assert {a["value"] for a in page.find("option")} == {"0", "1", "2"} and "reward" in charts(page)
    assert "python examples/run_report.py" in (EXAMPLES / "run_report.py").read_text()


# --- pieces ---------------------------------------------------------------------------------------
def test_nice_ticks_hand_values() -> None:
    assert nice_ticks(0, 30, 7) == [0, 5, 10, 15, 20, 25, 30]
    assert nice_ticks(-0.65, 0.9, 5) == [-0.5, 0.0, 0.5]
    assert nice_ticks(0.0, 1.0, 6) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(4000, 19000, 5) == [5000, 10000, 15000]
    assert nice_ticks(1.0, 1.0) == [1.0]


def test_single_step_run_renders(tmp_path: Path) -> None:
    run = tmp_path / "one"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/accuracy": 0.3}) + "\n")
    page = page_of(run)
    assert charts(page) == {"heldout"} and len(page.find("circle", inside="chart-heldout")) == 1
    assert "No config.json" in page.text()


@pytest.mark.parametrize("module", [report_module, run_folder, svg_chart])
def test_doctests(module: object) -> None:
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0  # type: ignore[arg-type]


def test_sample_type_checks() -> None:
    with pytest.raises(TypeError, match="correct"):
        EvalSample(problem_id="1", prompt="", completion="", extracted=None, correct=1, reason="",  # type: ignore[arg-type]
                   tokens=1, finish_reason="stop")
    assert HOSTILE  # the helper's hostile text is what the escaping tests use
