"""The prompt schedule of a group env: which B problems the next rollout shows, and its resumable state.

Both group envs (:class:`~dapo_env.vector.GroupVectorEnv`, one response per sample, and
:class:`~dapo_env.episodes.EpisodeGroupEnv`, one episode per sample) and the learner's asynchronous rollout
source draw their problems from a :class:`PromptSchedule`: the task's problems, one seeded generator, the
B problem indices on show, the optional difficulty beliefs (:mod:`dapo_env.difficulty`) and the id index.
Its :meth:`~PromptSchedule.state_dict` is the whole of a group env's prompt state, so a resumed schedule
shows the same prompts as an uninterrupted one.

Vocabulary: B prompts per rollout (``num_prompts``), each repeated G times (``group_size``) in group-major
order; N = B * G samples (``num_envs``, Gymnasium's name for the vector width).

Example:
    >>> from dapo_env.tasks import get_task
    >>> problems = get_task("Arithmetic-v0").load(size=20)
    >>> schedule = PromptSchedule(problems, num_prompts=3, group_size=2)
    >>> first = schedule.reset(seed=0).tolist()
    >>> state = schedule.state_dict()
    >>> after = schedule.advance().tolist()
    >>> schedule.load_state_dict(state)  # back to the saved point: the same next draw
    >>> schedule.indices.tolist() == first and schedule.advance().tolist() == after
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.utils import seeding

from dapo_env.difficulty import DifficultySampler, resolve_difficulty
from dapo_env.envs import build_id_index, draw_problem_indices
from dapo_env.tasks import Task
from dapo_env.tasks.mixture import Strata, mixture_strata
from dapo_env.types import Problem


def _check_positive(name: str, value: Any, meaning: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int ({meaning}), got {value!r}")


def num_prompts_of(num_envs: Any, group_size: Any) -> int:
    """B = ``num_envs / group_size``, after checking both sizes (errors name the fix).

    Example:
        >>> num_prompts_of(8, 4)
        2
    """
    _check_positive("group_size", group_size, "G samples per prompt")
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1 or num_envs % group_size:
        raise ValueError(f"num_envs ({num_envs!r}) must be a positive multiple of group_size ({group_size}): "
                         "pass num_envs = B * group_size for B prompts per rollout")
    return num_envs // group_size


def deprecated_num_prompts(num_envs: int | None, group_size: int, num_prompts: int | None) -> int:
    """``num_envs`` from the older ``num_prompts=B`` keyword of :class:`~dapo_env.episodes.EpisodeGroupEnv`
    (a ``DeprecationWarning``; both group envs now take ``num_envs = B * group_size``)."""
    if num_prompts is None:
        if num_envs is None:
            raise TypeError("pass num_envs: B * group_size samples per rollout")
        return num_envs
    warnings.warn("EpisodeGroupEnv(num_prompts=B) is deprecated: pass num_envs=B * group_size, as for GroupVectorEnv",
                  DeprecationWarning, stacklevel=3)
    if num_envs is not None:
        raise ValueError("pass num_envs (B * group_size) or the deprecated num_prompts, not both")
    _check_positive("num_prompts", num_prompts, "B prompts per rollout")
    return num_prompts * group_size if isinstance(group_size, int) else num_prompts


class PromptSchedule:
    """Which B problems a group env shows: seeded draws (uniform or by difficulty), options, resumable state.

    Args:
        problems: the task's problems (loaded once).
        num_prompts: B, problems per rollout.
        group_size: G, samples per problem (the difficulty beliefs count groups of G).
        difficulty: ``True`` (the default :class:`~dapo_env.difficulty.DifficultySampler`), a sampler built for
            these problems and G, or ``None`` (uniform draws without replacement).
        strata: a mixture's problems by task and the tasks' weights (:func:`~dapo_env.tasks.mixture.mixture_strata`):
            each group's task is drawn by weight, then its problem within the task (uniformly or by
            ``difficulty``). ``None``: draws over all problems.

    The generator starts from fresh entropy; :meth:`reset` with a seed makes the draws reproducible.
    """

    def __init__(self, problems: Sequence[Problem], num_prompts: int, group_size: int, *,
                 difficulty: DifficultySampler | bool | None = None, strata: Strata | None = None) -> None:
        if len(problems) == 0:
            raise ValueError("a prompt schedule needs at least one problem: load a non-empty split")
        _check_positive("num_prompts", num_prompts, "B prompts per rollout")
        _check_positive("group_size", group_size, "G samples per prompt")
        self.problems = problems
        self.num_prompts, self.group_size = num_prompts, group_size
        self.difficulty = resolve_difficulty(difficulty, len(problems), group_size)
        self.strata = strata
        self.rng, self.seed = seeding.np_random(None)
        self._indices: np.ndarray | None = None  # (B,) problem indices on show
        self._id_index: dict[str, int] | None = None

    @property
    def needs_reset(self) -> bool:
        """True until the first :meth:`reset` (or a restored state that showed nothing)."""
        return self._indices is None

    @property
    def indices(self) -> np.ndarray | None:
        """(B,) problem indices on show (a copy), ``None`` before the first :meth:`reset`."""
        return None if self._indices is None else self._indices.copy()

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> np.ndarray:
        """Re-seed (when ``seed`` is given) and show the next B problems: ``options["indices"]`` or
        ``options["ids"]`` when given, else drawn (by difficulty, or uniformly without replacement).
        Returns their (B,) indices."""
        if seed is not None:
            self.rng, self.seed = seeding.np_random(seed)
        draws = self.difficulty if self.strata is None else _StrataDraws(self.strata, self.difficulty)
        self._indices = draw_problem_indices(self.problems, self.num_prompts, self.rng, options, self.id_index, draws)
        return self.indices

    def advance(self, num_correct: Sequence[int] | None = None) -> np.ndarray:
        """The rollout of the problems on show is over: feed its groups' ``num_correct`` (B counts, in order)
        to the difficulty beliefs when there are any, then show the next draw. Returns its (B,) indices."""
        if self._indices is None:
            raise RuntimeError("PromptSchedule.advance() called before reset(): call reset(seed=...) first")
        if num_correct is not None and self.difficulty is not None:
            self.difficulty.update(self._indices, list(num_correct))
        return self.reset()

    def current(self) -> list[Problem]:
        """The B problems on show, in group order."""
        if self._indices is None:
            raise RuntimeError("the schedule shows no problems before reset(): call reset(seed=...) first")
        return [self.problems[int(i)] for i in self._indices]

    def problem_ids(self) -> tuple[str, ...]:
        """The B problem ids on show, in group order (``()`` before the first :meth:`reset`)."""
        return () if self._indices is None else tuple(p.id for p in self.current())

    def id_index(self) -> dict[str, int]:
        """Problem id -> index (built on first use)."""
        if self._id_index is None:
            self._id_index = build_id_index(self.problems)
        return self._id_index

    def state_dict(self) -> dict[str, Any]:
        """The generator's state, the indices on show and the difficulty beliefs (JSON-serialisable):
        ``{"rng", "indices", "difficulty"}``."""
        return {"rng": self.rng.bit_generator.state,
                "indices": None if self._indices is None else [int(i) for i in self._indices],
                "difficulty": None if self.difficulty is None else self.difficulty.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: the same problems on show and the same later draws as the saved run."""
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = dict(state["rng"])
        self.rng, self.seed = rng, -1  # -1: restored, the seed is unknown (Gymnasium's convention)
        if self.difficulty is not None and state.get("difficulty") is not None:
            self.difficulty.load_state_dict(state["difficulty"])
        self._indices = None if state["indices"] is None else np.asarray(state["indices"], dtype=np.int64)


class _StrataDraws:
    """A mixture's draws in the place of a difficulty sampler's ``draw(rng, size)``."""

    def __init__(self, strata: Strata, difficulty: DifficultySampler | None) -> None:
        self.strata, self.difficulty = strata, difficulty

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.strata.draw(rng, size, self.difficulty)


def schedule_for(task: Task, problems: Sequence[Problem], num_prompts: int, group_size: int, *,
                 difficulty: DifficultySampler | bool | None = None) -> PromptSchedule:
    """The prompt schedule of ``task``'s loaded ``problems``: a mixture's groups are drawn task by weight
    (:func:`~dapo_env.tasks.mixture.mixture_strata`), any other task's over all its problems. What every group
    env and the asynchronous source build.

    Example:
        >>> from dapo_env.tasks.mixture import resolve_task_text
        >>> mix = resolve_task_text("Arithmetic-v0:0.5,Largest-v0:0.5")
        >>> schedule = schedule_for(mix, mix.load(size=20), num_prompts=4, group_size=2)
        >>> sorted({p.id.split("/")[0] for p in (schedule.reset(seed=0), schedule.current())[1]})
        ['Arithmetic-v0', 'Largest-v0']
    """
    return PromptSchedule(problems, num_prompts, group_size, difficulty=difficulty,
                          strata=mixture_strata(task, problems))


__all__ = ["PromptSchedule", "deprecated_num_prompts", "num_prompts_of", "schedule_for"]
