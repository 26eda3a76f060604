"""``--weight-sync nccl``: the learner's weights into a GPU ``vllm serve`` through vLLM's own weight-transfer API.

Imports vLLM (its trainer-side engine), so it is loaded only when this strategy is chosen
(:meth:`~dapo_env.learners.engines.server.ServerEngine` builds it). The server runs with ``VLLM_SERVER_DEV_MODE=1`` and
``--weight-transfer-config '{"backend": "nccl"}'`` (``dapo-env serve --weight-sync nccl``); the learner and the
server need the same vLLM version. With vLLM 0.32's routes (``vllm/entrypoints/rl/online/api_router.py``):

1. once: ``GET /get_world_size`` (the server's workers, ``W``); the learner opens a TCP rendezvous at
   (:func:`~dapo_env.learners.engines.weight_sync.learner_address`, a free port) as rank 0 of ``W + 1`` while
   ``POST /init_weight_transfer_engine {"init_info": {master_address, master_port, rank_offset: 1, world_size,
   packed...}}`` makes the workers join (vLLM's ``NCCLTrainerWeightTransferEngine.trainer_init``);
2. every push: ``POST /pause?mode=wait``; ``POST /start_weight_update``; ``POST /update_weights {"update_info":
   {names, dtype_names, shapes}}`` while the learner broadcasts the tensors over NCCL (packed into 256 MiB
   buffers), each received tensor going through the model's own ``load_weights``; ``POST /finish_weight_update``;
   ``POST /resume`` (vLLM's ``send_weights`` drives the middle three through :class:`RoutesClient`).

Each of the two steps runs in a daemon thread waited for at most the push timeout
(:func:`~dapo_env.learners.engines.weight_sync.bounded`): a server that dies mid-push (its workers never finish the
broadcast) ends the push with one line instead of a hang. The engine then verifies the push by fingerprint,
as for every strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import torch
from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
from vllm.distributed.weight_transfer.nccl_engine import (
    NCCLTrainerInitInfo,
    NCCLTrainerWeightTransferEngine,
)

from .weight_sync import ServerControl, bounded, free_port, learner_address

#: One packed NCCL buffer (two are in flight): bounds the extra GPU memory a push takes on each side.
BUFFER_BYTES = 256 * 2**20
T = TypeVar("T")


class TensorSource(WeightSource):
    """vLLM's ``WeightSource`` over the tensors of the current push (:attr:`tensors`, replaced before each send):
    ``metadata()`` and iteration list the same names, dtypes and shapes in the same order."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(name, t.dtype, tuple(t.shape)) for name, t in self.tensors.items()]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        return iter(list(self.tensors.items()))


class RoutesClient:
    """vLLM's ``VLLMWeightSyncClient`` protocol over :class:`~dapo_env.learners.engines.weight_sync.ServerControl` (its
    four calls, each bounded and failing in one line), for vLLM's trainer-side engine to drive."""

    def __init__(self, control: ServerControl) -> None:
        self.control = control

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.control.call("init_weight_transfer_engine", init_info)

    def start_weight_update(self) -> None:
        self.control.call("start_weight_update")

    def update_weights(self, update_info: Any) -> None:
        self.control.call("update_weights", update_info)

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.control.call("finish_weight_update", weight_version)


def wire_tensors(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What goes over NCCL: every tensor (detached, all on one CUDA device), less ``lm_head.weight`` when it shares
    storage with the embeddings (the server ties them itself; its loader skips a tied ``lm_head``)."""
    out = {name: t.detach() for name, t in tensors.items()}
    devices = {t.device for t in out.values()}
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        raise ValueError(f"--weight-sync nccl sends from one CUDA device; the tensors are on {sorted(map(str, devices))}: "
                         "use --weight-sync file")
    head, embed = out.get("lm_head.weight"), out.get("model.embed_tokens.weight")
    if head is not None and embed is not None and head.data_ptr() == embed.data_ptr():
        del out["lm_head.weight"]
    return out


def trainer_init_info(address: str, port: int, world_size: int) -> NCCLTrainerInitInfo:
    """The learner's side of the rendezvous: rank 0 (the sender) of ``world_size`` (the server's workers + 1),
    packed broadcasts in :data:`BUFFER_BYTES` buffers (vLLM's engine forwards these to the workers)."""
    return NCCLTrainerInitInfo(rank=0, master_address=address, master_port=port, world_size=world_size, packed=True,
                               packed_buffer_size_bytes=BUFFER_BYTES)


class NcclWeightSync:
    """``"nccl"`` (see the module docstring): joins the server's workers once, then broadcasts every push.

    Args:
        control: the server's control routes (their ``timeout_s`` bounds the rendezvous and every push).
        learner_device: the CUDA device the learner's weights live on (rank 0's device).
        master_address, master_port: the rendezvous (default: :func:`learner_address` and a free port).
    """

    name = "nccl"

    def __init__(self, control: ServerControl, *, learner_device: str, master_address: str | None = None,
                 master_port: int | None = None) -> None:
        self.control = control
        self.device = torch.device(learner_device)
        world = int(control.call("get_world_size")["world_size"]) + 1
        address = master_address or learner_address(control.root)
        port = master_port or free_port(address)
        info = trainer_init_info(address, port, world)
        self.source = TensorSource()
        self.engine = self._bounded(
            lambda: NCCLTrainerWeightTransferEngine.trainer_init(info, client=RoutesClient(control), source=self.source),
            f"the NCCL rendezvous with {control.root} at {address}:{port} (world {world})")

    def _bounded(self, call: Callable[[], T], what: str) -> T:
        def on_device() -> T:  # a thread's current CUDA device starts at 0: vLLM uses the current one
            torch.cuda.set_device(self.device)
            return call()

        return bounded(on_device, timeout_s=self.control.timeout_s, what=what)

    def push(self, tensors: Mapping[str, torch.Tensor], version: int) -> None:
        """Broadcast ``tensors`` (HF names) into the server's model with generation paused around it."""
        self.source.tensors = wire_tensors(tensors)
        self.control.call("pause")
        try:
            self._bounded(self.engine.send_weights, f"NCCL weight push {version} to {self.control.root}")
        except BaseException:
            try:
                self.control.call("resume")
            except OSError:
                pass  # the push's own error says more
            raise
        self.control.call("resume")

    def close(self) -> None:
        """Leave the transfer group (the server's side first, best effort)."""
        try:
            self.control.call("shutdown_weight_transfer_engine")
        except OSError:
            pass
        self.engine.shutdown()


__all__ = ["BUFFER_BYTES", "NcclWeightSync", "RoutesClient", "TensorSource", "trainer_init_info", "wire_tensors"]
