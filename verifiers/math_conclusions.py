"""Concluding sentences: the weakest commitment, counted only when the sentence ends the response.

"So the final count is $2\\,500$.", "Therefore 12 teams reach the final. (Check: ...)", "Since f(-x) =
f(x), the function is even.": a sentence with a marker (so, thus, therefore, hence, in total, ...) or a
final sentence stating what something is. It counts only as the response's final sentence (a check of
it or a short closing remark may follow), must end with a full stop or a line break, may not be a
hedge or a question, and must hold one unambiguous value. The extraction policy
(:mod:`dapo_env.verifiers.math_extract`) lets it override a stronger commitment only after a
correction (:data:`CORRECTION`).

Example:
    >>> [(c.kind, c.value) for c in conclusion_candidates("Adding up, so the final count is $2\\\\,500$.")]
    [('conclusion', '$2\\\\,500$')]
"""

from __future__ import annotations

import itertools
import re

from .math_statements import Candidate, candidate_at, clean, clip, keyword_matches, lowered

MAX_CONCLUSIONS = 8  # the last marker sentences examined


_MARKER = re.compile(
    r"(?i)\b(?:so|thus|therefore|hence|consequently|altogether|overall|finally|in\s+conclusion|in\s+total|"
    r"in\s+all|this\s+means(?:\s+that)?|which\s+means(?:\s+that)?|that\s+means|we\s+conclude(?:\s+that)?)\b"
    r"\s*,?\s*"
)
_NOT_CONCLUDING = re.compile(
    r"(?i)^(?:far|that\b|if\b|let|we\s+(?:need|have\s+to|must|should|can|want|will)|i\s|now\b|first|next|to\b|on\b|"
    r"for\s+(?:example|instance|each|every|the)|suppose|assum|maybe|perhaps|it\s+seems|we'll|i'll|let's)"
)
_WEAK_HEDGE = re.compile(r"(?i)\b(?:probably|maybe|perhaps|might|may|could|would|likely|possibly|seems?|"
                         r"not|guess|think|suppose|assume)\b|n't\b")
_COPULA = re.compile(
    r"(?i)^(?P<subject>[A-Za-z0-9][A-Za-z0-9 ,'’()+*/^-]{0,80}?)\s+(?:is|are|was|were|equals|will\s+be|must\s+be|"
    r"comes\s+to|totals|becomes|gives|yields|makes|earned|earns|has|have|had|gets|got|get|obtain|find|see)"
    r"\s+(?:that\s+|exactly\s+|a\s+total\s+of\s+|in\s+total\s+|of\s+)?"
)
_SPAN_LIST = re.compile(r"(?:\$[^$]{1,500}\$)(?:\s*(?:,|;|and|or|,\s*and|,\s*or)\s*\$[^$]{1,500}\$)*")
_CONTINUES = re.compile(r"\s*(?:[-+*/^=×÷·(\[\\]|(?:,|and|or)\s*[-+−]?\$?\d)")
_MATH_SPAN = re.compile(r"\$\$?([^$]{1,500})\$\$?|\\\((.{1,500}?)\\\)")
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.])(?:\*\*)?(?:\(?[A-E]\)\s*)?[-+−]?(?:\\\$|\$)?\d[\d,]*(?:\\,\d+)*(?:\.\d+)?(?:/\d+)?%?(?:\*\*)?(?![\w])"
)
_CHECK = re.compile(
    r"(?i)^[\s(\[*_]*(?:check|checking|verification|verify|verifying|double[- ]check|sanity\s+check|proof|"
    r"let\s+me\s+(?:verify|double[- ]check|check\s+(?:this|that|the|my|our|it))|let's\s+(?:verify|double[- ]check|"
    r"check\s+(?:this|that|the|our|it))|to\s+(?:verify|check|confirm)|we\s+can\s+(?:verify|check|confirm)|"
    r"as\s+a\s+check|indeed|this\s+(?:checks|matches|agrees|is\s+consistent))\b"
)
CORRECTION = re.compile(r"(?i)\b(?:wait|actually|mistake|error|incorrect|wrong|oops|correction|instead|"
                        r"recalculat\w*|recomput\w*|redo|re-do|misread|miscalculat\w*|not\s+correct)\b")


def _conclusion_value(clause: str) -> tuple[int, int] | None:
    """Start and end of the answer inside a concluding clause (``None`` if ambiguous).

    ``the final count is X`` / ``she has X left``: what follows the verb (a math span, a number or a
    few words); otherwise the clause's only math span or only number, or what follows its last ``=``.
    """
    copula = _COPULA.match(clause)
    if copula is not None and not re.search(r"[$\\=]", copula.group("subject")):
        rest = clause[copula.end() :].rstrip()
        spans = _SPAN_LIST.match(rest)
        if spans is not None and spans.end() > _MATH_SPAN.match(rest).end():  # "$x = 1$ or $x = 2$"
            return copula.end(), copula.end() + spans.end()
        span = _MATH_SPAN.match(rest)
        if span is None:
            span = _NUMBER_TOKEN.match(rest)
            if span is not None and _CONTINUES.match(rest, span.end()):
                span = None  # "2 + 3i", "2(5 + 3) = 16", "2 and -3": the whole expression or list
        if span is not None:
            return copula.end(), copula.end() + span.end()
        prose = re.findall(r"[A-Za-z]{3,}", re.sub(r"\\[A-Za-z]+", " ", rest))
        if rest and len(rest) <= 80 and len(prose) <= 4:
            return copula.end(), copula.end() + len(rest)  # "even", "Bob", "∞", "2x + 1"
        return None
    spans = list(_MATH_SPAN.finditer(clause))
    if len(spans) == 1:
        return spans[0].start(), spans[0].end()
    if spans and _SPAN_LIST.fullmatch(clause, spans[0].start(), spans[-1].end()):
        return spans[0].start(), spans[-1].end()  # "So $x = 1$ or $x = 2$."
    if spans:
        return None
    numbers = list(_NUMBER_TOKEN.finditer(clause))
    if len(numbers) > 1 and "=" in clause:  # "So 5 + 7 = 12."
        numbers = [n for n in numbers if n.start() > clause.rindex("=")]
    if len(numbers) == 1:
        return numbers[0].start(), numbers[0].end()
    return None


def _tail_is_closing(tail: str) -> bool:
    """What may follow a concluding sentence: nothing, a check of it, or a short closing remark."""
    tail = tail.strip()
    if not tail:
        return True
    if CORRECTION.search(tail):
        return False
    if _CHECK.match(tail):
        return True
    return len(tail) <= 100 and not re.search(r"\d", tail) and tail[-1] in ".!" and "?" not in tail


def conclusion_candidates(text: str, lower: str | None = None) -> list[Candidate]:
    """The concluding sentence of the response, if there is one: a sentence with a marker ("Therefore
    12 teams reach the final.", "..., so the final count is $2\\,500$."), or a final sentence stating
    what something is ("Since f(-x) = f(x), the function is even.").

    It must end the response (only a check of it or a short closing remark may follow), end with a
    full stop or a line break, be no hedge or question, and hold one unambiguous value.
    """
    lower = lowered(text) if lower is None else lower
    for m in itertools.islice(keyword_matches(text, lower, _MARKER_WORDS, _MARKER), MAX_CONCLUSIONS):
        found = _conclusion_at(text, m.end(), marked=True)
        if found is not None:
            return [found]
    for start in _last_sentence_starts(text):
        found = _conclusion_at(text, start, marked=False)
        if found is not None:
            return [found]
    return []


_MARKER_WORDS = ("so", "thus", "therefore", "hence", "consequently", "altogether", "overall", "finally", "in ",
                 "this means", "which means", "that means", "we conclude")


def _conclusion_at(text: str, start: int, *, marked: bool) -> Candidate | None:
    if marked and re.match(r"[ \t]*\n", text[start : start + 200]):  # "Therefore,\n$$x = 5$$"
        found = candidate_at(text, start, "conclusion")
        tail_ok = found is not None and _tail_is_closing(text[found.end :].lstrip(".").lstrip())
        return found if tail_ok else None
    if not marked:  # "Since f(-x) = f(x), the function is even.": the main clause states the value
        sentence_end, _ = clip(text, start, clauses=False)
        lead = _SUBORDINATE.match(text, start, sentence_end)
        start = lead.end() if lead is not None else start
        clauses = list(_LAST_CLAUSE.finditer(text, start, sentence_end))  # "It converges, and its limit is 1."
        start = clauses[-1].end() if clauses else start
        if not _DEFINITE_COPULA.match(text, start, sentence_end):
            return None
    clause_end, why = clip(text, start)
    sentence_end, why_sentence = clause_end, why
    if why in (",", "word"):  # "..., which matches the constraint."
        sentence_end, why_sentence = clip(text, clause_end, clauses=False)
        rest = text[clause_end:sentence_end]
        if re.search(r"[\d$\\=]", rest) and not _SAME_VALUE.match(rest):
            return None  # the sentence goes on to other values
    clause = text[start:clause_end]
    if why_sentence not in (".", "!", "\n", "end"):
        return None
    if why_sentence == "end" and not text[:sentence_end].rstrip().endswith(("$", "\\)", "\\]")):
        return None  # possibly cut off mid-sentence
    if _NOT_CONCLUDING.match(clause) or _WEAK_HEDGE.search(clause):
        return None
    if not _tail_is_closing(text[sentence_end + 1 :]):
        return None
    span = _conclusion_value(clause)
    value = clean(clause[span[0] : span[1]]) if span is not None else None
    return Candidate(value, start + span[0], start + span[1], "conclusion") if value else None


_SAME_VALUE = re.compile(r"(?i),?\s*(?:which|that)\s+is\s+(?:about|approximately|roughly|around|close\s+to|≈)")
_LAST_CLAUSE = re.compile(r",\s+(?:and|but)\s+(?=(?:the|its|their|our|this|it)\b)")
_SENTENCE_START = re.compile(r"^\s*|(?:(?<=[.!])\s+|\n\s*)(?=[A-Z])")
_SUBORDINATE = re.compile(r"(?i)(?:since|because|as|given|for|with|from|using|by|after)\b[^.]{0,200}?,\s+"
                          r"(?=(?:the|its|their|our|this|it|[a-z])\b)")
_DEFINITE_COPULA = re.compile(r"(?i)(?:the|its|their|our|this|it|[a-z])\b[A-Za-z0-9 ,'’-]{0,80}?\s"
                              r"(?:is|are|equals|has|have|contains|gives|yields)\s")


def _last_sentence_starts(text: str, lookback: int = 600) -> list[int]:
    """Starts of the last (at most three) sentences of ``text``, last first."""
    base = max(0, len(text) - lookback)
    starts = [base + m.end() for m in _SENTENCE_START.finditer(text, base)]
    return starts[::-1][:3]


__all__ = ["CORRECTION", "conclusion_candidates"]
