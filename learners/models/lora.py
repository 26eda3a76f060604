"""LoRA adapters (Hu et al. 2021) on a causal LM through ``peft``: add, read out, save, load, merge.

The adapter is injected INTO the model object (``peft``'s functional API, no ``PeftModel`` wrapper), so
the model keeps its class, its ``forward`` and its identity: the trainer, the optimizer and the HF engine
use it exactly as they use a fully fine-tuned model. Only the adapter's ``lora_A``/``lora_B`` tensors
require gradients; each targeted linear layer computes ``W x + (alpha / r) * B A x``.

What moves and what is stored is the adapter alone: :func:`adapter_state_dict` (the tensors a weight push
sends), :func:`save_adapter` / :func:`load_adapter` (``peft``'s on-disk format: ``adapter_config.json`` +
``adapter_model.safetensors``, readable by ``peft.PeftModel.from_pretrained`` and by vLLM's
``LoRARequest``). :func:`merged_state_dict` / :func:`merged_model` fold ``B A`` into the base weights for
export; :func:`base_state_dict` is the frozen base under its original names.

``peft`` is an optional extra (``pip install 'dapo-env[lora]'``), imported when an adapter is added or
read; importing this module needs only torch.

Example:
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> tok = build_tokenizer(); model = build_tiny_model(tok, hidden_size=64, layers=1, heads=2)
    >>> model = add_lora(model, LoraSettings(rank=4))
    >>> lora_settings(model).target_modules
    ('down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj')
    >>> sorted({p.requires_grad for n, p in model.named_parameters() if "lora_" not in n})
    [False]
    >>> len(adapter_state_dict(model))  # lora_A and lora_B of 7 projections in 1 layer
    14
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

INSTALL_HINT = "LoRA needs peft: pip install 'dapo-env[lora]' (or pip install 'peft>=0.13')"

#: The adapter's name inside the model (peft's default); one adapter per model.
ADAPTER = "default"

#: peft's file names inside an adapter folder.
CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"

#: The prefix peft's files put before the model's own parameter names.
FILE_PREFIX = "base_model.model."

_LLAMA_STYLE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: Default LoRA targets per ``config.model_type``: the attention and MLP projections. Other architectures
#: fall back to ``"all-linear"`` (every linear layer but the output head).
DEFAULT_TARGETS: dict[str, tuple[str, ...]] = {
    **{kind: _LLAMA_STYLE for kind in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
                                        "olmo", "olmo2", "granite", "smollm3", "cohere", "deepseek_v2")},
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
    "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
}


def _peft() -> ModuleType:
    try:
        import peft
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} (import failed: {err})") from err
    return peft


@dataclass(frozen=True, kw_only=True)
class LoraSettings:
    """One LoRA adapter's shape.

    Attributes:
        rank: ``r``, the inner dimension of ``B A`` (>= 1).
        alpha: the update is scaled by ``alpha / rank``. The default keeps ``alpha`` fixed when the rank
            changes (with ``B`` initialised to zero, the first updates then have the same size at every
            rank, so a learning rate found at one rank carries over).
        dropout: dropout on the adapter's input while training (off during generation).
        target_modules: module names (the last part of the dotted name, e.g. ``"q_proj"``) that get an
            adapter, or ``("all-linear",)`` (every linear layer but the output head); ``None`` picks
            :data:`DEFAULT_TARGETS` for the model's architecture.

    Example:
        >>> s = LoraSettings(rank=8)
        >>> s.alpha / s.rank
        4.0
        >>> LoraSettings(rank=0)
        Traceback (most recent call last):
        ...
        ValueError: LoraSettings.rank must be an integer >= 1 (rank 0 means full fine-tuning: add no adapter), got 0
    """

    rank: int
    alpha: float = 32.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError("LoraSettings.rank must be an integer >= 1 (rank 0 means full fine-tuning: add no "
                             f"adapter), got {self.rank!r}")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not self.alpha > 0:
            raise ValueError(f"LoraSettings.alpha must be a number > 0 (the scale is alpha / rank), got {self.alpha!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ValueError(f"LoraSettings.dropout must be in [0, 1), got {self.dropout!r}")
        if self.target_modules is not None:
            targets = (self.target_modules,) if isinstance(self.target_modules, str) else tuple(self.target_modules)
            if not targets or not all(isinstance(t, str) and t for t in targets):
                raise ValueError("LoraSettings.target_modules must be module names such as ('q_proj', 'v_proj'), "
                                 f"('all-linear',) or None for the architecture's default, got {self.target_modules!r}")
            object.__setattr__(self, "target_modules", targets)

    @property
    def scaling(self) -> float:
        """``alpha / rank``, the factor on ``B A``."""
        return float(self.alpha) / self.rank


def default_target_modules(model: torch.nn.Module) -> tuple[str, ...]:
    """The architecture's attention and MLP projections (:data:`DEFAULT_TARGETS`), or ``("all-linear",)``.

    Example:
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> default_target_modules(build_tiny_model(build_tokenizer()))[:3]
        ('q_proj', 'k_proj', 'v_proj')
    """
    kind = getattr(getattr(model, "config", None), "model_type", None)
    return DEFAULT_TARGETS.get(str(kind), ("all-linear",))


def _linear_names(model: torch.nn.Module) -> set[str]:
    """Last name parts of the model's linear layers, without the output head's (``all-linear``'s meaning)."""
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    from transformers.pytorch_utils import Conv1D  # GPT-2's linear layers

    return {name.rpartition(".")[2] for name, module in model.named_modules()
            if isinstance(module, (torch.nn.Linear, Conv1D)) and module is not head}


def _lora_layers(model: torch.nn.Module) -> list[tuple[str, Any]]:
    """``(name, layer)`` of every module that carries the adapter."""
    from peft.tuners.lora import LoraLayer

    return [(name, module) for name, module in model.named_modules() if isinstance(module, LoraLayer)]


def has_lora(model: Any) -> bool:
    """Whether ``model`` carries a LoRA adapter added by :func:`add_lora` or :func:`load_lora_model`
    (no peft import: a model without one answers ``False`` even where peft is not installed)."""
    config = getattr(model, "peft_config", None)
    return isinstance(config, Mapping) and ADAPTER in config


def add_lora(model: torch.nn.Module, settings: LoraSettings) -> torch.nn.Module:
    """Inject a fresh adapter into ``model`` in place and freeze everything else; returns ``model``.

    ``B`` starts at zero, so the model's outputs are unchanged until the adapter trains.

    Raises:
        ValueError: ``model`` already carries an adapter, or no module matches ``target_modules`` (the
            message lists the model's linear module names).
    """
    peft = _peft()
    if has_lora(model):
        raise ValueError("this model already carries a LoRA adapter; add_lora needs the plain base model")
    targets = settings.target_modules or default_target_modules(model)
    available = _linear_names(model)
    if targets == ("all-linear",):
        targets = tuple(sorted(available))
    missing = sorted(set(targets) - available)
    if missing or not targets:
        raise ValueError(f"LoRA target modules {missing} are not linear layers of this {type(model).__name__}; "
                         f"choose from {sorted(available)} or 'all-linear'")
    config = peft.LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout, bias="none",
                             target_modules=list(targets))
    peft.inject_adapter_in_model(config, model, adapter_name=ADAPTER)
    for name, param in model.named_parameters():
        param.requires_grad_(".lora_" in name)
    return model


def lora_settings(model: Any) -> LoraSettings:
    """The :class:`LoraSettings` of the adapter ``model`` carries (targets as resolved, sorted)."""
    if not has_lora(model):
        raise ValueError("this model carries no LoRA adapter (add one with add_lora)")
    config = model.peft_config[ADAPTER]
    return LoraSettings(rank=int(config.r), alpha=float(config.lora_alpha), dropout=float(config.lora_dropout),
                        target_modules=tuple(sorted(config.target_modules)))


def adapter_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapter's tensors under ``model.state_dict()`` names (views, no copies): what a weight push sends.

    Example:
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> m = add_lora(build_tiny_model(build_tokenizer(), hidden_size=64, layers=1, heads=2),
        ...              LoraSettings(rank=2, target_modules=("q_proj",)))
        >>> {k: tuple(v.shape) for k, v in adapter_state_dict(m).items()}
        {'model.layers.0.self_attn.q_proj.lora_A.default.weight': (2, 64), 'model.layers.0.self_attn.q_proj.lora_B.default.weight': (64, 2)}
    """
    if not has_lora(model):
        raise ValueError("this model carries no LoRA adapter (add one with add_lora)")
    prefixes = tuple(f"{name}.{part}." for name, layer in _lora_layers(model) for part in layer.adapter_layer_names)
    return {name: t for name, t in model.state_dict().items() if name.startswith(prefixes)}


def file_key(state_name: str) -> str:
    """A ``state_dict`` name of an adapter tensor -> its key in ``adapter_model.safetensors`` (peft's
    format: ``base_model.model.`` prefix, no adapter name).

    Example:
        >>> file_key("model.layers.0.self_attn.q_proj.lora_A.default.weight")
        'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'
    """
    parts = state_name.split(".")
    kept = [p for i, p in enumerate(parts) if not (p == ADAPTER and i and parts[i - 1].startswith("lora_"))]
    if len(kept) != len(parts) - 1:
        raise ValueError(f"{state_name!r} is not the state_dict name of a LoRA tensor (expected '...lora_X.{ADAPTER}...')")
    return FILE_PREFIX + ".".join(kept)


def write_adapter(folder: str | Path, tensors: Mapping[str, torch.Tensor], settings: LoraSettings, *,
                  base_model: str | None = None) -> Path:
    """Write an adapter folder in peft's format from tensors under ``state_dict`` names.

    ``target_modules`` must be resolved names (not ``None``). ``base_model`` goes to the config's
    ``base_model_name_or_path`` (a folder, a hub id, or a path relative to ``folder``).
    """
    from safetensors.torch import save_file

    peft = _peft()
    if settings.target_modules is None:
        raise ValueError("write_adapter needs the resolved target_modules (lora_settings(model) has them)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = peft.LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                             target_modules=list(settings.target_modules), bias="none",
                             base_model_name_or_path=base_model, inference_mode=True)
    config.save_pretrained(str(folder))
    save_file({file_key(k): v.detach().to("cpu").contiguous() for k, v in tensors.items()}, str(folder / WEIGHTS_FILE),
              metadata={"format": "pt"})
    return folder


def save_adapter(model: torch.nn.Module, folder: str | Path, *, base_model: str | None = None) -> Path:
    """Save ``model``'s adapter (only) to ``folder``: ``adapter_config.json`` + ``adapter_model.safetensors``.

    The files are what ``PeftModel.save_pretrained`` writes, so ``peft`` and vLLM load them as they are.
    """
    return write_adapter(folder, adapter_state_dict(model), lora_settings(model), base_model=base_model)


def read_adapter(folder: str | Path) -> tuple[LoraSettings, dict[str, Any], dict[str, torch.Tensor]]:
    """``(settings, config dict, tensors under state_dict names)`` of an adapter folder."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file() or not (folder / WEIGHTS_FILE).is_file():
        raise FileNotFoundError(f"{folder} is not a LoRA adapter folder: it needs {CONFIG_FILE} and {WEIGHTS_FILE}")
    config = json.loads((folder / CONFIG_FILE).read_text())
    if config.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"{folder}: a {config.get('peft_type')} adapter; only LoRA adapters are supported")
    targets = config.get("target_modules")
    settings = LoraSettings(rank=int(config["r"]), alpha=float(config["lora_alpha"]),
                            dropout=float(config.get("lora_dropout", 0.0)),
                            target_modules=(targets,) if isinstance(targets, str) else tuple(sorted(targets)))
    tensors: dict[str, torch.Tensor] = {}
    for key, tensor in load_file(str(folder / WEIGHTS_FILE)).items():
        parts = key.removeprefix(FILE_PREFIX).split(".")
        at = max((i for i, p in enumerate(parts) if p.startswith("lora_")), default=None)
        if at is None:
            raise ValueError(f"{folder}/{WEIGHTS_FILE}: {key!r} is not a LoRA tensor (only lora_A/lora_B are supported)")
        tensors[".".join([*parts[: at + 1], ADAPTER, *parts[at + 1 :]])] = tensor
    return settings, config, tensors


@torch.no_grad()
def load_adapter(model: torch.nn.Module, folder: str | Path) -> None:
    """Copy an adapter folder's tensors into ``model``'s adapter (same targets and rank) in place.

    Raises:
        ValueError: the folder's adapter does not match the model's (names or shapes), naming the first few.
    """
    _, _, tensors = read_adapter(folder)
    own = adapter_state_dict(model)
    missing, unexpected = sorted(set(own) - set(tensors)), sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise ValueError(f"adapter in {folder} does not match the model's: missing {missing[:3]}, unexpected "
                         f"{unexpected[:3]} (was it trained with other target_modules or another base model?)")
    for name, tensor in tensors.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"adapter in {folder}: {name} has shape {tuple(tensor.shape)}, the model's is "
                             f"{tuple(own[name].shape)} (another rank?)")
        own[name].copy_(tensor)


def _base_name(name: str) -> str:
    return name.replace(".base_layer.", ".")


def base_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The frozen base weights under the plain model's names (views): no adapter tensors, no ``base_layer``."""
    adapter = adapter_state_dict(model)
    return {_base_name(n): t for n, t in model.state_dict().items() if n not in adapter}


@torch.no_grad()
def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The plain model's state dict with ``(alpha / r) B A`` added to every adapted weight (new tensors
    for those, views for the rest); ``model`` is not modified."""
    state = base_state_dict(model)
    for name, layer in _lora_layers(model):
        if ADAPTER in layer.lora_A:
            key = f"{name}.weight"
            state[key] = state[key] + layer.get_delta_weight(ADAPTER).to(state[key].dtype)
    return state


def _plain_copy(model: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> torch.nn.Module:
    """A copy of ``model`` with its adapter layers replaced by their base layers, holding ``state``."""
    plain = copy.deepcopy(model)
    for name, layer in _lora_layers(plain):
        parent, _, child = name.rpartition(".")
        setattr(plain.get_submodule(parent) if parent else plain, child, layer.get_base_layer())
    del plain.peft_config
    plain.load_state_dict(dict(state), strict=True)
    for param in plain.parameters():
        param.requires_grad_(True)
    return plain


def merged_model(model: torch.nn.Module) -> torch.nn.Module:
    """A plain copy of ``model`` (its own class, no adapter) with the adapter merged into the weights: the
    model to export or to serve without peft. ``model`` keeps its adapter."""
    return _plain_copy(model, merged_state_dict(model))


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """A plain copy of ``model``'s frozen base (its own class, no adapter, the adapter NOT merged): what a
    LoRA run saves once as the base its checkpoints' adapters apply to."""
    return _plain_copy(model, base_state_dict(model))


def load_lora_model(folder: str | Path, *, base_model: Any = None, trainable: bool = True,
                    dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Rebuild base model + adapter from an adapter folder.

    Args:
        folder: an adapter folder (:func:`save_adapter`, ``PeftModel.save_pretrained``).
        base_model: the base model to inject into (modified in place); default: load the config's
            ``base_model_name_or_path`` (a path relative to ``folder`` is resolved against it; models are
            never downloaded).
        trainable: whether the adapter's tensors require gradients (resume) or not (evaluation).
        dtype: the dtype of a base model loaded here.
    """
    settings, config, _ = read_adapter(folder)
    if base_model is None:
        from transformers import AutoModelForCausalLM

        base_model = AutoModelForCausalLM.from_pretrained(str(resolve_base(folder, config)), dtype=dtype)
    add_lora(base_model, settings)
    load_adapter(base_model, folder)
    if not trainable:
        for param in base_model.parameters():
            param.requires_grad_(False)
    return base_model


def resolve_base(folder: str | Path, config: Mapping[str, Any] | None = None) -> Path:
    """The base model folder an adapter folder names (``base_model_name_or_path``; relative to ``folder``).

    Raises:
        FileNotFoundError: it names none, or a folder that does not exist (naming the fix).
    """
    folder = Path(folder)
    config = config if config is not None else json.loads((folder / CONFIG_FILE).read_text())
    base = config.get("base_model_name_or_path")
    if not base:
        raise FileNotFoundError(f"adapter {folder} does not name its base model (base_model_name_or_path): pass "
                                "base_model=... (the model it was trained on)")
    path = Path(base) if Path(base).is_absolute() else folder / base
    if not path.is_dir():
        raise FileNotFoundError(f"adapter {folder}: its base model {base} is not a local folder ({path}); put the base "
                                "model back there or pass base_model=... (models are never downloaded)")
    return path.resolve()


def trainable_parameters(model: torch.nn.Module) -> Iterable[tuple[str, torch.nn.Parameter]]:
    """``(name, parameter)`` of every parameter that requires gradients (the adapter's, with LoRA)."""
    return ((n, p) for n, p in model.named_parameters() if p.requires_grad)


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """``(trainable, total)`` distinct parameters (tied weights counted once).

    Example:
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> m = build_tiny_model(build_tokenizer(), hidden_size=64, layers=1, heads=2)
        >>> trainable, total = count_parameters(add_lora(m, LoraSettings(rank=1, target_modules=("q_proj",))))
        >>> trainable  # A: (1, 64), B: (64, 1)
        128
    """
    unique = {id(p): p for p in model.parameters()}.values()
    return sum(p.numel() for p in unique if p.requires_grad), sum(p.numel() for p in unique)


__all__ = [
    "ADAPTER",
    "DEFAULT_TARGETS",
    "INSTALL_HINT",
    "LoraSettings",
    "adapter_state_dict",
    "add_lora",
    "base_model",
    "base_state_dict",
    "count_parameters",
    "default_target_modules",
    "file_key",
    "has_lora",
    "load_adapter",
    "load_lora_model",
    "lora_settings",
    "merged_model",
    "merged_state_dict",
    "read_adapter",
    "resolve_base",
    "save_adapter",
    "trainable_parameters",
    "write_adapter",
]
