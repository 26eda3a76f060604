"""Is a response cut off mid-working? Lenient extraction reads no number out of one that is.

Lenient extraction (evaluation only) falls back to the last math span or number of a response that never
commits. A response that stops mid-working (a generation limit, a stream cut) has no final answer at
all, whatever numbers its working holds, so :func:`reads_cut_off` turns that fallback off when the
text visibly stops before its end:

* an open construct: a ``$...`` span whose maths runs to the end (``$n^2 = 10^2 = 1``), an unclosed
  ``\\[``/``\\(``, more ``{`` than ``}``, an unclosed ``<think>``;
* a dangling end: an operator, ``=``, a comma, a colon or an opening bracket; a LaTeX operator
  (``\\times``, ``\\frac``); a word that cannot end a sentence (``the``, ``and``, ``we``, ``into``, ``is``);
* a last sentence with no number that announces more working (``Now we need to subtract the rotten
  ones.``, ``Next, let's check the second case.``);
* working that stops without closing (a chat template's end tokens, ``<|im_end|>``, ``</s>``, are not text): two or more sentences or lines whose last one ends with no full
  stop, ``!``, ``?``, closing bracket, quote, ``*`` or ``$``, unless that last line is itself a bare answer
  (a final ``21`` under the working, as PRM800K's ``# Answer`` blocks and many models write it) or a
  summary line (``Total: 42``).

A one-line uncommitted answer (``Computing gives 12 and then 24``, ``Hmm, 42 maybe?``) is not cut off.

Example:
    >>> reads_cut_off("So far we have 120 ways. For the second part we"), reads_cut_off("I believe it's $5$.")
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable

TAIL_CHARS = 2000  # only the end of a response is examined

_DANGLING_WORDS = frozenset(
    "the a an to of and or but then so is are was were be been we i it its this that which for with by from into "
    "in on at as if when since because gives give get gets got has have had equals plus minus times over than "
    "let let's now next first second third our their my can will would should must need each per find compute "
    "calculate subtract add multiply divide dividing multiplying adding subtracting using use not also both either "
    "whose where while there here these those what how why who".split())
_DANGLING_COMMANDS = re.compile(r"\\(?:times|cdot|div|frac|dfrac|tfrac|sqrt|pm|mp|le|ge|leq|geq|ne|neq|lt|gt|approx|"
                                r"equiv|cup|cap|in|left|begin|quad|qquad|text|mathrm|boxed|to|implies|Rightarrow|"
                                r"rightarrow|sum|prod|int|binom)\s*$")
_OPEN_END = "=+-*/^_({[,:;\\&<>|"
_CLOSED_END = ".!?)]}$*\"'`\u3002\uff01\uff1f"
_SUMMARY_LINE = re.compile(r"[\W_]*[A-Za-z][A-Za-z ]{0,30}:\s*\S.{0,60}")  # "Total: 42" under the working
_SENTENCE_BREAK = re.compile(r"(?:[A-Za-z0-9]{2}|[$)\]}])[.!?]\s+\S|\n\s*\S")  # "C. Because ..." is one answer
_END_TOKENS = re.compile(r"(?:\s*(?:<\|[A-Za-z_]{1,30}\|>|</s>|<eos>)(?:\s*(?:user|assistant|system)\b)?)+\s*$")
_MATH_INSIDE = re.compile(r"\\|\^|_|\{|=")


def reads_cut_off(text: str, *, is_answer: Callable[[str], bool] = lambda line: False) -> bool:
    """Whether ``text`` stops before its end (the module docstring's signs). ``is_answer(line)``: whether a last
    line that is nothing but an answer expression closes the response (the extractor passes its own reading;
    this module imports nothing of it)."""
    tail = _END_TOKENS.sub("", text[-TAIL_CHARS:]).rstrip()  # "... is 2/3. <|im_start|>user": a chat template's end
    if not tail:
        return False
    if _open_construct(text, tail):
        return True
    bold = tail.endswith(("**", "__"))  # "That gives **42**": markdown bold closes what it wraps
    tail = tail.rstrip("*_").rstrip() if bold else tail
    if not tail:
        return True
    if tail[-1] in _OPEN_END or _DANGLING_COMMANDS.search(tail):
        return True
    last_word = re.search(r"([A-Za-z']+)$", tail)
    if last_word is not None and last_word.group(1).lower() in _DANGLING_WORDS:
        return True
    if not _SENTENCE_BREAK.search(tail.strip()):
        return False
    if tail[-1] in ".:" and announces_more(tail):
        return True
    if bold or tail[-1] in _CLOSED_END:
        return False
    last_line = tail.rsplit("\n", 1)[-1].strip()
    return "\n" not in tail or (not is_answer(last_line) and not _SUMMARY_LINE.fullmatch(last_line))


_MORE_WORK = re.compile(
    r"(?i)^(?:now|next|then|first|second|after\s+that|moving\s+on|let's|let\s+me|let\s+us|we\s+(?:now\s+)?(?:need|have|"
    r"must|will|should|still|can\s+now)|i\s+(?:need|will|should)|to\s+(?:find|compute|get|solve|do|check|verify))\b")


def announces_more(tail: str) -> bool:
    """The last sentence, with no number or maths, announces more working ("Now we need to subtract the
    rotten ones."): the response stopped before doing it."""
    body = tail.rstrip(".:").rstrip()
    last = re.split(r"(?<=[.!?])\s+|\n", body)[-1].strip()
    return len(last) < len(body) and not re.search(r"[\d$\\=]", last) and bool(_MORE_WORK.match(last))


def _open_construct(text: str, tail: str) -> bool:
    if "<think>" in text and "</think>" not in text:
        return True
    if tail.rfind("\\[") > tail.rfind("\\]") or tail.rfind("\\(") > tail.rfind("\\)"):
        return True
    if tail.count("{") - tail.count("\\{") > tail.count("}") - tail.count("\\}"):
        return True
    dollars = [m.start() for m in re.finditer(r"(?<!\\)\$", tail)]
    if len(dollars) % 2 == 1:  # "$n^2 = 10^2 = 1": an open span of maths ("costs $20 for it" is money)
        return bool(_MATH_INSIDE.search(tail, dollars[-1] + 1))
    return False


__all__ = ["announces_more", "reads_cut_off"]
