"""Generated token ids -> :class:`~dapo_env.types.Completion`: for loops that call ``model.generate`` (or any
engine) themselves and step the environments with what it produced.

The conventions are the learner's engines' (``dapo_env.learners.engines``), so the env layer reads a
hand-made completion exactly as one of ours:

- a response ends at its first token that is ANY of the EOS ids; that EOS token counts in
  ``token_ids``/``num_tokens`` but is not decoded into ``text``; anything after it (padding, a second
  EOS) is dropped;
- ``finish_reason`` is ``"length"`` only when ``max_response_tokens`` tokens were produced without an EOS; a row
  that stopped earlier without one (a stop string, trailing padding stripped) is ``"stop"``;
- the text is ``tokenizer.decode(ids_without_eos, skip_special_tokens=True)``.

Torch-free: rows may be lists, tuples, numpy arrays or tensors (anything with ``tolist()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dapo_env.types import Completion


def _ids(row: Any) -> list[int]:
    values = row.tolist() if hasattr(row, "tolist") else list(row)
    return [int(v) for v in values]


def _int_set(value: int | Iterable[int] | None) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    return {int(v) for v in (value.tolist() if hasattr(value, "tolist") else value)}


def eos_ids_of(tokenizer: Any = None, eos_token_ids: int | Iterable[int] | None = None, *,
               model: Any = None) -> frozenset[int]:
    """Every id that ends a response: ``eos_token_ids``, the tokenizer's ``eos_token_id`` and, given a
    ``model``, its generation config's and config's ``eos_token_id`` (each an int or a list).

    Pass every id the model stops on (e.g. ``model.generation_config.eos_token_id`` of a chat model,
    which often lists the end-of-turn token too, or the model itself); raises when there is none. The
    learner's engines use this one function too.

    Example:
        >>> sorted(eos_ids_of(eos_token_ids=[2, 7]))
        [2, 7]
    """
    found = _int_set(eos_token_ids) | _int_set(getattr(tokenizer, "eos_token_id", None))
    if model is not None:
        found |= _int_set(getattr(getattr(model, "generation_config", None), "eos_token_id", None))
        found |= _int_set(getattr(getattr(model, "config", None), "eos_token_id", None))
    if not found:
        raise ValueError("no EOS id: pass eos_token_ids=[...] (e.g. model.generation_config.eos_token_id) or a "
                         "tokenizer with an eos_token")
    return frozenset(found)


def completion_from_token_ids(token_ids: Sequence[int] | Any, *, max_response_tokens: int, tokenizer: Any = None,
                              eos_token_ids: int | Iterable[int] | None = None, text: str | None = None,
                              pad_token_id: int | None = None, logprobs: Sequence[float] | Any = None,
                              prompt_token_ids: Sequence[int] | Any = None) -> Completion:
    """One generated response as a :class:`Completion` (conventions in the module docstring).

    Args:
        token_ids: the generated ids (the response only, without the prompt).
        max_response_tokens: the new-token limit the engine generated with (``max_new_tokens``).
        tokenizer: decodes the text and contributes its ``eos_token_id``.
        eos_token_ids: ids that end a response, on top of the tokenizer's (needed without a tokenizer).
        text: the decoded response, when the engine already decoded it (then no tokenizer is needed).
        pad_token_id: trailing ids equal to it are padding, for a row that stopped without an EOS (a stop
            string) in a padded batch; padding after an EOS is dropped without it.
        logprobs: per-token log-probabilities of ``token_ids``; kept for the ids that remain.
        prompt_token_ids: the prompt's ids, stored on the completion.

    Example:
        >>> c = completion_from_token_ids([5, 6, 2, 0, 0], max_response_tokens=5, eos_token_ids=2, text="Answer: 4")
        >>> c.token_ids, c.num_tokens, c.finish_reason
        ((5, 6, 2), 3, 'stop')
        >>> completion_from_token_ids([5, 6, 7], max_response_tokens=3, eos_token_ids=2, text="Answer:").finish_reason
        'length'
    """
    if not isinstance(max_response_tokens, int) or isinstance(max_response_tokens, bool) or max_response_tokens < 1:
        raise ValueError(f"max_response_tokens must be a positive int (the engine's max_new_tokens), got {max_response_tokens!r}")
    if tokenizer is None and text is None:
        raise ValueError("pass tokenizer=... to decode the text, or text=... when the engine already decoded it")
    eos = eos_ids_of(tokenizer, eos_token_ids)
    ids = _ids(token_ids)
    stop = next((i for i, token in enumerate(ids) if token in eos), None)
    if stop is not None:
        ids = ids[: stop + 1]
    elif pad_token_id is not None:
        while ids and ids[-1] == pad_token_id:
            ids.pop()
    if len(ids) > max_response_tokens:
        raise ValueError(f"a response of {len(ids)} ids but max_response_tokens={max_response_tokens}: pass the limit the engine "
                         "generated with, and only the response's ids (not the prompt's)")
    stopped = stop is not None
    if text is None:
        text = tokenizer.decode(ids[:-1] if stopped else ids, skip_special_tokens=True)
    kept_logprobs = None
    if logprobs is not None:
        values = logprobs.tolist() if hasattr(logprobs, "tolist") else list(logprobs)
        if len(values) < len(ids):
            raise ValueError(f"{len(values)} logprobs for {len(ids)} response tokens: pass one per generated id")
        kept_logprobs = tuple(float(v) for v in values[: len(ids)])
    return Completion(
        text=text,
        num_tokens=len(ids),
        finish_reason="stop" if stopped or len(ids) < max_response_tokens else "length",
        token_ids=tuple(ids),
        logprobs=kept_logprobs,
        prompt_token_ids=tuple(_ids(prompt_token_ids)) if prompt_token_ids is not None else None,
    )


def completions_from_token_ids(token_ids: Sequence[Sequence[int]] | Any, *, max_response_tokens: int, tokenizer: Any = None,
                               eos_token_ids: int | Iterable[int] | None = None, texts: Sequence[str] | None = None,
                               pad_token_id: int | None = None, logprobs: Sequence[Sequence[float]] | Any = None,
                               prompt_token_ids: Sequence[Sequence[int]] | Any = None) -> list[Completion]:
    """A batch of generated responses (rows of ids, e.g. ``model.generate(...)[:, prompt_len:]``) as
    :class:`Completion` objects, one per row, via :func:`completion_from_token_ids`.

    ``texts``, ``logprobs`` and ``prompt_token_ids`` give one entry per row. Rows padded after an EOS need
    nothing more; pass ``pad_token_id`` only when rows can also stop without an EOS (stop strings) and are
    padded after that (a sampled pad token is otherwise an ordinary token, as in the engines).

    Example:
        >>> rows = [[7, 8, 2, 0], [7, 8, 9, 9]]
        >>> [(c.num_tokens, c.finish_reason) for c in
        ...  completions_from_token_ids(rows, max_response_tokens=4, eos_token_ids=[2], texts=["a", "b"])]
        [(3, 'stop'), (4, 'length')]
    """
    rows = token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids)
    for name, values in (("texts", texts), ("logprobs", logprobs), ("prompt_token_ids", prompt_token_ids)):
        if values is not None and len(values) != len(rows):
            raise ValueError(f"{len(rows)} rows of token ids but {len(values)} {name}: pass one per row")
    return [
        completion_from_token_ids(
            row, max_response_tokens=max_response_tokens, tokenizer=tokenizer, eos_token_ids=eos_token_ids,
            text=texts[i] if texts is not None else None, pad_token_id=pad_token_id,
            logprobs=logprobs[i] if logprobs is not None else None,
            prompt_token_ids=prompt_token_ids[i] if prompt_token_ids is not None else None,
        )
        for i, row in enumerate(rows)
    ]


__all__ = ["completion_from_token_ids", "completions_from_token_ids", "eos_ids_of"]
