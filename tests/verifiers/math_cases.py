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

assert len(CASES) >= 300, len(CASES)
