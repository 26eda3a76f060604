"""`MultiTurnEnv`: a task played over several turns, as a real Gymnasium environment.

``reset`` shows the task's prompt; each ``step(action)`` takes the assistant's turn, has the task's verifier
read it, and asks the task's :class:`~dapo_env.types.Interaction` for the environment's answer (its one
method, ``respond(history, action, verdict) -> Turn``). The reply is the next observation; the episode
ends with ``terminated`` when the interaction says so (solved, final answer, out of attempts) and with
``truncated`` when the environment's own budget runs out (``max_turns``, ``max_episode_tokens``).

With a tokenizer bound (:class:`~dapo_env.chat_tokens.ChatTokens`), the episode is also recorded token by
token: the prompt's ids, each turn's sampled ids and the ids of each reply, appended incrementally (never
re-tokenized), as a :class:`~dapo_env.types.Trajectory`. :class:`Episode` is the state machine shared by
this env and the batched :class:`~dapo_env.episodes.EpisodeGroupEnv`.

A new environment is one method (here on Arithmetic's problems: say "again" until the assistant says "stop"):

    >>> from dapo_env.tasks import Task, get_task
    >>> class UntilStop:
    ...     def respond(self, history, action, verdict):
    ...         done = action.text == "stop"
    ...         return Turn("bye" if done else "again", reward=float(done), done=done, solved=done)
    >>> base = get_task("Arithmetic-v0")
    >>> env = MultiTurnEnv(Task(name="UntilStop", source=base.source, verifier=base.verifier, interaction=UntilStop()))
    >>> _ = env.reset(seed=0)
    >>> [env.step(text)[:3] for text in ("hi", "stop")]
    [('again', 0.0, False), ('bye', 1.0, True)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from dapo_env.chat_tokens import ChatTokens
from dapo_env.envs import MAX_TEXT_LENGTH, as_completion, build_id_index, load_problems, pick_index, resolve_task
from dapo_env.spaces import UnicodeText
from dapo_env.tasks import Task
from dapo_env.tools import TOOL_FORMAT_KNOB, ToolUse, tool_messages
from dapo_env.types import (Completion, History, Interaction, Problem, ToolCall, Trajectory, TrajectoryTurn, Turn,
                            VerifyResult)


class SingleAttempt:
    """The interaction of a single-turn task: one answer, rewarded with the verifier's score, ends the episode.

    Example:
        >>> from dapo_env.types import Problem
        >>> turn = SingleAttempt().respond(History(Problem("0", "1+1?", "2"), ()), Completion("2"),
        ...                                VerifyResult(True, 1.0, "2", "equal"))
        >>> turn.done, turn.solved, turn.reward
        (True, True, 1.0)
    """

    def respond(self, history: History, action: Completion, verdict: VerifyResult) -> Turn:
        return Turn("", float(verdict.score), done=True, solved=bool(verdict.correct))


def interaction_of(task: Task) -> Interaction:
    """The task's interaction (:class:`SingleAttempt` for a single-turn task)."""
    interaction = getattr(task, "interaction", None)
    return SingleAttempt() if interaction is None else interaction


def check_budget(name: str, value: int | None) -> None:
    """A budget is ``None`` (none) or a positive int."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive int or None (no limit), got {value!r}")


def chat_tokens(tokenizer: Any, system_prompt: str | None,
                template_kwargs: Mapping[str, Any] | None) -> ChatTokens | None:
    """A :class:`ChatTokens` for ``tokenizer`` (``None`` without one); a ready ChatTokens is used as is."""
    if isinstance(tokenizer, ChatTokens):
        if system_prompt is not None or template_kwargs:
            raise ValueError("pass system_prompt and template_kwargs to ChatTokens(...) itself, not next to it")
        return tokenizer
    if tokenizer is None:
        if system_prompt is not None or template_kwargs:
            raise ValueError(
                "system_prompt and template_kwargs need a tokenizer with a chat template: pass tokenizer=...")
        return None
    return ChatTokens(tokenizer, system_prompt=system_prompt, template_kwargs=template_kwargs)


def tool_setup(task: Task, problem: Problem, chat: ChatTokens | None) -> tuple[Problem, ChatTokens | None]:
    """For a tool task (a :class:`~dapo_env.tools.ToolUse` interaction): the problem with its ``tool_format``
    resolved (``"auto"`` read from the chat template) and the chat rendering the tools (not in the ``fenced``
    format, whose prompt describes its protocol in words). Other tasks: both unchanged.

    Example:
        >>> from dapo_env.tasks import get_task
        >>> task = get_task("HiddenTable-v0")
        >>> problem, _ = tool_setup(task, task.load("test", size=1, tool_format="auto")[0], None)
        >>> problem.metadata["tool_format"]
        'hermes'
    """
    interaction = interaction_of(task)
    if not isinstance(interaction, ToolUse):
        return problem, chat
    tool_format = interaction.resolve_format(problem, None if chat is None else chat.template)
    if problem.metadata.get(TOOL_FORMAT_KNOB) != tool_format:
        problem = Problem(problem.id, problem.question, problem.answer,
                          {**problem.metadata, TOOL_FORMAT_KNOB: tool_format})
    if chat is not None and tool_format != "fenced":
        chat = chat.with_tools(interaction.specs)
    return problem, chat


@dataclass(frozen=True, slots=True)
class EpisodeStart:
    """What the G episodes of one problem share, set up once: the problem with its tool format resolved, the
    chat that renders its tools, the prompt's content and its rendered text and token ids (``None`` without
    a chat)."""

    problem: Problem
    chat: ChatTokens | None
    content: str
    text: str
    token_ids: tuple[int, ...] | None


def episode_start(task: Task, problem: Problem, chat: ChatTokens | None) -> EpisodeStart:
    """Set up the episodes of ``problem`` (:func:`tool_setup`, then the prompt rendered once).

    Example:
        >>> from dapo_env.tasks import get_task
        >>> task = get_task("GuessNumber-v0")
        >>> start = episode_start(task, task.load(size=1)[0], None)
        >>> start.text == start.content, start.token_ids
        (True, None)
    """
    problem, chat = tool_setup(task, problem, chat)
    content = task.format_prompt(problem)
    if chat is None:
        return EpisodeStart(problem, None, content, content, None)
    text, ids = chat.prompt(content)
    return EpisodeStart(problem, chat, content, text, tuple(ids or ()))


def episode_prompt(task: Task, problem: Problem, chat: ChatTokens | None) -> tuple[str, tuple[int, ...] | None]:
    """The first observation of an episode of ``problem``: the rendered prompt and its token ids (``None``
    without a chat)."""
    start = episode_start(task, problem, chat)
    return start.text, start.token_ids


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnOutcome:
    """What one assistant turn of an :class:`Episode` produced. :meth:`MultiTurnEnv.step` turns it into
    Gymnasium's 5-tuple; the episode group env reads the reward terms from it directly.

    Attributes:
        turn: the turn's index (0 for the first).
        reply, reward, terminated, truncated: as ``Env.step`` returns them.
        reward_terms: the turn's named reward parts (summing to ``reward``).
        verdict: what the verifier said of the turn.
        response_length: the turn's sampled tokens (``None`` when unknown: no tokenizer, no token count).
        response_truncated: the turn was cut at its token budget (finish reason ``"length"``).
        turn_info: what the interaction reported beyond its reply (``Turn.info``).
        tool_calls: the calls this turn attempted, typed, each with its status (``None``: a task without tools).
        reply_token_ids: the reply's token ids as the model will see them (``None`` without a tokenizer).
    """

    turn: int
    reply: str
    reward: float
    terminated: bool
    truncated: bool
    reward_terms: Mapping[str, float]
    verdict: VerifyResult
    response_length: int | None
    response_truncated: bool
    turn_info: Mapping[str, Any]
    tool_calls: tuple[ToolCall, ...] | None
    reply_token_ids: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What a ``generate`` callable gets for one live episode when the group env asks for its next turn.

    Attributes:
        key: the episode's id, stable over its turns and unique within the env's life (an engine may keep
            the episode's KV cache under it; a key missing from the next call has ended).
        turn: the index of the turn to generate (0 = first).
        group: the episode's group (0..B-1) in this rollout.
        messages: the conversation so far as chat messages (system prompt first, if any).
        text: the conversation so far as one string: the prompt as shown, then each turn's text and reply
            text. For text-only engines; it is not re-tokenized into ``context_token_ids``.
        context_token_ids: the exact tokens to condition on (prompt, sampled and reply tokens so far), when a
            tokenizer is bound; generate after exactly these.
        tokens_left: tokens left in the episode's ``max_episode_tokens`` budget (``None``: no budget).
        tools: the tools rendered into the conversation, in OpenAI form (``{"type": "function", ...}``), for
            engines that send ``messages`` with ``tools=`` (``None``: no tools shown).
        tool_format: the format the episode's parser reads calls in (with ``tools``): an engine that talks to a
            chat server writes the server's parsed ``tool_calls`` back as text in it
            (:func:`~dapo_env.tools.from_openai_message`) and sends earlier calls as ``tool_calls``
            (:func:`~dapo_env.tools.to_openai_messages`), so one parser reads every call.
    """

    key: str
    turn: int
    group: int
    messages: tuple[Mapping[str, str], ...]
    text: str
    context_token_ids: tuple[int, ...] | None = None
    tokens_left: int | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None
    tool_format: str | None = None


class Episode:
    """One multi-turn episode in progress: history, budgets and the trajectory being recorded.

    Args:
        task: the task (its verifier is applied by the caller; its interaction answers here).
        problem: the episode's problem.
        chat: a :class:`ChatTokens` to record token ids (``None``: text only).
        max_turns: truncate after this many turns (``None``: the interaction ends the episode).
        max_episode_tokens: truncate when the tokens after the prompt (sampled and, with a tokenizer, reply
            tokens) would leave no room for another turn; without a tokenizer only sampled tokens count.
        key: the episode's id in :class:`TurnRequest`.
        start: the problem's :class:`EpisodeStart` when the caller already set it up (G episodes of one problem
            share it); ``None`` sets it up here.

    Example:
        >>> from dapo_env.tasks import get_task
        >>> task = get_task("GuessNumber-v0")
        >>> episode = Episode(task, task.load(size=1)[0])
        >>> verdict = task.verifier("Answer: 8", episode.problem.answer)
        >>> outcome = episode.advance(Completion("Answer: 8"), verdict)
        >>> outcome.turn, outcome.terminated or outcome.reply in ("higher", "lower")
        (0, True)
    """

    def __init__(self, task: Task, problem: Problem, *, chat: ChatTokens | None = None, max_turns: int | None = None,
                 max_episode_tokens: int | None = None, key: str = "0", start: EpisodeStart | None = None) -> None:
        check_budget("max_turns", max_turns)
        check_budget("max_episode_tokens", max_episode_tokens)
        self.interaction = interaction_of(task)
        start = episode_start(task, problem, chat) if start is None else start
        self.task, self.problem, self.chat, self.key = task, start.problem, start.chat, key
        problem = start.problem
        self.max_turns, self.max_episode_tokens = max_turns, max_episode_tokens
        self.prompt_text, self.prompt_ids = start.text, start.token_ids
        self.messages: list[dict[str, str]] = [{"role": "user", "content": start.content}]
        uses_tools = isinstance(self.interaction, ToolUse)
        #: every call the episode attempted, typed (``None`` for a task without tools)
        self.tool_calls: list[ToolCall] | None = [] if uses_tools else None
        self.tool_format: str | None = problem.metadata.get(TOOL_FORMAT_KNOB) if uses_tools else None
        self.verdicts: list[VerifyResult] = []
        self.turns: list[TrajectoryTurn] = []
        self.token_ids: list[int] = []
        self.logprobs: list[float] | None = []
        self.sampled_mask: list[int] = []
        self.terminated = self.truncated = self.solved = False
        self.truncated_by: str | None = None

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def sampled_tokens(self) -> int:
        """Tokens the model sampled so far (unknown counts as 0)."""
        return sum(t.num_tokens or 0 for t in self.turns)

    def _used(self) -> int:
        return len(self.token_ids) if self.chat is not None else self.sampled_tokens

    def request(self, group: int = 0) -> TurnRequest:
        """The :class:`TurnRequest` for the next turn."""
        if self.done:
            raise RuntimeError(f"episode {self.key} has ended: it has no next turn")
        system = [] if self.chat is None or self.chat.system_prompt is None else [
            {"role": "system", "content": self.chat.system_prompt}]
        context = None if self.prompt_ids is None else self.prompt_ids + tuple(self.token_ids)
        left = None if self.max_episode_tokens is None else max(self.max_episode_tokens - self._used(), 0)
        text = self.prompt_text + "".join(t.text + t.reply_text for t in self.turns)
        tools = None
        if self.tool_format is not None and self.tool_format != "fenced":
            tools = tuple(spec.to_openai() for spec in self.interaction.specs)  # type: ignore[attr-defined]
        return TurnRequest(key=self.key, turn=len(self.turns), group=group,
                           messages=tuple(system + [dict(m) for m in self.messages]), text=text,
                           context_token_ids=context, tokens_left=left, tools=tools,
                           tool_format=None if tools is None else self.tool_format)

    @staticmethod
    def _sampled(chat: ChatTokens, completion: Completion) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
        """The turn's sampled token ids (the engine's, else the text tokenized) and their log-probs."""
        if completion.token_ids is None:
            return chat.encode(completion.text), None
        try:
            return tuple(int(i) for i in completion.token_ids), completion.logprobs
        except (TypeError, ValueError):
            raise TypeError(f"Completion.token_ids must be integers, got {completion.token_ids!r:.80}") from None

    def advance(self, completion: Completion, verdict: VerifyResult) -> TurnOutcome:
        """Play one assistant turn; returns what it produced (:meth:`MultiTurnEnv.step` makes the Gym tuple)."""
        if self.done:
            raise RuntimeError(f"episode {self.key} has ended: reset before stepping again")
        index = len(self.turns)
        history = History(self.problem, tuple(dict(m) for m in self.messages), tuple(self.verdicts))
        turn = self.interaction.respond(history, completion, verdict)
        if not isinstance(turn, Turn):
            raise TypeError(f"{type(self.interaction).__name__}.respond must return a dapo_env.types.Turn, "
                            f"got {type(turn).__name__}")
        sampled, logprobs = self._sampled(self.chat, completion) if self.chat is not None else ((), None)
        self.messages.append({"role": "assistant", "content": completion.text})
        self.verdicts.append(verdict)
        self.solved = self.solved or turn.solved
        self.terminated = turn.done
        num_tokens = completion.length
        if self.chat is not None:
            num_tokens = len(sampled)
            self.token_ids.extend(sampled)
            self.sampled_mask.extend([1] * len(sampled))
            if self.logprobs is not None and logprobs is not None:
                self.logprobs.extend(logprobs)
            else:
                self.logprobs = None
        if not self.terminated and self.max_turns is not None and index + 1 >= self.max_turns:
            self.truncated, self.truncated_by = True, "max_turns"
        replies = tool_messages(turn)
        reply_text, reply_ids = self._reply(turn, replies, completion)
        self.messages.extend(replies)
        if self.tool_calls is not None:
            self.tool_calls.extend(turn.tool_calls)
        self.turns.append(TrajectoryTurn(
            text=completion.text, num_tokens=num_tokens, finish_reason=completion.finish_reason, reply=turn.reply,
            reward=turn.reward, reply_text=reply_text, num_reply_tokens=len(reply_ids),
            weights_version=completion.weights_version))
        return TurnOutcome(turn=index, reply=turn.reply, reward=turn.reward, terminated=self.terminated,
                           truncated=self.truncated, reward_terms=turn.reward_terms, verdict=verdict,
                           response_length=num_tokens, response_truncated=completion.finish_reason == "length",
                           turn_info=dict(turn.info), tool_calls=None if self.tool_calls is None else turn.tool_calls,
                           reply_token_ids=reply_ids if self.chat is not None else None)

    def _reply(self, turn: Turn, replies: list[dict[str, str]], completion: Completion) -> tuple[str, tuple[int, ...]]:
        """Append the reply messages for the next turn (nothing once the episode is over); applies the token
        budget."""
        if self.done:
            return "", ()
        if self.chat is None:
            text, ids = f"\n{turn.reply}\n", ()
        else:
            stopped = completion.finish_reason == "stop" and self.sampled_mask and self.sampled_mask[-1] == 1
            text, ids = self.chat.replies(replies, stop_token=self.token_ids[-1] if stopped else None)
        if self.max_episode_tokens is not None and self._used() + len(ids) >= self.max_episode_tokens:
            self.truncated, self.truncated_by = True, "max_episode_tokens"
            return "", ()
        self.token_ids.extend(ids)
        self.sampled_mask.extend([0] * len(ids))
        if self.logprobs is not None:
            self.logprobs.extend([0.0] * len(ids))
        return text, ids

    def step_info(self, outcome: TurnOutcome) -> dict[str, Any]:
        """The Gymnasium step info of the turn ``outcome`` (this episode's latest): its verdict, lengths, tool
        calls as dicts, and at the episode's end its return, turn count and :class:`Trajectory`."""
        verdict = outcome.verdict
        info: dict[str, Any] = {
            "turn": outcome.turn,
            "reward_terms": dict(outcome.reward_terms),
            "verifier": {"correct": bool(verdict.correct), "score": float(verdict.score),
                         "extracted": verdict.extracted, "reason": verdict.reason},
            "solved": self.solved,
            "response_length": outcome.response_length,
            "response_truncated": outcome.response_truncated,
            "turn_info": dict(outcome.turn_info),
            "problem_id": self.problem.id,
            "task": self.task.env_id,
        }
        if outcome.tool_calls is not None:  # this turn's calls, each with its status
            info["tool_calls"] = [call.to_dict() for call in outcome.tool_calls]
        if outcome.reply_token_ids is not None:
            info["reply_token_ids"] = outcome.reply_token_ids
        if self.done:
            info.update(episode_return=self.episode_return, num_turns=len(self.turns), truncated_by=self.truncated_by,
                        trajectory=self.trajectory())
        return info

    @property
    def episode_return(self) -> float:
        return float(sum(t.reward for t in self.turns))

    def trajectory(self) -> Trajectory:
        """The episode so far as a :class:`Trajectory` (needs at least one turn)."""
        if not self.turns:
            raise RuntimeError("the episode has no turns yet: step it first")
        cut = self.truncated or self.turns[-1].finish_reason == "length"
        tokens = self.chat is not None
        return Trajectory(
            prompt=self.prompt_text, turns=tuple(self.turns), finish_reason="length" if cut else "stop",
            prompt_token_ids=self.prompt_ids if tokens else None, token_ids=tuple(self.token_ids) if tokens else None,
            logprobs=tuple(self.logprobs) if tokens and self.logprobs is not None else None,
            sampled_mask=tuple(self.sampled_mask) if tokens else None)


class MultiTurnEnv(gym.Env[str, str]):
    """A task played over several turns as a Gymnasium environment.

    Args:
        task: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task`. A multi-turn task brings its
            :class:`~dapo_env.types.Interaction`; a single-turn task plays one turn (:class:`SingleAttempt`).
        split, data_files, prompt_template: as for :class:`~dapo_env.envs.ReasoningEnv`.
        tokenizer: a tokenizer with a chat template (or a ready :class:`~dapo_env.chat_tokens.ChatTokens`):
            records the exact token ids (``info["prompt_token_ids"]`` at reset, ``info["reply_token_ids"]``
            per step, the :class:`~dapo_env.types.Trajectory` at the end).
        system_prompt, template_kwargs: passed to :class:`ChatTokens` (need a tokenizer).
        max_turns: truncate after this many turns (``None``: the task ends its episodes).
        max_episode_tokens: truncate when the tokens after the prompt leave no room for another turn.
        render_mode: ``"ansi"`` (``render()`` returns the transcript) or ``"human"`` (prints it).
        **task_kwargs: passed to ``task.load`` (e.g. ``n=32, k=6`` for GuessNumber).

    Observation: the prompt at reset, then the environment's reply (``str``). Action: the assistant's turn,
    a ``str`` or a :class:`~dapo_env.types.Completion` (with ``token_ids``/``logprobs`` when a tokenizer is
    bound). Reward: the turn's reward (the episode return is their sum). Step info: ``turn``, ``reward_terms``,
    ``verifier`` (what the verifier said), ``solved``, ``response_length``, ``response_truncated``,
    ``turn_info``, ``problem_id``, ``task`` (+ ``reply_token_ids``; for a tool task ``tool_calls``: one dict per
    call attempted this turn, with its status, see :mod:`dapo_env.tools`); at the end also ``episode_return``,
    ``num_turns``, ``truncated_by`` and ``trajectory``.

    Example:
        >>> env = MultiTurnEnv("GuessNumber-v0")
        >>> prompt, info = env.reset(seed=0)
        >>> low, high, terminated = 1, 16, False
        >>> while not terminated:
        ...     guess = (low + high) // 2
        ...     reply, reward, terminated, truncated, info = env.step(f"Answer: {guess}")
        ...     low, high = (guess + 1, high) if reply == "higher" else (low, guess - 1)
        >>> reply, reward, info["episode_return"], info["num_turns"] <= 5
        ('correct', 1.0, 1.0, True)
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(self, task: str | Task, *, split: str | None = None, data_files: Any = None,
                 prompt_template: str | None = None, tokenizer: Any = None, system_prompt: str | None = None,
                 template_kwargs: Mapping[str, Any] | None = None, max_turns: int | None = None,
                 max_episode_tokens: int | None = None, render_mode: str | None = None, **task_kwargs: Any) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        check_budget("max_turns", max_turns)
        check_budget("max_episode_tokens", max_episode_tokens)
        self.task = resolve_task(task, prompt_template)
        self.problems = load_problems(self.task, split, data_files, task_kwargs)
        self.chat = chat_tokens(tokenizer, system_prompt, template_kwargs)
        self.max_turns, self.max_episode_tokens = max_turns, max_episode_tokens
        self.render_mode = render_mode
        self.observation_space = UnicodeText(MAX_TEXT_LENGTH)
        self.action_space = UnicodeText(MAX_TEXT_LENGTH)
        self._id_index: dict[str, int] | None = None
        self._episode: Episode | None = None

    @property
    def episode(self) -> Episode | None:
        """The current episode (its problem holds the answer: for scripted policies and debugging only)."""
        return self._episode

    @property
    def trajectory(self) -> Trajectory | None:
        """The current episode's trajectory so far (``None`` before its first step)."""
        return None if self._episode is None or not self._episode.turns else self._episode.trajectory()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a problem (``options={"index": i}`` or ``{"id": "..."}`` picks one) and show its prompt."""
        super().reset(seed=seed)
        if options and "id" in options and self._id_index is None:
            self._id_index = build_id_index(self.problems)
        problem = self.problems[pick_index(self.problems, options, self.np_random, self._id_index)]
        self._episode = Episode(self.task, problem, chat=self.chat, max_turns=self.max_turns,
                                max_episode_tokens=self.max_episode_tokens)
        info: dict[str, Any] = {"problem_id": problem.id, "task": self.task.env_id, "turn": 0}
        if self.chat is not None:
            info["prompt_text"], info["prompt_token_ids"] = self._episode.prompt_text, self._episode.prompt_ids
        return self._episode.messages[0]["content"], info

    def step(self, action: str | Completion) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play the assistant's turn: verify it, answer it, and say whether the episode is over."""
        if self._episode is None:
            raise RuntimeError("MultiTurnEnv.step() called before reset(): call reset(seed=...) first")
        if self._episode.done:
            raise RuntimeError(
                "MultiTurnEnv.step() called after the episode ended (terminated or truncated): call reset() to start "
                "a new episode")
        completion = as_completion(action)
        verdict = self.task.verifier(completion.text, self._episode.problem.answer)
        outcome = self._episode.advance(completion, verdict)
        if self.render_mode == "human":
            print(self.render_text())
        return outcome.reply, outcome.reward, outcome.terminated, outcome.truncated, self._episode.step_info(outcome)

    def render_text(self) -> str:
        """The transcript so far: the prompt, then each turn and reply."""
        if self._episode is None:
            return ""
        lines = [f"[prompt] {self._episode.messages[0]['content']}"]
        for turn in self._episode.turns:
            lines += [f"[assistant] {turn.text}", f"[env] {turn.reply}"]
        return "\n".join(lines)

    def render(self) -> str | None:  # type: ignore[override]
        """``"ansi"``: return the transcript; ``"human"``: print it."""
        if self.render_mode == "ansi":
            return self.render_text()
        if self.render_mode == "human":
            print(self.render_text())
        return None


__all__ = ["Episode", "EpisodeStart", "MultiTurnEnv", "SingleAttempt", "TurnOutcome", "TurnRequest", "episode_prompt",
           "episode_start", "interaction_of", "tool_setup"]
