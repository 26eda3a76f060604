"""A labelled table of (response, gold, expected) math cases, written by hand for MathVerifier.

Each case is ``MathCase(category, response, gold, expected)``. ``expected`` is what a careful human
grader says: is the response's committed final answer equal to the gold? Responses imitate model
output (working with distractor numbers, self-corrections, truncation); golds are written in the
styles of DAPO-Math-17K (integers), MATH-500 (LaTeX), GSM8K and AIME.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MathCase:
    category: str
    response: str
    gold: str
    expected: bool


# Working text a model writes before it commits: full of numbers that are not the answer.
_WORK = [
    "Let me work through this step by step.\n\nFirst, 12 \\times 3 = 36, and subtracting 7 gives 29. "
    "The constraint says the total is at most 40, so 29 works so far.\n\n",
    "We set up the equation $2x + 5 = 17$, so $x = 6$. Then the second quantity is $3x - 1 = 17$. "
    "Adding the two parts: $6 + 17 = 23$.\n\n",
    "<think>\nOkay, so I need to find the value. Let me denote the unknown by $n$. We know that "
    "$n^2 - 10n + 21 = 0$, which factors as $(n-3)(n-7) = 0$. Hmm, both roots 3 and 7 need checking.\n"
    "Testing n = 3: 9 - 30 + 21 = 0, yes. Testing n = 7: 49 - 70 + 21 = 0, yes.\n</think>\n\n",
    "Step 1: The area of the rectangle is $8 \\cdot 5 = 40$.\nStep 2: The triangle cut off has area "
    "$\\frac{1}{2} \\cdot 4 \\cdot 3 = 6$.\nStep 3: Combine the pieces carefully.\n\n",
    "Using the formula $S = \\frac{n(n+1)}{2}$ with $n = 20$ gives $S = 210$. We also need the count of "
    "multiples of 3 up to 20, which is 6, with sum 63.\n\n",
]


def _w(i: int) -> str:
    return _WORK[i % len(_WORK)]


def _endings(answer: str) -> list[str]:
    """The ways a model commits to ``answer``."""
    return [
        f"Answer: {answer}",
        f"Therefore, the final answer is $\\boxed{{{answer}}}$.",
        f"So the answer is $\\boxed{{{answer}}}$.",
        f"**Final Answer**\n\\[\n\\boxed{{{answer}}}\n\\]",
        f"The final answer is ${answer}$.",
        f"Answer: $\\boxed{{{answer}}}$",
    ]


CASES: list[MathCase] = []


def _add(category: str, response: str, gold: str, expected: bool) -> None:
    CASES.append(MathCase(category, response, gold, expected))


# --- DAPO-Math-17K style: integer golds ------------------------------------------------------------
_DAPO_INTS = ["34", "204", "17", "1", "0", "1009", "2023", "72", "5", "486", "12", "840", "3", "99", "250"]
for i, g in enumerate(_DAPO_INTS):
    for j, end in enumerate(_endings(g)[: 2 + i % 3]):
        _add("dapo_int", _w(i + j) + end, g, True)
_add("dapo_int", _w(0) + "Answer: 35", "34", False)
_add("dapo_int", _w(1) + "Answer: 2024", "2023", False)
_add("dapo_int", _w(2) + "Answer: -17", "17", False)
_add("dapo_int", _w(3) + "Answer: 1010", "1009", False)
_add("dapo_int", _w(4) + "The final answer is $\\boxed{840.5}$.", "840", False)
_add("dapo_int", _w(0) + "Answer: 205", "204", False)
_add("dapo_int", _w(1) + "Answer: 7", "72", False)
_add("dapo_int", _w(2) + "Answer: 720", "72", False)
_add("dapo_int", _w(3) + "So the answer is $\\boxed{48}$.", "486", False)
_add("dapo_int", _w(4) + "Answer: 1", "0", False)
_add("dapo_int", _w(0) + "Answer: 72.0", "72", True)
_add("dapo_int", _w(1) + "Answer: $+5$", "5", True)
_add("dapo_int", _w(2) + "Answer: 0034", "34", True)
_add("dapo_int", _w(3) + "answer: 99", "99", True)
_add("dapo_int", _w(4) + "Answer:250", "250", True)

# --- MATH-500 style LaTeX golds: an equivalent form (True) and a wrong one (False) -----------------
_MATH500 = [
    ("\\frac{14}{3}", "\\dfrac{14}{3}", "\\frac{13}{3}"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\frac{\\pi}{2})", "(3, \\pi)"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left(3,\\dfrac{\\pi}{2}\\right)", "\\left( \\frac{\\pi}{2}, 3 \\right)"),
    ("\\text{(C)}", "(C)", "(B)"),
    ("\\sqrt{2}", "\\sqrt2", "\\sqrt{3}"),
    ("\\frac{8}{21}", "8/21", "\\frac{8}{20}"),
    ("\\pi", "\\pi", "3.14"),
    ("\\frac{11+9a}{20}", "\\frac{9a+11}{20}", "\\frac{11+9a}{21}"),
    ("\\frac9{19}", "\\frac{9}{19}", "\\frac{19}{9}"),
    ("16 \\sqrt{3}", "16\\sqrt{3}", "16\\sqrt{2}"),
    ("(2,4)", "(2, 4)", "(4,2)"),
    ("-\\frac{\\pi}{6}", "-\\dfrac{\\pi}{6}", "\\frac{\\pi}{6}"),
    ("\\frac{20000}{\\pi}", "\\dfrac{20000}{\\pi}", "\\frac{2000}{\\pi}"),
    ("3R^2", "3R^2", "3R^3"),
    ("1+2i", "2i+1", "1-2i"),
    ("0.15", "0.15", "0.16"),
    ("\\left(\\frac{3}{5},\\frac{8}{3}\\right]", "(\\frac{3}{5}, \\frac{8}{3}]", "[\\frac{3}{5}, \\frac{8}{3}]"),
    ("6r^2-4r-24", "6r^2 - 4r - 24", "6r^2-4r+24"),
    ("6\\sqrt{2}", "\\sqrt{72}", "6\\sqrt{3}"),
    ("1\\frac{4}{5}", "\\frac{9}{5}", "\\frac{4}{5}"),
    ("(0,9) \\cup (9,36)", "(0, 9) \\cup (9, 36)", "(0,36)"),
    ("\\sqrt{66}", "\\sqrt{66}", "66"),
    ("8n^2 + 4n + 1", "8n^2+4n+1", "8n^2+4n-1"),
    ("180^\\circ", "180", "90^\\circ"),
    ("(2,12) \\cup (12,102)", "(2,12)\\cup(12,102)", "(2,12) \\cup (12,100)"),
    ("\\text{Evelyn}", "Evelyn", "Bob"),
    ("x^5 - x^4 + x^3 - x^2 + x - 1", "x^5-x^4+x^3-x^2+x-1", "x^5 + x^4 + x^3 + x^2 + x + 1"),
    ("-13x+3", "3-13x", "-13x-3"),
    ("1+2\\sqrt{3}", "2\\sqrt{3}+1", "1+3\\sqrt{2}"),
    ("10,\\!080", "10080", "10008"),
    ("3 \\sqrt{5}", "\\sqrt{45}", "5\\sqrt{3}"),
    ("11\\sqrt2", "11\\sqrt{2}", "11"),
    ("(a+5)(b+2)", "(b+2)(a+5)", "(a+2)(b+5)"),
    ("11 \\sqrt{5} + 11", "11+11\\sqrt{5}", "11\\sqrt{5}"),
    ("18+2\\pi", "2\\pi + 18", "18+\\pi"),
    ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", "\\sqrt{3}"),
    ("(-\\infty, 0]", "(-\\infty,0]", "(-\\infty, 0)"),
    ("-\\sqrt{3}", "-\\sqrt3", "\\sqrt{3}"),
    ("30^\\circ", "30^{\\circ}", "60^\\circ"),
    ("15\\mbox{ cm}^2", "15", "16"),
    ("\\dfrac{17}{50}", "0.34", "0.35"),
    ("2k", "2k", "k"),
    ("\\begin{pmatrix} -18 \\\\ -49 \\\\ 96 \\end{pmatrix}", "\\begin{pmatrix}-18\\\\-49\\\\96\\end{pmatrix}",
     "\\begin{pmatrix} -18 \\\\ 49 \\\\ 96 \\end{pmatrix}"),
    ("52_8", "52_8", "52_9"),
    ("\\frac{1}{4}", "0.25", "0.2"),
    ("5x - 7y + 11z + 4 = 0", "5x-7y+11z+4=0", "5x - 7y + 11z - 4 = 0"),
]
for i, (gold, good, bad) in enumerate(_MATH500):
    end_good = _endings(good)[1 + i % 4]
    end_bad = _endings(bad)[1 + (i + 1) % 4]
    _add("math500", _w(i) + end_good, gold, True)
    _add("math500", _w(i + 2) + end_bad, gold, False)

# --- Exact numbers in every notation -----------------------------------------------------------------
_NUMERIC = [
    ("1000", "1,000", True), ("1000000", "1,000,000", True), ("1000000", "1\\,000\\,000", True),
    ("1000", "1{,}000", True), ("12345", "12,345", True), ("1000", "1,001", False),
    ("\\frac{1}{2}", "0.5", True), ("0.5", "\\frac{1}{2}", True), ("\\frac{3}{4}", "0.75", True),
    ("\\frac{1}{3}", "0.333", False), ("\\frac{1}{3}", "0.3333333", False), ("0.333", "0.333", True),
    ("0.33", "\\frac{1}{3}", True), ("\\frac{2}{3}", "0.67", False), ("\\frac{1}{2}", "1/2", True),
    ("\\frac{1}{2}", "2/4", True), ("-\\frac{3}{4}", "\\frac{-3}{4}", True), ("-\\frac{3}{4}", "-0.75", True),
    ("\\frac{3}{4}", "-\\frac{3}{4}", False), ("2.5", "\\frac{5}{2}", True), ("2.5", "2\\frac{1}{2}", True),
    ("25\\%", "25", True), ("25", "25\\%", True), ("0.25", "25\\%", True), ("25\\%", "26\\%", False),
    ("12.5\\%", "12.5%", True),
    ("1.6 \\times 10^{-19}", "1.6e-19", True), ("1.6 \\times 10^{-19}", "1.6e-18", False),
    ("1.6 \\times 10^{-19}", "1.6\\cdot10^{-19}", True), ("3 \\times 10^8", "300000000", True),
    ("6.02 \\times 10^{23}", "6.02e23", True), ("6.02 \\times 10^{23}", "6.02e22", False),
    ("10^{6}", "1000000", True), ("2^{10}", "1024", True), ("2^{10}", "1000", False),
    ("0.5", "\u00bd", True), ("\\frac{3}{4}", "\u00be", True), ("-5", "\u22125", True),
    ("-5", "\u20135", True), ("-5", "\u20145", True), ("42", "\uff14\uff12", True), ("42", "\uff14\uff13", False),
    ("2\\sqrt{2}", "2\u221a2", True), ("\\pi", "\u03c0", True), ("2\\pi", "2\u03c0", True),
    ("7", "7.000", True), ("7", "7.001", False), ("7", "6.999", False), ("-0.2", "-\\frac{1}{5}", True),
    ("3.14", "3.14", True), ("3.14", "3.15", False), ("0.1", "0.10", True), ("0.1", "0.01", False),
    ("100", "10^2", True), ("100", "10^3", False), ("5", "5.", True), ("-7", "7", False),
    ("2.718", "2.781", False), ("144", "12^2", True), ("\\$18.50", "18.5", True), ("18.50", "\\$18.5", True),
]
for i, (gold, pred, expected) in enumerate(_NUMERIC):
    _add("numeric", _w(i) + _endings(pred)[i % 6], gold, expected)

# --- Multiple choice and short text -------------------------------------------------------------------
_CHOICE = [
    ("\\text{(C)}", "\\text{(C)}", True), ("\\text{(C)}", "C", True), ("\\text{(C)}", "(C) 12", True),
    ("\\text{(C)}", "\\textbf{(C)}", True), ("\\text{(C)}", "(D)", False), ("\\text{(C)}", "B", False),
    ("(A)", "A", True), ("(A)", "(A)", True), ("(A)", "E", False), ("B", "\\text{B}", True),
    ("D", "(D)", True), ("D", "(E)", False), ("\\text{(E)}", "E", True), ("\\text{(E)}", "\\text{(A)}", False),
]
for i, (gold, pred, expected) in enumerate(_CHOICE):
    _add("choice", _w(i) + _endings(pred)[i % 6], gold, expected)
_TEXT = [
    ("\\text{Monday}", "Monday", True), ("\\text{Monday}", "\\text{monday}", True),
    ("\\text{Monday}", "Tuesday", False), ("\\text{even}", "\\text{even}", True), ("\\text{even}", "odd", False),
    ("\\text{Evelyn}", "\\text{Evelyn}", True), ("\\text{east}", "East", True), ("\\text{east}", "west", False),
    ("\\text{yes}", "Yes", True), ("\\text{no}", "yes", False),
]
for i, (gold, pred, expected) in enumerate(_TEXT):
    _add("text", _w(i) + _endings(pred)[i % 6], gold, expected)

# --- Symbolic: expressions, intervals, sets, tuples, equations ----------------------------------------
_SYMBOLIC = [
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True), ("\\frac{\\sqrt{2}}{2}", "\\frac{\\sqrt{3}}{2}", False),
    ("2\\sqrt{2}", "\\sqrt{8}", True), ("x^2+2x+1", "(x+1)^2", True), ("x^2+2x+1", "(x-1)^2", False),
    ("\\frac{x+1}{x}", "1+\\frac{1}{x}", True), ("a^2-b^2", "(a-b)(a+b)", True), ("a^2-b^2", "(a-b)^2", False),
    ("[2, 5)", "[2,5)", True), ("[2, 5)", "[2, 5]", False), ("(-\\infty, 3)", "(-\\infty,3)", True),
    ("(-\\infty, 3)", "(-\\infty, 3]", False), ("[1,2] \\cup [3,4]", "[1, 2]\\cup[3, 4]", True),
    ("\\{1, 2, 3\\}", "\\{3, 2, 1\\}", True), ("\\{1, 2, 3\\}", "\\{1, 2\\}", False),
    ("1, 2, 3", "3, 1, 2", True), ("-2, 5", "5, -2", True), ("-2, 5", "2, -5", False),
    ("(1, -2)", "(1,-2)", True), ("(1, -2)", "(-2, 1)", False), ("(\\frac{1}{2}, 3)", "(0.5, 3)", True),
    ("y = 2x + 3", "y=2x+3", True), ("y = 2x + 3", "y = 3 + 2x", True), ("y = 2x + 3", "y = 2x - 3", False),
    ("x = 4", "4", True), ("4", "x = 4", True), ("4", "x = 5", False), ("\\frac{\\pi}{3}", "\\pi/3", True),
    ("\\frac{\\pi}{3}", "60", False), ("e^{2}", "e^2", True), ("3", "\\log_2 8", True),
    ("2^{n+1}", "2 \\cdot 2^n", True), ("\\frac{1}{6}", "\\frac{2}{12}", True), ("\\sqrt{3}", "1.732", False),
    ("3\\sqrt{3}", "\\sqrt{27}", True), ("-1 + i", "i - 1", True), ("-1 + i", "1 - i", False),
    ("\\frac{5}{2}", "\\frac{10}{4}", True), ("k = 2", "k=2", True),
]
for i, (gold, pred, expected) in enumerate(_SYMBOLIC):
    _add("symbolic", _w(i) + _endings(pred)[1 + i % 5], gold, expected)

# --- Distractors and self-corrections (the last committed answer counts) -------------------------------
_add("distractor", "The sum is 12 + 30 = 42, and 42 - 8 = 34. Half of 68 is 34.\n\nAnswer: 34", "34", True)
_add("distractor", "We get 100 at first, then 250 after doubling and adding 50.\n\nAnswer: 250", "250", True)
_add("distractor", "Candidates are 3, 7, 11 and 15; only 11 satisfies both conditions.\n\n"
     "The final answer is $\\boxed{11}$.", "11", True)
_add("distractor", "Candidates are 3, 7, 11 and 15; only 11 satisfies both conditions.\n\n"
     "The final answer is $\\boxed{11}$.", "15", False)
_add("distractor", "The total is 72 apples. He gives away 18 and eats 6, leaving 48.\n#### 48", "72", False)
_add("self_correction", "So $\\boxed{12}$. Wait, I made an arithmetic error: 7 \\times 8 = 56, not 54. "
     "Redoing it gives $\\boxed{14}$.", "14", True)
_add("self_correction", "So $\\boxed{12}$. Wait, I made an arithmetic error: 7 \\times 8 = 56, not 54. "
     "Redoing it gives $\\boxed{14}$.", "12", False)
_add("self_correction", "Answer: 20\n\nHmm, let me double-check. Actually the overlap was counted twice, "
     "so we subtract 4.\n\nAnswer: 16", "16", True)
_add("self_correction", "Answer: 20\n\nHmm, let me double-check. Actually the overlap was counted twice, "
     "so we subtract 4.\n\nAnswer: 16", "20", False)
_add("self_correction", "The answer is $\\boxed{\\frac{3}{4}}$... no wait, that ignores the replacement. "
     "With replacement the probability is $\\boxed{\\frac{9}{16}}$.", "\\frac{9}{16}", True)
_add("self_correction", "Initially I get $x = 5$, but checking in the original equation fails.\n"
     "The correct root is $x = -3$.\n\nAnswer: -3", "-3", True)
_add("self_correction", "Answer: $\\boxed{7}$\n\nActually no, I misread the problem: it asks for the "
     "number of edges, which is 12.\n\nAnswer: 12", "7", False)
_add("distractor", "Step 1: 2024 / 4 = 506.\nStep 2: 506 - 1 = 505.\nStep 3: 505 \\times 2 = 1010.\n\n"
     "**Final Answer:** 1010", "1010", True)
_add("distractor", "Step 1: 2024 / 4 = 506.\nStep 2: 506 - 1 = 505.\nStep 3: 505 \\times 2 = 1010.\n\n"
     "**Final Answer:** 1010", "505", False)
_add("distractor", _w(2) + "Both roots work, so the sum of the roots is $3 + 7 = 10$.\n\nAnswer: 10", "10", True)

# --- Truncated chains of thought: no committed answer -> wrong ----------------------------------------
_TRUNC = [
    (_w(0) + "Now we need the remainder when 29 is divided by", "5"),
    (_w(1) + "Substituting $x = 6$ back, the expression becomes", "23"),
    (_w(2) + "So the candidates are 3 and 7. Let me check which", "7"),
    (_w(3) + "Combining: $40 - 6 = 34$, but we also have to subtract the", "34"),
    ("<think>\nLet me compute 17 \\times 12 = 204. Then dividing by", "204"),
    (_w(4) + "So far the sum is 210 - 63 = 147, and the final step is to", "147"),
    ("We have $\\boxed{", "5"),
    ("Therefore the answer is $\\boxed{\\frac{14}{3", "\\frac{14}{3}"),
    (_w(0) + "The final answer is", "29"),
    (_w(1) + "Answer:", "23"),
    ("", "5"),
    ("   \n\n  ", "0"),
    ("Let me think about this problem. We need the number of ways to choose 3 items from 10, which is "
     "$\\binom{10}{3} = 120$. Then for each choice", "120"),
    ("x = 12 is a solution, since 12^2 = 144. Are there other solutions? If x = -12 then", "12"),
    ("<think>\nThe answer might be 42, but I need to verify this with", "42"),
]
for response, gold in _TRUNC:
    _add("truncated", response, gold, False)

# --- Near misses that must be false --------------------------------------------------------------------
_NEAR = [
    ("123456", "123465"), ("123456", "12345"), ("123456", "1234567"), ("-4", "4"), ("4", "-4"),
    ("2^{10}", "2^{11}"), ("10^{-5}", "10^{-6}"), ("1.6e-19", "1.6e-18"), ("3.1416", "3.1415"),
    ("\\frac{3}{8}", "\\frac{8}{3}"), ("\\frac{3}{8}", "\\frac{3}{7}"), ("\\sqrt{5}", "\\sqrt{6}"),
    ("x^2", "x^3"), ("2x", "-2x"), ("\\frac{\\pi}{4}", "\\frac{\\pi}{2}"), ("e^{-1}", "e"),
    ("(1,2)", "(1,3)"), ("[0,1]", "[0,1)"), ("999", "1000"), ("0.001", "0.01"), ("45^\\circ", "44^\\circ"),
    ("2\\sqrt{3}", "3\\sqrt{2}"), ("1024", "2048"), ("-\\frac{1}{2}", "\\frac{1}{2}"), ("60", "6"),
]
for i, (gold, pred) in enumerate(_NEAR):
    _add("near_miss", _w(i) + _endings(pred)[i % 6], gold, False)

# --- GSM8K and AIME styles -------------------------------------------------------------------------------
_GSM = [
    ("Natalia sold 48 clips in April and half as many in May, so 48 / 2 = 24 in May. "
     "Altogether 48 + 24 = 72.\n#### 72", "72", True),
    ("Weng earns 12 / 60 = $0.2 per minute. Working 50 minutes, she earned 0.2 x 50 = $10.\n#### 10", "10", True),
    ("Betty has 100 / 2 = $50. Her grandparents give 15 x 2 = $30. She needs 100 - 50 - 30 - 15 = $5 more.\n"
     "#### 5", "5", True),
    ("He runs 3 sprints 3 times a week, so 3 * 3 = 9 sprints, each 60 meters: 9 * 60 = 540 meters.\n#### 540",
     "540", True),
    ("The total cost is 3 * $1.50 + $2 = $6.50.\nThe answer is $6.50.", "6.5", True),
    ("She has 5 + 7 = 12 apples and gives away 4, leaving 8. The answer is 8.", "8", True),
    ("The profit is $1,200 - $950 = $250.\n#### 250", "250", True),
    ("So the total is 1,250 + 730 = 1,980 dollars.\n#### 1,980", "1980", True),
    ("Each box holds 24 eggs, so 7 boxes hold 168 eggs.\n#### 168", "186", False),
    ("He saved 15% of $2000 which is $300.\nThe answer is 300 dollars.", "300", True),
    ("The train travels 60 mph for 2.5 hours = 150 miles.\nAnswer: 150 miles", "150", True),
    ("She needs 3 more cups.\nAnswer: 3 cups", "4", False),
    ("Tickets cost 18 * 12 = 216 in total.\n#### 216", "216", True),
    ("Total time is 45 + 30 = 75 minutes.\nAnswer: $75$ minutes.", "75", True),
    ("The answer is 19 marbles.", "19", True),
]
for response, gold, expected in _GSM:
    _add("gsm8k", response, gold, expected)
_AIME = [
    ("Hence $m + n = 7 + 197 = 204$.\n\nAnswer: 204", "204", True),
    ("Therefore the remainder when $N$ is divided by 1000 is $\\boxed{033}$.", "33", True),
    ("Therefore the remainder when $N$ is divided by 1000 is $\\boxed{033}$.", "330", False),
    ("Thus $p+q = 23 + 90 = 113$.\n\n**Answer:** $\\boxed{113}$", "113", True),
    ("Summing the valid cases gives $\\boxed{025}$.", "25", True),
    ("The number of such paths is $\\boxed{294}$.", "294", True),
    ("The number of such paths is $\\boxed{249}$.", "294", False),
    ("Therefore $xy = 25$.\n\nAnswer: 25", "025", True),
    ("We find $r^2 = \\frac{p}{q}$ with $p + q = 721$.\n\nAnswer: 721", "721", True),
    ("Hence $\\log_2(x^4y^3z^2) = -\\frac{25}{8}$, so $m + n = 33$.\n\nAnswer: 33", "33", True),
]
for response, gold, expected in _AIME:
    _add("aime", response, gold, expected)

# --- Pathological input: must return fast and never raise ----------------------------------------------
_LONG = ("We keep expanding the product and tracking every term carefully. " * 800)
_add("pathological", _LONG + "\n\nAnswer: 42", "42", True)
_add("pathological", _LONG, "42", False)
_add("pathological", "{" * 500 + "1" + "}" * 500 + "\n\nAnswer: 7", "7", True)
_add("pathological", "Answer: $10^{10^{10}}$", "10^{10^{10}}", True)
_add("pathological", "Answer: $10^{10^{10}}$", "10^{10^{11}}", False)
_add("pathological", "Answer: $(10^{10})!$", "5", False)
_add("pathological", "Answer: $10^{10^{10}} + 1$", "10^{10^{10}}", False)
_add("pathological", "Answer: " + "9" * 1000, "9" * 1000, True)
_add("pathological", "Answer: " + "9" * 1000, "9" * 999 + "8", False)
_add("pathological", "Answer: " + "9" * 5000, "5", False)
_add("pathological", "Answer: $\\frac{1}{", "\\frac{1}{2}", False)
_add("pathological", "Answer: $\\sqrt{{{{2$", "\\sqrt{2}", False)
_add("pathological", "Answer: \\boxed{\\frac{1}{2}", "\\frac{1}{2}", False)
_add("pathological", "\\boxed{}", "0", False)
_add("pathological", "Answer: \\left( \\right( \\frac{}{}", "1", False)
_add("pathological", "Answer: 2^{2^{2^{2^{2^{2^{2}}}}}}", "4", False)
_add("pathological", "\x00\x01\ufffd Answer: 5", "5", True)
_add("pathological", "Answer: 1e999999", "1", False)
_add("pathological", "Answer: " + "(" * 200 + "1" + ")" * 200, "1", True)


# --- Extraction and grading policy: short responses that pin one rule each ------------------------------
_POLICY = [
    ('\\boxed{x=1, x=2}', '1,2', True),
    ('\\boxed{(x,y) = (1,2)}', '(1,2)', True),
    ('Ａｎｓｗｅｒ：５', '5', True),
    ('so \\boxed{3}. Wait, actually it should be \\boxed{4', '3', False),
    ('Answer: 12 (since 3 times 4 is 12)', '12', True),
    ('Answer: five', '5', True),
    ('\\boxed{1 1/2}', '\\frac{3}{2}', True),
    ('\\boxed{2} and \\boxed{3}', '2, 3', True),
    ('\\boxed{2}. Hmm wait, let me recompute: 2+1 = \\boxed{3}', '2, 3', False),
    ('The answer is \\(\\frac{3}{4}\\).', '\\frac34', True),
    ('\\boxed{\\$18.90}', '18.90', True),
    ('\\boxed{5\\text{ cm}^2}', '5', True),
    ('\\boxed{90°}', '90', True),
    ('the answer is correct, it is 5', '5', False),
    ('\\boxed{\\mathbb{R}}', '(-\\infty,\\infty)', True),
    ('\\boxed{y=-0.5x+3}', 'y = -\\frac{1}{2}x + 3', True),
    ('\\boxed{6.28}', '2\\pi', False),
    ('\\boxed{2\\pi}', '6.28', True),
    ('\\boxed{\\textbf{(B) }12}', '\\text{(B)}', True),
    ('**Answer:** 42', '42', True),
    ('Final answer: $\\boxed{-7}$', '-7', True),
    ('\\boxed{x \\in [1, 2]}', '[1,2]', True),
    ('\\boxed{\\frac{\\sqrt{3}}{2}}', '\\frac{\\sqrt3}{2}', True),
    ('\\boxed{1.5\\%}', '1.5\\%', True),
    ('\\boxed{(1,2),(3,4)}', '(3,4),(1,2)', True),
    ('\\boxed{\\pm 2}', '-2, 2', True),
    ('\\boxed{2, -2}', '\\pm 2', True),
    ('\\boxed{\\sqrt{2}+\\sqrt{3}}', '\\sqrt{3}+\\sqrt{2}', True),
    ('\\boxed{\\frac{1}{2}x^2}', '\\frac{x^2}{2}', True),
    ('\\boxed{10^{10^{10}}+1}', '10^{10^{10}}+1', True),
    ('\\boxed{0.3}', '\\frac{1}{3}', False),
    ('\\boxed{3 \\text{ and } 4}', '3, 4', True),
    ('\\boxed{\\{3,4\\}}', '3,4', True),
    ('\\boxed{x^2-1}', '(x-1)(x+1)', True),
    ('\\boxed{\\sin^2 x + \\cos^2 x}', '1', True),
    ('\\boxed{\\dfrac{1}{2}}', '0.5', True),
    ('\\boxed{2/4}', '\\frac{1}{2}', True),
    ('\\boxed{e^{i\\pi}}', '-1', True),
    ('\\boxed{3+4i}', '4i+3', True),
    ('\\boxed{\\log_{2} 8}', '3', True),
    ('\\boxed{\\binom{5}{2}}', '10', True),
    ('\\boxed{5!}', '120', True),
    ('\\boxed{12.50}', '12.5', True),
    ('\\boxed{\\$12.50}', '\\$12.5', True),
    ('\\boxed{1{,}234}', '1234', True),
    ('The answer is 8 km.', '8', True),
    ('\\boxed{\\text{odd}}', '\\text{odd}', True),
    ('\\boxed{\\frac{a+b}{2}}', '\\frac{b+a}{2}', True),
    ('\\boxed{n(n+1)/2}', '\\frac{n^2+n}{2}', True),
    ('so the answer is 5? Let me check again by', '5', False),
    ('If the answer is 12, then the total would be', '12', False),
    ('I think the answer is 12. But let me double check by computing', '12', False),
    ('\\boxed{1.4142}', '\\sqrt{2}', False),
    ('\\boxed{0.333}', '0.33', False),
    ('\\boxed{2.54}', '2.5', False),
    ('\\boxed{\\frac{1}{3}}', '0.33', True),
    ('\\boxed{1.6\\times 10^{-18}}', '1.6 \\times 10^{-19}', False),
    ('\\boxed{2x+1}', '2x-1', False),
    ('\\boxed{x^2}', 'x^3', False),
    ('\\boxed{\\frac{\\pi}{2}}', '\\frac{\\pi}{3}', False),
    ('\\boxed{(1,2]}', '(1,2)', False),
    ('\\boxed{\\{1,2\\}}', '\\{1,2,3\\}', False),
    ('\\boxed{12}', '12.5', False),
    ('\\boxed{1000}', '1,000,000', False),
    ('\\boxed{99}', '99\\%', True),
    ('\\boxed{-\\sqrt{2}}', '\\sqrt{2}', False),
    ('\\boxed{3i}', '-3i', False),
    ('\\boxed{e}', '\\pi', False),
    ('\\boxed{2^{100}}', '2^{100}+1', False),
    ('\\boxed{10^{100}}', '10^{100}+1', False),
    ('\\boxed{\\sqrt{2}\\cdot 10^{20}}', '\\sqrt{2}\\cdot 10^{20}+1', False),
    ('Answer: 7\n\nThe problem is solved by noting that the answer is not 6.', '7', True),
    ('The final answer is $\\boxed{E}$', '\\text{(E)}', True),
    ('\\boxed{E}', '\\text{(D)}', False),
    ('\\boxed{A, B}', '\\text{(A)}', False),
    ('Final answer: x = 2 or x = 3', '2, 3', True),
    ('Final answer: x = 2 or x = 3', '2', False),
    ('Therefore $x=\\boxed{4}$', '4', True),
    ('\\boxed{y = 3x}', 'y=3x+1', False),
    ('\\boxed{2x = 4}', 'x=2', True),
    ('\\boxed{x^2=4}', 'x=2', False),
    ('\\boxed{\\frac{1}{0}}', '1', False),
    ('\\boxed{0/0}', '0', False),
    ('\\boxed{1/0}', '\\infty', False),
    ('\\boxed{}', '', False),
    ('Answer: ', '5', False),
    ('Answer: \\boxed{}', '5', False),
    ('The answer is: **42**', '42', True),
    ('**Final Answer**: The number of ways is 84.', '84', True),
    ('\\[\\boxed{\\text{B}}\\]', 'B', True),
    ('So $n = \\boxed{7}$ works. Thus the smallest n is 7.', '7', True),
    ('answer = 9', '9', True),
    ('The answer is $\\boxed{9}$, which is odd.', '9', True),
    ('\\boxed{\\dfrac{9}{2}} \\text{ units}', '4.5', True),
    ('\\boxed{4.5 \\text{ units}^2}', '\\frac92', True),
    ('\\boxed{30^\\circ}', '\\frac{\\pi}{6}', False),
    ('\\boxed{3.0}', '3', True),
    ('\\boxed{03}', '3', True),
    ('\\boxed{3.}', '3', True),
    ('\\boxed{-0}', '0', True),
    ('\\boxed{1e3}', '1000', True),
    ('\\boxed{1,5}', '1.5', False),
    ('\\boxed{0.1+0.2}', '0.3', True),
]
for response, gold, expected in _POLICY:
    _add("policy", response, gold, expected)

_POLICY_2 = [
    ('\\boxed{-2 \\le x \\le 7}', '[-2, 7]', True),
    ('\\boxed{x > 3}', '(3, \\infty)', True),
    ('\\boxed{x \\geq 3}', '(3, \\infty)', False),
    ('\\boxed{\\frac{1}{2}\\sqrt{3}}', '\\frac{\\sqrt{3}}{2}', True),
    ('\\boxed{4 \\sqrt 2}', '4\\sqrt{2}', True),
    ('\\boxed{60 \\text{ degrees}}', '60^\\circ', True),
    ('The answer is $1,080.', '1080', True),
    ('\\boxed{x=-1, 2}', '\\{-1, 2\\}', True),
    ('\\boxed{\\emptyset}', '\\emptyset', True),
    ('\\boxed{\\varnothing}', '\\emptyset', True),
    ('\\boxed{\\infty}', '\\infty', True),
    ('\\boxed{-\\infty}', '\\infty', False),
    ('\\boxed{\\frac{3\\pi}{4}}', '135^\\circ', False),
    ('\\boxed{\\dfrac{5\\sqrt{2}}{2}}', '\\frac{5}{\\sqrt{2}}', True),
    ('\\boxed{\\tfrac{1}{4}}', '0.25', True),
    ('\\boxed{\\cos(\\pi/3)}', '\\frac12', True),
    ('\\boxed{f(x) = 2x+1}', '2x+1', True),
    ('\\boxed{f^{-1}(x) = \\frac{x-1}{2}}', '\\frac{x-1}{2}', True),
    ('\\boxed{P(x)=x^2+1}', 'x^2+1', True),
    ('\\boxed{\\sqrt[3]{27}}', '3', True),
    ('\\boxed{27^{1/3}}', '3', True),
    ('\\boxed{2^{-1}}', '\\frac{1}{2}', True),
    ('\\boxed{8^{2/3}}', '4', True),
    ('\\boxed{\\text{Tuesday}}', '\\text{Tuesday}', True),
    ('\\boxed{\\text{Sunday}}', '\\text{Tuesday}', False),
    ('\\boxed{11_{2}}', '3', False),
    ('\\boxed{1011_2}', '1011_2', True),
    ('\\boxed{\\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}}', '\\frac{-b\\pm\\sqrt{b^2-4ac}}{2a}', True),
    ('\\boxed{0.\\overline{3}}', '\\frac{1}{3}', True),
    ('\\boxed{\\$ 5.00}', '5', True),
    ('\\boxed{5\\,\\text{m/s}}', '5', True),
    ('\\boxed{(-\\infty, -2) \\cup (2, \\infty)}', '(-\\infty,-2)\\cup(2,\\infty)', True),
    ('\\boxed{x<-2 \\text{ or } x>2}', '(-\\infty,-2)\\cup(2,\\infty)', True),
]
for response, gold, expected in _POLICY_2:
    _add("policy", response, gold, expected)



# ======================================================================================================
# Round 2: every kind of miss an independent review found, each with near misses that must stay wrong.
_R2 = "Let me set this up. The first part gives 3 * 4 = 12 and the second part gives 5 + 6 = 11.\n\n"
_LOOP = "Let me double-check the answer once more: 6 times 7 is 42, and 40 + 2 = 42, so that is consistent. "

# --- A response that is nothing but the answer is its own answer -----------------------------------------
_BARE = [
    ("42", "42", True), ("  17 \n", "17", True), ("-7", "-7", True), ("$\\frac{3}{4}$", "0.75", True),
    ("\\(\\frac{1}{2}\\)", "\\frac12", True), ("\\[ 2\\sqrt{3} \\]", "\\sqrt{12}", True),
    ("$$\n\\frac{\\pi}{4}\n$$", "\\frac{\\pi}{4}", True), ("x = 5", "5", True), ("(C)", "C", True),
    ("B", "\\text{(B)}", True), ("No.", "No", True), ("Yes", "\\text{yes}", True), ("3.5", "\\frac72", True),
    ("1,000", "1000", True), ("12 apples", "12", True), ("thirty-one", "31", True), ("negative 7", "-7", True),
    ("$\\boxed{12}$", "12", True), ("**42**", "42", True), ("**(C)**", "C", True), ("**(C)**", "B", False), ("No, because 7 is odd.", "No", True),
    ("Yes, since 12 is divisible by 3.", "Yes", True), ("$(-\\infty, 2]$", "(-\\infty,2]", True),
    ("42?", "42", False), ("Maybe 42", "42", False), ("Let me think", "42", False), ("I don't know", "42", False),
    ("43", "42", False), ("$\\frac{4}{3}$", "0.75", False), ("No.", "Yes", False), ("\\frac{3}{", "\\frac34", False),
    ("The answer", "42", False), ("we compute 3 + 4 = 7", "7", False), ("x is 3 or 4", "3", False),
    ("I guess 12", "12", False), ("Answer:", "12", False), ("$x^2 = 4$", "2", False), ("-42", "42", False),
    ("No, wait. Let me recompute", "No", False),
]
for response, gold, expected in _BARE:
    _add("bare", response, gold, expected)

# --- Concluding sentences: the final sentence commits; in the middle, hedged or cut off it does not -----
_CONCLUSION = [
    ("Adding everything up, so the final count is $2\\,500$.", "2500", True),
    ("So the shop earned \\$3,200 in total.", "3200", True),
    ("Thus, the shop earned \\$3,200 in total.", "3200", True),
    ("Therefore 12 teams reach the final. (Check: 6 groups \\times 2 = 12.)", "12", True),
    ("Since f(-x) = f(x) for every x, the function is even.", "\\text{even}", True),
    ("Hence the function is even.", "\\text{even}", True),
    ("Hence f is an odd function.", "\\text{odd}", True),
    ("So she has 8 apples left.", "8", True),
    ("Therefore, $x = 5$.", "5", True),
    ("So, 5 + 7 = 12.", "12", True),
    ("In total, 42 people attended.", "42", True),
    ("Therefore the probability is $\\frac{1}{4}$.", "0.25", True),
    ("The limit is ∞.", "\\infty", True),
    ("The area of the garden is 40 square meters.", "40", True),
    ("Thus the sum is $2 + 3i$.", "2+3i", True),
    ("So the total is 2 + 3i.", "2+3i", True),
    ("Therefore, the smallest such n is 7. Hope this helps!", "7", True),
    ("Therefore 12 teams reach the final.", "10", False),
    ("So the final count is $2\\,500$.", "25", False),
    ("So the final count is $2\\,500$.", "250", False),
    ("So the shop earned \\$3,200 in total.", "3.2", False),
    ("So far the sum is 147, and the final step is to", "147", False),
    ("So the candidates are 3 and 7. Let me check which", "7", False),
    ("So the first term is 3. Then the common ratio is 2.", "3", False),
    ("So the total is probably 12.", "12", False),
    ("So the total is 12?", "12", False),
    ("Thus the answer is not 12.", "12", False),
    ("So the total might be 12.", "12", False),
    ("So the total is 12, and then we add 5 to get 17.", "12", False),
    ("Therefore 12 teams reach the final. Wait, that double counts: 10 teams reach it.", "12", False),
    ("So the total is 12", "12", False),
    ("So the total is 12. Now for the second part, the remaining 7 items", "12", False),
    ("Since f(-x) = -f(x), the function is odd.", "\\text{even}", False),
    ("So the sum is 2 + 3i.", "2", False),
]
for i, (ending, gold, expected) in enumerate(_CONCLUSION):
    _add("conclusion", _R2 + ending, gold, expected)

# --- Answer statements, multiple choice, yes/no -------------------------------------------------------------
_STATEMENTS = [
    ("The answer is negative 7.", "-7", True), ("The right choice is (C) 40.", "C", True),
    ("The right choice is (C) 40.", "40", True), ("The correct option is (B).", "B", True),
    ("Answer: (B) 12", "B", True), ("\\boxed{\\text{(B)}}", "B", True), ("The answer is B: 12", "B", True),
    ("So 42 is the answer.", "42", True), ("Thus $\\frac{3}{4}$ is the correct answer.", "0.75", True),
    ("The answer is no.", "No", True), ("The answer to the question is 5.", "5", True),
    ("Final Answer: The final answer is $5$. I hope it is correct.", "5", True),
    ("所以答案是 5。", "5", True), ("The answer is approximately 3.14.", "3.14", True),
    ("The right choice is (B) 40.", "C", False), ("The right choice is (C) 40.", "41", False),
    ("I think the answer is 12. But wait, let me", "12", False), ("Is the answer 12?", "12", False),
    ("The answer is probably 12.", "12", False), ("It could be 12 or 13.", "12", False),
    ("Maybe the answer is 12?", "12", False), ("If the answer were 12, the sum would be 78.", "12", False),
    ("The answer is yes.", "No", False), ("The answer is negative 7.", "7", False),
    ("One option is 5, but it fails the second condition.", "5", False),
]
for i, (ending, gold, expected) in enumerate(_STATEMENTS):
    _add("statement", (_R2 if i % 2 else "") + ending, gold, expected)

# --- Unicode maths ---------------------------------------------------------------------------------------
_UNICODE = [
    ("The answer is ⅓.", "\\frac13", True), ("\\boxed{√5}", "\\sqrt5", True), ("Answer: 3√2", "\\sqrt{18}", True),
    ("So the angle is 45°.", "45", True), ("Answer: −5", "-5", True), ("Answer: 2π", "2\\pi", True),
    ("Answer: π/4", "\\frac{\\pi}{4}", True), ("\\boxed{(−∞, 3]}", "(-\\infty,3]", True),
    ("Answer: 10⁶", "1000000", True), ("Answer: x² + 1", "x^2+1", True), ("Answer: √12", "2\\sqrt3", True),
    ("Answer: 1.6 × 10⁻¹⁹", "1.6\\times10^{-19}", True), ("The answer is ∞.", "\\infty", True),
    ("Answer: 2½", "\\frac52", True), ("Answer: ∛27", "3", True),
    ("Answer: √3", "\\sqrt5", False), ("Answer: ∛2", "\\sqrt2", False), ("Answer: 45°", "135", False),
    ("Answer: −∞", "\\infty", False), ("Answer: 2√3", "3\\sqrt2", False), ("The answer is ⅔.", "\\frac13", False),
    ("Answer: 10⁻⁶", "1000000", False), ("Answer: √12", "12", False),
]
for i, (ending, gold, expected) in enumerate(_UNICODE):
    _add("unicode", _w(i) + ending, gold, expected)

# --- Number words and factorials in Answer lines ---------------------------------------------------------------
_WORDS = [
    ("Answer: thirty-one", "31", True), ("Answer: Twelve", "12", True), ("The answer is one hundred and five.", "105", True),
    ("Answer: two thirds", "\\frac23", True), ("Answer: negative seven", "-7", True), ("Answer: 4!", "24", True),
    ("Answer: 5!/(2!3!)", "10", True), ("Answer: zero", "0", True), ("Answer: two thousand and twenty-four", "2024", True),
    ("Answer: thirty", "31", False), ("Answer: 4!", "4", False), ("Answer: twenty-one", "12", False), ("Answer: 3!", "3", False),
    ("Answer: a dozen", "13", False), ("Answer: seven", "-7", False),
]
for i, (ending, gold, expected) in enumerate(_WORDS):
    _add("words", _w(i + 1) + ending, gold, expected)

# --- What boxes hold: \left. \right., units, +\infty, the same box twice, answers in several boxes ------------
_BOX_FORMS = [
    ("\\boxed{9\\pi \\text{ m}^2}", "9\\pi", True), ("\\boxed{12\\text{ cm}^2}", "12", True),
    ("\\boxed{5\\text{ km/h}}", "5", True), ("\\boxed{\\$25}", "25", True), ("\\boxed{100\\pi \\text{ cm}^3}", "100\\pi", True),
    ("\\boxed{(-\\infty,+\\infty)}", "\\mathbb{R}", True), ("\\boxed{(-\\infty,+\\infty)}", "(-\\infty,\\infty)", True),
    ("\\boxed{\\left. \\frac{1}{2} \\right.}", "0.5", True), ("$\\boxed{5}$\n\n$\\boxed{5}$", "5", True),
    ("So $\\boxed{5}$.\n\n**Final Answer**\n\\boxed{5}", "5", True),
    ("$\\boxed{2}$ \\quad \\text{and} \\quad $\\boxed{3}$", "(2, 3)", True),
    ("$\\boxed{2} \\quad \\text{and} \\quad \\boxed{3}$", "2, 3", True),
    ("$a = \\boxed{3}$ and $b = \\boxed{4}$", "(3,4)", True), ("$x=\\boxed{-1}$ \\text{ or } $x=\\boxed{2}$", "-1, 2", True),
    ("(a) \\boxed{3} (b) \\boxed{4}", "3, 4", True), ("\\boxed{15\\frac{39}{40}} or \\boxed{\\frac{639}{40}}", "\\frac{639}{40}", True),
    ("\\boxed{9\\pi \\text{ m}^2}", "9", False), ("\\boxed{9 \\text{ m}^2}", "9\\pi", False),
    ("\\boxed{(0,+\\infty)}", "(-\\infty,+\\infty)", False), ("\\boxed{5} \\boxed{6}", "5", False),
    ("$\\boxed{2} \\quad\\text{and}\\quad \\boxed{3}$", "(3,2)", False),
    ("$\\boxed{2} \\quad\\text{and}\\quad \\boxed{3}$", "2", False),
    ("$\\boxed{2} \\quad\\text{and}\\quad \\boxed{3}$", "2, 3, 4", False),
    ("\\boxed{\\left. \\frac{1}{2} \\right.}", "2", False),
]
for i, (ending, gold, expected) in enumerate(_BOX_FORMS):
    _add("box_forms", _w(i) + ending, gold, expected)

# --- Deep nesting, exact power towers, long integers -----------------------------------------------------------------
_DEEP = [
    ("\\boxed{" * 100 + "7" + "}" * 100, "7", True), ("\\boxed{" * 100 + "7" + "}" * 100, "8", False),
    ("\\boxed{" + "\\left(" * 100 + "7" + "\\right)" * 100 + "}", "7", True),
    ("\\boxed{" + "\\left(" * 100 + "7" + "\\right)" * 100 + "}", "-7", False),
    ("Answer: " + "{" * 100 + "5" + "}" * 100, "5", True), ("Answer: " + "(" * 150 + "5" + ")" * 150, "6", False),
    ("\\boxed{10^{10^{10}}}", "10^{10^{10}}", True), ("\\boxed{10^{10000000000}}", "10^{10^{10}}", True),
    ("\\boxed{10^10^10}", "10^{10^{10}}", True), ("\\boxed{1^{10^{10^{10}}}}", "1", True),
    ("\\boxed{0^{10^{10}}}", "0", True), ("\\boxed{100^{5 \\cdot 10^{9}}}", "10^{10^{10}}", True),
    ("\\boxed{2^{2^{2^{2}}}}", "65536", True), ("\\boxed{4^{2^{100}}}", "2^{2^{101}}", True),
    ("\\boxed{(10^{10})^{10}}", "10^{10^{10}}", False), ("\\boxed{10^{100}}", "10^{10^{10}}", False),
    ("\\boxed{10^{10^{11}}}", "10^{10^{10}}", False), ("\\boxed{2^{2^{2^{2}}}}", "65537", False),
    ("\\boxed{10^10^10}", "10^{100}", False), ("\\boxed{1^{10^{10}}}", "10", False),
    ("\\boxed{" + "7" * 100 + "}", "7" * 100, True), ("\\boxed{" + "7" * 99 + "8}", "7" * 100, False),
    ("\\boxed{" + "{:,}".format(int("9" * 100)) + "}", "9" * 100, True), ("Answer: " + "1" + "0" * 100, "10^{100}", True),
    ("Answer: " + "1" + "0" * 99, "10^{100}", False), ("\\boxed{" + "3" * 120 + "}", "3" * 119, False),
]
for i, (ending, gold, expected) in enumerate(_DEEP):
    _add("deep", _w(i) + ending, gold, expected)

# --- Long responses: bound the work, not the window that holds the answer --------------------------------------------
_add("long_tail", _w(0) + "\\boxed{42}\n\n" + _LOOP * 300, "42", True)
_add("long_tail", _w(1) + "Answer: 42\n\n" + _LOOP * 300, "42", True)
_add("long_tail", _w(2) + "The final answer is $42$.\n\n" + _LOOP * 300 + "\n\nLet me check whether", "42", True)
_add("long_tail", _w(3) + "\\boxed{42}\n\n" + _LOOP * 300 + "Hmm, actually I misread: it asks for 24. \\boxed{24}", "42", False)
_add("long_tail", _w(4) + "\\boxed{42}\n\n" + _LOOP * 300 + "Let me check whether the answer is 24 instead.", "42", True)
_add("long_tail", "Answer: 42\n\nWait, let me recompute: 6 \\times 7 = ", "42", True)
_add("long_tail", _R2 * 300 + "Now the remaining case gives", "12", False)
_add("long_tail", _R2 * 300 + "The answer is 12.", "12", True)
_add("long_tail", _R2 * 300 + "The answer is 12.", "11", False)
_add("long_tail", "\\boxed{7}" + "\n\nAnother check: 3 + 4 = 7." * 2000, "7", True)

# --- Each candidate at its own position; equation golds keep their left side ----------------------------------------
_POSITION = [
    ("Final Answer: 12. Wait, that is wrong: recomputing gives \\boxed{14}.", "12", False),
    ("Final Answer: 12. Wait, that is wrong: recomputing gives \\boxed{14}.", "14", True),
    ("**Final Answer:** 7 ... no wait, it is 8. \\boxed{8}", "7", False),
    ("\\boxed{14} was my first guess, but Final Answer: 12", "12", True),
    ("The answer is 5 and the final check confirms it.", "5", True),
    ("\\boxed{0}", "x + 2y = 0", False), ("\\boxed{x + 2y = 0}", "x + 2y = 0", True), ("\\boxed{2y = -x}", "x+2y=0", True),
    ("\\boxed{x = -2y}", "x+2y=0", True), ("\\boxed{1}", "y = 2x + 1", False), ("\\boxed{3}", "x = 3", True),
    ("\\boxed{25}", "x^2 + y^2 = 25", False), ("\\boxed{3x}", "y = 3x", True), ("\\boxed{6}", "2x + 3y = 6", False),
    ("Answer: m + n = 33", "33", True),
]
for i, (response, gold, expected) in enumerate(_POSITION):
    _add("position", response, gold, expected)

# --- Checks after a commitment do not override it; hedges and questions are not commitments -------------------------
_CHECKS = [
    ("Answer: 12\n\nCheck: 12 \\times 3 = 36, so the total is 36 as required.", "12", True),
    ("\\boxed{7}\n\nLet me verify: if x = 7, then 2x + 1 = 15.", "7", True),
    ("Answer: 12\n\nTo double-check, 3 \\times 4 =", "12", True),
    ("\\boxed{12}\n\nVerification: 3 \\times 4 = 12. ✓", "12", True),
    ("Answer: 20\n\nHmm, wait. Actually the overlap was counted twice, so the total is 16.", "16", True),
    ("Answer: 20\n\nHmm, wait. Actually the overlap was counted twice, so the total is 16.", "20", False),
    ("Answer: 12\n\nCheck: 12 \\times 3 = 36, so the total is 36 as required.", "36", False),
    ("The final answer is $\\boxed{1", "1", False), ("Answer: \\frac{3}{", "\\frac34", False),
    ("So the total number of arrangements is", "12", False), ("Therefore, the answer is", "12", False),
    ("12?", "12", False), ("Could the answer be 12? Let me check.", "12", False),
]
for i, (ending, gold, expected) in enumerate(_CHECKS):
    _add("checks", (_w(i) if i % 3 else "") + ending, gold, expected)

# --- Numbers with spacing and currency ----------------------------------------------------------------------------
_SPACED = [
    ("Answer: 2 500", "2500", True), ("Answer: 2\\;500", "2500", True), ("Answer: \\$3{,}200", "3200", True),
    ("Answer: 3,200.50", "3200.5", True), ("Answer: 2\u2009500", "2500", True), ("Answer: \\$1,234.5", "1234.50", True),
    ("Answer: 2 500", "2.5", False), ("Answer: 3,200.50", "3200.05", False), ("Answer: 1,5", "1.5", False),
]
for i, (ending, gold, expected) in enumerate(_SPACED):
    _add("spaced", _w(i + 2) + ending, gold, expected)

# --- Hedged, counterfactual and intermediate statements are no commitment (boxes included) -------------------------
_W3 = "We need the number of ways. First choose the captain: 12 options. Then the vice-captain: 11 options.\n\n"
_HEDGED = [
    ("Therefore the answer is 12 times 11, which I will compute next.", "12", False),
    ("The answer is not 12, since order matters.", "12", False),
    ("Thus the count is either 12 or 132.", "12", False),
    ("If order did not matter, the answer would be 66. But order matters.", "66", False),
    ("A common mistake is to answer 66.", "66", False),
    ("Is it 132? Let me verify.", "132", False),
    ("I think it's 132, but I'm not sure.", "132", False),
    ("So the total is 12 \\times 11 =", "132", False),
    ("Hence we multiply: 12 \\times 11.", "12", False),
    ("Therefore, 12 \\times 11 = 132 would be the count if roles were distinct, but they are not, so we divide by 2",
     "132", False),
    ("Hmm, the answer might be $\\boxed{7}$, but I am not sure.", "7", False),
    ("If the answer were $\\boxed{132}$, the roles would be distinct.", "132", False),
    ("$\\boxed{132}$? Let me double-check the roles first.", "132", False),
    ("\\boxed{12} is what you get if you ignore order; with order it is \\boxed{132}", "12", False),
    ("So the area is 40 and the perimeter is 26.", "40", False),
    ("The answer is the number of subsets, which is 2^n.", "1024", False),
    ("If $10^x = 10000$, then $x = \\boxed{4}$.", "4", True),
    ("We may set the exponents equal, so $x = \\boxed{\\frac{3}{2}}$.", "\\frac32", True),
    ("If you're lucky, you could guess $24\\cdot 20$, as this yields $\\boxed{480}$.", "480", True),
    ("Ordered pairs: $12 \\times 11 = \\boxed{132}$.", "132", True),
]
for i, (ending, gold, expected) in enumerate(_HEDGED):
    _add("hedged", _W3 + ending, gold, expected)

# --- More ways of writing the same committed answer (and near misses) ---------------------------------------------
_FORMS = [
    ("bare", "$x=2$ and $y=3$", "(2,3)", True), ("bare", "$x=2$ and $y=3$", "(3,2)", False),
    ("bare", "f is even.", "\\text{even}", True), ("bare", "f is odd.", "\\text{even}", False),
    ("choice", "Answer: C) 40", "40", True), ("choice", "Answer: C) 40", "C", True), ("choice", "Answer: C) 40", "D", False),
    ("choice", "Option C", "\\text{(C)}", True), ("choice", "Option C", "\\text{(B)}", False),
    ("conclusion", _R2 + "This gives 2,500.", "2500", True), ("conclusion", _R2 + "This gives 2,500.", "25", False),
    ("words", "Answer: 31 (thirty-one)", "31", True), ("words", "Answer: 3 (mod 7)", "3", True),
    ("box_forms", "Answer: x = (3, \\frac{\\pi}{2})", "(3,\\frac{\\pi}{2})", True),
    ("box_forms", "Answer: all real numbers", "(-\\infty,\\infty)", True), ("box_forms", "\\boxed{\\num{2500}}", "2500", True),
    ("spaced", "Answer: 2\\thinspace 500", "2500", True), ("box_forms", "\\boxed{9\\pi\\,\\mathrm{m^2}}", "9\\pi", True),
    ("unicode", "Answer: π²/6", "\\frac{\\pi^2}{6}", True), ("unicode", "Answer: x⁻¹", "\\frac{1}{x}", True),
    ("unicode", "Answer: π²/6", "\\frac{\\pi}{6}", False),
]
for category, response, gold, expected in _FORMS:
    _add(category, response, gold, expected)

assert len(CASES) >= 300, len(CASES)
