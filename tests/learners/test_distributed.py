"""Data parallelism (learners.collective, learners.distributed): 2 gloo ranks give the single-process loss
and gradients.

One ``torch.multiprocessing`` start of 2 CPU ranks runs every multi-rank check (start-up dominates): the
public ``update_policy`` with each rank's ``Trainer`` (built with a ``DDPCollective`` / ``FSDPCollective``)
on a fixed batch whose sequence lengths differ a lot between the ranks' shards (a per-rank token-mean would
be visibly wrong), and the balancing of dynamic-sampling batches (``agree_on_count`` + ``DynamicSampler.defer``).
The real entry point under torchrun is the slow test at the end.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from dapo_env.learners.algo.batch import build_sequence_batch, response_logprobs
from dapo_env.learners.collective import World, rank_seed, reduce_records, shard_config
from dapo_env.learners.config import preset
from dapo_env.learners.algo.losses import group_advantages
from dapo_env.learners.models.tiny import build_tiny_model  # noqa: F401  (imports transformers' Llama before forking)
from dapo_env.learners.trainer import Trainer
from dapo_env.learners.algo.update import update_policy
from dapo_env.types import Completion, Group, VerifyResult

WORLD = 2
GROUP = 4
GROUPS = 4  # global batch: 4 groups x 4 samples; rank r takes groups 2r, 2r+1
#: (name, FSDP?, TrainConfig overrides): plain all-reduce and FSDP2, each also with activation checkpointing
#: and packed micro-batches (the loss and gradients must not change)
RUNS = (("fsdp0", False, {}), ("fsdp1", True, {}),
        ("fsdp0_ckpt", False, {"gradient_checkpointing": True, "packing": "pack"}),
        ("fsdp1_ckpt", True, {"gradient_checkpointing": True, "packing": "pack"}))


def even_length(response: str, reference: Any) -> VerifyResult:
    """Toy verifier for the entry-point run: about half of random responses are 'right'."""
    ok = len(response) % 2 == 0
    return VerifyResult(ok, float(ok), None, "toy")


def _config(out_dir: Path, name: str, **overrides: Any) -> Any:
    return preset("tiny", max_steps=1, **overrides, warmstart_steps=0, batch_size=GROUPS, group_size=GROUP,
                  mini_batch_size=GROUPS, micro_batch_size=3, tiny_hidden_size=64, tiny_heads=2, tiny_layers=1,
                  max_response_tokens=12, overlong_cache_length=2, out_dir=str(out_dir), name=name,
                  progress=False, num_threads=1, grad_clip=1e9, eval_size=4, checkpoint_every=0, plot_every=0)


def _fixture(model: torch.nn.Module) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """Fixed groups: rank 0's share has long responses, rank 1's short ones; one sample loss-masked."""
    gen = np.random.default_rng(0)
    groups = []
    for g in range(GROUPS):
        lo, hi = (7, 12) if g < GROUPS // 2 else (1, 3)
        prompt = tuple(int(t) for t in gen.integers(5, 30, size=3 + g))
        comps = tuple(Completion("x", num_tokens=int(n), token_ids=tuple(int(t) for t in gen.integers(5, 30, size=n)),
                                 prompt_token_ids=prompt) for n in gen.integers(lo, hi + 1, size=GROUP))
        rewards = tuple(float(r) for r in (1, -1, 1 if g % 2 else -1, -1))
        groups.append(Group(problem_id=str(g), prompt="p", completions=comps, rewards=rewards,
                            correct=tuple(r > 0 for r in rewards), loss_mask=(True, True, g != 1, True),
                            infos=({},) * GROUP))
    batch = build_sequence_batch(groups, pad_id=0)
    advantages = group_advantages(torch.tensor([r for g in groups for r in g.rewards]), GROUP)  # (16,)
    with torch.no_grad():
        logp = response_logprobs(model, batch, torch.arange(GROUPS * GROUP), 1.0)[0]  # (16, R)
    noise = torch.randn(logp.shape, generator=torch.Generator().manual_seed(1)) * 0.3
    return batch, advantages, (logp + noise) * batch.response_mask


def _sgd_update(trainer: Trainer, batch: Any, adv: torch.Tensor, old: torch.Tensor,
                lr: float = 1.0) -> tuple[float, dict[str, torch.Tensor]]:
    """``update_policy`` on the trainer's model and collective with plain SGD at lr 1, so the parameter
    change is minus the gradient."""
    def full() -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in trainer.collective.full_state_dict(trainer.model).items()}

    before = full()
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=lr)
    out = update_policy(trainer.model, optimizer, batch, adv, trainer.cfg, key=(0, 0), old_logp=old,
                        collective=trainer.collective)
    assert out.optimizer_steps == 1
    after = full()
    params = dict(trainer.rollout_model.named_parameters())
    return out.metrics["loss"], {k: before[k] - after[k] for k in before if k in params}


def _rank_main(rank: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    from dapo_env import GroupVectorEnv
    from dapo_env.learners.collective import DDPCollective, FSDPCollective
    from dapo_env.sampler import DynamicSampler, EnvSource

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD),
                      LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    world = World(rank=rank, world_size=WORLD)
    results: dict[str, Any] = {}
    rows = slice(rank * GROUPS // WORLD * GROUP, (rank + 1) * GROUPS // WORLD * GROUP)
    for mode, fsdp, knobs in RUNS:
        collective = (FSDPCollective if fsdp else DDPCollective)(world)
        trainer = Trainer(_config(Path(out_dir), mode, **knobs), collective=collective)
        batch, adv, old = _fixture(trainer.rollout_model)
        loss, delta = _sgd_update(trainer, batch.rows(rows), adv[rows], old[rows])
        total = torch.tensor([loss], dtype=torch.float64)
        dist.all_reduce(total)
        results[mode] = {"loss": float(total), "grads": {k: -v for k, v in delta.items()},
                         "main_files": sorted(p.name for p in Path(out_dir, mode).iterdir())}
        trainer.close()
    # balance: rank 0 finds 3 informative groups, rank 1 only 1 within its single round
    env = GroupVectorEnv("Arithmetic-v0", num_envs=3 * 2, group_size=2, size=64)
    answers = {env.task.format_prompt(p): p.answer for p in env.problems}

    def generate(prompts: list[str]) -> list[str]:
        good = len(prompts) if rank == 0 else 2  # rank 1: only the first group has a right answer
        return [f"Answer: {answers[p]}" if i < good and i % 2 == 0 else "Answer: none" for i, p in enumerate(prompts)]

    sampler = DynamicSampler(EnvSource(env, generate, seed=rank), num_groups=3, max_rounds=1)
    first = sampler.sample()
    keep = collective.agree_on_count(len(first.groups))
    sampler.defer(first.groups[keep:])
    results["balance"] = {"kept": [g.problem_id for g in first.groups[:keep]], "deferred": len(first.groups) - keep,
                          "surplus": [g.problem_id for g in sampler.surplus],
                          "gathered": collective.gather(rank), "broadcast": collective.broadcast(f"from {rank}"),
                          "any": (collective.any(rank == 1), collective.any(False)),
                          "record": collective.reduce_record({"step": 1, "rollout/num_groups": keep + rank})}
    env.close()
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("dist")
    # fork: the ranks inherit this process's imported torch/transformers (a fresh import costs 10-20 s
    # on a busy 2-core machine); each rank still joins its own gloo group
    mp.start_processes(_rank_main, args=(_free_port(), str(out)), nprocs=WORLD, join=True, start_method="fork")
    return {r: torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)}


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.set_num_threads(1)
    trainer = Trainer(_config(tmp_path_factory.mktemp("single"), "one"))
    batch, adv, old = _fixture(trainer.model)
    lens = batch.loss_mask.sum(-1)  # (16,)
    assert lens[:8].sum() > 2.5 * lens[8:].sum()  # the shards are far from even: a per-rank mean would show
    loss, delta = _sgd_update(trainer, batch, adv, old)
    trainer.close()
    return {"loss": loss, "grads": {k: -v for k, v in delta.items()}}


@pytest.mark.parametrize("mode", ["fsdp0", "fsdp1", "fsdp0_ckpt", "fsdp1_ckpt"],
                         ids=["allreduce", "fsdp2", "allreduce-checkpointing-pack", "fsdp2-checkpointing-pack"])
def test_two_ranks_match_one_process(two_ranks: dict[int, dict[str, Any]], single: dict[str, Any], mode: str) -> None:
    for rank in range(WORLD):
        got = two_ranks[rank][mode]
        assert got["loss"] == pytest.approx(single["loss"], rel=1e-6, abs=1e-7)
        assert set(got["grads"]) == set(single["grads"]) and single["grads"]
        for name, ref in single["grads"].items():
            assert ref.abs().max() > 0
            torch.testing.assert_close(got["grads"][name], ref, rtol=1e-5, atol=1e-6, msg=f"{mode} {name}")
    # only the main rank wrote the run folder (config, step-0 files), and nothing else appeared beside it
    assert two_ranks[0][mode]["main_files"] == ["config.json", "init_weights.pt"]


def test_per_rank_token_mean_would_differ(single: dict[str, Any], tmp_path: Path) -> None:
    """The control: normalising each rank's share by its own token count gives another loss."""
    trainer = Trainer(_config(tmp_path, "ctl").with_overrides({"mini_batch_size": GROUPS // WORLD}))
    batch, adv, old = _fixture(trainer.model)
    losses = []
    for r in range(WORLD):
        rows = slice(r * 8, (r + 1) * 8)
        loss, _ = _sgd_update(trainer, batch.rows(rows), adv[rows], old[rows], lr=0.0)
        losses.append(loss)
    assert abs(np.mean(losses) - single["loss"]) > 1e-3
    trainer.close()


def test_balanced_batches_defer_extra_groups_and_collectives_agree(two_ranks: dict[int, dict[str, Any]]) -> None:
    r0, r1 = two_ranks[0]["balance"], two_ranks[1]["balance"]
    assert len(r0["kept"]) == len(r1["kept"]) == 1
    assert (r0["deferred"], r1["deferred"]) == (2, 0)
    assert len(r0["surplus"]) == 2  # rank 0's extra groups wait, in order, for its next batch
    assert r0["gathered"] == [0, 1] and r1["gathered"] is None
    assert r0["broadcast"] == r1["broadcast"] == "from 0"
    assert r0["any"] == r1["any"] == (True, False)
    assert r0["record"] == r1["record"] == {"step": 1, "rollout/num_groups": 3, "dist/world_size": 2}


def test_shard_config_splits_sizes_and_seeds() -> None:
    cfg = preset("tiny", batch_size=8, mini_batch_size=4, seed=3)
    local = shard_config(cfg, World(rank=1, world_size=2))
    assert (local.batch_size, local.mini_batch_size, local.seed) == (4, 2, rank_seed(3, 1))
    assert shard_config(cfg, World(rank=0, world_size=2)).seed == 3
    with pytest.raises(ValueError, match="divisible by the world size 4"):
        shard_config(preset("tiny", batch_size=6, mini_batch_size=2), World(rank=0, world_size=4))
    with pytest.raises(ValueError, match="rank"):
        World(rank=2, world_size=2)


def test_reduce_records_sums_counts_and_keeps_rank0_optimizer_values() -> None:
    out = reduce_records([{"step": 3, "rollout/num_groups": 2, "loss/policy": 0.25, "optim/grad_norm": 1.5,
                           "time/update_s": 1.0, "policy/logprob_mismatch_mean": None},
                          {"step": 3, "rollout/num_groups": 2, "loss/policy": 0.5, "optim/grad_norm": 1.5,
                           "time/update_s": 2.0, "policy/logprob_mismatch_mean": 0.1}])
    assert out == {"step": 3, "rollout/num_groups": 4, "loss/policy": 0.75, "optim/grad_norm": 1.5,
                   "time/update_s": 2.0, "policy/logprob_mismatch_mean": 0.1}


def _torchrun(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    here = Path(__file__).resolve().parent  # this checkout's code first, then the test's toy verifier
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here.parents[1]), str(here), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(WORLD),
           "--master-port", str(_free_port()), "-m", "dapo_env.learners.train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)


SIZES = ["warmstart_steps=0", "batch_size=4", "group_size=4", "mini_batch_size=2", "micro_batch_size=8",
         "tiny_hidden_size=64", "tiny_heads=2", "tiny_layers=1", "eval_size=4", "eval_every=2",
         "max_response_tokens=8", "overlong_cache_length=2", "num_threads=1", "checkpoint_every=1",
         "plot_every=2", "verifier=test_distributed:even_length"]
COMPARED = ("loss/policy", "reward/mean", "rollout/accuracy_before_filter", "optim/grad_norm", "policy/entropy")


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_torchrun_entry_point_trains_writes_one_run_and_resumes_exactly(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = _torchrun(["--max-steps", "2", "--out-dir", str(runs), "--run-name", "dp", "--no-progress",
                      "--set", *SIZES], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = runs / "dp"
    assert sorted(p.name for p in runs.iterdir()) == ["dp"]
    assert json.loads((run / "config.json").read_text())["batch_size"] == 4  # the global batch, not a share
    records = _records(run)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert all(r["dist/world_size"] == WORLD and r["rollout/num_groups"] % WORLD == 0 for r in records[1:])
    assert any(r["optim/steps"] > 0 for r in records[1:])
    proc = _torchrun(["--max-steps", "2", "--out-dir", str(runs), "--run-name", "dp", "--no-progress",
                      "--set", *SIZES], tmp_path)  # a new run under torchrun never reuses a run folder either
    assert proc.returncode != 0 and "already holds a run" in proc.stderr
    assert [r["step"] for r in _records(run)] == [0, 1, 2]
    state = torch.load(run / "checkpoints" / "step_000002" / "trainer_state.pt", weights_only=False)
    assert state["world_size"] == WORLD and len(state["ranks"]) == WORLD
    assert state["ranks"][0]["sampler"]["source"] != state["ranks"][1]["sampler"]["source"]  # rank-seeded draws
    proc = _torchrun(["--resume", str(run), "--max-steps", "3", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = _records(run)
    assert [r["step"] for r in resumed] == [0, 1, 2, 3]
    proc = _torchrun(["--max-steps", "3", "--out-dir", str(runs), "--run-name", "straight", "--no-progress",
                      "--set", *SIZES], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    straight = _records(runs / "straight")
    for key in COMPARED:  # the resumed step 3 is the uninterrupted run's step 3
        assert resumed[3][key] == pytest.approx(straight[3][key], rel=1e-5, abs=1e-7), key


@pytest.mark.slow
def test_torchrun_fsdp_trains_and_resumes(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = _torchrun(["--fsdp", "--max-steps", "2", "--out-dir", str(runs), "--run-name", "f", "--no-progress",
                      "--set", *SIZES], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = _torchrun(["--fsdp", "--resume", str(runs / "f"), "--max-steps", "3", "--no-progress"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(runs / "f")
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert records[3]["optim/steps"] > records[2]["optim/steps"] > 0
    assert records[3]["policy/logprob_mismatch_max"] < 1e-4  # the unsharded rollout copy got every update
