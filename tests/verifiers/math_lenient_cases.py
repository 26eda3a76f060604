"""A labelled table for ``MathVerifier(extraction="lenient")``: evaluation-style pairs, written by hand.

Evaluation suites pair a gold answer with a short prediction or a model's raw text, often without any
commitment ("I believe it's $5$"). Each case is ``LenientCase(category, prediction, gold, expected)``:
``expected`` is whether the prediction's last math (its committed answer if it has one) equals the gold.
Categories: ``short`` (a bare prediction in some notation), ``prose`` (the answer inside uncommitted
text), ``commit`` (a commitment that must beat later numbers), ``gold_form`` (golds written with ``$``,
``\\boxed{}`` or ``\\(...\\)``), and ``near_miss`` (must stay wrong).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LenientCase:
    category: str
    prediction: str
    gold: str
    expected: bool


_SHORT = [
    ("0.5", "\\frac{1}{2}", True), ("1/2", "\\frac12", True), ("2.0", "2", True), ("(x+1)^2", "x^2+2x+1", True),
    ("\\{2,1\\}", "\\{1,2\\}", True), ("[0,1)", "[0, 1)", True), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt2}", True),
    ("1e-3", "0.001", True), ("10^{-3}", "0.001", True), ("3 \\times 10^{5}", "300000", True), ("50\\%", "0.5", True),
    ("\\dfrac{7}{3}", "\\frac{7}{3}", True), ("2\\sqrt{2}", "\\sqrt{8}", True), ("\\pi/2", "\\frac{\\pi}{2}", True),
    ("y = 2x + 1", "2x+1", True), ("2x+1", "y=2x+1", True), ("x \\in (0, 1)", "(0,1)", True), ("x > 2", "(2,\\infty)", True),
    ("-1 \\le x \\le 1", "[-1,1]", True), ("1 + 2i", "2i + 1", True), ("\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}",
    "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True), ("(1, 2)", "(1,2)", True), ("a=2, b=3", "(2,3)", True),
    ("10 \\text{ cm}", "10", True), ("1,000,000", "1000000", True), ("\\text{Yes}", "yes", True), ("e^{i\\pi}", "-1", True),
    ("\\sin^2 x + \\cos^2 x", "1", True), ("\\ln(e^2)", "2", True), ("\\frac{x^2-1}{x-1}", "x+1", True),
    ("\\binom{6}{2}", "15", True), ("6!", "720", True), ("\\sqrt[3]{8}", "2", True), ("0.\\overline{6}", "\\frac23", True),
    ("\\infty", "\\infty", True), ("(-\\infty, 0) \\cup (0, \\infty)", "\\mathbb{R}\\setminus\\{0\\}", True),
    ("\\frac{3}{4}", "75\\%", True), ("x = 3", "3", True), ("3", "x=3", True), ("\\$12.50", "12.5", True),
    ("\\frac{1}{\\sqrt{3}}", "\\frac{\\sqrt{3}}{3}", True), ("\\left( 1, \\frac{1}{2} \\right)", "(1, 0.5)", True),
    ("sqrt(2)/2", "\\frac{1}{\\sqrt2}", True), ("2pi", "2\\pi", True), ("\\log_2 8", "3", True), ("12 times 11", "132", True),
]
_PROSE = [
    ("I believe it's $5$.", "5", True), ("So we get $x = \\frac{1}{2}$", "\\frac12", True),
    ("The answer is probably 7", "7", True), ("Computing gives 12 and then 24", "24", True),
    ("the area comes out to $16\\pi$ square units", "16\\pi", True), ("we find y = 3", "3", True),
    ("$$\\frac{3}{4}$$ seems right", "0.75", True), ("Thus $f(2) = 9$", "9", True),
    ("After simplifying, \\(\\sqrt{5}\\)", "\\sqrt5", True), ("The roots: $x=1$ and finally $x=2$", "2", True),
    ("so it's about 3.14", "3.14", True), ("This equals \\[ 2^{10} \\]", "1024", True),
    ("Hmm, 42 maybe?", "42", True), ("Let me compute: 3 + 4 = 7", "7", True),
    ("The value is 1/3", "\\frac13", True), ("We get -5 as the result", "-5", True),
    ("the interval is $(2, 5]$", "(2,5]", True), ("final result 100%", "1", True),
]
_COMMIT = [
    ("The answer is $\\boxed{6}$, since 2 + 4 = 6 and 6 > 5", "6", True),
    ("\\boxed{12}. Note that 13 would be wrong.", "12", True), ("Answer: 8\nCheck: 8 * 2 = 16", "8", True),
    ("Final Answer: 3 (I also tried 4 and 5)", "3", True), ("#### 72\n(48 + 24 = 72)", "72", True),
    ("The answer is 5. Some working: 1, 2, 3", "5", True),
    ("The answer is $\\boxed{6}$, since 2 + 4 = 6 and 6 > 5", "5", False),
]
_GOLD_FORMS = [
    ("\\pi", "3.14", True), ("0.5", "$\\frac{1}{2}$", True), ("0.5", "\\boxed{\\frac{1}{2}}", True), ("0.5", "\\(\\frac12\\)", True),
    ("7", "$7$", True), ("Option C", "\\text{(C)}", True), ("(1,2)", "$\\left(1, 2\\right)$", True), ("\\text{(B)}", "$B$", True), ("B", "\\boxed{B}", True),
    ("8", "$\\boxed{7}$", False), ("0.25", "$\\frac{1}{2}$", False),
]
_NEAR_MISS = [
    ("0.33", "\\frac{1}{3}", False), ("1.414", "\\sqrt{2}", False), ("(2,1)", "(1,2)", False), ("[0,1]", "[0,1)", False),
    ("x^2+1", "(x+1)^2", False), ("-2", "2", False), ("\\{1,2\\}", "\\{1,2,3\\}", False), ("2x", "x^2", False),
    ("1e-4", "0.001", False), ("The answer is $\\boxed{\\frac{14}{3", "\\frac{14}{3}", False), ("no idea", "5", False),
    ("12 + 3", "14", False), ("x > 2", "[2,\\infty)", False), ("\\frac{3}{8}", "\\frac{8}{3}", False),
    ("I think it's 5, wait no, it's 6", "5", False), ("10 \\text{ cm}", "100", False), ("60", "\\frac{\\pi}{3}", False),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}", False),
    ("", "0", False), ("   ", "0", False), ("sqrt(3)/2", "\\frac{1}{\\sqrt2}", False), ("3pi", "2\\pi", False),
    ("12 times 11", "121", False), ("The answer is not 5", "5", False), ("x \\neq 5", "5", False),
]

LENIENT_CASES: list[LenientCase] = [
    LenientCase(category, prediction, gold, expected)
    for category, rows in (("short", _SHORT), ("prose", _PROSE), ("commit", _COMMIT), ("gold_form", _GOLD_FORMS),
                           ("near_miss", _NEAR_MISS))
    for prediction, gold, expected in rows
]
