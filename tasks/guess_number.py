"""GuessNumber-v0: find a hidden integer in [1, n] from "higher"/"lower" replies, within k guesses.

A multi-turn procedural task: learning it *requires* reading the environment's replies. With
``k = n.bit_length()`` (the bisection bound, ``ceil(log2(n + 1))``; the defaults are n=16, k=5), bisection
finds every target, while a policy that ignores the replies guesses at most k distinct numbers whatever the
target, so it succeeds at most ``k / n`` of the time (5/16 = 31 % by default).

Each turn the verifier (:class:`GuessVerifier`) reads the guess and compares it with the target; the
interaction (:class:`GuessNumberGame`) answers ``"higher"``, ``"lower"`` or ``"correct"``. A turn with no
readable guess, or a guess outside [1, n], is a wasted guess whose reply says how to answer. Reward 1.0
on the solving turn, 0 otherwise, so the episode return is 1 for a solved game.

Problems are a pure function of ``(seed, split, index)``: the target is drawn uniformly from [1, n] by
``numpy.random.default_rng([seed, split, index])``. A game has only n possible hidden targets and the
prompt must not reveal them, so the splits cannot be disjoint by question text as the other procedural
tasks are (every prompt is the same, and restricting a split to some targets would let a reply-ignoring
policy that memorised them beat k/n). They are disjoint random streams instead: each split's episodes
come from its own stream, with the same uniform target distribution, so the k/n bound holds on every
split and a held-out evaluation measures the strategy, not memorised targets.

    gym.make("GuessNumber-v0", n=100, k=7)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from .base import DataFiles, Task
from .procedural import SPLITS, check_size_and_seed, configured
from .registry import register_task
from dapo_env.types import Completion, History, InvalidReference, Problem, Turn, VerifyResult

PROMPT = (
    "I am thinking of an integer from 1 to {n}. Find it in at most {k} guesses. After each guess I answer "
    '"higher" (my number is larger), "lower" (it is smaller) or "correct". '
    'Give one guess per turn as "Answer: <integer>".'
)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_ANSWER = re.compile(r"answer\s*\**\s*[:：]\s*\**\s*(" + _NUMBER + r")", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*(" + _NUMBER + r")\s*\}")
_GUESS = re.compile(r"\bguess(?:ing)?\b[^\d\n]{0,15}?(" + _NUMBER + r")", re.IGNORECASE)
_ANY = re.compile(_NUMBER)


def parse_guess(text: str) -> int | None:
    """The integer a turn guesses: the number after the last ``Answer:``, else in the last ``\\boxed{}``,
    else after the last "guess" (``I guess 7 of 16``, ``my guess is 7``), else the last number in the text
    (``<think>`` blocks ignored); ``None`` when there is none or it is not a whole number.

    Example:
        >>> parse_guess("Answer: 7"), parse_guess("7"), parse_guess("I guess 7."), parse_guess("**Answer:** 07")
        (7, 7, 7, 7)
        >>> parse_guess("between 1 and 16, so Answer: 8"), parse_guess("I guess 7 out of 16"), parse_guess("7.5")
        (8, 7, None)
    """
    text = _THINK.sub(" ", text)
    for pattern in (_ANSWER, _BOXED, _GUESS, _ANY):
        found = pattern.findall(text)
        if found:
            value = float(found[-1]) if "." in found[-1] else int(found[-1])
            return int(value) if float(value).is_integer() else None
    return None


@dataclass(frozen=True)
class GuessVerifier:
    """Compares a turn's guess with the hidden target.

    ``verifier(response, target) -> VerifyResult``: ``correct`` when the guess is the target; ``reason`` is
    ``"correct"``, ``"higher"`` (the target is larger than the guess), ``"lower"`` or ``"no_guess"``;
    ``extracted`` is the guess. The target is an int or a string of one.

    Example:
        >>> GuessVerifier()("I guess 5", "9")
        VerifyResult(correct=False, score=0.0, extracted='5', reason='higher')
    """

    def prepare_reference(self, reference: Any) -> int:
        if isinstance(reference, bool):
            raise InvalidReference(f"a GuessNumber target is an integer (or its string), got {reference!r}")
        try:
            return int(str(reference).strip())
        except ValueError:
            raise InvalidReference(f"a GuessNumber target is an integer (or its string), got {reference!r}") from None

    def __call__(self, response: str, reference: Any) -> VerifyResult:
        target = self.prepare_reference(reference)
        guess = parse_guess(response) if isinstance(response, str) else None
        if guess is None:
            return VerifyResult(False, 0.0, None, "no_guess")
        if guess == target:
            return VerifyResult(True, 1.0, str(guess), "correct")
        return VerifyResult(False, 0.0, str(guess), "higher" if guess < target else "lower")


@dataclass(frozen=True)
class GuessNumberGame:
    """The interaction: reply ``"higher"``/``"lower"``/``"correct"``; end when solved or out of guesses.

    A turn without a readable guess or with a guess outside [1, n] is wasted; its reply says how to answer.

    Example:
        >>> problem = Problem("0", "...", "9", {"n": 16, "k": 5})
        >>> history = History(problem, ({"role": "user", "content": "..."},))
        >>> game, check = GuessNumberGame(), GuessVerifier()
        >>> game.respond(history, Completion("Answer: 5"), check("Answer: 5", "9")).reply
        'higher'
        >>> game.respond(history, Completion("Answer: 9"), check("Answer: 9", "9")).solved
        True
    """

    def respond(self, history: History, action: Completion, verdict: VerifyResult) -> Turn:
        n, k = int(history.problem.metadata["n"]), int(history.problem.metadata["k"])
        left = k - (history.turn + 1)
        guess = None if verdict.extracted is None else int(verdict.extracted)
        info = {"guess": guess, "guesses_left": left}
        if verdict.correct:
            return Turn("correct", 1.0, done=True, solved=True, info=info)
        if guess is None:
            reply = f'no guess found: answer with "Answer: <integer>", an integer from 1 to {n}'
        elif not 1 <= guess <= n:
            reply = f"{guess} is out of range: guess an integer from 1 to {n}"
        else:
            reply = verdict.reason  # "higher" or "lower"
        return Turn(reply, 0.0, done=left <= 0, info=info)


@dataclass(frozen=True, kw_only=True)
class GuessNumberConfig:
    """Knobs of GuessNumber.

    Attributes:
        n: the target is an integer in [1, n] (n >= 2).
        k: guesses allowed per game (>= 1); ``n.bit_length()`` is the fewest that let bisection always win.
        size: the number of problems a split has (what ``len()`` reports).
        seed: the generator seed; the split is mixed in, so splits never share a stream.

    Example:
        >>> GuessNumberConfig().k == GuessNumberConfig().n.bit_length()
        True
    """

    n: int = 16
    k: int = 5
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 2:
            raise ValueError(f"n must be an integer >= 2 (targets are drawn from [1, n]), got {self.n!r}")
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ValueError(f"k must be an integer >= 1 (guesses per game; bisection needs {self.n.bit_length()}), "
                             f"got {self.k!r}")
        check_size_and_seed(self.size, self.seed)


class GuessNumberProblems(Sequence[Problem]):
    """``size`` games of one split, each built on access from ``(seed, split, index)``."""

    def __init__(self, config: GuessNumberConfig, split: str) -> None:
        self.config, self.split = config, split
        self._question = PROMPT.format(n=config.n, k=config.k)

    def __len__(self) -> int:
        return self.config.size

    @overload
    def __getitem__(self, index: int) -> Problem: ...
    @overload
    def __getitem__(self, index: slice) -> list[Problem]: ...
    def __getitem__(self, index: int | slice) -> Problem | list[Problem]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"problem index must be an int, got {type(index).__name__}")
        index = int(index) + (len(self) if index < 0 else 0)
        if not 0 <= index < len(self):
            raise IndexError(f"problem index {index} out of range for {len(self)} problems")
        rng = np.random.default_rng([self.config.seed, SPLITS.index(self.split), index])
        target = int(rng.integers(1, self.config.n + 1))
        return Problem(id=f"{self.split}-{index}", question=self._question, answer=str(target),
                       metadata={"n": self.config.n, "k": self.config.k})

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(len(self)))


@dataclass(frozen=True)
class GuessNumberSource:
    """The :class:`~dapo_env.tasks.base.ProblemSource` of GuessNumber: ``load(split, **knobs)`` with any
    :class:`GuessNumberConfig` field as a knob.

    Example:
        >>> games = GuessNumberSource().load("test", n=100, k=7, size=3)
        >>> len(games), games[0].id, games[0].metadata["n"], 1 <= int(games[0].answer) <= 100
        (3, 'test-0', 100, True)
    """

    default: GuessNumberConfig = GuessNumberConfig()

    def load(self, split: str, data_files: DataFiles | None = None, **knobs: Any) -> GuessNumberProblems:
        config = configured(self.default, split, data_files, knobs, what="GuessNumber games", hint="n=..., k=..., size=..., seed=...")
        return GuessNumberProblems(config, split)


GUESS_NUMBER = Task(
    name="GuessNumber",
    source=GuessNumberSource(),
    verifier=GuessVerifier(),
    prompt_template="{question}",
    split="train",
    version=0,
    description="Multi-turn, procedural: find a hidden integer in [1, n] from higher/lower replies in k guesses "
                "(knobs: n, k).",
    interaction=GuessNumberGame(),
)
register_task(GUESS_NUMBER)

__all__ = ["GUESS_NUMBER", "GuessNumberConfig", "GuessNumberGame", "GuessNumberProblems", "GuessNumberSource",
           "GuessVerifier", "PROMPT", "parse_guess"]
