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
    ("x = 3", "3", True), ("3", "x=3", True), ("\\$12.50", "12.5", True),
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


# Round 4: conventions of graders and benchmarks the earlier rounds were not written from (PRM800K's
# "# Answer" lines, Qwen2.5-Math's and DeepSeek-Math's answer parsing, OlympiadBench and OpenCompass
# units, lm-eval's Minerva answers, GSM8K dollar amounts, multiple-choice tasks, AIME integers). Cases are
# ours. A gold may be a reference mapping: ``{"ground_truth": ..., "choices": ...}`` names the options.
_UNITS = [  # a gold with a unit needs the same quantity; a gold without one accepts any unit
    ("Answer: 5 \\text{ km}", "5\\text{ km}", True), ("Answer: 5000 m", "5 \\text{ km}", True),
    ("Answer: 5 m", "5\\text{ km}", False), ("So the distance is 5 m.", "5\\text{ km}", False),
    ("The answer is 90 minutes.", "1.5 \\text{ hours}", True), ("The answer is 90 hours.", "90 \\text{ minutes}", False),
    ("$\\boxed{1.5\\text{ h}}$", "90\\text{ min}", True), ("$\\boxed{2 \\text{ hours}}$", "120 \\text{ minutes}", True),
    ("$\\boxed{120 \\text{ seconds}}$", "120 \\text{ minutes}", False), ("Answer: 12 cm", "12", True),
    ("So the area is $24 \\text{ cm}^2$.", "24", True), ("Answer: 24 cm^2", "24 \\text{ cm}^2", True),
    ("Answer: 24 cm", "24\\text{ cm}^2", False), ("Answer: 2400 mm^2", "24 \\text{ cm}^2", True),
    ("Answer: 3 kg", "3000 \\text{ g}", True), ("Answer: 3 g", "3 \\text{ kg}", False),
    ("Answer: 250 mL", "0.25 \\text{ L}", True), ("Answer: 36 inches", "3 \\text{ feet}", True),
    ("Answer: 3 inches", "3\\text{ feet}", False), ("Answer: 45 mph", "45 \\text{ miles per hour}", True),
    ("Answer: 45 km/h", "45 \\text{ mph}", False), ("Answer: 15 dollars", "\\$15", True),
    ("Answer: 15 cents", "\\$15", False), ("Answer: \\$0.15", "15 \\text{ cents}", True),
    ("Answer: 30 degrees", "30^\\circ", True), ("Answer: 30 radians", "30^\\circ", False),
    ("Answer: 7 days", "1 \\text{ week}", True), ("Answer: 7 weeks", "7 \\text{ days}", False),
    ("Answer: 2 km", "2000", False), ("Answer: 18", "18 \\text{ inches}", True),
    ("The trip takes 3 hours.", "3 \\text{ hours}", True), ("The trip takes 3 minutes.", "3 \\text{ hours}", False),
    ("Answer: 5 meters", "5 \\text{ m}", True), ("Answer: 500 cm", "5 \\text{ m}", True),
    ("Answer: 1.2 miles", "1.2\\text{ km}", False), ("Answer: 60 sq ft", "60 \\text{ square feet}", True),
    ("Answer: 60 ft", "60\\text{ ft}^2", False), ("The tank holds $\\boxed{40}$ liters.", "40 \\text{ L}", True),
    ("The tank holds $\\boxed{40}$ gallons.", "40 \\text{ L}", False), ("Final Answer: 2.5 kilometers", "2500 \\text{ m}", True),
]
_TRUNCATION = [  # cut off mid-working: never right in lenient mode, whatever numbers the working holds
    (("First, 3 \\times 4 = 12 apples in each row. Then there are 12 + 5 = 17 apples in total, but we still need "
     "to subtract the"), "17", False),
    (("Let's compute the area. The rectangle is $8 \\times 5 = 40$. The triangle has area $\\frac{1}{2}\\cdot 4 "
     "\\cdot 3 = 6$. So the shaded region is $40 - "), "40", False),
    (("We need $x^2 - 5x + 6 = 0$, which factors as $(x-2)(x-3) = 0$, giving $x = 2$ or $x = 3$. Now we check "
     "which root satisfies the second condition: substituting $x = 3$ into"), "3", False),
    (("<think>\nOkay, the price after the discount is 80 - 20 = 60 dollars. Then tax adds 6, so 66. Hmm wait, is "
     "the tax on"), "66", False),
    ("Step 1: 15 + 27 = 42.\nStep 2: 42 \\div 6 = 7.\nStep 3: Now multiply", "7", False),
    ("Step 1: 15 + 27 = 42.\nStep 2: 42 \\div 6 = 7", "7", False),
    (("The sum of the first 10 odd numbers is $1 + 3 + 5 + \\cdots + 19 = 100$. To double-check, we use the "
     "formula $n^2 = 10^2 = 1"), "100", False),
    (("Using the Pythagorean theorem, $c = \\sqrt{6^2 + 8^2} = \\sqrt{100} = 10$. The perimeter is therefore "
     "$6 + 8 + 10 = 24$, and the area is $\\frac{1}{2} \\cdot 6 \\cdot"), "24", False),
    ("Let $n$ be the number. Then $3n + 7 = 22$, so $3n = 15$ and $n = 5$. Next we", "5", False),
    ("So far we have 120 ways for the first part. For the second part we", "120", False),
    (("The probability of heads on one toss is $\\frac{1}{2}$, so the probability of two heads is $\\frac{1}{4}$. "
     "For three tosses the probability is $\\frac{1}{"), "\\frac14", False),
    ("Converting: 3 hours is 180 minutes, plus 45 minutes gives 225 minutes. In seconds this is 225 \\times", "225", False),
    (("We compute $2^{10} = 1024$ and $2^{11} = 2048$. Since $1024 < 2000 < 2048$, the largest power of two below "
     "2000 is"), "1024", False),
    (("The divisors of 36 are 1, 2, 3, 4, 6, 9, 12, 18, 36. Among these, the even ones are 2, 4, 6, 12, 18, 36, so "
     "there are 6 even divisors and"), "6", False),
    (("Adding the equations gives $2x = 14$, so $x = 7$. Then $y = 10 - 7 = 3$, hence $xy = 21$. We are asked "
     "for $x - y$, which is $7 - 3 ="), "21", False),
    (("Total cost: 4 \\times \\$2.50 = \\$10. She pays with a \\$20 bill, so the change is \\$20 - \\$10 = \\$10. "
     "But wait, she also bought a drink for"), "10", False),
    (("The first train covers 60 \\times 2 = 120 km and the second 80 \\times 2 = 160 km, so together they cover "
     "120 + 160 = 280 km. The remaining distance is 300 - 280 = 20 km, which they close at a combined speed "
     "of 140 km/h, taking 20/140 = 1/7"), "\\frac17", False),
    (("Let me set up the recurrence $a_n = a_{n-1} + a_{n-2}$ with $a_1 = 1, a_2 = 2$. Then $a_3 = 3$, $a_4 = 5$, "
     "$a_5 = 8$, $a_6 = 13$, $a_7 = 21$, $a_8 = 34$, $a_9 = 55$, $a_{10} = 89$,"), "89", False),
    (("We want the remainder of $7^{100}$ mod 5. Since $7 \\equiv 2$, and $2^4 = 16 \\equiv 1$, we get "
     "$2^{100} = (2^4)^{25} \\equiv 1$. So the remainder is 1, but let me double check with $7^2 = 49 \\equiv"),
     "1", False),
    ("Total cost: 4 \\times 2.50 = 10 dollars. She pays 20, so her change is 10 dollars.", "10", True),
    ("Step 1: 15 + 27 = 42.\nStep 2: 42 \\div 6 = 7.\nFinal Answer: 7", "7", True),
    ("Step 1: 15 + 27 = 42.\nStep 2: 42 \\div 6 = 7.\nStep 3: 7 \\times 3 = 21.\n\n# Answer\n\n21", "21", True),
    ("So the answer is 7. Let me double check: 42 / 6 = 7. Yes, and if we", "7", True),
    ("Let $n$ be the number. Then $3n + 7 = 22$, so $n = 5$.\n\n5", "5", True),
    ("The final answer is $\\boxed{12}$. To verify, 3 \\times 4 = 12, and", "12", True),
]
_CHOICES = {"ground_truth": "B", "choices": ["12", "15", "18", "21"]}
_CHOICES_TEXT = {"ground_truth": "15", "choices": ["12", "15", "18", "21"]}
_OPTIONS = {"ground_truth": "C", "options": {"A": "x+1", "B": "x-1", "C": "2x", "D": "x^2"}}
_CHOICE = [  # letters in their written forms, any case; a letter with its value; golds as letter or text
    ("(B)", "B", True), ("B)", "B", True), ("B.", "B", True), ("**B**", "B", True), ("Answer: b", "B", True),
    ("option B", "B", True), ("$\\boxed{B}$", "B", True), ("The answer is (b).", "B", True),
    ("Answer: (C)", "B", False), ("$\\boxed{b}$", "(B)", True), ("The correct option is C.", "C", True),
    ("**Answer: D**", "D", True), ("Answer: D) 42", "D", True), ("Answer: (D) 42", "42", True),
    ("Answer: (C) 42", "(D) 42", False), ("Answer: (D) 40", "(D) 42", False), ("Answer: 42", "(D) 42", True),
    ("Answer: D", "(D) 42", True), ("Answer: d", "D. 42", True), ("Answer: 42", "D", False), ("Answer: E", "D", False),
    ("Answer: a", "A", True), ("Answer: option (e)", "E", True), ("**(C)**", "c", True), ("Answer: AB", "A", False),
    ("Answer: (A) and (C)", "A", False), ("Answer: A or B", "A", False), ("The answer is $\\textbf{(E)}$", "E", True),
    ("Answer: 15", _CHOICES, True), ("Answer: 18", _CHOICES, False), ("Answer: (B) 15", _CHOICES, True),
    ("Answer: (C) 15", _CHOICES, False), ("Answer: B", _CHOICES_TEXT, True), ("Answer: b)", _CHOICES_TEXT, True),
    ("Answer: C", _CHOICES_TEXT, False), ("Answer: 15", _CHOICES_TEXT, True), ("Answer: 2x", _OPTIONS, True),
    ("Answer: (c)", _OPTIONS, True), ("Answer: x^2", _OPTIONS, False), ("The answer is (A) x+1.", _OPTIONS, False),
]
_TYPOGRAPHY = [  # thousands, currency, thin spaces, unicode minus, scale words, number words
    ("$\\boxed{1{,}000}$", "1000", True), ("$\\boxed{1\\,000}$", "1000", True), ("Answer: 1,000", "1000", True),
    ("Answer: \\$1,000", "1000", True), ("Answer: $1000.00", "1000", True), ("Answer: 1000 USD", "\\$1,000", True),
    ("Answer: USD 1,000", "1000", True), ("Answer: 1\u2009000", "1000", True), ("Answer: 1\u202f000", "1,000", True),
    ("Answer: \u22125", "-5", True), ("Answer: \u22125", "5", False), ("Answer: 3 million", "3000000", True),
    ("Answer: 3 million", "3", False), ("Answer: 2.5 billion", "2500000000", True),
    ("Answer: 2.5 billion", "2500000", False), ("Answer: \\$3.2 million", "3200000", True),
    ("Answer: twelve", "12", True), ("The answer is twelve.", "12", True), ("Answer: twelve", "11", False),
    ("Answer: 1{,}000{,}000", "10^6", True), ("Answer: 10,000", "1000", False), ("Answer: 1.000", "1000", False),
    ("Answer: 12{,}345.5", "12345.5", True), ("Answer: 3 thousand", "3000", True),
    ("Answer: 1.5 million dollars", "\\$1,500,000", True), ("Answer: \\$1,500", "\\$1,500,000", False),
    ("Answer: forty-two", "42", True), ("$\\boxed{2{,}024}$", "2024", True), ("Answer: -\\$5", "-5", True),
    ("She earns \\$1,250 in total.", "1250", True), ("She earns \\$1,250 in total.", "125", False),
    ("Answer: 4.2 million", "4200000", True), ("Answer: 7 million", "7000", False),
    ("$\\boxed{\\$2{,}500}$", "2500", True), ("Answer: 1 234 567", "1234567", True),
]
_MIXED = [  # mixed numbers and fractions in prose
    ("Answer: 2 1/2", "\\frac{5}{2}", True), ("Answer: 2\\frac{1}{2}", "2.5", True),
    ("Answer: two and a half", "2.5", True), ("Answer: two and a half", "\\frac{5}{2}", True),
    ("Answer: two and a half", "3.5", False), ("Answer: 2 and 1/2", "\\frac52", True),
    ("Answer: 3 3/4 cups", "3.75", True), ("Answer: 3 3/4", "\\frac{9}{4}", False),
    ("Answer: 1 1/3", "\\frac{1}{3}", False), ("Answer: 2 1/2", "21/2", False),
    ("Answer: one and three quarters", "\\frac74", True), ("Answer: one third", "\\frac13", True),
    ("The recipe needs 1 1/2 cups of sugar.", "\\frac32", True), ("The recipe needs 1 1/2 cups of sugar.", "\\frac12", False),
    ("Answer: five and a quarter", "\\frac{21}{4}", True), ("Answer: $2\\tfrac{1}{2}$", "\\frac{5}{2}", True),
    ("Answer: $-2\\frac{1}{2}$", "-\\frac{5}{2}", True), ("Answer: 2 \\frac{1}{2}", "2.5", True),
    ("Answer: 4 2/3 hours", "\\frac{14}{3}", True), ("Answer: 4 2/3 hours", "\\frac{8}{3}", False),
    ("Answer: three and two thirds", "\\frac{11}{3}", True), ("Answer: three and two thirds", "\\frac{2}{3}", False),
]
_TIMES = [  # times of day and dates
    ("Answer: 3:30 p.m.", "15:30", True), ("Answer: 3:30 PM", "3:30 \\text{ p.m.}", True),
    ("Answer: 3:30 a.m.", "3:30 \\text{ p.m.}", False), ("Answer: 15:30", "3:30 PM", True),
    ("Answer: 3:30", "15:30", False), ("Answer: 3:30pm", "15:30", True),
    ("The train arrives at 4:15 p.m.", "4:15 \\text{ PM}", True), ("The train arrives at 4:15 a.m.", "4:15 PM", False),
    ("Answer: 12:00 p.m.", "12:00", True), ("Answer: 12 a.m.", "00:00", True), ("Answer: 9 AM", "9:00 \\text{ a.m.}", True),
    ("Answer: 9 PM", "9:00 a.m.", False), ("Answer: 21:00", "9 p.m.", True), ("Answer: 3:45", "3:54", False),
    ("Answer: 5 March", "March 5", True), ("Answer: March 15, 2024", "2024-03-15", True),
    ("Answer: March 5", "March 6", False), ("Answer: May 5", "March 5", False), ("Answer: March 5th", "March 5", True),
    ("Answer: Tuesday", "Tuesday", True), ("Answer: Thursday", "Tuesday", False), ("Answer: tuesday", "Tuesday", True),
    ("Answer: 10:05 a.m.", "10:50 a.m.", False), ("The meeting ends at $\\boxed{11:20}$ a.m.", "11:20 \\text{ AM}", True),
]
_BASES = [  # base-n with and without subscripts
    ("Answer: 1011_2", "1011_2", True), ("Answer: 1011_{2}", "1011_2", True), ("Answer: $1011_2$", "1011_{2}", True),
    ("Answer: 1011", "1011_2", True), ("Answer: 1011_2", "1011", True), ("Answer: 1101_2", "1011_2", False),
    ("Answer: 1011_3", "1011_2", False), ("Answer: 11", "1011_2", False), ("$\\boxed{2A_{16}}$", "2A_{16}", True),
    ("$\\boxed{2a_{16}}$", "2A_{16}", True), ("$\\boxed{2B_{16}}$", "2A_{16}", False), ("$\\boxed{52_8}$", "52_{8}", True),
    ("$\\boxed{(52)_8}$", "52_8", True), ("$\\boxed{10201}$", "10210_3", False), ("The answer is $413_5$.", "413_5", True),
    ("The answer is $413_5$.", "413_6", False), ("$\\boxed{10201_{3}}$", "10201_3", True), ("Answer: 0110_2", "110_2", True),
]
_PERCENT = [  # percent vs proportion: a bare number is read in the gold's form
    ("Answer: 25\\%", "25\\%", True), ("Answer: 25", "25\\%", True), ("Answer: 0.25", "25\\%", False),
    ("Answer: 25%", "0.25", True), ("Answer: 25", "0.25", False), ("Answer: $\\frac{1}{4}$", "25\\%", False),
    ("Answer: 25 percent", "25\\%", True), ("Answer: 2.5\\%", "25\\%", False), ("Answer: 40\\%", "\\frac{2}{5}", True),
    ("Answer: 0.4", "40\\%", False), ("Answer: 12.5\\%", "12.5\\%", True), ("Answer: 12.5 percent", "0.125", True),
    ("The discount is 30%.", "30\\%", True), ("The discount is 30%.", "3\\%", False),
    ("\\frac{3}{4}", "75\\%", False),  # round 3 listed it right; round 4 reads a bare number in the gold's form
]

# A second batch, written before the code was run on it (the first batch guided the code; this one checked it).
_UNITS += [
    ('Final Answer: The final answer is $5 \\mathrm{~cm}$. I hope it is correct.', '5 \\mathrm{~cm}', True),
    ('Final Answer: The final answer is $5 \\mathrm{~mm}$. I hope it is correct.', '5 \\mathrm{~cm}', False),
    ('The answer is $\\boxed{50 \\text{ km/h}}$', '50 \\mathrm{~km} / \\mathrm{h}', True),
    ('So it takes $\\boxed{45}$ minutes.', '45', True),
    ('So it takes $\\boxed{45}$ seconds.', '45 \\text{ minutes}', False),
    ('# Answer\n\n10 inches', '10\\text{ inches}', True),
    ('# Answer\n\n10 feet', '10\\text{ inches}', False),
    ('He needs 3.5 hours in total.\n\n#### 3.5', '3.5', True),
    ('The answer is $\\boxed{210\\text{ min}}$.', '3.5 \\text{ hours}', True),
    ('The answer is $\\boxed{3\\frac{1}{2}\\text{ hours}}$.', '210 \\text{ minutes}', True),
    ('The perimeter is $\\boxed{28\\text{ m}}$.', '28 \\text{ m}^2', False),
    ('Answer: 4 ounces', '4 \\text{ pounds}', False),
    ('Answer: 64 ounces', '4 \\text{ pounds}', True),
    ('The answer is $\\boxed{12}$ kg.', '12000 \\text{ g}', True),
    ('The answer is $\\boxed{12}$ g.', '12 \\text{ kg}', False),
    ('The total is \\$18.90.', '\\$18.90', True),
    ('The total is \\$18.09.', '\\$18.90', False),
    ('Answer: 1.5 L', '1500 \\text{ mL}', True),
    ('Answer: 60^\\circ', '60', True),
    ('Answer: \\frac{\\pi}{3}', '60^\\circ', False),
]
_TRUNCATION += [
    ('To find the number of students, we note that 40\\% of 250 is 100. So 100 students like math. Of those, half also like', '100', False),
    ('We have $a + b = 12$ and $ab = 35$. So $a$ and $b$ are roots of $t^2 - 12t + 35 = 0$, i.e. $t = 5$ or $t = 7$. Hence the larger root is 7, and then $a^2 + b^2 = (a+b)^2 - 2ab = 144 - 70 = 74$. Finally we need', '74', False),
    ('The slope is $\\frac{6 - 2}{4 - 2} = 2$, so the line is $y - 2 = 2(x - 2)$, which simplifies to $y = 2x', '2x-2', False),
    ('First, the total number of outcomes is $6^2 = 36$. The favourable ones are (1,6), (2,5), (3,4), (4,3), (5,2), (6,1), which is 6 outcomes. So the probability is $\\frac{6}{36} = \\frac{1}{6}', '\\frac16', False),
    ('Let me reconsider. 25 \\times 4 = 100, and 100 + 17 = 117', '117', False),
    ('Let me reconsider. 25 \\times 4 = 100, and 100 + 17 = 117.\n\nThe answer is 117.', '117', True),
    ('The product is 24.', '24', True),
    ('We multiply: 6 \\times 4 = 24. So there are 24 ways.', '24', True),
]
_CHOICE += [
    ('The answer is: C', 'C', True),
    ('Answer: (c) 12', 'C', True),
    ('The correct answer is **(D)**.', 'D', True),
    ('The correct answer is **(D)**.', 'B', False),
    ('I think the answer is A.\n\nAnswer: A', 'A', True),
    ('Answer: \\text{(B)}', 'B', True),
    ('Answer: Option C', '(C)', True),
    ('Answer: [B]', 'B', True),
    ('Answer: B and D', 'B', False),
]
_TYPOGRAPHY += [
    ('Answer: \\$1{,}250', '1250', True),
    ('Answer: 1,250 dollars', '\\$1,250', True),
    ('Answer: 1.25 thousand', '1250', True),
    ('Answer: 0.5 million', '500000', True),
    ('Answer: 0.5 million', '500', False),
    ('Answer: −3.5', '-\\frac{7}{2}', True),
    ('Answer: twenty-five', '25', True),
    ('Answer: one hundred and five', '105', True),
    ('#### 1,000', '1000', True),
    ('#### 1,000', '100', False),
    ('$\\boxed{033}$', '33', True),
    ('Answer: 12\\,345', '12345', True),
]
_MIXED += [
    ('Answer: 12 345', '12345', True),
    ('She walked 2 1/4 miles.', '\\frac{9}{4}', True),
    ('She walked 2 1/4 miles.', '\\frac{1}{4}', False),
    ('Answer: 1\\frac{3}{5}', '\\frac{8}{5}', True),
    ('Answer: 1\\frac{3}{5}', '\\frac{3}{5}', False),
    ('Answer: two thirds', '\\frac{2}{3}', True),
]
_TIMES += [
    ('Answer: seven and one half', '7.5', True),
    ('The movie ends at 9:45 PM.', '9:45 p.m.', True),
    ('The movie ends at 9:45 PM.', '9:45 a.m.', False),
    ('The answer is $\\boxed{\\text{6:15 a.m.}}$', '6:15 \\text{ AM}', True),
    ('The answer is $\\boxed{18:15}$', '6:15 \\text{ PM}', True),
    ('The answer is $\\boxed{18:15}$', '6:15 \\text{ AM}', False),
    ('Answer: Saturday', '\\text{Saturday}', True),
    ('Answer: Sunday', '\\text{Saturday}', False),
]
_BASES += [
    ('Answer: July 4', '\\text{July 4}', True),
    ('The answer is $\\boxed{11011_2}$.', '11011_2', True),
    ('The answer is $\\boxed{11011}$.', '11011_2', True),
    ('The answer is $\\boxed{27}$.', '11011_2', False),
    ('The answer is $\\boxed{1AB_{12}}$.', '1AB_{12}', True),
    ('The answer is $\\boxed{123_4}$.', '123_{4}', True),
]
_PERCENT += [
    ('The answer is $\\boxed{132_4}$.', '123_{4}', False),
    ('The answer is $\\boxed{20\\%}$.', '20', True),
    ('The answer is $\\boxed{0.2}$.', '20\\%', False),
    ('The answer is $\\boxed{20}$.', '20\\%', True),
    ('The probability is $\\boxed{0.2}$.', '\\frac{1}{5}', True),
    ('The answer is $\\boxed{20\\%}$.', '\\frac15', True),
]

# A third batch in the answer styles of whole responses (PRM800K '# Answer', boxed, Minerva, GSM8K, AIME),
# also written before the code ran on it (60 of 61 right; the miss was a rate, cm / s).
_UNITS += [
    ('I need to find the area of the triangle.\nThe base is 6 and the height is 4.\nSo the area is 1/2 * 6 * 4 = 12.\n\n# Answer\n\n12', '12', True),
    ('I need to find the area of the triangle.\nThe base is 6 and the height is 4.\nSo the area is 1/2 * 6 * 4 = 12.\n\n# Answer\n\n12', '24', False),
    ('Let me convert 3 hours to minutes.\n3 * 60 = 180.\n\n# Answer\n\n180', '180\\text{ minutes}', True),
    ('The sum of the angles is 180 degrees, so the third angle is 180 - 50 - 60 = 70 degrees.\n\n# Answer\n\n70', '70^\\circ', True),
    ('Thus, the speed is $\\boxed{60 \\text{ km/h}}$.', '60', True),
    ('Thus, the speed is $\\boxed{60 \\text{ m/s}}$.', '60 \\text{ km/h}', False),
    ('The answer is $2 \\mathrm{~m} / \\mathrm{s}$.', '2 \\mathrm{~m} / \\mathrm{s}', True),
    ('The answer is $200 \\mathrm{~cm} / \\mathrm{s}$.', '2 \\mathrm{~m} / \\mathrm{s}', True),
    ('The answer is $2 \\mathrm{~km} / \\mathrm{s}$.', '2 \\mathrm{~m} / \\mathrm{s}', False),
    ('So the final answer is $\\boxed{12 \\mathrm{~kg}}$.', '12', True),
    ('So the final answer is $\\boxed{\\frac{\\sqrt{3}}{2}}$.', '\\frac{\\sqrt{3}}{2}', True),
    ('So the final answer is $\\boxed{(1, 2)}$.', '(1,2)', True),
    ('The answer is $\\boxed{5}$ hours.', '300 \\text{ minutes}', True),
    ('The answer is $\\boxed{5}$ minutes.', '5 \\text{ hours}', False),
    ('The rectangle has area $\\boxed{48}$ square inches.', '48 \\text{ in}^2', True),
    ('The rectangle has area $\\boxed{48}$ inches.', '48 \\text{ in}^2', False),
    ('The answer is 2 hours and 15 minutes.', '135 \\text{ minutes}', True),
    ('The answer is 2 hours and 15 minutes.', '2.15 \\text{ hours}', False),
    ('Answer: 3.6 km', '3600 \\text{ meters}', True),
    ('Answer: 3.6 km', '3600', False),
]
_TRUNCATION += [
    ('She earns $15 per hour, so in 8 hours she earns 15 * 8 = $120. After taxes of $20, she keeps $100.', '100', True),
    ('She earns $15 per hour, so in 8 hours she earns 15 * 8 = $120. After taxes of $20, she keeps', '100', False),
    ('The farmer has 5 rows of 12 trees, which is 5 x 12 = 60 trees. He plants 15 more, so he has 60 + 15 = 75 trees', '75', False),
]
_CHOICE += [
    ('Among the options, only (C) satisfies the condition. The answer is (C).', 'C', True),
    ('Among the options, only (C) satisfies the condition. The answer is (C).', 'D', False),
    ('The answer is \\boxed{\\text{(D)}}', 'D', True),
    ('Answer: D. 3\\sqrt{2}', 'D', True),
    ('Answer: C. 3\\sqrt{2}', 'D', False),
    ('The answer is $\\boxed{A}$', '(A) 17', True),
    ('The answer is $\\boxed{17}$', '(A) 17', True),
    ('The answer is $\\boxed{19}$', '(A) 17', False),
    ('answer: e', 'E', True),
    ('Answer: (E) none of the above', 'E', True),
]
_TYPOGRAPHY += [
    ('So the cost is $\\$4.50$.\n\n# Answer\n\n\\$4.50', '\\$4.50', True),
    ('So the cost is $\\$4.50$.\n\n# Answer\n\n\\$4.05', '\\$4.50', False),
    ('The total is $\\boxed{1,\\!000,\\!000}$.', '1000000', True),
    ('The total is $\\boxed{10^{6}}$.', '1{,}000{,}000', True),
    ('Final Answer: The final answer is $\\$12.50$. I hope it is correct.', '12.50', True),
    ('Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.\n#### 72', '72', True),
    ('He pays 3 * $12 = $36 for the shirts.\nHe pays $36 + $14 = $50 in total.\n#### 50', '50', True),
    ('The answer is 1,250.', '1250', True),
    ('The answer is $1,250.', '1250', True),
    ('... so $m + n = 125$. The answer is $\\boxed{125}$.', '125', True),
    ('The answer is $\\boxed{007}$.', '7', True),
    ('The answer is $\\boxed{070}$.', '7', False),
    ('The answer is $\\boxed{-7}$.', '-7', True),
    ('The answer is $\\boxed{0.5}$.', '\\frac{1}{2}', True),
    ('The answer is $\\boxed{\\frac{1}{2}}$.', '0.5', True),
    ('The answer is $\\boxed{x^2+2x+1}$.', '(x+1)^2', True),
    ('The answer is $\\boxed{[2, 5)}$.', '[2,5)', True),
    ('The answer is 5 apples.', '5', True),
    ("I believe it's $5$.", '5', True),
    ('Hmm, so x = 4', '4', True),
    ('The value is approximately 3.14', '3.14', True),
]
_MIXED += [
    ('Therefore, the final answer is: $\\boxed{\\frac{5}{2}}$. I hope it is correct.', '2\\frac{1}{2}', True),
    ('Therefore, the final answer is: $\\boxed{2\\frac{1}{2}}$.', '\\frac{21}{2}', False),
]
_TIMES += [
    ('Final Answer: The final answer is $3:15$ PM. I hope it is correct.', '3:15 \\text{ PM}', True),
    ('Final Answer: The final answer is $3:15$ AM. I hope it is correct.', '3:15 \\text{ PM}', False),
]
_PERCENT += [
    ('To solve this problem, we compute $\\frac{3}{8} \\times 100\\% = 37.5\\%$.\n\nThe final answer is $\\boxed{37.5\\%}$.', '37.5\\%', True),
    ('To solve this problem, we compute $\\frac{3}{8} = 0.375$.\n\nThe final answer is $\\boxed{0.375}$.', '37.5\\%', False),
    ('Final Answer: The final answer is $12.5\\%$. I hope it is correct.', '12.5', True),
]

# Found while reviewing the third batch: a closing sentence that announces more working, a unit after the box.
_TRUNCATION += [
    ("First, 3 x 4 = 12. Then 12 + 5 = 17. Now we need to subtract the number of rotten apples.", "17", False),
    ("3 x 4 = 12. So 12 + 5 = 17 apples in total.", "17", True),
    ("The sides are 5 and 12, so the hypotenuse is 13. Next, let's find the area.", "13", False),
]
_UNITS += [
    ("The answer is $\\boxed{5}\\text{ m}$.", "5 \\text{ km}", False),
    ("The answer is $\\boxed{5}\\,\\mathrm{km}$.", "5 \\text{ km}", True),
    ("The answer is $\\boxed{5}$ in total.", "5 \\text{ km}", True),
]

# A fourth look, at LaTeX dollar and thousands forms inside sentences and times cut at their colon.
_TYPOGRAPHY += [
    ("$\\boxed{1{\\,}000}$", "1000", True), ("The total cost is \\$1{,}250.", "1250", True),
    ("The total cost is $\\$1{,}250$.", "1250", True), ("The total cost is $\\$1{,}250$.", "125", False),
    ("Answer: 2.5M", "2500000", True), ("Answer: 40k", "40000", True), ("Answer: 40k", "40", False),
    ("So the ratio is 3:4.", "3:4", True), ("So the ratio is 3:4.", "4:3", False),
]
_TIMES += [
    ("The answer is 7 o'clock.", "7:00", True), ("So, the time is 2:45 p.m.", "2:45 \\text{ PM}", True),
    ("So, the time is 2:45 p.m.", "2:45 \\text{ AM}", False),
]

# A fifth batch, written before the code ran on it (36 of 40 right; the misses: 'Option B: 15' read as 15,
# 'open for 8.5 hours' against 8.5 minutes, 'Dec. 25' cut at its full stop, 'two and three quarters cups').
_UNITS += [
    ('The boiling point is $100^\\circ \\text{C}$.', '100^\\circ \\text{C}', True),
    ('The boiling point is $212^\\circ \\text{F}$.', '100^\\circ \\text{C}', False),
    ('Final Answer: The final answer is $25 \\text{ cm}^{2}$. I hope it is correct.', '25', True),
    ('Final Answer: The final answer is $25 \\text{ cm}^{2}$. I hope it is correct.', '25 \\text{ cm}', False),
    ('The car travels $\\boxed{150}$ miles.', '150 \\text{ miles}', True),
    ('The car travels $\\boxed{150}$ km.', '150 \\text{ miles}', False),
    ('It takes her $\\boxed{45}$ minutes, or three quarters of an hour.', '0.75 \\text{ hours}', True),
    ('The shop opens at 8:30 a.m. and closes at 5 p.m., so it is open for 8.5 hours.', '8.5', True),
    ('The shop opens at 8:30 a.m. and closes at 5 p.m., so it is open for 8.5 hours.', '8.5 \\text{ minutes}', False),
]
_TRUNCATION += [
    ('We compute step by step. First, 12 * 3 = 36. Then 36 / 4 = 9. Then 9 + 1 = 10. Then multiply by', '10', False),
    ('We compute step by step. First, 12 * 3 = 36. Then 36 / 4 = 9. Then 9 + 1 = 10.', '10', True),
    ("Let's denote the width by $w$. Then the length is $2w$ and $2(w + 2w) = 36$, so $6w = 36$ and $w = ", '6', False),
]
_CHOICE += [
    ('The correct answer is B because the slope is positive.', 'B', True),
    ('The correct answer is B because the slope is positive.', 'C', False),
    ('Option B: 15', 'B', True),
    ('Answer: A quarter of the cake', 'A', False),
    ('After comparing all options, (A) 12 and (C) 18 are too large, so the answer is (B) 15.', 'B', True),
    ('After comparing all options, (A) 12 and (C) 18 are too large, so the answer is (B) 15.', 'A', False),
    ('The answer is $\\boxed{\\text{B}}$.', {'ground_truth': '15', 'choices': ['12', '15', '18']}, True),
    ('The answer is $\\boxed{\\text{C}}$.', {'ground_truth': '15', 'choices': ['12', '15', '18']}, False),
    ('The answer is 18.', {'ground_truth': 'B', 'options': {'A': '12', 'B': '15', 'C': '18'}}, False),
]
_TYPOGRAPHY += [
    ('The total is 1.5 million dollars.', '1500000', True),
    ('The total is 1.5 million dollars.', '1.5', False),
    ('About $\\boxed{3.2\\text{ billion}}$ people.', '3200000000', True),
    ('Answer: 0.000001', '10^{-6}', True),
    ('Answer: 1,000,001', '1000001', True),
]
_MIXED += [
    ('She needs two and three quarters cups of flour.', '\\frac{11}{4}', True),
    ('She needs two and three quarters cups of flour.', '\\frac{3}{4}', False),
    ('Answer: 2 3/4', '2.75', True),
    ('Answer: -3 1/2', '-3.5', True),
]
_TIMES += [
    ('The answer is Dec. 25.', 'December 25', True),
    ('The answer is 25th December 2023.', '2023-12-25', True),
    ('The answer is 25th December 2023.', '2023-12-24', False),
    ('The answer is 12 noon.', '12:00 \\text{ p.m.}', True),
]
_BASES += [
    ('Converting, $11_{10} = 1011_2$. So the answer is $\\boxed{1011_2}$.', '1011_2', True),
    ('So the answer is $\\boxed{1011_{2}}$.', '1101_2', False),
    ('Thus the number in base 5 is $\\boxed{1234_5}$.', '1234_5', True),
]
_PERCENT += [
    ('The population grew by 12%.', '12\\%', True),
    ('The population grew by 12%.', '0.12', True),
    ('The population grew by 0.12.', '12\\%', False),
]

# A sixth batch, written before the code ran on it (46 of 48 right; the misses: 'I would choose D.', 'half an hour').
_UNITS += [
    ('The garden is 12 m long and 5 m wide, so its area is 60 m².', '60 \\text{ m}^2', True),
    ('The garden is 12 m long and 5 m wide, so its perimeter is 34 m.', '34 \\text{ m}^2', False),
    ('The answer is $\\boxed{7\\text{ ft}}$.', '84 \\text{ inches}', True),
    ('The answer is $\\boxed{7\\text{ yd}}$.', '7 \\text{ ft}', False),
    ('He runs 10 km in 50 minutes, so his speed is 12 km/h.', '12 \\text{ km/h}', True),
    ('He runs 10 km in 50 minutes, so his speed is 12 km/min.', '12 \\text{ km/h}', False),
    ('Therefore, the volume is $\\boxed{36\\pi}$ cubic centimeters.', '36\\pi', True),
    ('The weight is 2.5 kg.', '2500 \\text{ grams}', True),
    ('The weight is 2.5 lb.', '2.5 \\text{ kg}', False),
    ('The answer is 3 days.', '72 \\text{ hours}', True),
    ('The answer is 3 weeks.', '3 \\text{ days}', False),
    ('It costs \\$2.40 per pound.', '\\$2.40', True),
    ('It costs 240 cents.', '\\$2.40', True),
    ('It costs 2.40 euros.', '\\$2.40', False),
]
_TRUNCATION += [
    ('We need the number of integers from 1 to 100 divisible by 3 or 5. There are 33 multiples of 3 and 20 multiples of 5, and 6 multiples of 15. By inclusion-exclusion we get 33 + 20 - 6 = 47', '47', False),
    ('We need the number of integers from 1 to 100 divisible by 3 or 5. There are 33 multiples of 3 and 20 multiples of 5, and 6 multiples of 15. By inclusion-exclusion there are 33 + 20 - 6 = 47 such integers.', '47', True),
    ("Let's think step by step.\n1. The train leaves at 9:00.\n2. It travels for 2 hours.\n3. So it arrives at", '11:00', False),
    ('<think>The sum of the roots is 7 by Vieta, and the product is 12. So the roots are 3 and 4</think>', '7', False),
    ('The area of the circle is $\\pi r^2 = 25\\pi$. The area of the square is $10^2 = 100$. The shaded area is therefore $100 - 25\\pi$, which is approximately', '100-25\\pi', False),
]
_CHOICE += [
    ('The answer is (C) $2\\sqrt{3}$.', '(C) 2\\sqrt{3}', True),
    ('The answer is (C) $3\\sqrt{2}$.', '(C) 2\\sqrt{3}', False),
    ('The answer is $2\\sqrt{3}$.', '(C) 2\\sqrt{3}', True),
    ('**Answer:** (A)', 'A', True),
    ('Answer: (A)\n\nExplanation: B and C are wrong because...', 'A', True),
    ('I would choose D.', 'D', True),
    ('The answer is A, B, or C.', 'A', False),
]
_TYPOGRAPHY += [
    ('The answer is $\\boxed{5{,}280}$ feet.', '5280', True),
    ('The answer is $\\boxed{5.280}$ feet.', '5280', False),
    ('The answer is $\\boxed{-\\$12}$.', '-12', True),
    ('The answer is minus seven.', '-7', True),
    ('The answer is seventy.', '17', False),
    ('The company earned \\$4.5 billion.', '4500000000', True),
    ('The company earned \\$4.5 billion.', '4500000', False),
]
_MIXED += [
    ('The answer is 1 ½ hours.', '1.5', True),
    ('The answer is $1\\frac{1}{2}$ hours.', '90 \\text{ minutes}', True),
    ('The answer is half an hour.', '30 \\text{ minutes}', True),
    ('The answer is three halves.', '1.5', True),
]
_TIMES += [
    ('The clock shows 10:10.', '10:10', True),
    ('The clock shows 10:01.', '10:10', False),
    ('He arrives at 14:05.', '2:05 \\text{ PM}', True),
    ('He arrives at 14:05.', '2:05 \\text{ AM}', False),
]
_BASES += [
    ('The answer is $\\boxed{FF_{16}}$.', 'FF_{16}', True),
    ('The answer is $\\boxed{255}$.', 'FF_{16}', False),
    ('In base 8 the number is 377.', '377_8', True),
]
_PERCENT += [
    ('The percent increase is 20%.', '20\\%', True),
    ('The percent increase is 0.2%.', '20\\%', False),
    ('The probability is 0.35.', '35\\%', False),
    ('The probability is 35%.', '0.35', True),
]
_TYPOGRAPHY += [("Answer: a", "1", False), ("Answer: an hour", "60 \\text{ minutes}", True), ("Answer: a dozen", "12", True)]

# A seventh batch, written before the code ran on it (29 of 30 right; the miss: '1 hour and 20 minutes' read as 20 minutes).
_UNITS += [
    ('# Answer\n\n\\$32', '\\$32', True),
    ('# Answer\n\n32 dollars', '\\$32', True),
    ('# Answer\n\n32 cents', '\\$32', False),
    ('# Answer\n\n6 \\text{ inches}', '6\\text{ inches}', True),
    ('# Answer\n\n6 \\text{ feet}', '6\\text{ inches}', False),
    ('The answer is $\\boxed{20 \\text{ m}, 30 \\text{ m}}$.', '20 \\text{ m}, 30 \\text{ m}', True),
    ('The answer is $\\boxed{4 \\mathrm{~s}}$.', '4 \\mathrm{~s}', True),
    ('The answer is $\\boxed{4 \\mathrm{~ms}}$.', '4 \\mathrm{~s}', False),
    ('The answer is $\\boxed{2 \\times 10^{3} \\mathrm{~kg}}$.', '2000 \\mathrm{~kg}', True),
    ('It will take 1 hour and 20 minutes.', '80 \\text{ minutes}', True),
    ('It will take 1 hour and 20 minutes.', '1.2 \\text{ hours}', False),
]
_TRUNCATION += [
    ('The first step is to compute 15% of 80, which is 12. Then we add', '12', False),
]
_CHOICE += [
    ('# Answer\n\n\\text{(E)}', '\\text{(E)}', True),
    ('# Answer\n\nE', '\\text{(E)}', True),
    ('# Answer\n\nD', '\\text{(E)}', False),
    ('So the answer is: B', 'B', True),
    ('So the answer is: b', 'B', True),
    ('the answer is (D).', 'D', True),
    ('The answer is (D). However, (C) is close.', 'D', True),
]
_TYPOGRAPHY += [
    ('Therefore the answer is 204.', '204', True),
    ('Therefore the answer is 204.', '240', False),
    ('The answer is $\\boxed{045}$.', '45', True),
    ('So he has \\$ 45 left.', '45', True),
    ('So he has 45 dollars left.', '\\$45', True),
    ('So he has 45 dollars left.', '\\$54', False),
]
_MIXED += [
    ('Thus the area is $\\frac{25}{2}$ square units.', '12.5', True),
    ('Thus the area is $12\\frac{1}{2}$ square units.', '\\frac{25}{2}', True),
    ('Thus the area is $12\\frac{1}{2}$ square units.', '\\frac{121}{2}', False),
]
_TIMES += [
    ('She arrives at 10:45 AM.', '10:45 \\text{ a.m.}', True),
    ('She arrives at 10:45 AM.', '10:45 \\text{ p.m.}', False),
]

ROUND4_CASES: list[LenientCase] = [
    LenientCase(category, prediction, gold, expected)
    for category, rows in (("units", _UNITS), ("truncation", _TRUNCATION), ("choice", _CHOICE),
                           ("typography", _TYPOGRAPHY), ("mixed", _MIXED), ("times", _TIMES), ("base_n", _BASES),
                           ("percent", _PERCENT))
    for prediction, gold, expected in rows
]
