"""A labelled table for ``MathVerifier(extraction="lenient")``: evaluation-style pairs, written by hand.

Evaluation suites pair a gold answer with a short prediction or a model's raw text, often without any
commitment ("I believe it's $5$"). Each case is ``LenientCase(category, prediction, gold, expected)``:
``expected`` is whether the prediction's last math (its committed answer if it has one) equals the gold.
Categories: ``short`` (a bare prediction in some notation), ``prose`` (the answer inside uncommitted
text), ``commit`` (a commitment that must beat later numbers), ``gold_form`` (golds written with ``$``,
``\\boxed{}`` or ``\\(...\\)``), and ``near_miss`` (must stay wrong). Round 3 adds ``solution_gold`` (the
gold is a worked solution), ``labelled`` (``AB=4``, ``x \\in (2,12)``), ``lists`` (boxes vs one list,
unordered tuples, ``bmatrix``, ``11,\\!111``) and ``sentences`` (answer-line sentences, inequality
chains, rounded decimals, ``\\approx``, choice letters), each with its near misses.
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

# Round 3: the categories where the field's graders (Math-Verify, verl) agree and we did not. Each
# category has near misses that must stay wrong. Cases are ours, written for each habit.
_SOLUTION_GOLD = [  # the gold is a whole solution: its last box, "####" line or answer line is the answer
    ("18", "Janet has 16 - 3 - 4 = 9 eggs left.\nShe earns 9 * 2 = $18.\n#### 18", True),
    ("17", "Janet has 16 - 3 - 4 = 9 eggs left.\nShe earns 9 * 2 = $18.\n#### 18", False),
    ("\\frac{3}{4}", "We add the parts: $\\frac12 + \\frac14 = \\boxed{\\frac34}$.", True),
    ("\\frac{1}{2}", "We add the parts: $\\frac12 + \\frac14 = \\boxed{\\frac34}$.", False),
    ("$12$", "Counting each case gives 5 + 7 = 12 ways in all. So the answer is: \\[ \\boxed{12} \\]", True),
    ("$\\boxed{7,3}$", "$\\boxed{3}\\boxed{7}$", True), ("$\\boxed{3,8}$", "$\\boxed{3}\\boxed{7}$", False),
    ("The area is $40$.", "Final Answer: The area of the garden is 40.", True),
    ("42", "Final Answer: The area of the garden is 40.", False),
]
_LABELLED = [  # labelled or set-membership answers
    ("(3,9)", "y \\in (3,9)", True), ("(3,9]", "y \\in (3,9)", False), ("y \\in (3,9)", "(3,9)", True),
    ("6", "PQ=6", True), ("7", "PQ=6", False), ("5:9", "A_1:A_2=5:9", True), ("9:5", "A_1:A_2=5:9", False),
    ("\\boxed{6, 2}", "PQ=6,RS=2", True), ("\\boxed{2, 6}", "PQ=6,RS=2", False),
    ("q=3,q=\\frac{7}{2}", "\\boxed{q = 3 \\text{ and } q = \\dfrac{7}{2}}", True),
    ("q=3,q=\\frac{5}{2}", "\\boxed{q = 3 \\text{ and } q = \\dfrac{7}{2}}", False),
    ("0", "x+2y=0", False), ("5", "a+b=5", False), ("3", "2x=3", False),
]
_LISTS = [  # several boxes vs one list, unordered lists of tuples, separators
    ("$\\boxed{4,9}$", "\\boxed{4}\\boxed{9}", True), ("\\boxed{4}, \\boxed{9}", "4,9", True),
    ("\\boxed{4}, \\boxed{8}", "4,9", False),
    ("(2,5),(5,2),(1,1),(2,5)", "(1,1),(5,2),(2,5)", True), ("(2,5),(5,2)", "(1,1),(5,2),(2,5)", False),
    ("(1;0;2),(3;1;0)", "(3,1,0),(1,0,2)", True), ("(1;0;2),(3;1;1)", "(3,1,0),(1,0,2)", False),
    ("\\begin{bmatrix}\n 2 & 0 \\\\\n -1 & 5\n\\end{bmatrix}", "\\begin{pmatrix} 2 & 0 \\\\ -1 & 5 \\end{pmatrix}", True),
    ("\\begin{bmatrix}\n 2 & 0 \\\\\n 1 & 5\n\\end{bmatrix}", "\\begin{pmatrix} 2 & 0 \\\\ -1 & 5 \\end{pmatrix}", False),
    ("is $\\boxed{22,\\! 333,\\! 100}$", "22333100", True), ("is $\\boxed{22, 333, 100}$", "22333100", False),
    ("$\\boxed{45,\\! 201}$", "45201", True), ("$\\boxed{45, 201}$", "45201", False),
]
_SENTENCES = [  # answer lines that are sentences, inequalities, rounded decimals, choice letters
    ("Final Answer: The smallest $k$ is 17.", "17", True), ("Final Answer: The smallest $k$ is 17.", "71", False),
    ("Final Answer: The perimeter of $ABC$ is 30.", "30", True),
    ("-3 \\le t \\le 8", "[-3,8]", True), ("-3 < t \\le 8", "[-3,8]", False), ("-3 \\\\le t \\\\le 8", "[-3,8]", True),
    ("t <= 4", "t \\le 4", True), ("t <= 4", "t < 4", False), ("t != 2", "t \\neq 2", True),
    ("0.6667", "\\frac{2}{3}", True), ("0.6666", "\\frac{2}{3}", False), ("0.667", "\\frac{2}{3}", False),
    ("0.1428571", "\\frac{1}{7}", True), ("0.1428", "\\frac{1}{7}", False), ("3.142", "\\pi", False),
    ("$t=\\frac{1}{4}\\approx0.25$", "\\frac{1}{4}", True), ("$t\\approx 12$", "12", True),
    ("$t=\\frac{1}{4}\\approx0.25$", "\\frac{1}{5}", False),
    ("C. Because A is too small", "C", True), ("C. Because A is too small", "A", False),
    ("Because D holds for every case", "D", True), ("Both B and D look plausible", "B", False),
    ("TXQ3Z", "3", False),
    ("Final Answer: Tom reached the top 4 hours later.", "4", True),
    ("Final Answer: Tom reached the top 4 hours later.", "5", False),
    ("Final Answer: The largest value of $g(t)$ is 12.", "12", True),
    ("$(0.25,1.6667]$", "(\\frac14,\\frac53]", True), ("$(0.25,1.67]$", "(\\frac14,\\frac53]", False),
    ("$[0.25,1.6667]$", "(\\frac14,\\frac53]", False),
    ("so the point is $\\\\left( 2, \\\\frac{\\\\pi}{3} \\\\right)$", "(2,\\frac{\\pi}{3})", True),
    ("so the point is $\\\\left( 2, \\\\frac{\\\\pi}{6} \\\\right)$", "(2,\\frac{\\pi}{3})", False),
]

LENIENT_CASES: list[LenientCase] = [
    LenientCase(category, prediction, gold, expected)
    for category, rows in (("short", _SHORT), ("prose", _PROSE), ("commit", _COMMIT), ("gold_form", _GOLD_FORMS),
                           ("near_miss", _NEAR_MISS), ("solution_gold", _SOLUTION_GOLD), ("labelled", _LABELLED),
                           ("lists", _LISTS), ("sentences", _SENTENCES))
    for prediction, gold, expected in rows
]
