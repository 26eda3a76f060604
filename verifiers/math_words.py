"""Numbers written in English words: ``thirty-one``, ``negative seven``, ``two thousand and twenty-four``.

Models sometimes spell a final answer out (``Answer: thirty-one``, ``The answer is negative 7.``).
:func:`words_to_number` reads such an answer as the decimal string of its value, or ``None`` when the
text is not entirely a number in words. Only cardinal numbers (with ``and`` and hyphens, up to the
trillions) and the common simple fractions (``one half``, ``two thirds``, ``three quarters``) are read;
ordinals (``first``) and mixed prose are not numbers here. The reader looks at most
:data:`MAX_WORDS` words, so its cost is bounded.

Example:
    >>> words_to_number("thirty-one"), words_to_number("negative 7"), words_to_number("two thirds")
    ('31', '-7', '\\\\frac{2}{3}')
"""

from __future__ import annotations

import re

MAX_WORDS = 24

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DENOMINATORS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4,
                 "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7,
                 "eighth": 8, "eighths": 8, "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10}
_SIGNS = {"negative": "-", "minus": "-", "positive": "", "plus": ""}
_SPLIT = re.compile(r"[\s-]+")
_DIGITS = re.compile(r"\d{1,400}(?:\.\d{1,400})?")


def _cardinal(words: list[str]) -> int | None:
    """Value of a cardinal number in words (``["two", "hundred", "and", "five"]`` -> 205), or ``None``."""
    total, group, seen = 0, 0, False
    last_scale = None
    for i, word in enumerate(words):
        if word == "and" and seen:
            continue
        if word in _UNITS:
            if group % 10 or (group % 100 >= 10 and group % 100 < 20):
                return None  # "five six", "twelve three": not one number
            group += _UNITS[word]
        elif word in _TENS:
            if group % 100:
                return None
            group += _TENS[word]
        elif word == "hundred":
            if group >= 100:
                return None
            group = (group or 1) * 100
        elif word in _SCALES:
            scale = _SCALES[word]
            if last_scale is not None and scale >= last_scale:
                return None  # "thousand million"
            total += (group or 1) * scale
            group, last_scale = 0, scale
        elif word in ("a", "an") and not seen and words[i + 1 : i + 2] and (words[i + 1] == "hundred" or words[i + 1] in _SCALES):
            group = 1  # "a hundred", "a thousand"
            seen = True
            continue
        else:
            return None
        seen = True
    return total + group if seen else None


def words_to_number(text: str) -> str | None:
    """The value of a number written in words, as a decimal string (or ``\\frac{p}{q}``), or ``None``.

    A leading ``negative``/``minus`` (also before digits: ``negative 7``) makes it negative.

    Example:
        >>> words_to_number("One hundred and five"), words_to_number("a dozen"), words_to_number("seven apples")
        ('105', None, None)
    """
    words = [w for w in _SPLIT.split(text.strip().lower().rstrip(".")) if w]
    if not words or len(words) > MAX_WORDS:
        return None
    sign = ""
    if words[0] in _SIGNS:
        sign = _SIGNS[words[0]]
        words = words[1:]
        if len(words) == 1 and _DIGITS.fullmatch(words[0]):
            return sign + words[0]
    if not words or words[-1] == "and":
        return None
    if words[-1] in _DENOMINATORS and len(words) >= 2:
        numerator = _cardinal(words[:-1])
        if numerator is None or numerator == 0:
            return None
        return f"{sign}\\frac{{{numerator}}}{{{_DENOMINATORS[words[-1]]}}}"
    value = _cardinal(words)
    if value is None:
        return None
    return f"{sign}{value}" if value else "0"


__all__ = ["words_to_number"]
