"""Shared helpers for the trainer tests: a tiny fast config and toy verifiers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dapo_env.learners.config import TrainConfig, preset
from dapo_env.types import VerifyResult


def even_length(response: str, reference: Any) -> bool:
    """A toy verifier: right when the response has an even number of characters (about half are)."""
    return len(response) % 2 == 0


def starts_with_digit(response: str, reference: Any) -> VerifyResult:
    ok = response[:1].isdigit()
    return VerifyResult(ok, 1.0 if ok else 0.0, response[:1] or None, "toy")


def tiny_config(out_dir: Path, **overrides: Any) -> TrainConfig:
    """Seconds-fast settings: a 64-wide model, 4 prompts x 4 samples, 8-token responses."""
    base: dict[str, Any] = dict(
        max_steps=2, warmstart_steps=0, batch_size=4, group_size=4, mini_batch_size=2, micro_batch_size=8,
        tiny_hidden_size=64, tiny_heads=2, tiny_layers=1, eval_size=8, eval_every=1,
        max_response_tokens=8, overlong_cache_length=2, out_dir=str(out_dir), name="t", progress=False,
        num_threads=1, verifier=f"{__name__}:even_length", checkpoint_every=1, plot_every=1,
    )
    base.update(overrides)
    return preset("tiny", **base)
