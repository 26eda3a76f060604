"""What goes into and comes out of every rollout engine, written once for all of them.

The HF engine (:mod:`~dapo_env.learners.engines.hf_engine`) and the vLLM engine (:mod:`~dapo_env.learners.engines.vllm_engine`)
share these steps, so their conventions cannot drift apart:

- :func:`encode_prompts`: prompt strings -> token ids, tokenised as given and never truncated (a prompt that
  does not fit the context with its new tokens raises);
- :func:`turn_inputs` (with :func:`turn_budget`): a multi-turn request's exact context ids and its token
  budget, ``min(max_response_tokens, tokens left in the episode)``;
- :func:`collect_eos_ids`: every id that ends a response (:func:`dapo_env.completions.eos_ids_of`, sorted);
- :func:`completion_of`: sampled ids -> :class:`~dapo_env.types.Completion` through the env layer's
  :func:`~dapo_env.completions.completion_from_token_ids` (first EOS of any id ends the response and counts as
  a token, not text; ``"length"`` only at the budget), stamped with the engine's weights version;
  :func:`empty_turn` for a turn with no budget left;
- :func:`weights_fingerprint`: a cheap exact summary of named tensors (an engine's and the learner's).

Example:
    >>> from dapo_env.learners.models.tiny import build_tokenizer
    >>> tok = build_tokenizer()
    >>> ids = encode_prompts(tok, ["1+1="], add_special_tokens=True, max_response_tokens=4, context_length=64)[0]
    >>> c = completion_of([5, 6, tok.eos_token_id], [-0.5, -0.25, -1.0], ids, max_response_tokens=4, tokenizer=tok,
    ...                   eos_token_ids=collect_eos_ids(tok), weights_version=3)
    >>> c.num_tokens, c.finish_reason, c.weights_version, turn_budget(8, 3), turn_budget(8, None)
    (3, 'stop', 3, 3, 8)
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from dapo_env.completions import completion_from_token_ids, eos_ids_of
from dapo_env.types import Completion

WeightsLike = Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]


def collect_eos_ids(tokenizer: Any, model: Any = None, extra: Iterable[int] = ()) -> tuple[int, ...]:
    """Every id that ends a response, sorted: the tokenizer's EOS, the model config's and generation config's
    ``eos_token_id`` (int or list), and ``extra`` (:func:`dapo_env.completions.eos_ids_of`). Raises if none."""
    return tuple(sorted(eos_ids_of(tokenizer, list(extra), model=model)))


def weights_fingerprint(weights: WeightsLike, *, samples: int = 256) -> str:
    """A cheap, exact fingerprint of named tensors: SHA-256 over each name, shape and up to
    ``samples`` evenly strided elements cast to fp32. Equal weights give equal fingerprints."""
    items = sorted(weights.items() if isinstance(weights, Mapping) else weights, key=lambda kv: kv[0])
    digest = hashlib.sha256()
    for name, tensor in items:
        flat = tensor.detach().reshape(-1)  # (numel,)
        step = max(1, flat.numel() // samples)
        picked = flat[::step][:samples].to(device="cpu", dtype=torch.float32).contiguous()
        digest.update(f"{name}:{tuple(tensor.shape)}".encode())
        digest.update(picked.numpy().tobytes())
    return digest.hexdigest()[:16]


def _fits(length: int, new_tokens: int, context_length: int | None) -> bool:
    return context_length is None or length + new_tokens <= context_length


def encode_prompts(tokenizer: Any, prompts: Sequence[str], *, add_special_tokens: bool, max_response_tokens: int,
                   context_length: int | None) -> list[list[int]]:
    """Each prompt's token ids (``add_special_tokens`` as the engine was built; never truncated).

    Raises ``ValueError`` for a prompt that encodes to no tokens, or that does not fit ``context_length``
    (``None``: unknown, not checked) with ``max_response_tokens`` new tokens.
    """
    encoded = []
    for i, prompt in enumerate(prompts):
        ids = [int(t) for t in tokenizer(prompt, add_special_tokens=add_special_tokens)["input_ids"]]
        if not ids:
            raise ValueError(f"prompt {i} encodes to no tokens; give it text or a BOS token")
        if not _fits(len(ids), max_response_tokens, context_length):
            raise ValueError(
                f"prompt {i} has {len(ids)} tokens; with max_response_tokens={max_response_tokens} it exceeds the "
                f"engine's context of {context_length} (prompts are never truncated): shorten the prompt or lower "
                "max_response_tokens")
        encoded.append(ids)
    return encoded


def turn_budget(max_response_tokens: int, tokens_left: int | None) -> int:
    """New tokens a turn may sample: ``max_response_tokens``, capped by the tokens left in its episode
    (``None``: no episode budget); 0 when none are left."""
    return max_response_tokens if tokens_left is None else max(0, min(max_response_tokens, int(tokens_left)))


def turn_inputs(requests: Sequence[Any], max_response_tokens: int, *, tokenizer: Any, add_special_tokens: bool,
                context_length: int | None) -> tuple[list[list[int]], list[int]]:
    """Each :class:`~dapo_env.multiturn.TurnRequest`'s context ids (its exact ``context_token_ids``, else its
    ``text`` encoded) and its :func:`turn_budget`; raises when a context is empty or, with its budget, does not
    fit ``context_length``."""
    contexts, budgets = [], []
    for i, request in enumerate(requests):
        ids = request.context_token_ids
        if ids is None:
            ids = tokenizer(request.text, add_special_tokens=add_special_tokens)["input_ids"]
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError(f"turn request {i} (episode {request.key}) has an empty context")
        budget = turn_budget(max_response_tokens, request.tokens_left)
        if not _fits(len(ids), budget, context_length):
            raise ValueError(
                f"episode {request.key}: its context of {len(ids)} tokens plus {budget} new tokens exceeds the "
                f"engine's context of {context_length}: lower max_episode_tokens (so prompt + episode fits) or "
                "max_response_tokens")
        contexts.append(ids)
        budgets.append(budget)
    return contexts, budgets


def completion_of(token_ids: Sequence[int] | Any, logprobs: Sequence[float] | Any, prompt_ids: Sequence[int], *,
                  max_response_tokens: int, tokenizer: Any, eos_token_ids: Iterable[int],
                  weights_version: int) -> Completion:
    """One sampled response as a :class:`Completion` (the env layer's
    :func:`~dapo_env.completions.completion_from_token_ids`: cut after the first EOS, ``"length"`` only at
    ``max_response_tokens``), stamped with the engine's ``weights_version``. ``token_ids`` and ``logprobs`` may
    run past the response (padding after an EOS is dropped)."""
    completion = completion_from_token_ids(token_ids, max_response_tokens=max_response_tokens, tokenizer=tokenizer,
                                           eos_token_ids=eos_token_ids, logprobs=logprobs,
                                           prompt_token_ids=prompt_ids)
    return dataclasses.replace(completion, weights_version=weights_version)


def empty_turn(prompt_ids: Sequence[int]) -> Completion:
    """The turn of an episode with no token budget left: empty and cut (``"length"``)."""
    return Completion("", num_tokens=0, finish_reason="length", token_ids=(), logprobs=(),
                      prompt_token_ids=tuple(prompt_ids))


__all__ = ["WeightsLike", "collect_eos_ids", "completion_of", "empty_turn", "encode_prompts", "turn_budget",
           "turn_inputs", "weights_fingerprint"]
