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
        weights_version: the engine's ``weights_version`` when it sampled this response (``None`` when
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
    weights_version: int | None = None

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
    def sampled_mask(self) -> None:
        """``None``: every token of a single response was sampled by the model (the :class:`TrainSample`
        protocol's reading; a :class:`Trajectory` marks the environment's tokens 0)."""
        return None

    @property
    def length(self) -> int | None:
        """Response length in tokens: ``num_tokens``, else ``len(token_ids)``, else ``None``."""
        if self.num_tokens is not None:
            return self.num_tokens
        return len(self.token_ids) if self.token_ids is not None else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (checkpoints hold the sampler's surplus groups this way).

        Example:
            >>> c = Completion("Answer: 4", num_tokens=2, token_ids=(7, 2), weights_version=3)
            >>> Completion.from_dict(c.to_dict()) == c
            True
        """
        def listed(values: tuple[Any, ...] | None) -> list[Any] | None:
            return None if values is None else list(values)

        return {"text": self.text, "num_tokens": self.num_tokens, "finish_reason": self.finish_reason,
                "token_ids": listed(self.token_ids), "logprobs": listed(self.logprobs),
                "prompt_token_ids": listed(self.prompt_token_ids), "weights_version": self.weights_version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Completion:
        """Inverse of :meth:`to_dict`."""
        def tupled(values: Any) -> tuple[Any, ...] | None:
            return None if values is None else tuple(values)

        return cls(data["text"], num_tokens=data.get("num_tokens"), finish_reason=data.get("finish_reason", "stop"),
                   token_ids=tupled(data.get("token_ids")), logprobs=tupled(data.get("logprobs")),
                   prompt_token_ids=tupled(data.get("prompt_token_ids")),
                   weights_version=data.get("weights_version", data.get("policy_version")))  # the older key


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
        policy_step: the training step whose weights generated the group (a learner's source stamps it;
            ``None`` when unknown, e.g. straight from an env).

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
    policy_step: int | None = None

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



@runtime_checkable
class TrainSample(Protocol):
    """What a learner reads from a sample, :class:`Completion` and :class:`Trajectory` alike.

    Attributes:
        prompt_token_ids, token_ids: the prompt's and the sample's token ids (``None`` when unknown).
        logprobs: the engine's log-prob per token of ``token_ids`` (``None`` when not reported).
        sampled_mask: per token of ``token_ids``, 1 sampled by the model and 0 inserted by the environment;
            ``None`` means all sampled.
        weights_version: the engine's weights version that sampled it (``None`` when unknown).
    """

    @property
    def prompt_token_ids(self) -> tuple[int, ...] | None: ...

    @property
    def token_ids(self) -> tuple[int, ...] | None: ...

    @property
    def logprobs(self) -> tuple[float, ...] | None: ...

    @property
    def sampled_mask(self) -> tuple[int, ...] | None: ...

    @property
    def weights_version(self) -> int | None: ...


__all__ = [
    "CodeTests",
    "Completion",
    "FinishReason",
    "Group",
    "InvalidReference",
    "VerifierConfigError",
    "Problem",
    "RolloutBatch",
    "TOOL_STATUSES",
    "TrainSample",
    "ToolCall",
    "ToolStatus",
    "VerifyResult",
    "Verifier",
]


# -- multi-turn episodes ---------------------------------------------------------------------------
# A multi-turn task answers each assistant turn with a `Turn` (computed by its `Interaction` from the
# `History` so far); the environment records the episode as a `Trajectory`: the exact token sequence the
# model conditioned on, with a mask marking the tokens it sampled. See docs/environments.md.


TOOL_STATUSES = ("ok", "invalid_json", "unknown_tool", "bad_arguments", "tool_error")
ToolStatus = Literal["ok", "invalid_json", "unknown_tool", "bad_arguments", "tool_error"]

@dataclass(frozen=True, slots=True)
class ToolCall:
    """One attempted tool call and what became of it.

    Attributes:
        name: the tool's name as written (``None`` when it could not be read).
        arguments: the arguments as parsed (``None`` when they could not be read).
        status: one of :data:`TOOL_STATUSES` (a parser leaves ``ok`` or ``invalid_json``; :func:`call_tools`
            settles the rest).
        error: what was wrong, in words the model can act on (``None`` when ``ok``).
        result: the tool's output (``None`` until run, or when it failed).
        id: the call's id where the format or the server gives one.

    Example:
        >>> ToolCall("lookup", {"key": "a"}).to_dict()["status"]
        'ok'
    """

    name: str | None
    arguments: dict[str, Any] | None
    status: ToolStatus = "ok"
    error: str | None = None
    result: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if self.status not in TOOL_STATUSES:
            raise ValueError(f"ToolCall.status must be one of {TOOL_STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (what ``info["tool_calls"]`` holds)."""
        return {"name": self.name, "arguments": self.arguments, "status": self.status, "error": self.error,
                "result": self.result, "id": self.id}

    @property
    def message(self) -> str:
        """The tool message that answers this call: the result, or what was wrong."""
        if self.status == "ok":
            return self.result or ""
        return f"Error ({self.status}): {self.error}"


@dataclass(frozen=True, slots=True)
class Turn:
    """The environment's answer to one assistant turn: what :meth:`Interaction.respond` returns.

    Attributes:
        reply: the environment's message to the model (a game's answer, test feedback, tool output): the
            next observation. May be ``""`` when ``done``.
        reward: this turn's reward; the episode return is the sum over its turns.
        done: the episode is over (solved, a final answer was committed, or out of attempts); Gymnasium's
            ``terminated``.
        solved: the task was solved by this turn; the episode then counts as correct.
        role: the chat role the reply is rendered with: ``"user"``, or ``"tool"`` (or another role the chat
            template knows) for tool output; never ``"assistant"``.
        terms: optional named parts of ``reward`` (e.g. ``{"pass": 1.0, "attempt_penalty": -0.2}``) that
            sum to it; without them the turn's one term is ``{"env": reward}``.
        info: anything else the step info should report (plain values).
        tool_calls: the calls the turn answered, typed, each with its status (a tool task's interaction fills
            it; the step info reports them as dicts). With ``role="tool"`` each call's message is one reply.

    Example:
        >>> Turn("lower", 0.0).reward_terms
        {'env': 0.0}
        >>> Turn("", 0.8, done=True, solved=True, terms={"pass": 1.0, "attempts": -0.2}).reward_terms["pass"]
        1.0
    """

    reply: str
    reward: float = 0.0
    done: bool = False
    solved: bool = False
    role: str = "user"
    terms: Mapping[str, float] | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.reply, str):
            raise TypeError(f"Turn.reply must be a str (the environment's message), got {type(self.reply).__name__}")
        if isinstance(self.reward, bool) or not isinstance(self.reward, (int, float)) or self.reward != self.reward:
            raise TypeError(f"Turn.reward must be a finite number, got {self.reward!r}")
        object.__setattr__(self, "reward", float(self.reward))
        if not isinstance(self.role, str) or not self.role or self.role == "assistant":
            raise ValueError(f"Turn.role is the environment's chat role ('user', 'tool', ...), got {self.role!r}")
        if self.terms is not None:
            terms = {str(k): float(v) for k, v in self.terms.items()}
            if abs(sum(terms.values()) - self.reward) > 1e-9 * max(1.0, abs(self.reward)):
                raise ValueError(f"Turn.terms {terms} must sum to reward={self.reward}: fix the terms or the reward")
            object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "info", dict(self.info))
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not all(isinstance(c, ToolCall) for c in self.tool_calls):
            raise TypeError("Turn.tool_calls must hold dapo_env.types.ToolCall objects")

    @property
    def reward_terms(self) -> dict[str, float]:
        """The named parts of the reward: ``terms``, else ``{"env": reward}``."""
        return dict(self.terms) if self.terms is not None else {"env": self.reward}


@dataclass(frozen=True, slots=True)
class History:
    """What an :class:`Interaction` sees when the assistant takes a turn.

    Attributes:
        problem: the episode's problem, hidden answer included (the environment side only: never shown
            to the model).
        messages: the conversation so far as chat messages: the user prompt first, then the assistant's
            turns and the environment's replies alternating (no system message, not the current turn).
        verdicts: the verifier's verdict on each earlier assistant turn.

    Example:
        >>> h = History(Problem("0", "Guess.", "7"), ({"role": "user", "content": "Guess."},
        ...             {"role": "assistant", "content": "Answer: 4"}, {"role": "user", "content": "higher"}))
        >>> h.turn, h.actions, h.prompt
        (1, ('Answer: 4',), 'Guess.')
    """

    problem: Problem
    messages: tuple[Mapping[str, str], ...]
    verdicts: tuple[VerifyResult, ...] = ()

    @property
    def turn(self) -> int:
        """The index of the current turn: the number of assistant turns before it."""
        return sum(1 for m in self.messages if m["role"] == "assistant")

    @property
    def prompt(self) -> str:
        """The first observation (the task's formatted prompt)."""
        return self.messages[0]["content"]

    @property
    def actions(self) -> tuple[str, ...]:
        """The assistant's earlier turns, oldest first."""
        return tuple(m["content"] for m in self.messages if m["role"] == "assistant")


@runtime_checkable
class Interaction(Protocol):
    """The one method a multi-turn task implements: answer the assistant's turn.

    ``respond(history, action, verdict) -> Turn``: ``history`` is the problem and the conversation before
    this turn, ``action`` the assistant's turn (its ``text`` is what to read), ``verdict`` the task
    verifier's result on ``action.text`` against ``problem.answer`` (the environment computes it, in a
    worker pool for batches). It must be deterministic and must not put the answer in a reply.
    """

    def respond(self, history: History, action: Completion, verdict: VerifyResult) -> Turn: ...


@dataclass(frozen=True, slots=True)
class TrajectoryTurn:
    """One assistant turn of a :class:`Trajectory` and what the environment answered.

    Attributes:
        text: what the model wrote (the text the verifier read).
        num_tokens: tokens the model sampled in this turn; ``None`` when unknown (plain-text actions
            without a tokenizer).
        finish_reason: how the engine ended this turn (``"length"``: cut at its token limit).
        reply: the environment's reply (message content), ``""`` when it had none.
        reward: the turn's reward.
        reply_text: the text appended after this turn for the model to read before its next turn (the
            chat template's rendering of ``reply``; ``"\\n" + reply + "\\n"`` without a tokenizer); ``""``
            after the last turn.
        num_reply_tokens: how many environment tokens were appended after this turn (0 without a tokenizer).
        weights_version: the engine's weights version that sampled the turn, if it said.
    """

    text: str
    num_tokens: int | None = None
    finish_reason: FinishReason = "stop"
    reply: str = ""
    reward: float = 0.0
    reply_text: str = ""
    num_reply_tokens: int = 0
    weights_version: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not isinstance(self.reply, str) or not isinstance(self.reply_text, str):
            raise TypeError("TrajectoryTurn.text, reply and reply_text must be str")
        if self.finish_reason not in _FINISH_REASONS:
            raise ValueError(f"TrajectoryTurn.finish_reason must be one of {_FINISH_REASONS}, got {self.finish_reason!r}")
        if (self.num_tokens is not None and self.num_tokens < 0) or self.num_reply_tokens < 0:
            raise ValueError("TrajectoryTurn token counts must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (``TrajectoryTurn(**d)`` reads it back)."""
        return {"text": self.text, "num_tokens": self.num_tokens, "finish_reason": self.finish_reason,
                "reply": self.reply, "reward": self.reward, "reply_text": self.reply_text,
                "num_reply_tokens": self.num_reply_tokens, "weights_version": self.weights_version}


def _renamed(turn: Mapping[str, Any]) -> dict[str, Any]:
    """A saved turn's fields under today's names (``policy_version`` was the older name of ``weights_version``)."""
    out = dict(turn)
    if "policy_version" in out:
        out["weights_version"] = out.pop("policy_version")
    return out


def _ints(values: Any) -> tuple[int, ...] | None:
    """A tuple of plain ints (numpy / torch integers converted), or ``None``."""
    return None if values is None else tuple(int(v) for v in values)


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A whole multi-turn episode as one sample: the exact tokens the model conditioned on.

    ``prompt_token_ids`` then ``token_ids``: per turn the tokens the model sampled (``sampled_mask`` 1,
    the engine's ``logprobs``) followed by the tokens of the environment's reply (mask 0, log-prob 0.0),
    appended incrementally and never re-tokenized. It reads like a :class:`Completion` (``text``,
    ``num_tokens``/``length`` = sampled tokens, ``finish_reason``, ``truncated``, ``token_ids``,
    ``logprobs``, ``prompt_token_ids``) so the env layer's helpers and the learner take either.

    Attributes:
        prompt: the first observation as the model saw it (chat-rendered when a tokenizer was bound).
        turns: the assistant's turns and the replies, in order (at least one).
        finish_reason: ``"length"`` when the episode was truncated (turn or token budget) or its last turn
            was cut at the engine's token limit, else ``"stop"``.
        prompt_token_ids: the prompt's tokens (``None`` without a tokenizer; then the token fields are all
            ``None``).
        token_ids: every token after the prompt: sampled and environment tokens.
        logprobs: aligned with ``token_ids``: the engine's log-probs of sampled tokens, 0.0 for environment
            tokens; ``None`` when a turn came without log-probs.
        sampled_mask: aligned with ``token_ids``: 1 for a sampled token, 0 for an environment token.

    Example:
        >>> t = Trajectory("Guess:", (TrajectoryTurn("8", 2, reply="higher", reply_text=" higher ", num_reply_tokens=1),
        ...                            TrajectoryTurn("12", 2, reply="correct", reward=1.0)),
        ...                prompt_token_ids=(1, 2), token_ids=(5, 9, 7, 6, 9), logprobs=(-0.5, -0.1, 0.0, -0.2, -0.3),
        ...                sampled_mask=(1, 1, 0, 1, 1))
        >>> t.num_tokens, t.num_turns, t.text, t.context(1), t.episode_return
        (4, 2, '8 higher 12', (1, 2, 5, 9, 7), 1.0)
        >>> Trajectory.from_dict(t.to_dict()) == t
        True
    """

    prompt: str
    turns: tuple[TrajectoryTurn, ...]
    finish_reason: FinishReason = "stop"
    prompt_token_ids: tuple[int, ...] | None = None
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    sampled_mask: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "turns", tuple(self.turns))
        if not self.turns or not all(isinstance(t, TrajectoryTurn) for t in self.turns):
            raise ValueError("Trajectory.turns must hold at least one TrajectoryTurn")
        if self.finish_reason not in _FINISH_REASONS:
            raise ValueError(f"Trajectory.finish_reason must be one of {_FINISH_REASONS}, got {self.finish_reason!r}")
        for name in ("prompt_token_ids", "token_ids", "sampled_mask"):
            object.__setattr__(self, name, _ints(getattr(self, name)))
        if self.logprobs is not None:
            object.__setattr__(self, "logprobs", tuple(float(v) for v in self.logprobs))
        if self.token_ids is None:
            if self.prompt_token_ids is not None or self.sampled_mask is not None or self.logprobs is not None:
                raise ValueError("a Trajectory without token_ids has no prompt_token_ids, sampled_mask or logprobs")
            return
        self._check_tokens()

    def _check_tokens(self) -> None:
        n = len(self.token_ids)  # type: ignore[arg-type]
        if self.prompt_token_ids is None or self.sampled_mask is None:
            raise ValueError("a Trajectory with token_ids also needs prompt_token_ids and sampled_mask")
        if len(self.sampled_mask) != n or (self.logprobs is not None and len(self.logprobs) != n):
            raise ValueError(
                f"Trajectory has {n} token_ids, {len(self.sampled_mask)} sampled_mask entries and "
                f"{None if self.logprobs is None else len(self.logprobs)} logprobs: they must be aligned")
        if any(m not in (0, 1) for m in self.sampled_mask):
            raise ValueError("Trajectory.sampled_mask holds 1 (sampled token) or 0 (environment token) only")
        if any(t.num_tokens is None for t in self.turns):
            raise ValueError("every turn of a tokenized Trajectory needs num_tokens")
        sampled = sum(t.num_tokens for t in self.turns)  # type: ignore[misc]
        total = sampled + sum(t.num_reply_tokens for t in self.turns)
        if sum(self.sampled_mask) != sampled or total != n:
            raise ValueError(
                f"Trajectory turns account for {sampled} sampled + {total - sampled} environment tokens, but "
                f"token_ids has {n} with {sum(self.sampled_mask)} marked sampled")

    @property
    def text(self) -> str:
        """Everything after the prompt as text: each turn's text, then the reply text appended after it."""
        return "".join(t.text + t.reply_text for t in self.turns)

    @property
    def num_tokens(self) -> int | None:
        """Tokens the model sampled over the episode (env tokens excluded); ``None`` when unknown."""
        counts = [t.num_tokens for t in self.turns]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]

    @property
    def length(self) -> int | None:
        """Same as :attr:`num_tokens` (the name :class:`Completion` uses for its length)."""
        return self.num_tokens

    @property
    def truncated(self) -> bool:
        """True when a budget cut the episode or its last turn was cut at the engine's token limit."""
        return self.finish_reason == "length"

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def episode_return(self) -> float:
        """The sum of the turns' rewards (before any shaping of the episode as a whole)."""
        return float(sum(t.reward for t in self.turns))

    @property
    def weights_version(self) -> int | None:
        """The oldest weights version that sampled a turn; ``None`` when any turn's is unknown."""
        versions = [t.weights_version for t in self.turns]
        return None if any(v is None for v in versions) else min(versions)  # type: ignore[type-var]

    def context(self, turn: int) -> tuple[int, ...]:
        """The exact tokens the model conditioned on when it sampled turn ``turn`` (0-based)."""
        if self.token_ids is None or self.prompt_token_ids is None:
            raise ValueError("this Trajectory has no token ids: bind a tokenizer to the environment to record them")
        if not 0 <= turn < len(self.turns):
            raise IndexError(f"turn must be in [0, {len(self.turns)}), got {turn}")
        start = sum(t.num_tokens + t.num_reply_tokens for t in self.turns[:turn])  # type: ignore[operator]
        return self.prompt_token_ids + self.token_ids[:start]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (for checkpoints); :meth:`from_dict` reads it back."""
        def lst(x: tuple | None) -> list | None:
            return None if x is None else list(x)

        return {"kind": "trajectory", "prompt": self.prompt, "turns": [t.to_dict() for t in self.turns],
                "finish_reason": self.finish_reason, "prompt_token_ids": lst(self.prompt_token_ids),
                "token_ids": lst(self.token_ids), "logprobs": lst(self.logprobs),
                "sampled_mask": lst(self.sampled_mask)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trajectory:
        """Inverse of :meth:`to_dict`."""
        if data.get("kind", "trajectory") != "trajectory":
            raise ValueError(f"not a Trajectory dict (kind={data.get('kind')!r})")
        return cls(
            prompt=data["prompt"], turns=tuple(TrajectoryTurn(**_renamed(t)) for t in data["turns"]),
            finish_reason=data["finish_reason"], prompt_token_ids=data["prompt_token_ids"],
            token_ids=data["token_ids"], logprobs=data["logprobs"], sampled_mask=data["sampled_mask"])


__all__ += ["History", "Interaction", "Trajectory", "TrajectoryTurn", "Turn"]


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about one tool: its name, what it does, and its parameters' JSON schema.

    The one tool-spec type of every layer: tasks declare their tools with it (usually derived from a typed
    function by :func:`dapo_env.tools.tool`), chat templates receive :meth:`to_openai` through
    ``apply_chat_template(..., tools=[...])``, argument validation reads ``parameters``, and the TRL adapter
    builds its tool methods from it.

    Attributes:
        name: the tool's name (a Python identifier, not starting with ``_``).
        description: what the tool does, in the words the model reads.
        parameters: a JSON schema of ``type: "object"`` with ``properties`` and ``required`` (copied, so a
            spec never changes after it is built).

    Example:
        >>> spec = ToolSpec("lookup", "Look a key up.", {"type": "object", "properties": {"key": {"type": "string"}},
        ...                                               "required": ["key"]})
        >>> spec.to_openai()["function"]["name"], spec.required
        ('lookup', ('key',))
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def __post_init__(self) -> None:
        import json

        if not isinstance(self.name, str) or not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"ToolSpec.name must be a Python identifier not starting with '_', got {self.name!r}")
        if not isinstance(self.description, str):
            raise TypeError(f"ToolSpec.description must be a str, got {type(self.description).__name__}")
        try:
            parameters = json.loads(json.dumps(dict(self.parameters)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ToolSpec.parameters must be a JSON-serialisable schema: {exc}") from None
        if parameters.get("type") != "object" or not isinstance(parameters.get("properties", {}), dict):
            raise ValueError(f"ToolSpec.parameters must be a JSON schema with type 'object' and a 'properties' "
                             f"mapping, got {parameters!r:.120}")
        missing = sorted(set(parameters.get("required", [])) - set(parameters.get("properties", {})))
        if missing:
            raise ValueError(f"ToolSpec.parameters requires {missing} but does not define them under 'properties'")
        object.__setattr__(self, "parameters", parameters)

    def __hash__(self) -> int:
        import json

        return hash((self.name, self.description, json.dumps(self.parameters, sort_keys=True)))

    @property
    def required(self) -> tuple[str, ...]:
        """The names of the required parameters."""
        return tuple(self.parameters.get("required", ()))

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI/``transformers`` tool form: ``{"type": "function", "function": {name, description,
        parameters}}`` (what ``apply_chat_template(tools=...)`` and chat-completions servers take)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


__all__ += ["ToolSpec"]
