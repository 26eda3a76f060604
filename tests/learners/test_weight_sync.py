"""Weight-sync selection and its refusals, the control routes' requests, and bounded control calls against a real
local HTTP server that misbehaves on cue (tests/fault_server.py). No GPU is faked: the NCCL path itself is
checked against vLLM's real routes and models in the vLLM stage (test_weight_sync_vllm.py) and measured on a
GPU by benchmarks/bench_learner_gpu.sh."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fault_server import FaultServer

from dapo_env.learners.cli import build_parser, config_from_args
from dapo_env.learners.engines.openai_engine import EndpointError
from dapo_env.learners.engines.server import ServerEngine, vllm_command
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.engines.weight_sync import (
    ServerControl,
    ServerInfo,
    bounded,
    choose_weight_sync,
    control_request,
    learner_address,
)

GPU_NCCL = ServerInfo(device="cuda", dtype="bfloat16", transfer_backend="nccl")
GPU_PLAIN = ServerInfo(device="cuda", dtype="bfloat16")
CPU = ServerInfo(device="cpu", dtype="float32")


@pytest.mark.parametrize("learner, server, expected", [
    ("cuda:0", GPU_NCCL, "nccl"), ("cuda", GPU_NCCL, "nccl"),
    ("cuda:0", GPU_PLAIN, "file"),  # a GPU server without vLLM's NCCL transfer: the file path (same machine)
    ("cuda:0", CPU, "file"), ("cpu", GPU_NCCL, "file"), ("cpu", CPU, "file")])
def test_auto_picks_nccl_only_for_a_cuda_learner_and_an_nccl_gpu_server(learner: str, server: ServerInfo,
                                                                        expected: str) -> None:
    assert choose_weight_sync("auto", learner_device=learner, server=server) == expected


@pytest.mark.parametrize("learner", ["cpu", "cuda:0"])
@pytest.mark.parametrize("server", [GPU_NCCL, GPU_PLAIN, CPU])
def test_file_is_always_honoured(learner: str, server: ServerInfo) -> None:
    assert choose_weight_sync("file", learner_device=learner, server=server) == "file"


@pytest.mark.parametrize("learner, server, words", [
    ("cpu", GPU_NCCL, ["learner is on cpu", "--weight-sync file"]),
    ("cuda:0", CPU, ["needs a server on a GPU", "runs on cpu", "--weight-sync file"]),
    ("cuda:0", GPU_PLAIN, ["without vLLM's NCCL weight transfer", "dapo-env serve --weight-sync nccl",
                           "--weight-sync file"])])
def test_nccl_is_refused_in_one_line_naming_the_fix(learner: str, server: ServerInfo, words: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        choose_weight_sync("nccl", learner_device=learner, server=server, url="http://h:8000")
    message = str(info.value)
    assert "\n" not in message and all(w in message for w in words), message
    assert choose_weight_sync("nccl", learner_device="cuda:1", server=GPU_NCCL) == "nccl"


def test_a_server_on_the_learners_own_gpu_gets_the_file_path() -> None:
    """NCCL cannot join two ranks on one GPU: one GPU for learner and server means file (auto) or a refusal."""
    mine = ServerInfo(device="cuda", dtype="bfloat16", transfer_backend="nccl", gpu_uuid="GPU-1")
    assert choose_weight_sync("auto", learner_device="cuda:0", server=mine, learner_gpu="GPU-1") == "file"
    assert choose_weight_sync("auto", learner_device="cuda:0", server=mine, learner_gpu="GPU-0") == "nccl"
    with pytest.raises(ValueError) as info:
        choose_weight_sync("nccl", learner_device="cuda:0", server=mine, learner_gpu="GPU-1", url="http://h:1")
    assert "own GPU (GPU-1)" in str(info.value) and str(info.value).endswith("or use --weight-sync file")


def test_an_unknown_strategy_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="choose one of auto, file, nccl"):
        choose_weight_sync("ipc", learner_device="cuda", server=GPU_NCCL)


def test_nccl_with_a_cpu_learner_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    """No URL, no vLLM needed: the refusal comes before the engine would start its own server."""
    tok = build_tokenizer()
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"learner is on cpu: use --weight-sync file"):
        ServerEngine(build_tiny_model(tok, seed=0), tok, weight_sync="nccl", log=tmp_path / "never.log")
    assert time.monotonic() - start < 5 and not (tmp_path / "never.log").exists()


def test_control_requests_follow_vllms_routes() -> None:
    """Bodies are embedded under the route parameter's name (vLLM 0.32's api_router: Body(embed=True))."""
    assert control_request("init_weight_transfer_engine", {"world_size": 2}) == (
        "POST", "/init_weight_transfer_engine", {"init_info": {"world_size": 2}})
    assert control_request("finish_weight_update") == ("POST", "/finish_weight_update", None)
    assert control_request("finish_weight_update", 3) == ("POST", "/finish_weight_update", {"weight_version": "3"})
    assert control_request("pause") == ("POST", "/pause?mode=wait", None)
    assert control_request("get_world_size") == ("GET", "/get_world_size", None)
    with pytest.raises(ValueError, match="unknown control call"):
        control_request("reload")


def test_a_missing_route_names_how_to_start_the_server() -> None:
    """A server without vLLM's RL routes (here: one that answers 404) is refused in one line."""
    with FaultServer() as server:
        control = ServerControl(server.url.removesuffix("/v1"), timeout_s=2.0)
        with pytest.raises(EndpointError) as info:
            control.call("get_world_size")
    message = str(info.value)
    assert "no /get_world_size route" in message and "dapo-env serve --weight-sync nccl" in message
    assert "\n" not in message


def test_a_stalled_control_call_fails_in_bounded_time_in_one_line() -> None:
    with FaultServer(rule=lambda body: "stall", stall_s=5.0) as server:
        control = ServerControl(server.url.removesuffix("/v1"), timeout_s=0.4)
        start = time.monotonic()
        with pytest.raises(EndpointError) as info:
            control.call("start_weight_update")
        took = time.monotonic() - start
    assert took < 0.4 + 0.5 and server.requests == 1  # never retried: a push is not idempotent halfway
    assert str(info.value).startswith("start_weight_update on http://127.0.0.1:") and "no answer within 0.4 s" in str(
        info.value)


def test_bounded_returns_raises_or_gives_up_in_time() -> None:
    assert bounded(lambda: "done", timeout_s=1.0, what="a call") == "done"
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 / 0, timeout_s=1.0, what="a call")
    never = threading.Event()  # a collective whose peer died: it never returns
    start = time.monotonic()
    with pytest.raises(EndpointError, match=r"NCCL weight push 3 to h did not finish within 0.3 s"):
        bounded(never.wait, timeout_s=0.3, what="NCCL weight push 3 to h")
    assert time.monotonic() - start < 1.0


def test_the_rendezvous_address_of_a_local_server_is_loopback() -> None:
    assert learner_address("http://127.0.0.1:9") == learner_address("http://localhost:9") == "127.0.0.1"


def test_the_server_command_carries_vllms_weight_transfer_config() -> None:
    cmd = vllm_command("/m", port=1, weight_sync=True, weight_transfer="nccl", gpu_memory_utilization=0.3)
    assert cmd[cmd.index("--weight-transfer-config") + 1] == '{"backend": "nccl"}'
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.3"
    assert "--weight-transfer-config" not in vllm_command("/m", port=1, weight_sync=True)
    with pytest.raises(ValueError, match="weight_sync=True"):
        vllm_command("/m", port=1, weight_transfer="nccl")


def test_train_flags_set_the_engine_options() -> None:
    parser = build_parser()
    cfg, _ = config_from_args(parser.parse_args(["train", "--engine", "vllm-server", "--server-url", "http://h:1/v1",
                                                 "--weight-sync", "nccl"]))
    assert cfg.engine_options == {"server_url": "http://h:1/v1", "weight_sync": "nccl"}
    cfg, _ = config_from_args(parser.parse_args(["train", "--engine", "vllm-server", "--weight-sync", "file"]))
    assert cfg.engine_options == {"weight_sync": "file"}
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--weight-sync", "ipc"])
