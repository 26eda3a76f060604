"""`EpisodeGroupEnv`: B prompts x G multi-turn episodes per rollout, returned as verified groups.

Episodes of one rollout have different lengths: each round asks ``generate`` for the next turn of the live
episodes only (finished ones wait), verifies those turns in one :class:`~dapo_env.verifiers.pool.VerifierPool`
batch and lets each episode's interaction answer. When every episode has ended, the rollout returns B
:class:`~dapo_env.types.Group` objects whose ``completions`` are :class:`~dapo_env.types.Trajectory` objects,
``rewards`` the (shaped) episode returns and ``correct`` whether each episode was solved, so DAPO's dynamic
sampling and any group-relative estimator work on episodes unchanged. It implements the sampler's group
source protocol (``num_prompts``, ``group_size``, ``needs_reset``, ``reset``, ``rollout``, ``state_dict``,
``load_state_dict``).

The ``generate`` contract: ``generate(requests: list[TurnRequest]) -> list[Completion | str]``, called once
per round with one :class:`~dapo_env.multiturn.TurnRequest` per live episode, answering in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from gymnasium.utils import seeding

from dapo_env.difficulty import DifficultySampler, resolve_difficulty
from dapo_env.envs import as_completion, build_id_index, draw_problem_indices, load_problems, resolve_task
from dapo_env.multiturn import Episode, TurnRequest, check_budget, chat_tokens, episode_prompt
from dapo_env.tasks import Task
from dapo_env.types import Completion, Group, Problem
from dapo_env.shaping import OverlongPenalty, Shaping, shape

GenerateTurns = Callable[[list[TurnRequest]], Sequence["Completion | str"]]


def shape_episode(episode_return: float, length: int | None, truncated: bool,
                  shaping: Shaping = Shaping()) -> tuple[float, dict[str, float], bool]:
    """An episode's shaped reward, its terms and its loss mask (pure; :func:`~dapo_env.shaping.shape` on the
    episode as one response).

    Terms: ``env`` (the episode return), ``reward_map`` (``map_reward(return) - return``: the return, 0 for
    a failed and 1 for a solved episode in the built-in tasks, mapped onto ``[low, high]``), and
    ``overlong_penalty`` (DAPO's soft penalty of the tokens the model sampled in the episode). The loss mask
    is False for a truncated episode when ``shaping.overlong_filter`` is on.

    Example:
        >>> shape_episode(1.0, 90, False, Shaping(reward_map=(-1.0, 1.0),
        ...               overlong_penalty={"max_response_tokens": 100, "cache_length": 20}))
        (0.5, {'env': 1.0, 'reward_map': 0.0, 'overlong_penalty': -0.5}, True)
    """
    info = {"score": float(episode_return), "reward_terms": {"env": float(episode_return)},
            "response_length": length, "response_truncated": bool(truncated), "loss_mask": True}
    shaped, _ = shape(info, shaping)
    terms = shaped["reward_terms"]
    return float(sum(terms.values())), terms, bool(shaped["loss_mask"])


class EpisodeGroupEnv:
    """B prompts x G multi-turn episodes per rollout (group-major), verified in a worker pool.

    Args:
        task: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task` (multi-turn, or single-turn played
            as one-turn episodes).
        num_prompts: B, groups per rollout.
        group_size: G, episodes per prompt.
        split, data_files, prompt_template: as for :class:`~dapo_env.envs.ReasoningEnv`.
        tokenizer, system_prompt, template_kwargs: bind a chat template to record exact token ids (see
            :class:`~dapo_env.multiturn.MultiTurnEnv`); requests then carry ``context_token_ids``.
        max_turns, max_episode_tokens: the episodes' budgets (truncation), as for ``MultiTurnEnv``.
        workers: verifier worker processes (0 verifies in this process); ``timeout_s`` per turn in workers.
        threads: answer the live episodes' turns in this many threads (for interactions that run tools or
            sandboxes in ``respond``; they must then be thread-safe, e.g. stateless); 1 answers them in order.
        reward_map: ``(low, high)``: map the episode return onto ``[low, high]`` (``(-1.0, 1.0)`` in DAPO).
        overlong_penalty: an :class:`~dapo_env.shaping.OverlongPenalty`, ``dict(max_response_tokens=,
            cache_length=, factor=)`` or ``True`` (the paper's 20480/4096): DAPO's soft penalty of
            the tokens the model sampled in the episode.
        overlong_filter: exclude truncated episodes from the loss (``loss_mask`` False).
        difficulty: difficulty-aware problem draws, as for :class:`~dapo_env.vector.GroupVectorEnv`
            (``True`` or a :class:`~dapo_env.difficulty.DifficultySampler`); updated with each rollout's
            solved counts.
        **task_kwargs: passed to ``task.load`` (e.g. ``n=32, k=6``).

    Each ``Group``'s infos hold per episode: ``correct`` (solved), ``score`` (the episode return), ``extracted``
    and ``reason`` (the last turn's verdict; ``reason`` is ``"truncated:max_turns"`` etc. for a truncated
    episode), ``response_length`` (sampled tokens), ``response_truncated``, ``reward_terms``, ``loss_mask``,
    ``num_turns``, ``turn_rewards``, ``terminated``, ``truncated``, ``truncated_by``, ``problem_id``, ``task``
    and ``group_id``.

    Example:
        >>> env = EpisodeGroupEnv("GuessNumber-v0", num_prompts=2, group_size=3)
        >>> _ = env.reset(seed=0)
        >>> def generate(requests):  # guess 8, then 4 or 12 depending on the reply, then stop guessing
        ...     return [{0: "Answer: 8", 1: "Answer: 4" if "lower" in r.text else "Answer: 12"}.get(r.turn, "pass")
        ...             for r in requests]
        >>> groups = env.rollout(generate)
        >>> len(groups), groups[0].size, {t.num_turns for g in groups for t in g.completions} <= {1, 2, 5}
        (2, 3, True)
        >>> env.close()
    """

    def __init__(self, task: str | Task, num_prompts: int, group_size: int = 1, *, split: str | None = None,
                 data_files: Any = None, prompt_template: str | None = None, tokenizer: Any = None,
                 system_prompt: str | None = None, template_kwargs: Mapping[str, Any] | None = None,
                 max_turns: int | None = None, max_episode_tokens: int | None = None, workers: int = 0,
                 timeout_s: float = 10.0, threads: int = 1, reward_map: tuple[float, float] | None = None,
                 overlong_penalty: OverlongPenalty | Mapping[str, Any] | bool | None = None,
                 overlong_filter: bool = False, difficulty: DifficultySampler | bool | None = None,
                 **task_kwargs: Any) -> None:
        for name, value in (("num_prompts", num_prompts), ("group_size", group_size), ("threads", threads)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        check_budget("max_turns", max_turns)
        check_budget("max_episode_tokens", max_episode_tokens)
        self.shaping = Shaping(reward_map=reward_map, overlong_penalty=overlong_penalty, overlong_filter=overlong_filter)
        self.task = resolve_task(task, prompt_template)
        self.problems: Sequence[Problem] = load_problems(self.task, split, data_files, task_kwargs)
        self.chat = chat_tokens(tokenizer, system_prompt, template_kwargs)
        self.num_prompts, self.group_size = num_prompts, group_size
        self.max_turns, self.max_episode_tokens = max_turns, max_episode_tokens
        self.difficulty = resolve_difficulty(difficulty, len(self.problems), group_size)
        self._np_random, _ = seeding.np_random(None)
        self._indices: np.ndarray | None = None  # (B,) problem indices of the next rollout
        self._id_index: dict[str, int] | None = None
        self._rounds = 0  # rollouts over the env's life (part of every episode key)
        self.rollout_stats: dict[str, float] = {}
        self.threads = threads
        self._executor: ThreadPoolExecutor | None = None
        from dapo_env.verifiers.pool import VerifierPool  # lazy: the pool module starts nothing on import

        self._pool = VerifierPool(workers, timeout_s=timeout_s)

    # -- prompts -----------------------------------------------------------------------------------
    @property
    def needs_reset(self) -> bool:
        """True until the first ``reset``."""
        return self._indices is None

    @property
    def prompts(self) -> tuple[str, ...]:
        """The next rollout's B*G first observations as the model sees them (group-major)."""
        if self._indices is None:
            return ()
        return tuple(p for i in self._indices for p in [self._prompt(int(i))[0]] * self.group_size)

    def _prompt(self, index: int) -> tuple[str, tuple[int, ...] | None]:
        return episode_prompt(self.task, self.problems[index], self.chat)

    def _draw(self, options: Mapping[str, Any] | None) -> np.ndarray:
        """B problem indices: ``options["indices"]`` / ``options["ids"]``, by difficulty, else drawn without
        replacement."""
        return draw_problem_indices(self.problems, self.num_prompts, self._np_random, options, self._ids,
                                    self.difficulty)

    def _ids(self) -> dict[str, int]:
        self._id_index = self._id_index or build_id_index(self.problems)
        return self._id_index

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Draw the next rollout's B problems (seeded); returns their B*G first observations and ids."""
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        self._indices = self._draw(options)
        ids = [self.problems[int(i)].id for i in self._indices for _ in range(self.group_size)]
        group_ids = [g for g in range(self.num_prompts) for _ in range(self.group_size)]
        return self.prompts, {"problem_id": ids, "group_id": group_ids}

    # -- rollout -----------------------------------------------------------------------------------
    def rollout(self, generate: GenerateTurns) -> list[Group]:
        """Play the B*G episodes to their ends, one ``generate`` call per round; returns B groups and draws
        the next rollout's problems."""
        if self._indices is None:
            raise RuntimeError("EpisodeGroupEnv.rollout() called before reset(): call reset(seed=...) first")
        if not callable(generate):
            raise TypeError(
                "generate must be a callable: generate(requests: list[TurnRequest]) -> list[Completion | str]")
        episodes: list[Episode] = []
        for b, index in enumerate(self._indices):
            problem, prompt = self.problems[int(index)], self._prompt(int(index))
            episodes += [Episode(self.task, problem, chat=self.chat, max_turns=self.max_turns,
                                 max_episode_tokens=self.max_episode_tokens, key=f"{self._rounds}:{b}:{g}",
                                 prompt=prompt) for g in range(self.group_size)]
        calls = 0
        while live := [i for i, e in enumerate(episodes) if not e.done]:
            requests = [episodes[i].request(group=i // self.group_size) for i in live]
            completions = self._generate(generate, requests)
            calls += 1
            answers = [episodes[i].problem.answer for i in live]
            verdicts = self._pool.map(self.task.verifier, [c.text for c in completions], answers)
            self._advance([episodes[i] for i in live], completions, verdicts)
        size = self.group_size
        groups = [self._group(b, episodes[b * size:(b + 1) * size]) for b in range(self.num_prompts)]
        self.rollout_stats = self._stats(episodes, calls)
        if self.difficulty is not None:
            self.difficulty.update(self._indices, [g.num_correct for g in groups])
        self._rounds += 1
        self._indices = self._draw(None)
        return groups

    def _advance(self, episodes: list[Episode], completions: list[Completion], verdicts: list[Any]) -> None:
        """Let each live episode's interaction answer its turn (in ``threads`` threads when > 1)."""
        if self.threads == 1 or len(episodes) == 1:
            for episode, completion, verdict in zip(episodes, completions, verdicts):
                episode.advance(completion, verdict)
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="dapo-env-respond")
        list(self._executor.map(lambda args: args[0].advance(args[1], args[2]), zip(episodes, completions, verdicts)))

    @staticmethod
    def _generate(generate: GenerateTurns, requests: list[TurnRequest]) -> list[Completion]:
        responses = generate(requests)
        if len(responses) != len(requests):
            raise ValueError(f"generate returned {len(responses)} responses for {len(requests)} turn requests: return "
                             "one Completion (or str) per request, in the same order")
        completions = []
        for i, response in enumerate(responses):
            try:
                completions.append(as_completion(response))
            except TypeError as exc:
                raise TypeError(f"generate's response {i} (episode {requests[i].key}): {exc}") from None
        return completions

    def _group(self, group_id: int, episodes: list[Episode]) -> Group:
        trajectories, rewards, masks, infos = [], [], [], []
        for e in episodes:
            trajectory = e.trajectory()
            reward, terms, mask = shape_episode(trajectory.episode_return, trajectory.num_tokens, trajectory.truncated,
                                                self.shaping)
            last = e.verdicts[-1]
            trajectories.append(trajectory)
            rewards.append(reward)
            masks.append(mask)
            infos.append({
                "correct": e.solved, "score": trajectory.episode_return, "extracted": last.extracted,
                "reason": f"truncated:{e.truncated_by}" if e.truncated else last.reason,
                "response_length": trajectory.num_tokens, "response_truncated": trajectory.truncated,
                "reward_terms": terms, "loss_mask": mask, "num_turns": trajectory.num_turns,
                "turn_rewards": [t.reward for t in trajectory.turns], "terminated": e.terminated,
                "truncated": e.truncated, "truncated_by": e.truncated_by, "problem_id": e.problem.id,
                "task": self.task.env_id, "group_id": group_id,
                **({} if e.tool_calls is None else {"tool_calls": list(e.tool_calls)})})
        return Group(problem_id=episodes[0].problem.id, prompt=episodes[0].prompt_text, completions=tuple(trajectories),
                     rewards=tuple(rewards), correct=tuple(e.solved for e in episodes), loss_mask=tuple(masks),
                     infos=tuple(infos))

    @staticmethod
    def _stats(episodes: list[Episode], calls: int) -> dict[str, float]:
        turns = [len(e.turns) for e in episodes]
        env_tokens = sum(t.num_reply_tokens for e in episodes for t in e.turns)
        return {"episodes": float(len(episodes)), "generate_calls": float(calls),
                "turns_mean": float(np.mean(turns)), "turns_max": float(max(turns)),
                "sampled_tokens": float(sum(e.sampled_tokens for e in episodes)), "env_tokens": float(env_tokens),
                "solved_share": float(np.mean([e.solved for e in episodes])),
                "truncated_share": float(np.mean([e.truncated for e in episodes]))}

    # -- state -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The RNG state, the next rollout's problem indices, the rollout counter and the difficulty beliefs
        (JSON-serialisable)."""
        return {"rng": self._np_random.bit_generator.state, "rounds": self._rounds,
                "indices": None if self._indices is None else [int(i) for i in self._indices],
                "difficulty": None if self.difficulty is None else self.difficulty.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: the next rollouts draw the same problems as the saved run."""
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = dict(state["rng"])
        self._np_random, self._rounds = rng, int(state["rounds"])
        if self.difficulty is not None and state.get("difficulty") is not None:
            self.difficulty.load_state_dict(state["difficulty"])
        self._indices = None if state["indices"] is None else np.asarray(state["indices"], dtype=np.int64)

    def close(self) -> None:
        """Stop the verifier pool (and the threads answering turns)."""
        self._pool.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> EpisodeGroupEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["EpisodeGroupEnv", "GenerateTurns", "shape_episode"]
