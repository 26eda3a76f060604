"""Quantities in answers: numbers with units, times of day and dates, read exactly (lenient grading only).

:func:`read_quantity` reads an answer that is one quantity: a number (LaTeX thousands ``1{,}000`` /
``1\\,000``, currency ``\\$1,000`` / ``USD 1000``, scale words ``2.5 billion``, number words ``twelve``,
mixed numbers ``2 1/2`` / ``two and a half``) with an optional unit from :data:`UNITS` (or a sum of
parts in one dimension, ``2 hours 30 minutes``), a time of day (``3:30 p.m.``, ``15:30``) or a date
(``March 5``, ``2024-03-05``). :func:`quantity_verdict` compares two of them under the unit policy:

* a gold with a unit needs the same quantity: a compatible unit converts exactly (``90 minutes`` =
  ``1.5 hours``, ``5000 m`` = ``5 km``, ``2400 mm^2`` = ``24 cm^2``); another dimension is wrong
  (``24 cm`` vs ``24 cm^2``, ``15 cents`` vs ``\\$15``); a bare number is read in the gold's unit
  (``18`` for ``18 inches``; ``0.25`` for ``25\\%`` is 0.25 percent, wrong);
* a gold without a unit accepts a response with one on its number (``12 cm`` for ``12``; ``25\\%`` for
  ``0.25``);
* times compare as minutes after midnight (``3:30 PM`` = ``15:30``; ``a.m.`` and ``p.m.`` differ); a time
  written without a.m./p.m. on one side stands for either half of the day; dates compare by month and day
  (and year where both give one).

Anything else (an expression, an unknown unit word) is ``None``: the caller grades it as before.

Example:
    >>> quantity_verdict("90 minutes", "1.5 \\\\text{ hours}"), quantity_verdict("5 m", "5\\\\text{ km}")
    (True, False)
    >>> quantity_verdict("3:30 PM", "15:30"), quantity_verdict("two and a half", "2.5")
    (True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from .math_normalize import Number, fold_unicode, parse_number
from .math_normalize import canonical as _canonical
from .math_words import words_to_number

MAX_CHARS = 120  # longer answers are never read as one quantity
canonical = lru_cache(maxsize=4096)(_canonical)

_F = Fraction
_LENGTH = {"mm": _F(1, 1000), "millimeter": _F(1, 1000), "millimetre": _F(1, 1000), "cm": _F(1, 100),
           "centimeter": _F(1, 100), "centimetre": _F(1, 100), "m": _F(1), "meter": _F(1), "metre": _F(1),
           "km": _F(1000), "kilometer": _F(1000), "kilometre": _F(1000), "in": _F(254, 10000), "inch": _F(254, 10000),
           "ft": _F(3048, 10000), "foot": _F(3048, 10000), "feet": _F(3048, 10000), "yd": _F(9144, 10000),
           "yard": _F(9144, 10000), "mi": _F(1609344, 1000), "mile": _F(1609344, 1000)}
_TIME = {"ms": _F(1, 1000), "millisecond": _F(1, 1000), "s": _F(1), "sec": _F(1), "second": _F(1), "min": _F(60), "minute": _F(60), "h": _F(3600), "hr": _F(3600),
         "hour": _F(3600), "day": _F(86400), "week": _F(604800)}
_CALENDAR = {"month": _F(1), "year": _F(12), "decade": _F(120), "century": _F(1200)}
_MASS = {"mg": _F(1, 1000), "milligram": _F(1, 1000), "g": _F(1), "gram": _F(1), "kg": _F(1000),
         "kilogram": _F(1000), "lb": _F(45359237, 100000), "pound": _F(45359237, 100000),
         "oz": _F(28349523125, 10**9), "ounce": _F(28349523125, 10**9), "tonne": _F(10**6),
         "metric ton": _F(10**6), "ton": _F(90718474, 100)}
_CUP = _F(2365882365, 10**16)  # US customary, exact in cubic metres
_VOLUME = {"ml": _F(1, 10**6), "milliliter": _F(1, 10**6), "millilitre": _F(1, 10**6), "cc": _F(1, 10**6),
           "l": _F(1, 1000), "liter": _F(1, 1000), "litre": _F(1, 1000), "gallon": 16 * _CUP, "gal": 16 * _CUP,
           "quart": 4 * _CUP, "qt": 4 * _CUP, "pint": 2 * _CUP, "pt": 2 * _CUP, "cup": _CUP, "tablespoon": _CUP / 16,
           "tbsp": _CUP / 16, "teaspoon": _CUP / 48, "tsp": _CUP / 48}
_SPEED = {"mph": _F(1609344, 3600000), "miles per hour": _F(1609344, 3600000), "mile per hour": _F(1609344, 3600000),
          "km/h": _F(1000, 3600), "km/hr": _F(1000, 3600), "kph": _F(1000, 3600), "kilometers per hour": _F(1000, 3600),
          "kilometres per hour": _F(1000, 3600), "m/s": _F(1), "meters per second": _F(1), "metres per second": _F(1),
          "ft/s": _F(3048, 10000), "feet per second": _F(3048, 10000)}
_MONEY = {"dollar": _F(1), "usd": _F(1), "cent": _F(1, 100)}
_OTHER = {"degree": ("deg", _F(1)), "deg": ("deg", _F(1)), "^\\circ": ("deg", _F(1)), "radian": ("rad", _F(1)),
          "rad": ("rad", _F(1)), "%": ("percent", _F(1)), "percent": ("percent", _F(1)),
          "per cent": ("percent", _F(1)), "euro": ("eur", _F(1)), "€": ("eur", _F(1)),
          "^\\circ c": ("celsius", _F(1)), "^\\circ f": ("fahrenheit", _F(1)), "degrees celsius": ("celsius", _F(1)),
          "degrees fahrenheit": ("fahrenheit", _F(1))}

#: Every unit read: name -> (dimension, factor to the dimension's base unit). Plurals take an ``s``/``es``.
UNITS: dict[str, tuple[str, Fraction]] = {
    **{k: ("length", v) for k, v in _LENGTH.items()}, **{k: ("time", v) for k, v in _TIME.items()},
    **{k: ("calendar", v) for k, v in _CALENDAR.items()}, **{k: ("mass", v) for k, v in _MASS.items()},
    **{k: ("length^3", v) for k, v in _VOLUME.items()}, **{k: ("length/time", v) for k, v in _SPEED.items()},
    **{k: ("money", v) for k, v in _MONEY.items()}, **_OTHER,
    "acre": ("length^2", _F(40468564224, 10**7)), "hectare": ("length^2", _F(10000)), "ha": ("length^2", _F(10000)),
}
_IRREGULAR = {"feet": "feet", "inches": "inch", "centuries": "century", "hrs": "hr", "mins": "min", "secs": "sec",
              "lbs": "lb", "kms": "km", "cms": "cm"}
_POWER_WORDS = {"square": 2, "sq": 2, "sq.": 2, "cubic": 3, "cu": 3}
_UNIT_NAMES = sorted({*UNITS, *_IRREGULAR, *(k + "s" for k in UNITS if k[-1].isalpha() and len(k) > 2)},
                     key=len, reverse=True)
_UNIT_ALT = "|".join(re.escape(u) for u in _UNIT_NAMES)
_UNIT = re.compile(rf"(?i)(?:(?P<pw>square|sq\.?|cubic|cu)\s+)?(?P<u>{_UNIT_ALT})(?![A-Za-z])"
                   r"(?:\s*\^\s*\{?\s*(?P<exp>[23])\s*\}?)?")
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_SCALE = re.compile(r"(?i)\s*(thousand|million|billion|trillion)\b")
_SCALE_SUFFIX = re.compile(r"(k|K|M|mn|bn)(?![A-Za-z])")  # "2.5M", "40k": attached to the digits
_SUFFIXES = {"k": "thousand", "K": "thousand", "M": "million", "mn": "million", "bn": "billion"}
_CURRENCY_PREFIX = re.compile(r"(?i)^\s*(?:\\\$|us\$|usd\s*|€)\s*")
_WRAPPER = re.compile(r"\\(?:text|textrm|textbf|mathrm|mbox|operatorname|rm)\s*\{([^{}]*)\}|\{\\rm\s+([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad|~|\\thinspace|\\enspace")
_MIXED_WORDS = re.compile(r"(?i)^(?P<whole>.+?)\s+and\s+(?P<part>(?:a|an|one|two|three|four|five|six|seven|eight|"
                          r"nine)\s+(?:halves|half|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|"
                          r"ninths?|tenths?)|\d+\s*/\s*\d+|\\frac\{\d+\}\{\d+\})$")
_NUMBERISH = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?")


@dataclass(frozen=True, slots=True)
class Quantity:
    """One quantity read from an answer.

    Attributes:
        kind: ``"number"``, ``"clock"`` (``value`` in minutes after midnight) or ``"date"``.
        value: the number as written (scale words applied), in its own unit.
        dimension: the unit's dimension (``"length"``, ``"time"``, ``"percent"``, ...); ``None`` if unitless.
        base: ``value`` in the dimension's base unit (metres, seconds, dollars, ...).
        decimals: decimal places of a plain decimal (for :func:`~dapo_env.verifiers.math_grade.numbers_equal`).
        reread: whether reading it needed this module (scale or number words, a mixed number in words, a
            currency word); a plain unitless number is left to the usual grading.
        meridiem: a clock time's ``"am"``/``"pm"`` (``None`` without); a date's ``(year, month, day)``.
    """

    kind: str
    value: Fraction
    dimension: str | None = None
    base: Fraction | None = None
    decimals: int | None = None
    reread: bool = False
    meridiem: object = None


def clean_answer(text: str) -> str:
    """``text`` without maths delimiters, boxes, text wrappers, LaTeX spacing, bold stars or a final full stop."""
    s = fold_unicode(text).strip()
    s = s.replace("\\%", "%").replace("{,}", ",").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\left", "").replace("\\right", "").replace("^{\\circ}", "^\\circ").replace("\\degree", "^\\circ")
    for _ in range(3):
        s = _WRAPPER.sub(lambda m: " " + (m.group(1) if m.group(1) is not None else m.group(2)) + " ", s)
    s = re.sub(r"\{\s*\}", "", _SPACING.sub(" ", s))  # "1{\\,}000"
    s = re.sub(r"(?<=[A-Za-z])\s*/\s*(?=[A-Za-z])", "/", s)  # "km / h"
    s = re.sub(r"\\boxed\s*\{(.*)\}", r"\1", s)
    s = s.replace("$", " ") if "\\$" not in s else s.replace("\\$", "\x00").replace("$", " ").replace("\x00", "\\$")
    s = s.strip().strip("*").strip().rstrip(".").strip()
    return re.sub(r"\s+", " ", s)


@lru_cache(maxsize=4096)
def read_quantity(text: str) -> Quantity | None:
    """``text`` read as one quantity (see the module docstring), or ``None``.

    Example:
        >>> q = read_quantity("\\\\$1{,}500")
        >>> (q.value, q.dimension), read_quantity("3 million").value, read_quantity("x + 1")
        ((Fraction(1500, 1), 'money'), Fraction(3000000, 1), None)
    """
    if not text or len(text) > MAX_CHARS:
        return None
    s = clean_answer(text)
    if not s:
        return None
    return _clock(s) or _date(s) or _number_with_units(s)


# ---------------------------------------------------------------------------------------------------
# Numbers with units.
def _number_with_units(s: str) -> Quantity | None:
    reread = False
    sign = 1
    m = re.match(r"(?i)(?:-|negative\s+|minus\s+)(?=\S)", s)
    if m is not None:
        sign, s = -1, s[m.end():]
    currency = _CURRENCY_PREFIX.match(s)
    prefix_dim = None
    if currency is not None:
        prefix_dim = "eur" if "€" in currency.group(0) else "money"
        s = s[currency.end():]
        if s.startswith("-"):
            sign, s = -sign, s[1:]
    parts = _split_parts(s)
    if parts is None:
        return None
    total, dimension, decimals, first_value = Fraction(0), None, None, None
    for number_text, scale, unit in parts:
        if number_text.lower() in ("a", "an") and (unit is None or unit == _COUNT):
            return None  # "a" is a number only before a unit ("an hour"), never a letter answer
        value, places, special = _read_number(number_text)
        if value is None:
            return None
        reread = reread or special or scale is not None
        if scale is not None:
            value, places = value * _SCALES[scale.lower()], None
        dim, factor = unit if unit is not None else (None, Fraction(1))
        if dim is None and prefix_dim is not None:
            dim, factor = prefix_dim, Fraction(1)
        if len(parts) > 1 and (dim is None or (dimension is not None and dim != dimension)):
            return None  # "2 hours 30": a sum needs a unit on every part, all in one dimension
        dimension = dim if dimension is None else dimension
        total += value * factor
        decimals = places if first_value is None else None
        first_value = value if first_value is None else first_value
    value = total if len(parts) > 1 else first_value  # a sum is stated in the base unit
    reread = reread or dimension is not None or len(parts) > 1
    return Quantity("number", sign * value, dimension, sign * total, decimals, reread)


def _split_parts(s: str) -> list[tuple[str, str | None, tuple[str, Fraction] | None]] | None:
    """``2 hours and 30 minutes`` -> ``[("2", None, hours), ("30", None, minutes)]``; ``3.2 million`` -> one part
    with a scale; ``None`` when something is left that is no number, scale or known unit."""
    parts = []
    rest = s.strip()
    while rest:
        number_end = _number_end(rest)
        if number_end <= 0:
            return None
        number_text, rest = rest[:number_end].strip(), rest[number_end:]
        if number_text[-1:].isalpha():  # "half an hour", "three quarters of an hour"
            rest = re.sub(r"(?i)^\s*(?:of\s+)?an?\s+(?=[A-Za-z])", " ", rest)
        scale = None
        m = _SCALE.match(rest) or _SCALE_SUFFIX.match(rest)
        if m is not None:
            scale, rest = _SUFFIXES.get(m.group(1), m.group(1)), rest[m.end():]
        unit = None
        money_suffix = re.match(r"(?i)\s*(?:usd|dollars?|cents?)\b", rest)
        m = _UNIT.match(rest.lstrip()) if money_suffix is None else money_suffix
        if m is not None and m.group(0).strip():
            unit = _unit_of(m)
            if unit is None:
                return None
            rest = rest.lstrip()[m.end():] if money_suffix is None else rest[m.end():]
            per = _PER.match(rest)
            below = _UNIT.match(rest, per.end()) if per is not None else None
            if below is not None:  # "cm / s", "dollars per hour": a rate
                denominator = _unit_of(below)
                if denominator is None or denominator[0] in ("money", "percent", "count"):
                    return None
                unit, rest = (f"{unit[0]}/{denominator[0]}", unit[1] / denominator[1]), rest[below.end():]
        rest = rest.strip()
        if rest.startswith(("and ", ", ", ",")):
            rest = rest.split(" ", 1)[1] if rest.startswith("and ") else rest.lstrip(",").strip()
            if not rest or unit is None:
                return None
        elif rest and unit is None:
            if len(parts) or not _COUNT_NOUN.fullmatch(rest):
                return None
            unit, rest = _COUNT, ""  # "3 3/4 cups", "12 apples": a count of things, no unit to convert
        parts.append((number_text, scale, unit))
        if len(parts) > 4:
            return None
    return parts or None


_COUNT = ("count", Fraction(1))
_PER = re.compile(r"(?i)\s*(?:/|\bper\s+|\s+an?\s+)\s*(?=[A-Za-z])")
_COUNT_NOUN = re.compile(r"(?:[A-Za-z]{3,}\s+){0,2}[A-Za-z]{3,}")


def _unit_of(m: re.Match[str]) -> tuple[str, Fraction] | None:
    if m.re is not _UNIT:  # a money word
        word = m.group(0).strip().lower()
        return ("money", Fraction(1, 100)) if word.startswith("cent") else ("money", Fraction(1))
    name = m.group("u").lower()
    name = _IRREGULAR.get(name, name)
    if name not in UNITS and name.endswith("es") and name[:-2] in UNITS:
        name = name[:-2]
    elif name not in UNITS and name.endswith("s") and name[:-1] in UNITS:
        name = name[:-1]
    if name not in UNITS:
        return None
    dim, factor = UNITS[name]
    power = _POWER_WORDS.get((m.group("pw") or "").lower(), 1) * int(m.group("exp") or 1)
    if power > 1:
        if dim != "length":
            return None
        return f"length^{power}", factor**power
    return dim, factor


_WORD_NUMBER = re.compile(r"(?i)^(?:(?:a|an|dozen|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
                          r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fourty|fifty|"
                          r"sixty|seventy|eighty|ninety|hundred|zero|and|half|halves|thirds?|quarters?|fourths?|"
                          r"fifths?|sixths?|sevenths?|eighths?|ninths?|tenths?)\b|[\s-])+")
_DIGIT_NUMBER = re.compile(
    r"(?:\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+(?!\d)|\d+)(?:\.\d+)?(?:\s+(?:and\s+)?\d+\s*/\s*\d+|\s*/\s*\d+"
    r"|\s*(?:and\s+)?\\frac\s*\{\d+\}\{\d+\}|\s+and\s+(?:a|one)\s+(?:half|third|quarter))?|\.\d+|\\frac\s*(?:\{\d+\}\{\d+\}|\d\d)")


def _number_end(s: str) -> int:
    """Length of the number at the start of ``s`` (digits in their forms, or a number in words)."""
    m = _DIGIT_NUMBER.match(s)
    if m is not None:
        return m.end()
    m = _WORD_NUMBER.match(s)
    if m is None:
        return 0
    text = m.group(0)
    for end in range(len(text), 0, -1):  # the longest prefix that reads as one number
        if text[end - 1].isalpha() and (end == len(text) or not text[end].isalpha()):
            if _read_number(text[:end])[0] is not None:
                return end
    return 0


_ARTICLE_NUMBERS = {"a": Fraction(1), "an": Fraction(1), "half": Fraction(1, 2), "a half": Fraction(1, 2),
                   "a quarter": Fraction(1, 4), "quarter": Fraction(1, 4), "a third": Fraction(1, 3),
                   "a dozen": Fraction(12), "dozen": Fraction(12)}


def _read_number(text: str) -> tuple[Fraction | None, int | None, bool]:
    """Value, decimal places and whether words were read, for one number in its written forms."""
    text = text.strip()
    if text.lower() in _ARTICLE_NUMBERS:
        return _ARTICLE_NUMBERS[text.lower()], None, True
    mixed = _MIXED_WORDS.match(text)
    if mixed is not None:
        whole, _, _ = _read_number(mixed.group("whole"))
        part_text = re.sub(r"(?i)^an?\s+", "one ", mixed.group("part"))
        part, _, _ = _read_number(part_text)
        if whole is None or part is None or whole.denominator != 1 or not 0 < part < 1:
            return None, None, False
        return whole + part, None, True
    if re.search(r"[A-Za-z]", text.replace("\\frac", "")):
        spelled = words_to_number(text)
        if spelled is None:
            return None, None, False
        number = parse_number(canonical(spelled))
        return (number.value, None, True) if number is not None else (None, None, False)
    if re.fullmatch(r"\d{1,3}(?: \d{3})+(?:\.\d+)?", text):
        text = text.replace(" ", "")
    number = parse_number(canonical(text))
    if number is None or number.percent:
        return None, None, False
    return number.value, number.decimals, False


# ---------------------------------------------------------------------------------------------------
# Times of day and dates.
_CLOCK = re.compile(r"(?i)^(?P<h>\d{1,2})(?::(?P<m>\d{2}))?(?::(?P<s>\d{2}))?\s*(?P<oc>o['’]?\s?clock)?\s*"
                    r"(?P<mer>[ap]\s*\.?\s*m\b\.?|noon|midnight)?$")


def _clock(s: str) -> Quantity | None:
    m = _CLOCK.match(s)
    if m is None or (m.group("m") is None and m.group("mer") is None and m.group("oc") is None):
        return None
    hour, minute = int(m.group("h")), int(m.group("m") or 0)
    mer = (m.group("mer") or "").lower().replace(".", "").replace(" ", "")
    if minute >= 60 or hour > 24 or (mer and not 1 <= hour <= 12):
        return None
    if mer in ("am", "midnight"):
        hour = 0 if hour == 12 else hour
    elif mer in ("pm", "noon"):
        hour = 12 if hour == 12 else hour + 12
    seconds = int(m.group("s") or 0)
    meridiem = mer[:2] if mer else None
    return Quantity("clock", Fraction(hour * 60 + minute) + Fraction(seconds, 60), meridiem=meridiem)


_MONTHS = {name: i for i, names in enumerate(
    ["jan january", "feb february", "mar march", "apr april", "may", "jun june", "jul july", "aug august",
     "sep sept september", "oct october", "nov november", "dec december"], 1) for name in names.split()}
_MONTH = r"(?P<month>[A-Za-z]{3,9})\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s*(?P<year>\d{4}))?"
_DATES = (re.compile(rf"(?i)^{_MONTH}\s+{_DAY}{_YEAR}$"), re.compile(rf"(?i)^(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR}$"),
          re.compile(r"^(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})$"))


def _date(s: str) -> Quantity | None:
    for pattern in _DATES:
        m = pattern.match(s)
        if m is None:
            continue
        month_text = m.group("month")
        month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text.lower())
        day, year = int(m.group("day")), int(m.group("year")) if m.group("year") else None
        if month is None or not 1 <= month <= 12 or not 1 <= day <= 31:
            return None
        return Quantity("date", Fraction(month * 100 + day), meridiem=(year, month, day))
    return None


# ---------------------------------------------------------------------------------------------------
# The verdict.
def _stated_quantity(text: str) -> Quantity | None:
    """The quantity with a unit that ends a short phrase (``open for 8.5 hours`` -> ``8.5 hours``; at most 8 words,
    none of them maths or a negation: ``\\log_2 8`` and ``not 5 m`` are no such phrase)."""
    words = text.split()
    if not 2 <= len(words) <= 8:
        return None
    for i in range(max(1, len(words) - 4), len(words)):
        if re.match(r"[-−]?(?:\\\$|\$)?\d", words[i]):
            prose = all(re.fullmatch(r"[A-Za-z']{2,},?", w) for w in words[:i])
            negated = any(w.lower().strip(",") in ("not", "no", "never", "isn't", "without") for w in words[:i])
            found = read_quantity(" ".join(words[i:])) if prose and not negated else None
            return found if found is not None and found.dimension not in (None, "count") else None
    return None


def _plain(text: str, quantity: Quantity) -> bool:
    """Whether the usual grading reads ``text`` as the same number (``1{\\,}000`` it does not)."""
    number = parse_number(canonical(text))
    return number is not None and number.value == quantity.value
def quantity_verdict(pred: str, gold: str) -> bool | None:
    """Whether ``pred`` states the gold's quantity (the module docstring's policy); ``None`` when either is
    not one quantity, or when both are plain unitless numbers the usual grading reads alike."""
    from .math_grade import numbers_equal  # lazy: math_grade imports the symbolic stage

    g = read_quantity(gold)
    if g is None:
        return None
    p = read_quantity(pred) or _stated_quantity(pred)
    if p is None:
        return None
    if g.kind == "clock" or p.kind == "clock":
        if p.kind != g.kind:
            return None
        if g.meridiem is not None and p.meridiem is None and p.value < 780:  # "3:30" for "3:30 p.m."
            return p.value % 720 == g.value % 720
        if g.meridiem is None and p.meridiem is not None and 60 <= g.value < 720:  # "3:30 p.m." for "3:30"
            return p.value % 720 == g.value
        return p.value == g.value
    if g.kind == "date" or p.kind == "date":
        if p.kind != g.kind:
            return None
        (py, pm, pd), (gy, gm, gd) = p.meridiem, g.meridiem
        return (pm, pd) == (gm, gd) and (py is None or gy is None or py == gy)
    if "count" in (p.dimension, g.dimension):  # "12 apples": the noun is not compared, a real unit is not read
        if {p.dimension, g.dimension} - {"count", None}:
            return None
        return numbers_equal(Number(p.value, p.decimals), Number(g.value, g.decimals))
    if g.dimension is not None:
        if p.dimension is None:  # a bare number stands in the gold's unit
            return numbers_equal(Number(p.value, p.decimals), Number(g.value, g.decimals))
        if g.dimension == "money" and p.dimension.startswith("money/"):
            return p.value == g.value  # "$15 per hour" for "$15": the gold leaves the rate's "per" to the question
        if {p.dimension, g.dimension} in ({"deg", "celsius"}, {"deg", "fahrenheit"}):
            return p.value == g.value  # "100 degrees" for 100 °C: the scale is the question's
        if p.dimension != g.dimension:
            return False
        return p.base == g.base
    if p.dimension is None and not (p.reread or g.reread) and _plain(pred, p) and _plain(gold, g):
        return None  # plain numbers the usual grading reads alike
    if p.dimension == "percent":
        return p.value == g.value or p.value / 100 == g.value
    return numbers_equal(Number(p.value, p.decimals), Number(g.value, g.decimals))

__all__ = ["UNITS", "Quantity", "clean_answer", "quantity_verdict", "read_quantity"]
