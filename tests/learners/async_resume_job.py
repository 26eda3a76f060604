"""A training process for the lossless-resume test: ``python async_resume_job.py OUT_DIR LOG [--resume]``.

Runs the tiny config with ``max_staleness=1`` and a checkpoint after every step, and appends one JSON line
per training step to LOG (fsynced, so a ``kill -9`` loses nothing written): the step, the problem ids of
every generation round the sampler drew for it, and those of the groups it trained on.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trainer_helpers import tiny_config  # noqa: E402

STEPS = 6


def config(out_dir: Path) -> Any:
    return tiny_config(out_dir, max_steps=STEPS, max_staleness=1, checkpoint_every=1, keep_checkpoints=2, eval_every=0,
                       plot_every=0, eval_size=4)


def main(argv: list[str]) -> None:
    from dapo_env.learners.trainer import Trainer

    out_dir, log, resume = Path(argv[0]), Path(argv[1]), "--resume" in argv
    trainer = Trainer(config(out_dir), resume=resume)
    source, sampler = trainer.sampler.source, trainer.sampler
    drawn: list[list[str]] = []
    rollout, sample = source.rollout, sampler.sample

    def logged_rollout(position: Any) -> Any:
        batch = rollout(position)
        drawn.append([str(g.problem_id) for g in batch.groups])
        return batch

    def logged_sample() -> Any:
        drawn.clear()
        batch = sample()
        line = {"step": trainer.step + 1, "drawn": list(drawn), "batch": [str(g.problem_id) for g in batch.groups],
                "resumed": resume}
        with log.open("a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return batch

    source.rollout, sampler.sample = logged_rollout, logged_sample
    trainer.fit()


if __name__ == "__main__":
    main(sys.argv[1:])
