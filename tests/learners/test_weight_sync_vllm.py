"""``--weight-sync nccl`` against the real installed vLLM (the CPU build, in CI's vLLM stage), without faking a
GPU: the server command parses with vLLM's own ``serve`` parser; every control call is a route of vLLM's real RL
router with the right method, and its body passes that router's validation on a real FastAPI app while a
misnamed body is refused; the rendezvous and update payloads vLLM's trainer engine builds from our init info and
our tensor source parse as the worker-side models; a real ``vllm serve`` started with the NCCL weight-transfer
config reports it, answers ``/get_world_size``, still takes (verified) file pushes, and a CPU learner's
``nccl`` request and a learner of another dtype are refused in one line. The NCCL broadcast itself runs only on a GPU
(benchmarks/bench_learner_gpu.sh).

Skipped where vLLM is not importable (failing under ``DAPO_REQUIRE_VLLM=1``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from optional_extras import vllm_marks

from dapo_env.learners.engines import weights_fingerprint
from dapo_env.learners.engines.server import ServerEngine, VLLMServer, vllm_command
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.engines.weight_sync import ServerControl, ServerInfo, control_request

pytestmark = vllm_marks("the NCCL weight-sync tests")

#: Every call NcclWeightSync makes, with a body of the shape it sends.
CALLS = [("get_world_size", None), ("init_weight_transfer_engine", {"master_address": "127.0.0.1"}),
         ("pause", None), ("start_weight_update", None),
         ("update_weights", {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2, 2]]}),
         ("finish_weight_update", None), ("finish_weight_update", 7), ("resume", None),
         ("shutdown_weight_transfer_engine", None), ("weight_info", None)]


@pytest.fixture(scope="module")
def rl_app():
    """vLLM's real RL router on a FastAPI app with no engine behind it: a body that passes validation reaches the
    handler (HTTP 500: no engine client), one that does not is refused first (HTTP 422)."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from vllm.entrypoints.rl.online.api_router import router

    app = FastAPI()
    app.include_router(router)
    return router, TestClient(app, raise_server_exceptions=False)


def _status(client, op: str, payload) -> int:
    method, path, body = control_request(op, payload)
    return client.request(method, path, json=body).status_code


def test_the_server_command_parses_with_vllms_serve_parser() -> None:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cmd = vllm_command("/models/tiny", port=8011, served_model="tiny", weight_sync=True, weight_transfer="nccl",
                       gpu_memory_utilization=0.3)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(cmd[3:])
    validate_parsed_serve_args(args)
    assert args.weight_transfer_config.backend == "nccl" and args.gpu_memory_utilization == 0.3
    assert args.worker_extension_cls == "dapo_env.learners.engines.server_sync.WeightSyncExtension"


@pytest.mark.parametrize("op, payload", CALLS)
def test_every_control_call_is_a_route_of_vllms_rl_router(rl_app, op: str, payload) -> None:
    router, client = rl_app
    method, path, _ = control_request(op, payload)
    routes = {r.path: r.methods for r in router.routes}
    assert method in routes[path.split("?")[0]]
    assert _status(client, op, payload) == 500  # validated, then the handler found no engine


def test_a_misnamed_body_or_pause_mode_is_refused_by_the_router(rl_app) -> None:
    """The check above can fail: a body not embedded under the parameter's name does not validate."""
    _, client = rl_app
    assert client.post("/update_weights", json={"names": ["w"]}).status_code == 422
    assert client.post("/init_weight_transfer_engine", json={"master_address": "x"}).status_code == 422
    assert client.post("/pause?mode=later").status_code == 422


def test_the_payloads_vllm_builds_from_ours_parse_as_the_workers(rl_app) -> None:
    """The init payload vLLM's trainer engine derives from our init info, and the update info it derives from
    our tensor source's metadata, are what the worker's engine parses; both pass the routes."""
    from vllm.distributed.weight_transfer.nccl_common import NCCLWeightTransferInitInfo, worker_init_payload
    from vllm.distributed.weight_transfer.nccl_engine import (
        NCCLTrainerWeightTransferEngine,
        NCCLWeightTransferUpdateInfo,
    )

    from dapo_env.learners.engines.nccl_sync import RoutesClient, TensorSource, trainer_init_info

    _, client = rl_app
    info = trainer_init_info("127.0.0.1", 29555, 2)
    worker = NCCLWeightTransferInitInfo(master_address=info.master_address, master_port=info.master_port,
                                        rank_offset=1, world_size=info.world_size, packed=info.packed,
                                        packed_buffer_size_bytes=info.packed_buffer_size_bytes,
                                        packed_num_buffers=info.packed_num_buffers)
    payload = worker_init_payload(worker)
    assert NCCLWeightTransferInitInfo(**payload).world_size == 2 and payload["packed"] is True
    assert _status(client, "init_weight_transfer_engine", payload) == 500

    tok = build_tokenizer()
    model = build_tiny_model(tok, seed=0).to(torch.bfloat16)
    source = TensorSource()
    source.tensors = dict(model.state_dict())
    groups = list(source.iter_groups())  # vLLM's own check that iteration follows metadata(), name by name
    assert [n for names, _ in groups for n in names] == list(source.tensors)
    meta = source.metadata()
    update = NCCLWeightTransferUpdateInfo(names=[m.name for m in meta],
                                          dtype_names=[str(m.dtype).split(".")[-1] for m in meta],
                                          shapes=[list(m.shape) for m in meta])
    assert set(update.dtype_names) == {"bfloat16"}
    assert _status(client, "update_weights", asdict(update)) == 500
    # vLLM's engine on a non-sending rank replays the source exactly as the sender would (no NCCL, no requests)
    NCCLTrainerWeightTransferEngine(client=RoutesClient(ServerControl("http://127.0.0.1:9", timeout_s=1.0)),
                                    source=source, is_sender=False).send_weights()


def test_cpu_tensors_are_refused_for_nccl_in_one_line() -> None:
    from dapo_env.learners.engines.nccl_sync import wire_tensors

    with pytest.raises(ValueError, match=r"one CUDA device; the tensors are on \['cpu'\]: use --weight-sync file"):
        wire_tensors({"w": torch.zeros(2)})


def test_a_server_with_vllms_nccl_transfer_reports_it_and_still_takes_file_pushes(tmp_path: Path) -> None:
    """A real ``vllm serve`` (CPU) with ``--weight-transfer-config '{"backend": "nccl"}'``: the worker extension
    reports the backend; the learner here is on CPU, so auto picks the file path, whose pushes are verified; an
    explicit nccl request is refused before any transfer."""
    tok = build_tokenizer()
    learner = build_tiny_model(tok, seed=0)
    folder = tmp_path / "served"
    learner.save_pretrained(folder)
    tok.save_pretrained(folder)
    with VLLMServer(folder, served_model="tiny", weight_sync=True, weight_transfer="nccl",
                    log=tmp_path / "server.log") as server:
        control = ServerControl(server.url.removesuffix("/v1"), timeout_s=30.0)
        assert control.describe() == ServerInfo(device="cpu", dtype="float32", transfer_backend="nccl")
        assert control.call("get_world_size") == {"world_size": 1}  # the learner would be rank 0 of 2
        with ServerEngine(learner, tok, server_url=server.url) as engine:
            assert engine.weight_sync == "file"
            with torch.no_grad():
                for p in learner.parameters():
                    p.add_(torch.randn_like(p) * 0.05)
            engine.load_weights(learner)  # verified inside; checked once more here
            assert engine.fingerprint() == weights_fingerprint(learner.state_dict())
        with pytest.raises(ValueError, match="learner is on cpu: use --weight-sync file"):
            ServerEngine(learner, tok, server_url=server.url, weight_sync="nccl")
        with pytest.raises(ValueError, match=r"holds float32 weights and the learner bfloat16: .* --dtype bfloat16$"):
            ServerEngine(build_tiny_model(tok, seed=0).to(torch.bfloat16), tok, server_url=server.url)
