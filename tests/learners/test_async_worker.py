"""The rollout worker process: ordered weights and tasks, a dead or hung worker detected and replaced,
the job's own errors surfaced, no orphan when the learner is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from dapo_env.learners.rollout.worker import RolloutWorker, RolloutWorkerError, WorkerLost

from async_helpers import EchoJob

ROOT = Path(__file__).resolve().parents[2]


def test_tasks_run_with_the_weights_sent_before_them() -> None:
    worker = RolloutWorker(EchoJob(), timeout_s=120)
    worker.start()
    try:
        weights = {"w": torch.ones(3)}
        worker.send_weights(1, weights)
        worker.submit(10, "a")
        weights["w"] += 1  # the learner keeps training: the worker got a copy
        worker.send_weights(2, weights)
        worker.submit(11, "b")
        worker.submit(12, "c")
        assert worker.outstanding == {10, 11, 12}
        # collected in any order; each ran with the last weights queued before it
        later = worker.wait(12)
        first = worker.wait(10)
        assert (first.result["version"], first.result["total"], first.result["payload"]) == (1, 3.0, "a")
        assert (later.result["version"], later.result["total"], later.result["payload"]) == (2, 6.0, "c")
        assert worker.wait(11).result["version"] == 2 and first.seconds >= 0
        assert worker.outstanding == frozenset()
        with pytest.raises(KeyError, match="never submitted"):
            worker.wait(10)
    finally:
        worker.close()
    assert worker.pid is None


def test_wait_loaded_returns_once_the_weights_queued_after_a_task_are_loaded() -> None:
    """What a learner's engine that shares the worker's server waits for: the worker has loaded the last weights
    sent, after the tasks queued before them (whose results are kept for wait())."""
    worker = RolloutWorker(EchoJob(), timeout_s=120)
    worker.start()
    try:
        worker.send_weights(1, {"w": torch.ones(2)})
        worker.submit(1, 0.5)  # a task that takes a while, queued before the next weights
        worker.send_weights(2, {"w": torch.zeros(2)})
        assert worker.loading
        started = time.monotonic()
        worker.wait_loaded()
        assert not worker.loading and time.monotonic() - started >= 0.4  # after the task, not before
        assert worker.wait(1).result["version"] == 1  # the task's result was kept
        worker.submit(2, "after")
        assert worker.wait(2).result["version"] == 2
    finally:
        worker.close()


def test_dead_and_hung_workers_are_detected_and_replaced() -> None:
    worker = RolloutWorker(EchoJob(), timeout_s=3.0)
    worker.start()
    try:
        worker.send_weights(0, {"w": torch.zeros(1)})
        worker.submit(0, 60.0)  # a minute-long task
        time.sleep(0.5)
        os.kill(worker.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(WorkerLost, match="killed by signal 9"):
            worker.wait(0)
        assert time.monotonic() - t0 < 10
        worker.restart()
        worker.send_weights(5, {"w": torch.ones(2)})
        worker.submit(1, "after restart")
        assert worker.wait(1).result == {"version": 5, "total": 2.0, "payload": "after restart"}

        worker.submit(2, "x")
        worker.wait(2)
        worker.submit(3, 60.0)
        time.sleep(0.5)
        os.kill(worker.pid, signal.SIGSTOP)  # alive but making no progress
        t0 = time.monotonic()
        with pytest.raises(WorkerLost, match="hung: no progress"):
            worker.wait(3)
        assert 2.5 < time.monotonic() - t0 < 20
        stopped = worker.pid
        worker.restart()
        assert worker.restarts == 2 and worker.pid != stopped
        worker.send_weights(6, {"w": torch.ones(1)})
        worker.submit(4, "again")
        assert worker.wait(4).result["version"] == 6
    finally:
        worker.close()


def test_an_idle_worker_is_not_hung() -> None:
    worker = RolloutWorker(EchoJob(), timeout_s=1.0)
    worker.start()
    try:
        worker.submit(0, "warm")
        worker.wait(0)
        time.sleep(1.5)  # the learner was busy updating; the worker had nothing to do
        worker.submit(1, 0.3)
        assert worker.wait(1).result["payload"] == 0.3
    finally:
        worker.close()


def test_job_errors_carry_the_workers_traceback() -> None:
    worker = RolloutWorker(EchoJob(), timeout_s=120)
    worker.start()
    try:
        worker.submit(0, "boom")
        with pytest.raises(RolloutWorkerError, match="could not handle 'boom'"):
            worker.wait(0)
    finally:
        worker.close()
    with pytest.raises(TypeError, match="build"):
        RolloutWorker(object())
    with pytest.raises(ValueError, match="timeout_s"):
        RolloutWorker(EchoJob(), timeout_s=0)


def test_the_worker_dies_with_a_killed_learner(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys, time
        sys.path[:0] = [sys.argv[1], sys.argv[2]]
        from dapo_env.learners.rollout.worker import RolloutWorker
        from async_helpers import EchoJob
        if __name__ == "__main__":
            worker = RolloutWorker(EchoJob(), timeout_s=120)
            worker.start()
            worker.submit(0, 600.0)  # busy generating when the learner dies
            time.sleep(1.0)
            print(worker.pid, flush=True)
            time.sleep(600)
    """)
    (tmp_path / "learner.py").write_text(script)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "learner.py"), str(ROOT), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        os.kill(pid, 0)  # the worker is running
        proc.kill()  # kill -9 of the learner
        proc.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break  # a zombie waiting for init to reap it: gone
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the rollout worker outlived its killed learner")
    finally:
        proc.kill()
