"""Collectives: what changes when the ONE training loop runs on W data-parallel ranks instead of one process.

The :class:`~dapo_env.learners.trainer.Trainer` takes a :class:`Collective` and calls it at the few places
where ranks must agree; everything else is the same code on every rank:

- **Config.** :meth:`~Collective.local_config`: each rank fills ``batch_size / W`` groups with
  ``mini_batch_size / W`` groups per optimizer step, seeded by :func:`rank_seed` (rank 0 keeps the run's
  seed, so one process is the plain run). The global batch is the union of the ranks' shares.
- **Balance.** Every rank must contribute the same number of groups (a rank with fewer would run fewer
  micro-batches and the collectives would hang or mis-weight; AReaL #450, verl PR #5228): ranks agree on
  the minimum (:meth:`~Collective.agree_on_count`) and a rank holding more defers the rest to its
  sampler's next batch.
- **Denominators.** :meth:`~Collective.denominators` sums a mini-batch's token and sequence counts over
  ranks (verl #5625), so each rank's loss is its exact share of the single-process loss.
- **Gradients.** :meth:`~Collective.sync_gradients` SUMS them over ranks (the shares already carry the
  global denominator), in one flat buffer; every rank then clips and steps identically, so the weights
  stay equal without a broadcast. :class:`FSDPCollective` shards the decoder layers and the root with
  FSDP2 (``fully_shard``), which averages gradients, and multiplies them by W.
- **Files and state.** Only the main rank (:attr:`~Collective.is_main`) writes the run folder; checkpoints
  :meth:`~Collective.gather` every rank's sampler and RNG state; records are combined by
  :func:`reduce_records`; :meth:`~Collective.broadcast` shares rank 0's decisions (the checkpoint to
  resume, an error, the held-out accuracy).

Example:
    >>> import torch
    >>> local = LocalCollective()
    >>> local.is_main, local.agree_on_count(3), [int(x) for x in local.denominators(torch.tensor([[1, 1, 0]]))]
    (True, 3, [2, 1])
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
import torch.distributed as dist

from .algo.losses import loss_denominators


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

    def __post_init__(self) -> None:
        if not isinstance(self.world_size, int) or self.world_size < 1:
            raise ValueError(f"World.world_size must be an int >= 1, got {self.world_size!r}")
        if not isinstance(self.rank, int) or not 0 <= self.rank < self.world_size:
            raise ValueError(f"World.rank must be in [0, {self.world_size}), got {self.rank!r}")

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the run's files."""
        return self.rank == 0


def rank_seed(seed: int, rank: int) -> int:
    """The seed rank ``rank`` uses for its prompts and sampling: ``seed`` itself on rank 0.

    Example:
        >>> rank_seed(7, 0), rank_seed(7, 1) == rank_seed(7, 1) != rank_seed(7, 2)
        (7, True)
    """
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank, 0x5EED]).generate_state(1)[0] & 0x7FFFFFFF)


def shard_config(cfg: Any, world: World) -> Any:
    """This rank's config: ``batch_size`` and ``mini_batch_size`` divided by the world size, seed from
    :func:`rank_seed`, ``cuda`` -> ``cuda:<local_rank>``. Raises ``ValueError`` saying which sizes to pick."""
    w = world.world_size
    if w > 1 and cfg.uses_rollout_worker:
        raise ValueError("max_staleness > 0 / rollout_worker run on one process for now; under torchrun set "
                         "max_staleness=0 and rollout_worker=false (docs/scaling.md)")
    for name in ("batch_size", "mini_batch_size"):
        if getattr(cfg, name) % w:
            raise ValueError(f"{name}={getattr(cfg, name)} must be divisible by the world size {w} (every "
                             f"rank takes an equal share of the groups): pick a multiple of {w}")
    overrides: dict[str, Any] = {"batch_size": cfg.batch_size // w, "mini_batch_size": cfg.mini_batch_size // w,
                                 "seed": rank_seed(cfg.seed, world.rank)}
    if cfg.device == "cuda":  # one GPU per process: torchrun's LOCAL_RANK picks it
        overrides["device"] = f"cuda:{world.local_rank}"
    return cfg.with_overrides(overrides)


# How each record key combines over ranks; keys not listed take the mean over ranks that report them.
_SUM_KEYS = ("rollout/num_groups", "rollout/samples_generated", "perf/rollout_tokens_per_s",
             "perf/update_tokens_per_s", "loss/policy", "policy/entropy", "policy/clip_frac_high",
             "policy/clip_frac_low", "policy/approx_kl",  # update metrics: shares of the global tokens
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


@runtime_checkable
class Collective(Protocol):
    """The data-parallel operations the training loop needs (see the module docstring)."""

    world: World

    @property
    def is_main(self) -> bool: ...

    def local_config(self, cfg: Any) -> Any: ...

    def prepare(self, model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]: ...

    def denominators(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def sync_gradients(self, model: torch.nn.Module) -> None: ...

    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]: ...

    def optimizer_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]: ...

    def load_optimizer_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                                  state: Mapping[str, Any]) -> None: ...

    def broadcast_model(self, model: torch.nn.Module) -> None: ...

    def broadcast(self, obj: Any) -> Any: ...

    def gather(self, obj: Any) -> list[Any] | None: ...

    def agree_on_count(self, count: int) -> int: ...

    def any(self, flag: bool) -> bool: ...

    def reduce_record(self, record: Mapping[str, Any]) -> dict[str, Any]: ...

    def barrier(self) -> None: ...


class LocalCollective:
    """One process: every operation is the identity (the plain single-process run)."""

    world = World()

    @property
    def is_main(self) -> bool:
        return True

    def local_config(self, cfg: Any) -> Any:
        return cfg

    def prepare(self, model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
        """``(learner, rollout_model)``: the same object (an HF engine on it gets every update for free)."""
        return model, model

    def denominators(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return loss_denominators(mask)

    def sync_gradients(self, model: torch.nn.Module) -> None:
        pass

    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return model.state_dict()

    def optimizer_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return optimizer.state_dict()

    def load_optimizer_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                                  state: Mapping[str, Any]) -> None:
        optimizer.load_state_dict(state)

    def broadcast_model(self, model: torch.nn.Module) -> None:
        pass

    def broadcast(self, obj: Any) -> Any:
        return obj

    def gather(self, obj: Any) -> list[Any] | None:
        return [obj]

    def agree_on_count(self, count: int) -> int:
        return count

    def any(self, flag: bool) -> bool:
        return bool(flag)

    def reduce_record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        return dict(record)

    def barrier(self) -> None:
        pass


class DDPCollective(LocalCollective):
    """W processes in a ``torch.distributed`` group (gloo on CPU, NCCL on CUDA): the learner is replicated,
    denominators and gradients are all-reduced (plain all-reduce, not the ``DistributedDataParallel``
    wrapper: accumulation over micro-batches then needs no ``no_sync``)."""

    def __init__(self, world: World) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("no torch.distributed process group: call dapo_env.learners.distributed."
                               "init_distributed() first (under torchrun)")
        self.world = world

    @property
    def is_main(self) -> bool:
        return self.world.is_main

    def local_config(self, cfg: Any) -> Any:
        return shard_config(cfg, self.world)

    @staticmethod
    def _device() -> torch.device:
        """Where small collective tensors live: the current GPU under NCCL, else the CPU."""
        return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")

    def denominators(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        num_tokens, num_seqs = loss_denominators(mask)
        counts = torch.stack([num_tokens, num_seqs]).to(self._device(), torch.int64)  # (2,)
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
        counts = counts.to(mask.device)
        return counts[0], counts[1]

    def sync_gradients(self, model: torch.nn.Module) -> None:
        """Sum gradients over ranks in one flat buffer; a missing gradient counts as 0."""
        params = [p for p in model.parameters() if p.requires_grad]
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

    def broadcast_model(self, model: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers into every rank's model (in place)."""
        with torch.no_grad():
            for tensor in model.state_dict().values():
                dist.broadcast(tensor, 0)

    def broadcast(self, obj: Any) -> Any:
        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        out: list[Any] = [None] * self.world.world_size
        dist.gather_object(obj, out if self.is_main else None, dst=0)
        return out if self.is_main else None

    def agree_on_count(self, count: int) -> int:
        t = torch.tensor([count], dtype=torch.int64, device=self._device())
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return int(t.item())

    def any(self, flag: bool) -> bool:
        t = torch.tensor([int(bool(flag))], dtype=torch.int64, device=self._device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def reduce_record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        records: list[Any] = [None] * self.world.world_size
        dist.all_gather_object(records, dict(record))
        return {**reduce_records(records), "dist/world_size": self.world.world_size}

    def barrier(self) -> None:
        dist.barrier()


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


class FSDPCollective(DDPCollective):
    """Like :class:`DDPCollective`, with the learner sharded by FSDP2; rollouts run on an unsharded copy
    (``prepare`` returns it) that every weight push refreshes with :meth:`full_state_dict`."""

    def prepare(self, model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
        rollout_model = copy.deepcopy(model)
        return shard_model(model), rollout_model

    def sync_gradients(self, model: torch.nn.Module) -> None:
        """FSDP averages gradients over ranks; multiplying by W turns the mean into the sum we need."""
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(float(self.world.world_size))

    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Unsharded tensors by the inner model's ``state_dict`` names (a collective: every rank calls it)."""
        from torch.distributed.tensor import DTensor

        inner = model.module if isinstance(model, ShardedPolicy) else model
        return {name: (t.full_tensor() if isinstance(t, DTensor) else t) for name, t in inner.state_dict().items()}

    def optimizer_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_optimizer_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                                  state: Mapping[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model, optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True))


__all__ = ["Collective", "DDPCollective", "FSDPCollective", "LocalCollective", "ShardedPolicy", "World",
           "rank_seed", "reduce_records", "shard_config", "shard_model"]
