"""What a served answer carries besides the graded text: its reasoning, its tokens, their cost, and a check for
answers that are not there.

**What is graded** (an endpoint eval, ``dapo-env eval --endpoint``): the final content of the answer, and only
that. Reasoning is kept apart, stored in the record's ``reasoning`` and counted in its tokens, never graded:

- the server's ``reasoning_content`` (or ``reasoning``) field of a chat answer (vLLM's and SGLang's reasoning
  parsers, DeepSeek-style APIs);
- think blocks in the content: every ``<think>...</think>`` block is cut out; a content holding ``</think>``
  without its opening tag (templates that open the block in the prompt, DeepSeek-R1's) loses everything up
  to the last ``</think>``; an unclosed ``<think>`` (a response cut inside its reasoning) leaves no final
  content.

The record's ``completion`` is the final content (what the verifier saw, so ``reverify`` grades the same text).

**Tokens**: per sample ``usage = {"prompt_tokens", "completion_tokens", "reasoning_tokens", "counted"}``,
from the server's ``usage`` (OpenAI's fields; reasoning from ``completion_tokens_details.reasoning_tokens``)
where it reports them; a count it does not report is counted with the tokenizer given to the eval
(``--tokenizer``) and named in ``counted``, or left ``None``. ``completion_tokens`` includes the reasoning
tokens (as OpenAI and vLLM count them). **Cost** = ``prompt_tokens * price_in + completion_tokens * price_out``
per million tokens.

Example:
    >>> split_reasoning("<think>2+2 is 4</think>Answer: 4")
    ('Answer: 4', '2+2 is 4')
    >>> split_reasoning("so it is 4</think>\\nAnswer: 4"), split_reasoning("<think>hmm, 2+")
    (('Answer: 4', 'so it is 4'), ('', 'hmm, 2+'))
    >>> usage_totals([{"usage": {"prompt_tokens": 10, "completion_tokens": 990, "reasoning_tokens": 0, "counted": []}}],
    ...              price_in=1.0, price_out=2.0)["cost"]
    0.00199
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_OPEN, _CLOSE = "<think>", "</think>"
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
#: A graded answer is "short" when its final content is empty, or it stopped within this many tokens and the
#: verifier extracted nothing from it.
SHORT_TOKENS = 3
#: The share of short answers above which an eval warns.
SHORT_SHARE = 0.05


def split_reasoning(text: str) -> tuple[str, str]:
    """``(final content, reasoning)`` of a response's text: think blocks cut out (see the module docstring)."""
    if _OPEN not in text and _CLOSE not in text:
        return text, ""  # no think block: the text as it came
    parts = [m.strip() for m in _BLOCK.findall(text)]
    rest = _BLOCK.sub("", text)
    if _CLOSE in rest:  # the block was opened in the prompt: all before the last </think> is reasoning
        head, _, rest = rest.rpartition(_CLOSE)
        parts.insert(0, head.replace(_OPEN, "").strip())
    if _OPEN in rest:  # cut inside its reasoning: no final content
        rest, _, tail = rest.partition(_OPEN)
        parts.append(tail.strip())
    return rest.strip(), "\n\n".join(p for p in parts if p)


def served_record(completion: Any, prompt: str, *, tokenizer: Any = None) -> tuple[str, dict[str, Any]]:
    """``(text to grade, record fields)`` of one served answer: ``reasoning`` (the server's field, then think
    blocks) and ``usage`` (see the module docstring)."""
    text, think = split_reasoning(completion.text)
    server = getattr(completion, "reasoning", None) or ""
    reasoning = "\n\n".join(part for part in (server.strip(), think) if part)
    reported = dict(getattr(completion, "usage", None) or {})
    usage: dict[str, Any] = {key: reported.get(key) for key in TOKEN_FIELDS}
    counted: list[str] = []
    if usage["completion_tokens"] is None and completion.num_tokens is not None:
        usage["completion_tokens"] = int(completion.num_tokens)
    if usage["reasoning_tokens"] is None and not reasoning:
        usage["reasoning_tokens"] = 0
    if tokenizer is not None:
        texts = {"prompt_tokens": prompt, "completion_tokens": "\n".join(p for p in (reasoning, completion.text) if p),
                 "reasoning_tokens": reasoning}
        for key in TOKEN_FIELDS:
            if usage[key] is None:
                usage[key] = len(tokenizer(texts[key], add_special_tokens=False)["input_ids"])
                counted.append(key)
    usage["counted"] = counted
    return text, {"reasoning": reasoning or None, "usage": usage}


def usage_totals(records: Sequence[Mapping[str, Any]], *, price_in: float | None = None,
                 price_out: float | None = None) -> dict[str, Any]:
    """Token totals over records (failed requests included: a server bills them too when it answered), the
    samples whose counts were partly counted locally or missing, and the cost when both prices are given
    (per million tokens; ``None`` otherwise or when a count is missing)."""
    totals: dict[str, Any] = {key: 0 for key in TOKEN_FIELDS}
    missing = {key: 0 for key in TOKEN_FIELDS}
    counted = 0
    with_usage = [r for r in records if isinstance(r.get("usage"), dict)]
    for r in with_usage:
        u = r["usage"]
        for key in TOKEN_FIELDS:
            if isinstance(u.get(key), int):
                totals[key] += u[key]
            else:
                missing[key] += 1
        counted += bool(u.get("counted"))
    cost = None
    if price_in is not None and price_out is not None and with_usage and not (missing["prompt_tokens"]
                                                                               or missing["completion_tokens"]):
        cost = round((totals["prompt_tokens"] * price_in + totals["completion_tokens"] * price_out) / 1e6, 10)
    return {**totals, "samples": len(with_usage), "samples_counted_locally": counted,
            "samples_missing": {k: v for k, v in missing.items() if v}, "price_in": price_in, "price_out": price_out,
            "cost": cost}


def short_answers(records: Sequence[Mapping[str, Any]]) -> int:
    """Graded records whose answer is not there: empty final content, or stopped within :data:`SHORT_TOKENS`
    tokens with nothing extracted."""
    return sum(1 for r in records if not str(r.get("completion", "")).strip()
               or (r.get("finish_reason") == "stop" and int(r.get("tokens") or 0) <= SHORT_TOKENS
                   and r.get("extracted") is None))


def short_answer_warning(records: Sequence[Mapping[str, Any]], api: str | None) -> str | None:
    """One line when more than :data:`SHORT_SHARE` of graded answers are short (:func:`short_answers`), with the
    likely cause and the flag that changes it; ``None`` otherwise.

    Example:
        >>> rows = [{"completion": "", "finish_reason": "stop", "tokens": 0, "extracted": None}] * 3
        >>> short_answer_warning(rows, "completions").split(":")[0]
        '3 of 3 answers (100%) are empty or stop within 3 tokens'
    """
    if not records:
        return None
    short = short_answers(records)
    if short <= SHORT_SHARE * len(records):
        return None
    head = f"{short} of {len(records)} answers ({short / len(records):.0%}) are empty or stop within {SHORT_TOKENS} tokens"
    only_reasoning = sum(1 for r in records if not str(r.get("completion", "")).strip() and r.get("reasoning"))
    if only_reasoning * 2 >= short:
        return (f"{head}: the model spent its answers on reasoning (reasoning kept, no final content); raise "
                "--max-response-tokens")
    if api == "completions":
        return (f"{head}: a chat model given raw text usually stops at once; drop --api completions (chat is the "
                "default with --endpoint)")
    return (f"{head}: the served model may not be a chat model, or its chat template may not fit the task; try "
            "--api completions")


__all__ = ["SHORT_SHARE", "SHORT_TOKENS", "TOKEN_FIELDS", "served_record", "short_answer_warning", "short_answers",
           "split_reasoning", "usage_totals"]
