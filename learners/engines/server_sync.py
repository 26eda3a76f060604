"""Weight sync inside a ``vllm serve`` worker: the worker extension server-mode training starts vLLM with.

``vllm serve --worker-extension-cls dapo_env.learners.engines.server_sync.WeightSyncExtension`` (what
:class:`~dapo_env.learners.engines.server.VLLMServer` passes with ``weight_sync=True``) mixes these methods into
vLLM's worker; the learner calls them through vLLM's ``POST /collective_rpc`` route (development mode,
``VLLM_SERVER_DEV_MODE=1``), whose arguments are strings:

- ``dapo_load_weights(path)``: load the tensors of a safetensors file (HF ``state_dict`` names, written
  by the learner on the same machine) with the model's own weight loader;
- ``dapo_fingerprint(names_json)``: :func:`~dapo_env.learners.engines.weights_fingerprint` of the model's
  weights under HF names (all of them, or the JSON list of names), to compare with the learner's;
- ``dapo_describe()``: where the weights live (``device``, ``dtype``, ``gpu_uuid``) and vLLM's weight-transfer
  backend (``transfer_backend``, ``None`` unless the server runs with ``--weight-transfer-config``), from which the
  learner picks its weight-sync strategy (:mod:`~dapo_env.learners.engines.weight_sync`).

The CPU trap (``notes/vllm-cpu.md``, ``docs/vllm.md``): vLLM's CPU backend prepacks every linear layer's
weight and drops the parameter, so a later load leaves those layers stale. vLLM imports this module in
its worker process before it loads the model; on CPU (and with ``DAPO_SERVER_SYNC=1``, which
:class:`~dapo_env.learners.engines.server.VLLMServer` sets) the import therefore swaps the private GEMM dispatch
for :func:`~dapo_env.learners.engines.vllm_engine.plain_cpu_linears`'s (ordinary parameters computed by
``torch.nn.functional.linear``) for the life of the process, and ``dapo_load_weights`` refuses to load
while any linear layer computes with a packed copy. Every push is verified by the learner with
``dapo_fingerprint`` (``StaleWeightsError`` on a difference).

Nothing here runs in the learner's process (it is imported by vLLM's worker only).
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from .base import weights_fingerprint
from .vllm_engine import check_plain_cpu_linears, import_vllm, hf_named_weights, plain_cpu_linears


#: Set (to 1) by :class:`~dapo_env.learners.engines.server.VLLMServer` for the server it starts with weight sync: only
#: then does importing this module patch vLLM (a learner process that merely imports it is left alone).
SYNC_ENV = "DAPO_SERVER_SYNC"


def _patch_cpu_linears() -> Any:
    """In a server started with weight sync, on CPU, keep linear weights as live parameters for the whole worker
    process; returns the entered context (held by this module: were it collected, its ``finally`` would restore
    vLLM's dispatch)."""
    if os.environ.get(SYNC_ENV) != "1":
        return None  # not a weight-sync server: dapo_load_weights refuses packed layers anyway
    vllm = import_vllm()
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    context = plain_cpu_linears(vllm)
    context.__enter__()  # never exited: the model is built (and reloaded) in this process
    return context


_PATCH = _patch_cpu_linears()


class WeightSyncExtension:
    """Methods vLLM mixes into its worker (``self`` is the worker: ``self.model_runner`` holds the model)."""

    def _dapo_model(self) -> torch.nn.Module:
        return self.model_runner.get_model()  # type: ignore[attr-defined]

    def _dapo_tied(self) -> bool:
        config = self.model_runner.model_config.hf_config  # type: ignore[attr-defined]
        return bool(getattr(config, "tie_word_embeddings", False))

    @torch.no_grad()
    def dapo_load_weights(self, path: str) -> dict[str, Any]:
        """Load the safetensors file at ``path`` into the model; returns how many tensors were loaded."""
        from safetensors.torch import load_file

        model = self._dapo_model()
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            check_plain_cpu_linears(model)
        tensors = load_file(path)
        model.load_weights(iter(tensors.items()))
        return {"loaded": len(tensors)}

    def dapo_describe(self) -> dict[str, Any]:
        """The worker's weights' device type, dtype and GPU UUID, and vLLM's weight-transfer backend (or ``None``)."""
        param = next(self._dapo_model().parameters())
        transfer = self.vllm_config.weight_transfer_config  # type: ignore[attr-defined]
        gpu = str(torch.cuda.get_device_properties(param.device).uuid) if param.device.type == "cuda" else None
        return {"device": param.device.type, "dtype": str(param.dtype).removeprefix("torch."),
                "transfer_backend": None if transfer is None else str(transfer.backend), "gpu_uuid": gpu}

    @torch.no_grad()
    def dapo_fingerprint(self, names_json: str = "null") -> str:
        """The fingerprint of the model's weights under HF names (only ``names``, a JSON list, if given)."""
        weights = hf_named_weights(self._dapo_model(), tied=self._dapo_tied())
        names = json.loads(names_json)
        return weights_fingerprint(weights if names is None else {n: weights[n] for n in names})


__all__ = ["SYNC_ENV", "WeightSyncExtension"]
