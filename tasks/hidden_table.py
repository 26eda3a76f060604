"""HiddenTable-v0: the answer is in a table only a tool can read.

Each problem hides a small table of keys and numbers (``n_keys`` rows; the numbers are in ``[0, n_values)``)
and asks for the number of one key. The model reads the table only through the ``lookup(key)`` tool, in its
own tool-call format (``tool_format=``, default ``"hermes"``; ``"auto"`` reads it from the chat template), and
answers with the number alone in a message without a tool call. Reward 1.0 for the right number. A problem's
metadata holds ``key`` (the asked key, for prompt templates such as ``prompt_template="Key {key}."``), the
hidden ``table`` and the knobs.

**The tool-blind bound.** Problems come in blocks of ``n_values`` consecutive indices that share one prompt
(the same key is asked) while the asked key's number runs through a random permutation of ``[0, n_values)``:
whatever a policy that never calls the tool answers from the prompt, it is right on exactly one problem of
each block, so it succeeds at most ``1 / n_values`` of the time (10 % by default) over whole blocks, and in
expectation over uniformly drawn problems. A problem is a pure function of ``(seed, split, index)``; the
splits are disjoint random streams.

    gym.make("HiddenTable-v0", tool_format="llama3", n_values=20)
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
from dapo_env.tools import ToolUse, callable_text, tool
from dapo_env.types import InvalidReference, Problem, VerifyResult

PROMPT = ("Find the number stored under the key {key} in the hidden table. Call the lookup tool to read it, "
          "then reply with the number only.")
KEYS = ("apple", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris", "jade", "kite", "lemon",
        "maple", "north", "olive", "pearl", "quartz", "river", "stone", "tulip", "umber", "violet", "willow", "zinc")
_INTEGER = re.compile(r"[-+]?\d+")


def lookup(key: str, problem: Problem) -> str:
    """Read the number stored under a key in the hidden table.

    Args:
        key: the key to look up, exactly as the question writes it
    """
    table = problem.metadata["table"]
    return str(table[key]) if key in table else f"no key {key[:40]!r} in the table"


LOOKUP = tool(lookup)


@dataclass(frozen=True)
class NumberVerifier:
    """Correct when the last integer of the response (outside ``<think>`` blocks) is the reference number.

    Example:
        >>> NumberVerifier()("It is 7", "7"), NumberVerifier()("no idea", "7").reason
        (VerifyResult(correct=True, score=1.0, extracted='7', reason='correct'), 'no_answer')
    """

    def prepare_reference(self, reference: Any) -> int:
        try:
            if isinstance(reference, bool):
                raise ValueError
            return int(str(reference).strip())
        except ValueError:
            raise InvalidReference(f"a HiddenTable answer is an integer (or its string), got {reference!r}") from None

    def __call__(self, response: str, reference: Any) -> VerifyResult:
        gold = self.prepare_reference(reference)
        found = _INTEGER.findall(callable_text(response, fences=False)) if isinstance(response, str) else []
        if not found:
            return VerifyResult(False, 0.0, None, "no_answer")
        value = int(found[-1][:20])
        return VerifyResult(value == gold, float(value == gold), str(value), "correct" if value == gold else "wrong")


TABLE_TOOLS = ToolUse(tools=(LOOKUP,), default_format="hermes")


@dataclass(frozen=True, kw_only=True)
class HiddenTableConfig:
    """Knobs of HiddenTable.

    Attributes:
        n_values: the numbers are in ``[0, n_values)`` (>= 2); a tool-blind policy wins at most ``1 / n_values``.
        n_keys: rows per table (1 to 24): the asked key and ``n_keys - 1`` others.
        max_tool_calls: tool turns allowed before the answer (>= 1).
        tool_format: the call format (``"hermes"``, ``"llama3"``, ``"mistral"``, or ``"auto"``).
        size: the number of problems a split has.
        seed: the generator seed.

    Example:
        >>> HiddenTableConfig(tool_format="llama3").n_values
        10
    """

    n_values: int = 10
    n_keys: int = 4
    max_tool_calls: int = 2
    tool_format: str = "hermes"
    size: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low, high in (("n_values", 2, 10**6), ("n_keys", 1, len(KEYS)), ("max_tool_calls", 1, 10**6)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
        TABLE_TOOLS.check_format(self.tool_format)
        check_size_and_seed(self.size, self.seed)


class HiddenTableProblems(Sequence[Problem]):
    """``size`` problems of one split, each built on access from ``(seed, split, index)``."""

    def __init__(self, config: HiddenTableConfig, split: str) -> None:
        self.config, self.split = config, split

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
        c = self.config
        block, slot = divmod(index, c.n_values)
        shared = np.random.default_rng([c.seed, SPLITS.index(self.split), block])  # the block's prompt and answers
        keys = [str(k) for k in shared.choice(KEYS, size=c.n_keys, replace=False)]
        answer = int(shared.permutation(c.n_values)[slot])
        own = np.random.default_rng([c.seed, SPLITS.index(self.split), block, slot + 1])
        table = {key: int(v) for key, v in zip(keys[1:], own.integers(0, c.n_values, size=c.n_keys - 1))}
        table[keys[0]] = answer
        return Problem(id=f"{self.split}-{index}", question=PROMPT.format(key=keys[0]), answer=str(answer),
                       metadata={"key": keys[0], "table": table, "max_tool_calls": c.max_tool_calls,
                                 "tool_format": c.tool_format, "n_values": c.n_values})

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(len(self)))


@dataclass(frozen=True)
class HiddenTableSource:
    """``load(split, **knobs)`` with any :class:`HiddenTableConfig` field as a knob.

    Example:
        >>> problems = HiddenTableSource().load("test", size=20)
        >>> sorted(int(p.answer) for p in problems[:10]) == list(range(10)), problems[0].question == problems[9].question
        (True, True)
    """

    default: HiddenTableConfig = HiddenTableConfig()

    def load(self, split: str, data_files: DataFiles | None = None, **knobs: Any) -> HiddenTableProblems:
        config = configured(self.default, split, data_files, knobs, what="HiddenTable problems", hint="n_values=..., tool_format=..., size=...")
        return HiddenTableProblems(config, split)


HIDDEN_TABLE = Task(
    name="HiddenTable",
    source=HiddenTableSource(),
    verifier=NumberVerifier(),
    prompt_template="{question}",
    split="train",
    description="Multi-turn, procedural, tool use: read a hidden table with lookup(key), answer the number "
                "(knobs: n_values, n_keys, max_tool_calls, tool_format).",
    interaction=TABLE_TOOLS,
)
register_task(HIDDEN_TABLE)

__all__ = ["HIDDEN_TABLE", "HiddenTableConfig", "HiddenTableProblems", "HiddenTableSource", "KEYS", "LOOKUP",
           "NumberVerifier", "PROMPT", "TABLE_TOOLS", "lookup"]
