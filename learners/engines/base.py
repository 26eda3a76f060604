"""Rollout engines: the protocol every engine implements and its sampling settings.

:class:`RolloutEngine` is the one protocol the trainer codes against (single-turn sampling, multi-turn
turns, weight pushes and their check). :class:`~dapo_env.learners.hf_engine.HFEngine` implements it with a
plain ``transformers`` model on CPU or GPU (:mod:`~dapo_env.learners.hf_engine`), and
:class:`~dapo_env.learners.vllm_engine.VLLMEngine` (optional extra) with vLLM. What goes into and comes out
of an engine (prompt encoding, turn budgets, EOS ids, ids -> ``Completion``) is written once for both in
:mod:`~dapo_env.learners.engine_io`.

Conventions every engine follows:
- ``generate(prompts, n, sampling)`` returns one list per prompt, each with ``n`` :class:`Completion`.
- A response ends at the first token that is ANY of the EOS ids (:func:`~.engine_io.collect_eos_ids`); that EOS
  token is part of ``token_ids``/``logprobs``/``num_tokens`` (so the learner trains the model to stop)
  but not of ``text``. ``finish_reason`` is ``"length"`` only when ``max_response_tokens`` tokens were produced
  without an EOS.
- ``logprobs[t]`` is ``log softmax(logits_t / temperature)[token_t]`` in fp32: the temperature-scaled
  policy *before* top-k/top-p truncation (the policy the learner trains; vLLM reports the same with
  ``logprobs_mode="processed_logprobs"`` minus truncation). With ``temperature=0`` (greedy) it is taken
  at temperature 1.
- Prompts are tokenised as given (``add_special_tokens`` as the engine was built) and never truncated:
  a prompt that does not fit the context with ``max_response_tokens`` new tokens raises ``ValueError``.
- Every :class:`Completion` carries ``weights_version``: the engine's ``weights_version`` when it sampled.

This module is the family's leaf: it imports no engine. Engines are built by name with
:func:`~dapo_env.learners.engines.registry.make_engine` from the one registry (:mod:`.registry`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


from dapo_env.types import Completion

from .engine_io import WeightsLike, collect_eos_ids, weights_fingerprint


@dataclass(frozen=True, kw_only=True, slots=True)
class SamplingParams:
    """How to sample responses.

    Attributes:
        temperature: divides the logits; ``0`` means greedy decoding.
        top_p: nucleus sampling mass in ``(0, 1]``; ``1.0`` disables it.
        top_k: keep the ``top_k`` most likely tokens; ``None`` or ``0`` disables it.
        max_response_tokens: the most new tokens per response (the EOS token counts).
        seed: seeds a local ``torch.Generator`` for the whole call; ``None`` draws a fresh seed.

    Example:
        >>> SamplingParams(temperature=1.0, max_response_tokens=32, seed=0).top_p
        1.0
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_response_tokens: int = 256
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1 disables it), got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 or None (0/None disable it), got {self.top_k}")
        if self.max_response_tokens < 1:
            raise ValueError(f"max_response_tokens must be >= 1, got {self.max_response_tokens}")


@runtime_checkable
class RolloutEngine(Protocol):
    """What the trainer (and evaluation) need from an engine; every engine implements all of it.

    Single-turn: ``generate(prompts, n, sampling)``. Multi-turn: ``generate_turns(requests, sampling)``
    answers one :class:`~dapo_env.multiturn.TurnRequest` per live episode with its next turn, sampled after
    exactly the request's ``context_token_ids``; ``release()`` drops whatever the engine kept for the
    episodes (after a rollout; a no-op for an engine that keeps nothing); ``turn_stats`` counts prefilled and
    reused context tokens. Weights: ``weights_version`` counts :meth:`load_weights` calls; ``fingerprint()``
    summarises the current weights (compare with :func:`weights_fingerprint` of the learner's parameters after
    a push); ``fingerprint(names)`` summarises only the named tensors (a LoRA run pushes and checks only the
    adapter).
    """

    @property
    def weights_version(self) -> int: ...

    def generate(
        self, prompts: list[str], n: int, sampling: SamplingParams
    ) -> list[list[Completion]]: ...

    def generate_turns(self, requests: Sequence[Any], sampling: SamplingParams) -> list[Completion]: ...

    @property
    def turn_stats(self) -> dict[str, int]: ...

    def release(self) -> None: ...

    def load_weights(self, weights: WeightsLike) -> None: ...

    def fingerprint(self, names: Iterable[str] | None = None) -> str: ...


#: The older name of the multi-turn part of :class:`RolloutEngine`, now one protocol (kept for imports).
TurnEngine = RolloutEngine


__all__ = ["RolloutEngine", "SamplingParams", "TurnEngine", "WeightsLike", "collect_eos_ids",
           "weights_fingerprint"]
