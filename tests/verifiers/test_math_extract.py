"""The extraction policy, one rule per test: the answer is the last commitment, each at its own position."""

from __future__ import annotations

import time

import pytest

from dapo_env.verifiers import MathVerifier
from dapo_env.verifiers.math_extract import bare_answer, candidates, extract_answer
from dapo_env.verifiers.math_statements import clip

AUTO = MathVerifier(symbolic=False)


def kinds(text: str) -> list[tuple[str, str]]:
    return [(c.kind, c.value) for c in candidates(text)]


# --- every kind of commitment --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "kind", "value"),
    [
        ("work\n\n\\boxed{5}", "box", "5"),
        ("work\n\nAnswer: 5", "label", "5"),
        ("work\n\n**Final Answer:** $5$", "label", "$5$"),
        ("work\n\n## Final Answer\n\n\\[\n\\frac{1}{2}\n\\]", "label", "\\frac{1}{2}"),
        ("work. The final answer is 5.", "statement", "5"),
        ("work. So 5 is the answer.", "statement", "5"),
        ("work. The correct option is (B).", "statement", "(B)"),
        ("work\n#### 5", "gsm8k", "5"),
        ("5", "bare", "5"),
        ("work. Therefore, 12 teams reach the final.", "conclusion", "12"),
        ("work. Since f(-x) = f(x), the function is even.", "conclusion", "even"),
    ],
)
def test_each_kind_of_commitment(response: str, kind: str, value: str) -> None:
    assert (kind, value) in kinds(response)
    assert extract_answer(response) == value


def test_each_candidate_has_its_own_position_not_its_lines_end() -> None:
    text = "Final Answer: 12. Wait, that is wrong: recomputing gives \\boxed{14}."
    label, box = candidates(text)
    assert (label.kind, text[label.start : label.end]) == ("label", "12")
    assert (box.kind, text[box.start : box.end]) == ("box", "\\boxed{14}")
    assert extract_answer(text) == "14"
    assert extract_answer("\\boxed{14} was my first guess, but Final Answer: 12") == "12"


def test_the_last_commitment_wins() -> None:
    assert extract_answer("\\boxed{3}. Hmm, I dropped a term: Answer: 4") == "4"
    assert extract_answer("Answer: 4\n\nNo wait, the answer is 5.") == "5"
    assert extract_answer("The answer is 5.\n\n\\boxed{6}") == "6"


def test_a_statement_holding_a_box_gives_the_box() -> None:
    assert extract_answer("The final answer is $\\boxed{\\frac{1}{2}}$.") == "\\frac{1}{2}"


# --- what is not a commitment ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "response",
    [
        "The answer is probably 7.", "Maybe the answer is 7?", "I think the answer is 7", "If the answer is 7, then 2x = 14",
        "Is the answer 7?", "So the answer is 7?", "Let me verify that the answer is 7 by substituting", "42?",
        "The answer is not 7.", "It could be 7 or 8.", "So the total might be 7.", "I guess 7",
    ],
)
def test_hedges_and_questions_are_not_commitments(response: str) -> None:
    assert extract_answer(response) is None


@pytest.mark.parametrize(
    "response",
    [
        "We have $\\boxed{", "Therefore the answer is $\\boxed{\\frac{14}{3", "The final answer is", "Answer:",
        "So far the total is 147, and the final step is to", "So the total is 12",
        "First, 3 * 4 = 12. So the candidates are 3 and 7. Let me check which", "\\boxed{12} and then \\boxed{13",
    ],
)
def test_a_response_cut_off_before_committing_has_no_answer(response: str) -> None:
    assert extract_answer(response) is None


def test_a_commitment_survives_a_cut_off_check() -> None:
    assert extract_answer("\\boxed{12}. Let me double-check: 3 \\times 4 = ") == "12"
    assert extract_answer("Answer: 12\n\nTo double-check, 3 \\times 4 =") == "12"


def test_checks_after_a_commitment_do_not_override_it() -> None:
    assert extract_answer("Answer: 12\n\nCheck: 12 \\times 3 = 36, so the total is 36 as required.") == "12"
    assert extract_answer("\\boxed{7}\n\nLet me verify: if x = 7, then 2x + 1 = 15.") == "7"
    assert extract_answer("Therefore 12 teams reach the final. (Check: 6 groups of 2 make 12.)") == "12"
    # ... but a correction after it does
    assert extract_answer("Answer: 20\n\nWait, the overlap was counted twice, so the total is 16.") == "16"


def test_a_concluding_sentence_must_end_the_response() -> None:
    assert extract_answer("So the first term is 3. Then the common ratio is 2.") is None
    assert extract_answer("So the total is 12. Now for part two, the remaining 7 items") is None
    assert extract_answer("So the total is 12, and then we add 5 to get 17.") is None
    assert extract_answer("Therefore, the smallest such n is 7. Hope this helps!") == "7"


# --- bare answers ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "value"),
    [("42", "42"), ("  $\\frac{3}{4}$.\n", "\\frac{3}{4}"), ("\\[ 2\\sqrt{3} \\]", "2\\sqrt{3}"), ("No.", "No"),
     ("x = 5", "x = 5"), ("12 apples", "12 apples"), ("thirty-one", "thirty-one"), ("(C)", "(C)"),
     ("Let me think", None), ("we compute 3 + 4 = 7", None), ("Answer:", None), ("5?", None), ("Maybe 5", None),
     ("$\\frac{3}{4}$ seems right", None), ("x" * 400, None)],
)
def test_a_response_that_is_only_an_answer_is_its_own_answer(response: str, value: str | None) -> None:
    found = bare_answer(response)
    assert (found.value if found is not None else None) == value


# --- several boxes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("response", "value"),
    [("\\boxed{2} and \\boxed{3}", "2, 3"), ("$\\boxed{2}$ \\quad \\text{and} \\quad $\\boxed{3}$", "2, 3"),
     ("$x = \\boxed{2}$, $y = \\boxed{3}$", "2, 3"), ("(a) \\boxed{3} (b) \\boxed{4}", "3, 4"),
     ("$\\boxed{5}$\n\n$\\boxed{5}$", "5"), ("\\boxed{2}. Then, redoing the sum, \\boxed{3}", "3")],
)
def test_boxes_joined_at_the_end_form_one_answer(response: str, value: str) -> None:
    assert extract_answer(response) == value


# --- bounded work, whole response -----------------------------------------------------------------------------------
def test_an_answer_early_in_a_long_response_is_found_in_bounded_time() -> None:
    loop = "Let me double-check the answer once more: 6 times 7 is 42, so that is consistent. "
    for head in ("\\boxed{42}\n\n", "Answer: 42\n\n", "The final answer is 42.\n\n"):
        text = head + loop * 5000  # ~400k characters, the word "answer" 5000 times
        start = time.monotonic()
        assert extract_answer(text) == "42"
        assert time.monotonic() - start < 2.0


@pytest.mark.parametrize(
    "text",
    ["answer " * 100_000, ". " * 100_000, "So " * 100_000, "\\boxed{" * 50_000, "$" * 100_000, "{" * 100_000,
     "Answer:" * 100_000, "the answer is " * 50_000, "So the total is 1. " * 25_000, "(" * 100_000 + ")" * 100_000,
     "Yes, " * 100_000, "Since x, the y is " * 20_000, "**Final Answer**\n" * 50_000, "\\" * 100_000],
    ids=lambda t: repr(t[:16]),
)
def test_hostile_text_is_scanned_in_bounded_time(text: str) -> None:
    for extraction in ("strict", "lenient"):
        start = time.monotonic()
        MathVerifier(symbolic=False, extraction=extraction)(text, "7")
        assert time.monotonic() - start < 3.0  # linear scans: ~0.1 s each on an idle machine


def test_clip_ends_values_at_sentence_ends_not_decimals_or_factorials() -> None:
    for text, value in [("3.5. Next", "3.5"), ("4! = 24. Next", "4! = 24"), ("$a. b$ c. d", "$a. b$ c"),
                        ("\\$3.20, which is cheap", "\\$3.20"), ("12 because 3 x 4", "12")]:
        end, _ = clip(text, 0)
        assert text[:end] == value


def test_fullwidth_and_cjk_labels() -> None:
    assert extract_answer("Ａｎｓｗｅｒ：５") == "5"
    assert extract_answer("所以答案是 5。") == "5"
