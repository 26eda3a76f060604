"""Final-answer extraction from model responses: a stated policy, separate from grading.

Policy (``extraction="strict"``, the default, meant for RL rewards): **the answer is the last
commitment** in the response. Commitments, each with its own position (where its value ends):

* a complete ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces; an unclosed box is none); boxes at
  the end joined only by ``and``, commas, ``\\quad``, ``\\text{and}`` or labels (``x = \\boxed{2},
  y = \\boxed{3}``) form one multi-part answer ``2, 3``; the same answer boxed twice is one answer;
* an ``Answer: X`` / ``**Final Answer:** X`` line, or a ``Final Answer`` heading with the answer on the
  next line or display block;
* a statement "the (final/correct) answer is X", "the correct choice is (C)", "X is the answer";
* GSM8K's ``#### X``;
* a response that is nothing but an answer expression (``42``, ``$\\frac{3}{4}$``, ``No.``);
* a concluding sentence ("So the final count is $2\\,500$.", "Therefore 12 teams reach the final.",
  "Thus, the function is even."): a weaker commitment that counts only as the response's final
  sentence (a check of it or a short closing remark may follow), and after a stronger commitment only
  when a correction ("wait", "actually", "mistake") comes between them.

Not commitments: hedges (``the answer is probably 7``), conditionals and tentative statements (``if the
answer is 12``, ``I think the answer is``), questions (``so the answer is 5?``). A response whose last
commitment is cut off (``... \\boxed{\\frac{14}{3``) or that never commits has no answer (graded
wrong). Checks written after a commitment do not override it.

``extraction="lenient"`` (for evaluation only, never for RL rewards: it rewards uncommitted text) takes
the strict answer if there is one, else the last math span or number anywhere in the response, like
Math-Verify's extraction.

Cost: the whole response is scanned (an answer committed early in a long response is never lost).
Keywords are found with ``str.rfind`` from the end backwards and examined until one commits (at most
:data:`~dapo_env.verifiers.math_statements.MAX_ANCHORS` per kind, each in a bounded window); only the
last :data:`MAX_BOXES` box commands are read.
"""

from __future__ import annotations

import itertools
import re

from .math_conclusions import CORRECTION, conclusion_candidates
from .math_cutoff import reads_cut_off
from .math_normalize import match_brace
from .math_statements import Candidate, clean, hedged, keyword_matches, last_matches, lowered, statement_candidates
from .math_words import words_to_number

BOX_COMMANDS = ("\\boxed", "\\fbox", "\\framebox")
MAX_ANSWER_CHARS = 4000  # a box's content is read up to this length
MAX_BOXES = 64  # only the last box commands are examined
MAX_BARE_CHARS = 300
EXTRACTIONS = ("strict", "lenient")

_BOX = re.compile(r"\\(?:boxed|fbox|framebox)(?![A-Za-z])")
_BOX_TOKEN = re.compile(r"[ \t]+([^\s$\\{}]+)")
_BOX_JOIN = re.compile(
    r"(?:[\s$.,;&]|\\[,;:! ]|\\q?quad|~|\\\\|\\[()\[\]]|\\text\{\s*(?:and|or|,)?\s*\}|\band\b|\bor\b"
    r"|(?:[A-Za-z](?:_\{?\w{1,3}\}?)?|\\[a-z]+)\s*="
    r"|\(?(?:[a-h]|i{1,3}|iv|vi{0,3})\)\s*:?|(?i:part)\s*\(?[a-h]\)?\s*:?)*"
)
_YES_NO = re.compile(r"(?i)[\s*_]*(yes|no)\b[*_]*[,.;:!](?!\s*(?:wait|hmm|let|but|actually|that|this|i|we|not|no|sorry|oops)\b)")
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_DAPO_PATTERN = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


def boxes(text: str) -> tuple[list[Candidate], int]:
    """Complete boxes among the last :data:`MAX_BOXES` box commands, in order of their end, and the
    start of the last unclosed one (-1 if none). ``\\boxed 5`` (no braces) boxes a single token.
    """
    found: list[Candidate] = []
    unclosed = -1
    matches = list(itertools.islice(keyword_matches(text, text, BOX_COMMANDS, _BOX), MAX_BOXES))
    for m in reversed(matches):
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            end = match_brace(text, j, max_len=MAX_ANSWER_CHARS)
            if end < 0:
                unclosed = m.start()
                continue
            found.append(Candidate(text[j + 1 : end], m.start(), end + 1, "box"))
        else:
            token = _BOX_TOKEN.match(text, m.end(), m.end() + MAX_ANSWER_CHARS)
            if token is not None:
                found.append(Candidate(token.group(1), m.start(), token.end(), "box"))
    found.sort(key=lambda c: c.end)
    return found, unclosed


def _last_box(text: str, found: list[Candidate]) -> Candidate | None:
    """The final box, joined with the boxes right before it that form one multi-part answer."""
    found = [b for b in found if b.value.strip() and not hedged(text, b.start, b.end)]
    if not found:
        return None
    last = found[-1]
    parts, start = [last.value], last.start
    for prev in reversed(found[:-1]):
        if prev.end > start or not _BOX_JOIN.fullmatch(text, prev.end, start):
            break  # nested in the next box, or separated by working text
        parts.insert(0, prev.value)
        start = prev.start
    if len({re.sub(r"\s+|\$", "", p) for p in parts}) == 1:
        parts = parts[-1:]  # the same answer boxed twice
    return Candidate(", ".join(parts), start, last.end, "box")


def bare_answer(text: str) -> Candidate | None:
    """The whole response as its answer, when it is nothing but an answer expression.

    One math block (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``), or one short line with at most
    three words and no question, hedge or dangling ``:``/``=``.

    Example:
        >>> bare_answer("  $\\\\frac{3}{4}$.\\n").value, bare_answer("No.").value, bare_answer("Let me see:")
        ('\\\\frac{3}{4}', 'No', None)
    """
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_BARE_CHARS:
        return None
    start = text.index(stripped[0])
    body = stripped[:-1].rstrip() if stripped.endswith(".") else stripped
    block = re.fullmatch(r"\$\$(.+)\$\$|\$([^$]+)\$|\\\[(.+)\\\]|\\\((.+)\\\)", body, re.S)
    if block is not None:
        inner = next(g for g in block.groups() if g is not None)
        if "$" in inner or "\\[" in inner or "\\(" in inner:
            return None
        value = inner.strip()
        offset = start + block.start(next(i for i, g in enumerate(block.groups(), 1) if g is not None))
        return Candidate(value, offset, offset + len(inner), "bare") if value else None
    if _MATRIX_ALONE.fullmatch(body):  # a matrix written over several lines
        return Candidate(body, start, start + len(body), "bare")
    if "\n" in body or body.endswith((":", "=", "?", ",")) or re.search(r"(?i)\banswer|\\boxed", body):
        return None
    if clean(body) is None:
        return None
    plain = re.sub(r"\\[A-Za-z]+(?:\{[A-Za-z*]*\})?", " ", _SIGN_WORD.sub("", body))  # \sqrt, \begin{pmatrix}
    plain = _MATH_WORDS.sub(" ", plain)  # sqrt(2)/2, 12 times 11
    words = re.findall(r"[A-Za-z]{2,}", plain)
    if words and not re.search(r"[\d\\]", body):
        if len(words) > 1 and words_to_number(body) is None:
            return None  # one word ("No", "even", "Monday") or a number in words
    elif re.search(r"[A-Za-z]{2,}[^\d]*\d", plain):
        return None  # words before the maths: a sentence ("we compute 3 + 4 = 7"), not an answer
    elif len(words) > 1 and not (len(words) == 2 and words[0].lower() in ("square", "cubic", "sq")):
        return None  # more than a unit after the maths ("$\\frac{3}{4}$ seems right")
    return Candidate(body, start, start + len(body), "bare")


_MATRIX_ALONE = re.compile(r"\\begin\{([pbvBV]?matrix)\}[^$]{0,1000}?\\end\{\1\}", re.S)
_MATH_WORDS = re.compile(r"(?i)\b(?:sqrt|sin|cos|tan|ln|log|exp|pi|times|mod|choose|and|or)\b")
_SIGN_WORD = re.compile(r"(?i)^(?:negative|minus)\s+")


def candidates(response: str, *, answer_format: str = "auto") -> list[Candidate]:
    """Every commitment in ``response`` (see the module docstring), in order of position.

    Example:
        >>> [(c.kind, c.value, c.end) for c in candidates("Final Answer: 12. Wait, no: \\\\boxed{14}.")]
        [('label', '12', 16), ('box', '14', 38)]
    """
    return _scan(response, answer_format)[0]


def _scan(response: str, answer_format: str) -> tuple[list[Candidate], int]:
    text = response if response.isascii() else response.translate(_FULLWIDTH)  # "Ａｎｓｗｅｒ：５"
    found, unclosed = boxes(text)
    box = _last_box(text, found)
    result = [box] if box is not None else []
    if answer_format == "auto":
        lower = lowered(text)
        result.extend(statement_candidates(text, lower))
        result.extend(conclusion_candidates(text, lower))
        yes_no = _YES_NO.match(text)  # "No, because 7 is odd.": a later commitment still wins
        if yes_no is not None:
            result.append(Candidate(yes_no.group(1), yes_no.start(1), yes_no.end(1), "bare"))
        elif not result:
            bare = bare_answer(text)
            result.extend([bare] if bare is not None else [])
    return sorted(result, key=lambda c: (c.end, c.kind != "box")), unclosed


def select(response: str, found: list[Candidate]) -> Candidate | None:
    """The last commitment under the policy: the latest strong one, unless a concluding sentence
    comes after it with a correction in between (or there is no strong one). A statement whose value
    holds a box (``The final answer is $\\boxed{5}$``) gives the box."""
    strong = [c for c in found if c.kind != "conclusion"]
    weak = [c for c in found if c.kind == "conclusion"]
    best = max(strong, key=lambda c: (c.end, c.kind == "box")) if strong else None
    if weak:
        last_weak = weak[-1]
        if best is None or (last_weak.start >= best.end and CORRECTION.search(response, best.end, last_weak.start)):
            best = last_weak
    if best is not None and best.kind != "box":
        inner = [c for c in found if c.kind == "box" and best.start <= c.start and c.end <= best.end]
        best = inner[-1] if inner else best
    return best


_NEGATED = re.compile(r"(?i)(?:\bnot\s+(?:equal\s+to\s+)?|n't\s+|\\neq?\s*|≠\s*)\$?$")
_LAST_SPAN = re.compile(r"\$\$([^$]{1,1000})\$\$|\$([^$]{1,1000})\$|\\\((.{1,1000}?)\\\)|\\\[(.{1,1000}?)\\\]", re.S)
_LAST_NUMBER = re.compile(r"(?<![A-Za-z\d])[-+]?(?:\d{1,2}:\d\d(?![\d:])|\d[\d,]*(?:\.\d+)?(?:[ \t]+\d+/\d+|\s*/\s*\d+)?%?)|\\[dt]?frac\{[^{}]{1,50}\}\{[^{}]{1,50}\}")


def lenient_answer(text: str) -> Candidate | None:
    """The last math span (``$...$``, ``\\(...\\)``, ``\\[...\\]``) or number in ``text``, whichever ends
    last (evaluation only: this reads uncommitted text).

    Example:
        >>> lenient_answer("I believe it is $\\\\frac{1}{2}$, roughly 0.5").value
        '0.5'
    """
    span = None
    for m in last_matches(_LAST_SPAN, text, 1):
        inner = next(g for g in m.groups() if g is not None)
        if inner.strip():
            span = Candidate(inner.strip(), m.start(), m.end(), "span")
    outside = _LAST_SPAN.sub(lambda m: " " * len(m.group(0)), text[-20000:]) if span else text[-20000:]
    offset = len(text) - len(outside)
    number = None
    for m in last_matches(_LAST_NUMBER, outside, 1):
        number = Candidate(m.group(0).rstrip(",").strip(), offset + m.start(), offset + m.end(), "span")
    options = [c for c in (span, number) if c is not None]
    chosen = max(options, key=lambda c: c.end) if options else (_number_in_words(text) or _choice_letter(text))
    if chosen is not None and _NEGATED.search(text, max(0, chosen.start - 16), chosen.start):
        return None  # "the answer is not 5": a value ruled out is no answer
    return chosen


_CARDINAL = (r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
             r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
             r"thousand|million|billion)")
_FRACTION_WORD = r"(?:halves|half|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|ninths?|tenths?)"
_NUMBER_WORDS = re.compile(rf"(?i)\b{_CARDINAL}(?:(?:[\s-]+|\s+and\s+)(?:{_CARDINAL}|a\b|{_FRACTION_WORD}))*\b")


def _number_in_words(text: str) -> Candidate | None:
    """The last number written in words in a response with no digits (``There are twelve students.``); a
    lone ``one`` is a pronoun more often than a number."""
    from .math_quantities import read_quantity  # lazy: quantities are read only for responses without digits

    found = None
    for m in last_matches(_NUMBER_WORDS, text, 1):
        if m.group(0).lower() != "one" and read_quantity(m.group(0)) is not None:  # "two and three quarters"
            found = Candidate(m.group(0), m.start(), m.end(), "span")
    return found


_LEADING_LETTER = re.compile(r"\s*\(?([A-E])[.):](?:\s|$)")
_LONE_LETTER = re.compile(r"(?<![\w\\$])([B-E]|A(?!\s+[a-z]))(?![\w$])")


def _choice_letter(text: str) -> Candidate | None:
    """A choice letter in a response with no number or math at all: a leading label (``A. Because B is
    not valid`` gives ``A``), else the only capital A-E standing alone (``Because B is valid``)."""
    lead = _LEADING_LETTER.match(text)
    if lead is not None:
        return Candidate(lead.group(1), lead.start(1), lead.end(1), "span")
    found = list(_LONE_LETTER.finditer(text[:2000]))
    if len({m.group(1) for m in found}) != 1:
        return None
    return Candidate(found[-1].group(1), found[-1].start(1), found[-1].end(1), "span")


def extract_candidate(response: str, *, answer_format: str = "auto", extraction: str = "strict") -> Candidate | None:
    """:func:`extract_answer`'s choice with its position in ``response`` (``answer_format`` ``"auto"`` or
    ``"boxed"``): what comes right after it (a unit, ``p.m.``) can then be read too."""
    found, unclosed = _scan(response, answer_format)
    chosen = select(response, found)
    if unclosed >= 0 and (chosen is None or unclosed >= chosen.start):
        return None  # the final box was cut off mid-way: the last commitment is incomplete
    if chosen is None and extraction == "lenient" and not reads_cut_off(
            response, is_answer=lambda line: bare_answer(line) is not None):
        chosen = lenient_answer(response)
    return chosen


def extract_answer(response: str, *, answer_format: str = "auto", extraction: str = "strict") -> str | None:
    """The response's final answer under the extraction policy, or ``None`` if it never commits.

    Args:
        response: the model's output.
        answer_format: ``"auto"`` (every kind of commitment), ``"boxed"`` (only ``\\boxed{}``/``\\fbox{}``)
            or ``"dapo"`` (the DAPO paper's rule: last ``Answer: X`` match in the last 300 characters).
        extraction: ``"strict"`` (commitments only) or ``"lenient"`` (else the last math span or number,
            unless the response reads as cut off mid-working: :func:`~dapo_env.verifiers.math_cutoff.reads_cut_off`).

    Example:
        >>> extract_answer("so x = 3.\\n\\nAnswer: $3$"), extract_answer("x is 3 or 4"), extract_answer("7")
        ('$3$', None, '7')
    """
    if answer_format == "dapo":
        matches = _DAPO_PATTERN.findall(response[-300:])
        return matches[-1] if matches else None
    chosen = extract_candidate(response, answer_format=answer_format, extraction=extraction)
    return chosen.value[:MAX_ANSWER_CHARS] if chosen is not None else None

__all__ = ["Candidate", "bare_answer", "boxes", "candidates", "extract_answer", "extract_candidate", "lenient_answer",
           "match_brace", "select"]
