"""How a server-mode engine moves the learner's weights into a ``vllm serve`` process: a weight-sync strategy.

:class:`~dapo_env.learners.engines.server.ServerEngine` holds one strategy and calls its ``push(tensors)`` after every
optimizer step; whatever the strategy, the engine then resets the server's prefix cache and compares the
server's fingerprint with the learner's (``StaleWeightsError`` on a difference). Two strategies:

- ``"file"`` (:class:`FileWeightSync`, CPU or one machine): the tensors go to a safetensors file on this
  machine and dapo-env's worker extension loads it (``POST /collective_rpc`` ``dapo_load_weights``);
- ``"nccl"`` (:class:`~dapo_env.learners.engines.nccl_sync.NcclWeightSync`, a GPU learner and a server on other GPUs,
  one machine or several): vLLM's own weight-transfer API. Its control plane is HTTP (vLLM 0.32,
  ``vllm/entrypoints/rl/online/api_router.py``, development mode), its data plane an NCCL broadcast from the
  learner (rank 0) to the server's workers, driven by vLLM's trainer-side ``NCCLTrainerWeightTransferEngine``.

:func:`choose_weight_sync` picks one from what was asked (``--weight-sync {auto,file,nccl}``), where the
learner's weights live and what the server reports about itself (:class:`ServerInfo`, from the worker
extension's ``dapo_describe``): ``auto`` is ``nccl`` when the learner is on CUDA and the server runs on
another GPU with vLLM's NCCL weight transfer configured (``dapo-env serve`` does that on a GPU), ``file``
otherwise. NCCL cannot join two ranks on one GPU: a learner and a server sharing one GPU use ``file``.

Every control call is bounded (``timeout_s``) and fails with one line (:class:`EndpointError`).

Example:
    >>> gpu = ServerInfo(device="cuda", dtype="bfloat16", transfer_backend="nccl")
    >>> choose_weight_sync("auto", learner_device="cuda:0", server=gpu), choose_weight_sync("auto",
    ...     learner_device="cpu", server=gpu)
    ('nccl', 'file')
    >>> control_request("update_weights", {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]]})
    ('POST', '/update_weights', {'update_info': {'names': ['w'], 'dtype_names': ['bfloat16'], 'shapes': [[2]]}})
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from .openai_engine import EndpointConfig, EndpointError, HTTPClient, NoRoute

#: What ``--weight-sync`` accepts.
WEIGHT_SYNCS = ("auto", "file", "nccl")
#: vLLM's ``--weight-transfer-config`` backend the NCCL strategy needs on the server.
NCCL_BACKEND = "nccl"
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class ServerInfo:
    """What a weight-sync server reports about its worker (``dapo_describe``): the device type its weights live
    on (``"cpu"``, ``"cuda"``), their dtype, vLLM's weight-transfer backend (``None``: not configured) and the
    UUID of its GPU (``None`` on CPU)."""

    device: str
    dtype: str
    transfer_backend: str | None = None
    gpu_uuid: str | None = None

    @classmethod
    def from_answer(cls, answer: Any) -> ServerInfo:
        if not isinstance(answer, dict) or not isinstance(answer.get("device"), str):
            raise EndpointError(f"malformed dapo_describe answer {str(answer)[:120]}: restart the server with "
                                "`dapo-env serve` (same dapo-env version as the learner)")
        return cls(device=answer["device"], dtype=str(answer.get("dtype")), transfer_backend=answer.get("transfer_backend"),
                   gpu_uuid=answer.get("gpu_uuid"))


def check_weight_sync(requested: str, *, learner_device: str) -> None:
    """Refuse (one line, ``ValueError``) what cannot work whatever the server: an unknown name, or ``nccl``
    with the learner's weights off CUDA. Called before any server is started or asked."""
    if requested not in WEIGHT_SYNCS:
        raise ValueError(f"weight_sync {requested!r}: choose one of {', '.join(WEIGHT_SYNCS)}")
    if requested == "nccl" and not learner_device.startswith("cuda"):
        raise ValueError(f"--weight-sync nccl broadcasts from the learner's GPU, but the learner is on "
                         f"{learner_device}: use --weight-sync file (or auto)")


def choose_weight_sync(requested: str, *, learner_device: str, server: ServerInfo, learner_gpu: str | None = None,
                       url: str = "the server") -> str:
    """``"file"`` or ``"nccl"`` (see the module docstring); refuses ``nccl`` in one line naming the fix.

    ``learner_gpu``: the UUID of the learner's GPU. NCCL cannot join two ranks on one GPU, so a server whose
    worker shares the learner's GPU (one GPU for both) gets the file path from ``auto`` and a refusal for
    ``nccl``."""
    check_weight_sync(requested, learner_device=learner_device)
    shared = learner_gpu is not None and server.gpu_uuid == learner_gpu
    nccl_ready = server.device == "cuda" and server.transfer_backend == NCCL_BACKEND and not shared
    if requested == "auto":
        return "nccl" if learner_device.startswith("cuda") and nccl_ready else "file"
    if requested == "nccl" and server.device != "cuda":
        raise ValueError(f"--weight-sync nccl needs a server on a GPU, but {url} runs on {server.device}: use "
                         "--weight-sync file")
    if requested == "nccl" and shared:
        raise ValueError(f"--weight-sync nccl: {url} runs on the learner's own GPU ({learner_gpu}) and NCCL cannot "
                         "join two ranks on one GPU: give the server its own GPU, or use --weight-sync file")
    if requested == "nccl" and not nccl_ready:
        raise ValueError(f"--weight-sync nccl: {url} was started without vLLM's NCCL weight transfer (backend "
                         f"{server.transfer_backend}): start it with `dapo-env serve --weight-sync nccl`, or use "
                         "--weight-sync file (same machine only)")
    return requested


def control_request(op: str, payload: Any = None) -> tuple[str, str, Any]:
    """``(method, path, JSON body)`` of one call of vLLM's RL control plane (vLLM 0.32's
    ``entrypoints/rl/online/api_router.py``; bodies are embedded under the parameter's name)."""
    if op == "init_weight_transfer_engine":
        return "POST", "/init_weight_transfer_engine", {"init_info": dict(payload)}
    if op == "update_weights":
        return "POST", "/update_weights", {"update_info": payload}
    if op == "finish_weight_update":
        return "POST", "/finish_weight_update", None if payload is None else {"weight_version": str(payload)}
    if op in ("start_weight_update", "resume", "shutdown_weight_transfer_engine"):
        return "POST", f"/{op}", None
    if op == "pause":  # wait for requests in flight (the engine never pushes mid-generation; a rollout worker might)
        return "POST", "/pause?mode=wait", None
    if op in ("get_world_size", "weight_info"):
        return "GET", f"/{op}", None
    raise ValueError(f"unknown control call {op!r}")


class ServerControl:
    """The control routes of one server (its root URL, without ``/v1``): dapo-env's worker-extension RPCs and
    vLLM's RL routes, each call bounded by ``timeout_s`` and never retried (a push is not idempotent halfway)."""

    def __init__(self, root: str, *, timeout_s: float) -> None:
        self.root = root.rstrip("/")
        self.timeout_s = timeout_s
        self.client = HTTPClient(EndpointConfig(base_url=self.root, model="control", timeout_s=timeout_s, retries=0))

    def call(self, op: str, payload: Any = None) -> Any:
        """One call of :func:`control_request` ``op``; its JSON answer."""
        method, path, body = control_request(op, payload)
        try:
            return self.client.request(method, f"{self.root}{path}", body, retries=0, timeout=self.timeout_s)
        except NoRoute:
            raise EndpointError(f"{self.root} has no {path.split('?')[0]} route: start the server with `dapo-env serve "
                                "--weight-sync nccl` (vLLM's development routes and its NCCL weight transfer)") from None
        except EndpointError as exc:
            raise EndpointError(f"{op} on {self.root} failed: {exc}") from None

    def rpc(self, method: str, *args: str) -> Any:
        """``POST /collective_rpc`` of a worker-extension method (string arguments); the first worker's answer."""
        body = {"method": method, "args": list(args), "timeout": self.timeout_s}
        try:
            answer = self.client.request("POST", f"{self.root}/collective_rpc", body, retries=0, timeout=self.timeout_s)
        except NoRoute:
            raise EndpointError(f"{self.root} has no /collective_rpc route: start the server with `dapo-env "
                                "serve --model PATH` (vLLM's development routes and dapo-env's weight-sync worker "
                                "extension)") from None
        except EndpointError as exc:
            raise EndpointError(f"{method} on {self.root} failed: {exc} (was the server started with "
                                "`dapo-env serve`, which loads the weight-sync worker extension?)") from None
        return answer["results"][0]

    def reset_prefix_cache(self) -> None:
        """Drop cached prompt KV blocks (computed with the old weights)."""
        self.client.request("POST", f"{self.root}/reset_prefix_cache", None, retries=0, timeout=self.timeout_s)

    def describe(self) -> ServerInfo:
        """The server's :class:`ServerInfo` (``dapo_describe``)."""
        return ServerInfo.from_answer(self.rpc("dapo_describe"))


class WeightSync(Protocol):
    """A way to get named tensors (HF ``state_dict`` names) into the server's model; the engine verifies."""

    name: str

    def push(self, tensors: Mapping[str, Any], version: int) -> None: ...

    def close(self) -> None: ...


class FileWeightSync:
    """``"file"``: a safetensors file on this machine (``folder``, e.g. under ``/dev/shm``), loaded by the
    server's worker with the model's own weight loader (``dapo_load_weights``); the file is removed after."""

    name = "file"

    def __init__(self, control: ServerControl, folder: str | Path) -> None:
        self.control = control
        self.folder = Path(folder)

    def push(self, tensors: Mapping[str, Any], version: int) -> None:
        from safetensors.torch import save_file

        on_cpu = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
        if "lm_head.weight" in on_cpu and "model.embed_tokens.weight" in on_cpu and \
                on_cpu["lm_head.weight"].data_ptr() == on_cpu["model.embed_tokens.weight"].data_ptr():
            on_cpu["lm_head.weight"] = on_cpu["lm_head.weight"].clone()  # safetensors refuses shared storage
        path = self.folder / f"push-{version}.safetensors"
        save_file(on_cpu, str(path))
        try:
            self.control.rpc("dapo_load_weights", str(path))
        finally:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Nothing held between pushes."""


def bounded(call: Callable[[], T], *, timeout_s: float, what: str) -> T:
    """``call()`` in a daemon thread, waited for at most ``timeout_s`` seconds: its result, its exception, or
    :class:`EndpointError` (one line) when it has not returned by then. A collective waiting on a peer that
    died would block forever; the thread is left behind (a daemon: it never holds the process open).

    Example:
        >>> bounded(lambda: 6 * 7, timeout_s=1.0, what="a sum")
        42
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread, re-raised there)
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"dapo-{what.split()[0]}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise EndpointError(f"{what} did not finish within {timeout_s:g} s: the server stopped answering or its "
                            "workers never joined the transfer (see the server's log)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def learner_address(root: str) -> str:
    """The address the server's workers reach this machine at (NCCL's rendezvous): ``127.0.0.1`` for a server on
    this machine, else the local address of the route towards the server's host (no packet is sent).

    Example:
        >>> learner_address("http://127.0.0.1:8000"), learner_address("http://localhost:8000")
        ('127.0.0.1', '127.0.0.1')
    """
    parts = urlsplit(root)
    host = parts.hostname or "127.0.0.1"
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, parts.port or 80))
        return str(probe.getsockname()[0])


__all__ = ["NCCL_BACKEND", "WEIGHT_SYNCS", "FileWeightSync", "ServerControl", "ServerInfo", "WeightSync", "bounded",
           "check_weight_sync", "choose_weight_sync", "control_request", "free_port", "learner_address"]
