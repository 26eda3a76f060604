"""Rules, then a judge: an LLM judge asked only about the answers the rule verifier scored 0
(``dapo-env eval --judge-endpoint URL --judge-model NAME``).

The cascade (OpenCompass's): the task's rule verifier grades every answer; an answer it scored 0 that has
final content and was not cut at the token limit goes to the judge model, through the same OpenAI engine
(chat, greedy, paced and retried like the evaluated model's requests). The judge sees the question, the
reference answer and the response, and ends with ``VERDICT: CORRECT`` or ``VERDICT: INCORRECT``.

Per sample the record keeps ``judge = {"model", "prompt", "answer", "verdict", "error"}``: ``verdict`` is
``true``/``false``, or ``null`` with ``error`` set when the judge's request failed or its answer holds no
verdict (a **judge error**). A judge error is kept out of the rule+judge score exactly as a failed request
is kept out of every score (the problem leaves the metric that needs the sample); rule-only scores are
unaffected. ``correct`` stays the rule verifier's verdict: the summary's ``metrics`` are rule-only, its
``judge`` block holds the rule+judge metrics, how many verdicts the judge flipped and how many judge errors
there were. ``reverify`` re-runs the rules and reuses the stored verdicts, never asking the judge again.

Example:
    >>> parse_verdict("The response gives 0.5, which equals 1/2.\\nVERDICT: CORRECT")
    True
    >>> parse_verdict("verdict: incorrect"), parse_verdict("I think it is right")
    (False, None)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .served import split_reasoning

JUDGE_TEMPLATE = """You are grading an answer to a problem. Decide whether the response's final answer is \
equivalent to the reference answer (the same value, expression or choice, whatever its form). Ignore the \
reasoning; judge only the final answer.

Problem:
{question}

Reference answer:
{reference}

Response:
{response}

Explain in at most two sentences, then end with one line: VERDICT: CORRECT or VERDICT: INCORRECT"""

_VERDICT = re.compile(r"verdict\s*[:=]\s*\**\s*(correct|incorrect)\b", re.IGNORECASE)
#: The ``judge.error`` of an answer holding no verdict.
UNPARSEABLE = "judge_error: no VERDICT: CORRECT/INCORRECT line in the judge's answer"


def parse_verdict(text: str) -> bool | None:
    """The judge's verdict: the last ``VERDICT: CORRECT|INCORRECT`` of its final content (reasoning cut out);
    ``None`` when there is none."""
    final, _ = split_reasoning(text)
    found = _VERDICT.findall(final)
    return None if not found else found[-1].lower() == "correct"


def judge_prompt(question: str, reference: Any, response: str) -> str:
    """The judge's user message for one answer."""
    return JUDGE_TEMPLATE.format(question=question.strip(), reference=str(reference).strip(), response=response.strip())


def wants_judge(record: Mapping[str, Any]) -> bool:
    """Whether a record goes to the judge: graded (no failed request), scored 0 by the rules, with final
    content, not cut at the token limit, and without a verdict yet (never judged, or a judge error)."""
    from ..evaluation import is_failed

    return (not is_failed(record) and not record["correct"] and bool(str(record.get("completion", "")).strip())
            and record.get("finish_reason") != "length" and (not record.get("judge") or bool(judge_error(record))))


@dataclass(frozen=True, kw_only=True)
class JudgeSettings:
    """The judge model and how to ask it.

    Attributes:
        endpoint: the judge server's OpenAI base URL.
        model: the judge model's name there.
        max_tokens: the judge's answer budget.
    """

    endpoint: str
    model: str
    max_tokens: int = 512

    def __post_init__(self) -> None:
        if not self.endpoint or not self.model:
            raise ValueError("a judge needs both --judge-endpoint URL and --judge-model NAME")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"judge max_tokens {self.max_tokens!r}: must be an integer >= 1")

    def identity(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "model": self.model, "max_tokens": self.max_tokens}


class Judge:
    """Asks a judge model about the rules' negatives (see the module docstring).

    Args:
        settings: the judge model.
        engine: the engine that asks it (an :class:`~dapo_env.learners.openai_engine.OpenAIEngine` over chat
            that records failures; built from ``settings`` with ``endpoint_options`` when not given).
    """

    def __init__(self, settings: JudgeSettings, engine: Any = None, **endpoint_options: Any) -> None:
        from ..engines.openai_engine import EndpointConfig, OpenAIEngine

        self.settings = settings
        self.engine = engine or OpenAIEngine(EndpointConfig(base_url=settings.endpoint, model=settings.model,
                                                            api="chat", on_error="record", **endpoint_options))

    def judge(self, records: Sequence[dict[str, Any]], questions: Sequence[str],
              references: Sequence[Any]) -> list[dict[str, Any]]:
        """``records`` with a ``judge`` entry added to those :func:`wants_judge` picks (``questions[i]`` and
        ``references[i]`` belong to ``records[i]``); the others unchanged."""
        from ..engines import SamplingParams
        from ..engines.openai_engine import endpoint_error

        picked = [i for i, r in enumerate(records) if wants_judge(r)]
        out = [dict(r) for r in records]
        if not picked:
            return out
        prompts = [judge_prompt(questions[i], references[i], records[i]["completion"]) for i in picked]
        sampling = SamplingParams(temperature=0.0, max_response_tokens=self.settings.max_tokens, seed=0)
        answers = [group[0] for group in self.engine.generate(prompts, n=1, sampling=sampling)]
        for i, prompt, answer in zip(picked, prompts, answers):
            cause = endpoint_error(answer)
            verdict = None if cause is not None else parse_verdict(answer.text)
            error = (f"judge_error: {cause}" if cause is not None else UNPARSEABLE if verdict is None else None)
            out[i]["judge"] = {"model": self.settings.model, "prompt": prompt, "answer": answer.text,
                               "verdict": verdict, "error": error}
        return out


def judge_error(record: Mapping[str, Any]) -> str | None:
    """The judge error of a record, or ``None`` (not judged, or judged with a verdict)."""
    judged = record.get("judge")
    return judged.get("error") if isinstance(judged, dict) else None


def judged_correct(record: Mapping[str, Any]) -> bool:
    """The rule+judge verdict: right by the rules, or judged right."""
    judged = record.get("judge")
    return bool(record["correct"]) or (isinstance(judged, dict) and judged.get("verdict") is True)


__all__ = ["JUDGE_TEMPLATE", "Judge", "JudgeSettings", "UNPARSEABLE", "judge_error", "judge_prompt",
           "judged_correct", "parse_verdict", "wants_judge"]
