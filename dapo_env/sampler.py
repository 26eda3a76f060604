"""`DynamicSampler`: DAPO's dynamic sampling over any source of verified groups.

A group whose G responses are all right or all wrong has zero advantage under any group-relative
estimator, so it adds nothing to the gradient. The sampler keeps generating until it holds
``num_groups`` informative groups (``0 < #correct < G``, judged from the verifier's verdicts), keeps
surplus informative groups for the next batch (first in, first out), counts generation rounds
separately from batches, and gives up gracefully after ``max_rounds`` with a partial batch (counted,
and warned about once per cause). It knows nothing about learners.

Its source is any :class:`RolloutSource`: an object that owns its generation and answers
``rollout(position) -> RolloutBatch`` one generation round at a time. :class:`EnvSource` is the env
layer's own: a group env (:class:`~dapo_env.vector.GroupVectorEnv`, or an episode group env whose groups
hold multi-turn trajectories) and a ``generate`` callable; the learner's sources hold an engine or a
worker process instead.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dapo_env.types import Completion, Group, RolloutBatch

Generate = Callable[[list[str]], Sequence["Completion | str"]]


#: Where a generation round sits: ``(batch, round)``, the batch index (batches completed so far) and the
#: round within it. A source derives its sampling seeds from it, so a resumed run regenerates exactly.
Position = tuple[int, int]


@runtime_checkable
class GroupEnv(Protocol):
    """A group env (:class:`~dapo_env.vector.GroupVectorEnv`, :class:`~dapo_env.episodes.EpisodeGroupEnv`):
    B prompts x G samples per ``rollout(generate)``, verified and shaped."""

    num_prompts: int  # B groups per generation round
    group_size: int  # G
    difficulty: Any  # a DifficultySampler, or None (uniform draws)

    @property
    def needs_reset(self) -> bool: ...

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any: ...

    def rollout(self, generate: Callable[..., Any]) -> list[Group]: ...  # one generation round -> B groups

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class RolloutSource(Protocol):
    """What :class:`DynamicSampler` samples from: a source that owns its generation (a group env and a
    ``generate`` callable, an engine, a worker process or a server) and answers one generation round at a time.

    ``rollout(position)`` returns the round's B groups and the round's own facts in ``stats`` (namespaced keys
    such as ``difficulty/...``, ``episode/...``, ``async/...``; counters since the batch's first round).
    ``publish(step, weights)`` hands the source the learner's weights after training step ``step`` (a no-op
    for a source that generates in the learner's process).
    """

    num_prompts: int  # B groups per generation round
    group_size: int  # G

    def rollout(self, position: Position) -> RolloutBatch: ...

    def publish(self, step: int, weights: Mapping[str, Any]) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def play_round(env: GroupEnv, generate: Callable[..., Any], *, seed: int | None = None) -> RolloutBatch:
    """One generation round of a group env: its first ``reset(seed=seed)`` when it needs one, then
    ``env.rollout(generate)``; ``stats`` hold the round's own (an episode env's ``episode/`` and ``tool/``) and
    the env's difficulty beliefs after the round (if it draws by difficulty). What every in-process source runs.

    Example:
        >>> from dapo_env import GroupVectorEnv
        >>> env = GroupVectorEnv("Arithmetic-v0", num_envs=4, group_size=2, size=10)
        >>> batch = play_round(env, lambda prompts: ["Answer: 0"] * len(prompts), seed=0)
        >>> len(batch.groups), batch.stats
        (2, {})
        >>> env.close()
    """
    if env.needs_reset:
        env.reset(seed=seed)
    played = env.rollout(generate)
    difficulty = env.difficulty.stats() if env.difficulty is not None else {}
    return RolloutBatch(groups=played.groups, stats={**played.stats, **difficulty})


class EnvSource:
    """A :class:`RolloutSource` over a group env and a plain ``generate`` callable (the env layer's own source:
    any learner's generation function fits).

    Args:
        env: a :class:`GroupEnv` (:class:`~dapo_env.vector.GroupVectorEnv` or an episode group env).
        generate: what ``env.rollout`` calls: for a ``GroupVectorEnv``, ``generate(prompts) -> responses``
            (B*G observations group-major in, B*G ``str`` or :class:`~dapo_env.types.Completion` out);
            for an episode env, ``generate(requests) -> responses``.
        seed: the env's first reset.

    Example:
        >>> from dapo_env import GroupVectorEnv
        >>> source = EnvSource(GroupVectorEnv("Arithmetic-v0", num_envs=4, group_size=2, size=10),
        ...                    lambda prompts: ["Answer: 0"] * len(prompts), seed=0)
        >>> len(source.rollout((0, 0)).groups)
        2
        >>> source.close()
    """

    def __init__(self, env: GroupEnv, generate: Callable[..., Any], *, seed: int | None = None) -> None:
        if not isinstance(env, GroupEnv):
            missing = [m for m in ("num_prompts", "group_size", "difficulty", "needs_reset", "reset", "rollout",
                                   "state_dict", "load_state_dict", "close") if not hasattr(env, m)]
            raise TypeError(f"EnvSource needs a group env such as a dapo_env GroupVectorEnv; {type(env).__name__} "
                            f"lacks {missing}")
        if not callable(generate):
            raise TypeError("generate must be a callable: generate(prompts: list[str]) -> list[Completion | str]")
        self.env, self.generate, self.seed = env, generate, seed
        self.num_prompts, self.group_size = env.num_prompts, env.group_size

    def rollout(self, position: Position) -> RolloutBatch:
        """One round: the env's prompts through ``generate``, verified and shaped (``position`` unused)."""
        return play_round(self.env, self.generate, seed=self.seed)

    def publish(self, step: int, weights: Mapping[str, Any]) -> None:
        """No-op: ``generate`` is the caller's."""

    def state_dict(self) -> dict[str, Any]:
        return self.env.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.env.load_state_dict(state)

    def close(self) -> None:
        self.env.close()


def group_prompts(prompts: Sequence[str], group_size: int) -> list[str]:
    """The distinct prompts of a group-major list (G consecutive copies of each); raises if it is not one.

    Example:
        >>> group_prompts(["a", "a", "b", "b"], 2)
        ['a', 'b']
    """
    if len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} prompts is not a multiple of group_size={group_size}")
    unique = list(prompts[::group_size])
    for g, prompt in enumerate(unique):
        if any(p != prompt for p in prompts[g * group_size:(g + 1) * group_size]):
            raise ValueError(f"prompts are not group-major with group_size={group_size} (group {g} differs)")
    return unique


def grouped(generate_n: Callable[[list[str], int], Sequence[Sequence[Completion | str]]], group_size: int) -> Generate:
    """Adapt an engine-style ``generate_n(prompts, n) -> [[n responses] per prompt]`` to ``generate``.

    The group env shows each prompt G times in a row; engines usually take each distinct prompt once
    with ``n`` samples. The adapter passes the distinct prompts and flattens the answer group-major.

    Example:
        >>> gen = grouped(lambda prompts, n: [[f"{p}-{k}" for k in range(n)] for p in prompts], 2)
        >>> gen(["a", "a", "b", "b"])
        ['a-0', 'a-1', 'b-0', 'b-1']
    """
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")

    def generate(prompts: list[str]) -> list[Completion | str]:
        unique = group_prompts(prompts, group_size)
        nested = generate_n(unique, group_size)
        if len(nested) != len(unique) or any(len(group) != group_size for group in nested):
            raise ValueError(f"generate_n must return {len(unique)} lists of {group_size} responses")
        return [response for group in nested for response in group]  # (B, G) -> (B*G,)

    return generate


def _plain(value: Any) -> Any:
    """Numpy scalars and arrays as plain Python values (JSON-serialisable state)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _completion_to_dict(sample: Any) -> dict[str, Any]:
    kind = type(sample)
    return {"type": f"{kind.__module__}:{kind.__qualname__}", **sample.to_dict()}


def _completion_from_dict(data: Mapping[str, Any]) -> Any:
    import importlib

    module, _, name = str(data.get("type", "dapo_env.types:Completion")).partition(":")
    kind: Any = importlib.import_module(module)
    for part in name.split("."):
        kind = getattr(kind, part)
    return kind.from_dict({k: v for k, v in data.items() if k != "type"})


def group_to_dict(group: Group) -> dict[str, Any]:
    """A JSON-serialisable form of a group (for checkpoints); each sample through its ``to_dict``."""
    return {
        "problem_id": group.problem_id,
        "prompt": group.prompt,
        "completions": [_completion_to_dict(c) for c in group.completions],
        "rewards": list(group.rewards),
        "correct": list(group.correct),
        "loss_mask": list(group.loss_mask),
        "infos": [_plain(dict(info)) for info in group.infos],
        "policy_step": group.policy_step,
    }


def group_from_dict(data: Mapping[str, Any]) -> Group:
    """Inverse of :func:`group_to_dict` (a checkpoint from before ``Group.policy_step`` kept the step in every
    info: it is read from there)."""
    infos = tuple(dict(i) for i in data["infos"])
    step = data.get("policy_step", infos[0].get("policy_step") if infos else None)
    return Group(
        problem_id=data["problem_id"],
        prompt=data["prompt"],
        completions=tuple(_completion_from_dict(c) for c in data["completions"]),
        rewards=tuple(float(r) for r in data["rewards"]),
        correct=tuple(bool(c) for c in data["correct"]),
        loss_mask=tuple(bool(m) for m in data["loss_mask"]),
        infos=tuple({k: v for k, v in info.items() if k != "policy_step"} for info in infos),
        policy_step=None if step is None else int(step),
    )


def batch_stats(generated: Sequence[Group], *, rounds: int) -> dict[str, float]:
    """Statistics of the groups generated for one batch, before filtering (``nan`` where undefined).

    Example:
        >>> g = Group("1", "p", (Completion("a", num_tokens=3), Completion("b", num_tokens=5, finish_reason="length")),
        ...           (1.0, -1.0), (True, False), (True, True))
        >>> s = batch_stats([g], rounds=1)
        >>> s["accuracy_before_filter"], s["response_length_mean"], s["truncation_rate"], s["generated_tokens"]
        (0.5, 4.0, 0.5, 8.0)
    """
    samples = [c for g in generated for c in g.completions]
    lengths = [c.length for c in samples if c.length is not None]
    n = len(generated)

    def share(count: int) -> float:
        return count / n if n else 0.0

    return {
        "rounds": float(rounds),
        "samples_generated": float(len(samples)),
        "accuracy_before_filter": sum(g.num_correct for g in generated) / len(samples) if samples else 0.0,
        "all_correct_share": share(sum(g.num_correct == g.size for g in generated)),
        "all_wrong_share": share(sum(g.num_correct == 0 for g in generated)),
        "zero_advantage_share": share(sum(len(set(g.rewards)) <= 1 for g in generated)),
        "informative_groups": float(sum(g.informative for g in generated)),
        "response_length_mean": float(np.mean(lengths)) if lengths else float("nan"),
        "response_length_max": float(max(lengths)) if lengths else float("nan"),
        "truncation_rate": float(np.mean([c.truncated for c in samples])) if samples else float("nan"),
        "generated_tokens": float(sum(lengths)),
    }


def group_task(group: Group) -> str | None:
    """The task id a group's samples carry (``info["task"]``, the same for every sample of a group)."""
    return group.infos[0].get("task") if group.infos else None


def task_stats(generated: Sequence[Group], batch: Sequence[Group], task_ids: Sequence[str]) -> dict[str, float]:
    """Per-task statistics of one batch of a mixture, ``task/<id>/<name>`` for every id in ``task_ids`` (``nan``
    where a task had no group): over the groups generated for the batch (before filtering),
    ``groups_generated``, ``informative_share`` (groups with ``0 < #correct < G``), ``accuracy_before_filter``,
    ``response_length_mean`` and ``tokens_per_informative_group`` (generated tokens per informative group: what
    one useful group cost); over the batch's groups (after filtering), ``groups``, ``reward_mean`` and
    ``accuracy``.

    Example:
        >>> def g(task, correct):
        ...     return Group("1", "p", (Completion("a", num_tokens=2), Completion("b", num_tokens=4)), (0.0, 0.0),
        ...                  correct, (True, True), ({"task": task}, {"task": task}))
        >>> s = task_stats([g("A", (True, False)), g("A", (True, True))], [g("A", (True, False))], ["A", "B"])
        >>> s["task/A/informative_share"], s["task/A/tokens_per_informative_group"], s["task/A/accuracy"]
        (0.5, 12.0, 0.5)
        >>> s["task/B/groups_generated"], s["task/B/informative_share"]
        (0.0, nan)
    """
    nan = float("nan")
    out: dict[str, float] = {}
    for task_id in task_ids:
        made = [g for g in generated if group_task(g) == task_id]
        kept = [g for g in batch if group_task(g) == task_id]
        lengths = [c.length for g in made for c in g.completions if c.length is not None]
        informative = sum(g.informative for g in made)
        samples = sum(g.size for g in made)
        rewards = [r for g in kept for r in g.rewards]
        prefix = f"task/{task_id}/"
        out.update({
            prefix + "groups_generated": float(len(made)),
            prefix + "informative_share": informative / len(made) if made else nan,
            prefix + "accuracy_before_filter": sum(g.num_correct for g in made) / samples if samples else nan,
            prefix + "response_length_mean": float(np.mean(lengths)) if lengths else nan,
            prefix + "tokens_per_informative_group": float(sum(lengths)) / informative if informative else nan,
            prefix + "groups": float(len(kept)),
            prefix + "reward_mean": float(np.mean(rewards)) if rewards else nan,
            prefix + "accuracy": sum(g.num_correct for g in kept) / sum(g.size for g in kept) if kept else nan,
        })
    return out


class DynamicSampler:
    """Fills batches with informative groups from a :class:`RolloutSource`.

    Args:
        source: the rollout source (e.g. ``EnvSource(GroupVectorEnv(...), generate)``); it owns generation.
        num_groups: groups per batch (default: the source's B).
        max_rounds: generation rounds allowed per batch; when they run out, ``sample`` returns the groups it
            has (``stats["partial"] == 1.0``), warns once per cause (too hard / too easy) and counts the rest
            in ``stats["partial_batches"]``. Never raises for hard data.
        filter_groups: False returns the first ``num_groups`` groups unfiltered (plain GRPO).
        keep_surplus: carry informative groups beyond ``num_groups`` into the next batch (default); False
            discards them (the DAPO paper's recipe: every batch is sampled by the current policy).
        advice: what the partial-batch warning tells the user to change, in the caller's own spelling (a
            trainer names its config fields or flags); default: this class's ``max_rounds`` and ``num_groups``.
        task_ids: a mixture's task ids: each batch's stats then hold :func:`task_stats` for each (``()``: none).

    A *round* is one generation call of the sampler (``source.rollout(position)``: B prompts x G samples).
    ``stats`` of each batch: ``rounds``, ``samples_generated``, ``accuracy_before_filter``,
    ``all_correct_share``, ``all_wrong_share``, ``zero_advantage_share``, ``informative_groups`` and the
    fresh samples' ``response_length_mean``/``_max``, ``truncation_rate``, ``generated_tokens`` (over every
    sample generated for this batch, kept or not; surplus groups from earlier batches excluded), plus
    ``surplus_groups``, ``partial`` and ``partial_batches`` (so far), plus the source's stats of the batch's
    last round (none when the batch came from surplus alone).

    Example:
        >>> from dapo_env import GroupVectorEnv
        >>> env = GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4, size=50)
        >>> answers = {env.task.format_prompt(p): p.answer for p in env.problems}
        >>> def generate(prompts):  # right at even positions, wrong at odd ones
        ...     return [f"Answer: {answers[p]}" if i % 2 == 0 else "Answer: none" for i, p in enumerate(prompts)]
        >>> batch = DynamicSampler(EnvSource(env, generate, seed=0)).sample()
        >>> len(batch.groups), batch.stats["rounds"], batch.groups[0].num_correct
        (2, 1.0, 2)
        >>> env.close()
    """

    def __init__(self, source: RolloutSource, *, num_groups: int | None = None, max_rounds: int = 10,
                 filter_groups: bool = True, keep_surplus: bool = True, advice: str | None = None,
                 task_ids: Sequence[str] = ()) -> None:
        if not isinstance(source, RolloutSource):
            missing = [m for m in ("num_prompts", "group_size", "rollout", "publish", "state_dict", "load_state_dict",
                                   "close") if not hasattr(source, m)]
            raise TypeError(f"DynamicSampler needs a rollout source such as EnvSource(env, generate); "
                            f"{type(source).__name__} lacks {missing}")
        num_groups = source.num_prompts if num_groups is None else num_groups
        if not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(f"num_groups must be a positive int, got {num_groups!r}")
        if not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive int (generation rounds per batch), got {max_rounds!r}")
        self.source = source
        self.num_groups, self.max_rounds = num_groups, max_rounds
        self.filter_groups, self.keep_surplus = bool(filter_groups), bool(keep_surplus)
        self.advice = advice or "Raise max_rounds, lower num_groups or change the data"
        self.task_ids = tuple(task_ids)
        self._surplus: deque[Group] = deque()
        self._warned: set[str] = set()
        self.total_rounds = 0  # generation rounds over the sampler's life
        self.total_batches = 0
        self.total_samples = 0
        self.partial_batches = 0

    @property
    def surplus(self) -> tuple[Group, ...]:
        """Groups kept for the next batch, oldest first."""
        return tuple(self._surplus)

    def defer(self, groups: Iterable[Group]) -> None:
        """Put ``groups`` back at the front of the surplus, in order: the next batch starts with them."""
        self._surplus.extendleft(reversed(list(groups)))

    def sample(self) -> RolloutBatch:
        """The next batch of ``num_groups`` groups (informative ones unless ``filter_groups=False``)."""
        batch: list[Group] = []
        while self._surplus and len(batch) < self.num_groups:
            batch.append(self._surplus.popleft())
        generated: list[Group] = []
        source_stats: dict[str, Any] = {}
        rounds = 0
        while len(batch) < self.num_groups and rounds < self.max_rounds:
            result = self.source.rollout((self.total_batches, rounds))  # the round's position
            rounds += 1
            generated.extend(result.groups)
            source_stats.update(result.stats)
            for group in result.groups:
                if self.filter_groups and not group.informative:
                    continue
                if len(batch) < self.num_groups:
                    batch.append(group)
                elif self.keep_surplus:
                    self._surplus.append(group)
        stats: dict[str, Any] = batch_stats(generated, rounds=rounds)
        self.total_rounds += rounds
        self.total_samples += int(stats["samples_generated"])
        self.total_batches += 1
        partial = len(batch) < self.num_groups
        if partial:
            self.partial_batches += 1
            self._warn_partial(len(batch), rounds, stats)
        stats.update(surplus_groups=float(len(self._surplus)), partial=1.0 if partial else 0.0,
                     partial_batches=float(self.partial_batches))
        stats.update(source_stats)
        stats.update(task_stats(generated, batch, self.task_ids))
        return RolloutBatch(groups=tuple(batch), stats=stats)

    def _warn_partial(self, got: int, rounds: int, stats: Mapping[str, float]) -> None:
        """One line, once per cause; later partial batches are only counted."""
        too_hard = stats["all_wrong_share"] >= stats["all_correct_share"]
        cause = "too hard (most groups all wrong)" if too_hard else "too easy (most groups all right)"
        if cause in self._warned:
            return
        self._warned.add(cause)
        warnings.warn(
            f"DynamicSampler: only {got} of {self.num_groups} informative groups after {rounds} generation rounds "
            f"(max_rounds={self.max_rounds}): the data is {cause} for the policy; returning a partial batch. "
            f"{self.advice}; later partial batches are counted in stats['partial_batches'] without a warning",
            RuntimeWarning, stacklevel=3)

    def state_dict(self) -> dict[str, Any]:
        """Surplus groups, counters and the source's state (JSON-serialisable) for exact resume."""
        return {
            "surplus": [group_to_dict(g) for g in self._surplus],
            "total_rounds": self.total_rounds,
            "total_batches": self.total_batches,
            "total_samples": self.total_samples,
            "partial_batches": self.partial_batches,
            "source": self.source.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the next ``sample`` draws the same prompts as the saved run."""
        self._surplus = deque(group_from_dict(g) for g in state["surplus"])
        self.total_rounds = int(state["total_rounds"])
        self.total_batches = int(state["total_batches"])
        self.total_samples = int(state["total_samples"])
        self.partial_batches = int(state.get("partial_batches", 0))
        self.source.load_state_dict(state["source"])


__all__ = ["DynamicSampler", "EnvSource", "GroupEnv", "Position", "RolloutSource", "batch_stats", "group_from_dict", "group_prompts", "group_to_dict",
           "group_task", "grouped", "play_round", "task_stats"]
