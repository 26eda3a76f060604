from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from dapo_env.learners.run import checkpoint as ckpt
from dapo_env.learners.metrics import read_metrics, strip_timing
from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
from dapo_env.learners.trainer import Trainer, train

sys.path.insert(0, str(Path(__file__).parent))
from trainer_helpers import tiny_config  # noqa: E402

HERE = Path(__file__).parent


def test_checkpoint_round_trip_and_atomic_layout(tmp_path: Path) -> None:
    tok = build_tokenizer()
    model = build_tiny_model(tok, seed=1)
    rng = ckpt.capture_rng_state()
    for step in (1, 2, 3):
        ckpt.save_checkpoint(tmp_path, step, model=model, tokenizer=tok,
                             trainer_state={"rng": rng, "counter": step * 10}, keep=2)
    (tmp_path / "checkpoints" / "step_000009.tmp").mkdir()  # a half-written checkpoint is ignored
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step_000002", "step_000003"]
    latest = ckpt.latest_checkpoint(tmp_path)
    state = ckpt.load_trainer_state(latest)
    assert state["counter"] == 30 and state["step"] == 3
    other = build_tiny_model(tok, seed=2)
    ckpt.load_model_weights(other, latest)
    for (n, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), n
    torch.manual_seed(123)
    saved = ckpt.capture_rng_state()
    expected = (torch.rand(3), __import__("numpy").random.rand(), __import__("random").random())
    ckpt.restore_rng_state(saved)
    again = (torch.rand(3), __import__("numpy").random.rand(), __import__("random").random())
    assert torch.equal(expected[0], again[0]) and expected[1:] == again[1:]

def test_trainer_state_round_trip(tmp_path: Path) -> None:
    first = Trainer(tiny_config(tmp_path, max_steps=1))
    first.fit()
    second = Trainer(tiny_config(tmp_path, max_steps=1), resume=True)
    assert second.step == 1 and second.optimizer_steps == first.optimizer_steps
    for a, b in zip(first.model.parameters(), second.model.parameters()):
        assert torch.equal(a, b)
    assert second.sampler.state_dict() == first.sampler.state_dict()
    s1, s2 = first.optimizer.state_dict()["state"], second.optimizer.state_dict()["state"]
    assert all(torch.equal(s1[k]["exp_avg"], s2[k]["exp_avg"]) for k in s1)


CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {here!r})
    from trainer_helpers import tiny_config
    from dapo_env.learners import metrics
    from dapo_env.learners.trainer import train

    write = metrics.MetricsLog.write
    def write_then_die(self, record):
        write(self, record)
        if record.get("step") == 3:  # after the step-2 checkpoint and one more logged step
            os.kill(os.getpid(), signal.SIGKILL)
    metrics.MetricsLog.write = write_then_die
    train(tiny_config({out!r}, max_steps=4, checkpoint_every=2, eval_every=2))
""")


def test_resume_after_kill_reproduces_the_metrics_stream(tmp_path: Path) -> None:
    cfg = dict(max_steps=4, checkpoint_every=2, eval_every=2)
    full = train(tiny_config(tmp_path / "full", **cfg))
    script = CHILD.format(here=str(HERE), out=str(tmp_path / "killed"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)])}  # this checkout first
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    run_dir = tmp_path / "killed" / "t"
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl")][-1] == 3
    resumed = train(tiny_config(tmp_path / "killed", **cfg), resume=True)
    assert [r["step"] for r in resumed.metrics] == [0, 1, 2, 3, 4]
    assert strip_timing(resumed.metrics) == strip_timing(full.metrics)
