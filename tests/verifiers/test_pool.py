"""VerifierPool / verify_batch: order, hangs, crashes, exceptions, reuse, clean shutdown."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dapo_env.types import VerifyResult
from dapo_env.verifiers import VerifierPool, verify_batch
from dapo_env.verifiers.pool import register_backend


def exact(response: str, reference: str) -> VerifyResult:
    ok = response == reference
    return VerifyResult(ok, float(ok), response, "equal" if ok else "different")


def sleepy(response: str, reference: str) -> VerifyResult:
    if response == "hang":
        time.sleep(3600)
    return exact(response, reference)


def crashy(response: str, reference: str) -> VerifyResult:
    if response == "crash":
        os._exit(3)
    return exact(response, reference)


def raising(response: str, reference: str) -> VerifyResult:
    if response == "boom":
        raise ZeroDivisionError("boom")
    if response == "bad":
        return "not a VerifyResult"  # type: ignore[return-value]
    return exact(response, reference)


def exiting(response: str, reference: str) -> VerifyResult:
    if response == "exit":
        raise SystemExit(0)
    if response == "interrupt":
        raise KeyboardInterrupt
    return exact(response, reference)


def pid_of_worker(response: str, reference: str) -> VerifyResult:
    return VerifyResult(True, 1.0, str(os.getpid()), "pid")


@dataclass(frozen=True)
class Prefix:
    """A picklable class-instance verifier with state."""

    prefix: str

    def __call__(self, response: str, reference: str) -> VerifyResult:
        ok = response == self.prefix + reference
        return VerifyResult(ok, float(ok), response, "prefix")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); count it as gone
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def pool() -> VerifierPool:
    with VerifierPool(2, timeout_s=1.5) as p:
        yield p


def test_order_preserved_and_pool_reused(pool: VerifierPool) -> None:
    responses = [str(i) for i in range(500)]
    references = [str(i if i % 3 else -1) for i in range(500)]
    out = pool.map(exact, responses, references)
    assert [r.correct for r in out] == [bool(i % 3) for i in range(500)]
    assert [r.extracted for r in out] == responses
    pids = pool.pids()
    again = pool.map(exact, ["x"], ["x"])
    assert again[0].correct and pool.pids() == pids  # same workers serve the next call


def test_class_instance_verifier(pool: VerifierPool) -> None:
    out = pool.map(Prefix("ans:"), ["ans:1", "1", "ans:2"], ["1", "1", "3"])
    assert [r.correct for r in out] == [True, False, False]


def test_exceptions_become_error_results(pool: VerifierPool) -> None:
    out = pool.map(raising, ["ok", "boom", "bad", "ok"], ["ok", "ok", "ok", "no"])
    assert [r.reason for r in out] == ["equal", "error:ZeroDivisionError", "error:bad_return:str", "different"]
    assert not any(r.correct for r in out[1:])


@pytest.mark.parametrize("backend", ["process", "inline"])
def test_system_exit_and_keyboard_interrupt_are_error_results(backend: str) -> None:
    out = verify_batch(exiting, ["ok", "exit", "interrupt", "ok"], ["ok"] * 4, workers=1, backend=backend)
    assert [r.reason for r in out] == ["equal", "error:SystemExit", "error:KeyboardInterrupt", "equal"]


def test_system_exit_in_a_persistent_pool_keeps_its_worker(pool: VerifierPool) -> None:
    pids = pool.pids()
    out = pool.map(exiting, ["exit", "interrupt", "ok"], ["ok"] * 3)
    assert [r.reason for r in out] == ["error:SystemExit", "error:KeyboardInterrupt", "equal"]
    assert pool.pids() == pids and pool.replaced == 0


def test_a_real_ctrl_c_still_stops_an_inline_batch() -> None:
    def slow(response: str, reference: str) -> VerifyResult:
        time.sleep(0.2)
        return exact(response, reference)

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            verify_batch(slow, ["a"] * 50, ["a"] * 50, backend="inline")
    finally:
        timer.cancel()


def test_hanging_item_times_out_and_rest_complete() -> None:
    with VerifierPool(2, timeout_s=0.5, chunk_size=4) as pool:
        responses = ["a", "b", "hang", "c", "d", "e", "f", "g"]
        start = time.monotonic()
        out = pool.map(sleepy, responses, ["a", "b", "hang", "c", "d", "e", "f", "x"])
        elapsed = time.monotonic() - start
        assert out[2] == VerifyResult(False, 0.0, None, "timeout")
        assert [r.correct for i, r in enumerate(out) if i != 2] == [True] * 6 + [False]
        assert elapsed < 20
        assert pool.replaced == 1
        # the replacement works, and the pool still enforces the limit
        assert [r.correct for r in pool.map(sleepy, ["z", "hang"], ["z", "hang"])] == [True, False]


def test_crashing_worker_costs_one_item() -> None:
    with VerifierPool(2, timeout_s=5.0, chunk_size=3) as pool:
        responses = ["a", "crash", "b", "c", "d", "crash", "e"]
        out = pool.map(crashy, responses, ["a", "crash", "b", "c", "d", "crash", "e"])
        assert [r.reason for r in out] == [
            "equal", "worker_died", "equal", "equal", "equal", "worker_died", "equal"
        ]
        assert pool.replaced == 2


def test_close_leaves_no_processes() -> None:
    pool = VerifierPool(2, timeout_s=0.5)
    pool.map(sleepy, ["hang", "a"], ["hang", "a"])  # forces one kill + replacement too
    pids = pool.pids()
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    pool.close()
    pool.close()  # idempotent
    time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    with pytest.raises(RuntimeError, match="closed"):
        pool.map(exact, ["a"], ["a"])


def test_workers_are_not_daemonic(pool: VerifierPool) -> None:
    assert all(not slot.process.daemon for slot in pool._slots)


def test_inline_workers_zero_runs_in_caller() -> None:
    with VerifierPool(0) as pool:
        out = pool.map(pid_of_worker, ["a"], ["a"])
    assert out[0].extracted == str(os.getpid())
    out = verify_batch(pid_of_worker, ["a"], ["a"], workers=0)
    assert out[0].extracted == str(os.getpid())


def test_verify_batch_backends(pool: VerifierPool) -> None:
    out = verify_batch(exact, ["a", "b"], ["a", "a"], workers=1, timeout=2.0)
    assert [r.correct for r in out] == [True, False]
    assert verify_batch(exact, ["a", "b"], ["a", "a"], backend="inline") == out
    assert verify_batch(exact, ["a", "b"], ["a", "a"], pool=pool) == out
    with pytest.raises(ValueError, match=r"valid: \['inline', 'process'"):
        verify_batch(exact, ["a"], ["a"], backend="nope")
    with pytest.raises(ValueError, match="same length"):
        verify_batch(exact, ["a"], [], backend="inline")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("inline", lambda *a, **k: [])


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="workers"):
        VerifierPool(-1)
    with pytest.raises(ValueError, match="timeout_s"):
        VerifierPool(0, timeout_s=0)
    with pytest.raises(ValueError, match="start_method"):
        VerifierPool(0, start_method="thread")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.text(max_size=8), st.booleans()), max_size=60), st.integers(1, 7))
def test_order_and_length_invariants(pool: VerifierPool, items: list[tuple[str, bool]], chunk: int) -> None:
    responses = [text for text, _ in items]
    references = [text if same else text + "!" for text, same in items]
    pool.chunk_size = chunk
    try:
        out = pool.map(exact, responses, references)
    finally:
        pool.chunk_size = None
    assert len(out) == len(items)
    assert [r.correct for r in out] == [same for _, same in items]
    assert [r.extracted for r in out] == responses


class _ExplodingSequence(list):
    """A response list whose item 40 cannot be read: map() fails half-way through dispatch."""

    def __getitem__(self, index):  # type: ignore[override]
        if index == 40:
            raise KeyboardInterrupt
        return super().__getitem__(index)


def test_interrupted_map_leaves_no_stale_results(pool: VerifierPool) -> None:
    items = [str(i) for i in range(80)]
    with pytest.raises(KeyboardInterrupt):
        pool.map(sleepy, _ExplodingSequence(items), items)
    fresh = [f"x{i}" for i in range(80)]
    out = pool.map(exact, fresh, fresh)
    assert [r.extracted for r in out] == fresh and all(r.correct for r in out)
