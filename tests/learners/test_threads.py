"""The work-conserving thread budget: its rule on hand-worked cases, its flags across a real spawned process,
and a real asynchronous training run in which each side runs on the threads the other lends it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import torch

from dapo_env.learners.config import TrainConfig
from dapo_env.learners.rollout.threads import (LEARNER, THREAD_SPLITS, WORKER, ThreadBudget, mean_threads, side_threads,
                                       thread_shares)
from dapo_env.learners.trainer import train

from async_helpers import flip_worker_flag
from trainer_helpers import tiny_config


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_shares_give_the_learner_the_larger_half_and_each_side_at_least_one() -> None:
    # T -> (learner, worker): 1 -> 1 + 1 (over budget: a process cannot run on 0 threads), 2 -> 1 + 1,
    # 3 -> 2 + 1, 4 -> 2 + 2, 7 -> 4 + 3
    assert [thread_shares(t) for t in (1, 2, 3, 4, 7)] == [(1, 1), (1, 1), (2, 1), (2, 2), (4, 3)]


@pytest.mark.parametrize("total, split, side, other_busy, expected", [
    (2, "work-conserving", LEARNER, False, 2),  # the worker waits: the learner takes both threads
    (2, "work-conserving", LEARNER, True, 1),  # both work: half each
    (2, "work-conserving", WORKER, False, 2),  # the learner waits for a round: the worker takes both
    (3, "work-conserving", WORKER, True, 1),
    (3, "work-conserving", LEARNER, True, 2),
    (3, "static", LEARNER, False, 2),  # static: the share, whatever the other side does
    (3, "static", WORKER, False, 1),
    (1, "work-conserving", WORKER, True, 1),
    (1, "work-conserving", LEARNER, False, 1),
])
def test_side_threads_hand_worked(total: int, split: str, side: int, other_busy: bool, expected: int) -> None:
    assert side_threads(side, total=total, split=split, other_busy=other_busy) == expected


def test_budget_follows_the_flags_and_restores_them() -> None:
    budget = ThreadBudget(4)
    assert budget.busy(LEARNER) and not budget.busy(WORKER)  # the learner works from the start
    assert (budget.threads(LEARNER), budget.threads(WORKER)) == (4, 2)
    with budget.working(WORKER):
        assert (budget.threads(LEARNER), budget.threads(WORKER)) == (2, 2)
        with budget.waiting(LEARNER):
            assert budget.threads(WORKER) == 4
        assert budget.busy(LEARNER)  # restored
    assert not budget.busy(WORKER)
    static = ThreadBudget(4, "static")
    assert (static.threads(LEARNER), static.threads(WORKER)) == (2, 2)


def test_apply_sets_torch_threads_and_counts_each_unit() -> None:
    budget = ThreadBudget(2)
    assert budget.apply(LEARNER) == 2 and torch.get_num_threads() == 2
    with budget.working(WORKER):
        assert budget.apply(LEARNER) == 1 and torch.get_num_threads() == 1
        budget.apply(LEARNER)
    assert budget.take_counts() == {2: 1, 1: 2}
    assert budget.take_counts() == {}  # reset
    assert mean_threads({2: 1, 1: 2}) == pytest.approx(4 / 3) and mean_threads({}) is None


def test_attach_applies_before_every_layer_forward_and_backward() -> None:
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer

    budget = ThreadBudget(2)
    model = build_tiny_model(build_tokenizer(), hidden_size=64, layers=2, heads=2)
    handles = budget.attach(model, LEARNER)
    assert len(handles) == 3  # the input embeddings and the 2 decoder layers
    ids = torch.ones(2, 5, dtype=torch.long)
    loss = model(input_ids=ids).logits.sum()
    assert budget.take_counts() == {2: 3}  # embeddings, layer 0, layer 1: the worker is idle
    with budget.working(WORKER):  # the worker wakes up during the learner's backward
        loss.backward()
        assert budget.take_counts() == {1: 2}  # before layer 0's and the embeddings' backward (layer 1's: as set)
        with torch.no_grad():
            model.get_decoder()(input_ids=ids)  # the chunked log-prob path enters at the decoder
    assert budget.take_counts() == {1: 3}
    for handle in handles:
        handle.remove()
    model(input_ids=ids)
    assert budget.take_counts() == {}


def test_bad_values_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="total must be an int >= 1"):
        ThreadBudget(0)
    with pytest.raises(ValueError, match="split must be one of"):
        ThreadBudget(2, "half")
    with pytest.raises(ValueError, match="split must be one of"):
        side_threads(LEARNER, total=2, split="half", other_busy=True)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"^TrainConfig\.num_threads: must be an integer >= 1") as err:
            TrainConfig(num_threads=bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"^TrainConfig\.num_threads_split: choose one of") as err:
        TrainConfig(num_threads_split="half")
    assert "\n" not in str(err.value)
    assert TrainConfig().num_threads_split == "work-conserving" and "static" in THREAD_SPLITS


def test_flags_are_shared_with_a_spawned_process() -> None:
    ctx = multiprocessing.get_context("spawn")
    budget, seen, go, release = ThreadBudget(2), ctx.Queue(), ctx.Event(), ctx.Event()
    with budget.waiting(LEARNER):
        proc = ctx.Process(target=flip_worker_flag, args=(budget, seen, go, release))
        proc.start()
        assert seen.get(timeout=60) == 2  # the learner waits: the worker may take both threads
    assert go.wait(60)
    assert budget.busy(WORKER) and budget.threads(LEARNER) == 1  # the other process's flag, seen here
    release.set()
    assert seen.get(timeout=60) == "done"
    proc.join(30)
    assert proc.exitcode == 0 and not budget.busy(WORKER) and budget.threads(LEARNER) == 2


@pytest.mark.parametrize("split, expected", [("work-conserving", 2.0), ("static", 1.0)])
def test_a_real_worker_and_learner_run_on_the_threads_the_other_lends(tmp_path: Path, split: str,
                                                                      expected: float) -> None:
    # max_staleness=0 through a worker: the worker generates only while the learner waits for the round, and the
    # learner updates only while the worker waits for the next one, so with a work-conserving budget of 2 every
    # forward pass of either side runs on both threads; a static split keeps one each
    cfg = tiny_config(tmp_path, max_steps=2, rollout_worker=True, num_threads=2, num_threads_split=split,
                      checkpoint_every=0, plot_every=0, eval_every=0)
    records = train(cfg).metrics[1:]
    assert len(records) == 2
    for r in records:
        assert r["perf/worker_threads_mean"] == pytest.approx(expected, abs=0.1)  # abs: a forward racing the wait
        if "perf/learner_threads_mean" in r:  # the step updated (a batch of all-equal rewards does not)
            assert r["perf/learner_threads_mean"] == pytest.approx(expected)
    assert any("perf/learner_threads_mean" in r for r in records)
