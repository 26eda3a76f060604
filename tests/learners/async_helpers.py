"""Picklable rollout jobs for the async tests (a spawned worker imports this module by name)."""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch


class _Echo:
    def __init__(self) -> None:
        self.version: int | None = None
        self.total = 0.0

    def load_weights(self, version: int, tensors: Mapping[str, torch.Tensor]) -> None:
        self.version = version
        self.total = float(sum(t.sum() for t in tensors.values()))

    def run(self, payload: Any) -> Any:
        if payload == "boom":
            raise ValueError("the job could not handle 'boom'")
        if isinstance(payload, (int, float)) and not isinstance(payload, bool):
            time.sleep(float(payload))  # a long task, to be killed or stopped mid-way
        return {"version": self.version, "total": self.total, "payload": payload}


@dataclass(frozen=True)
class EchoJob:
    """Returns the payload with the version and weight sum it ran with; sleeps ``payload`` seconds for numbers,
    raises for ``"boom"``."""

    def build(self) -> _Echo:
        torch.set_num_threads(1)
        return _Echo()


class _FakeRounds:
    def __init__(self, job: FakeRoundJob) -> None:
        self.job, self.version, self.weights_sum = job, None, 0.0

    def load_weights(self, version: int, tensors: Mapping[str, torch.Tensor]) -> None:
        self.version = version
        self.weights_sum = float(sum(t.sum() for t in tensors.values()))

    def run(self, request: Any) -> Any:
        from dapo_env.learners.rollout.async_source import RoundResult
        from dapo_env.types import Completion, Group

        if request.policy_step != self.version:  # the ordered channel's promise
            raise RuntimeError(f"round {request.round} asked for version {request.policy_step}, worker holds {self.version}")
        if request.round == self.job.crash_round:
            import os

            os._exit(3)  # a worker that dies on this round, every time
        time.sleep(self.job.seconds)
        groups = []
        for pid in request.problem_ids:
            bits = zlib.crc32(f"{pid}:{request.seed}".encode())  # stable across processes
            correct = tuple((bits >> k) % 2 == 0 for k in range(self.job.group_size))
            tail = f"|w={self.weights_sum:g}" if self.job.report_weights else ""
            completions = tuple(Completion(f"{pid}|{request.seed}|{request.policy_step}|{k}{tail}", num_tokens=3)
                                for k in range(self.job.group_size))
            groups.append(Group(pid, f"prompt {pid}", completions, tuple(1.0 if c else -1.0 for c in correct),
                                correct, (True,) * self.job.group_size, ({"round": request.round},) * self.job.group_size))
        return RoundResult(request.round, request.policy_step, tuple(groups), generate_s=self.job.seconds)


@dataclass(frozen=True)
class FakeRoundJob:
    """Answers RoundRequests with made-up groups after ``seconds``; every sample's text records
    ``problem|seed|version|k`` (and ``|w=<sum of the loaded weights>`` with ``report_weights``). Dies (exit
    code 3) whenever it reaches ``crash_round``."""

    group_size: int = 2
    seconds: float = 0.0
    crash_round: int | None = None
    report_weights: bool = False

    def build(self) -> _FakeRounds:
        torch.set_num_threads(1)
        return _FakeRounds(self)


def flip_worker_flag(budget: Any, seen: Any, go: Any, release: Any) -> None:
    """In a spawned process: report the worker's threads, then mark the worker busy until ``release``."""
    from dapo_env.learners.rollout.threads import WORKER

    seen.put(budget.threads(WORKER))
    with budget.working(WORKER):
        go.set()  # the learner now sees a busy worker
        release.wait(60)
    seen.put("done")
