"""Data-parallel training under ``torchrun``: join the process group and run the ONE training loop with a
data-parallel :class:`~dapo_env.learners.algo.collective.Collective` (plain all-reduce, or FSDP2).

How a step is split over the ranks is in :mod:`dapo_env.learners.algo.collective`; commands and measured
figures are in ``docs/scaling.md``. A checkpoint holds every rank's sampler and RNG state; resume needs
the same world size. The run folder rules are those of one process (a fresh run refuses a non-empty
folder unless ``overwrite``).

Example:
    torchrun --nproc-per-node 2 -m dapo_env.learners.train --max-steps 20 --run-name dp2
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from .algo.collective import DDPCollective, FSDPCollective, World
from .config import TrainConfig
from .trainer import TrainResult, train


def launched_with_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``torchrun`` (or another launcher using its variables) started this process.

    Example:
        >>> launched_with_torchrun({"RANK": "0", "WORLD_SIZE": "2"}), launched_with_torchrun({})
        (True, False)
    """
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
                 local_rank=int(env.get("LOCAL_RANK", dist.get_rank())))


def train_distributed(config: TrainConfig, *, resume: bool = False, overwrite: bool = False, fsdp: bool = False,
                      **kwargs: Any) -> TrainResult:
    """:func:`~dapo_env.learners.trainer.train` on the process group torchrun set up (joined here), with a
    :class:`~dapo_env.learners.algo.collective.DDPCollective` (``fsdp=True``: an ``FSDPCollective``).

    Example:
        >>> # torchrun --nproc-per-node 2 script.py, where script.py calls:
        >>> # train_distributed(preset("tiny", max_steps=10), fsdp=False)
    """
    if fsdp and (config.engine != "hf" or kwargs.get("engine") is not None):
        raise ValueError("--fsdp runs rollouts on an unsharded HF copy of the model: use engine='hf'")
    owns_group = not dist.is_initialized()
    world = init_distributed(config.device)
    collective = (FSDPCollective if fsdp else DDPCollective)(world)
    try:
        result = train(config, resume=resume, overwrite=overwrite, collective=collective, **kwargs)
        collective.barrier()
    finally:
        if owns_group:
            dist.destroy_process_group()
    return result


__all__ = ["init_distributed", "launched_with_torchrun", "train_distributed"]
