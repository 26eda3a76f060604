"""Empty batches are gaps, not zeros: the rule (``metrics.metric_series``) and the PNG that uses it."""

from __future__ import annotations

import doctest
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from dapo_env.learners import metrics
from dapo_env.learners.metrics import empty_batch_spans, is_batch_metric, metric_series, plot_metrics

# what the trainer writes on a step whose batch is empty (measured: step 145 of the default run)
EMPTY = {"reward/mean": 0.0, "rollout/accuracy": 0.0, "rollout/accuracy_before_filter": 0.953125,
         "rollout/num_groups": 0, "rollout/partial": 1.0, "rollout/zero_adv_share": 1.0, "policy/entropy": None,
         "policy/clip_frac_high": None, "policy/drift_from_init": 0.278, "response/length_mean": 10.0}


def full(step: int, **kw: Any) -> dict[str, Any]:
    rec = {"step": step, "reward/mean": 0.5, "rollout/accuracy": 0.6, "rollout/accuracy_before_filter": 0.7,
           "rollout/num_groups": 4, "rollout/partial": 0.0, "rollout/zero_adv_share": 0.3, "policy/entropy": 0.2,
           "policy/clip_frac_high": 0.01, "policy/drift_from_init": 0.1 + step / 100, "response/length_mean": 10.0}
    rec.update(kw)
    return rec


def test_batch_metrics_of_an_empty_step_are_gaps_whatever_the_record_holds() -> None:
    recs = [full(1), {"step": 2, **EMPTY}, full(3), {"step": 4, **EMPTY}, {"step": 5, **EMPTY}, full(6)]
    assert metric_series(recs, "reward/mean") == ([1, 2, 3, 4, 5, 6], [0.5, None, 0.5, None, None, 0.5])
    assert metric_series(recs, "rollout/accuracy")[1] == [0.6, None, 0.6, None, None, 0.6]
    assert metric_series(recs, "policy/entropy")[1] == [0.2, None, 0.2, None, None, 0.2]
    # not batch metrics: every generated sample, or the weights, still have their values
    assert metric_series(recs, "rollout/accuracy_before_filter")[1] == [0.7, 0.953125, 0.7, 0.953125, 0.953125, 0.7]
    assert metric_series(recs, "rollout/zero_adv_share")[1][1] == 1.0
    assert metric_series(recs, "policy/drift_from_init")[1][1] == 0.278
    assert empty_batch_spans(recs) == [(2, 2), (4, 5)]


def test_absent_keys_are_skipped_and_missing_batch_keys_of_an_empty_step_are_still_gaps() -> None:
    recs = [{"step": 0, "eval/accuracy": 0.1}, full(1), {"step": 2, "rollout/num_groups": 0},  # no reward key at all
            full(3, **{"eval/accuracy": 0.4, "reward/mean": float("nan")}), full(4, **{"reward/mean": True})]
    assert metric_series(recs, "eval/accuracy") == ([0, 3], [0.1, 0.4])  # joined between evaluations
    assert metric_series(recs, "reward/mean") == ([1, 2, 3, 4], [0.5, None, None, None])  # NaN, bool: no value
    assert metric_series(recs, "is/ratio_mean") == ([2], [None])  # a batch family: gap even though never logged
    assert metric_series([], "reward/mean") == ([], [])


@pytest.mark.parametrize("key,batch", [
    ("reward/mean", True), ("reward/std", True), ("rollout/accuracy", True), ("loss/policy", True),
    ("is/weight_max", True), ("policy/entropy", True), ("policy/logprob_mismatch_max", True),
    ("optim/grad_norm", True), ("rollout/accuracy_before_filter", False), ("rollout/num_groups", False),
    ("rollout/zero_adv_share", False), ("response/length_mean", False), ("eval/accuracy", False),
    ("policy/drift_from_init", False), ("optim/lr", False), ("async/staleness_mean", False),
    ("rewards", False), ("isx/y", False)])
def test_is_batch_metric(key: str, batch: bool) -> None:
    assert is_batch_metric(key) is batch


records_st = st.lists(st.fixed_dictionaries(
    {"rollout/num_groups": st.sampled_from([0, 0, 1, 8])},
    optional={"reward/mean": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
              "rollout/accuracy_before_filter": st.floats(0, 1)}), max_size=30)


@settings(max_examples=60, deadline=None)
@given(records_st)
def test_series_invariants(raw: list[dict[str, Any]]) -> None:
    recs = [{"step": i, **r} for i, r in enumerate(raw)]
    for key in ("reward/mean", "rollout/accuracy_before_filter"):
        steps, values = metric_series(recs, key)
        assert steps == sorted(steps) and len(steps) == len(values)
        for s, v in zip(steps, values):
            r = recs[s]
            if is_batch_metric(key) and r["rollout/num_groups"] == 0:
                assert v is None  # never a zero (or anything) on an empty batch
            else:
                assert key in r
                want = r[key]
                assert v == (want if want is not None and math.isfinite(want) else None)
        absent = {r["step"] for r in recs if key not in r and not (is_batch_metric(key) and r["rollout/num_groups"] == 0)}
        assert absent.isdisjoint(steps)
    spans = empty_batch_spans(recs)
    assert [s for a, b in spans for s in range(a, b + 1)] == [r["step"] for r in recs if r["rollout/num_groups"] == 0]


def _plotted(monkeypatch: pytest.MonkeyPatch, recs: list[dict[str, Any]], path: Path) -> Figure:
    """Run plot_metrics and return the figure it saved."""
    saved: list[Figure] = []
    original = Figure.savefig

    def spy(self: Figure, *args: Any, **kwargs: Any) -> Any:
        saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    assert plot_metrics(recs, path).read_bytes()[:4] == b"\x89PNG"
    return saved[0]


def test_png_has_no_point_on_an_empty_batch_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recs = [{"step": 0, "eval/accuracy": 0.1}] + [full(s, **{"reward/mean": 0.2 + s / 100}) for s in range(1, 40)]
    for s in (20, 21, 30):
        recs[s] = {"step": s, **EMPTY}
    fig = _plotted(monkeypatch, recs, tmp_path / "curves.png")
    lines = {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}
    for key in ("reward/mean", "rollout/accuracy", "policy/entropy"):
        xs, ys = list(lines[key].get_xdata()), list(lines[key].get_ydata())
        for s in (20, 21, 30):
            assert math.isnan(ys[xs.index(s)]), (key, s)  # a break in the line, not a point at 0
        assert 0.0 not in ys
    before = lines["rollout/accuracy_before_filter"]
    assert list(before.get_ydata())[list(before.get_xdata()).index(20)] == 0.953125
    reward_ax = next(ax for ax in fig.axes if ax.get_title() == "reward")
    bands = sorted((round(p.get_x(), 1), round(p.get_x() + p.get_width(), 1)) for p in reward_ax.patches)
    assert bands == [(19.5, 21.5), (29.5, 30.5)]  # the empty steps are shaded
    drift_ax = next(ax for ax in fig.axes if ax.get_title().startswith("drift"))
    assert not drift_ax.patches  # not a batch metric: nothing to shade


def test_png_marks_a_point_isolated_between_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recs = [full(s) for s in range(1, 50)]
    recs[9], recs[11] = {"step": 10, **EMPTY}, {"step": 12, **EMPTY}  # step 11 stands alone
    fig = _plotted(monkeypatch, recs, tmp_path / "c.png")
    line = next(ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == "reward/mean")
    assert line.get_markevery() == [10]  # index of step 11: visible although it joins no neighbour


def test_metrics_doctests() -> None:
    assert doctest.testmod(metrics, optionflags=doctest.ELLIPSIS).failed == 0
