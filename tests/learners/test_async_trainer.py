"""Asynchronous rollouts in the trainer: max_staleness=0 through a worker is the synchronous loop (same
records but timing), staleness 1 overlaps and stays within the bound, IS correction and CISPO are
reachable from the config, a worker killed mid-step is replaced without a deadlock."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dapo_env.learners.config import preset
from dapo_env.learners.trainer import Trainer, train

from trainer_helpers import tiny_config

TIMING = ("time/", "perf/")
JOB = Path(__file__).resolve().parent / "async_resume_job.py"


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if not k.startswith(TIMING)}


def test_staleness_0_through_a_worker_reproduces_the_synchronous_metrics(tmp_path: Path) -> None:
    common = dict(max_steps=3, checkpoint_every=0, plot_every=0)
    sync = train(tiny_config(tmp_path / "sync", **common)).metrics
    worker = train(tiny_config(tmp_path / "worker", rollout_worker=True, **common)).metrics
    assert len(sync) == len(worker) == 4
    assert [untimed(r) for r in sync] == [untimed(r) for r in worker]
    assert set(worker[-1]) - set(sync[-1]) <= {"time/rollout_wait_s", "time/worker_generate_s",
                                               "perf/worker_threads_mean", "perf/learner_threads_mean"}
    assert {"time/rollout_wait_s", "time/worker_generate_s", "perf/worker_threads_mean"} <= set(worker[-1])
    trained = [r for r in sync[1:] if r["rollout/num_groups"]]
    assert trained and all(r["loss/policy"] is not None for r in trained)  # the comparison covers updates
    assert all(r["staleness/share_0"] + r["staleness/share_older"] == pytest.approx(1.0) for r in trained)


def test_staleness_1_overlaps_within_the_bound_with_is_correction_and_cispo(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, max_steps=4, max_staleness=1, loss="cispo", is_correction="token-mask",
                      is_cap=2.0, checkpoint_every=0, plot_every=0, eval_every=0)
    records = train(cfg).metrics[1:]
    assert len(records) == 4
    fresh = [r for r in records if r["staleness/mean"] is not None]
    assert fresh
    for r in fresh:  # shares of every consumed sample's age; carried-over groups are the only older ones
        assert r["staleness/share_0"] + r["staleness/share_1"] + r["staleness/share_older"] == pytest.approx(1.0)
    assert any(r["staleness/share_1"] > 0 for r in fresh)  # rounds generated during the previous update
    assert any(r["async/rounds_ahead"] >= 1 for r in records)
    updated = [r for r in records if r["loss/policy"] is not None]
    assert updated
    for r in updated:
        assert {"is/weight_mean", "is/weight_max", "is/masked_share", "is/mismatch_k3"} <= set(r)
        assert 0.0 < r["is/weight_mean"] <= 2.0 and 0.0 <= r["is/masked_share"] <= 1.0
    assert any(r["is/mismatch_abs"] > 1e-4 for r in updated)  # stale samples: engine and learner differ


def test_a_worker_killed_mid_step_is_replaced_with_a_warning(tmp_path: Path) -> None:
    trainer = Trainer(tiny_config(tmp_path, max_steps=3, max_staleness=1, rollout_timeout_s=60, checkpoint_every=0))
    source = trainer.sampler.source
    records: list[dict[str, Any]] = []
    killed: list[int] = []

    def kill_when_busy() -> None:  # SIGKILL the worker while it holds a round of the running step
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            pid = source.worker.pid
            if pid is not None and source.worker.outstanding:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.005)

    try:
        records.append(trainer.train_step())
        killer = threading.Thread(target=kill_when_busy, daemon=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            killer.start()
            step = threading.Thread(target=lambda: records.append(trainer.train_step()), daemon=True)
            step.start()
            step.join(300)  # generous on a loaded machine: the step starts a replacement worker (imports torch)
            killer.join(60)
            assert not step.is_alive(), "the step deadlocked after the worker was killed"
            records.append(trainer.train_step())
        assert killed
        lost = [w for w in caught if issubclass(w.category, RuntimeWarning) and "rollout worker" in str(w.message)]
        assert len(lost) == 1, [str(w.message) for w in caught]
        assert f"pid {killed[0]}" in str(lost[0].message) and "replaced" in str(lost[0].message)
        assert source.worker.pid not in (None, killed[0])
        assert records[-1]["async/worker_restarts"] == 1.0 and len(records) == 3
    finally:
        trainer.close()
    assert source.worker.pid is None  # closed: no worker process left behind


def test_async_config_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_staleness.*>= 0"):
        preset("tiny", max_staleness=-1)
    with pytest.raises(ValueError, match="is_correction.*token-truncate"):
        preset("tiny", is_correction="clip")
    with pytest.raises(ValueError, match="is_cap.*> 1"):
        preset("tiny", is_correction="token-mask", is_cap=1.0)
    with pytest.raises(ValueError, match="rollout_worker.*multi-turn.*max_staleness=0"):
        preset("guess", max_staleness=1)
    with pytest.raises(ValueError, match="clip_c=None"):
        preset("tiny", loss="cispo", clip_c=3.0)
    with pytest.raises(ValueError, match="known|registered policy loss"):
        preset("tiny", loss="ppo")
    with pytest.raises(ValueError, match="difficulty_sampling.*max_staleness=0"):
        preset("tiny", max_staleness=1, difficulty_sampling=True)
    with pytest.raises(ValueError, match="lora_rank.*rollout_worker=false"):
        preset("tiny", rollout_worker=True, lora_rank=4)
    assert preset("tiny", max_staleness=2).uses_rollout_worker and not preset("tiny").uses_rollout_worker


def _run_job(out_dir: Path, log: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(JOB.parents[2]), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(JOB), str(out_dir), str(log), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _per_step(log: Path) -> dict[int, dict[str, Any]]:
    """The last line written for each step (a resumed run redoes the steps after its checkpoint)."""
    out: dict[int, dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        item = json.loads(line)
        out[item["step"]] = item
    return out


@pytest.mark.slow
def test_kill_9_and_resume_consume_every_problem_exactly_as_an_uninterrupted_run(tmp_path: Path) -> None:
    """A real SIGKILL of the training process while rounds are buffered and in flight (max_staleness=1),
    then --resume: every step draws the same generation rounds and trains on the same groups as a run that
    was never interrupted, so no prompt is skipped or seen twice."""
    whole = _run_job(tmp_path / "whole", tmp_path / "whole.jsonl")
    assert whole.wait(600) == 0, whole.stderr.read()
    reference = _per_step(tmp_path / "whole.jsonl")
    assert sorted(reference) == list(range(1, 7))

    killed_log = tmp_path / "killed.jsonl"
    run = _run_job(tmp_path / "killed", killed_log)
    checkpoints = tmp_path / "killed" / "t" / "checkpoints"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:  # kill -9 in the step after the second checkpoint
        if (checkpoints / "step_000002").exists() and killed_log.exists() and len(killed_log.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    assert run.poll() is None, "the run finished before it could be killed: " + run.stderr.read()
    os.kill(run.pid, signal.SIGKILL)
    assert run.wait(60) == -signal.SIGKILL
    before = _per_step(killed_log)
    assert max(before) < 6

    resumed = _run_job(tmp_path / "killed", killed_log, "--resume")
    assert resumed.wait(600) == 0, resumed.stderr.read()
    lines = [json.loads(line) for line in killed_log.read_text().splitlines()]
    assert any(item["resumed"] for item in lines) and lines[0]["step"] == 1
    after = _per_step(killed_log)
    assert after == {k: {**v, "resumed": after[k]["resumed"]} for k, v in reference.items()}
    consumed = Counter(pid for item in after.values() for rnd in item["drawn"] for pid in rnd)
    assert consumed == Counter(pid for item in reference.values() for rnd in item["drawn"] for pid in rnd)


def test_cli_runs_async_with_cispo_and_is_correction(tmp_path: Path) -> None:
    from dapo_env.learners.cli import main

    code = main(["train", "--run-name", "cli", "--out-dir", str(tmp_path), "--max-steps", "2", "--no-progress",
                 "--max-staleness", "1", "--loss", "cispo", "--is-correction", "sequence-truncate", "--is-cap", "3",
                 "--verifier", "trainer_helpers:even_length", "--set", "warmstart_steps=0", "batch_size=4",
                 "group_size=4", "mini_batch_size=2", "micro_batch_size=8", "tiny_hidden_size=64", "tiny_heads=2",
                 "tiny_layers=1", "eval_size=4", "max_response_tokens=8", "overlong_cache_length=2", "num_threads=1",
                 "checkpoint_every=0", "eval_every=0", "plot_every=0"])
    assert code == 0
    run = tmp_path / "cli"
    cfg = json.loads((run / "config.json").read_text())
    assert (cfg["max_staleness"], cfg["loss"], cfg["is_correction"], cfg["is_cap"]) == (1, "cispo", "sequence-truncate", 3.0)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 2 and "staleness/share_1" in records[-1]


def test_update_masks_outlier_tokens_before_the_denominators_and_weights_the_rest(monkeypatch) -> None:
    """is_correction='token-mask': tokens whose engine log-prob is far from the learner's leave the loss mask
    and the global token count; the others carry w = exp(old - engine)."""
    import torch

    from dapo_env.learners.algo.batch import batch_logprobs, build_sequence_batch
    from dapo_env.learners.algo.losses import POLICY_LOSSES, group_advantages
    from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    from dapo_env.learners.algo.update import update_policy
    from dapo_env.types import Completion, Group

    torch.manual_seed(0)
    tok = build_tokenizer()
    model = build_tiny_model(tok, hidden_size=64, layers=1, heads=2, seed=0)
    groups = [Group(str(g), "p", tuple(Completion("x", token_ids=(5 + g, 6 + k, 7), logprobs=(0.0, 0.0, 0.0),
                                                  prompt_token_ids=(1, 4)) for k in range(4)),
                    (1.0, -1.0, 1.0, -1.0), (True, False, True, False), (True,) * 4) for g in range(2)]
    batch = build_sequence_batch(groups, pad_id=0)
    old = batch_logprobs(model, batch, micro_batch_size=8, temperature=1.0)
    engine = old.clone()
    engine[0, 1] = old[0, 1] + 5.0  # w = e^-5: masked at C = 2
    engine[3, 0] = old[3, 0] - 0.5  # w = e^0.5 = 1.65: kept with that weight
    batch = dataclasses.replace(batch, rollout_logprobs=engine)
    calls: list[dict[str, Any]] = []
    real = POLICY_LOSSES["ppo-clip"]

    def spy(logp, old_logp, advantages, mask, **kwargs):
        calls.append({"mask": mask.clone(), **kwargs})
        return real(logp, old_logp, advantages, mask, **kwargs)

    monkeypatch.setitem(POLICY_LOSSES, "ppo-clip", spy)
    cfg = preset("tiny", group_size=4, batch_size=2, mini_batch_size=2, micro_batch_size=8,
                 is_correction="token-mask", is_cap=2.0)
    adv = group_advantages(torch.tensor([r for g in groups for r in g.rewards]), 4)
    result = update_policy(model, torch.optim.SGD(model.parameters(), lr=0.0), batch, adv, cfg, key=(0, 0),
                           old_logp=old)
    (call,) = calls
    mask, weights = call["mask"], call["is_weights"]  # rows in the update's shuffled group order
    assert mask.sum() == 8 * 3 - 1 and int(call["num_tokens"]) == 23
    assert int((weights == 0).sum()) == 1 and bool(mask[weights == 0].eq(0).all())
    assert sorted(weights[mask.bool()].tolist())[-1] == pytest.approx(math.exp(0.5), rel=1e-5)
    assert int(torch.isclose(weights[mask.bool()], torch.tensor(1.0)).sum()) == 22
    assert result.metrics["is_masked_share"] == pytest.approx(1 / 24)
    with pytest.raises(ValueError, match="old_logp"):
        update_policy(model, torch.optim.SGD(model.parameters(), lr=0.0), batch, adv, cfg, key=(0, 0))
