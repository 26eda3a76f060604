"""Data-parallel DAPO training on ``torch.distributed`` (launched with ``torchrun``), with an FSDP option.

How a step is split over W ranks (``docs/scaling.md`` has the commands and the measured figures):

- **Prompts.** Each rank fills ``batch_size / W`` groups with its own group env and
  :class:`~dapo_env.sampler.DynamicSampler`, seeded by :func:`rank_seed` (rank 0 keeps the run's seed,
  so a 1-process run is the plain :class:`~dapo_env.learners.trainer.Trainer`); the sampling seeds of
  generation are rank-specific the same way. The global batch is the union of the ranks' shares.
- **Balance.** Every rank must contribute the same number of groups (a rank with fewer would also run
  fewer micro-batches and the collectives would hang or mis-weight; AReaL #450, verl PR #5228). After
  sampling, ranks agree on the minimum group count with one all-reduce; a rank holding more returns its
  extra groups to the front of its sampler's surplus, where they start the next batch (nothing is lost).
- **Denominators.** The token-mean loss divides by the token count of the whole global mini-batch
  (verl #5625): each rank all-reduces its mini-batch's token and sequence counts and passes the sums to
  :func:`~dapo_env.learners.losses.policy_loss`, so each rank's loss is its exact share of the
  single-process loss.
- **Gradients.** After gradient accumulation the gradients are all-reduced with a SUM (not a mean: the
  shares already carry the global denominator), in one flat buffer; every rank then clips and steps
  identically, so the weights stay equal without a broadcast. With ``fsdp=True`` the decoder layers and
  the root are sharded with FSDP2 (``fully_shard``), which averages gradients; they are multiplied by W.
- **Files.** Rank 0 writes the run folder (config, metrics, plots, checkpoints); other ranks keep their
  scratch files in a temporary folder removed at the end. A checkpoint holds every rank's sampler and
  RNG state (gathered to rank 0, written atomically, then a barrier); resume needs the same world size.

Example:
    torchrun --nproc-per-node 2 -m dapo_env.learners.train --max-steps 20 --run-name dp2
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import tempfile
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from . import checkpoint as ckpt
from .config import TrainConfig
from .engine import HFEngine, weights_fingerprint
from .losses import loss_denominators
from .trainer import Trainer, TrainResult, autocast_dtype, build_model, param_drift
from dapo_env.types import RolloutBatch

# --- the world ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class World:
    """This process's place in the job: ``rank`` of ``world_size`` (``local_rank`` on its node).

    Example:
        >>> World(rank=1, world_size=2).is_main
        False
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = "gloo"

    def __post_init__(self) -> None:
        if not isinstance(self.world_size, int) or self.world_size < 1:
            raise ValueError(f"World.world_size must be an int >= 1, got {self.world_size!r}")
        if not isinstance(self.rank, int) or not 0 <= self.rank < self.world_size:
            raise ValueError(f"World.rank must be in [0, {self.world_size}), got {self.rank!r}")

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the run's files."""
        return self.rank == 0


def launched_with_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``torchrun`` (or another launcher using its variables) started this process."""
    env = os.environ if environ is None else environ
    return "WORLD_SIZE" in env and "RANK" in env


def init_distributed(device: str = "cpu", *, environ: Mapping[str, str] | None = None) -> World:
    """Join the process group torchrun described (gloo on CPU, NCCL on CUDA) and return the :class:`World`.

    Idempotent: an already initialised default group is reused. ``device="cuda"`` selects
    ``cuda:LOCAL_RANK`` for this process.
    """
    env = os.environ if environ is None else environ
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build")
    if not dist.is_initialized():
        if not launched_with_torchrun(env):
            raise RuntimeError("no RANK/WORLD_SIZE in the environment: launch with "
                               "`torchrun --nproc-per-node N -m dapo_env.learners.train ...`")
        backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(env.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    return World(rank=dist.get_rank(), world_size=dist.get_world_size(),
                 local_rank=int(env.get("LOCAL_RANK", dist.get_rank())), backend=dist.get_backend())


def rank_seed(seed: int, rank: int) -> int:
    """The seed rank ``rank`` uses for its prompts and sampling: ``seed`` itself on rank 0.

    Example:
        >>> rank_seed(7, 0), rank_seed(7, 1) == rank_seed(7, 1) != rank_seed(7, 2)
        (7, True)
    """
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank, 0x5EED]).generate_state(1)[0] & 0x7FFFFFFF)


def shard_config(cfg: TrainConfig, world: World) -> TrainConfig:
    """This rank's config: ``batch_size`` and ``mini_batch_size`` divided by the world size, seed from
    :func:`rank_seed`. Raises ``ValueError`` saying which sizes to pick when they do not divide."""
    w = world.world_size
    for name in ("batch_size", "mini_batch_size"):
        if getattr(cfg, name) % w:
            raise ValueError(f"{name}={getattr(cfg, name)} must be divisible by the world size {w} (every "
                             f"rank takes an equal share of the groups): pick a multiple of {w}")
    return cfg.with_overrides({"batch_size": cfg.batch_size // w, "mini_batch_size": cfg.mini_batch_size // w,
                               "seed": rank_seed(cfg.seed, world.rank)})


# --- collectives on tensors ------------------------------------------------------------------------------


def _active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _comm_device() -> torch.device:
    """Where small collective tensors live: the current GPU under NCCL, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def global_denominators(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~dapo_env.learners.losses.loss_denominators` summed over all ranks (local without a group).

    Args:
        mask: (n, T) this rank's loss mask of the current mini-batch.

    Returns:
        ``(num_tokens, num_seqs)`` as int64 tensors, identical on every rank.
    """
    num_tokens, num_seqs = loss_denominators(mask)
    if not _active():
        return num_tokens, num_seqs
    counts = torch.stack([num_tokens, num_seqs]).to(_comm_device(), torch.int64)  # (2,)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    counts = counts.to(mask.device)
    return counts[0], counts[1]


def all_reduce_gradients(parameters: Sequence[torch.nn.Parameter]) -> None:
    """Sum plain (unsharded) gradients over ranks in one flat buffer; a missing gradient counts as 0."""
    if not _active():
        return
    params = [p for p in parameters if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])  # (sum of numels,)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for p in params:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n


def broadcast_model(model: torch.nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers into every rank's model (in place)."""
    if not _active():
        return
    with torch.no_grad():
        for tensor in model.state_dict().values():
            dist.broadcast(tensor, src)


def agree_on_count(local: int) -> int:
    """The minimum of ``local`` over all ranks (the balanced number of groups per rank)."""
    if not _active():
        return local
    t = torch.tensor([local], dtype=torch.int64, device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


# --- FSDP (FSDP2 ``fully_shard``) ------------------------------------------------------------------------


class ShardedPolicy(torch.nn.Module):
    """An FSDP-sharded causal LM behind a plain ``forward``.

    FSDP2 gathers a module's parameters in that module's forward hooks. The learner's memory-lean
    log-prob path calls the decoder and reads ``lm_head.weight`` directly, which would bypass the
    root's hooks; hiding ``get_decoder`` makes it take the full ``model(...)`` forward instead.
    """

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module
        self.config = getattr(module, "config", None)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)


def shard_model(model: torch.nn.Module) -> ShardedPolicy:
    """Shard every decoder layer and then the root with ``fully_shard``; returns the wrapped model."""
    from torch.distributed.fsdp import fully_shard

    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    for layer in getattr(decoder, "layers", ()):
        fully_shard(layer)
    fully_shard(model)
    return ShardedPolicy(model)


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Unsharded tensors by the inner model's ``state_dict`` names (a collective under FSDP)."""
    from torch.distributed.tensor import DTensor

    inner = model.module if isinstance(model, ShardedPolicy) else model
    return {name: (t.full_tensor() if isinstance(t, DTensor) else t) for name, t in inner.state_dict().items()}


def scale_sharded_gradients(model: torch.nn.Module, factor: float) -> None:
    """FSDP averages gradients over ranks; multiplying by W turns the mean into the sum we need."""
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(factor)


# --- balanced sampling -----------------------------------------------------------------------------------


class BalancedSampler:
    """Wraps a rank's :class:`~dapo_env.sampler.DynamicSampler` so every rank returns the same number of groups.

    After the inner ``sample()``, ranks all-reduce the minimum group count; extra groups go back to the
    front of the inner sampler's surplus in order (the next batch starts with them). ``stats`` gain
    ``balanced_dropped`` (groups deferred on this rank) and ``partial`` reflects the balanced size.

    Example:
        >>> # sampler = BalancedSampler(DynamicSampler(env, generate, num_groups=8))  # one per rank
    """

    def __init__(self, sampler: Any) -> None:
        self.inner = sampler
        self.last_deferred = 0  # groups this rank deferred to the next batch in the last sample()

    def sample(self) -> RolloutBatch:
        batch = self.inner.sample()
        keep = agree_on_count(len(batch.groups))
        extra = list(batch.groups[keep:])
        self.last_deferred = len(extra)
        if extra:
            surplus: deque = self.inner._surplus  # DynamicSampler keeps carried-over groups here
            surplus.extendleft(reversed(extra))
        stats = dict(batch.stats, balanced_deferred=float(len(extra)),
                     partial=1.0 if keep < self.inner.num_groups else float(batch.stats.get("partial", 0.0)))
        return RolloutBatch(groups=tuple(batch.groups[:keep]), stats=stats)

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.inner.load_state_dict(state)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# --- metrics across ranks ------------------------------------------------------------------------------

# How each record key combines over ranks; keys not listed take the mean over ranks that report them.
_SUM_KEYS = ("rollout/num_groups", "rollout/samples_generated", "perf/rollout_tokens_per_s",
             "perf/update_tokens_per_s", "loss/policy", "policy/entropy", "policy/clip_frac_high",
             "policy/clip_frac_low", "policy/approx_kl",  # update metrics: token-weighted shares
             "dist/groups_deferred")
_MAX_PREFIXES = ("time/", "rollout/rounds", "rollout/partial", "response/length_max")
_FIRST_PREFIXES = ("optim/", "policy/drift_from_init", "step")  # identical on every rank by construction


def reduce_records(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine the ranks' step records (rank 0 first) into one: sums, maxima, rank 0's, or means.

    Example:
        >>> reduce_records([{"step": 1, "rollout/num_groups": 2, "time/step_s": 1.0, "reward/mean": 0.0},
        ...                 {"step": 1, "rollout/num_groups": 2, "time/step_s": 3.0, "reward/mean": 1.0}])
        {'step': 1, 'rollout/num_groups': 4, 'time/step_s': 3.0, 'reward/mean': 0.5}
    """
    out: dict[str, Any] = {}
    for key, first in records[0].items():
        values = [r[key] for r in records if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
        if not values or key.startswith(_FIRST_PREFIXES):
            out[key] = first
        elif key in _SUM_KEYS:
            out[key] = sum(values)
        elif key.startswith(_MAX_PREFIXES):
            out[key] = max(values)
        else:
            out[key] = float(np.mean(values))
    return out


# --- the trainer -----------------------------------------------------------------------------------------


class DistributedTrainer(Trainer):
    """The :class:`~dapo_env.learners.trainer.Trainer` on W ranks: same loop, same global batch.

    Args:
        config: the run's global settings (``batch_size`` and ``mini_batch_size`` over all ranks).
        world: this process's :class:`World` (from :func:`init_distributed`).
        fsdp: shard the learner with FSDP2; the rollout engine keeps an unsharded copy.
        resume, warm_start, model, tokenizer, engine: as for ``Trainer``.

    Example:
        >>> # under torchrun: DistributedTrainer(cfg, world=init_distributed()).fit()
    """

    def __init__(self, config: TrainConfig, *, world: World, fsdp: bool = False, resume: bool = False,
                 warm_start: Callable[..., dict[str, Any]] | None = None, model: Any = None,
                 tokenizer: Any = None, engine: Any = None) -> None:
        self.world, self.fsdp, self.global_cfg = world, bool(fsdp), config
        if self.fsdp and (config.engine != "hf" or engine is not None):
            raise ValueError("--fsdp runs rollouts on an unsharded HF copy of the model: use engine='hf'")
        local = shard_config(config, world)
        if local.device == "cuda":  # one GPU per process: torchrun's LOCAL_RANK picks it
            local = local.with_overrides({"device": f"cuda:{world.local_rank}"})
        self._scratch: Path | None = None
        if not world.is_main:  # other ranks write nothing into the run folder
            self._scratch = Path(tempfile.mkdtemp(prefix=f"dapo-rank{world.rank}-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._scratch), True)  # also at exit
            local = local.with_overrides({"out_dir": str(self._scratch), "progress": False, "plot_every": 0})
        latest = self._agreed_checkpoint(config.run_dir) if resume else None
        if model is None:
            model, tokenizer = self._initial_model(config, latest)
        if latest is None and warm_start is not None and config.warmstart_steps > 0 and world.is_main:
            from .rollout import resolve_task

            stats = warm_start(model, tokenizer, resolve_task(config))
            config.run_dir.mkdir(parents=True, exist_ok=True)
            (config.run_dir / "warmstart.json").write_text(json.dumps(stats, indent=2))
        model = model.to(local.device)  # NCCL broadcasts device tensors
        broadcast_model(model)  # identical starting weights everywhere (rank 0's warm start included)
        if self.fsdp:
            engine = HFEngine(copy.deepcopy(model), tokenizer, device=local.device, batch_size=256,
                              autocast_dtype=autocast_dtype(config))
            model = shard_model(model)
        # Weight pushes gather the full weights under FSDP (a collective): defer them until every rank
        # has built its trainer and loaded its checkpoint, so all ranks issue collectives in one order.
        self._defer_push = True
        super().__init__(local, model=model, tokenizer=tokenizer, engine=engine,
                         resume=resume and world.is_main, warm_start=None)
        self.sampler = BalancedSampler(self.sampler)
        if world.is_main:
            (self.run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2, default=str))
        if latest is not None and not world.is_main:
            self._load(latest)
        if dist.is_initialized():
            dist.barrier()
        self._defer_push = False
        self._push_weights()

    # --- set-up ----------------------------------------------------------------------------------------
    def _agreed_checkpoint(self, run_dir: Path) -> Path | None:
        """Rank 0's newest checkpoint, checked to be visible from every rank (a shared filesystem)."""
        found = [str(ckpt.latest_checkpoint(run_dir) or "")] if self.world.is_main else [""]
        if dist.is_initialized():
            dist.broadcast_object_list(found, src=0)
        if not found[0]:
            if not (run_dir / "config.json").exists():
                raise FileNotFoundError(f"--resume {run_dir}: no config.json or checkpoint there")
            return None
        path = Path(found[0])
        if not (path / "trainer_state.pt").exists():
            raise FileNotFoundError(f"rank {self.world.rank} cannot read checkpoint {path}: put the run folder on "
                                    "a filesystem every node mounts at the same path")
        return path

    def _initial_model(self, cfg: TrainConfig, latest: Path | None) -> tuple[Any, Any]:
        if latest is None:
            return build_model(cfg)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(str(latest / "model"), dtype=torch.float32)
        return model, AutoTokenizer.from_pretrained(str(latest / "model"))

    # --- hooks of the single-process loop --------------------------------------------------------------
    def _denominators(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return global_denominators(mask)

    def _sync_gradients(self) -> None:
        if self.fsdp:
            scale_sharded_gradients(self.model, float(self.world.world_size))
        else:
            all_reduce_gradients(list(self.model.parameters()))

    def _push_weights(self) -> None:
        if getattr(self, "_defer_push", False):
            return
        if not self.fsdp:
            return super()._push_weights()
        state = full_state_dict(self.model)
        version = self.engine.weights_version
        self.engine.load_weights(state)
        if self.engine.weights_version != version + 1 or self.engine.fingerprint() != weights_fingerprint(state):
            raise RuntimeError("weight push to the rollout engine did not take effect under FSDP")

    def _init_reference(self, fresh: bool) -> dict[str, torch.Tensor]:
        if not self.world.is_main:
            return {}  # drift is reported from rank 0
        if not self.fsdp:
            return super()._init_reference(fresh)
        path = self.run_dir / "init_weights.pt"
        if fresh or not path.exists():
            ref = {n: p.detach().float().cpu().clone() for n, p in self.engine.model.named_parameters()}
            torch.save(ref, path)
        else:
            ref = torch.load(path, map_location="cpu", weights_only=True)
        self._full_init = ref
        return {}

    def train_step(self) -> dict[str, Any]:
        record = super().train_step()
        if self.fsdp and self.world.is_main:  # the engine copy holds exactly the learner's weights
            record["policy/drift_from_init"] = param_drift(self.engine.model, self._full_init)
        record["dist/groups_deferred"] = self.sampler.last_deferred
        records: list[Any] = [None] * self.world.world_size
        dist.all_gather_object(records, record)
        out = reduce_records(records)
        out["dist/world_size"] = self.world.world_size
        return out

    def evaluate(self) -> float:
        """Rank 0 evaluates (the weights are identical everywhere) and tells the others."""
        box: list[Any] = [self.evaluate_local() if self.world.is_main else None]
        dist.broadcast_object_list(box, src=0)
        if not self.world.is_main:
            self.eval_history.append((self.step, float(box[0])))
        return float(box[0])

    def evaluate_local(self) -> float:
        return super().evaluate()

    # --- checkpoints -----------------------------------------------------------------------------------
    def _optimizer_state(self) -> dict[str, Any]:
        if not self.fsdp:
            return self.optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(self.model, self.optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def save(self) -> Path:
        """Gather every rank's sampler and RNG state to rank 0, which writes the checkpoint; then a barrier."""
        mine = {"sampler": self.sampler.state_dict(), "rng": ckpt.capture_rng_state()}
        gathered: list[Any] = [None] * self.world.world_size
        dist.gather_object(mine, gathered if self.world.is_main else None, dst=0)
        optimizer = self._optimizer_state()  # a collective under FSDP: every rank calls it
        path = self.run_dir / "checkpoints" / f"step_{self.step:06d}"
        if self.world.is_main:
            state = {"optimizer": optimizer, "scheduler": self.scheduler.state_dict(),
                     "sampler": mine["sampler"], "rng": mine["rng"], "ranks": gathered,
                     "distributed": {"world_size": self.world.world_size, "fsdp": self.fsdp},
                     "optimizer_steps": self.optimizer_steps, "eval_history": self.eval_history,
                     "config": self.global_cfg.to_dict()}
            model = self.engine.model if self.fsdp else self.model
            path = ckpt.save_checkpoint(self.run_dir, self.step, model=model, tokenizer=self.tokenizer,
                                        trainer_state=state, keep=self.cfg.keep_checkpoints)
        dist.barrier()
        return path

    def _load(self, checkpoint: Path) -> None:
        state = ckpt.load_trainer_state(checkpoint)
        info = state.get("distributed") or {"world_size": 1, "fsdp": False}
        if int(info["world_size"]) != self.world.world_size:
            raise ValueError(f"checkpoint {checkpoint} was written by {info['world_size']} ranks; resume with the "
                             f"same total number of processes (now {self.world.world_size})")
        mine = state["ranks"][self.world.rank]
        if self.fsdp:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

            set_optimizer_state_dict(self.model, self.optimizer, optim_state_dict=state["optimizer"],
                                     options=StateDictOptions(full_state_dict=True))
        else:
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.sampler.load_state_dict(mine["sampler"])
        self.step, self.optimizer_steps = int(state["step"]), int(state["optimizer_steps"])
        self.eval_history = [tuple(x) for x in state.get("eval_history", [])]
        ckpt.restore_rng_state(mine["rng"])
        self.metrics_log.truncate_after(self.step)
        self._push_weights()  # deferred while the trainer is being built (see __init__)

    # --- the loop --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Delete this rank's scratch folder (ranks other than 0); :meth:`fit` calls it at the end."""
        if self._scratch is not None:
            self._cleanup()

    def fit(self) -> TrainResult:
        try:
            result = super().fit()
        finally:
            self.close()
        return dataclasses.replace(result, run_dir=self.global_cfg.run_dir)


def train_distributed(config: TrainConfig, *, resume: bool = False, fsdp: bool = False,
                      **kwargs: Any) -> TrainResult:
    """:func:`~dapo_env.learners.trainer.train` on the process group torchrun set up (joined here).

    Example:
        >>> # torchrun --nproc-per-node 2 script.py, where script.py calls:
        >>> # train_distributed(preset("tiny", max_steps=10), fsdp=False)
    """
    owns_group = not dist.is_initialized()
    world = init_distributed(config.device)
    warm = kwargs.pop("warm_start", None)
    if warm is None and config.warmstart_steps > 0 and kwargs.get("model") is None and config.model is None:
        from .warmstart import warm_start_for

        warm = warm_start_for(config)
    result = DistributedTrainer(config, world=world, fsdp=fsdp, resume=resume, warm_start=warm, **kwargs).fit()
    dist.barrier()
    if owns_group:
        dist.destroy_process_group()
    return result


__all__ = ["BalancedSampler", "DistributedTrainer", "ShardedPolicy", "World", "agree_on_count",
           "all_reduce_gradients", "broadcast_model", "full_state_dict", "global_denominators",
           "init_distributed", "launched_with_torchrun", "rank_seed", "reduce_records", "scale_sharded_gradients",
           "shard_config", "shard_model", "train_distributed"]
