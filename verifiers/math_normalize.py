"""Answer normalisation and exact numbers: the fast, in-process part of math grading.

Two normalisers live here:

* :func:`dapo_normalize` reproduces the Minerva-style ``normalize_final_answer`` that the DAPO paper's
  scorer (verl's ``math_dapo.py``) applies to both sides before string equality.
* :func:`canonical` is this project's stronger normaliser: Unicode folding (fullwidth digits, unicode
  minus and dashes, ``½``, ``√``, ``π``), LaTeX spacing and wrappers removed, ``\\dfrac`` to ``\\frac``,
  thousands separators, units and degree signs dropped.

:func:`parse_number` turns a canonical answer into an exact :class:`fractions.Fraction` (integers,
decimals, fractions, mixed numbers, percentages, scientific notation) with hard caps on digit counts
and exponents, so no input can make it slow.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from .math_words import words_to_number

MAX_DIGITS = 400
MAX_EXPONENT = 400

# ---------------------------------------------------------------------------------------------------
# DAPO / Minerva normaliser (behaviour of verl's math_dapo.normalize_final_answer, own code).
_DAPO_SUBS = (("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), ("\\ ", ""), (" ", ""), ("mbox", "text"),
              (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"))
_DAPO_REMOVE = ("square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", "\\ldots",
                "sue", "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds",
                "meters", "meals", "edges", "students", "childrentickets", "multiples", "\\text{s}",
                "\\text{.}", "\\text{\ns}", "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}",
                "\\mathrm{th}", "^\\circ", "^{\\circ}", "\\;", ",\\!", "{,}", '"', "\\dots")


def match_brace(text: str, open_idx: int, max_depth: int = 1024, max_len: int = 1 << 62) -> int:
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


def dapo_normalize(answer: str) -> str:
    """Minerva/DAPO normalisation of a final answer (exactly the paper's scorer's rule).

    Example:
        >>> dapo_normalize("$1,000$ dollars")
        '1000'
    """
    s = answer.split("=")[-1]
    for old, new in _DAPO_SUBS:
        s = s.replace(old, new)
    for expr in _DAPO_REMOVE:
        s = s.replace(expr, "")
    s = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", s)
    s = re.sub(r"(\\text\{)(.*?)(\})", "\\2", s)
    s = re.sub(r"(\\textbf\{)(.*?)(\})", "\\2", s)
    s = re.sub(r"(\\overline\{)(.*?)(\})", "\\2", s)
    s = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", s)
    s = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", s)
    s = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", s)
    s = s.replace("$", "")
    if s.replace(",", "").isdigit():
        s = s.replace(",", "")
    return s.strip()


# ---------------------------------------------------------------------------------------------------
# Canonical form.
_UNICODE = {
    "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u2012": "-", "\u2011": "-", "\u2010": "-", "\ufe63": "-",
    "\uff0d": "-", "\u00d7": "\\times ", "\u22c5": "\\cdot ", "\u00b7": "\\cdot ", "\u00f7": "/",
    "\u03c0": "\\pi ", "\u221e": "\\infty ", "\u2264": "\\le ", "\u2265": "\\ge ",
    "\u2260": "\\ne ", "\u00b0": "^\\circ", "\u2218": "^\\circ", "\u222a": "\\cup ", "\u2229": "\\cap ",
    "\u2208": "\\in ", "\u2044": "/", "\u00b1": "\\pm ", "\u03b8": "\\theta ", "\u2032": "'",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u3000": " ", "\u2005": " ", "\u2006": " ",
    "\u2248": "\\approx ",
}
_SUPERSCRIPTS = {"\u00b2": "2", "\u00b3": "3", "\u00b9": "1", "\u2070": "0", "\u2074": "4", "\u2075": "5",
                 "\u2076": "6", "\u2077": "7", "\u2078": "8", "\u2079": "9", "\u207b": "-", "\u207a": "+",
                 "\u207f": "n"}
_VULGAR = {"\u00bd": (1, 2), "\u2153": (1, 3), "\u2154": (2, 3), "\u00bc": (1, 4), "\u00be": (3, 4),
           "\u2155": (1, 5), "\u2156": (2, 5), "\u2157": (3, 5), "\u2158": (4, 5), "\u2159": (1, 6),
           "\u215a": (5, 6), "\u215b": (1, 8), "\u215c": (3, 8), "\u215d": (5, 8), "\u215e": (7, 8)}
_WRAPPERS = ("\\text", "\\textbf", "\\textit", "\\textrm", "\\mathrm", "\\mathbf", "\\mathit", "\\mbox",
             "\\textnormal", "\\boldsymbol", "\\mathbb", "\\hbox", "\\boxed", "\\fbox", "\\framebox", "\\num")
_DROP = ("\\displaystyle", "\\left.", "\\right.", "\\left", "\\right", "\\bigl", "\\bigr", "\\Bigl", "\\Bigr",
         "\\big", "\\Big", "\\!", "\\,", "\\;", "\\:", "\\quad", "\\qquad", "\\ ", "~", "\\limits", "\\thinspace",
         "\\medspace", "\\thickspace", "\\enspace")
_UNITS = (
    r"(?:(?:square|sq\.?|cubic)\s+)?(?:units?|dollars?|cents?|degrees?|deg|radians?|rad|"
    r"cm|mm|km|m|meters?|metres?|inches?|inch|in|feet|foot|ft|yards?|yd|miles?|mi|mph|km/h|m/s|hours?|hrs?|h|"
    r"minutes?|mins?|seconds?|secs?|s|days?|weeks?|months?|years?|pounds?|lbs?|kg|g|grams?|ounces?|oz|"
    r"liters?|litres?|ml|l|gallons?|people|persons?|students?|children|apples?|points?|ways?|times|"
    r"pages?|books?|marbles?|cookies?|eggs?|tickets?|cars?|items?|boxes|balls?|coins?|sq)"
    r"(?:\s*\^?\s*\{?[23]\}?)?"
)
_UNIT_WORDS = re.compile(rf"(?i)(?<=[\d}}.)])\s*{_UNITS}\.?\s*$")
_UNIT_NAME = re.compile(rf"(?i)\s*{_UNITS}\s*")
_NEGATIVE_WORD = re.compile(r"(?i)^(?:negative|minus)\s+(?=[\d\\(.])")
_PLAIN_FUNCTION = re.compile(r"(?<![\\A-Za-z])(sqrt|ln|log|exp|sin|cos|tan)(?=\s*\()|(?<![\\A-Za-z])(pi)(?![A-Za-z])")
_PLUS_INFINITY = re.compile(r"(?:^|(?<=[(\[,]))\+(?=\\infty)")

# "5\\,\\text{m/s}", "3 \\mathrm{cm}^2", "9\\pi \\text{ m}^2": a unit in a text wrapper at the end.
_TEXT_UNIT = re.compile(r"(?<=[\w})])\s*(?:\\[,;!: ]\s*)*\\(?:text|mbox|mathrm)\{(\s*[A-Za-z][A-Za-z/ .\d^-]*)\}"
                        r"(\s*\^\s*\{?\d\}?)?\s*\.?\s*$")

# "12 bananas", "3 full boxes": a number followed by plain words ends the answer.
_TRAILING_WORDS = re.compile(r"(?<=\d)\s+[A-Za-z]{3,}(?:\s+[A-Za-z]{2,})*\.?\s*$")


def _strip_text_unit(s: str) -> str:
    """Drop a trailing ``\\text{ unit}``: any word after a number or a group, a known unit after a letter."""
    m = _TEXT_UNIT.search(s)
    if m is None:
        return s
    before = s[: m.start()]
    if before[-1:].isdigit() or before[-1:] in ("}", ")") or _UNIT_NAME.fullmatch(m.group(1) + (m.group(2) or "")):
        return before
    return s


def _unwrap(s: str, command: str) -> str:
    """Replace every ``\\command{X}`` by `` X `` (balanced braces; unbalanced ones stay)."""
    out = s
    start = 0
    while True:
        idx = out.find(command + "{", start)
        if idx < 0:
            return out
        end = match_brace(out, idx + len(command))
        if end < 0:
            return out
        out = out[:idx] + " " + out[idx + len(command) + 1 : end] + " " + out[end + 1 :]
        start = idx


def fold_unicode(s: str) -> str:
    """Map unicode maths to ASCII/LaTeX (fullwidth digits, minus signs, ``½``, ``√12``, ``π``, ``10⁻³``).

    A root sign takes the number, letter or parenthesised group after it (``√12`` -> ``\\sqrt{12}``,
    ``3√(x+1)`` -> ``3\\sqrt{x+1}``); a run of superscripts is one exponent (``10⁻³`` -> ``10^{-3}``).

    Example:
        >>> fold_unicode("3√12 + ⅓ − 10⁻³")
        '3\\\\sqrt{12} + \\\\frac{1}{3} - 10^{-3}'
    """
    if s.isascii():
        return s
    out = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch in _ROOTS:
            radicand, i = _radicand(s, i + 1)
            out.append(_ROOTS[ch] + "{" + radicand + "}" if radicand else _ROOTS[ch])
            continue
        if ch in _SUPERSCRIPTS:
            j = i
            while j < len(s) and s[j] in _SUPERSCRIPTS:
                j += 1
            exponent = "".join(_SUPERSCRIPTS[c] for c in s[i:j])
            out.append("^" + exponent if len(exponent) == 1 else "^{" + exponent + "}")
            i = j
            continue
        if ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ch in _VULGAR:
            num, den = _VULGAR[ch]
            out.append(f"\\frac{{{num}}}{{{den}}}")
        else:
            out.append(ch)
        i += 1
    return unicodedata.normalize("NFKC", "".join(out))


_ROOTS = {"\u221a": "\\sqrt", "\u221b": "\\sqrt[3]", "\u221c": "\\sqrt[4]"}
_RADICAND = re.compile(r"\s*(\d+(?:\.\d+)?|[A-Za-z]|\\pi|\u03c0)")


def _radicand(s: str, i: int) -> tuple[str, int]:
    """What a unicode root sign at ``i - 1`` applies to, and where it ends (``""`` if unclear)."""
    if s.startswith("(", i) or s.startswith("{", i):
        close, depth = {"(": ")", "{": "}"}[s[i]], 0
        for j in range(i, min(len(s), i + 400)):
            depth += s[j] == s[i]
            depth -= s[j] == close
            if depth == 0:
                return fold_unicode(s[i + 1 : j]), j + 1
        return "", i
    m = _RADICAND.match(s, i)
    if m is None:
        return "", i
    return ("\\pi" if m.group(1) == "\u03c0" else m.group(1)), m.end()


_DOUBLED_COMMAND = re.compile(
    r"(?<!\\)\\\\(?=(?:le|ge|ne|lt|gt|leq|geq|neq|frac|dfrac|sqrt|left|right|pi|cdot|times|infty)(?![A-Za-z]))")
_PLAIN_NE = re.compile(r"(?<=[A-Za-z\s)])!=")
_LIST_COMMA = re.compile(r"(?<=\d),(?=[ \t]+\d)")


def canonical(answer: str) -> str:
    """The canonical string form of an answer: what string equality compares.

    Example:
        >>> canonical("$\\\\dfrac{14}{3}$.")
        '\\\\frac{14}{3}'
    """
    s = fold_unicode(answer).strip()
    s = s.replace("\\$", "").replace("$", "").replace("\\(", "").replace("\\)", "")
    s = s.replace("\\[", "").replace("\\]", "").replace("\\%", "%").replace("\\approx", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\cfrac", "\\frac")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\circ", "").replace("\\degree", "")
    s = _DOUBLED_COMMAND.sub(r"\\", s)  # "-2 \\le x", "\\frac12": a doubled backslash is an escape slip
    s = s.replace("<=", "\\le ").replace(">=", "\\ge ")
    s = _PLAIN_NE.sub("\\\\ne ", s)  # "x != 5" (never the factorial in "5!=120")
    s = s.replace("{,}", ",").replace("\\infin", "\\infty").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    s = s.replace("\\neq", "\\ne").replace("\\lbrace", "\\{").replace("\\rbrace", "\\}")
    s = s.replace("\\varnothing", "\\emptyset").replace("\\{\\}", "\\emptyset").replace("\\{ \\}", "\\emptyset")
    s = _strip_text_unit(s)
    s = re.sub(r"\\mathbb\s*\{?\s*R\s*\}?|(?i:^\s*all\s+real(?:\s+numbers)?\s*$)", lambda _: "(-\\infty,\\infty)", s)
    s = re.sub(r"(?<![\d.])(\d+)\s+(\d+)\s*/\s*(\d+)(?![\d.])", "\\1\\\\frac{\\2}{\\3}", s)  # 1 1/2
    for cmd in _WRAPPERS:
        if cmd in s:
            s = _unwrap(s, cmd)
    s = s.replace("\\\\", "\x01")  # protect LaTeX row breaks from the "\\ " spacing command
    s = _LIST_COMMA.sub(",\x03", s)  # "32, 349" is a list (a thousands comma is written 32,349 or 32,\!349)
    for token in _DROP:
        s = s.replace(token, " ")
    s = s.strip().rstrip(".").strip().strip("*").strip()  # markdown bold **42**
    s = _NEGATIVE_WORD.sub("-", s)  # "negative 7"
    if s[:1].isalpha():
        spelled = words_to_number(s)  # "thirty-one", "two hundred and five", "negative seven"
        if spelled is not None:
            return spelled
    s = re.sub(r"\s+(?:or|and)\s+", ",", s)  # "x = 2 or x = 3" lists both answers
    s = _UNIT_WORDS.sub("", s)
    s = _TRAILING_WORDS.sub("", s)
    s = _PLAIN_FUNCTION.sub(lambda m: "\\" + m.group(0), s)  # plain-text maths: sqrt(2), ln(3), pi, 12 times 11
    s = re.sub(r"(?<=\d)\s*times\s*(?=\d)", r"\\times ", s)
    s = re.sub(r"_(\d)\s+(?=[\d\\(])", r"_{\1}", s)  # \log_2 8 is \log_{2}8, not \log_28
    s = re.sub(r"\\(frac|sqrt)\s*(\d)(\d)?", lambda m: _short_tex(m), s)
    s = re.sub(r"(\\[A-Za-z]+)\s+(?=[A-Za-z])", "\\1\x02", s)  # keep "\pi r" from becoming "\pir"
    s = re.sub(r"\s+", "", s).replace("\x02", " ").replace("\x01", "\\\\")
    s = _PLUS_INFINITY.sub("", s)  # (-\infty,+\infty)
    for _ in range(MAX_DIGITS):  # "{{5}}": redundant groups around the whole answer
        if not (s.startswith("{") and match_brace(s, 0) == len(s) - 1):
            break
        s = s[1:-1]
    if s.lower() == "none":
        return "0"
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    return s.replace("\x03", "")


def _short_tex(m: re.Match[str]) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\sqrt2`` -> ``\\sqrt{2}``."""
    if m.group(1) == "frac":
        return f"\\frac{{{m.group(2)}}}{{{m.group(3)}}}" if m.group(3) else m.group(0)
    return f"\\sqrt{{{m.group(2)}}}" + (m.group(3) or "")


# ---------------------------------------------------------------------------------------------------
# Exact numbers.
@dataclass(frozen=True, slots=True)
class Number:
    """An exact number read from an answer.

    Attributes:
        value: the exact value.
        decimals: digits after the decimal point if written as a plain decimal, else ``None``.
        percent: whether it was written with ``%``.
    """

    value: Fraction
    decimals: int | None = None
    percent: bool = False


_INT = r"\d{1,%d}" % MAX_DIGITS
_DEC = r"(?:\d{1,%d}(?:\.\d{0,%d})?|\.\d{1,%d})" % (MAX_DIGITS, MAX_DIGITS, MAX_DIGITS)
_SCI_E = re.compile(r"(%s)[eE]([-+]?\d{1,4})" % _DEC)
_SCI_TEN = re.compile(r"(?:(%s)(?:\\times|\\cdot|\*|x))?10\^(?:\{([-+]?\d{1,4})\}|([-+]?\d{1,4}))" % _DEC)
_FRAC = re.compile(r"(%s)?\\frac\{([-+]?%s)\}\{([-+]?%s)\}" % (_INT, _DEC, _DEC))
_SLASH = re.compile(r"(%s)/(%s)" % (_DEC, _DEC))
# An exponent without braces takes all its digits: "2^10" is 1024, as every writer of it means.
_POW = re.compile(r"(%s)\^(?:\{(\d{1,4})\}|(\d{1,4}))" % _INT)


def _dec(text: str) -> tuple[Fraction, int]:
    """Exact value and number of decimals of a plain decimal literal."""
    if "." in text:
        whole, frac = text.split(".")
        return Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac)), len(frac)
    return Fraction(int(text)), 0


def parse_number(s: str) -> Number | None:
    """Read a canonical answer as an exact number, or ``None`` if it is not a plain number.

    Accepts integers, decimals, ``\\frac{a}{b}``, ``a/b``, mixed numbers ``2\\frac{1}{2}``,
    percentages, ``1.6e-19``, ``1.6\\times10^{-19}`` and small integer powers ``2^{10}``. Digit counts
    and exponents are capped (``MAX_DIGITS``, ``MAX_EXPONENT``); anything larger is not a number here.

    Example:
        >>> parse_number("-\\\\frac{3}{4}").value
        Fraction(-3, 4)
    """
    if not s or len(s) > 2 * MAX_DIGITS + 40:
        return None
    percent = s.endswith("%")
    if percent:
        s = s[:-1]
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s.startswith("{") and s.endswith("}") and match_brace(s, 0) == len(s) - 1:
        s = s[1:-1]
    try:
        value, decimals = _parse_unsigned(s)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    if value is None:
        return None
    return Number(sign * value, decimals, percent)


_REPEATING = re.compile(r"(\d*)\.(\d*)\\overline\{(\d{1,50})\}")


def _parse_unsigned(s: str) -> tuple[Fraction | None, int | None]:
    m = _REPEATING.fullmatch(s)
    if m and len(m.group(1)) + len(m.group(2)) <= MAX_DIGITS:  # 0.1\overline{6} = 1/6
        whole, fixed, rep = m.group(1) or "0", m.group(2), m.group(3)
        base = Fraction(int(whole + fixed), 10 ** len(fixed))
        return base + Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed)), None
    if re.fullmatch(_DEC, s):
        value, decimals = _dec(s)
        return value, decimals
    m = _SCI_E.fullmatch(s)
    if m:
        exp = int(m.group(2))
        if abs(exp) > MAX_EXPONENT:
            return None, None
        return _dec(m.group(1))[0] * Fraction(10) ** exp, None
    m = _SCI_TEN.fullmatch(s)
    if m:
        exp = int(m.group(2) or m.group(3))
        if abs(exp) > MAX_EXPONENT:
            return None, None
        mant = _dec(m.group(1))[0] if m.group(1) else Fraction(1)
        return mant * Fraction(10) ** exp, None
    m = _FRAC.fullmatch(s)
    if m:
        num, den = _signed_dec(m.group(2)), _signed_dec(m.group(3))
        if den == 0:
            return None, None
        frac = num / den
        if m.group(1):  # mixed number 2\frac{1}{2}
            if frac < 0:
                return None, None
            frac = int(m.group(1)) + frac
        return frac, None
    m = _SLASH.fullmatch(s)
    if m:
        den = _dec(m.group(2))[0]
        return (None, None) if den == 0 else (_dec(m.group(1))[0] / den, None)
    m = _POW.fullmatch(s)
    if m:
        base, exp = int(m.group(1)), int(m.group(2) or m.group(3))
        if base > 1 and exp * len(m.group(1)) > MAX_DIGITS:
            return None, None
        return Fraction(base) ** exp, None
    return None, None


def _signed_dec(text: str) -> Fraction:
    sign = -1 if text.startswith("-") else 1
    return sign * _dec(text.lstrip("+-"))[0]


__all__ = ["Number", "canonical", "dapo_normalize", "fold_unicode", "parse_number"]
