"""Final-answer extraction from model responses: a stated policy, separate from grading.

Policy (``answer_format="auto"``): look only at the last ``max_chars`` characters of the response and
collect every *committed* final answer:

* the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces; an unclosed box is ignored),
* a line of the form ``Answer: X`` / ``Final Answer: X`` (the DAPO prompt's required last line),
* an explicit statement ``the final answer is X`` / ``the answer is X`` (hedged ones such as
  ``the answer is probably ...`` do not count),
* GSM8K's ``#### X`` line.

The candidate that *ends last* in the text wins, so a later box overrides an earlier ``Answer:``
(self-correction) and ``The final answer is $\\boxed{5}$`` yields ``5``. A response with no candidate
has no answer (graded wrong); the "last number anywhere" fallback is opt-in.

Everything here is linear in the (capped) input and never raises.
"""

from __future__ import annotations

import re

BOX_COMMANDS = ("\\boxed", "\\fbox", "\\framebox")
MAX_BRACE_DEPTH = 64
MAX_ANSWER_CHARS = 1000

_ANSWER_LINE = re.compile(
    r"(?im)(?:^[^\w\n]*|(?<=[.!?:;)$])[ \t]+[^\w\n]*|final\s+)(?:final\s+)?answer\s*(?:\*\*)?\s*[:：=]\s*(?:\*\*)?[ \t]*([^\n]*)"
)
_ANSWER_IS = re.compile(
    r"(?i)\b(?:final\s+answer|the\s+answer|correct\s+answer)\s*(?:is|=|:|：|would\s+be|will\s+be)\s*[:：]?\s*"
    r"([^\n]*)"
)
_HEDGE = re.compile(r"(?i)^\s*(?:probably|maybe|perhaps|likely|not\b|either\b|unclear|wrong|incorrect|"
                    r"still|yet\b|going|somewhere|between|to\s+be\b|less|more|greater|smaller|undetermined|correct\b|right\b|"
                    r"valid\b|consistent|reasonable|as\s+follows|below|above|indeed|the\s+same|unchanged)")
_EXPLANATION = re.compile(r"\s+\((?=[^()]*[A-Za-z]{3,}\s)[^()]*\)\s*\.?\s*$")  # "12 (since 3 x 4)"
_SENTENCE = re.compile(r"(?i)^[A-Za-z][A-Za-z ,'-]*?\s(?:is|are|equals|was|will\s+be)\s+(.+)$")
_NEXT_LINE = re.compile(r"[ \t]*\n(?:[ \t]*\n){0,3}[ \t]*([^\n]{1,300})")
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
# "if the answer is 5, then ...", "I think the answer is 5": conditional or tentative, not a commitment.
_TENTATIVE = re.compile(r"(?i)(?:\bif|whether|suppose|assum\w*|check\w*|think|guess|suspect|probably|maybe|"
                        r"might|seems?|likely|perhaps|whether|say)\s+(?:that\s+)?(?:the\s+|our\s+|my\s+)?"
                        r"(?:final\s+|correct\s+)?$")
_GSM8K = re.compile(r"(?m)^\s*####\s*([^\n]+)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_DAPO_PATTERN = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


def tail(text: str, max_chars: int) -> str:
    """The last ``max_chars`` characters of ``text`` (the final answer lives at the end)."""
    return text if len(text) <= max_chars else text[-max_chars:]


def match_brace(text: str, open_idx: int, max_depth: int = MAX_BRACE_DEPTH, max_len: int = 1 << 62) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_idx``, or -1 if unbalanced, nested deeper than
    ``max_depth`` or longer than ``max_len`` characters.

    Escaped braces ``\\{`` and ``\\}`` count like plain ones (LaTeX sets keep them balanced).
    """
    depth = 0
    for i in range(open_idx, min(len(text), open_idx + max_len)):
        ch = text[i]
        if ch == "{":
            depth += 1
            if depth > max_depth:
                return -1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


_BOX = re.compile(r"\\(?:boxed|fbox|framebox)(?![A-Za-z])")
_BOX_JOIN = re.compile(r"[\s$.,;]*(?:and|,|\\text\{\s*and\s*\})?[\s$,;]*")
MAX_BOXES = 50


def boxes(text: str) -> tuple[list[tuple[str, int, int]], int]:
    """Complete boxes ``(content, start, end)`` in order, and the start of the last unclosed one (-1).

    Looks at the last :data:`MAX_BOXES` box commands only; ``\\boxed 5`` (no braces) counts for a
    single token.
    """
    found: list[tuple[str, int, int]] = []
    unclosed = -1
    for m in list(_BOX.finditer(text))[-MAX_BOXES:]:
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            end = match_brace(text, j, max_len=MAX_ANSWER_CHARS * 2)
            if end < 0:
                unclosed = m.start()
                continue
            found.append((text[j + 1 : end], m.start(), end + 1))
        else:
            token = re.match(r"[ \t]+([^\s$\\{}]+)", text[m.end() : m.end() + MAX_ANSWER_CHARS])
            if token is not None:
                found.append((token.group(1), m.start(), m.end() + token.end()))
    return found, unclosed


def last_boxed(text: str) -> tuple[str, int] | None:
    """Content and end index of the final boxed answer in ``text``, or ``None``.

    Unclosed boxes are skipped. Boxes at the very end that are joined only by ``and``/``,`` (``\\boxed{2}
    and \\boxed{3}``) form one answer ``2, 3``; boxes separated by working text do not (the last wins).
    """
    found, _ = boxes(text)
    found = [b for b in found if b[0].strip()]
    if not found:
        return None
    content, start, end = found[-1]
    parts = [content]
    for prev_content, prev_start, prev_end in reversed(found[:-1]):
        if not _BOX_JOIN.fullmatch(text[prev_end:start]):
            break
        parts.insert(0, prev_content)
        start = prev_start
    return ", ".join(parts), end


def _clip_statement(text: str) -> str:
    """Cut a ``the answer is X`` remainder at the end of its sentence.

    A sentence ends at ``.;!?`` outside ``$...$`` (a ``.`` followed by a digit is a decimal point)
    or at ``, <word>`` / `` because`` outside brackets.
    """
    in_math = False
    depth = 0
    for i, ch in enumerate(text):
        if i > 0 and text[i - 1] == "\\":
            continue  # \$ \! \; \. are LaTeX, not punctuation
        if ch == "$":
            in_math = not in_math
        elif in_math:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ".;!?" and not (ch == "." and text[i + 1 : i + 2].isdigit()):
            return text[:i]
        elif depth <= 0 and ch == "," and re.match(r",\s+[A-Za-z]{2,}", text[i:]):
            return text[:i]
        elif depth <= 0 and ch == " " and re.match(r" (?:because|since|which|as|so)\b", text[i:]):
            return text[:i]
    return text


def _statement_candidates(text: str) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for m in _ANSWER_LINE.finditer(text):
        raw, end = m.group(1), m.end()
        if not raw.strip():  # "**Answer:**" alone, the answer on the next non-empty line
            nxt = _NEXT_LINE.match(text, m.end())
            if nxt is None:
                continue
            raw, end = nxt.group(1), nxt.end()
        value = _EXPLANATION.sub("", _clip_statement(raw)).strip()
        sentence = _SENTENCE.match(value)
        if sentence:  # "Answer: The number of ways is 84" -> "84"
            value = sentence.group(1)
        if value and not _HEDGE.match(value):
            found.append((value, end))
    for m in _ANSWER_IS.finditer(text):
        value = m.group(1)
        if _HEDGE.match(value) or _TENTATIVE.search(text[max(0, m.start() - 40) : m.start()]):
            continue
        clipped = _clip_statement(value)
        if value[len(clipped) : len(clipped) + 1] == "?":
            continue  # "so the answer is 5?" is a question, not a commitment
        clipped = clipped.strip()
        if clipped:
            found.append((clipped, m.start(1) + len(clipped)))
    for m in _GSM8K.finditer(text):
        found.append((m.group(1).strip(), m.end()))
    return found


def extract_answer(response: str, *, answer_format: str = "auto", max_chars: int = 8000,
                   last_number_fallback: bool = False) -> str | None:
    """The response's final answer under the extraction policy, or ``None`` if it never commits.

    Args:
        response: the model's output.
        answer_format: ``"auto"`` (boxes, ``Answer:`` lines, explicit statements), ``"boxed"``
            (only ``\\boxed{}``/``\\fbox{}``) or ``"dapo"`` (the DAPO paper's rule: last
            ``Answer: X`` match in the last 300 characters).
        max_chars: only the last ``max_chars`` characters are scanned (``"dapo"`` always uses 300).
        last_number_fallback: opt in to taking the last number in the text when nothing else is found.

    Example:
        >>> extract_answer("so x = 3.\\n\\nAnswer: $3$")
        '$3$'
    """
    if answer_format == "dapo":
        matches = _DAPO_PATTERN.findall(response[-300:])
        return matches[-1] if matches else None
    text = tail(response, max_chars)
    if not text.isascii():
        text = text.translate(_FULLWIDTH)  # "Ａｎｓｗｅｒ：５" reads as "Answer:5"
    candidates: list[tuple[str, int]] = []
    boxed = last_boxed(text)
    if boxed is not None:
        candidates.append(boxed)
    if answer_format == "auto":
        candidates.extend(_statement_candidates(text))
    if candidates:
        # Latest end wins; on a tie (a box inside an Answer: line) the box, listed first, wins.
        value, value_end = max(enumerate(candidates), key=lambda ic: (ic[1][1], -ic[0]))[1]
        if boxes(text)[1] > value_end:
            return None  # the final box was cut off mid-way: the last commitment is incomplete
        if len(value) > MAX_ANSWER_CHARS:
            value = value[:MAX_ANSWER_CHARS]
        # An "Answer:" line that itself holds a box: the box is the answer.
        inner = last_boxed(value) if "box" in value else None
        return inner[0] if inner is not None else value
    if last_number_fallback:
        numbers = _NUMBER.findall(text[-2000:])
        return numbers[-1] if numbers else None
    return None


__all__ = ["extract_answer", "last_boxed", "match_brace", "tail"]
