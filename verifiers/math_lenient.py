"""What ``extraction="lenient"`` adds to grading: evaluation habits that are too loose for RL rewards.

Lenient grading first grades the pair exactly as strict mode does (:func:`~dapo_env.verifiers.math.grade`);
only a pair that is not equal there is retried in relaxed forms, each an evaluation convention of the
field's graders (Math-Verify, verl):

* **the gold read like a response** (:func:`lenient_gold`): a whole solution's last box, ``####`` line or
  answer line is its answer;
* **labelled answers**: a gold ``AB=4``, ``V_1:V_2=11:21``, ``|AB|=1``, ``\\frac{NO}{BO}=...`` accepts its
  value (the label has no digits outside subscripts and no ``+``/``-``; ``x+2y=0`` stays an equation),
  also item by item (``AB=4,CD=5`` against ``4, 5``);
* **notations**: ``;`` between tuple entries (``(0;-2;6)``); ``\\text{ and }`` or ``\\quad`` between
  answers as a comma; a list of tuples with repeats dropped;
* **sentences as answers**: ``Final Answer: Jane started 3 hours ago.`` is graded on its last number or
  math span;
* **rounded decimals** (:data:`MIN_SIGNIFICANT`): a decimal prediction with at least 4 significant
  digits accepts an exact rational gold that rounds to it at the prediction's own places (``0.3333``
  for ``1/3``, ``2.6667`` for ``8/3``; never ``0.33`` for ``1/3`` nor ``1.414`` for ``\\sqrt{2}``; strict
  mode never accepts an approximation), also item by item in a tuple or interval (``(0.6,2.6667]``).

Example:
    >>> grade_lenient("4", "AB=4"), grade_lenient("0.3333", "\\\\frac{1}{3}")[0], grade_lenient("0.33", "1/3")[0]
    ((True, 'equal:string'), True, False)
"""

from __future__ import annotations

import re
from fractions import Fraction

from .math_choices import base_verdict, choice_verdict, read_choice
from .math_cutoff import announces_more
from .math_extract import (
    MAX_ANSWER_CHARS,
    bare_answer,
    extract_answer,
    extract_candidate,
    lenient_answer,
)
from .math_grade import grade as strict_grade
from .math_normalize import canonical, parse_number
from .math_quantities import quantity_verdict, read_quantity

MIN_SIGNIFICANT = 4  # a rounded decimal needs this many significant digits to stand for an exact value
_LABEL = r"(?:[A-Za-z|:\\{}_ ]|_\{?\w+\}?|\\frac\{[A-Za-z]+\}\{[A-Za-z]+\})+"
_LABELLED = re.compile(rf"\s*(?P<label>{_LABEL})=(?P<value>[^=]+)")
_AND = re.compile(r"\\text\{\s*(?:and|or)\s*\}|\\quad|\\qquad")
_SEMICOLON_TUPLE = re.compile(r"\(([^()]*;[^()]*)\)")
_DECIMAL = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+)")


def lenient_gold(gold: str) -> str:
    """The gold read like a response: a bare answer stays as it is; a solution text gives its final
    answer (last box, ``####`` line, answer line, else its last math span or number).

    Example:
        >>> lenient_gold("So the answer is: \\\\[ \\\\boxed{32349} \\\\]"), lenient_gold("$x \\\\in [-2,7]$")
        ('32349', '$x \\\\in [-2,7]$')
    """
    boxed_alone = re.fullmatch(r"\s*\$?\\boxed\{.*\}\$?\s*", gold, re.S) is not None
    if not boxed_alone and (bare_answer(gold) is not None or not _reads_like_text(gold)):
        return gold
    found = extract_answer(gold, extraction="lenient")
    return found if found is not None and found.strip() else gold


def _reads_like_text(gold: str) -> bool:
    """A box, a ``####`` line, an answer keyword or a sentence (4 words outside the maths)."""
    if re.search(r"\\boxed|\\fbox|####|(?i:answer)", gold):
        return True
    return _prose_words(gold) >= 4


def _prose_words(text: str) -> int:
    """Words of two or more letters outside math spans and LaTeX commands."""
    prose = re.sub(r"\$[^$]*\$|\\\[.*?\\\]|\\\(.*?\\\)|\\[A-Za-z]+(?:\{[^{}]*\})?", " ", text, flags=re.S)
    return len(re.findall(r"[A-Za-z]{2,}", prose))


def grade_lenient(pred: str, gold: str) -> tuple[bool | None, str]:
    """Round 4's readings first (choices, base-n numerals, quantities with units, times and dates: each
    decides when it reads both sides), then :func:`~dapo_env.verifiers.math.grade` and the relaxed forms of
    the module docstring."""
    verdict = choice_verdict(pred, gold, _values_equal)
    if verdict is not None:
        return verdict, "equal:choice" if verdict else "not_equal"
    verdict = base_verdict(pred, gold)
    if verdict is not None:
        return verdict, "equal:string" if verdict else "not_equal"
    verdict = quantity_verdict(_without_label(pred), _without_label(gold))
    if verdict is not None:
        return verdict, "equal:numeric" if verdict else "not_equal"
    verdict, reason = strict_grade(pred, gold)
    if verdict:
        return verdict, reason
    for p, g in _relaxed(pred, gold):
        again, why = strict_grade(p, g)
        if again:
            return again, why
    if _rounded_decimal(pred, gold):
        return True, "equal:numeric"
    return verdict, reason


def _values_equal(pred: str, gold: str) -> bool:
    """An option's text against the response's value (exact grading only: choices are short)."""
    verdict = quantity_verdict(pred, gold)
    return verdict if verdict is not None else strict_grade(pred, gold)[0] is True


_LABEL_PREFIX = re.compile(r"^\s*\$?\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?=[^=]+$)")


def _without_label(text: str) -> str:
    """``t = 3 \\text{ hours}`` -> ``3 \\text{ hours}``: a lone variable's value."""
    return _LABEL_PREFIX.sub("", text, count=1)


_TAIL_WORD = re.compile(
    r"(?i)\$?[ \t]*(?:(?P<mer>[ap]\.\s?m\.|[ap]m\b)|(?P<scale>thousand|million|billion|trillion)\b|"
    r"(?P<unit>(?:(?:square|sq|cubic)\s+)?[A-Za-z/%]+(?:\s+per\s+[a-z]+)?(?:\^\{?[23]\}?)?)|(?P<pct>%))")
_LEADING_PART = re.compile(r"(\d[\d.]*\s*[A-Za-z]+\s*(?:,\s*|and\s+|,\s*and\s+)?)$")
_MONTH_ONLY = re.compile(r"(?i)(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)")
_DAY_AFTER = re.compile(r"\.?\s*(\d{1,2}(?:st|nd|rd|th)?(?:,?\s*\d{4})?)\b")
_DOLLAR_IN_MATH = re.compile(r"(?<![\\$])\$\\\$(?=\s*\d)")
_TEXT_OPEN = re.compile(r"^\$?[ \t]*(?:\\[,;: ]|~)*[ \t]*\\(?:text|mathrm|mbox|textrm)\s*\{[ \t~]*")
_SHORT_UNITS = frozenset({"in", "m", "s", "h", "l", "g", "min", "mi", "ft", "cm", "mm", "km", "kg", "yd", "oz", "lb",
                          "hr", "sec", "rad", "deg", "ml", "gal", "cu", "sq"})


def lenient_extract(response: str, answer_format: str = "auto") -> str | None:
    """Lenient extraction (:func:`~dapo_env.verifiers.math_extract.extract_answer` with
    ``extraction="lenient"``), with what the answer's own text continues into: a unit, ``a.m.``/``p.m.`` or
    a scale word right after a number (``So the distance is 5 m.`` gives ``5 m``; ``\\boxed{40}$ liters``
    gives ``40 liters``), so that a unit can be checked. A concluding sentence followed by one that announces
    more working (``Next, let's find the area.``) is no answer here: the response stopped mid-working.

    Example:
        >>> lenient_extract("So the distance is 5 m."), lenient_extract("Answer: 3:30 p.m.")
        ('5 m', '3:30 p.m.')
    """
    response = response.replace("{,}", ",")  # "\\$1{,}250": LaTeX's thousands comma, read as a comma
    response = _DOLLAR_IN_MATH.sub(r"\\$$", response)  # "$\\$1,250$" -> "\\$$1,250$": the sign outside the maths
    whole = response.strip()
    if answer_format == "auto" and len(whole) <= 120 and (read_quantity(whole) is not None or (
            len(whole) <= 60 and read_choice(whole)[0] is not None and not re.search(r"(?i)answer|\\boxed", whole))):
        return whole  # "864 \\mbox{ inches}^2", "Option B: 15": the whole response is one answer
    chosen = extract_candidate(response, answer_format=answer_format, extraction="lenient")
    if chosen is None or (chosen.kind == "conclusion" and announces_more(response.rstrip())):
        return None  # "..., so the hypotenuse is 13. Next, let's find the area.": the working goes on
    value, end = chosen.value[:MAX_ANSWER_CHARS], chosen.end
    clock = re.match(r"(?::\d{1,3})+(?!\d|\.\d)", response[end:]) if re.search(r"(?<![\d.])\d{1,3}$", value) else None
    if clock is not None:  # "So, the time is 2:45 p.m.", "the ratio is 3:4.": the number was cut at the colon
        value, end = value + clock.group(0), end + clock.end()
    day = _DAY_AFTER.match(response, end) if _MONTH_ONLY.fullmatch(value.strip()) else None
    if day is not None:  # "The answer is Dec. 25.": the statement stopped at the abbreviation's full stop
        return value.strip() + " " + day.group(1)
    if re.search(r"\d\s*[ap]$", value, re.I) and re.match(r"\.?\s?m\b\.?", response[end:], re.I):
        value = value[:-1].rstrip() + " " + value[-1] + ".m."  # "3:30 p" cut at the full stop of "p.m."
        return value
    return _with_leading_part(response, chosen.start, _with_unit_after(response, value, end))


def _with_unit_after(response: str, value: str, end: int) -> str:
    """``value`` with the unit, ``a.m.``/``p.m.`` or scale word the response writes right after it."""
    quantity = read_quantity(value)
    if quantity is None or quantity.dimension is not None or not re.search(r"[\d}]\s*\$?$", value):
        return value
    tail = _TEXT_OPEN.sub("", response[end : end + 60], count=1)  # "\\boxed{5}\\text{ m}"
    m = _TAIL_WORD.match(tail.lstrip(" \t"))
    if m is None:
        return value
    word = m.group(0).lstrip("$").strip()
    after = tail.lstrip(" \t")[m.end():]
    if m.group("unit") is not None:
        name = m.group("unit").lower()
        known = read_quantity("1 " + word)
        if known is None or known.dimension in (None, "count"):
            return value
        if name in _SHORT_UNITS and not re.match(r"\s*(?:[.,;:!?)\]}$]|$)", after):
            return value  # "12 in total": a short unit needs the sentence to end after it
    return f"{value} {word}"


def _with_leading_part(response: str, start: int, value: str) -> str:
    """``20 minutes`` read from "1 hour and 20 minutes": the parts before it in the same dimension join it."""
    quantity = read_quantity(value)
    if quantity is None or quantity.dimension in (None, "count"):
        return value
    lead = _LEADING_PART.search(response, max(0, start - 40), start)
    joined = read_quantity(lead.group(1) + value) if lead is not None else None
    return lead.group(1) + value if joined is not None and joined.dimension == quantity.dimension else value


def _relaxed(pred: str, gold: str) -> list[tuple[str, str]]:
    p, g = _notation(pred), _notation(gold)
    pairs = [(p, g)]
    if "\\approx" in p:  # "x = 5+5+1 = 1/3 \\approx 0.33": the exact value, else what it approximates
        before, after = p.split("\\approx", 1)[0], p.rsplit("\\approx", 1)[1]
        pairs.append((before.rsplit("=", 1)[1] if "=" in before else after, g))
    value = _label_value(g)
    if value is not None and "=" not in p:
        pairs.append((p, value))
    items = [_label_value(item) for item in g.split(",")] if "=" in g and "," in g else []
    if items and all(items) and "=" not in p:
        pairs.append((p, "(" + ",".join(items) + ")"))  # labelled parts keep their order
    unique = _dedupe(p)
    if unique != p:
        pairs.append((unique, _dedupe(g)))
    if _prose_words(p) >= 3:  # "Jane started growing Sphere 3 hours ago": the sentence's last number or maths
        inner = lenient_answer(p)
        pairs.extend([(inner.value, g)] if inner is not None else [])
    rounded = _rounded_items(p, g)
    pairs.extend([(rounded, g)] if rounded is not None else [])
    return pairs


def _rounded_items(pred: str, gold: str) -> str | None:
    """``(0.6,2.6667]`` against ``(\\frac35,\\frac83]``: each item that is a rounded decimal of the gold's item
    takes the gold's item (same brackets, same number of items); ``None`` when nothing changes."""
    p, g = canonical(pred), canonical(gold)
    if len(p) < 3 or len(g) < 3 or (p[0], p[-1]) != (g[0], g[-1]) or p[0] not in "([":
        return None
    pitems, gitems = p[1:-1].split(","), g[1:-1].split(",")
    if len(pitems) != len(gitems) or len(pitems) < 2:
        return None
    items = [gi if _rounded_decimal(pi, gi) else pi for pi, gi in zip(pitems, gitems)]
    return p[0] + ",".join(items) + p[-1] if items != pitems else None


def _notation(text: str) -> str:
    text = _AND.sub(",", text)
    return _SEMICOLON_TUPLE.sub(lambda m: "(" + m.group(1).replace(";", ",") + ")", text)


def _label_value(gold: str) -> str | None:
    """``AB=4`` -> ``4``: the value of a labelled gold (``None`` when the left side is not a label)."""
    match = _LABELLED.fullmatch(canonical(gold))
    if match is None or re.search(r"[+\-\d]", re.sub(r"_\{?\w+\}?", "", match.group("label"))):
        return None
    return match.group("value")


def _dedupe(text: str) -> str:
    """A bare list of tuples with repeats dropped (``(1,2),(1,2),(3,4)`` -> ``(1,2),(3,4)``)."""
    items = re.findall(r"\([^()]*\)", canonical(text))
    if len(items) < 2 or ",".join(items) != canonical(text):
        return text
    return ",".join(dict.fromkeys(items))


def _rounded_decimal(pred: str, gold: str) -> bool:
    """A decimal with >= :data:`MIN_SIGNIFICANT` significant digits that the exact rational gold rounds to
    at the decimal's own places (irrational golds such as ``\\sqrt{2}`` keep rejecting ``1.414``)."""
    p = canonical(pred)
    if not _DECIMAL.fullmatch(p) or len(p.replace("-", "").replace(".", "").lstrip("0")) < MIN_SIGNIFICANT:
        return False
    number, exact = parse_number(p), parse_number(canonical(gold))
    if number is None or exact is None or not number.decimals or exact.decimals or exact.percent:
        return False
    return abs(exact.value - number.value) <= Fraction(1, 2 * 10**number.decimals)


__all__ = ["MIN_SIGNIFICANT", "grade_lenient", "lenient_extract", "lenient_gold"]
