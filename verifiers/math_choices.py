"""Multiple-choice answers and base-n numerals, as lenient grading reads them.

**Choices.** A gold that is a choice letter (``B``, ``(B)``, ``\\text{(B)}``) or a letter with its
option's text (``(D) 42``, ``D. 42``, ``B) x-1``; what :func:`choice_gold` builds from a reference that
names its options) is matched against a response's letter in its common written forms, any case
(``(b)``, ``B)``, ``B.``, ``**B**``, ``option B``, ``\\boxed{B}``, ``\\textbf{(E)}``), a letter with a
value (``(B) 15``: both must agree), or, when the gold knows its option's text, that text alone
(``15``). Two letters (``(A) and (C)``, ``A or B``, ``AB``) are no choice.

**Base-n numerals.** ``1011_2``, ``1011_{2}``, ``(52)_8``, ``2A_{16}``: digits compared by value in the
base (``0110_2`` = ``110_2``, ``2a_{16}`` = ``2A_{16}``); a bare numeral stands in the other side's
base (``1011`` for ``1011_2``); another base or other digits are wrong.

Example:
    >>> choice_verdict("Answer: (b)", "B"), choice_verdict("42", "(D) 42"), choice_verdict("(C) 42", "(D) 42")
    (True, True, False)
    >>> base_verdict("1011", "1011_{2}"), base_verdict("1011_3", "1011_2")
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from .math_normalize import canonical as _canonical
from .math_quantities import clean_answer

LETTERS = "ABCDEFGHIJ"
canonical = lru_cache(maxsize=4096)(_canonical)  # golds repeat across a problem's samples
_LEAD = r"(?:(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice|letter)\s*(?:is\s*)?[:.]?\s*)?"
_LETTER_ONLY = re.compile(rf"(?i)^{_LEAD}(?:option\s+|choice\s+)?[(\[]?\s*([A-J])\s*[)\]]?\s*[.:)]?$")
_LETTER_VALUE = re.compile(rf"(?i)^{_LEAD}(?:\(([A-J])\)|([A-J])\s*[.):])\s*(\S.*)$", re.S)
_PICK = re.compile(r"(?i:\b(?:choose|chose|pick|picked|select|selected|go\s+with|option|choice))\s*:?\s*"
                   r"(?:\(([A-Ja-j])\)|([A-J]))(?![A-Za-z])")
_OTHER_LABEL = re.compile(r"(?i)(?:^|[\s,;])\(?[A-J]\)|\b(?:and|or)\s+\(?[A-J]\b")


@lru_cache(maxsize=4096)
def read_choice(text: str, *, gold: bool = False) -> tuple[str | None, str | None]:
    """``(letter, value)`` of a choice answer (either may be ``None``). A gold letter alone must be a
    capital or carry a bracket (a lone ``b`` in a gold may be a variable); a response's may be any case."""
    s = clean_answer(text)
    m = _LETTER_ONLY.match(s)
    if m is not None:
        letter = m.group(1)
        if gold and letter.islower() and not re.search(r"[(\[]|option|choice", s, re.I):
            return None, None
        return letter.upper(), None
    m = _LETTER_VALUE.match(s)
    if m is not None:
        letter = m.group(1) or m.group(2)
        value = m.group(3).strip()
        if _OTHER_LABEL.search(value) or (gold and letter.islower()):
            return None, None  # "(a) 3, (b) 4": a multi-part answer, not a choice
        return letter.upper(), value
    return None, None


def choice_gold(gold: str, choices: object) -> str:
    """The gold as ``(L) text`` when the reference names its options (``choices``: a list in letter order,
    a mapping letter -> text, or a string ``(A) 12 (B) 15 ...``); ``gold`` as it is when the gold is
    neither a letter nor one of the options.

    Example:
        >>> choice_gold("B", ["12", "15", "18"]), choice_gold("18", {"A": "12", "B": "15", "C": "18"})
        ('(B) 15', '(C) 18')
    """
    options = _options(choices)
    if not options:
        return gold
    letter, _ = read_choice(gold, gold=True)
    if letter is not None and letter in options:
        return f"({letter}) {options[letter]}"
    key = canonical(gold)
    matches = [k for k, v in options.items() if canonical(v) == key]
    return f"({matches[0]}) {options[matches[0]]}" if len(matches) == 1 else gold


def _options(choices: object) -> dict[str, str]:
    if isinstance(choices, str):
        found = re.findall(r"\(([A-J])\)\s*(.*?)\s*(?=\([A-J]\)|$)", choices, re.S)
        return {k: v for k, v in found if v}
    if isinstance(choices, Mapping):
        return {str(k).strip("() .").upper(): str(v) for k, v in choices.items()}
    if isinstance(choices, Sequence):
        return {LETTERS[i]: str(v) for i, v in enumerate(choices) if i < len(LETTERS)}
    return {}


def choice_verdict(pred: str, gold: str, values_equal: Callable[[str, str], bool] | None = None) -> bool | None:
    """Whether ``pred`` picks the gold's choice; ``None`` when the gold is no choice.

    ``values_equal(pred_value, gold_value)`` compares option texts (default: canonical strings)."""
    gold_letter, gold_value = read_choice(gold, gold=True)
    if gold_letter is None:
        lone = clean_answer(gold)
        if not (len(lone) == 1 and lone in LETTERS.lower() and re.search(r"[(\[]|option|choice", pred, re.I)):
            return None
        gold_letter = lone.upper()  # gold "c", response "(C)": a lower-case gold letter, a bracketed response
    same = values_equal or (lambda a, b: canonical(a) == canonical(b))
    letter, value = read_choice(pred)
    if letter is None:
        picked = {m.group(1) or m.group(2) for m in _PICK.finditer(pred)}
        letter = picked.pop().upper() if len(picked) == 1 and len(pred.split()) <= 8 else None  # "I would choose D."
    if letter is not None:
        if letter != gold_letter:
            return False
        return value is None or gold_value is None or same(value, gold_value)
    if gold_value is not None and not _letters_only(pred):
        return same(pred, gold_value)
    return False


def _letters_only(text: str) -> bool:
    """``(A) and (C)``, ``A or B``, ``AB``: choice letters and nothing else."""
    s = re.sub(r"(?i)\b(?:and|or)\b|[\s(),.*$]", "", clean_answer(text))
    return bool(s) and len(s) <= 3 and all(c in LETTERS for c in s.upper())


_BASE = re.compile(r"^\(?([0-9A-Za-z]{1,64})\)?_\{?\(?(\d{1,2})\)?\}?$")
_PLAIN_NUMERAL = re.compile(r"[0-9A-Za-z]{1,64}")


_BASE_WORDS = {w: i for i, w in enumerate("two three four five six seven eight nine ten eleven twelve thirteen "
                                            "fourteen fifteen sixteen".split(), 2)}
_WORD_BASE = re.compile(r"(?i)_\{?\s*(?:\\text\s*)?\{?\s*(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                        r"thirteen|fourteen|fifteen|sixteen)\s*\}?\s*\}?|\s+(?:in\s+)?base[\s-]+(\d{1,2})$")


def _base_form(text: str) -> str:
    """``1011_{\\text{two}}``, ``1011 in base 2`` -> ``1011_2``."""
    return canonical(_WORD_BASE.sub(lambda m: "_" + str(_BASE_WORDS[m.group(1).lower()] if m.group(1) else m.group(2)),
                                    clean_answer(text)))


def base_verdict(pred: str, gold: str) -> bool | None:
    """Base-n numerals compared by value (the module docstring's policy); ``None`` unless one side is one."""
    if "_" not in pred and "_" not in gold and "base" not in pred + gold:
        return None  # no subscript, no "base": no numeral to read
    p, g = _numeral(_base_form(pred)), _numeral(_base_form(gold))
    if p is None and g is None:
        return None
    if p is not None and g is not None:
        return p[1] == g[1] and p[0] == g[0]
    written, plain = (p, _base_form(gold)) if p is not None else (g, _base_form(pred))
    if not _PLAIN_NUMERAL.fullmatch(plain) or not re.search(r"\d", plain):
        return None if p is not None else False
    value = _value(plain, written[1])
    return value is not None and value == written[0]


def _numeral(s: str) -> tuple[int, int] | None:
    """``(value, base)`` of a base-n numeral with at least one decimal digit, or ``None``."""
    m = _BASE.fullmatch(s)
    if m is None or not re.search(r"\d", m.group(1)):
        return None
    base = int(m.group(2))
    value = _value(m.group(1), base)
    return (value, base) if value is not None else None


def _value(digits: str, base: int) -> int | None:
    if not 2 <= base <= 36:
        return None
    try:
        return int(digits, base)
    except ValueError:
        return None


__all__ = ["base_verdict", "choice_gold", "choice_verdict", "read_choice"]
