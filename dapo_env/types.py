"""Data types shared by every layer: verifiers, tasks, environments and learners.

Kept small and dependency-free (no torch, no gymnasium) so that any layer can import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length"]
_FINISH_REASONS = ("stop", "length")


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What a verifier says about one response.

    Attributes:
        correct: whether the response is right (all tests passed, for code).
        score: in [0, 1]; 1.0/0.0 for math, the fraction of tests passed for code.
        extracted: the final answer (or code) the verifier extracted, ``None`` if there was none.
        reason: a short machine-readable explanation, e.g. ``"equal:numeric"``, ``"no_answer"``,
            ``"timeout"``, ``"tests_failed:2/5"``.

    Example:
        >>> VerifyResult(True, 1.0, "42", "equal:string").correct
        True
    """

    correct: bool
    score: float
    extracted: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Completion:
    """One sampled response, as a rollout engine produced it.

    The environment layer needs only ``text``, ``num_tokens`` and ``finish_reason``; the learner also
    reads the token ids and per-token log-probabilities, so one object flows end to end.

    Attributes:
        text: the decoded response (without the prompt).
        num_tokens: response length in tokens; ``None`` when unknown (then length-aware wrappers
            fall back to ``len(token_ids)`` and otherwise ignore length).
        finish_reason: ``"stop"`` (an EOS or stop string ended it) or ``"length"`` (cut at the
            maximum number of new tokens). Truncation is read from here, never from the text.
        token_ids: the response's token ids, if the engine has them.
        logprobs: per-token log-probabilities of ``token_ids`` under the sampling policy.
        prompt_token_ids: the prompt's token ids, if the engine has them.
        policy_version: the engine's ``weights_version`` when it sampled this response (``None`` when
            unknown): the learner compares engine and learner log-probs only on samples of the current
            version, and an asynchronous learner bounds staleness with it.

    Example:
        >>> Completion("Answer: 4", num_tokens=3, finish_reason="stop").truncated
        False
    """

    text: str
    num_tokens: int | None = None
    finish_reason: FinishReason = "stop"
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    policy_version: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Completion.text must be a str, got {type(self.text).__name__}")
        if self.finish_reason not in _FINISH_REASONS:
            raise ValueError(
                f"Completion.finish_reason must be one of {_FINISH_REASONS}, got {self.finish_reason!r}"
            )
        if self.num_tokens is not None and self.num_tokens < 0:
            raise ValueError(f"Completion.num_tokens must be >= 0, got {self.num_tokens}")
        if (
            self.token_ids is not None
            and self.logprobs is not None
            and len(self.token_ids) != len(self.logprobs)
        ):
            raise ValueError(
                f"Completion has {len(self.token_ids)} token ids but {len(self.logprobs)} logprobs"
            )

    @property
    def truncated(self) -> bool:
        """True when the engine cut the response at its token limit."""
        return self.finish_reason == "length"

    @property
    def length(self) -> int | None:
        """Response length in tokens: ``num_tokens``, else ``len(token_ids)``, else ``None``."""
        if self.num_tokens is not None:
            return self.num_tokens
        return len(self.token_ids) if self.token_ids is not None else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (checkpoints hold the sampler's surplus groups this way).

        Example:
            >>> c = Completion("Answer: 4", num_tokens=2, token_ids=(7, 2), policy_version=3)
            >>> Completion.from_dict(c.to_dict()) == c
            True
        """
        def listed(values: tuple[Any, ...] | None) -> list[Any] | None:
            return None if values is None else list(values)

        return {"text": self.text, "num_tokens": self.num_tokens, "finish_reason": self.finish_reason,
                "token_ids": listed(self.token_ids), "logprobs": listed(self.logprobs),
                "prompt_token_ids": listed(self.prompt_token_ids), "policy_version": self.policy_version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Completion:
        """Inverse of :meth:`to_dict`."""
        def tupled(values: Any) -> tuple[Any, ...] | None:
            return None if values is None else tuple(values)

        return cls(data["text"], num_tokens=data.get("num_tokens"), finish_reason=data.get("finish_reason", "stop"),
                   token_ids=tupled(data.get("token_ids")), logprobs=tupled(data.get("logprobs")),
                   prompt_token_ids=tupled(data.get("prompt_token_ids")), policy_version=data.get("policy_version"))


def _frozen_mapping(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(data or {}))


@dataclass(frozen=True, slots=True)
class Problem:
    """One task instance.

    Attributes:
        id: stable identifier within its task (e.g. ``"17"`` or ``"2024-I-1"``).
        question: the problem text, before the task's prompt template is applied.
        answer: the reference the verifier checks against: a string for math,
            :class:`CodeTests` for code.
        metadata: anything else from the data row (level, subject, source, ...).
    """

    id: str
    question: str
    answer: Any
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_mapping(self.metadata))

    def __reduce__(self):  # MappingProxyType does not pickle; rebuild from a plain dict.
        return (Problem, (self.id, self.question, self.answer, dict(self.metadata)))


@dataclass(frozen=True, slots=True)
class CodeTests:
    """The reference for a code problem: what a candidate program must pass.

    Attributes:
        tests: Python snippets, each one test (typically one ``assert``); run after the candidate.
        stdio: ``(stdin, expected_stdout)`` pairs; the candidate runs as a script once per pair and
            its stdout is compared after stripping trailing whitespace on each line.
        setup: code run before the tests (imports, fixtures).
        prefix: code placed before the candidate when the candidate does not define
            ``entry_point`` itself (HumanEval's prompt holds the signature and imports).
        entry_point: the function the tests call, if any.
    """

    tests: tuple[str, ...] = ()
    stdio: tuple[tuple[str, str], ...] = ()
    setup: str = ""
    prefix: str = ""
    entry_point: str | None = None

    def __post_init__(self) -> None:
        if not self.tests and not self.stdio:
            raise ValueError("CodeTests needs at least one test: pass tests=(...) or stdio=(...)")

    @property
    def num_tests(self) -> int:
        return len(self.tests) + len(self.stdio)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (what a ``datasets.Dataset`` column or a JSON file can hold); every
        code verifier accepts it back as its reference.

        Example:
            >>> CodeTests(tests=("assert f() == 1",)).to_dict()["tests"]
            ['assert f() == 1']
        """
        return {"tests": list(self.tests), "stdio": [list(pair) for pair in self.stdio], "setup": self.setup,
                "prefix": self.prefix, "entry_point": self.entry_point}


class VerifierConfigError(Exception):
    """A verifier cannot run as configured (a reference of the wrong form, a sandbox this machine lacks).

    Unlike anything the model writes, this is the caller's to fix, so batched verification re-raises it
    instead of scoring every response 0.
    """


class InvalidReference(VerifierConfigError, TypeError, ValueError):
    """A verifier's reference (gold answer, tests) is of a form the verifier cannot use.

    Raised on the first call instead of scoring every response 0: it is a configuration error, not
    something the model did. The message names the accepted forms.
    """


@runtime_checkable
class Verifier(Protocol):
    """Anything that scores a response against a reference. Must be picklable and never raise on
    model output."""

    def __call__(self, response: str, reference: Any, /) -> VerifyResult: ...


@dataclass(frozen=True, slots=True)
class Group:
    """G responses to one prompt, verified: the unit every group-relative algorithm works on.

    The native output of :meth:`~dapo_env.vector.GroupVectorEnv.step_groups`; each fact is stored once
    (``correct`` and ``loss_mask`` here, not again in ``infos``).

    Attributes:
        problem_id: the problem's id within its task.
        prompt: the observation the policy saw (after any chat template).
        completions: the G responses, in sampling order (:class:`Completion`, or any completion-like
            sample with ``text``, ``length``, ``truncated`` and ``to_dict``, such as a multi-turn trajectory).
        rewards: the shaped reward of each response (verifier reward plus any shaping terms).
        correct: the verifier's verdict for each response (used by dynamic sampling).
        loss_mask: False for responses shaping excluded from the loss (overlong filtering).
        infos: the rest of each response's step info (``score``, ``reason``, ``extracted``,
            ``reward_terms``, ``response_length``, ...).

    Example:
        >>> g = Group("7", "1+1=", (Completion("2"), Completion("3")), (1.0, -1.0), (True, False), (True, True))
        >>> g.size, g.num_correct, g.informative
        (2, 1, True)
    """

    problem_id: str
    prompt: str
    completions: tuple[Completion, ...]
    rewards: tuple[float, ...]
    correct: tuple[bool, ...]
    loss_mask: tuple[bool, ...]
    infos: tuple[Mapping[str, Any], ...] = ()

    @property
    def size(self) -> int:
        return len(self.completions)

    @property
    def num_correct(self) -> int:
        return sum(self.correct)

    @property
    def informative(self) -> bool:
        """DAPO's dynamic-sampling rule: 0 < #correct < G (the group has a non-zero advantage)."""
        return 0 < self.num_correct < self.size


@dataclass(frozen=True, slots=True)
class RolloutBatch:
    """A batch of verified groups, ready for a learner, and how it was obtained.

    Attributes:
        groups: the groups, B of them when the sampler filled the batch (fewer when it gave up).
        stats: sampling statistics, e.g. ``rounds``, ``samples_generated``, ``accuracy_before_filter``,
            ``all_correct_share``, ``all_wrong_share``, ``partial`` (1.0 when the batch is short).
    """

    groups: tuple[Group, ...]
    stats: Mapping[str, float] = field(default_factory=dict)


__all__ = [
    "CodeTests",
    "Completion",
    "FinishReason",
    "Group",
    "InvalidReference",
    "VerifierConfigError",
    "Problem",
    "RolloutBatch",
    "VerifyResult",
    "Verifier",
]
