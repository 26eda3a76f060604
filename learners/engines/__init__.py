"""Rollout engines: the protocol (:mod:`.base`, the family's leaf), the registry (:mod:`.registry`), one module
per engine (:mod:`.hf_engine`, :mod:`.vllm_engine`, :mod:`.openai_engine`, :mod:`.server`), what goes in and
out of every engine (:mod:`.engine_io`), and weight sync to servers (:mod:`.weight_sync`, :mod:`.nccl_sync`,
:mod:`.server_sync`).

Example:
    >>> from dapo_env.learners.engines import SamplingParams, engine_names
    >>> SamplingParams(max_response_tokens=8).max_response_tokens, "hf" in engine_names()
    (8, True)
"""

from __future__ import annotations

from .base import RolloutEngine, SamplingParams, TurnEngine, WeightsLike, collect_eos_ids, weights_fingerprint
from .hf_engine import HFEngine
from .registry import ENGINES, engine_names, make_engine, register_engine, resolve_engine_kind

__all__ = [
    "ENGINES",
    "HFEngine",
    "RolloutEngine",
    "SamplingParams",
    "TurnEngine",
    "WeightsLike",
    "collect_eos_ids",
    "engine_names",
    "make_engine",
    "register_engine",
    "resolve_engine_kind",
    "weights_fingerprint",
]
