"""Multi-turn tasks as TRL environments (``GRPOTrainer`` and ``AsyncGRPOTrainer`` with ``environment_factory=``)."""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dapo_env.envs import resolve_task
from dapo_env.interop.datasets import to_hf_dataset
from dapo_env.interop.routing import warn_once
from dapo_env.interop.trl import TRL_KEYWORDS, content_text
from dapo_env.interop.unscorable import INVALID_REFERENCE, TRL_UNSCORABLE_OUTCOME, UnscorableLog, verification_error
from dapo_env.tasks import Task
from dapo_env.tools import Tool, ToolUse, format_tool_call, tool as make_tool, validate_arguments
from dapo_env.types import InvalidReference, ToolSpec
from dapo_env.wrappers import check_reward_map_args


# TRL 1.16's contract, the same in trl/trainer/grpo_trainer.py and in the rollout worker of
# trl/experimental/async_grpo (async_rollout_worker.py, `_AsyncRolloutLoop`): `environment_factory()` builds
# one instance per rollout (probed once, then pooled and reused); `instance.reset(**row)` starts a rollout with
# the dataset row's columns as keywords and may return a string appended to the prompt's last user message;
# every other public function of the instance's class (`inspect.getmembers(type(instance), inspect.isfunction)`,
# so properties are not tools) is a tool (JSON schema from its signature and Google docstring) called with
# the model's parsed tool-call arguments, its `str()` fed back as a `tool` message, until the model answers
# without a tool call. `GRPOTrainer` passes the instances to reward functions as `environments=`; the async
# worker never does: it calls reward functions with `completions=, prompts=, completion_ids=` and the row's
# columns, after the instance has gone back to the pool. A `get_reward()` method would add a reward source
# that never sees the final message (neither trainer shows it to the environment), so the instances have
# none: `factory.reward` ends each episode with the final message and returns the episode return, replaying
# the completion's tool calls in an environment of its own when TRL gives it no `environments=`.
_RESERVED_TOOL_NAMES = frozenset({"reset", "get_reward"})
_EPISODE_OVER = "The episode is over: reply with your final message, without a tool call."
_UNSCORABLE_REPLY = ("Error (unscorable): this problem's reference cannot be read, so no answer can be graded; "
                     "reply with your final message, without a tool call.")


def respond(message: str) -> str:
    """Send your next turn to the environment and return its reply.

    Args:
        message: your turn, written as you would answer in plain text
    """
    return message


RESPOND = make_tool(respond)


def _tools(task: Task, tool: Tool | Callable[..., str] | None) -> tuple[tuple[Tool, ...], bool]:
    """The environment's tools and whether they are the task's own (a :class:`~dapo_env.tools.ToolUse` task) or
    one turn tool (``tool``, else ``respond(message)``) whose return value is the turn's text."""
    if isinstance(task.interaction, ToolUse):
        if tool is not None:
            raise ValueError(f"{task.env_id} offers its own tools ({[t.name for t in task.interaction.tools]}): "
                             "drop tool=")
        return task.interaction.tools, True
    chosen = RESPOND if tool is None else tool if isinstance(tool, Tool) else make_tool(tool)
    if chosen.name in _RESERVED_TOOL_NAMES:
        raise ValueError(f"the tool's name must not be one of {sorted(_RESERVED_TOOL_NAMES)}, got {chosen.name!r}")
    return (chosen,), False


class TRLEnvironment:
    """One rollout's environment for TRL's ``GRPOTrainer(environment_factory=...)``: a
    :class:`~dapo_env.multiturn.MultiTurnEnv` behind ``reset`` and its tools.

    Build instances with :func:`trl_environment_factory` (its class adds one method per tool, with the tool's
    signature and docstring). Public functions are only ``reset`` and the tools, because TRL exposes every
    other public function as a tool too; the state is read through properties.

    Example:
        >>> def guess(number: int) -> str:
        ...     '''Submit one guess.
        ...
        ...     Args:
        ...         number: an integer from 1 to 16
        ...     '''
        ...     return f"Answer: {number}"
        >>> factory = trl_environment_factory("GuessNumber-v0", tool=guess)
        >>> env = factory()
        >>> env.reset(prompt=[{"role": "user", "content": ""}])[:32]
        'I am thinking of an integer from'
        >>> env.guess(number=8) in ("higher", "lower") or env.solved
        True
        >>> env.episode.turns[0].text, env.done
        ('Answer: 8', False)
    """

    def __init__(self, factory: TRLEnvironmentFactory, number: int) -> None:
        from dapo_env.multiturn import MultiTurnEnv

        self._factory = factory
        self._env = MultiTurnEnv(factory.task, split=factory.split, data_files=factory.data_files,
                                 max_turns=factory.max_turns, **factory.task_kwargs)
        self._seed: int | None = factory.seed + number
        self._unreadable: str | None = None  # why this episode's reference could not be read

    @property
    def env(self) -> Any:
        """The underlying :class:`~dapo_env.multiturn.MultiTurnEnv`."""
        return self._env

    @property
    def episode(self) -> Any:
        """The current :class:`~dapo_env.multiturn.Episode` (``None`` before the first ``reset``)."""
        return self._env.episode

    @property
    def done(self) -> bool:
        return self.episode is not None and self.episode.done

    @property
    def solved(self) -> bool:
        return self.episode is not None and self.episode.solved

    @property
    def episode_return(self) -> float:
        """The sum of the episode's turn rewards so far (0.0 before its first turn)."""
        return 0.0 if self.episode is None else self.episode.episode_return

    @property
    def unscorable(self) -> tuple[str, str] | None:
        """``(cause, detail)`` when the episode cannot be scored: its reference cannot be read
        (``invalid_reference``) or a turn's verification errored (``verifier_error:<reason>``); else ``None``."""
        problem = "?" if self.episode is None else self.episode.problem.id
        if self._unreadable is not None:
            return INVALID_REFERENCE, f"problem {problem}: {self._unreadable}"
        for turn, verdict in enumerate(self.episode.verdicts if self.episode is not None else ()):
            cause = verification_error(verdict)
            if cause is not None:
                return cause, f"problem {problem}, turn {turn}: the verifier said {verdict.reason!r}"
        return None

    def reset(self, **row: Any) -> str | None:
        """Start a rollout: the row's ``problem_id`` picks the problem (rows of ``factory.dataset()`` have one),
        else the environment draws one. Returns the problem's prompt for TRL to append to the row's last user
        message, or ``None`` when that message already holds it."""
        task = self._factory.task
        source = row.get("data_source")
        if source is not None and str(source) != task.env_id:
            raise ValueError(f"a row of {source!r} reached the {task.env_id} environment: build the dataset with "
                             f"factory.dataset() (or pass a dict of factories keyed by the row's 'environment')")
        self._unreadable = None
        problem_id = row.get("problem_id")
        if problem_id is not None:
            prompt, _ = self._env.reset(options={"id": str(problem_id)})
        else:
            if self._seed is not None and _prompts_differ(self._env.problems, task):
                warn_once(f"trl-rows:{task.env_id}", (
                    f"{task.env_id}: rows without 'problem_id': every rollout plays its own random problem, so a GRPO "
                    "group mixes problems; pass train_dataset=factory.dataset()"))
            prompt, _ = self._env.reset(seed=self._seed)
            self._seed = None
        return None if prompt in _last_user_text(row.get("prompt")) else prompt

    def _call(self, spec: ToolSpec, arguments: dict[str, Any]) -> str:
        """A tool call from TRL's tool loop, played as one turn: a task tool's call is written in the episode's
        tool format (and read back by the same parser as in training); a turn tool's return value is the turn's
        text. Arguments that do not fit the schema are answered, not raised."""
        if self.episode is None:
            raise RuntimeError("the environment was not reset: TRL calls reset(**row) before the first tool call")
        if self.episode.done:
            return _EPISODE_OVER
        error = validate_arguments(arguments, spec)
        if error is not None:
            return f"Error (bad_arguments): {error}"
        if self._factory.own_tools:
            text = format_tool_call(self.episode.tool_format, [(spec.name, arguments)])
        else:
            text = self._factory.tools[0].run(arguments, self.episode.problem)
        return self._turn(text)

    def _turn(self, text: str) -> str:
        """Play one turn; the reply, with a note when the episode has ended. A reference that cannot be read
        leaves the episode unscorable and is answered (raised with ``strict_references=True``)."""
        if self._unreadable is not None:
            return _UNSCORABLE_REPLY
        try:
            reply, _, terminated, truncated, _ = self._env.step(text)
        except InvalidReference as exc:
            if self._factory.strict_references:
                raise
            self._unreadable = str(exc)
            return _UNSCORABLE_REPLY
        return f"{reply}\n{_EPISODE_OVER}" if (terminated or truncated) and reply else (
            _EPISODE_OVER if terminated or truncated else reply)

    def _finish(self, completion: Any) -> None:
        """Play the completion's final message (an answer without a tool call) as the last turn, if the episode
        is still on and the message has text."""
        final = _final_message(completion)
        if self.episode is not None and not self.episode.done and final and final.strip():
            self._turn(final)

    def _tools(self) -> dict[str, Callable[..., Any]]:
        """The tools as TRL takes them: the public functions of the class but ``reset``/``get_reward``."""
        return {name: getattr(self, name) for name, _ in inspect.getmembers(type(self), predicate=inspect.isfunction)
                if name not in _RESERVED_TOOL_NAMES and not name.startswith("_")}


def _prompts_differ(problems: Sequence[Any], task: Task) -> bool:
    return len({task.format_prompt(problems[i]) for i in range(min(len(problems), 4))}) > 1


def _last_user_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        return content_text(users[-1].get("content")) if users else ""
    return ""


def _final_message(completion: Any) -> str | None:
    """The text of a TRL completion's final message when it is an assistant message without tool calls."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, Mapping) and last.get("role", "assistant") == "assistant" and not last.get("tool_calls"):
            return content_text(last.get("content"))
    return None


_PYTHON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


def _tool_method(spec: ToolSpec) -> Callable[..., str]:
    """The tool as a method with the signature, annotations and Google docstring TRL's schema needs."""

    def method(self: TRLEnvironment, **arguments: Any) -> str:
        return self._call(spec, arguments)

    properties, required = spec.parameters.get("properties", {}), set(spec.required)
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for name, schema in properties.items():
        kind = schema.get("type")
        annotations[name] = _PYTHON_TYPES.get(kind, Any) if isinstance(kind, str) else Any
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[name],
                                            default=inspect.Parameter.empty if name in required else None))
    parameters[1:] = sorted(parameters[1:], key=lambda p: p.default is not inspect.Parameter.empty)
    args = "".join(f"\n    {name}: {schema.get('description') or name}" for name, schema in properties.items())
    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = f"{spec.description}\n\nArgs:{args}\n\nReturns:\n    The environment's reply." if args else (
        f"{spec.description}\n\nReturns:\n    The environment's reply.")
    method.__annotations__ = {**annotations, "return": str}
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    return method


_ENVIRONMENT_CLASSES: dict[tuple[str, tuple[ToolSpec, ...]], type] = {}
_classes_lock = threading.Lock()


def _get_reward(self: TRLEnvironment) -> float | None:
    """The episode's return, mapped by ``reward_map``; ``None`` when the episode cannot be scored. TRL calls it
    once per finished rollout; the final message (an answer without a tool call) is not part of the episode."""
    return self._factory.reward.score(self)


def _environment_class(task_name: str, specs: tuple[ToolSpec, ...], owns_reward: bool) -> type:
    """The environment class for a task's tools; with ``owns_reward`` it also defines ``get_reward()``."""
    with _classes_lock:
        key = (task_name, specs, owns_reward)
        if key not in _ENVIRONMENT_CLASSES:
            methods: dict[str, Any] = {spec.name: _tool_method(spec) for spec in specs}
            if owns_reward:
                methods["get_reward"] = _get_reward
            _ENVIRONMENT_CLASSES[key] = type(f"{task_name}Environment", (TRLEnvironment,),
                                             {**methods, "__module__": __name__})
        return _ENVIRONMENT_CLASSES[key]


class EpisodeReward:
    """TRL reward function for :func:`trl_environment_factory` environments, for ``GRPOTrainer`` and
    ``AsyncGRPOTrainer`` alike: plays each completion's final message (an answer without a tool call) as the
    episode's last turn, then returns the episode return (mapped by ``reward_map``).

    With ``environments=`` (``GRPOTrainer``) it scores the environments TRL ran. Without (the async trainer's
    worker never passes them, and returns each environment to its pool before scoring) it replays each
    completion in an environment of its own: ``reset`` with the row's columns (``problem_id`` picks the problem),
    the completion's tool calls through the same tools with the same arguments, then the final message. A replay
    whose tool replies differ from the ones in the completion (an environment that is not deterministic given
    its problem) is unscorable, like an episode whose reference cannot be read
    or whose verification errored: its reward is ``None`` (TRL leaves it out of the advantages), the first of each
    cause is warned about and all are counted in :attr:`unscorable`.

    Logs ``rewards/<name>/solved``, ``rewards/<name>/turns`` and ``rewards/<name>/unscorable`` through TRL's
    ``log_metric`` when TRL passes one. A picklable object named ``"<task>_episode_reward"``."""

    def __init__(self, name: str, reward_map: tuple[float, float] | None = None,
                 factory: TRLEnvironmentFactory | None = None) -> None:
        self.__name__ = name
        self.reward_map = reward_map
        self.factory = factory
        self.log = UnscorableLog(name, TRL_UNSCORABLE_OUTCOME)
        self._spare: list[TRLEnvironment] = []  # replay environments, reused
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock")
        state["_spare"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EpisodeReward({self.__name__!r}, reward_map={self.reward_map})"

    @property
    def unscorable(self) -> dict[str, int]:
        """Rows scored ``None`` so far, by cause."""
        return dict(self.log.counts)

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Sequence[Any] | None = None, environments: Sequence[Any] | None = None,
                 **columns: Any) -> list[float | None]:
        """One reward per completion (``None`` when unscorable), from the environment TRL ran it in
        (``environments=``), else from a replay of the completion."""
        if completions is None:
            raise TypeError(f"{self.__name__} needs completions=: pass it to GRPOTrainer or AsyncGRPOTrainer as "
                            "reward_funcs=[factory.reward] (TRL passes completions= and the row's columns)")
        if self.factory is not None and self.factory.owns_reward:
            raise TypeError(f"the environments of {self.factory!r} own their reward (owns_reward=True): TRL scores "
                            f"them through get_reward(), so {self.__name__} would count every episode twice; pass "
                            "reward_funcs=None")
        n = len(completions)
        replays: list[TRLEnvironment] = []
        causes: list[tuple[str, str] | None] = [None] * n
        if environments is None:
            rows = [{k: v[i] for k, v in columns.items() if k not in TRL_KEYWORDS and isinstance(v, Sequence)
                     and not isinstance(v, str) and len(v) == n} for i in range(n)]
            self._check_replayable(rows)
            try:
                for i, (completion, row) in enumerate(zip(completions, rows)):
                    replays.append(self._borrow())
                    causes[i] = self._replay(replays[-1], completion, row)
            except BaseException:
                self._give_back(replays)
                raise
            environments = replays
        else:
            if len(environments) != n:
                raise ValueError(f"{n} completions but {len(environments)} environments")
            for environment in environments:
                if not isinstance(environment, TRLEnvironment):
                    raise TypeError(f"{self.__name__} scores environments built by trl_environment_factory, got "
                                    f"{type(environment).__name__}")
            for environment, completion in zip(environments, completions):
                environment._finish(completion)
        try:
            return self._rewards(environments, causes, columns.get("log_metric"))
        finally:
            self._give_back(replays)

    def score(self, environment: TRLEnvironment) -> float | None:
        """One episode's reward as it stands (no final message played): its return mapped by ``reward_map``,
        ``None`` (logged and counted) when unscorable. What ``get_reward()`` returns with ``owns_reward=True``."""
        return self._rewards([environment], [None], None)[0]

    def _rewards(self, environments: Sequence[TRLEnvironment], causes: list[tuple[str, str] | None],
                 log_metric: Any) -> list[float | None]:
        from dapo_env.episodes import shape_episode
        from dapo_env.shaping import Shaping

        shaping, rewards = Shaping(reward_map=self.reward_map), []
        for environment, cause in zip(environments, causes):
            cause = cause or environment.unscorable
            if cause is not None:
                self.log.record(*cause)
                rewards.append(None)
                continue
            truncated = environment.episode is not None and environment.episode.truncated
            rewards.append(shape_episode(environment.episode_return, None, truncated, shaping)[0])
        played = [e for e, r in zip(environments, rewards) if r is not None]
        if callable(log_metric) and environments:
            if played:
                log_metric(f"rewards/{self.__name__}/solved", sum(e.solved for e in played) / len(played))
                log_metric(f"rewards/{self.__name__}/turns",
                           sum(len(e.episode.turns) if e.episode else 0 for e in played) / len(played))
            log_metric(f"rewards/{self.__name__}/unscorable", (len(environments) - len(played)) / len(environments))
        return rewards

    def _check_replayable(self, rows: list[dict[str, Any]]) -> None:
        if self.factory is None:
            raise TypeError(f"{self.__name__} was built without its factory, so it needs environments=: use "
                            "factory.reward of trl_environment_factory(...)")
        if any(row.get("problem_id") is None for row in rows):
            raise ValueError(f"{self.__name__} got no environments= (AsyncGRPOTrainer never passes them) and a row "
                             "without 'problem_id', so it cannot replay the rollout's problem: pass "
                             "train_dataset=factory.dataset()")

    def _borrow(self) -> TRLEnvironment:
        with self._lock:
            if self._spare:
                return self._spare.pop()
        factory = self.factory
        if factory is None:
            raise TypeError(f"{self.__name__} was built without its factory: use factory.reward")
        return factory()

    def _give_back(self, environments: list[TRLEnvironment]) -> None:
        with self._lock:
            self._spare.extend(environments)

    def _replay(self, environment: TRLEnvironment, completion: Any, row: dict[str, Any]) -> tuple[str, str] | None:
        """Replay one completion in ``environment`` (one of this reward's own): ``reset(**row)``, the tool calls
        TRL ran, then the final message. ``None`` once played; ``(cause, detail)`` when the replay diverged."""
        environment.reset(**row)
        tools = environment._tools()
        messages = completion if isinstance(completion, Sequence) and not isinstance(completion, str) else []
        replies: list[tuple[str, str]] = []
        for j, message in enumerate(messages):
            calls = message.get("tool_calls") if isinstance(message, Mapping) else None
            if not calls or j + 1 == len(messages):  # calls with no tool message after them were never run
                continue
            for call in calls:
                function = call.get("function", call) if isinstance(call, Mapping) else {}
                name, arguments = function.get("name"), function.get("arguments", {})
                if name not in tools:
                    continue  # TRL answered an unknown tool itself
                try:
                    arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
                    result = tools[name](**arguments)
                except Exception as error:  # noqa: BLE001 - TRL answers a raising tool with its error, so do we
                    result = {"error": str(error)}
                replies.append((name, str(result)))
        recorded = [(m.get("name"), m.get("content") if isinstance(m.get("content"), str) else str(m.get("content")))
                    for m in messages if isinstance(m, Mapping) and m.get("role") == "tool" and m.get("name") in tools]
        if replies != recorded:
            where = next((k for k, (a, b) in enumerate(zip(replies, recorded)) if a != b), min(len(replies),
                                                                                              len(recorded)))
            return ("replay_diverged", (
                f"problem {row.get('problem_id')}: replaying the completion's tool calls gave a different reply to "
                f"call {where} than the rollout got, so the episode the model saw cannot be scored; its environment "
                "is not deterministic given its problem (score with environments=: GRPOTrainer)"))
        environment._finish(completion)
        return None


class TRLEnvironmentFactory:
    """``GRPOTrainer(environment_factory=factory, reward_funcs=[factory.reward], train_dataset=factory.dataset())``,
    and the same arguments for ``AsyncGRPOTrainer``.

    Build it with :func:`trl_environment_factory`. Calling it (as TRL does, once per concurrent rollout) returns
    a new :class:`TRLEnvironment`. A picklable object (TRL's async trainer sends it to another process).
    """

    def __init__(self, task: str | Task, *, split: str | None = None, data_files: Any = None,
                 prompt_template: str | None = None, tool: Tool | Callable[..., str] | None = None,
                 max_turns: int | None = None, reward_map: tuple[float, float] | None = None, seed: int = 0,
                 strict_references: bool = False, owns_reward: bool = False, **task_kwargs: Any) -> None:
        from dapo_env.multiturn import check_budget

        check_budget("max_turns", max_turns)
        if reward_map is not None:
            check_reward_map_args(*reward_map)
            reward_map = (float(reward_map[0]), float(reward_map[1]))
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        self.task = resolve_task(task, prompt_template)
        self.tools, self.own_tools = _tools(self.task, tool)
        self.split, self.data_files, self.max_turns, self.seed = split, data_files, max_turns, seed
        self.task_kwargs = dict(task_kwargs)
        self.strict_references = bool(strict_references)
        self.owns_reward = bool(owns_reward)
        self.reward = EpisodeReward(f"{self.task.name}_episode_reward", reward_map, factory=self)
        self._made = 0
        self._lock = threading.Lock()
        self().env.close()  # fail here, not inside the trainer, on bad data or knobs

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TRLEnvironmentFactory({self.task.env_id}, tools={[t.name for t in self.tools]})"

    def __call__(self) -> TRLEnvironment:
        with self._lock:
            number, self._made = self._made, self._made + 1
        return _environment_class(self.task.name, tuple(t.spec for t in self.tools), self.owns_reward)(self, number)

    def dataset(self, *, limit: int | None = None, system_prompt: str | None = None) -> Any:
        """The task's problems as TRL rows (:func:`to_hf_dataset` with ``chat=True``): ``prompt`` holds the
        problem's prompt and ``problem_id`` lets ``reset`` play that problem, so the G rollouts of a row share it.
        A problem whose reference cannot be read is kept (warned about; its episodes score ``None``) unless the
        factory has ``strict_references=True``."""
        return to_hf_dataset(self.task, self.split, chat=True, system_prompt=system_prompt, limit=limit,
                             data_files=self.data_files, strict_references=self.strict_references, **self.task_kwargs)


def trl_environment_factory(task: str | Task, *, split: str | None = None, data_files: Any = None,
                            prompt_template: str | None = None, tool: Tool | Callable[..., str] | None = None,
                            max_turns: int | None = None, reward_map: tuple[float, float] | None = None,
                            seed: int = 0, strict_references: bool = False, owns_reward: bool = False,
                            **task_kwargs: Any) -> TRLEnvironmentFactory:
    """A multi-turn task as TRL's ``environment_factory`` (TRL 1.16's ``GRPOTrainer`` and ``AsyncGRPOTrainer``).

    Each rollout gets a :class:`TRLEnvironment`: TRL calls ``reset(**row)``, then a tool whenever the model
    calls one; each call is one turn of the task's :class:`~dapo_env.multiturn.MultiTurnEnv` and returns the
    environment's reply. The model's final message (without a tool call) is the episode's last turn, played by
    ``factory.reward``, which returns the episode return. A tool task (a :class:`~dapo_env.tools.ToolUse`
    interaction) offers its real tools (``run_tests(code)`` for MBPPFeedback, ``python(code)`` for the math
    tool tasks, ``lookup(key)`` for HiddenTable), with their signatures and docstrings: a call is written in
    the episode's tool format and read back by the same parser as in training. Any other task offers one
    turn tool: ``tool`` (a typed function whose return value is the turn's text), else ``respond(message)``.

    Both trainers take ``environment_factory=factory, reward_funcs=[factory.reward],
    train_dataset=factory.dataset()``. ``GRPOTrainer`` hands ``factory.reward`` the environments it ran
    (``environments=``); ``AsyncGRPOTrainer``'s worker never does, so ``factory.reward`` replays each completion's
    tool calls in an environment of its own (same problem, same arguments) and checks that the replies match.
    The environments define no ``get_reward`` (TRL never shows an environment the final message) unless
    ``owns_reward=True``. An episode
    whose reference cannot be read (answered as a tool error, raised with ``strict_references=True``), whose
    verification errored, or whose replay diverged scores ``None`` (see :class:`EpisodeReward`).

    Args:
        task: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task` (multi-turn; a single-turn task plays
            one turn).
        split, data_files, prompt_template: as for :class:`~dapo_env.multiturn.MultiTurnEnv`.
        tool: for a task without tools, a typed function (or :class:`~dapo_env.tools.Tool`) ``(**arguments) ->
            turn text``.
        max_turns: truncate episodes after this many turns.
        reward_map: ``(low, high)``: map the episode return onto ``[low, high]`` (``(-1.0, 1.0)`` for DAPO).
        seed: rollouts of rows without ``problem_id`` draw problems from ``seed + k`` for the k-th instance.
        strict_references: raise :class:`~dapo_env.types.InvalidReference` when a problem's reference cannot be
            read, instead of answering the turn with an error and scoring the episode ``None``.
        owns_reward: the environments own their reward: their class defines ``get_reward()``, which both
            trainers call once per finished rollout (a reward source named after the class), and
            ``factory.reward`` refuses to score (pass ``reward_funcs=None``). The final message is then NOT
            played (TRL never shows it to an environment): only for tasks whose episodes end through their tools
            (a guess, a test run that passes); it saves the replay ``AsyncGRPOTrainer`` needs otherwise.
        **task_kwargs: passed to ``task.load`` (knobs such as ``max_attempts=`` or ``n=``).

    Example:
        >>> from pathlib import Path
        >>> sample = Path(__file__).parents[2] / "examples" / "data" / "mbpp_sample.jsonl"  # a checkout's sample
        >>> factory = trl_environment_factory("MBPPFeedback-v0", data_files=str(sample))
        >>> env = factory()
        >>> env.reset(**factory.dataset(limit=1)[0]) is None   # the row's prompt is the problem's
        True
        >>> print("\\n".join(env.run_tests(code="def remove_Occ(s, ch):\\n    return s").splitlines()[:3]))
        3 of 3 tests failed:
        assert remove_Occ("hello","l") == "heo"
          remove_Occ('hello', 'l') returned 'hello'
        >>> factory.reward(completions=[[{"role": "assistant", "content": "I give up."}]], environments=[env])
        [0.0]
    """
    return TRLEnvironmentFactory(task, split=split, data_files=data_files, prompt_template=prompt_template,
                                 tool=tool, max_turns=max_turns, reward_map=reward_map, seed=seed,
                                 strict_references=strict_references, owns_reward=owns_reward, **task_kwargs)
