"""`GroupVectorEnv`: B prompts x G responses per step, verified in a persistent worker pool.

Its native output is a list of :class:`~dapo_env.types.Group` (:meth:`GroupVectorEnv.step_groups`, and
:meth:`GroupVectorEnv.rollout` for a ``generate`` callable): what group-relative learners and
:class:`~dapo_env.sampler.DynamicSampler` consume. ``step()`` is the thin Gymnasium adapter that stacks
the groups into vector infos. Every sub-environment is a one-step episode, so the env resets in the same
step (Gymnasium's ``AutoresetMode.SAME_STEP``): after a step the current prompts are already the next
B*G ones and no generation is wasted on a reset step. Shaping (overlong penalty, overlong filter, reward
map) is a :class:`~dapo_env.shaping.Shaping` applied by :func:`~dapo_env.shaping.shape`, the function
the single-env wrappers use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from dapo_env.difficulty import DifficultySampler, resolve_difficulty
from dapo_env.envs import (
    MAX_TEXT_LENGTH,
    as_completion,
    build_id_index,
    draw_problem_indices,
    load_problems,
    render_prompt,
    resolve_task,
    step_info,
)
from dapo_env.shaping import OverlongPenalty, Shaping, shape
from dapo_env.spaces import UnicodeText
from dapo_env.tasks import Task
from dapo_env.types import Completion, Group, Problem
from dapo_env.wrappers import ChatTokenizer

# Per-sample info keys whose values are Python objects (str / None) rather than numbers.
_OBJECT_KEYS = ("extracted", "reason", "problem_id", "task", "response_length")


def group_stats(correct: np.ndarray) -> dict[str, np.ndarray]:
    """Per-group statistics, broadcast to every sample of the group.

    Args:
        correct: bool array of shape (B, G), the verifier's verdicts.

    Returns:
        ``group_accuracy`` (float), ``group_num_correct`` (int) and ``group_informative`` (bool,
        ``0 < #correct < G``), each of shape (B*G,).
    """
    num_groups, group_size = correct.shape
    num_correct = correct.sum(axis=1)  # (B,)
    informative = (num_correct > 0) & (num_correct < group_size)  # (B,)
    return {
        "group_accuracy": np.repeat(num_correct / group_size, group_size),  # (B*G,)
        "group_num_correct": np.repeat(num_correct, group_size),
        "group_informative": np.repeat(informative, group_size),
    }


def to_vector_infos(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Stack per-sample info dicts into Gymnasium vector infos: ``key -> array`` plus ``_key`` masks.

    Nested dicts (``reward_terms``) become nested vector infos. Every sample has every key here.
    """
    n = len(infos)
    out: dict[str, Any] = {}
    for key in infos[0]:
        values = [info[key] for info in infos]
        if isinstance(values[0], Mapping):
            out[key] = to_vector_infos(values)
        else:
            if key in _OBJECT_KEYS:
                array = np.empty(n, dtype=object)
                array[:] = values
            else:
                array = np.asarray(values)
            out[key] = array
        out[f"_{key}"] = np.ones(n, dtype=bool)
    return out


class GroupVectorEnv(gym.vector.VectorEnv):
    """B prompts, each repeated G times (group-major), as one vector environment.

    Args:
        task: task name, Gymnasium id or :class:`~dapo_env.tasks.Task`.
        num_envs: B*G, the number of responses per step.
        group_size: G, responses per prompt; must divide ``num_envs``.
        split, data_files, prompt_template, max_response_tokens: as for :class:`~dapo_env.envs.ReasoningEnv`.
        workers: verifier worker processes; 0 (default) verifies in this process, the fastest choice
            for the math fast path (see ``benchmarks/bench_env.py``); use workers > 0 for slow
            verifiers (code, symbolic maths) to get parallelism and a per-item time limit.
        timeout_s: per-response time limit in worker processes (``workers > 0``).
        reward_map, overlong_penalty, overlong_filter: the fields of the env's
            :class:`~dapo_env.shaping.Shaping` (``reward_map=(-1.0, 1.0)`` is DAPO's; ``overlong_penalty``
            an :class:`~dapo_env.shaping.OverlongPenalty`, a dict of its fields or ``True``).
        chat_template: a tokenizer with ``apply_chat_template``; observations are chat-formatted.
        system_prompt: system message for the chat template.
        render_mode: unused; accepted for Gymnasium's ``make_vec``.
        difficulty: difficulty-aware prompt draws (:mod:`dapo_env.difficulty`): ``True`` for the default
            :class:`~dapo_env.difficulty.DifficultySampler`, or one built for this env's problems and G. Each
            step's group counts update it; draws favour problems likely to give an informative group (never
            below its floor). ``None`` (default) draws uniformly.
        **task_kwargs: passed to ``task.load``.

    ``step_groups(responses)`` takes B*G ``str`` or :class:`~dapo_env.types.Completion` in observation order
    and returns the B verified, shaped :class:`~dapo_env.types.Group` s; ``rollout(generate)`` shows the
    current prompts to ``generate`` and steps its responses. ``step(responses)`` returns
    ``(next_prompts, rewards, terminated, truncated, infos)``: ``infos`` holds, per sample, every key of
    ``ReasoningEnv``'s step info plus ``group_id`` (0..B-1 within the step), ``group_accuracy``,
    ``group_num_correct``, ``group_informative``, ``final_obs`` (the prompts the responses answered) and
    ``next_problem_id``.

    Example:
        >>> env = GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4)
        >>> prompts, infos = env.reset(seed=0)
        >>> prompts[0] == prompts[3] != prompts[4]
        True
        >>> groups = env.step_groups(["Answer: 0"] * 8)
        >>> len(groups), groups[0].size, groups[0].prompt == prompts[0]
        (2, 4, True)
        >>> _, rewards, *_ , infos = env.step(["Answer: 0"] * 8)
        >>> rewards.shape, infos["group_id"].tolist()
        ((8,), [0, 0, 0, 0, 1, 1, 1, 1])
        >>> env.close()
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        task: str | Task,
        num_envs: int,
        group_size: int = 1,
        *,
        split: str | None = None,
        data_files: Any = None,
        prompt_template: str | None = None,
        max_response_tokens: int | None = None,
        workers: int = 0,
        timeout_s: float = 10.0,
        reward_map: tuple[float, float] | None = None,
        overlong_penalty: OverlongPenalty | Mapping[str, Any] | bool | None = None,
        overlong_filter: bool = False,
        chat_template: ChatTokenizer | None = None,
        system_prompt: str | None = None,
        render_mode: str | None = None,
        difficulty: DifficultySampler | bool | None = None,
        **task_kwargs: Any,
    ) -> None:
        task_kwargs.pop("max_episode_steps", None)  # make_vec forwards a spec's limit; episodes are one step
        if not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive int (G responses per prompt), got {group_size!r}")
        if not isinstance(num_envs, int) or num_envs < 1 or num_envs % group_size:
            raise ValueError(
                f"num_envs ({num_envs!r}) must be a positive multiple of group_size ({group_size}): "
                f"pass num_envs = B * group_size for B prompts per step"
            )
        if max_response_tokens is not None and (not isinstance(max_response_tokens, int) or max_response_tokens < 1):
            raise ValueError(f"max_response_tokens must be a positive int or None, got {max_response_tokens!r}")
        self.shaping = Shaping(reward_map=reward_map, overlong_penalty=overlong_penalty, overlong_filter=overlong_filter)
        if chat_template is not None and not callable(getattr(chat_template, "apply_chat_template", None)):
            raise TypeError(f"chat_template must be a tokenizer with apply_chat_template, got {type(chat_template).__name__}")
        self.task = resolve_task(task, prompt_template)
        self.problems: Sequence[Problem] = load_problems(self.task, split, data_files, task_kwargs)
        self.num_envs = num_envs
        self.group_size = group_size
        self.num_prompts = num_envs // group_size
        self.max_response_tokens = max_response_tokens
        self.chat_template = chat_template
        self.system_prompt = system_prompt
        self.render_mode = render_mode
        self.single_observation_space = UnicodeText(MAX_TEXT_LENGTH)
        self.single_action_space = UnicodeText(MAX_TEXT_LENGTH)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.difficulty = resolve_difficulty(difficulty, len(self.problems), group_size)
        self._indices: np.ndarray | None = None  # (B,) problem indices of the current prompts
        self._prompts: tuple[str, ...] = ()
        self._id_index: dict[str, int] | None = None
        from dapo_env.verifiers.pool import VerifierPool  # lazy: the pool module starts nothing on import

        self._pool = VerifierPool(workers, timeout_s=timeout_s)

    # -- prompts -----------------------------------------------------------------------------------
    @property
    def needs_reset(self) -> bool:
        """True until the first ``reset``."""
        return self._indices is None

    @property
    def prompts(self) -> tuple[str, ...]:
        """The current B*G observations (group-major)."""
        return self._prompts

    def _draw(self, options: Mapping[str, Any] | None) -> np.ndarray:
        """B problem indices: from ``options`` (``indices`` / ``ids``), by difficulty, or drawn without replacement."""
        return draw_problem_indices(self.problems, self.num_prompts, self.np_random, options, self._ids, self.difficulty)

    def _ids(self) -> dict[str, int]:
        if self._id_index is None:
            self._id_index = build_id_index(self.problems)
        return self._id_index

    def _show(self, indices: np.ndarray) -> None:
        self._indices = indices
        prompts: list[str] = []
        for index in indices:
            prompt = render_prompt(self.task, self.problems[int(index)], self.chat_template, self.system_prompt)
            prompts.extend([prompt] * self.group_size)  # G consecutive copies
        self._prompts = tuple(prompts)

    def _problem_ids(self) -> np.ndarray:
        """(B*G,) object array: the current prompts' problem ids."""
        ids = np.empty(self.num_envs, dtype=object)
        ids[:] = [self.problems[int(i)].id for i in np.repeat(self._indices, self.group_size)]
        return ids

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Draw B prompts (seeded) and return them, each repeated G times."""
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        self._show(self._draw(options))
        group_id = np.repeat(np.arange(self.num_prompts), self.group_size)
        ones = np.ones(self.num_envs, dtype=bool)
        return self._prompts, {"problem_id": self._problem_ids(), "_problem_id": ones, "group_id": group_id,
                               "_group_id": ones}

    # -- stepping ----------------------------------------------------------------------------------
    def step_groups(self, responses: Sequence[str | Completion]) -> list[Group]:
        """Verify and shape B*G responses (in observation order), show the next B prompts, return B groups."""
        if self._indices is None:
            raise RuntimeError("GroupVectorEnv.step() called before reset(): call reset(seed=...) first")
        if len(responses) != self.num_envs:
            raise ValueError(f"step expects {self.num_envs} responses (B*G, in observation order), got {len(responses)}")
        completions = [as_completion(r) for r in responses]
        problems = [self.problems[int(i)] for i in np.repeat(self._indices, self.group_size)]  # (B*G,)
        results = self._pool.map(self.task.verifier, [c.text for c in completions], [p.answer for p in problems])
        groups = []
        for start in range(0, self.num_envs, self.group_size):
            span = range(start, start + self.group_size)
            infos, rewards, correct, loss_mask = [], [], [], []
            for i in span:
                info = step_info(results[i], completions[i], problem_id=problems[i].id, task=self.task.env_id,
                                 max_response_tokens=self.max_response_tokens)
                info, _ = shape(info, self.shaping)
                rewards.append(float(sum(info["reward_terms"].values())))
                correct.append(info.pop("correct"))
                loss_mask.append(info.pop("loss_mask"))
                infos.append(info)
            groups.append(Group(problem_id=problems[start].id, prompt=self._prompts[start],
                                completions=tuple(completions[i] for i in span), rewards=tuple(rewards),
                                correct=tuple(correct), loss_mask=tuple(loss_mask), infos=tuple(infos)))
        if self.difficulty is not None:
            self.difficulty.update(self._indices, [g.num_correct for g in groups])
        self._show(self._draw(None))  # same-step autoreset: the next prompts are shown now
        return groups

    def rollout(self, generate: Callable[[list[str]], Sequence[str | Completion]]) -> list[Group]:
        """One generation round: ``generate(prompts)`` on the current B*G prompts (group-major), then
        :meth:`step_groups` on its responses (one per prompt, same order)."""
        if self.needs_reset:
            raise RuntimeError("GroupVectorEnv.rollout() called before reset(): call reset(seed=...) first")
        prompts = list(self._prompts)
        responses = generate(prompts)
        if len(responses) != len(prompts):
            raise ValueError(f"generate returned {len(responses)} responses for {len(prompts)} prompts: return one "
                             "per prompt, in the same (group-major) order")
        return self.step_groups(responses)

    def step(self, actions: Sequence[str | Completion]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Gymnasium's form of :meth:`step_groups`: the next prompts, (B*G,) rewards and vector infos."""
        answered = self._prompts
        groups = self.step_groups(actions)
        per_sample = [{**info, "correct": ok, "loss_mask": keep}
                      for g in groups for info, ok, keep in zip(g.infos, g.correct, g.loss_mask)]
        rewards = np.array([r for g in groups for r in g.rewards], dtype=np.float64)
        infos = to_vector_infos(per_sample)
        ones = np.ones(self.num_envs, dtype=bool)
        correct = np.array([g.correct for g in groups], dtype=bool)  # (B, G)
        extra = {"group_id": np.repeat(np.arange(self.num_prompts), self.group_size), **group_stats(correct)}
        final_obs = np.empty(self.num_envs, dtype=object)
        final_obs[:] = answered
        extra.update(final_obs=final_obs, next_problem_id=self._problem_ids())
        for key, value in extra.items():
            infos[key], infos[f"_{key}"] = value, ones
        terminated = np.ones(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        return self._prompts, rewards, terminated, truncated, infos

    # -- state -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The RNG state, current prompts' problem indices and difficulty beliefs (JSON-serialisable) for
        exact resume."""
        return {
            "rng": self.np_random.bit_generator.state,
            "indices": None if self._indices is None else [int(i) for i in self._indices],
            "difficulty": None if self.difficulty is None else self.difficulty.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: the next draws and the current prompts match the saved run."""
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = dict(state["rng"])
        self._np_random = rng
        if self.difficulty is not None and state.get("difficulty") is not None:
            self.difficulty.load_state_dict(state["difficulty"])
        if state["indices"] is None:
            self._indices, self._prompts = None, ()
        else:
            self._show(np.asarray(state["indices"], dtype=np.int64))

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the verifier pool."""
        self._pool.close()


__all__ = ["GroupVectorEnv", "group_stats", "to_vector_infos"]
