"""GuessNumber-v0's parts: guess parsing, the verifier, the game's replies, knobs, splits and registration."""

from __future__ import annotations

import doctest

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dapo_env  # noqa: F401  (registers the ids)
from dapo_env.tasks import TaskDataError, get_task, list_tasks
from dapo_env.tasks import guess_number
from dapo_env.tasks.guess_number import GuessNumberConfig, GuessNumberGame, GuessVerifier, parse_guess
from dapo_env.types import Completion, History, InvalidReference, Problem, VerifyResult


def test_the_module_docstrings_run() -> None:
    assert doctest.testmod(guess_number, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.parametrize("text,guess", [
    ("Answer: 7", 7), ("7", 7), ("I guess 7", 7), ("I guess 7.", 7), ("answer:7", 7), ("ANSWER : 12", 12),
    ("**Answer:** 9", 9), ("Answer: 07", 7), ("Answer: 8.0", 8), ("The middle of 1 and 16 is 8. Answer: 8", 8),
    ("Answer: 3\nwait, Answer: 5", 5), ("\\boxed{11}", 11), ("so \\boxed{ 4 } it is", 4),
    ("<think>maybe 3 or 4</think>I'll say 10", 10), ("<think>Answer: 2</think>", None), ("Answer: -3", -3),
    ("Answer: 7.5", None), ("no idea", None), ("", None), ("Answer: twelve, or 12", 12),
    ("I guess 7 out of 16", 7), ("My guess is 11; 5 guesses left", 11), ("Guessing: 3", 3), ("I'd guess it's 9", 9),
])
def test_parse_guess(text: str, guess: int | None) -> None:
    assert parse_guess(text) == guess


@given(st.integers(-10**6, 10**6), st.text(alphabet=st.characters(blacklist_categories=("Nd",),
                                                                  blacklist_characters="+-.:"), max_size=30))
def test_parse_guess_finds_the_answer_line_whatever_surrounds_it(value: int, noise: str) -> None:
    assert parse_guess(f"{noise}\nAnswer: {value}") == value
    assert parse_guess(f"{noise} {value}") == value


def test_verifier_reasons_and_references() -> None:
    check = GuessVerifier()
    assert check("Answer: 9", "9").correct and check("Answer: 9", 9).reason == "correct"
    assert check("Answer: 3", "9").reason == "higher" and check("Answer: 12", "9").reason == "lower"
    assert check("pass", "9") == VerifyResult(False, 0.0, None, "no_guess")
    assert check("Answer: 3", "9").extracted == "3"
    for bad in ("seven", None, True, [9]):
        with pytest.raises(InvalidReference, match="GuessNumber target"):
            check("Answer: 3", bad)


def _respond(target: int, text: str, turn: int = 0, n: int = 16, k: int = 5):
    problem = Problem("0", "q", str(target), {"n": n, "k": k})
    messages = [{"role": "user", "content": "q"}]
    for _ in range(turn):
        messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "higher"}]
    return GuessNumberGame().respond(History(problem, tuple(messages)), Completion(text), GuessVerifier()(text, str(target)))


def test_game_replies() -> None:
    assert _respond(9, "Answer: 4").reply == "higher" and _respond(9, "Answer: 14").reply == "lower"
    win = _respond(9, "Answer: 9", turn=2)
    assert (win.reply, win.reward, win.done, win.solved, win.info["guesses_left"]) == ("correct", 1.0, True, True, 2)
    assert _respond(9, "Answer: 40").reply == "40 is out of range: guess an integer from 1 to 16"
    assert _respond(9, "Answer: 0").reply.startswith("0 is out of range")
    assert "Answer: <integer>" in _respond(9, "what?").reply
    last = _respond(9, "Answer: 4", turn=4)
    assert last.done and not last.solved and last.reward == 0.0 and last.info["guesses_left"] == 0
    assert not _respond(9, "Answer: 4", turn=3).done


def test_config_validation_names_the_fix() -> None:
    assert GuessNumberConfig().n == 16 and GuessNumberConfig().k == 5
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        GuessNumberConfig(n=1)
    with pytest.raises(ValueError, match="bisection needs 7"):
        GuessNumberConfig(n=100, k=0)
    with pytest.raises(ValueError, match="size"):
        GuessNumberConfig(size=0)
    task = get_task("GuessNumber-v0")
    with pytest.raises(TypeError, match="valid options"):
        task.load(N=16)
    with pytest.raises(TaskDataError, match="drop data_files"):
        task.load(data_files="x.jsonl")
    with pytest.raises(ValueError, match="unknown split"):
        task.load(split="dev")


def test_problems_are_pure_functions_of_seed_split_and_index() -> None:
    task = get_task("GuessNumber-v0")
    a, b = task.load(size=50), task.load(size=50)
    assert list(a) == list(b) and a[3] == a[-47] and a[10:12] == [a[10], a[11]]
    assert [p.answer for p in task.load(size=50, seed=1)] != [p.answer for p in a]
    with pytest.raises(IndexError):
        a[50]
    with pytest.raises(TypeError):
        a["1"]  # type: ignore[index]
    prompt = task.format_prompt(a[0])
    assert "from 1 to 16" in prompt and "at most 5 guesses" in prompt and "Answer: <integer>" in prompt
    assert task.format_prompt(task.load(n=100, k=7, size=1)[0]).startswith("I am thinking of an integer from 1 to 100.")


def test_splits_are_disjoint_streams_with_uniform_targets() -> None:
    task = get_task("GuessNumber-v0")
    size = 16_000
    counts = {}
    streams = {}
    for split in ("train", "validation", "test"):
        problems = task.load(split=split, size=size)
        targets = np.array([int(p.answer) for p in problems])
        streams[split] = tuple(targets[:64])
        counts[split] = np.bincount(targets, minlength=17)[1:]
        assert {p.id.split("-")[0] for p in problems[:5]} == {split}
    assert len(set(streams.values())) == 3  # no split replays another's stream
    for split, count in counts.items():
        expected = size / 16
        chi2 = float(((count - expected) ** 2 / expected).sum())
        assert chi2 < 37.7, (split, count)  # 15 degrees of freedom, p = 0.001


def test_registration_and_listing() -> None:
    task = get_task("GuessNumber")
    assert task.turns == "multi-turn" and task.env_id == "GuessNumber-v0" and "higher/lower" in task.description
    assert "GuessNumber-v0" in list_tasks("multi-turn")
    env = gym.make("GuessNumber-v0", n=32, k=6, size=5)
    assert len(env.unwrapped.problems) == 5 and env.unwrapped.problems[0].metadata == {"n": 32, "k": 6}
