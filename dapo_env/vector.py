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

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from dapo_env.difficulty import DifficultySampler
from dapo_env.envs import MAX_TEXT_LENGTH, as_completion, load_problems, render_prompt, resolve_task, step_info
from dapo_env.schedule import num_prompts_of, schedule_for
from dapo_env.shaping import OverlongPenalty, Shaping, shape
from dapo_env.spaces import UnicodeText
from dapo_env.tasks import Task
from dapo_env.tasks.mixture import sample_task
from dapo_env.types import Completion, Group, RolloutBatch
from dapo_env.vector_infos import group_stats, to_vector_infos
from dapo_env.wrappers import ChatTokenizer

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
        tokenizer: a tokenizer with ``apply_chat_template``; observations are chat-formatted (as for
            ``EpisodeGroupEnv``; ``chat_template=`` is its deprecated name, still accepted).
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

    def __init__(self, task: str | Task, num_envs: int, group_size: int = 1, *, split: str | None = None,
                 data_files: Any = None, prompt_template: str | None = None, max_response_tokens: int | None = None,
                 workers: int = 0, timeout_s: float = 10.0, reward_map: tuple[float, float] | None = None,
                 overlong_penalty: OverlongPenalty | Mapping[str, Any] | bool | None = None,
                 overlong_filter: bool = False, tokenizer: ChatTokenizer | None = None, system_prompt: str | None = None,
                 render_mode: str | None = None, difficulty: DifficultySampler | bool | None = None,
                 **task_kwargs: Any) -> None:
        task_kwargs.pop("max_episode_steps", None)  # make_vec forwards a spec's limit; episodes are one step
        num_prompts = num_prompts_of(num_envs, group_size)
        if max_response_tokens is not None and (not isinstance(max_response_tokens, int) or max_response_tokens < 1):
            raise ValueError(f"max_response_tokens must be a positive int or None, got {max_response_tokens!r}")
        self.shaping = Shaping(reward_map=reward_map, overlong_penalty=overlong_penalty, overlong_filter=overlong_filter)
        if (chat_template := task_kwargs.pop("chat_template", None)) is not None:
            warnings.warn("GroupVectorEnv(chat_template=tokenizer) is deprecated: pass tokenizer=tokenizer, as for "
                          "EpisodeGroupEnv", DeprecationWarning, stacklevel=2)
            tokenizer = chat_template if tokenizer is None else tokenizer
        if tokenizer is not None and not callable(getattr(tokenizer, "apply_chat_template", None)):
            raise TypeError(f"tokenizer must be a tokenizer with apply_chat_template, got {type(tokenizer).__name__}")
        self.task = resolve_task(task, prompt_template)
        self.schedule = schedule_for(self.task, load_problems(self.task, split, data_files, task_kwargs), num_prompts,
                                     group_size, difficulty=difficulty)
        self.problems, self.difficulty = self.schedule.problems, self.schedule.difficulty  # the schedule's
        self.num_envs, self.group_size, self.num_prompts = num_envs, group_size, num_prompts
        self.max_response_tokens = max_response_tokens
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.render_mode = render_mode
        self.single_observation_space = UnicodeText(MAX_TEXT_LENGTH)
        self.single_action_space = UnicodeText(MAX_TEXT_LENGTH)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._prompts: tuple[str, ...] = ()
        from dapo_env.verifiers.pool import VerifierPool  # lazy: the pool module starts nothing on import

        self._pool = VerifierPool(workers, timeout_s=timeout_s)

    # -- prompts (the schedule's) ------------------------------------------------------------------
    @property
    def np_random(self) -> np.random.Generator:  # type: ignore[override]
        """The schedule's generator (Gymnasium's name for it)."""
        return self.schedule.rng

    @property
    def np_random_seed(self) -> int | None:  # type: ignore[override]
        return self.schedule.seed

    @property
    def needs_reset(self) -> bool:
        """True until the first ``reset``."""
        return self.schedule.needs_reset

    @property
    def prompts(self) -> tuple[str, ...]:
        """The current B*G observations (group-major)."""
        return self._prompts

    def _render(self) -> None:
        """Render the schedule's B problems, each repeated G times (group-major)."""
        prompts: list[str] = []
        for problem in self.schedule.current():
            prompts.extend([render_prompt(self.task, problem, self.tokenizer, self.system_prompt)] * self.group_size)
        self._prompts = tuple(prompts)

    def _problem_ids(self) -> np.ndarray:
        """(B*G,) object array: the current prompts' problem ids."""
        ids = np.empty(self.num_envs, dtype=object)
        ids[:] = [i for i in self.schedule.problem_ids() for _ in range(self.group_size)]
        return ids

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Draw B prompts (seeded; ``options`` ``indices`` / ``ids`` pick them) and return them, each repeated G times."""
        self.schedule.reset(seed=seed, options=options)
        self._render()
        group_id = np.repeat(np.arange(self.num_prompts), self.group_size)
        ones = np.ones(self.num_envs, dtype=bool)
        return self._prompts, {"problem_id": self._problem_ids(), "_problem_id": ones, "group_id": group_id,
                               "_group_id": ones}

    # -- stepping ----------------------------------------------------------------------------------
    def step_groups(self, responses: Sequence[str | Completion]) -> list[Group]:
        """Verify and shape B*G responses (in observation order), show the next B prompts, return B groups."""
        if self.needs_reset:
            raise RuntimeError("GroupVectorEnv.step() called before reset(): call reset(seed=...) first")
        if len(responses) != self.num_envs:
            raise ValueError(f"step expects {self.num_envs} responses (B*G, in observation order), got {len(responses)}")
        completions = [as_completion(r) for r in responses]
        problems = [p for p in self.schedule.current() for _ in range(self.group_size)]  # (B*G,)
        results = self._pool.map(self.task.verifier, [c.text for c in completions], [p.answer for p in problems])
        groups = []
        for b, start in enumerate(range(0, self.num_envs, self.group_size)):
            span = range(start, start + self.group_size)
            infos, rewards, correct, loss_mask = [], [], [], []
            for i in span:
                info = step_info(results[i], completions[i], problem_id=problems[i].id, task=sample_task(self.task, problems[i]),
                                 max_response_tokens=self.max_response_tokens)
                info, _ = shape(info, self.shaping)
                rewards.append(float(sum(info["reward_terms"].values())))
                correct.append(info.pop("correct"))
                loss_mask.append(info.pop("loss_mask"))
                infos.append({**info, "group_id": b})
            groups.append(Group(problem_id=problems[start].id, prompt=self._prompts[start],
                                completions=tuple(completions[i] for i in span), rewards=tuple(rewards),
                                correct=tuple(correct), loss_mask=tuple(loss_mask), infos=tuple(infos)))
        self.schedule.advance([g.num_correct for g in groups])
        self._render()  # same-step autoreset: the next prompts are shown now
        return groups

    def rollout(self, generate: Callable[[list[str]], Sequence[str | Completion]]) -> RolloutBatch:
        """One generation round: ``generate(prompts)`` on the current B*G prompts (group-major), then
        :meth:`step_groups` on its responses (one per prompt, same order); the groups, with no stats of the
        round's own (the episode group env's ``rollout`` has the same shape and reports its episodes)."""
        if self.needs_reset:
            raise RuntimeError("GroupVectorEnv.rollout() called before reset(): call reset(seed=...) first")
        prompts = list(self._prompts)
        responses = generate(prompts)
        if len(responses) != len(prompts):
            raise ValueError(f"generate returned {len(responses)} responses for {len(prompts)} prompts: return one "
                             "per prompt, in the same (group-major) order")
        return RolloutBatch(groups=tuple(self.step_groups(responses)))

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
        """The schedule's state (:meth:`~dapo_env.schedule.PromptSchedule.state_dict`: RNG, current prompts'
        problem indices, difficulty beliefs; JSON-serialisable) for exact resume."""
        return self.schedule.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: the next draws and the current prompts match the saved run."""
        self.schedule.load_state_dict(state)
        if self.schedule.needs_reset:
            self._prompts = ()
        else:
            self._render()

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the verifier pool."""
        self._pool.close()


__all__ = ["GroupVectorEnv", "group_stats", "to_vector_infos"]
