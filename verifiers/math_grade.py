"""Grading an extracted answer against the gold answer: the fast stages and the symbolic stage's guard.

Stages 1-2 of :class:`~dapo_env.verifiers.math.MathVerifier`'s cascade (normalised strings, exact numbers,
choice letters, short text, element-wise tuples / intervals / sets / matrices) run in process; what they
cannot decide goes to :func:`symbolic_grade`, which guards the symbolic stage
(:mod:`dapo_env.verifiers.math_symbolic`). Strict and lenient grading both build on :func:`grade`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .math_eval import evaluate, identity, proportional
from .math_normalize import Number, canonical, parse_number
from .math_symbolic import symbolic_equal
from .math_towers import tower_equal

_MC_GOLD = re.compile(r"\s*(?:\\text(?:bf)?\{\s*)?\(?([A-E])\)?(?:\s*\})?\s*")
_MC_PRED = re.compile(r"\(?([A-E])\)?(?![A-Za-z]|,[A-E]|,\([A-E])")
_TEXT = re.compile(r"[A-Za-z][A-Za-z' -]*[A-Za-z]")
_VAR = r"(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?\w+\}?)?(?:\^\{?-?\d\}?)?(?:\([A-Za-z]\))?"
_LHS_VAR = re.compile(rf"{_VAR}|\({_VAR}(?:,{_VAR})+\)")  # x, f(x), a_1, \theta, (x,y)
_MAX_ITEMS = 64
_MAX_PAREN_STRIP = 256
_MAX_MATCHED_ITEMS = 16
_MAX_SYMBOLIC_CHARS = 300  # the longest MATH-500 answer has 159 characters
_PATHOLOGICAL = re.compile(
    r"\^\{[^{}]*\^|\^\{?\d{4,}|\d{4,}\s*!|[)}]\s*!|\\underbrace|\\overbrace"
)
_PROSE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{12,}")
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z{])[A-Za-z]{4,}")
_EQUATION = re.compile(r"(?<![<>!])=(?!=)")
_APPROX = re.compile(r"\d\.\d{3,}")
_BASE_SUBSCRIPT = re.compile(r"[0-9A-Za-z]+_\{?\d+\}?")



def symbolic_grade(pred: str, gold: str, remaining_s: float) -> tuple[bool, str]:
    p, g = _strip_lhs(canonical(pred), canonical(gold)), canonical(gold)
    if (len(p) > _MAX_SYMBOLIC_CHARS or len(g) > _MAX_SYMBOLIC_CHARS or _PATHOLOGICAL.search(p)
            or p.count(",") > _MAX_MATCHED_ITEMS):
        return False, "not_equal:too_complex"
    if _PROSE.search(p) or _PROSE.search(g):
        return False, "not_equal"  # words run together by canonical ("Theareais40"): sympy reads no prose
    if remaining_s <= 0:
        return False, "timeout"
    gn = parse_number(g)
    decimals = gn.decimals if gn is not None and gn.decimals else None
    return symbolic_equal(p, g, remaining_s, gold_decimals=decimals)


# ---------------------------------------------------------------------------------------------------
# Fast grading: returns True / False, or None when only the symbolic stage can decide.
def grade(pred: str, gold: str) -> tuple[bool | None, str]:
    """Fast in-process grading of an extracted answer (stages 1-2 of the cascade).

    Returns ``(verdict, reason)``; ``verdict`` is ``None`` when the pair needs the symbolic stage.

    Example:
        >>> grade("0.5", "\\\\frac{1}{2}"), grade("(C) 40", "40"), grade("an even function", "\\\\text{even}")
        ((True, 'equal:numeric'), (True, 'equal:string'), (True, 'equal:string'))
    """
    p, g = canonical(pred), canonical(gold)
    letter = _mc_gold(g)
    if letter is not None:
        found = _MC_PRED.match(re.sub(r"(?i)^(?:option|choice|answer|letter)[:.]?", "", p))  # "Option C"
        ok = found is not None and found.group(1) == letter
        return ok, "equal:choice" if ok else "not_equal"
    labelled = _CHOICE_LABEL.fullmatch(p)
    if labelled is not None:  # "(C) 40" against the gold 40: the value after the choice's label
        p = labelled.group(1)
    if _TEXT.fullmatch(g) and "\\" not in g and _words(pred) == _words(gold) != "":
        return True, "equal:string"
    return _grade_canonical(p, g, depth=0)


_CHOICE_LABEL = re.compile(r"\(?[A-E][).:](.+)")
_ARTICLES = re.compile(r"^(?:(?:a|an|the)\s+)+|\s+(?:function|number|integer)$")


def _words(text: str) -> str:
    """A short text answer's words, without articles or a trailing kind (``an even function`` -> ``even``)."""
    words = re.sub(r"\\[A-Za-z]+|[^A-Za-z' ]", " ", text.replace("\\text", " ")).lower()
    return _ARTICLES.sub("", " ".join(words.split()))


def _mc_gold(gold: str) -> str | None:
    m = _MC_GOLD.fullmatch(gold)
    return m.group(1) if m else None


def _strip_lhs(p: str, other: str, *, gold: bool = False) -> str:
    """``x=5`` -> ``5`` (and ``x\\in[1,2]`` -> ``[1,2]``) when ``other`` is not itself an equation.

    A prediction also loses a worked left side (``3+4=7``, ``m+n=33``) before a number; a gold
    equation keeps its left side unless it is a lone variable (``x+2y=0`` is never the number 0).
    """
    if "=" in p and "=" not in other and not (p.count("=") > 1 and "," in p):
        lhs, rhs = p.split("=", 1) if p.count("=") == 1 else p.rsplit("=", 1)
        if rhs and (_LHS_VAR.fullmatch(lhs) or (not gold and (p.count("=") > 1 or parse_number(rhs) is not None))):
            return rhs
    if "\\in" in p:
        lhs, _, rhs = p.partition("\\in")
        if _LHS_VAR.fullmatch(lhs):
            return rhs
    return p


def _grade_canonical(p: str, g: str, depth: int) -> tuple[bool | None, str]:
    if not p:
        return False, "no_answer"
    if p == g:
        return True, "equal:string"
    p, g = _strip_parens(_strip_lhs(p, g)), _strip_parens(_strip_lhs(g, p, gold=True))
    p, g = _expand_pm(p), _expand_pm(g)
    if p == g:
        return True, "equal:string"
    if "=" not in p and "," not in g and _EQUATION.search(g):
        return False, "not_equal"  # an equation gold (x + 2y = 0) is never a bare value
    if _BASE_SUBSCRIPT.fullmatch(g) or _BASE_SUBSCRIPT.fullmatch(p):  # 52_8: digits must match exactly
        ok = _base_key(p) == _base_key(g)
        return ok, "equal:string" if ok else "not_equal"
    if _INEQ.search(p) and not _INEQ.search(g):
        as_interval = _inequalities_to_intervals(p)
        if as_interval is not None:
            return _grade_canonical(as_interval, g, depth + 1)
    pn, gn = parse_number(p), parse_number(g)
    if gn is not None and pn is not None:
        ok = numbers_equal(pn, gn)
        return ok, "equal:numeric" if ok else "not_equal"
    if "^" in p + g:
        towers = tower_equal(p, g)  # 10^{10^{10}}, 1^{10^{10}}: exact, never expanded
        if towers is not None:
            return towers, "equal:numeric" if towers else "not_equal"
    if gn is not None and (_PROSE_WORD.search(p) or _TEXT.fullmatch(p) and p.lower() not in ("pi", "inf", "infty")
                           or _INEQ.search(p) or "\\ne" in p):
        return False, "not_equal"  # a word ("Yes", "even", "toanswer66") is never a number
    if p.count("{") != p.count("}") or p.count("(") + p.count("[") != p.count(")") + p.count("]") or (
        "{}" in p and "{}" not in g
    ):
        return False, "not_equal"  # malformed LaTeX (e.g. a box cut off mid-way) is never equal
    if _plain_number_like(p) and _plain_number_like(g):  # too long for parse_number: compare digits
        return False, "not_equal"
    if _TEXT.fullmatch(g) and (len(g) >= 3 or g.lower() in ("no", "ok")) and "\\" not in g:
        ok = _text_key(p) == _text_key(g)
        return ok, "equal:string" if ok else "not_equal"
    if "\\infty" in p + g and "," not in p + g and "\\cup" not in p + g:
        return False, "not_equal"  # a bare infinity equals only the same infinity (string equal above)
    if "matrix}" in g and "matrix}" in p:
        return _grade_matrix(p, g, depth)
    if depth < 2:
        verdict = _grade_structure(p, g, depth)
        if verdict is not None:
            return verdict, "equal:numeric" if verdict else "not_equal"
    if gn is not None and _plain_number_like(p):
        return False, "not_equal"
    if gn is not None and gn.decimals and _rounds_to(p, gn):
        return True, "equal:numeric"
    if p.count("=") == 1 and g.count("=") == 1:
        verdict = _equations_equal(p, g)
    else:
        # A long decimal (1.4142) is an approximation: it may only equal the gold exactly.
        verdict = identity(p, g, exact_only=bool(_APPROX.search(p)) and not _APPROX.search(g))
    if verdict is not None:
        return verdict, "equal:symbolic" if verdict else "not_equal"
    return None, "undecided"


_MATRIX = re.compile(r"\\begin\{[pbvB]?matrix\}(.*)\\end\{[pbvB]?matrix\}")


def _grade_matrix(p: str, g: str, depth: int) -> tuple[bool | None, str]:
    """Matrices and vectors entry by entry (rows split on ``\\\\``, columns on ``&``)."""
    pm, gm = _MATRIX.fullmatch(p), _MATRIX.fullmatch(g)
    if pm is None or gm is None:
        return None, "undecided"
    prows = [row.split("&") for row in pm.group(1).split("\\\\")]
    grows = [row.split("&") for row in gm.group(1).split("\\\\")]
    if [len(r) for r in prows] != [len(r) for r in grows]:
        return False, "not_equal"
    verdicts = [_grade_canonical(a, b, depth + 1)[0] for pr, gr in zip(prows, grows) for a, b in zip(pr, gr)]
    if all(verdicts):
        return True, "equal:symbolic"
    return (False, "not_equal") if any(v is False for v in verdicts) else (None, "undecided")


def _rounds_to(p: str, gold: Number) -> bool:
    """An exact constant ``p`` (``\\sqrt{3}``, ``1/3``) that rounds half up to the decimal gold."""
    value = evaluate(p)
    if value is None:
        return False
    if isinstance(value, complex):
        if value.imag != 0 or abs(value.real) > 1e12:
            return False
        value = Fraction(value.real)
    return _round_half_up(value, gold.decimals or 0) == gold.value


def _equations_equal(p: str, g: str) -> bool | None:
    """``y=2x+3`` vs ``3+2x=y``: ``lhs - rhs`` of one is a non-zero constant times the other's."""
    (pl, pr), (gl, gr) = p.split("="), g.split("=")
    if identity(pl, gl) and identity(pr, gr):
        return True
    return proportional(f"({pl})-({pr})", f"({gl})-({gr})")


_INEQ = re.compile(r"<|>|\\le|\\ge|\\lt|\\gt")
_INEQ_PART = re.compile(
    r"(?:(?P<lo>[^<>=]+?)(?P<lop><|\\le|\\lt)(?P<var>[A-Za-z])(?P<hop><|\\le|\\lt)(?P<hi>[^<>=]+))"
    r"|(?:(?P<v1>[A-Za-z])(?P<op1><|>|\\le|\\ge|\\lt|\\gt)(?P<b1>[^<>=]+))"
    r"|(?:(?P<b2>[^<>=]+?)(?P<op2><|>|\\le|\\ge|\\lt|\\gt)(?P<v2>[A-Za-z]))"
)


def _inequalities_to_intervals(p: str) -> str | None:
    """``-2\\le x<7`` -> ``[-2,7)``; ``x<-2,x>2`` (an "or" list) -> ``(-\\infty,-2)\\cup(2,\\infty)``."""
    out = []
    for part in p.split(","):
        m = _INEQ_PART.fullmatch(part.replace(" ", ""))
        if m is None:
            return None
        if m.group("var"):
            lo, hi = m.group("lo"), m.group("hi")
            out.append(("[" if m.group("lop") == "\\le" else "(") + f"{lo},{hi}" + ("]" if m.group("hop") == "\\le" else ")"))
            continue
        if m.group("v1"):
            op, bound = m.group("op1"), m.group("b1")
        else:  # 3 < x  is  x > 3
            op = {"<": ">", ">": "<", "\\le": "\\ge", "\\ge": "\\le", "\\lt": "\\gt", "\\gt": "\\lt"}[m.group("op2")]
            bound = m.group("b2")
        if op in (">", "\\gt", "\\ge"):
            out.append(("[" if op == "\\ge" else "(") + f"{bound},\\infty)")
        else:
            out.append(f"(-\\infty,{bound}" + ("]" if op == "\\le" else ")"))
    return "\\cup".join(out)


def _base_key(s: str) -> str:
    return re.sub(r"_\{(\w+)\}", r"_\1", s).lstrip("0")


def _expand_pm(s: str) -> str:
    """``a\\pm b`` -> ``a+b,a-b`` (a two-element list), for a single ``\\pm`` outside any list."""
    if s.count("\\pm") != 1 or "," in s or "\\mp" in s:
        return s
    return s.replace("\\pm", "+", 1) + "," + s.replace("\\pm", "-", 1)


def _strip_parens(s: str) -> str:
    """``((5))`` -> ``5``: drop redundant outer parentheses (never those of a tuple or interval)."""
    for _ in range(_MAX_PAREN_STRIP):
        if not (s.startswith("(") and s.endswith(")")):
            return s
        depth = 0
        for i, ch in enumerate(s):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(s) - 1:
                return s
            if depth == 1 and ch == ",":
                return s
        s = s[1:-1]
    return s


def _plain_number_like(p: str) -> bool:
    """A pred that is visibly just a (non-parsed, e.g. huge) number, so no symbolic stage is needed."""
    return bool(re.fullmatch(r"[-+]?\d[\d.]*", p))


def _text_key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def numbers_equal(p: Number, g: Number) -> bool:
    """Exact equality, with the documented percent and rounding policy.

    * ``50%`` equals ``50`` and ``0.5``; a gold ``50\\%`` accepts ``50`` and ``0.5``.
    * Decimals are compared exactly (``0.333 != 0.33``; ``0.50 == 0.5``).
    * A gold written as a decimal with ``d`` places accepts an exact non-decimal value that rounds
      (half up) to it: gold ``0.33`` accepts ``1/3``. The converse is wrong: gold ``1/3`` rejects
      ``0.333`` (an approximation). Gold integers never accept non-integers.
    """
    preds = {p.value} | ({p.value / 100} if p.percent and not g.percent else set())
    golds = {g.value} | ({g.value / 100} if g.percent and not p.percent else set())
    if preds & golds:
        return True
    if g.decimals and p.decimals is None:
        return any(_round_half_up(v, g.decimals) == g.value for v in preds)
    return False


def _round_half_up(value: Fraction, decimals: int) -> Fraction:
    scale = 10**decimals
    scaled = int(abs(value) * scale + Fraction(1, 2))
    return Fraction(scaled if value >= 0 else -scaled, scale)


_INF = Fraction(10) ** 1000  # stands in for infinity when merging intervals


def _endpoint(s: str) -> Fraction | None:
    if s in ("\\infty", "+\\infty", "\\infinity", "inf", "oo"):
        return _INF
    if s in ("-\\infty", "-\\infinity", "-inf", "-oo"):
        return -_INF
    n = parse_number(s)
    return None if n is None or n.percent else n.value


def _interval_union(parts: list[str]) -> list[tuple[Fraction, bool, Fraction, bool]] | None:
    """A union of intervals with numeric endpoints as sorted, merged ``(lo, closed, hi, closed)``."""
    spans = []
    for part in parts:
        if len(part) < 5 or part[0] not in "([" or part[-1] not in ")]":
            return None
        ends = part[1:-1].split(",")
        if len(ends) != 2:
            return None
        lo, hi = _endpoint(ends[0]), _endpoint(ends[1])
        if lo is None or hi is None or lo > hi:
            return None
        spans.append((lo, part[0] == "[", hi, part[-1] == "]"))
    spans.sort(key=lambda t: (t[0], not t[1]))
    merged: list[tuple[Fraction, bool, Fraction, bool]] = []
    for lo, lc, hi, hc in spans:
        if merged:
            plo, plc, phi, phc = merged[-1]
            if lo < phi or (lo == phi and (lc or phc)):
                if hi > phi or (hi == phi and hc):
                    merged[-1] = (plo, plc, hi, hc if hi > phi else (hc or phc))
                continue
        merged.append((lo, lc, hi, hc))
    return merged


def _union_of(s: str) -> list[tuple[Fraction, bool, Fraction, bool]] | None:
    """A union of intervals, minus finitely many points (``\\mathbb{R}\\setminus\\{0\\}``), as merged spans."""
    base, _, removed = s.partition("\\setminus")
    spans = _interval_union(_split_top(base, "\\cup"))
    if spans is None or not removed:
        return spans
    if not (removed.startswith("\\{") and removed.endswith("\\}")):
        return None
    points = [_endpoint(x) for x in removed[2:-2].split(",")]
    if any(x is None for x in points):
        return None
    for x in sorted(points):
        split = []
        for lo, lc, hi, hc in spans:
            if lo < x < hi or (x == lo and lc) or (x == hi and hc):
                if lo < x or (lo == x and not lc):
                    split.append((lo, lc, x, False))
                if x < hi:
                    split.append((x, False, hi, hc))
            else:
                split.append((lo, lc, hi, hc))
        spans = [span for span in split if span[0] < span[2] or (span[1] and span[3])]
    return spans


def _split_top(s: str, sep: str) -> list[str]:
    """Split ``s`` on ``sep`` outside brackets."""
    parts, depth, last, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif depth <= 0 and s.startswith(sep, i):
            parts.append(s[last:i])
            last = i + len(sep)
            i = last
            continue
        i += 1
    parts.append(s[last:])
    return parts


def _split_structure(s: str) -> tuple[str, str, list[str]] | None:
    """``(open, close, items)`` for ``(a,b)``, ``[a,b)``, ``\\{a,b\\}`` or a bare ``a,b`` list."""
    opener = next((o for o in ("\\{", "\\langle", "(", "[") if s.startswith(o)), None)
    closer = next((c for c in ("\\}", "\\rangle", ")", "]") if s.endswith(c)), None)
    if opener and closer and len(s) > len(opener) + len(closer):
        items = _split_items(s[len(opener) : -len(closer)])
        if items is not None:
            return opener, closer, items
    items = _split_items(s)  # a bare list, e.g. (1,2),(3,4)
    if items is None or len(items) < 2:
        return None
    return "", "", items


def _split_items(inner: str) -> list[str] | None:
    """Split on commas outside brackets; ``None`` if the brackets do not balance."""
    items, depth, last = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth < 0:
                return None
        elif ch == "," and depth == 0:
            items.append(inner[last:i])
            last = i + 1
    items.append(inner[last:])
    if depth != 0 or len(items) > _MAX_ITEMS:
        return None
    return items


def _grade_structure(p: str, g: str, depth: int) -> bool | None:
    if "\\cup" in g + p or "\\setminus" in g + p:
        pparts, gparts = _split_top(p, "\\cup"), _split_top(g, "\\cup")
        pu, gu = _union_of(p), _union_of(g)
        if pu is not None and gu is not None:
            return pu == gu
        if len(pparts) != len(gparts):
            return None
        verdicts = [_grade_canonical(a, b, depth + 1)[0] for a, b in zip(pparts, gparts)]
        return True if all(verdicts) else (False if any(v is False for v in verdicts) else None)
    ps, gs = _split_structure(p), _split_structure(g)
    if gs is None and ps is not None and not ps[0] and "," not in g and "\\pm" not in p + g:
        if all(_grade_canonical(item, g, depth + 1)[0] for item in ps[2]):
            return True  # one answer written several ways ("15\\frac{39}{40} or \\frac{639}{40}")
        return False  # several values where the gold has one
    if "\\pm" not in p + g and ps is None and gs is not None and not gs[0] and "," not in p:
        return False  # one value where the gold lists several
    if ps is None or gs is None:
        return None
    (po, pc, pitems), (go, gc, gitems) = ps, gs
    if not po and go in ("(", "\\langle") and len(pitems) == len(gitems):
        po, pc = go, gc  # parts boxed separately ("2, 3") against a tuple gold: compared in order
    unordered = go in ("", "\\{") and po in ("", "\\{")
    if not unordered and (po, pc) != (go, gc):
        if {po, go} <= {"(", "["} and len(pitems) == len(gitems) == 2:
            return False  # intervals with different endpoints closed/open
        return None
    if unordered:
        as_sets = _numeric_tuple_sets(pitems, gitems)
        if as_sets is not None:
            return as_sets
    if len(pitems) != len(gitems):
        return False if (po, pc) == (go, gc) and all(parse_number(x) for x in pitems + gitems) else None
    if not unordered:
        verdicts = [_grade_canonical(a, b, depth + 1)[0] for a, b in zip(pitems, gitems)]
        if any(v is False for v in verdicts):
            return False
        return True if all(verdicts) else None
    if len(pitems) > _MAX_MATCHED_ITEMS:  # large lists: compare as sorted strings only
        return True if sorted(pitems) == sorted(gitems) else None
    verdicts = [[_grade_canonical(a, b, depth + 1)[0] for b in gitems] for a in pitems]
    if _perfect_matching([[v is True for v in row] for row in verdicts]):
        return True
    if all(v is not None for row in verdicts for v in row):
        return False  # every pairing decided, and no one-to-one match exists
    return None


def _numeric_tuple_sets(pitems: list[str], gitems: list[str]) -> bool | None:
    """Unordered lists of tuples of plain numbers (``(1,2),(3,4)``; ``;`` separators too) compared as sets,
    as the symbolic stage would (a repeated tuple counts once); ``None`` when any item is not such a tuple."""
    sets = []
    for items in (pitems, gitems):
        tuples = set()
        for item in items:
            if not (item.startswith("(") and item.endswith(")")) or len(item) < 5:
                return None
            values = [parse_number(x) for x in re.split(r"[,;]", item[1:-1])]
            if len(values) < 2 or any(v is None or v.percent for v in values):
                return None
            tuples.add(tuple(v.value for v in values))
        sets.append(tuples)
    return sets[0] == sets[1]


def _perfect_matching(ok: list[list[bool]]) -> bool:
    """Whether the bipartite graph ``ok[i][j]`` has a perfect matching (augmenting paths, <= 64 items)."""
    match: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j, edge in enumerate(ok[i]):
            if edge and j not in seen:
                seen.add(j)
                if j not in match or augment(match[j], seen):
                    match[j] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(len(ok)))


__all__ = ["grade", "numbers_equal", "symbolic_grade"]
