"""`EpisodeGroupEnv`: B prompts x G multi-turn episodes per rollout, returned as verified groups.

Episodes of one rollout have different lengths: each round asks ``generate`` for the next turn of the live
episodes only (finished ones wait), verifies those turns in one :class:`~dapo_env.verifiers.pool.VerifierPool`
batch and lets each episode's interaction answer. When every episode has ended, the rollout returns B
:class:`~dapo_env.types.Group` objects whose ``completions`` are :class:`~dapo_env.types.Trajectory` objects,
``rewards`` the (shaped) episode returns and ``correct`` whether each episode was solved, so DAPO's dynamic
sampling and any group-relative estimator work on episodes unchanged (it is a sampler's group source). The
``generate`` contract: ``generate(requests: list[TurnRequest]) -> list[Completion | str]``, called once per
round with one :class:`~dapo_env.multiturn.TurnRequest` per live episode, answering in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from dapo_env.difficulty import DifficultySampler
from dapo_env.envs import as_completion, load_problems, resolve_task
from dapo_env.multiturn import Episode, EpisodeStart, TurnRequest, check_budget, chat_tokens, episode_start
from dapo_env.schedule import deprecated_num_prompts, num_prompts_of, schedule_for
from dapo_env.shaping import OverlongPenalty, Shaping, check_length_known, shape_episode
from dapo_env.tasks import Task
from dapo_env.tools import tool_status_stats
from dapo_env.types import Completion, Group, Problem, RolloutBatch

GenerateTurns = Callable[[list[TurnRequest]], Sequence["Completion | str"]]


def _add_terms(total: dict[str, float], terms: Mapping[str, float]) -> None:
    """Sum a turn's reward terms into the episode's, by name (first-seen order)."""
    for name, value in terms.items():
        total[name] = total.get(name, 0.0) + float(value)


class EpisodeGroupEnv:
    """B prompts x G multi-turn episodes per rollout (group-major), verified in a worker pool.

    Args:
        task: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task` (multi-turn, or single-turn played
            as one-turn episodes).
        num_envs: N = B * G, episodes per rollout (as for :class:`~dapo_env.vector.GroupVectorEnv`).
        group_size: G, episodes per prompt; must divide ``num_envs``.
        split, data_files, prompt_template: as for :class:`~dapo_env.envs.ReasoningEnv`.
        tokenizer, system_prompt, template_kwargs: bind a chat template (exact token ids, as for
            :class:`~dapo_env.multiturn.MultiTurnEnv`); requests then carry ``context_token_ids``.
        max_turns, max_episode_tokens: the episodes' budgets (truncation), as for ``MultiTurnEnv``.
        workers: verifier worker processes (0 verifies in this process); ``timeout_s`` per turn in workers.
        threads: answer the live episodes' turns in this many threads (for interactions that run tools or
            sandboxes in ``respond``; they must then be thread-safe, e.g. stateless); 1 answers them in order.
        reward_map, overlong_penalty, overlong_filter: the episodes' :class:`~dapo_env.shaping.Shaping` (the
            return mapped onto ``[low, high]``; DAPO's soft penalty of the tokens the model sampled in the
            episode; truncated episodes out of the loss), as for ``GroupVectorEnv``.
        difficulty: difficulty-aware draws (updated with the solved counts), as for ``GroupVectorEnv``.
        **task_kwargs: passed to ``task.load`` (e.g. ``n=32, k=6``); ``num_prompts=B`` is the deprecated form
            of ``num_envs = B * group_size``.

    Each ``Group`` holds ``correct`` (solved) and ``loss_mask`` per episode; its infos hold the rest: ``score``
    (the episode return), ``extracted`` and ``reason`` (the last turn's verdict; ``reason`` is
    ``"truncated:max_turns"`` etc. for a truncated episode), ``response_length`` (sampled tokens),
    ``response_truncated``, ``reward_terms`` (the turns' own terms summed by name, then the shaping terms),
    ``num_turns``, ``turn_rewards``, ``terminated``, ``truncated``, ``truncated_by``, ``problem_id``, ``task``
    and ``group_id``.

    Example:
        >>> env = EpisodeGroupEnv("GuessNumber-v0", num_envs=6, group_size=3)
        >>> _ = env.reset(seed=0)
        >>> def generate(requests):  # guess 8, then 4 or 12 depending on the reply, then stop guessing
        ...     return [{0: "Answer: 8", 1: "Answer: 4" if "lower" in r.text else "Answer: 12"}.get(r.turn, "pass")
        ...             for r in requests]
        >>> groups = env.rollout(generate).groups
        >>> len(groups), groups[0].size, {t.num_turns for g in groups for t in g.completions} <= {1, 2, 5}
        (2, 3, True)
        >>> env.close()
    """

    def __init__(self, task: str | Task, num_envs: int | None = None, group_size: int = 1, *, split: str | None = None,
                 data_files: Any = None, prompt_template: str | None = None, tokenizer: Any = None,
                 system_prompt: str | None = None, template_kwargs: Mapping[str, Any] | None = None,
                 max_turns: int | None = None, max_episode_tokens: int | None = None, workers: int = 0,
                 timeout_s: float = 10.0, threads: int = 1, reward_map: tuple[float, float] | None = None,
                 overlong_penalty: OverlongPenalty | Mapping[str, Any] | bool | None = None,
                 overlong_filter: bool = False, difficulty: DifficultySampler | bool | None = None,
                 **task_kwargs: Any) -> None:
        num_envs = deprecated_num_prompts(num_envs, group_size, task_kwargs.pop("num_prompts", None))
        self.num_prompts = num_prompts_of(num_envs, group_size)
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        check_budget("max_turns", max_turns)
        check_budget("max_episode_tokens", max_episode_tokens)
        self.shaping = Shaping(reward_map=reward_map, overlong_penalty=overlong_penalty, overlong_filter=overlong_filter)
        self.task = resolve_task(task, prompt_template)
        self.schedule = schedule_for(self.task, load_problems(self.task, split, data_files, task_kwargs), self.num_prompts,
                                     group_size, difficulty=difficulty)
        self.problems, self.difficulty = self.schedule.problems, self.schedule.difficulty  # the schedule's
        self.chat = chat_tokens(tokenizer, system_prompt, template_kwargs)
        self.num_envs, self.group_size = num_envs, group_size
        self.max_turns, self.max_episode_tokens = max_turns, max_episode_tokens
        self._rounds = 0  # rollouts over the env's life (part of every episode key)
        self.threads = threads
        self._executor: ThreadPoolExecutor | None = None
        from dapo_env.verifiers.pool import VerifierPool  # lazy: the pool module starts nothing on import

        self._pool = VerifierPool(workers, timeout_s=timeout_s)

    # -- prompts (the schedule's) ------------------------------------------------------------------
    @property
    def needs_reset(self) -> bool:
        """True until the first ``reset``."""
        return self.schedule.needs_reset

    @property
    def prompts(self) -> tuple[str, ...]:
        """The next rollout's B*G first observations as the model sees them (group-major)."""
        if self.schedule.needs_reset:
            return ()
        return tuple(p for problem in self.schedule.current() for p in [self._start(problem).text] * self.group_size)

    def _start(self, problem: Problem) -> EpisodeStart:
        return episode_start(self.task, problem, self.chat)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Draw the next rollout's B problems (seeded; ``options`` ``indices`` / ``ids`` pick them); returns their
        B*G first observations and ids."""
        self.schedule.reset(seed=seed, options=options)
        ids = [i for i in self.schedule.problem_ids() for _ in range(self.group_size)]
        group_ids = [g for g in range(self.num_prompts) for _ in range(self.group_size)]
        return self.prompts, {"problem_id": ids, "group_id": group_ids}

    # -- rollout -----------------------------------------------------------------------------------
    def rollout(self, generate: GenerateTurns) -> RolloutBatch:
        """Play the B*G episodes to their ends, one ``generate`` call per round; returns the B groups with the
        round's episode stats (``episodes``, ``generate_calls``, ``turns_mean``, ``turns_max``, ``sampled_tokens``,
        ``env_tokens``, ``solved_share``, ``truncated_share``, and for a task with tools the ``tool/`` stats of
        :func:`~dapo_env.tools.tool_use_stats`), and draws the next rollout's problems."""
        if self.needs_reset:
            raise RuntimeError("EpisodeGroupEnv.rollout() called before reset(): call reset(seed=...) first")
        if not callable(generate):
            raise TypeError(
                "generate must be a callable: generate(requests: list[TurnRequest]) -> list[Completion | str]")
        episodes: list[Episode] = []
        for b, problem in enumerate(self.schedule.current()):
            start = self._start(problem)  # once per problem: its G episodes share the prompt and the tool setup
            episodes += [Episode(self.task, problem, chat=self.chat, max_turns=self.max_turns,
                                 max_episode_tokens=self.max_episode_tokens, key=f"{self._rounds}:{b}:{g}",
                                 start=start) for g in range(self.group_size)]
        terms: list[dict[str, float]] = [{} for _ in episodes]  # each episode's turn terms, summed by name
        calls = 0
        while live := [i for i, e in enumerate(episodes) if not e.done]:
            requests = [episodes[i].request(group=i // self.group_size) for i in live]
            completions = self._generate(generate, requests)
            calls += 1
            answers = [episodes[i].problem.answer for i in live]
            verdicts = self._pool.map(self.task.verifier, [c.text for c in completions], answers)
            for i, turn_terms in zip(live, self._advance([episodes[i] for i in live], completions, verdicts)):
                _add_terms(terms[i], turn_terms)
        size = self.group_size
        groups = [self._group(b, episodes[b * size:(b + 1) * size], terms[b * size:(b + 1) * size])
                  for b in range(self.num_prompts)]
        stats = self._stats(episodes, calls)
        self._rounds += 1
        self.schedule.advance([g.num_correct for g in groups])
        return RolloutBatch(groups=tuple(groups), stats=stats)

    def _advance(self, episodes: list[Episode], completions: list[Completion],
                 verdicts: list[Any]) -> list[Mapping[str, float]]:
        """Let each live episode's interaction answer its turn (in ``threads`` threads when > 1); returns each
        turn's reward terms."""
        def advance(args: tuple[Episode, Completion, Any]) -> Mapping[str, float]:
            return args[0].advance(args[1], args[2]).reward_terms

        if self.threads == 1 or len(episodes) == 1:
            return [advance(args) for args in zip(episodes, completions, verdicts)]
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="dapo-env-respond")
        return list(self._executor.map(advance, zip(episodes, completions, verdicts)))

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

    def _group(self, group_id: int, episodes: list[Episode], turn_terms: list[dict[str, float]]) -> Group:
        trajectories, rewards, masks, infos = [], [], [], []
        for e, episode_terms in zip(episodes, turn_terms):
            trajectory = e.trajectory()
            applied = check_length_known(trajectory.num_tokens, self.shaping)
            reward, terms, mask = shape_episode(trajectory.episode_return, trajectory.num_tokens, trajectory.truncated,
                                                self.shaping, episode_terms)
            last = e.verdicts[-1]
            trajectories.append(trajectory)
            rewards.append(reward)
            masks.append(mask)
            infos.append({
                "score": trajectory.episode_return, "extracted": last.extracted,
                "reason": f"truncated:{e.truncated_by}" if e.truncated else last.reason,
                "response_length": trajectory.num_tokens, "response_truncated": trajectory.truncated,
                "reward_terms": terms, "num_turns": trajectory.num_turns,
                "turn_rewards": [t.reward for t in trajectory.turns], "terminated": e.terminated,
                "truncated": e.truncated, "truncated_by": e.truncated_by, "problem_id": e.problem.id,
                "task": self.task.env_id, "group_id": group_id,
                **({} if e.tool_calls is None else {"tool_calls": [c.to_dict() for c in e.tool_calls]})})
            if self.shaping.overlong_penalty is not None:
                infos[-1]["overlong_penalty_applied"] = applied
        return Group(problem_id=episodes[0].problem.id, prompt=episodes[0].prompt_text, completions=tuple(trajectories),
                     rewards=tuple(rewards), correct=tuple(e.solved for e in episodes), loss_mask=tuple(masks),
                     infos=tuple(infos))

    @staticmethod
    def _stats(episodes: list[Episode], calls: int) -> dict[str, float]:
        turns = [len(e.turns) for e in episodes]
        tools = [[c.status for c in e.tool_calls] for e in episodes if e.tool_calls is not None]  # a task with tools
        env_tokens = sum(t.num_reply_tokens for e in episodes for t in e.turns)
        stats = {"episodes": float(len(episodes)), "generate_calls": float(calls),
                 "turns_mean": float(np.mean(turns)), "turns_max": float(max(turns)),
                 "sampled_tokens": float(sum(e.sampled_tokens for e in episodes)), "env_tokens": float(env_tokens),
                 "solved_share": float(np.mean([e.solved for e in episodes])),
                 "truncated_share": float(np.mean([e.truncated for e in episodes]))}
        return {**{f"episode/{k}": v for k, v in stats.items()}, **(tool_status_stats(tools) if tools else {})}

    # -- state -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The schedule's state (RNG, the next rollout's problem indices, difficulty beliefs) and the rollout
        counter (JSON-serialisable)."""
        return {**self.schedule.state_dict(), "rounds": self._rounds}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`: the next rollouts draw the same problems as the saved run."""
        self.schedule.load_state_dict(state)
        self._rounds = int(state["rounds"])

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
