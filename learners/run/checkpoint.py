"""Atomic training checkpoints: model, optimizer, scheduler, RNG states, sampler state, counters.

Layout: ``<run_dir>/checkpoints/step_<N>/`` holds ``model/`` (``save_pretrained`` + tokenizer, so
``dapo-env eval --model`` loads it directly) and ``trainer_state.pt`` (everything else). In a LoRA run
``model/`` holds the adapter only, in peft's format (``adapter_config.json`` + ``adapter_model.safetensors``,
+ tokenizer), and the adapter config's ``base_model_name_or_path`` names the frozen base: the run's
``<run_dir>/base_model/`` (written once, as ``../../../base_model``, so a moved run folder still loads) or
the absolute path of the ``--model`` folder it was trained on unchanged. :func:`load_pretrained` loads
either kind of ``model/`` folder. A checkpoint
is written to ``step_<N>.tmp`` and renamed into place, so a run killed mid-write never leaves a
half-written checkpoint that :func:`latest_checkpoint` would pick.

A run folder is never silently reused: :func:`check_run_dir` refuses to start a fresh run in a folder
that already holds files unless it is told to resume or to overwrite.

Example:
    >>> latest_checkpoint("/nonexistent") is None
    True
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

_STEP_DIR = re.compile(r"^step_(\d+)$")

#: A LoRA run's frozen base model folder inside the run folder, and how a checkpoint's adapter names it.
BASE_MODEL_DIR = "base_model"
RUN_BASE_REF = f"../../../{BASE_MODEL_DIR}"  # relative to <run_dir>/checkpoints/step_N/model


def check_run_dir(run_dir: str | Path, *, resume: bool, overwrite: bool) -> str | None:
    """Whether a run may use ``run_dir``: ``None`` if so, else the one-line error to raise (every rank raises it).

    A resumed run needs the folder of an earlier run; a fresh run needs a missing or empty folder, or
    ``overwrite`` (then the old contents are deleted here).
    """
    path = Path(run_dir)
    if resume and overwrite:
        return "pass either --resume (continue the run) or --overwrite (replace it), not both"
    if resume:
        if latest_checkpoint(path) is None and not (path / "config.json").exists():
            return f"--resume {path}: no config.json or checkpoint there; pass the folder of a run (runs/<name>)"
        return None
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            return (f"run folder {path} already holds a run: pass --resume to continue it, --overwrite to replace it, "
                    "or choose another --run-name")
        shutil.rmtree(path)
    elif path.exists() and not path.is_dir():
        return f"run folder {path} is a file: choose another --run-name or --out-dir"
    return None


@contextmanager
def quiet_progress() -> Iterator[None]:
    """Transformers' progress bars ("Writing model shards", loading bars) off while checkpoints are written
    or read: they would break the run's own progress bar."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def capture_rng_state() -> dict[str, Any]:
    """The process-wide RNG states (python, numpy, torch CPU and CUDA) for exact resume.

    The library itself never seeds these; they are saved because user code (custom verifiers,
    model code with dropout) may draw from them.
    """
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, step: int, *, model: Any, tokenizer: Any,
                    trainer_state: Mapping[str, Any], keep: int = 2, base_model: str | None = None) -> Path:
    """Write checkpoint ``step`` atomically and prune all but the newest ``keep`` (0 keeps all).

    Args:
        run_dir: the run's folder.
        step: the number of completed training steps.
        model: a ``transformers`` model (saved with ``save_pretrained``).
        tokenizer: saved next to the model (``None`` skips it).
        trainer_state: optimizer/scheduler state dicts, RNG states, sampler state, counters.
        keep: how many checkpoints to keep.
        base_model: a model carrying a LoRA adapter saves the adapter only, naming this base model folder
            (default: the run's ``base_model/``, see :func:`save_base_model`).

    Returns:
        The checkpoint folder.
    """
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f"step_{step:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    from ..models.lora import has_lora

    if has_lora(model):
        from ..models.lora import save_adapter

        save_adapter(model, tmp / "model", base_model=base_model or RUN_BASE_REF)
    else:
        with quiet_progress():
            model.save_pretrained(tmp / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "model")
    torch.save(dict(trainer_state, step=step), tmp / "trainer_state.pt")
    _fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    if keep > 0:
        for old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _fsync_tree(path: Path) -> None:
    for p in path.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (``.tmp`` leftovers are ignored)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and p.is_dir()
             and (p / "trainer_state.pt").exists()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    ckpts = list_checkpoints(run_dir)
    return ckpts[-1] if ckpts else None


def load_trainer_state(checkpoint: str | Path) -> dict[str, Any]:
    """Load ``trainer_state.pt`` (it holds pickled Python objects: load only checkpoints you wrote)."""
    return torch.load(Path(checkpoint) / "trainer_state.pt", map_location="cpu", weights_only=False)


def save_base_model(run_dir: str | Path, model: Any, tokenizer: Any) -> Path:
    """Write the frozen base of a model carrying a LoRA adapter (no adapter, not merged) to
    ``<run_dir>/base_model/`` atomically, with the tokenizer: what the run's checkpoints apply their adapter to."""
    from ..models.lora import base_model

    final = Path(run_dir) / BASE_MODEL_DIR
    tmp = final.with_name(BASE_MODEL_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_progress():
        base_model(model).save_pretrained(tmp)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    _fsync_tree(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def is_adapter_folder(model_dir: str | Path) -> bool:
    """Whether a model folder holds a LoRA adapter (peft's ``adapter_config.json``) rather than full weights."""
    from ..models.lora import CONFIG_FILE

    return (Path(model_dir) / CONFIG_FILE).is_file()


def load_pretrained(model_dir: str | Path, *, trainable: bool = True) -> tuple[Any, Any]:
    """The model (fp32) and tokenizer of a model folder: full weights (``save_pretrained``) or a LoRA adapter
    folder (base model rebuilt from the adapter config's ``base_model_name_or_path``, adapter injected; needs
    the ``lora`` extra). ``trainable=False`` freezes every parameter (evaluation).

    Example:
        >>> load_pretrained("/nonexistent")
        Traceback (most recent call last):
        ...
        FileNotFoundError: /nonexistent is not a model folder: pass a folder written by save_pretrained or a run's checkpoints/step_N/model
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(model_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a model folder: pass a folder written by save_pretrained or a run's "
                                "checkpoints/step_N/model")
    with quiet_progress():
        if is_adapter_folder(folder):
            from ..models.lora import load_lora_model, resolve_base

            model = load_lora_model(folder, trainable=trainable)
            has_tokenizer = any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json"))
            return model, AutoTokenizer.from_pretrained(str(folder if has_tokenizer else resolve_base(folder)))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        if not trainable:
            model.requires_grad_(False)
        return model, AutoTokenizer.from_pretrained(str(folder))


def load_model(checkpoint: str | Path) -> tuple[Any, Any]:
    """A checkpoint's model (fp32; with its LoRA adapter in a LoRA run) and tokenizer."""
    return load_pretrained(Path(checkpoint) / "model")


def load_model_weights(model: torch.nn.Module, checkpoint: str | Path) -> None:
    """Load a checkpoint's model weights into ``model`` in place (same architecture); a LoRA checkpoint's
    base and adapter both (the adapter is added to a plain ``model`` first)."""
    loaded = load_model(checkpoint)[0]
    from ..models.lora import add_lora, has_lora, lora_settings

    if has_lora(loaded) and not has_lora(model):
        add_lora(model, lora_settings(loaded))
    model.load_state_dict(loaded.state_dict())


def build_model(cfg: Any) -> tuple[Any, Any]:
    """Load ``cfg.model`` (a local HF folder, or a LoRA adapter folder: base + adapter, see
    :func:`~dapo_env.learners.run.checkpoint.load_pretrained`) or build the tiny random-init model and tokenizer."""
    if cfg.model is not None:
        if not Path(cfg.model).is_dir():
            raise FileNotFoundError(f"--model {cfg.model}: not a local folder (models are never downloaded); "
                                    "pass a folder written by save_pretrained")
        return load_pretrained(cfg.model)
    from ..models.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer(model_max_length=cfg.tiny_max_positions)
    model = build_tiny_model(tok, hidden_size=cfg.tiny_hidden_size, layers=cfg.tiny_layers,
                             heads=cfg.tiny_heads, max_positions=cfg.tiny_max_positions, seed=cfg.seed)
    return model, tok


def attach_lora(model: Any, tokenizer: Any, cfg: Any, run_dir: Path, latest: Path | None, *, is_main: bool,
                base_unchanged: bool) -> str | None:
    """A LoRA run (``cfg.lora_rank >= 1``): inject the adapter into the (warm-started) base, which freezes it,
    and on a fresh run write the base once to ``<run_dir>/base_model/`` (main rank) unless it is the
    ``--model`` folder unchanged (``base_unchanged``). Returns the base reference the checkpoints' adapters
    record (``None``: the run's ``base_model/``); a resumed run (``latest``) keeps its checkpoint's."""
    from ..models.lora import has_lora

    settings = cfg.lora
    if settings is None:
        if has_lora(model):
            raise ValueError("the model carries a LoRA adapter but lora_rank=0 (full fine-tuning): set lora_rank "
                             "to the adapter's rank, or pass the plain base model")
        return None
    from ..models.lora import CONFIG_FILE, add_lora, lora_settings

    if not has_lora(model):
        add_lora(model, settings)
    have = lora_settings(model)
    if (have.rank, have.alpha) != (settings.rank, float(settings.alpha)):
        raise ValueError(f"the model's LoRA adapter has rank {have.rank}, alpha {have.alpha} but the config asks for "
                         f"lora_rank={settings.rank}, lora_alpha={settings.alpha}: resume with the run's own settings")
    if latest is not None:
        base = json.loads((latest / "model" / CONFIG_FILE).read_text()).get("base_model_name_or_path")
        return None if base == RUN_BASE_REF else base
    if base_unchanged and cfg.model is not None and not is_adapter_folder(cfg.model):
        return str(Path(cfg.model).resolve())
    if is_main:
        save_base_model(run_dir, model, tokenizer)
    return None


def init_reference(run_dir: Path, model: Any, *, fresh: bool) -> dict[str, torch.Tensor]:
    """The trained parameters (a LoRA run's adapter) at the start of RL, after any warm start: saved once to
    ``<run_dir>/init_weights.pt`` so a resumed run keeps measuring its drift from the same point."""
    path = Path(run_dir) / "init_weights.pt"
    if fresh or not path.exists():
        ref = {n: p.detach().float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}
        torch.save(ref, path)
        return ref
    return torch.load(path, map_location="cpu", weights_only=True)


__all__ = ["BASE_MODEL_DIR", "RUN_BASE_REF", "attach_lora", "build_model", "capture_rng_state", "check_run_dir",
           "init_reference", "is_adapter_folder", "latest_checkpoint", "list_checkpoints", "load_model", "load_model_weights", "load_pretrained",
           "load_trainer_state", "quiet_progress", "restore_rng_state", "save_base_model", "save_checkpoint"]
