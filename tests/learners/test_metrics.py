from __future__ import annotations

from pathlib import Path

from dapo_env.learners.metrics import MetricsLog, plot_metrics, read_metrics, strip_timing


def test_jsonl_truncate_and_torn_line(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "m.jsonl")
    for step in range(1, 5):
        log.write({"step": step, "reward/mean": step / 10, "time/step_s": 1.0, "x": float("nan")})
    with open(log.path, "a") as f:
        f.write('{"step": 5, "rew')  # a line cut by kill -9
    recs = read_metrics(log.path)
    assert [r["step"] for r in recs] == [1, 2, 3, 4] and recs[0]["x"] is None
    log.truncate_after(2)
    assert [r["step"] for r in read_metrics(log.path)] == [1, 2]
    assert "time/step_s" not in strip_timing(read_metrics(log.path))[0]


def test_plot_writes_png(tmp_path: Path) -> None:
    recs = [{"step": s, "eval/accuracy": s / 10, "policy/entropy": 1.0 - s / 10} for s in range(5)]
    path = plot_metrics(recs, tmp_path / "curves.png", title="t")
    assert path.read_bytes()[:4] == b"\x89PNG"
