"""The trainer's glue to the env layer and the model: task and verifier resolution, the group env and
dynamic sampler, padded sequence batches, learner log-probs on response tokens, held-out evaluation.

Verification and reward shaping are never re-implemented here: training rewards come from
``GroupVectorEnv`` (verifier, reward map, overlong penalty/filter) through ``DynamicSampler``.

Example:
    >>> derive_seed(0, 3, 1) == derive_seed(0, 3, 1) != derive_seed(0, 3, 2)
    True
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .config import TrainConfig
from dapo_env.types import Group, VerifyResult


def derive_seed(seed: int, step: int, round_: int) -> int:
    """A 31-bit seed that is a pure function of (seed, step, round): reproducible generation per round."""
    return int(np.random.SeedSequence([seed, step, round_]).generate_state(1)[0] & 0x7FFFFFFF)


# --- task and verifier ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CallableVerifier:
    """Adapts a plain callable ``fn(response, reference)`` returning a ``VerifyResult``, a bool or a
    number in [0, 1] (TRL-style reward functions) to the verifier contract. Picklable when ``fn`` is
    a module-level function."""

    fn: Callable[[str, Any], Any]

    def __call__(self, response: str, reference: Any) -> VerifyResult:
        out = self.fn(response, reference)
        if isinstance(out, VerifyResult):
            return out
        if isinstance(out, (bool, np.bool_)):
            return VerifyResult(bool(out), 1.0 if out else 0.0, None, "custom:bool")
        if isinstance(out, (int, float, np.number)):
            score = min(1.0, max(0.0, float(out)))
            return VerifyResult(score >= 1.0, score, None, "custom:score")
        raise TypeError(f"custom verifier {self.fn!r} returned {type(out).__name__}; return a VerifyResult, "
                        "a bool or a float in [0, 1]")


def load_verifier(spec: str | Callable[..., Any]) -> Callable[[str, Any], VerifyResult]:
    """A verifier from a callable or a ``"module:function"`` string (``"pkg.mod:Class.attr"`` works)."""
    if callable(spec):
        return CallableVerifier(spec)
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"verifier {spec!r}: pass a callable or a 'module:function' string")
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"verifier {spec!r}: cannot import module {module_name!r} ({exc}); "
                         "check the module is on PYTHONPATH") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"verifier {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"verifier {spec!r} is not callable")
    return CallableVerifier(obj)


def resolve_task(cfg: TrainConfig) -> Any:
    """The registered task named by ``cfg.task``, with ``cfg.verifier`` swapped in when given."""
    from dapo_env.tasks import get_task

    task = get_task(cfg.task)
    if cfg.verifier is not None:
        task = dataclasses.replace(task, verifier=load_verifier(cfg.verifier))
    return task


def make_sampler(cfg: TrainConfig, task: Any, generate: Callable[[list[str]], list[Any]],
                 tokenizer: Any = None) -> tuple[Any, Any]:
    """The group env (B*G sub-envs, shaping from ``cfg``) made through Gymnasium's registry, and a
    :class:`~dapo_env.sampler.DynamicSampler` over it (filtering only if ``cfg.dynamic_sampling``)."""
    import gymnasium as gym

    import dapo_env.tasks  # noqa: F401  (registers the built-in ids)
    from dapo_env.sampler import DynamicSampler

    shaping: dict[str, Any] = {
        "reward_map": (cfg.reward_low, cfg.reward_high),
        "overlong_filter": cfg.overlong_filter,
        "overlong_penalty": ({"max_response_tokens": cfg.max_response_tokens, "cache_length": cfg.overlong_cache_length,
                              "factor": cfg.overlong_penalty_factor} if cfg.overlong_penalty else None),
        "max_response_tokens": cfg.max_response_tokens,
        "chat_template": tokenizer if cfg.chat_template else None,
    }
    env = gym.make_vec(task.env_id, num_envs=cfg.batch_size * cfg.group_size,
                       vectorization_mode="vector_entry_point", group_size=cfg.group_size, task=task,
                       split=cfg.train_split, **shaping, **dict(cfg.task_kwargs))
    sampler = DynamicSampler(env, generate, num_groups=cfg.batch_size, max_rounds=cfg.max_gen_rounds,
                             filter_groups=cfg.dynamic_sampling, seed=cfg.seed)
    return sampler, env


# --- sequence batches and learner log-probs ------------------------------------------------------------
@dataclass(frozen=True)
class SequenceBatch:
    """Prompt + response token ids of N samples, prompts left-padded to P and responses right-padded
    to R, so every response starts at column P.

    Attributes:
        input_ids: (N, P + R) token ids.
        attention_mask: (N, P + R) 1 on real tokens.
        position_ids: (N, P + R) positions counted over real tokens (as the engine saw them).
        response_ids: (N, R) the response tokens.
        response_mask: (N, R) bool, True on real response tokens.
        loss_mask: (N, R) float, response_mask and the sample's env loss mask (overlong filter).
        prompt_len: P.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    loss_mask: torch.Tensor
    prompt_len: int

    def to(self, device: torch.device | str) -> SequenceBatch:
        """The same batch with every tensor on ``device`` (the learner's; no copy when already there)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self) if f.name != "prompt_len"})


def build_sequence_batch(groups: Sequence[Group], *, pad_id: int) -> SequenceBatch:
    """Stack every completion of ``groups`` (group-major) into a :class:`SequenceBatch` (via ``pack_batch``)."""
    from .logprobs import pack_batch

    samples = [(c, keep) for g in groups for c, keep in zip(g.completions, g.loss_mask)]
    for c, _ in samples:
        if c.token_ids is None or c.prompt_token_ids is None:
            raise ValueError("completions need token_ids and prompt_token_ids for the learner: use an engine "
                             "that reports them (HFEngine, VLLMEngine)")
    packed = pack_batch([c.prompt_token_ids for c, _ in samples], [c.token_ids for c, _ in samples], pad_id=pad_id)
    keep = torch.tensor([1.0 if k else 0.0 for _, k in samples])  # (N,)
    response_mask = packed.response_mask.bool()  # (N, R)
    R = packed.response_len
    position_ids = (packed.attention_mask.cumsum(-1) - 1).clamp(min=0)  # (N, P+R)
    return SequenceBatch(packed.input_ids, packed.attention_mask, position_ids, packed.input_ids[:, -R:],
                         response_mask, response_mask.float() * keep[:, None], packed.input_ids.shape[1] - R)


def response_logprobs(model: torch.nn.Module, batch: SequenceBatch, rows: torch.Tensor, temperature: float,
                      *, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the response tokens of ``rows`` under ``model`` at
    ``temperature`` (memory-lean chunked lm_head). Returns ``(logp, entropy)``, each (n, R), 0 on padding."""
    from .logprobs import token_logprobs_and_entropy

    device = next(model.parameters()).device
    logp, entropy = token_logprobs_and_entropy(
        model, batch.input_ids[rows].to(device), batch.attention_mask[rows].to(device),
        batch.response_ids.shape[1], temperature=temperature, with_entropy=with_entropy,
        position_ids=batch.position_ids[rows].to(device))
    mask = batch.response_mask[rows].to(device)
    logp = logp.masked_fill(~mask, 0.0)
    entropy = entropy.masked_fill(~mask, 0.0) if entropy is not None else None
    return logp, entropy


# --- held-out evaluation -------------------------------------------------------------------------------
def evaluate_accuracy(engine: Any, task: Any, cfg: TrainConfig, *, tokenizer: Any = None,
                      split: str | None = None, size: int | None = None) -> float:
    """Accuracy on the first ``size`` problems of ``split`` (default ``cfg.eval_split`` / ``eval_size``).

    Greedy decoding by default (``cfg.eval_temperature == 0``), else sampling at that temperature with
    a fixed seed. A truncated response counts as wrong. Verified with the task's verifier.
    """
    from .engine import SamplingParams
    from dapo_env.verifiers import VerifierPool

    problems = task.load(split=split or cfg.eval_split, **dict(cfg.task_kwargs))
    n = min(size or cfg.eval_size, len(problems))
    chosen = [problems[i] for i in range(n)]
    prompts = [task.format_prompt(p) for p in chosen]
    if cfg.chat_template:
        from dapo_env.wrappers import apply_chat_template

        prompts = [apply_chat_template(tokenizer, p) for p in prompts]
    sampling = SamplingParams(temperature=cfg.eval_temperature, top_p=1.0, max_response_tokens=cfg.max_response_tokens,
                              seed=derive_seed(cfg.seed, 2**31, 0) if cfg.eval_temperature > 0 else 0)
    outs = [group[0] for group in engine.generate(prompts, n=1, sampling=sampling)]
    with VerifierPool(0) as pool:
        results = pool.map(task.verifier, [c.text for c in outs], [p.answer for p in chosen])
    right = [r.correct and not c.truncated for r, c in zip(results, outs)]
    return float(np.mean(right)) if right else 0.0


__all__ = ["CallableVerifier", "SequenceBatch", "build_sequence_batch", "derive_seed", "evaluate_accuracy",
           "load_verifier", "make_sampler", "resolve_task", "response_logprobs"]
