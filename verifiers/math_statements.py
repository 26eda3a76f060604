"""Answers committed in words: ``Answer:`` labels, "the answer is X", "X is the answer", ``#### X``.

Concluding sentences ("So the final count is $2\\,500$.") live in
:mod:`dapo_env.verifiers.math_conclusions`; both share the helpers here (:func:`clip`, :func:`clean`,
:func:`hedged`, :func:`keyword_matches`).

Each finder returns :class:`Candidate` objects that carry their *own* position in the response (where
the value starts and ends, never the end of its line), so that the extraction policy in
:mod:`dapo_env.verifiers.math_extract` can order them. Every finder anchors on a short keyword, found
with ``str.rfind`` from the end of the response backwards (:func:`keyword_matches`), stops at the first
anchor that commits (at most :data:`MAX_ANCHORS`), and looks only at a bounded window around each
anchor, so the work is bounded however long the response is, and an answer committed early in a long
response is still found.

Example:
    >>> [(c.kind, c.value) for c in statement_candidates("So 3 + 4 = 7.\\nAnswer: 7 (three plus four)")]
    [('label', '7')]
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_VALUE_CHARS = 1000  # an answer written in words is clipped here
MAX_ANCHORS = 10_000  # per kind of keyword, at most this many (the last ones) are examined
_WINDOW = 200  # characters looked at before an anchor


@dataclass(frozen=True, slots=True)
class Candidate:
    """One committed answer found in a response.

    Attributes:
        value: the answer text as written (LaTeX, words, a box's content).
        start: index in the response where ``value`` starts.
        end: index just after ``value`` (the candidate's own position, used to order candidates).
        kind: ``"box"``, ``"label"`` (``Answer: X``), ``"statement"`` ("the answer is X"),
            ``"gsm8k"`` (``#### X``), ``"bare"`` (the response is only this answer),
            ``"conclusion"`` ("so the total is X."; a weaker commitment, see the policy), or
            ``"span"`` (lenient extraction's last math span or number).
    """

    value: str
    start: int
    end: int
    kind: str


def last_matches(pattern: re.Pattern[str], text: str, limit: int = MAX_ANCHORS) -> Iterable[re.Match[str]]:
    """The last ``limit`` matches of ``pattern`` in ``text`` (one linear scan, bounded memory)."""
    return deque(pattern.finditer(text), maxlen=limit)


def lowered(text: str) -> str:
    """``text`` in lower case with the same length (so positions agree), for keyword search."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def keyword_matches(text: str, lower: str, words: tuple[str, ...], pattern: re.Pattern[str],
                    limit: int = MAX_ANCHORS) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` where one of ``words`` occurs in ``lower``, from the last one backwards.

    Occurrences are found with ``str.rfind`` (a C-speed search, about a hundred times faster than a
    regex scan), then each is confirmed by ``pattern.match`` at its position; at most ``limit``
    occurrences are examined, and nothing is examined before the caller stops iterating.
    """
    positions = heapq.merge(*(_occurrences(lower, word) for word in words), reverse=True)
    for position in itertools.islice(positions, limit):
        m = pattern.match(text, position)
        if m is not None:
            yield m


def _occurrences(lower: str, word: str) -> Iterator[int]:
    end = len(lower)
    while (i := lower.rfind(word, 0, end)) >= 0:
        yield i
        end = i


# ---------------------------------------------------------------------------------------------------
# Where an answer written in words ends.
_CLAUSE_WORD = re.compile(r" (?:because|since|which|as|so|where|when|but|if|"
                          r"and\s+(?:so|then|this|that|the|it|we|i|our|which|thus|hence|therefore))\b")
_COMMA_WORD = re.compile(r",\s+[A-Za-z]{2,}")


def clip(text: str, start: int, *, clauses: bool = True) -> tuple[int, str]:
    """End of the answer that starts at ``text[start]``, and what ended it.

    The value ends at a line break, at ``. ; ! ?`` outside ``$...$`` and brackets (a ``.`` before a
    digit is a decimal point; a ``!`` right after a digit or a bracket is a factorial; escaped
    ``\\$ \\! \\;`` are LaTeX), or at ``, <word>`` / `` because ...`` outside brackets. The second
    value is the terminator: ``"."``, ``"?"``, ``"!"``, ``";"``, ``"\\n"``, ``","``, ``"word"`` or
    ``"end"`` (end of text or of the window). ``clauses=False`` finds the end of the whole sentence.

    Example:
        >>> t = "is 4! = 24. Then"
        >>> end, why = clip(t, 3); t[3:end], why
        ('4! = 24', '.')
    """
    in_math = False
    depth = 0
    stop = min(len(text), start + MAX_VALUE_CHARS)
    i = start
    while i < stop:
        ch = text[i]
        if ch == "\\":
            i += 2  # \$ \! \; \. \{ are LaTeX, not punctuation
            continue
        if ch == "\n":
            return i, "\n"
        if ch == "$":
            in_math = not in_math
        elif in_math:
            pass
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in "。？！":
            return i, {"。": ".", "？": "?", "！": "!"}[ch]
        elif ch in ".;!?":
            nxt = text[i + 1 : i + 2]
            if ch == "." and nxt.isdigit():
                pass
            elif ch == "!" and i > start and (text[i - 1].isdigit() or text[i - 1] in ")}") and not nxt.isalpha():
                pass  # 4! is a factorial
            else:
                return i, ch
        elif clauses and depth <= 0 and ch == "," and _COMMA_WORD.match(text, i):
            return i, ","
        elif clauses and depth <= 0 and ch == " " and _CLAUSE_WORD.match(text, i):
            return i, "word"
        i += 1
    return min(i, len(text)), "end"


# ---------------------------------------------------------------------------------------------------
# Cleaning a value and telling commitments from hedges.
_HEDGE = re.compile(
    r"(?i)^\s*(?:probably|maybe|perhaps|likely|possibly|not\b|n't\b|either\b|unclear|unknown|wrong|incorrect|"
    r"still|yet\b|going|somewhere|between|to\s+be\b|less\b|more\b|greater|smaller|larger|undetermined|"
    r"correct\b|right\b|valid\b|consistent|reasonable|as\s+follows|below|above|the\s+same|unchanged|"
    r"different|close\s+to|in\s+the\s+form|of\s+the\s+form|given\s+by|"
    r"what|how|whether|if\b|that\s+we|a\s+(?:number|value|multiple|function|fraction|positive|negative)\b)"
)
_INDEED = re.compile(r"(?i)^\s*(?:(?:indeed|definitely|clearly|simply|just|exactly|precisely|therefore|thus|then|"
                     r"approximately|approx\.?|about|around|roughly|equal\s+to)\s+)+")
_EXPLANATION = re.compile(r"\s+\((?![^()]*\\)(?=[^()]*[A-Za-z]{3,})[^()]*\)\s*\.?\s*$")  # "12 (since 3 x 4)"
_SUBJECT = re.compile(r"(?i)^[A-Za-z](?:[A-Za-z ,'-]|\$[A-Za-z]{1,8}\$)*?\s(?:is|are|equals|was|will\s+be)\s+(.+)$")
_NAMED = re.compile(r"\$[A-Za-z]{1,8}\$")  # "The largest $n$ is 34": a variable named in the subject
_TENTATIVE = re.compile(
    r"(?i)(?:\bif|whether|suppose|assum\w*|check\w*|think|guess|suspect|probably|maybe|might|seems?|likely|"
    r"perhaps|say|verify|test|confirm|expect\w*|hope|want|not|isn't|wasn't|could|would)\s+(?:that\s+)?"
    r"(?:the\s+|our\s+|my\s+|your\s+)?(?:final\s+|correct\s+|right\s+)?$"
)


def clean(value: str) -> str | None:
    """A committed value with explanations removed, or ``None`` for a hedge (``probably 7``).

    Example:
        >>> clean("The number of ways is 84"), clean("12 (since 3 times 4 is 12)"), clean("probably 7")
        ('84', '12', None)
    """
    value = _EXPLANATION.sub("", value).strip()
    sentence = _SUBJECT.match(value)
    if sentence and not re.search(r"[\d$\\]", _NAMED.sub("", value[: sentence.start(1)])):
        value = sentence.group(1)  # "Answer: The number of ways is 84" -> "84"
    value = _INDEED.sub("", value).strip()
    if not value or _HEDGE.match(value):
        return None
    return value


_HEDGE_BEFORE = re.compile(
    r"(?i)(?:\b(?:answer|it|result|value|this|that)\s+(?:might|may|could|would)\s+(?:be|equal)\b|"
    r"\b(?:probably|perhaps|maybe|possibly)\b|\bif\s+(?:the\s+)?(?:final\s+)?answer|\bwhether\b|\bnot\s+(?:be\s+)?$)"
    r"[^.!?\n]{0,40}$"
)
_HEDGE_AFTER = re.compile(r"(?i)[^.!?\n]{0,40}\b(?:not\s+(?:sure|certain|confident)|unsure|uncertain|or\s+not)\b|[\s$*)\]\\]*\?")
_COUNTERFACTUAL = re.compile(r"(?i)(?:^|[.!?\n]\s*)(?:if|suppose|supposing|assuming|had|were|unless)\b[^.!?\n]*"
                             r"\b(?:would|could|might)\s+(?:be|have\s+been|equal|give|yield|get)\b[^.!?\n]{0,40}$")


def hedged(text: str, start: int, end: int) -> bool:
    """Whether the value at ``text[start:end]`` is hedged, counterfactual or questioned ("the answer
    might be \\boxed{7}", "if the answer were \\boxed{12}", "\\boxed{7}, but I am not sure")."""
    before = text[max(0, start - 120) : start]
    return bool(_HEDGE_BEFORE.search(before) or _COUNTERFACTUAL.search(before) or _HEDGE_AFTER.match(text, end, end + 60))


def candidate_at(text: str, start: int, kind: str) -> Candidate | None:
    """The clipped, cleaned value starting at ``start`` as a candidate (``None`` if it is no answer).

    A value that starts on the next line (``the answer is`` and then a display block) is read there.
    """
    while start < len(text) and text[start] in " \t":
        start += 1
    if text.startswith("\n", start):
        block = _NEXT_BLOCK.match(text, start)
        display = _DISPLAY.match(text, block.end()) if block is not None else None
        if display is None:
            return None
        inner = display.group(1) if display.group(1) is not None else display.group(2)
        value = clean(inner.strip())
        return Candidate(value, block.end(), display.end(), kind) if value else None
    end, why = clip(text, start)
    if why == "?":
        return None  # "so the answer is 5?" is a question
    raw = text[start:end].rstrip()
    value = clean(raw)
    if value is None:
        return None
    return Candidate(value, start, start + len(raw), kind)


# ---------------------------------------------------------------------------------------------------
# "Answer: X" labels and "the answer is X" statements.
_ANCHOR = re.compile(r"(?i)\b(answer|choice|option)(?:s|\(s\))?\b|(答案)")
_CJK_LABEL = re.compile(r"\s*(?:是|为|[:：])\s*")
_LABEL_LINE_START = re.compile(
    r"(?i)[^\w\n]*(?:\\text(?:bf)?\{\s*)?(?:\*\*|__)?\s*(?:(?:my|the|our)\s+)?(?:final|correct)?\s*"
)
_LABEL_AFTER_SENTENCE = re.compile(r"(?i)(?:[.!?;:)$]|\\\])[ \t]+[*_#]*(?:(?:my|the|our)\s+)?(?:final\s+)?$")
_FINAL = re.compile(r"(?i)\bfinal\s+$")
_LABEL_COLON = re.compile(r"(?:\*\*|__)?[ \t]*\}?[ \t]*[:：=][ \t]*(?:\*\*|__|\})?[ \t]*")
_HEADING_REST = re.compile(r"(?:\*\*|__)?\s*\}?\s*[:：]?\s*(?:\*\*|__|\})?\s*")
_STATEMENT_BEFORE = re.compile(r"(?i)\b(?:the|our|my|final|correct|right|best|answer)\s+(?:final\s+|correct\s+)?$")
_STATEMENT_VERB = re.compile(
    r"(?i)\s+(?:to\s+(?:this|the|our)\s+(?:problem|question)\s+)?(?:is|was|=|:|would\s+be|will\s+be|"
    r"must\s+be|should\s+be)(?![A-Za-z])\s*[:：]?\s*(?:that\s+|then\s+)?"
)
_IS_THE_ANSWER = re.compile(r"(?i)\b(?:is|was)\s+(?:the|our|my)\s+(?:final\s+|correct\s+|right\s+)?$")
_NEXT_BLOCK = re.compile(r"[ \t]*\n(?:[ \t]*\n){0,3}[ \t]*")
_DISPLAY = re.compile(r"\$\$(.{1,1000}?)\$\$|\\\[(.{1,1000}?)\\\]", re.S)


def _label(text: str, m: re.Match[str]) -> Candidate | None:
    """``Answer: X``, ``**Final Answer:** X``, ``answer = X``, a ``Final Answer`` heading, or ``答案：X``."""
    if m.group(2) is not None:
        label = _CJK_LABEL.match(text, m.end())
        return candidate_at(text, label.end(), "label") if label is not None else None
    if m.group(1).lower() != "answer":
        return None
    if text[m.start() - 1 : m.start()] == "<" and text[m.end() : m.end() + 1] == ">":  # <answer>12</answer>
        close = text.find("</answer>", m.end(), m.end() + MAX_VALUE_CHARS)
        value = clean(text[m.end() + 1 : close].strip()) if close > 0 else None
        return Candidate(value, m.end() + 1, close, "label") if value else None
    line_start = text.rfind("\n", max(0, m.start() - _WINDOW), m.start()) + 1
    prefix = text[max(line_start, m.start() - _WINDOW) : m.start()]
    at_line_start = _LABEL_LINE_START.fullmatch(prefix) is not None
    if not (at_line_start or _LABEL_AFTER_SENTENCE.search(prefix) or _FINAL.search(prefix)):
        return None  # "we may check our answer: ..." is no label
    line_end = text.find("\n", m.end())
    line_end = len(text) if line_end < 0 else line_end
    colon = _LABEL_COLON.match(text, m.end())
    if colon is not None:
        pos = colon.end()
    elif at_line_start and _HEADING_REST.fullmatch(text, m.end(), line_end):
        pos = line_end  # "**Final Answer**" heading: the answer follows on the next lines
    else:
        return None
    if text[pos:line_end].strip():
        return _value_at(text, pos)
    block = _NEXT_BLOCK.match(text, line_end)
    return _value_at(text, block.end()) if block is not None else None


def _value_at(text: str, pos: int) -> Candidate | None:
    display = _DISPLAY.match(text, pos)
    if display is not None:
        inner = display.group(1) if display.group(1) is not None else display.group(2)
        value = clean(inner.strip())
        return Candidate(value, pos, display.end(), "label") if value else None
    return candidate_at(text, pos, "label")


def _statement(text: str, m: re.Match[str]) -> Candidate | None:
    """"the (final) answer is X", "the correct choice is (C)"; or "X is the answer"."""
    if m.group(2) is not None:
        return None
    before = text[max(0, m.start() - 40) : m.start()]
    verb = _STATEMENT_VERB.match(text, m.end())
    qualified = _STATEMENT_BEFORE.search(before)
    if m.group(1).lower() != "answer" and not (qualified and re.search(r"(?i)correct|right|best|final", before)):
        if not before.lower().rstrip().endswith("answer"):
            return None  # "one option is 5" is no commitment; "the answer choice is (C)" is
    if verb is not None and qualified is not None:
        if _TENTATIVE.search(before) or _COUNTERFACTUAL.search(text[max(0, m.start() - 200) : verb.end()]):
            return None  # "if the answer is 12", "I think the answer is 12", "If order mattered, the answer would be"
        return candidate_at(text, verb.end(), "statement")
    if _IS_THE_ANSWER.search(before) and re.match(r"\s*(?:[.!,;\n]|$)", text[m.end() : m.end() + 3]):
        return _answer_before(text, m.start() - len(_IS_THE_ANSWER.search(before).group(0)))
    return None


_BOUNDARY = re.compile(r"[.!?;:,]\s+|\n")
_LEAD_WORDS = re.compile(r"(?i)(?:(?:so|thus|therefore|hence|then|and|clearly|the|option|choice|answer|value|number)\b[\s,]*)+")


def _answer_before(text: str, end: int) -> Candidate | None:
    """The value in "X is the answer": the clause before ``is``, if it is short or ends in maths."""
    window_start = max(0, end - 300)
    segment = text[window_start:end]
    boundaries = list(_BOUNDARY.finditer(segment))
    start = window_start + (boundaries[-1].end() if boundaries else 0)
    lead = _LEAD_WORDS.match(text, start, end)
    if lead is not None and lead.end() < end:
        start = lead.end()
    while start < end and text[start].isspace():
        start += 1
    clause = text[start:end].rstrip()
    prose = re.findall(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+|\$[^$]*\$", " ", clause))
    if len(prose) > 3:
        span = re.search(r"\$[^$]{1,500}\$$", clause)
        if span is None:
            return None
        start, clause = start + span.start(), span.group(0)
    if re.match(r"(?i)(?:this|that|it|which|these|those|each|all|both)\b", clause):
        return None  # "so that number is the correct answer" points back at an earlier answer
    value = clean(clause)
    return Candidate(value, start, start + len(clause), "statement") if value else None


_CHOICE_CORRECT = re.compile(r"(?:\b(?i:option|choice)\s+)?(?<![\w(])(\(?[A-E]\)?)(?![\w)])(?:\*\*)?\s+is\s+"
                             r"(?:the\s+)?(?i:correct|right)\b(?!\s+(?:because|if|only))")
_GSM8K = re.compile(r"####[ \t]*(\S[^\n]*)")
_ANCHOR_WORDS = ("answer", "choice", "option", "答案")
_CORRECT_WORDS = (" is correct", " is the correct", " is right", " is the right")


def statement_candidates(text: str, lower: str | None = None) -> list[Candidate]:
    """The last answer committed in words of each kind, in order of position (see the module docstring).

    Keywords are examined from the end backwards and the first commitment found ends the search, so
    an answer followed by thousands of non-committing mentions of "answer" (a verification loop) is
    still found; at most :data:`MAX_ANCHORS` keywords are examined.
    """
    lower = lowered(text) if lower is None else lower
    found: list[Candidate] = []
    for m in keyword_matches(text, lower, _ANCHOR_WORDS, _ANCHOR):
        candidate = _label(text, m) or _statement(text, m)
        if candidate is not None:
            found.append(candidate)
            break
    for position in itertools.islice(heapq.merge(*(_occurrences(lower, w) for w in _CORRECT_WORDS), reverse=True),
                                     MAX_ANCHORS):
        window_start = max(0, position - 40)
        matches = list(_CHOICE_CORRECT.finditer(text, window_start, position + 20))  # "Option B is correct."
        if matches and matches[-1].end() > position:
            found.append(Candidate(matches[-1].group(1), matches[-1].start(1), matches[-1].end(1), "statement"))
            break
    for m in keyword_matches(text, text, ("####",), _GSM8K):
        line_start = text.rfind("\n", 0, m.start()) + 1
        value = clean(m.group(1)) if not text[line_start : m.start()].strip() else None
        if value:
            found.append(Candidate(value, m.start(1), m.end(1), "gsm8k"))
            break
    return sorted(found, key=lambda c: (c.end, c.start))


__all__ = ["Candidate", "candidate_at", "clean", "clip", "hedged", "keyword_matches", "last_matches", "lowered",
           "statement_candidates"]
