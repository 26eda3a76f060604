"""verify_batch(backend="ray") / RayVerifierPool: the process pool's guarantees on a local Ray instance."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pytest
from optional_extras import require

from dapo_env.types import CodeTests, VerifyResult
from dapo_env.verifiers import verify_batch


def exact(response: str, reference: str) -> VerifyResult:
    ok = response == reference
    return VerifyResult(ok, float(ok), response, "equal" if ok else "different")


def hostile(response: str, reference: str) -> VerifyResult:
    if response == "hang":
        time.sleep(3600)
    if response == "crash":
        os._exit(3)
    if response == "boom":
        raise ZeroDivisionError("boom")
    return exact(response, reference)


def test_missing_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from dapo_env.verifiers.ray_backend import RayVerifierPool

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ImportError, match=r'pip install "ray>=2.40"'):
        RayVerifierPool(1)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[object]:
    ray = require("ray", "verify_batch(backend=\"ray\")")
    ray.init(num_cpus=2, object_store_memory=int(1e9), include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(ray_local: object) -> Iterator[object]:
    from dapo_env.verifiers.ray_backend import RayVerifierPool

    with RayVerifierPool(2, timeout_s=3.0, cpus_per_worker=0.5) as p:  # leaves a CPU for the one-shot test
        yield p


def test_order_and_pool_reuse(pool) -> None:
    responses = [str(i) for i in range(60)]
    references = [str(i if i % 3 else -1) for i in range(60)]
    out = verify_batch(exact, responses, references, backend="ray", pool=pool)
    assert [r.correct for r in out] == [bool(i % 3) for i in range(60)]
    assert [r.extracted for r in out] == responses
    assert pool.replaced == 0


def test_hang_crash_and_exception_cost_one_item_each(pool) -> None:
    responses = ["a", "hang", "b", "crash", "boom", "c", "d"]
    references = ["a", "hang", "b", "crash", "boom", "c", "x"]
    before = pool.replaced
    start = time.monotonic()
    out = pool.map(hostile, responses, references)
    assert [r.reason for r in out] == ["equal", "timeout", "equal", "worker_died", "error:ZeroDivisionError",
                                       "equal", "different"]
    assert [r.correct for r in out] == [True, False, True, False, False, True, False]
    assert pool.replaced - before == 2 and time.monotonic() - start < 45
    again = pool.map(exact, ["z", "y"], ["z", "z"])  # the replacements serve the next batch
    assert [r.correct for r in again] == [True, False]


def test_one_shot_backend_and_code_sandbox_inside_actors(ray_local: object) -> None:
    from dapo_env.verifiers import CodeVerifier, SandboxLimits

    verifier = CodeVerifier(limits=SandboxLimits(wall_s=2.0))
    tests = CodeTests(tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0"))
    marker = f"/tmp/dapo-ray-escape-{os.getpid()}-{time.monotonic_ns()}"  # a write the sandbox must contain
    responses = ["```python\ndef add(a, b):\n    return a + b\n```",
                 "```python\ndef add(a, b):\n    return a - b\n```",
                 "```python\nwhile True:\n    pass\n```",
                 f"```python\ndef add(a, b):\n    open({marker!r}, 'w').write('x')\n    return a + b\n```"]
    out = verify_batch(verifier, responses, [tests] * 4, backend="ray", workers=2, timeout=20.0)
    assert out[0].reason == "passed:2/2" and not out[1].correct and not out[2].correct
    assert not os.path.exists(marker)  # the candidate's /tmp is a private tmpfs inside the actor too
    local = [verifier(r, tests) for r in responses]
    assert [r.reason for r in out] == [r.reason for r in local]


def test_ray_pool_rejects_a_process_pool(ray_local: object) -> None:
    from dapo_env.verifiers import VerifierPool

    with VerifierPool(0) as local, pytest.raises(ValueError, match="RayVerifierPool"):
        verify_batch(exact, ["a"], ["a"], backend="ray", pool=local)
