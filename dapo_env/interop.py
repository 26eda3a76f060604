"""Tasks as datasets and verifiers as reward functions for other RL libraries: TRL and verl.

Neither library is imported: both contracts are plain callables and ``datasets`` rows.

* :func:`to_hf_dataset` writes a task's problems as a ``datasets.Dataset`` that both libraries read:
  ``prompt`` (a string, or chat messages with ``chat=True``), ``answer`` (the reference as a string:
  the gold answer for math, JSON of the tests for code), ``data_source`` (the task id), ``ability``,
  ``reward_model = {"style": "rule", "ground_truth": <answer>}`` and ``extra_info`` as verl's
  preprocessors write them, and ``problem_id``. Every column is a string, an int or a struct of
  them, so rows survive ``Dataset.map``, Parquet and JSON round trips, and datasets of different
  tasks concatenate.
* TRL (``GRPOTrainer(reward_funcs=[...])``) calls ``reward_func(prompts=, completions=,
  completion_ids=, trainer_state=, log_metric=, ..., **other_columns)`` with one value per
  completion and expects one float per completion. :func:`trl_reward_function` returns a picklable
  :class:`TaskReward` object (TRL's async trainer sends reward functions to a spawned process).
* verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``
  per sample (naive, dapo and prime reward managers, the reward loop) or with plural keywords
  (``data_sources=, solution_strs=, ground_truths=, extra_infos=``: the batch manager);
  :func:`verl_compute_score` (alias :data:`compute_score`) takes both. Routing travels with the data
  (``data_source``, ``extra_info["task"]``) or with the config (``reward_kwargs``), never with state
  set in the driver, so it holds in Ray workers and in the module copy verl makes when it loads this
  file by path (that copy re-exports the installed module's objects; see the end of this file).
"""

from __future__ import annotations

import inspect
import json
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dapo_env.envs import load_problems, resolve_task
from dapo_env.tasks import Task, get_task
from dapo_env.types import CodeTests, InvalidReference, VerifyResult
from dapo_env.wrappers import check_reward_map_args, map_reward


# --- references as strings ------------------------------------------------------------------------
def reference_to_str(reference: Any) -> str:
    """A task's reference in the string form every verifier accepts back: the gold answer for math,
    ``CodeTests.to_dict()`` as JSON for code, ``to_json()`` for references that define it.

    Example:
        >>> reference_to_str(CodeTests(tests=("assert f() == 1",)))[:30]
        '{"tests": ["assert f() == 1"],'
    """
    if isinstance(reference, str):
        return reference
    if isinstance(reference, CodeTests):
        return json.dumps(reference.to_dict(), ensure_ascii=False)
    if callable(getattr(reference, "to_json", None)):
        return str(reference.to_json())
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        from dapo_env.verifiers.references import math_gold

        return math_gold(reference)
    raise TypeError(
        f"a reference of type {type(reference).__name__} has no string form: give it a to_json() method "
        "that its verifier accepts back, or store the reference as a string"
    )


def _ability(task: Task, reference: Any) -> str:
    from dapo_env.verifiers.math import MathVerifier

    if isinstance(reference, CodeTests):
        return "code"
    return "math" if isinstance(task.verifier, MathVerifier) else "reasoning"


def to_hf_dataset(task_id: str | Task, split: str | None = None, *, chat: bool = False,
                  system_prompt: str | None = None, limit: int | None = None, prompt_template: str | None = None,
                  **task_kwargs: Any) -> Any:
    """A task's problems as a ``datasets.Dataset`` for TRL and verl (columns in the module docstring).

    Args:
        task_id: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task`.
        split: the split to load (default: the task's).
        chat: ``prompt`` as chat messages ``[{"role": "user", "content": ...}]`` (TRL's conversational
            format; verl's ``RLHFDataset`` needs it) instead of the formatted prompt string.
        system_prompt: a system message placed before the user message (needs ``chat=True``).
        limit: keep the first ``limit`` problems.
        prompt_template: overrides the task's ``str.format`` template.
        **task_kwargs: passed to ``task.load`` (``data_files=...`` for dataset tasks, ``size=...`` for
            procedural ones).

    Example:
        >>> ds = to_hf_dataset("Arithmetic-v0", limit=2, chat=True)
        >>> ds[0]["prompt"], ds[0]["answer"], ds[0]["data_source"]
        ([{'role': 'user', 'content': 'Compute 17-13.'}], '4', 'Arithmetic-v0')
        >>> ds[0]["reward_model"], ds[0]["extra_info"]["task"]
        ({'style': 'rule', 'ground_truth': '4'}, 'Arithmetic-v0')
    """
    from datasets import Dataset

    if system_prompt is not None and not chat:
        raise ValueError("system_prompt needs chat=True (a plain string prompt has no system message)")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    task = resolve_task(task_id, prompt_template)
    split = split or task.split
    problems = load_problems(task, split, task_kwargs.pop("data_files", None), task_kwargs)
    problems = problems[:limit] if limit is not None else problems
    references = [reference_to_str(p.answer) for p in problems]
    _check_references(task, references)
    rows = []
    for index, (problem, reference) in enumerate(zip(problems, references)):
        text = task.format_prompt(problem)
        prompt: Any = text
        if chat:
            prompt = ([{"role": "system", "content": system_prompt}] if system_prompt is not None else [])
            prompt.append({"role": "user", "content": text})
        rows.append({
            "prompt": prompt,
            "answer": reference,
            "data_source": task.env_id,
            "ability": _ability(task, problem.answer),
            "reward_model": {"style": "rule", "ground_truth": reference},
            "problem_id": problem.id,
            "extra_info": {"task": task.env_id, "split": split, "index": index, "problem_id": problem.id},
        })
    return Dataset.from_list(rows)


def _check_references(task: Task, references: Sequence[str]) -> None:
    """Every serialised reference must be accepted back by the task's verifier (raises InvalidReference)."""
    from dapo_env.verifiers.pool import prepare_references

    try:
        prepare_references(task.verifier, references)
    except InvalidReference as exc:
        raise InvalidReference(f"{task.env_id}: its references do not survive serialisation ({exc})") from None


# --- TRL ------------------------------------------------------------------------------------------
def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or the last assistant message of a conversation
    (its ``content``; a list of content blocks contributes its text blocks)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                return _content_text(message.get("content"))
        return ""
    raise TypeError(
        f"a TRL completion must be a str or a list of {{'role', 'content'}} messages, got {type(completion).__name__}"
    )


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content blocks: [{"type": "text", "text": ...}, {"type": "image"}, ...]
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return str(content)


class MissingReferenceColumn(KeyError, ValueError):
    """The dataset has no column with the references; the message names the argument to pass."""

    def __str__(self) -> str:
        return str(self.args[0])


class TaskReward:
    """A TRL reward function (a picklable callable object) that scores completions with a task's verifier.

    Build it with :func:`trl_reward_function`. Its worker pool, if any, starts on the first call that
    needs it, is never pickled, and stops on :meth:`close` or when the object is collected. Calls may
    come from several threads at once (TRL's async trainer runs sync reward functions in threads).
    """

    def __init__(self, task_or_id: str | Task | None = None, *, answer_column: str = "answer",
                 reward_map: tuple[float, float] | None = None, workers: int = 0,
                 timeout_s: float = 10.0, data_source_tasks: Mapping[str, str] | None = None) -> None:
        if reward_map is not None:
            check_reward_map_args(*reward_map)
            reward_map = (float(reward_map[0]), float(reward_map[1]))
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
            raise ValueError(f"workers must be an int >= 0 (0: verify in the calling process), got {workers!r}")
        task = None if task_or_id is None else get_task(task_or_id)
        self.task_id = task.env_id if task is not None else None
        self.verifier = task.verifier if task is not None else None  # kept instead of the Task: lean to pickle
        self.answer_column = answer_column
        self.reward_map = reward_map
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.data_source_tasks = dict(data_source_tasks or {})
        self.__name__ = f"{task.name}_reward" if task is not None else "dapo_env_reward"
        self._lock = threading.Lock()
        self._pool: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock")
        state["_pool"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        task = self.task_id or "route by data_source"
        return f"TaskReward({task}, answer_column={self.answer_column!r}, reward_map={self.reward_map})"

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Sequence[Any] | None = None, **columns: Any) -> list[float]:
        """Score ``completions`` against the references in the dataset columns; one float each."""
        if completions is None:
            raise TypeError("the reward function needs completions=...: TRL passes prompts=, completions= and the "
                            "dataset columns as keywords")
        references = self._references(columns, len(completions))
        verifiers = self._verifiers(columns, len(completions))
        results = self._verify(verifiers, [completion_text(c) for c in completions], references)
        log_metric = columns.get("log_metric")
        if callable(log_metric) and results:
            log_metric(f"rewards/{self.__name__}/accuracy", sum(r.correct for r in results) / len(results))
        if self.reward_map is None:
            return [float(r.score) for r in results]
        return [map_reward(r.score, low=self.reward_map[0], high=self.reward_map[1]) for r in results]

    def close(self) -> None:
        """Stop the worker pool (a later call starts a new one)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _references(self, columns: Mapping[str, Any], n: int) -> list[Any]:
        if self.answer_column in columns:
            references = list(columns[self.answer_column])
        elif self.answer_column == "answer" and "reward_model" in columns:  # verl-style rows
            references = [_ground_truth(row) for row in columns["reward_model"]]
        else:
            passed = sorted(k for k in columns if k not in _TRL_KEYWORDS)
            raise MissingReferenceColumn(
                f"no {self.answer_column!r} column among the dataset columns {passed}: pass "
                f"trl_reward_function(..., answer_column=<the column that holds the reference answers>)"
            )
        if len(references) != n:
            raise ValueError(f"{n} completions but {len(references)} values in {self.answer_column!r}")
        return references

    def _verifiers(self, columns: Mapping[str, Any], n: int) -> list[Any]:
        if self.verifier is not None:
            return [self.verifier] * n
        sources = list(columns["data_source"]) if columns.get("data_source") is not None else [None] * n
        infos = list(columns["extra_info"]) if columns.get("extra_info") is not None else [None] * n
        return [route(s, extra_info=e, data_source_tasks=self.data_source_tasks)[1] for s, e in zip(sources, infos)]

    def _verify(self, verifiers: list[Any], texts: list[str], references: list[Any]) -> list[VerifyResult]:
        results: list[VerifyResult | None] = [None] * len(texts)
        groups: dict[int, list[int]] = {}
        for i, verifier in enumerate(verifiers):
            groups.setdefault(id(verifier), []).append(i)
        for indices in groups.values():
            verifier = verifiers[indices[0]]
            refs = [_code_reference(verifier, references[i]) for i in indices]
            for i, result in zip(indices, self._map(verifier, [texts[i] for i in indices], refs)):
                results[i] = result
        return [r for r in results if r is not None]

    def _map(self, verifier: Any, texts: list[str], references: list[Any]) -> list[VerifyResult]:
        from dapo_env.verifiers.pool import VerifierPool

        if self.workers == 0:
            with VerifierPool(0) as inline:
                return inline.map(verifier, texts, references)
        with self._lock:  # one batch at a time through the pool (it is not thread-safe)
            if self._pool is None:
                self._pool = VerifierPool(self.workers, timeout_s=self.timeout_s)
                weakref.finalize(self, self._pool.close)
            return self._pool.map(verifier, texts, references)


_TRL_KEYWORDS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})


def trl_reward_function(task_or_id: str | Task | None = None, *, answer_column: str = "answer",
                        reward_map: tuple[float, float] | None = None, workers: int = 0,
                        timeout_s: float = 10.0, data_source_tasks: Mapping[str, str] | None = None) -> TaskReward:
    """A TRL reward function that scores completions with a task's verifier.

    Args:
        task_or_id: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task`; ``None`` routes each row
            by its ``data_source`` (and ``extra_info["task"]``) like :func:`verl_compute_score`, so one
            function scores a dataset that mixes tasks.
        answer_column: the dataset column with the references (TRL passes every column but ``prompt``
            as a keyword, one value per completion). Without it, verl-style rows' ``reward_model``
            ``ground_truth`` is used; with neither, the call raises naming this argument.
        reward_map: ``(low, high)`` maps the score linearly (e.g. ``(-1.0, 1.0)`` for DAPO's rewards).
        workers: verifier worker processes; 0 (the default) verifies in the calling process, which is
            fastest for math and safe for code (each test run is its own sandboxed process with a time
            limit). ``workers > 0`` verifies code in parallel; the training script then needs an
            ``if __name__ == "__main__":`` guard (the workers start with ``forkserver``).
        timeout_s: per-item limit in worker processes.
        data_source_tasks: extra ``data_source -> task id`` routes (with ``task_or_id=None``).

    Returns:
        A :class:`TaskReward` named ``"<task>_reward"`` (TRL logs rewards under ``__name__``). It also
        logs ``rewards/<name>/accuracy`` through TRL's ``log_metric`` when TRL passes one.

    Example:
        >>> reward = trl_reward_function("Arithmetic-v0")
        >>> reward(prompts=["Compute 2+2."] * 2, completions=["Answer: 4", [{"role": "assistant", "content": "5"}]],
        ...        completion_ids=[[1, 2], [3]], answer=["4", "4"], trainer_state=None)
        [1.0, 0.0]
    """
    return TaskReward(task_or_id, answer_column=answer_column, reward_map=reward_map, workers=workers,
                      timeout_s=timeout_s, data_source_tasks=data_source_tasks)


# --- TRL: multi-turn environments (GRPOTrainer(environment_factory=...)) ---------------------------
# TRL 1.16's contract (trl/trainer/grpo_trainer.py): `environment_factory()` builds one instance per
# rollout (pooled and reused); `instance.reset(**row)` starts a rollout with the dataset row's columns as
# keywords and may return a string that TRL appends to the prompt's last user message; every other public
# function of the instance's class is a tool (JSON schema from its signature and Google docstring) that
# TRL calls with the model's parsed tool-call arguments, feeding the returned string back as a `tool`
# message, until the model answers without a tool call. Reward functions get the instances as
# `environments=`. A `get_reward()` method would add a second reward source, so the instances have none:
# `factory.reward` ends each episode with the final message and returns the episode return.
_RESERVED_TOOL_NAMES = frozenset({"reset", "get_reward"})
_EPISODE_OVER = "The episode is over: reply with your final message, without a tool call."

if __name__ != "dapo_env.interop":  # a module copy (see the end of this file): load the real module first, so
    import importlib as _importlib   # the dataclass below can name it (dataclasses look their module up)

    _importlib.import_module("dapo_env.interop")


@dataclass(frozen=True)
class ToolSpec:
    """The one tool a TRL environment offers: how a tool call becomes a turn of a multi-turn task.

    The tool ``name(argument: str) -> str`` plays one turn whose text is ``action.format(argument=value)``
    and returns the environment's reply.

    Attributes:
        name: the tool's name (an identifier; not ``reset`` or ``get_reward``, not starting with ``_``).
        argument: its one string argument.
        description: what the tool does (the first line of its docstring, in the tool's JSON schema).
        argument_description: the argument's description (``Args:`` in the docstring).
        action: a ``str.format`` template with ``{<argument>}``: the turn's text.

    Example:
        >>> spec = ToolSpec("guess", "number", "Submit one guess.", "an integer from 1 to n", "Answer: {number}")
        >>> spec.action.format(number=8)
        'Answer: 8'
    """

    name: str = "respond"
    argument: str = "message"
    description: str = "Send your next turn to the environment and return its reply."
    argument_description: str = "your turn, written as you would answer in plain text"
    action: str = "{message}"
    __module__ = "dapo_env.interop"  # also when this file runs as a module copy (it then re-exports the real one)

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name.startswith("_") or self.name in _RESERVED_TOOL_NAMES:
            raise ValueError(f"ToolSpec.name must be an identifier that does not start with '_' and is not "
                             f"{sorted(_RESERVED_TOOL_NAMES)}, got {self.name!r}")
        if not self.argument.isidentifier() or self.argument == "self":
            raise ValueError(f"ToolSpec.argument must be an identifier other than 'self', got {self.argument!r}")
        try:
            self.action.format(**{self.argument: ""})
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"ToolSpec.action must be a str.format template using only {{{self.argument}}}, got "
                             f"{self.action!r} ({type(exc).__name__}: {exc})") from None


def _tool_spec(task: Task, tool: ToolSpec | Mapping[str, str] | None) -> ToolSpec:
    """The tool: ``tool`` if given, else the task interaction's ``tool_spec`` (a mapping), else the default."""
    if tool is None:
        tool = getattr(task.interaction, "tool_spec", None)
    if tool is None:
        return ToolSpec()
    return tool if isinstance(tool, ToolSpec) else ToolSpec(**dict(tool))


class TRLEnvironment:
    """One rollout's environment for TRL's ``GRPOTrainer(environment_factory=...)``: a
    :class:`~dapo_env.multiturn.MultiTurnEnv` behind ``reset`` and one tool.

    Build instances with :func:`trl_environment_factory` (its class adds the tool method named by the
    :class:`ToolSpec`). Public functions are only ``reset`` and the tool, because TRL exposes every other
    public function as a tool too; the state is read through properties.

    Example:
        >>> factory = trl_environment_factory("GuessNumber-v0", tool=ToolSpec(
        ...     "guess", "number", "Submit one guess.", "an integer from 1 to 16", "Answer: {number}"))
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

    def reset(self, **row: Any) -> str | None:
        """Start a rollout: the row's ``problem_id`` picks the problem (rows of ``factory.dataset()`` have one),
        else the environment draws one. Returns the problem's prompt for TRL to append to the row's last user
        message, or ``None`` when that message already holds it."""
        task = self._factory.task
        source = row.get("data_source")
        if source is not None and str(source) != task.env_id:
            raise ValueError(f"a row of {source!r} reached the {task.env_id} environment: build the dataset with "
                             f"factory.dataset() (or pass a dict of factories keyed by the row's 'environment')")
        problem_id = row.get("problem_id")
        if problem_id is not None:
            prompt, _ = self._env.reset(options={"id": str(problem_id)})
        else:
            if self._seed is not None and _prompts_differ(self._env.problems, task):
                _warn_once(f"trl-rows:{task.env_id}", (
                    f"{task.env_id}: rows without 'problem_id': every rollout plays its own random problem, so a GRPO "
                    "group mixes problems; pass train_dataset=factory.dataset()"))
            prompt, _ = self._env.reset(seed=self._seed)
            self._seed = None
        return None if prompt in _last_user_text(row.get("prompt")) else prompt

    def _turn(self, text: str) -> str:
        """Play one turn (a tool call); the reply, with a note when the episode has ended."""
        if self.episode is None:
            raise RuntimeError("the environment was not reset: TRL calls reset(**row) before the first tool call")
        if self.episode.done:
            return _EPISODE_OVER
        reply, _, terminated, truncated, _ = self._env.step(text)
        return f"{reply}\n{_EPISODE_OVER}" if (terminated or truncated) and reply else (
            _EPISODE_OVER if terminated or truncated else reply)

    def _finish(self, completion: Any) -> None:
        """Play the completion's final message (an answer without a tool call) as the last turn, if the episode
        is still on and the message has text."""
        final = _final_message(completion)
        if self.episode is not None and not self.episode.done and final and final.strip():
            self._env.step(final)


def _prompts_differ(problems: Sequence[Any], task: Task) -> bool:
    return len({task.format_prompt(problems[i]) for i in range(min(len(problems), 4))}) > 1


def _last_user_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        return _content_text(users[-1].get("content")) if users else ""
    return ""


def _final_message(completion: Any) -> str | None:
    """The text of a TRL completion's final message when it is an assistant message without tool calls."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, Mapping) and last.get("role", "assistant") == "assistant" and not last.get("tool_calls"):
            return _content_text(last.get("content"))
    return None


def _tool_method(spec: ToolSpec) -> Callable[..., str]:
    """The tool as a function with the signature, annotations and Google docstring TRL's schema needs."""

    def tool(self: TRLEnvironment, **arguments: Any) -> str:
        if spec.argument not in arguments:
            return f"call {spec.name} with the argument {spec.argument!r}"
        return self._turn(spec.action.format(**{spec.argument: arguments[spec.argument]}))

    tool.__name__ = tool.__qualname__ = spec.name
    tool.__doc__ = (f"{spec.description}\n\nArgs:\n    {spec.argument}: {spec.argument_description}\n\n"
                    "Returns:\n    The environment's reply.")
    tool.__annotations__ = {spec.argument: str, "return": str}
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter(spec.argument, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)],
        return_annotation=str)
    return tool


_ENVIRONMENT_CLASSES: dict[tuple[str, ToolSpec], type] = {}
_classes_lock = threading.Lock()


def _environment_class(task_name: str, spec: ToolSpec) -> type:
    with _classes_lock:
        key = (task_name, spec)
        if key not in _ENVIRONMENT_CLASSES:
            _ENVIRONMENT_CLASSES[key] = type(f"{task_name}Environment", (TRLEnvironment,),
                                             {spec.name: _tool_method(spec), "__module__": __name__})
        return _ENVIRONMENT_CLASSES[key]


class EpisodeReward:
    """TRL reward function for :func:`trl_environment_factory` environments: plays each completion's final
    message (an answer without a tool call) as the episode's last turn, then returns the episode return
    (mapped by ``reward_map``). Logs ``rewards/<name>/solved`` and ``rewards/<name>/turns`` through TRL's
    ``log_metric``. A picklable object named ``"<task>_episode_reward"``."""

    def __init__(self, name: str, reward_map: tuple[float, float] | None = None) -> None:
        self.__name__ = name
        self.reward_map = reward_map

    def __repr__(self) -> str:
        return f"EpisodeReward({self.__name__!r}, reward_map={self.reward_map})"

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Sequence[Any] | None = None, environments: Sequence[Any] | None = None,
                 **columns: Any) -> list[float]:
        """One reward per completion, from the environment TRL ran it in (``environments=``)."""
        if environments is None or completions is None:
            raise TypeError(f"{self.__name__} needs completions= and environments=: pass "
                            "GRPOTrainer(environment_factory=factory, reward_funcs=[factory.reward])")
        if len(environments) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(environments)} environments")
        from dapo_env.episodes import shape_episode
        from dapo_env.shaping import Shaping

        shaping, rewards = Shaping(reward_map=self.reward_map), []
        for environment, completion in zip(environments, completions):
            if not isinstance(environment, TRLEnvironment):
                raise TypeError(f"{self.__name__} scores environments built by trl_environment_factory, got "
                                f"{type(environment).__name__}")
            environment._finish(completion)
            truncated = environment.episode is not None and environment.episode.truncated
            rewards.append(shape_episode(environment.episode_return, None, truncated, shaping)[0])
        log_metric = columns.get("log_metric")
        if callable(log_metric) and environments:
            log_metric(f"rewards/{self.__name__}/solved", sum(e.solved for e in environments) / len(environments))
            log_metric(f"rewards/{self.__name__}/turns",
                       sum(len(e.episode.turns) if e.episode else 0 for e in environments) / len(environments))
        return rewards


class TRLEnvironmentFactory:
    """``GRPOTrainer(environment_factory=factory, reward_funcs=[factory.reward], train_dataset=factory.dataset())``.

    Build it with :func:`trl_environment_factory`. Calling it (as TRL does, once per concurrent rollout) returns
    a new :class:`TRLEnvironment`. A picklable object (TRL's async trainer sends it to another process).
    """

    def __init__(self, task: str | Task, *, split: str | None = None, data_files: Any = None,
                 prompt_template: str | None = None, tool: ToolSpec | Mapping[str, str] | None = None,
                 max_turns: int | None = None, reward_map: tuple[float, float] | None = None, seed: int = 0,
                 **task_kwargs: Any) -> None:
        from dapo_env.multiturn import check_budget

        check_budget("max_turns", max_turns)
        if reward_map is not None:
            check_reward_map_args(*reward_map)
            reward_map = (float(reward_map[0]), float(reward_map[1]))
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        self.task = resolve_task(task, prompt_template)
        self.tool = _tool_spec(self.task, tool)
        self.split, self.data_files, self.max_turns, self.seed = split, data_files, max_turns, seed
        self.task_kwargs = dict(task_kwargs)
        self.reward = EpisodeReward(f"{self.task.name}_episode_reward", reward_map)
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
        return f"TRLEnvironmentFactory({self.task.env_id}, tool={self.tool.name}({self.tool.argument}))"

    def __call__(self) -> TRLEnvironment:
        with self._lock:
            number, self._made = self._made, self._made + 1
        return _environment_class(self.task.name, self.tool)(self, number)

    def dataset(self, *, limit: int | None = None, system_prompt: str | None = None) -> Any:
        """The task's problems as TRL rows (:func:`to_hf_dataset` with ``chat=True``): ``prompt`` holds the
        problem's prompt and ``problem_id`` lets ``reset`` play that problem, so the G rollouts of a row share it."""
        return to_hf_dataset(self.task, self.split, chat=True, system_prompt=system_prompt, limit=limit,
                             data_files=self.data_files, **self.task_kwargs)


def trl_environment_factory(task: str | Task, *, split: str | None = None, data_files: Any = None,
                            prompt_template: str | None = None, tool: ToolSpec | Mapping[str, str] | None = None,
                            max_turns: int | None = None, reward_map: tuple[float, float] | None = None,
                            seed: int = 0, **task_kwargs: Any) -> TRLEnvironmentFactory:
    """A multi-turn task as TRL's ``environment_factory`` (TRL 1.16's ``GRPOTrainer``).

    Each rollout gets a :class:`TRLEnvironment`: TRL calls ``reset(**row)``, then the environment's one tool
    whenever the model calls it; each call is one turn of the task's :class:`~dapo_env.multiturn.MultiTurnEnv`
    and returns the environment's reply. The model's final message (without a tool call) is the episode's last
    turn, played by ``factory.reward``, which returns the episode return. The tool is ``tool`` if given, else
    the task interaction's ``tool_spec`` (``run_tests(code)`` for MBPPFeedback, ``python(code)`` for the math
    tool tasks), else ``respond(message)`` (the turn's text as is).

    Args:
        task: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task` (multi-turn; a single-turn task plays
            one turn).
        split, data_files, prompt_template: as for :class:`~dapo_env.multiturn.MultiTurnEnv`.
        tool: a :class:`ToolSpec` (or a mapping of its fields).
        max_turns: truncate episodes after this many turns.
        reward_map: ``(low, high)``: map the episode return onto ``[low, high]`` (``(-1.0, 1.0)`` for DAPO).
        seed: rollouts of rows without ``problem_id`` draw problems from ``seed + k`` for the k-th instance.
        **task_kwargs: passed to ``task.load`` (knobs such as ``max_attempts=`` or ``n=``).

    Example:
        >>> from pathlib import Path
        >>> sample = Path(__file__).parents[1] / "examples" / "data" / "mbpp_sample.jsonl"  # a checkout's sample
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
                                 tool=tool, max_turns=max_turns, reward_map=reward_map, seed=seed, **task_kwargs)


# --- routing: data_source -> verifier -------------------------------------------------------------
# verl ``data_source`` values (verl's ``default_compute_score``, its example preprocessors and public
# verl-format datasets) -> the task whose verifier grades them.
VERL_DATA_SOURCES: dict[str, str] = {
    "math_dapo": "DAPOMath-v0",
    "math_dapo_reasoning": "DAPOMath-v0",
    "math": "DAPOMath-v0",  # verl grades "math" with its DAPO scorer ("Answer:" line)
    "DAPO-17k": "DAPOMath-v0",
    "BytedTsinghua-SIA/DAPO-Math-17k": "DAPOMath-v0",
    "openai/gsm8k": "GSM8K-v0",
    "gsm8k": "GSM8K-v0",
    "lighteval/MATH": "MATH500-v0",
    "DigitalLearningGmbH/MATH-lighteval": "MATH500-v0",
    "HuggingFaceH4/MATH-500": "MATH500-v0",
    "HuggingFaceH4/aime_2024": "AIME24-v0",
    "math-ai/aime25": "AIME25-v0",
    "aime25": "AIME25-v0",
    "aime2025": "AIME25-v0",
    "aime_2025": "AIME25-v0",
    "numina_aops_forum": "MATH500-v0",
    "numina_synthetic_math": "MATH500-v0",
    "numina_amc_aime": "MATH500-v0",
    "numina_synthetic_amc": "MATH500-v0",
    "numina_cn_k12": "MATH500-v0",
    "numina_olympiads": "MATH500-v0",
    "hiyouga/geometry3k": "MATH500-v0",
    "codecontests": "MBPP-v0",  # APPS-style {"inputs", "outputs", "fn_name"} tests are converted
    "apps": "MBPP-v0",
    "codeforces": "MBPP-v0",
    "taco": "MBPP-v0",
    "google-research-datasets/mbpp": "MBPP-v0",
    "openai/openai_humaneval": "HumanEval-v0",
}
_VERL_PREFIXES: tuple[tuple[str, str], ...] = (("aime", "AIME24-v0"),)  # verl: data_source.startswith("aime")
_warned: set[str] = set()
_warned_lock = threading.Lock()


class InteropWarning(UserWarning, RuntimeWarning):
    """A one-time warning from the TRL/verl shims (an unknown ``data_source``, an ignored keyword). Both a
    ``UserWarning`` and a ``RuntimeWarning``, so filters on either catch it."""


def register_data_source(data_source: str, task_or_id: str | Task, *, overwrite: bool = False) -> None:
    """Route a ``data_source`` to a task in this process. Processes that verl starts (Ray workers) do
    not see it: route there with ``reward_kwargs`` (``task=`` or ``data_source_tasks=``) instead."""
    env_id = get_task(task_or_id).env_id
    if data_source in VERL_DATA_SOURCES and not overwrite:
        raise ValueError(f"data_source {data_source!r} already maps to {VERL_DATA_SOURCES[data_source]}: pass overwrite=True")
    VERL_DATA_SOURCES[data_source] = env_id


def task_for_data_source(data_source: Any, *, task: str | None = None,
                         data_source_tasks: Mapping[str, str] | None = None, extra_info: Any = None) -> Task | None:
    """The task that grades a row, ``None`` when nothing names one.

    In order: ``task`` (one task for every row), ``data_source_tasks[data_source]``, the
    :data:`VERL_DATA_SOURCES` table (and verl's ``aime*`` prefix), ``data_source`` as a task name or id,
    ``extra_info["task"]`` (written by :func:`to_hf_dataset`).
    """
    if task is not None:
        return get_task(str(task))
    source = str(data_source) if data_source is not None else ""
    if data_source_tasks and source in data_source_tasks:
        return get_task(str(data_source_tasks[source]))
    if source in VERL_DATA_SOURCES:
        return get_task(VERL_DATA_SOURCES[source])
    try:
        return get_task(source)
    except KeyError:
        pass
    named = extra_info.get("task") if isinstance(extra_info, Mapping) else None
    if named is not None:
        try:
            return get_task(str(named))
        except KeyError:
            pass
    for prefix, env_id in _VERL_PREFIXES:
        if source.startswith(prefix):
            return get_task(env_id)
    return None


def route(data_source: Any, *, task: str | None = None, data_source_tasks: Mapping[str, str] | None = None,
          extra_info: Any = None) -> tuple[str, Any]:
    """``(task id, verifier)`` for a row; an unknown ``data_source`` gets the auto math verifier
    (``("math:auto", MathVerifier())``) and a one-time warning per name."""
    found = task_for_data_source(data_source, task=task, data_source_tasks=data_source_tasks, extra_info=extra_info)
    if found is not None:
        return found.env_id, found.verifier
    _warn_once(f"data_source:{data_source}", (
        f"dapo_env: unknown data_source {data_source!r}: graded as math with MathVerifier() (answer_format='auto'). "
        "Route it with reward_kwargs task='<task id>' or data_source_tasks={'<data_source>': '<task id>'} "
        "(known: dapo_env.interop.VERL_DATA_SOURCES and every task id)"))
    if "verifier" not in _AUTO_MATH:
        from dapo_env.verifiers.math import MathVerifier

        _AUTO_MATH["verifier"] = MathVerifier()
    return "math:auto", _AUTO_MATH["verifier"]


_AUTO_MATH: dict[str, Any] = {}


def _warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, InteropWarning, stacklevel=3)


def _is_code(verifier: Any) -> bool:
    from dapo_env.verifiers.code import CodeVerifier

    return isinstance(verifier, CodeVerifier)


def _ground_truth(reward_model: Any) -> Any:
    return reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else reward_model


def _code_reference(verifier: Any, reference: Any) -> Any:
    """For a code verifier, APPS-style tests (verl's ``codecontests``/``apps``/``taco`` rows) become CodeTests;
    anything else is passed on for the verifier's own ``prepare_reference``."""
    if not _is_code(verifier):
        return reference
    data = reference
    if isinstance(data, str) and data.lstrip().startswith("{"):
        try:
            data = json.loads(data)
        except ValueError:
            return reference
    if not isinstance(data, Mapping) or "inputs" not in data or "outputs" not in data:
        return reference
    return apps_tests(data)


def apps_tests(data: Mapping[str, Any]) -> CodeTests:
    """APPS/TACO-style tests ``{"inputs": [...], "outputs": [...], "fn_name"?: ...}`` as :class:`CodeTests`:
    stdin/stdout pairs, or with ``fn_name`` one call per input (the output may be wrapped in a list).

    Example:
        >>> apps_tests({"inputs": ["1 2\\n"], "outputs": ["3\\n"]}).stdio
        (('1 2\\n', '3\\n'),)
    """
    inputs, outputs = list(data["inputs"]), list(data["outputs"])
    if len(inputs) != len(outputs) or not inputs:
        raise InvalidReference(f"APPS-style tests need as many outputs as inputs (>= 1), got {len(inputs)} and {len(outputs)}")
    fn_name = data.get("fn_name")
    if fn_name:
        tests = tuple(
            f"_out = {fn_name}(*{list(args)!r})\n"
            f"assert _out == {expected!r} or [_out] == {expected!r} or (isinstance(_out, tuple) and list(_out) == {expected!r})"
            for args, expected in zip(inputs, outputs)
        )
        return CodeTests(tests=tests, entry_point=str(fn_name))

    def text(value: Any) -> str:
        return "\n".join(map(str, value)) if isinstance(value, list) else str(value)

    return CodeTests(stdio=tuple((text(i), text(o)) for i, o in zip(inputs, outputs)))


# --- verl -----------------------------------------------------------------------------------------
class VerlScore(dict):
    """verl's result dict ``{"score", "acc", "pred"}`` (like verl's own DAPO scorer). ``result[0]`` is the
    score too: verl's prime reward manager reads ``float(result[0])`` from anything not a number."""

    def __missing__(self, key: Any) -> Any:
        if key == 0:
            return self["score"]
        raise KeyError(key)


# Keywords verl itself may add to a compute_score call; accepted and ignored.
_VERL_EXTRA_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer", "sandbox_fusion_url",
                                "concurrent_semaphore", "memory_limit_mb"})


def verl_compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                       extra_info: Any = None, *, data_sources: Sequence[Any] | None = None,
                       solution_strs: Sequence[Any] | None = None, ground_truths: Sequence[Any] | None = None,
                       extra_infos: Sequence[Any] | None = None, task: str | None = None,
                       data_source_tasks: Mapping[str, str] | None = None,
                       reward_map: Sequence[float] | None = None, **kwargs: Any) -> VerlScore | list[VerlScore]:
    """verl's ``compute_score``: grade ``solution_str`` with the verifier ``data_source`` routes to.

    Per sample (naive, dapo, prime managers, the reward loop; positional or keyword) it returns a
    :class:`VerlScore` ``{"score": float, "acc": bool, "pred": str}``; with verl's batch-manager keywords
    (``data_sources=, solution_strs=, ground_truths=, extra_infos=``) a list of them.

    Routing (:func:`task_for_data_source`): ``task`` > ``data_source_tasks`` > verl's own names
    (:data:`VERL_DATA_SOURCES`) > a task id > ``extra_info["task"]``; anything else is graded by the
    auto math verifier after a one-time warning. ``task``, ``data_source_tasks`` and ``reward_map``
    (``(low, high)``, e.g. ``[-1, 1]`` for DAPO) come from verl's ``custom_reward_function.reward_kwargs``,
    so they reach every worker. A reference of a wrong form raises
    :class:`~dapo_env.types.InvalidReference` naming the data_source.

    Example:
        >>> verl_compute_score("openai/gsm8k", "... so she has 12 left.\\n#### 12", "12", {"index": 0})
        {'score': 1.0, 'acc': True, 'pred': '12'}
        >>> verl_compute_score("my_source", "Answer: 7", "7", {}, task="Arithmetic-v0", reward_map=[-1, 1])["score"]
        1.0
    """
    unknown = sorted(set(kwargs) - _VERL_EXTRA_KWARGS)
    if unknown:
        _warn_once(f"kwargs:{unknown}", f"verl_compute_score ignores the keyword(s) {unknown}; it takes task=, "
                   "data_source_tasks= and reward_map= (set them in custom_reward_function.reward_kwargs)")
    routing = {"task": task, "data_source_tasks": data_source_tasks}
    if reward_map is not None:
        reward_map = (float(reward_map[0]), float(reward_map[1]))
        check_reward_map_args(*reward_map)
    if solution_strs is not None:
        n = len(solution_strs)
        sources = list(data_sources) if data_sources is not None else [None] * n
        truths = list(ground_truths) if ground_truths is not None else [None] * n
        infos = list(extra_infos) if extra_infos is not None else [None] * n
        return [_score_one(s, str(r), g, e, routing, reward_map) for s, r, g, e in zip(sources, solution_strs, truths, infos)]
    if solution_str is None:
        raise TypeError("verl_compute_score needs solution_str (per sample) or solution_strs= (batch)")
    return _score_one(data_source, str(solution_str), ground_truth, extra_info, routing, reward_map)


def _score_one(data_source: Any, solution: str, ground_truth: Any, extra_info: Any, routing: dict[str, Any],
               reward_map: tuple[float, float] | None) -> VerlScore:
    task_id, verifier = route(data_source, extra_info=extra_info, **routing)
    try:
        result = verifier(solution, _code_reference(verifier, ground_truth))
    except InvalidReference as exc:
        raise InvalidReference(f"data_source {data_source!r} ({task_id}): {exc}") from None
    score = float(result.score)
    if reward_map is not None:
        score = map_reward(score, low=reward_map[0], high=reward_map[1])
    return VerlScore(score=score, acc=bool(result.correct), pred=result.extracted or "")


compute_score = verl_compute_score
"""verl's default function name, so ``custom_reward_function.name`` can stay ``compute_score``."""

__all__ = [
    "EpisodeReward",
    "InteropWarning",
    "MissingReferenceColumn",
    "TRLEnvironment",
    "TRLEnvironmentFactory",
    "TaskReward",
    "ToolSpec",
    "VERL_DATA_SOURCES",
    "VerlScore",
    "apps_tests",
    "completion_text",
    "compute_score",
    "reference_to_str",
    "register_data_source",
    "route",
    "task_for_data_source",
    "to_hf_dataset",
    "trl_environment_factory",
    "trl_reward_function",
    "verl_compute_score",
]

if __name__ != "dapo_env.interop":
    # Loaded from its file path as a module copy (verl's ``custom_reward_function.path`` runs
    # ``spec_from_file_location`` under a made-up name): hand out the installed module's objects instead,
    # so there is one routing table and everything pickles by reference (Ray, the prime manager's
    # process pool), which functions of an unimportable module copy cannot.
    import importlib as _importlib

    _canonical = _importlib.import_module("dapo_env.interop")
    globals().update({_name: getattr(_canonical, _name) for _name in __all__})
