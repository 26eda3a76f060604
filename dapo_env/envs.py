"""`ReasoningEnv`: one episode = one prompt (the observation) and one response (the action).

The environment draws a problem from its task on ``reset``, shows the formatted prompt, and on
``step`` verifies the response against the problem's reference answer. The answer never appears in
the observation or in any info dict before the step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from dapo_env.spaces import UnicodeText
from dapo_env.tasks import Task
from dapo_env.tasks.mixture import is_mixture, map_components, resolve_task_text
from dapo_env.types import Completion, Problem, VerifyResult
from dapo_env.verifiers.callable import as_verifier
from dapo_env.wrappers import apply_chat_template

MAX_TEXT_LENGTH = 10_000_000
"""The longest prompt or response string (characters) the text spaces accept."""


def resolve_task(task: str | Task, prompt_template: str | None = None) -> Task:
    """The :class:`Task` named by ``task`` (name, Gymnasium id or a mixture such as ``"GSM8K-v0:0.7,MATH500-v0:0.3"``,
    :mod:`dapo_env.tasks.mixture`), with ``prompt_template`` if given (in each task of a mixture).

    A plain function as the task's verifier (one returning a bool or a score, TRL style) is wrapped here
    with :func:`~dapo_env.verifiers.callable.as_verifier`, so every environment grades it properly.
    """
    resolved = resolve_task_text(task) if isinstance(task, str) else task
    if not isinstance(resolved, Task):
        raise TypeError(f"task must be a task name, a Gymnasium id or a Task, got {type(task).__name__}")
    if prompt_template is not None and is_mixture(resolved):  # each task's template
        resolved = map_components(resolved, lambda t: replace(t, prompt_template=prompt_template))
    elif prompt_template is not None:
        resolved = replace(resolved, prompt_template=prompt_template)
    verifier = as_verifier(resolved.verifier)
    return resolved if verifier is resolved.verifier else replace(resolved, verifier=verifier)


def render_prompt(task: Task, problem: Problem, tokenizer: Any = None, system_prompt: str | None = None) -> str:
    """The observation of ``problem``: the task's prompt template, then the chat template when a tokenizer
    is given (what :class:`~dapo_env.vector.GroupVectorEnv` shows and what held-out evaluation must show)."""
    prompt = task.format_prompt(problem)
    return prompt if tokenizer is None else apply_chat_template(tokenizer, prompt, system_prompt)


def load_problems(task: Task, split: str | None, data_files: Any, task_kwargs: dict[str, Any]) -> Sequence[Problem]:
    """Load a task's problems once; an empty split is an error that says what to pass instead."""
    problems = task.load(split=split, data_files=data_files, **task_kwargs)
    if len(problems) == 0:
        raise ValueError(
            f"{task.env_id} loaded no problems (split={split or task.split!r}, data_files={data_files!r}): "
            "pass data_files pointing at a non-empty file or another split"
        )
    return problems


def as_completion(action: Any) -> Completion:
    """Accept a ``str`` or a :class:`Completion` as a response; anything else is a TypeError."""
    if isinstance(action, Completion):
        return action
    if isinstance(action, str):
        return Completion(action)
    if isinstance(action, np.str_):
        return Completion(str(action))
    raise TypeError(f"a response must be a str or a dapo_env.Completion, got {type(action).__name__}")


def is_truncated(completion: Completion, max_response_tokens: int | None) -> bool:
    """Truncated when the engine says so (finish_reason "length") or the token count reached the cap.

    Never judged from the text: a response that merely looks unfinished is not truncated.
    """
    if completion.finish_reason == "length":
        return True
    length = completion.length
    return max_response_tokens is not None and length is not None and length >= max_response_tokens


def step_info(
    result: VerifyResult,
    completion: Completion,
    *,
    problem_id: str,
    task: str,
    max_response_tokens: int | None,
) -> dict[str, Any]:
    """The info dict of one verified response (shared by `ReasoningEnv` and `GroupVectorEnv`)."""
    score = float(result.score)
    return {
        "correct": bool(result.correct),
        "score": score,
        "extracted": result.extracted,
        "reason": result.reason,
        "response_length": completion.length,
        "response_truncated": is_truncated(completion, max_response_tokens),
        "reward_terms": {"verifier": score},
        "loss_mask": True,
        "problem_id": problem_id,
        "task": task,
    }


def pick_index(problems: Sequence[Problem], options: dict[str, Any] | None, rng: np.random.Generator,
               id_index: dict[str, int] | None) -> int:
    """A problem index: ``options["index"]``, ``options["id"]``, else a uniform draw from ``rng``."""
    n = len(problems)
    if options and "index" in options:
        index = options["index"]
        if not isinstance(index, (int, np.integer)) or not -n <= int(index) < n:
            raise IndexError(f"options['index'] must be an int in [0, {n}), got {index!r}")
        return int(index) % n
    if options and "id" in options:
        id_index = build_id_index(problems) if id_index is None else id_index
        key = str(options["id"])
        if key not in id_index:
            sample = list(id_index)[:5]
            raise KeyError(f"no problem with id {key!r}; ids look like {sample}")
        return id_index[key]
    return int(rng.integers(n))


def build_id_index(problems: Sequence[Problem]) -> dict[str, int]:
    """Problem id -> index (first occurrence wins)."""
    index: dict[str, int] = {}
    for i, problem in enumerate(problems):
        index.setdefault(problem.id, i)
    return index


def draw_problem_indices(problems: Sequence[Problem], num_prompts: int, rng: np.random.Generator,
                         options: Mapping[str, Any] | None, id_index: Callable[[], dict[str, int]],
                         difficulty: Any = None) -> np.ndarray:
    """The ``num_prompts`` problem indices of a group env's next prompts: ``options["indices"]`` or
    ``options["ids"]`` when given (checked), else drawn by ``difficulty`` (a
    :class:`~dapo_env.difficulty.DifficultySampler`) or uniformly without replacement.

    ``id_index`` returns the id -> index map (built lazily by the caller: only ``ids`` needs it).
    """
    n, b = len(problems), num_prompts
    if options and "indices" in options:
        indices = np.asarray(options["indices"], dtype=np.int64)
        if indices.shape != (b,) or (indices < 0).any() or (indices >= n).any():
            raise ValueError(f"options['indices'] must hold {b} problem indices in [0, {n}), got {options['indices']!r}")
        return indices
    if options and "ids" in options:
        known = id_index()
        ids = [str(i) for i in options["ids"]]
        missing = [i for i in ids if i not in known]
        if len(ids) != b or missing:
            raise ValueError(f"options['ids'] must name {b} known problem ids; unknown: {missing[:5]}")
        return np.array([known[i] for i in ids], dtype=np.int64)
    if difficulty is not None:
        return difficulty.draw(rng, b)
    return rng.choice(n, size=b, replace=b > n)


class ReasoningEnv(gym.Env[str, str]):
    """A reasoning task as a one-step Gymnasium environment.

    Args:
        task: a task name (``"GSM8K"``), Gymnasium id (``"GSM8K-v0"``) or a :class:`~dapo_env.tasks.Task`.
        split: the split to load (default: the task's).
        data_files: local data files for dataset tasks (JSONL/Parquet), passed to ``task.load``.
        prompt_template: overrides the task's ``str.format`` template (``{question}`` and metadata fields).
        max_response_tokens: responses with this many tokens or more count as truncated.
        render_mode: ``"ansi"`` (``render()`` returns the text) or ``"human"`` (prints it).
        **task_kwargs: passed to ``task.load`` (e.g. ``size=...`` for procedural tasks).

    Observation: the prompt, a ``str`` in :class:`~dapo_env.spaces.UnicodeText`. Action: the response,
    a ``str`` (or a :class:`~dapo_env.types.Completion`, which also carries the token count and finish
    reason). ``step`` returns the verifier's score as the reward, ``terminated=True`` and
    ``truncated=False`` (Gymnasium's ``truncated`` means a time limit; a response cut at the token
    limit is reported as ``info["response_truncated"]``).

    Example:
        >>> env = ReasoningEnv("Arithmetic-v0")
        >>> prompt, info = env.reset(seed=0)
        >>> _, reward, terminated, truncated, info = env.step("Answer: 0")
        >>> terminated, truncated, sorted(info["reward_terms"])
        (True, False, ['verifier'])
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(
        self,
        task: str | Task,
        *,
        split: str | None = None,
        data_files: Any = None,
        prompt_template: str | None = None,
        max_response_tokens: int | None = None,
        render_mode: str | None = None,
        **task_kwargs: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if max_response_tokens is not None and (not isinstance(max_response_tokens, int) or max_response_tokens < 1):
            raise ValueError(f"max_response_tokens must be a positive int or None, got {max_response_tokens!r}")
        self.task = resolve_task(task, prompt_template)
        self.problems = load_problems(self.task, split, data_files, task_kwargs)
        self.max_response_tokens = max_response_tokens
        self.render_mode = render_mode
        self.observation_space = UnicodeText(MAX_TEXT_LENGTH)
        self.action_space = UnicodeText(MAX_TEXT_LENGTH)
        self._id_index: dict[str, int] | None = None
        self._problem: Problem | None = None
        self._prompt = ""
        self._last_response: str | None = None

    @property
    def problem(self) -> Problem | None:
        """The current problem (including its answer), ``None`` between episodes."""
        return self._problem

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a problem (``options={"index": i}`` or ``{"id": "..."}`` picks one) and show its prompt."""
        super().reset(seed=seed)
        if options and "id" in options and self._id_index is None:
            self._id_index = build_id_index(self.problems)
        index = pick_index(self.problems, options, self.np_random, self._id_index)
        self._problem = self.problems[index]
        self._prompt = self.task.format_prompt(self._problem)
        self._last_response = None
        return self._prompt, {"problem_id": self._problem.id, "task": self.task.env_id}

    def step(self, action: str | Completion) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Verify the response; the episode ends (``terminated=True``)."""
        if self._problem is None:
            raise RuntimeError(
                "ReasoningEnv.step() called without a current prompt: call reset() first (each episode is one "
                "prompt and one response, so every step needs its own reset)"
            )
        completion = as_completion(action)
        problem, self._problem = self._problem, None
        from dapo_env.verifiers.pool import verify_batch  # lazy, as in the group env

        result = verify_batch(self.task.verifier, [completion.text], [problem.answer], workers=0)[0]  # the inline path
        info = step_info(result, completion, problem_id=problem.id, task=self.task.env_id,
                         max_response_tokens=self.max_response_tokens)
        self._last_response = completion.text
        if self.render_mode == "human":
            print(self.render_text())
        return self._prompt, float(result.score), True, False, info

    def render_text(self) -> str:
        """The current prompt and, after a step, the response."""
        if self._last_response is None:
            return self._prompt
        return f"{self._prompt}\n--- response ---\n{self._last_response}"

    def render(self) -> str | None:  # type: ignore[override]
        """``"ansi"``: return the prompt (and response); ``"human"``: print it."""
        if self.render_mode == "ansi":
            return self.render_text()
        if self.render_mode == "human":
            print(self.render_text())
        return None


__all__ = ["MAX_TEXT_LENGTH", "ReasoningEnv", "as_completion", "build_id_index", "draw_problem_indices", "is_truncated", "render_prompt", "resolve_task",
           "step_info"]
