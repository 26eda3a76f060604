"""AsyncGroupSource: the prompt stream of the synchronous loop, rounds issued ahead within the staleness
bound, deterministic versions, lossless resume, and a replaced worker."""

from __future__ import annotations

import os
import signal
import time
import warnings

import pytest
import torch

from dapo_env import GroupVectorEnv
from dapo_env.schedule import PromptSchedule
from dapo_env.tasks import get_task
from dapo_env.learners.rollout.async_source import MAX_CONSECUTIVE_LOSSES, AsyncGroupSource, staleness_metrics
from dapo_env.learners.rollout.worker import RolloutWorker
from dapo_env.learners.algo.update import derive_seed

from async_helpers import FakeRoundJob

B, G = 3, 2
WEIGHTS = {"w": torch.zeros(4)}


def make_source(max_staleness: int, *, job: FakeRoundJob | None = None, timeout_s: float = 120.0):
    schedule = PromptSchedule(get_task("Arithmetic-v0").load(split="train", size=40), B, G)
    worker = RolloutWorker(job or FakeRoundJob(group_size=G), timeout_s=timeout_s)
    return AsyncGroupSource(schedule, worker, max_staleness=max_staleness, seed=11)


def stream(rounds: int) -> list[tuple[str, ...]]:
    """The problem ids of the first rounds of the synchronous loop's prompt stream (reset, then autoreset)."""
    env = GroupVectorEnv("Arithmetic-v0", num_envs=B * G, group_size=G, size=40)
    _, info = env.reset(seed=11)
    out = [tuple(info["problem_id"][::G])]
    for _ in range(rounds - 1):
        _, info = env.reset()
        out.append(tuple(info["problem_id"][::G]))
    env.close()
    return out


def run(source: AsyncGroupSource, draws: list[int], *, start: int = 0, stats: list | None = None) -> list[tuple]:
    """A learner: step k draws draws[k] rounds (at sampler positions (k, 0), (k, 1), ...), then publishes version
    k + 1. Returns, per drawn round, (step, problem ids, sample texts, position) and checks the bound on the way;
    appends each step's last round stats to ``stats``."""
    records = []
    for k, count in enumerate(draws, start=start):
        for r in range(count):
            batch = source.rollout((k, r))
            groups = batch.groups
            texts = tuple(c.text for g in groups for c in g.completions)
            version = int(texts[0].split("|")[2])
            assert k - version <= source.max_staleness, (k, version)
            records.append((k, tuple(g.problem_id for g in groups), texts, (k, r)))
            if stats is not None and r == count - 1:
                stats.append(batch.stats)
        source.publish(k + 1, WEIGHTS)
    return records


DRAWS = [1, 2, 1, 0, 3, 1, 1, 2]  # rounds per step, as dynamic sampling would need them


@pytest.mark.parametrize("max_staleness", [0, 2])
def test_rounds_follow_the_sync_stream_within_the_bound(max_staleness: int) -> None:
    source = make_source(max_staleness)
    stats: list = []
    try:
        source.publish(0, WEIGHTS)
        records = run(source, DRAWS, stats=stats)
    finally:
        source.close()
    n = sum(DRAWS)
    assert [r[1] for r in records] == stream(n)  # no round skipped, none drawn twice, same prompts as sync
    seeds = [int(r[2][0].split("|")[1]) for r in records]
    if max_staleness == 0:  # synchronous: the in-process loop's seeds (of the sampler's position)
        assert seeds == [derive_seed(11, *r[3]) for r in records]
        assert all(int(r[2][0].split("|")[2]) == r[0] for r in records)  # the weights of the step that draws it
        assert all(s["async/rounds_ahead"] == 0 and s["async/rounds_expired"] == 0 for s in stats)
    else:  # issued ahead: a function of the round's index alone
        assert seeds == [derive_seed(11, 2**31 + 1, i) for i in range(n)]
        ages = [r[0] - int(r[2][0].split("|")[2]) for r in records]
        assert max(ages) <= 2 and any(a > 0 for a in ages)  # really ahead, never beyond the bound
        assert max(s["async/rounds_ahead"] for s in stats) >= 1  # the worker is busy while the learner would update
        assert sum(s["async/rounds_expired"] for s in stats) >= 1  # the step drawing 0 rounds made some wait too long
    assert all(s["time/rollout_wait_s"] >= 0 and s["async/worker_restarts"] == 0 for s in stats)


def test_reused_weight_buffers_never_change_weights_a_round_has_not_loaded() -> None:
    # step k publishes weights summing to 4k. Round 3 is issued after step 1's weights, behind round 2 (0.3 s of
    # work); steps 2 and 3 then publish at once. Step 3's weights must not go into step 1's shared buffer while
    # the worker has not loaded it yet, or round 3 would run with them; later steps reuse the buffers.
    source = make_source(2, job=FakeRoundJob(group_size=G, seconds=0.3, report_weights=True))
    seen = []

    def draw(k: int, r: int) -> None:
        texts = [c.text for g in source.rollout((k, r)).groups for c in g.completions]
        seen.extend((int(t.split("|")[2]), float(t.split("|w=")[1])) for t in texts)

    try:
        source.publish(0, {"w": torch.zeros(4)})
        draw(0, 0)
        source.publish(1, {"w": torch.full((4,), 1.0)})
        draw(1, 0)  # issues round 3 with step 1's weights
        for k in (2, 3):  # step 2 draws nothing
            source.publish(k, {"w": torch.full((4,), float(k))})
        for k in range(3, 9):
            for r in range(2 if k == 3 else 1):  # step 3 draws rounds 2 and 3 (round 3 is 2 steps old: kept)
                draw(k, r)
            source.publish(k + 1, {"w": torch.full((4,), float(k + 1))})
        buffers = len(source._buffers)
    finally:
        source.close()
    assert 1 in {v for v, _ in seen}  # round 3 really ran with step 1's weights, from a buffer
    assert all(total == 4.0 * version for version, total in seen), seen
    assert buffers < 9  # reused, not one per step


def test_versions_are_deterministic_and_resume_is_lossless() -> None:
    first = make_source(1)
    try:
        first.publish(0, WEIGHTS)
        head = run(first, DRAWS[:4])
        state = first.state_dict()  # drains the rounds in flight
        tail = run(first, DRAWS[4:], start=4)
    finally:
        first.close()
    assert state["rounds"], "the checkpoint holds rounds generated ahead"
    resumed = make_source(1)
    try:
        resumed.load_state_dict(state)
        resumed.publish(4, WEIGHTS)  # the checkpoint's version, re-sent to the fresh worker
        again = run(resumed, DRAWS[4:], start=4)
    finally:
        resumed.close()
    assert again == tail  # the same groups, versions and seeds as the uninterrupted run
    assert [r[1] for r in head + again] == stream(sum(DRAWS))


def test_a_killed_or_stopped_worker_is_replaced() -> None:
    source = make_source(1, job=FakeRoundJob(group_size=G, seconds=1.0), timeout_s=4.0)
    try:
        source.publish(0, WEIGHTS)
        records = run(source, [1])
        os.kill(source.worker.pid, signal.SIGKILL)  # mid-step: round 1 is being generated
        with pytest.warns(RuntimeWarning, match="killed by signal 9; replaced it"):
            records += run(source, [1], start=1)
        os.kill(source.worker.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match="hung: no progress"):
            records += run(source, [2], start=2)
        assert time.monotonic() - t0 < 60
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # one warning per cause: the next loss is only counted
            os.kill(source.worker.pid, signal.SIGKILL)
            stats: list = []
            records += run(source, [1], start=3, stats=stats)
        assert stats[-1]["async/worker_restarts"] == 3
    finally:
        source.close()
    assert [r[1] for r in records] == stream(5)


@pytest.mark.slow  # four worker starts
def test_a_worker_that_always_dies_ends_the_run() -> None:
    source = make_source(0, job=FakeRoundJob(group_size=G, crash_round=1))
    try:
        source.publish(0, WEIGHTS)
        run(source, [1])
        with pytest.warns(RuntimeWarning), pytest.raises(RuntimeError, match=f"lost {MAX_CONSECUTIVE_LOSSES + 1} times"):
            run(source, [1], start=1)
    finally:
        source.close()


def test_errors_name_the_fix() -> None:
    source = make_source(1)
    with pytest.raises(RuntimeError, match="publish"):
        source.rollout((0, 0))
    source.publish(3, WEIGHTS)
    with pytest.raises(ValueError, match="must not decrease"):
        source.publish(2, WEIGHTS)
    assert source.worker.pid is None  # the worker starts with the first round
    source.close()
    with pytest.raises(ValueError, match="max_staleness"):
        AsyncGroupSource(source.schedule, source.worker, max_staleness=-1, seed=0)


def test_staleness_metrics() -> None:
    m = staleness_metrics([5, 5, 4, 2, None, -1], 5, max_staleness=2)
    assert m == {"staleness/mean": 1.0, "staleness/max": 3.0, "staleness/share_0": 0.5, "staleness/share_1": 0.25,
                 "staleness/share_2": 0.0, "staleness/share_older": 0.25}
    assert staleness_metrics([None], 1, max_staleness=0) == dict.fromkeys(
        ["staleness/mean", "staleness/max", "staleness/share_0", "staleness/share_older"])
