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

_ANSWER_LINE = re.compile(r"(?i)(?<![A-Za-z])(?:final\s+)?answer\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(
    r"(?i)\b(?:final\s+answer|the\s+answer|correct\s+answer)\s*(?:is|=|:|：|would\s+be|will\s+be)\s*[:：]?\s*"
    r"([^\n]*)"
)
_HEDGE = re.compile(r"(?i)^\s*(?:probably|maybe|perhaps|likely|not\b|either\b|unclear|wrong|incorrect|"
                    r"still|yet\b|going|somewhere|between|to\s+be\b|less|more|greater|smaller|undetermined)")
_GSM8K = re.compile(r"(?m)^\s*####\s*([^\n]+)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_DAPO_PATTERN = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


def tail(text: str, max_chars: int) -> str:
    """The last ``max_chars`` characters of ``text`` (the final answer lives at the end)."""
    return text if len(text) <= max_chars else text[-max_chars:]


def match_brace(text: str, open_idx: int, max_depth: int = MAX_BRACE_DEPTH) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_idx``, or -1 if unbalanced or nested too deep.

    Escaped braces ``\\{`` and ``\\}`` count like plain ones (LaTeX sets keep them balanced).
    """
    depth = 0
    for i in range(open_idx, len(text)):
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


def last_boxed(text: str) -> tuple[str, int] | None:
    """Content and end index of the last complete ``\\boxed{}``/``\\fbox{}`` in ``text``.

    ``\\boxed 5`` (no braces) is accepted for a single token. Unclosed boxes are skipped, so a box cut
    off by truncation does not count, but an earlier complete one still does.
    """
    best: tuple[str, int] | None = None
    for cmd in BOX_COMMANDS:
        start = len(text)
        while True:
            idx = text.rfind(cmd, 0, start)
            if idx < 0:
                break
            start = idx
            j = idx + len(cmd)
            if cmd == "\\fbox" and text.startswith("\\fboxed", idx):  # not a separate command
                continue
            while j < len(text) and text[j] in " \t":
                j += 1
            if j < len(text) and text[j] == "{":
                end = match_brace(text, j)
                if end < 0:
                    continue
                found = (text[j + 1 : end], end + 1)
            else:
                m = re.match(r"[ \t]*([^\s$\\{}]+)", text[idx + len(cmd) :])
                if m is None or text[idx + len(cmd) : idx + len(cmd) + 1].isalpha():
                    continue
                found = (m.group(1), idx + len(cmd) + m.end())
            if best is None or found[1] > best[1]:
                best = found
            break
    return best


def _clip_statement(text: str) -> str:
    """Cut a ``the answer is X`` remainder at the end of its sentence.

    A sentence ends at ``.;!?`` outside ``$...$`` (a ``.`` followed by a digit is a decimal point)
    or at ``, <word>`` / `` because`` outside brackets.
    """
    in_math = False
    depth = 0
    for i, ch in enumerate(text):
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
        value = m.group(1).strip()
        if value:
            found.append((value, m.end()))
    for m in _ANSWER_IS.finditer(text):
        value = m.group(1)
        if _HEDGE.match(value):
            continue
        value = _clip_statement(value).strip()
        if value:
            found.append((value, m.start(1) + len(value)))
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
    candidates: list[tuple[str, int]] = []
    boxed = last_boxed(text)
    if boxed is not None:
        candidates.append(boxed)
    if answer_format == "auto":
        candidates.extend(_statement_candidates(text))
    if candidates:
        # Latest end wins; on a tie (a box inside an Answer: line) the box, listed first, wins.
        value, _ = max(enumerate(candidates), key=lambda ic: (ic[1][1], -ic[0]))[1]
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
