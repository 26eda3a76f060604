"""`DynamicSampler`: DAPO's dynamic sampling on top of a :class:`~dapo_env.vector.GroupVectorEnv`.

A group whose G responses are all right or all wrong has zero advantage under any group-relative
estimator, so it adds nothing to the gradient. The sampler keeps generating until it holds
``num_groups`` informative groups (``0 < #correct < G``, judged from the verifier's verdicts), keeps
surplus informative groups for the next batch (first in, first out), counts generation rounds
separately from batches, and gives up gracefully after ``max_rounds`` with a warning and a partial
batch. It knows nothing about learners.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dapo_env.envs import as_completion
from dapo_env.types import Completion, Group, RolloutBatch
from dapo_env.vector import GroupVectorEnv

Generate = Callable[[list[str]], Sequence["Completion | str"]]


def grouped(generate_n: Callable[[list[str], int], Sequence[Sequence[Completion | str]]], group_size: int) -> Generate:
    """Adapt an engine-style ``generate_n(prompts, n) -> [[n responses] per prompt]`` to ``generate``.

    The group env shows each prompt G times in a row; engines usually take each distinct prompt once
    with ``n`` samples. The adapter passes ``prompts[::G]`` and flattens the answer group-major.

    Example:
        >>> gen = grouped(lambda prompts, n: [[f"{p}-{k}" for k in range(n)] for p in prompts], 2)
        >>> gen(["a", "a", "b", "b"])
        ['a-0', 'a-1', 'b-0', 'b-1']
    """
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")

    def generate(prompts: list[str]) -> list[Completion | str]:
        if len(prompts) % group_size:
            raise ValueError(f"{len(prompts)} prompts is not a multiple of group_size={group_size}")
        unique = prompts[::group_size]
        for g, prompt in enumerate(unique):
            if any(p != prompt for p in prompts[g * group_size:(g + 1) * group_size]):
                raise ValueError(f"prompts are not group-major with group_size={group_size} (group {g} differs)")
        nested = generate_n(list(unique), group_size)
        if len(nested) != len(unique) or any(len(group) != group_size for group in nested):
            raise ValueError(f"generate_n must return {len(unique)} lists of {group_size} responses")
        return [response for group in nested for response in group]  # (B, G) -> (B*G,)

    return generate


def _plain(value: Any) -> Any:
    """Numpy scalars and arrays as plain Python values (JSON-serialisable state, clean infos)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def sample_infos(infos: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Split Gymnasium vector infos (``key -> array`` with ``_key`` masks) into ``n`` per-sample dicts."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        if isinstance(value, Mapping):
            for i, sub in enumerate(sample_infos(value, n)):
                out[i][key] = sub
            continue
        mask = infos.get(f"_{key}")
        for i in range(n):
            if mask is None or mask[i]:
                out[i][key] = _plain(value[i])
    return out


# Step-level keys left out of each Group's per-sample infos (the prompt is Group.prompt already).
_STEP_KEYS = frozenset({"final_obs", "next_problem_id"})


def groups_from_step(prompts: Sequence[str], completions: Sequence[Completion], rewards: np.ndarray,
                     infos: Mapping[str, Any], group_size: int) -> list[Group]:
    """Cut one group env step (B*G samples, group-major) into B :class:`Group` objects."""
    n = len(completions)
    per_sample = sample_infos({k: v for k, v in infos.items() if k.lstrip("_") not in _STEP_KEYS}, n)
    groups = []
    for start in range(0, n, group_size):
        span = range(start, start + group_size)
        groups.append(Group(
            problem_id=str(per_sample[start]["problem_id"]),
            prompt=prompts[start],
            completions=tuple(completions[i] for i in span),
            rewards=tuple(float(rewards[i]) for i in span),
            correct=tuple(bool(per_sample[i]["correct"]) for i in span),
            loss_mask=tuple(bool(per_sample[i]["loss_mask"]) for i in span),
            infos=tuple(per_sample[i] for i in span),
        ))
    return groups


def group_to_dict(group: Group) -> dict[str, Any]:
    """A JSON-serialisable form of a group (for checkpoints)."""
    return {
        "problem_id": group.problem_id,
        "prompt": group.prompt,
        "completions": [
            {"text": c.text, "num_tokens": c.num_tokens, "finish_reason": c.finish_reason,
             "token_ids": None if c.token_ids is None else list(c.token_ids),
             "logprobs": None if c.logprobs is None else list(c.logprobs),
             "prompt_token_ids": None if c.prompt_token_ids is None else list(c.prompt_token_ids)}
            for c in group.completions
        ],
        "rewards": list(group.rewards),
        "correct": list(group.correct),
        "loss_mask": list(group.loss_mask),
        "infos": [_plain(dict(info)) for info in group.infos],
    }


def group_from_dict(data: Mapping[str, Any]) -> Group:
    """Inverse of :func:`group_to_dict`."""
    def tup(x: Any) -> Any:
        return None if x is None else tuple(x)

    return Group(
        problem_id=data["problem_id"],
        prompt=data["prompt"],
        completions=tuple(
            Completion(c["text"], num_tokens=c["num_tokens"], finish_reason=c["finish_reason"],
                       token_ids=tup(c["token_ids"]), logprobs=tup(c["logprobs"]),
                       prompt_token_ids=tup(c["prompt_token_ids"]))
            for c in data["completions"]
        ),
        rewards=tuple(float(r) for r in data["rewards"]),
        correct=tuple(bool(c) for c in data["correct"]),
        loss_mask=tuple(bool(m) for m in data["loss_mask"]),
        infos=tuple(dict(i) for i in data["infos"]),
    )


class DynamicSampler:
    """Fills batches with informative groups from a :class:`GroupVectorEnv` and a ``generate`` callable.

    Args:
        env: the group environment (B prompts x G responses per step).
        generate: ``generate(prompts) -> responses``: receives the B*G observations group-major and
            returns B*G responses (``str`` or :class:`~dapo_env.types.Completion`) in the same order.
        num_groups: groups per batch (default: the env's B).
        max_rounds: generation rounds allowed per batch; when they run out, ``sample`` warns and
            returns the groups it has (``stats["partial"] == 1.0``). Never raises for hard data.
        filter_groups: False returns the first ``num_groups`` groups unfiltered (plain GRPO).
        seed: seed for the env's first reset (when the env has not been reset yet).

    Example:
        >>> from dapo_env import GroupVectorEnv
        >>> env = GroupVectorEnv("Arithmetic-v0", num_envs=8, group_size=4, size=50)
        >>> answers = {env.task.format_prompt(p): p.answer for p in env.problems}
        >>> def generate(prompts):  # right at even positions, wrong at odd ones
        ...     return [f"Answer: {answers[p]}" if i % 2 == 0 else "Answer: none" for i, p in enumerate(prompts)]
        >>> batch = DynamicSampler(env, generate, seed=0).sample()
        >>> len(batch.groups), batch.stats["rounds"], batch.groups[0].num_correct
        (2, 1.0, 2)
        >>> env.close()
    """

    def __init__(self, env: GroupVectorEnv, generate: Generate, *, num_groups: int | None = None,
                 max_rounds: int = 10, filter_groups: bool = True, seed: int | None = None) -> None:
        if not isinstance(env, GroupVectorEnv):
            raise TypeError(f"DynamicSampler needs a dapo_env GroupVectorEnv, got {type(env).__name__}")
        if not callable(generate):
            raise TypeError("generate must be a callable: generate(prompts: list[str]) -> list[Completion | str]")
        num_groups = env.num_prompts if num_groups is None else num_groups
        if not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(f"num_groups must be a positive int, got {num_groups!r}")
        if not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive int (generation rounds per batch), got {max_rounds!r}")
        self.env, self.generate = env, generate
        self.num_groups, self.max_rounds = num_groups, max_rounds
        self.filter_groups, self.seed = bool(filter_groups), seed
        self._surplus: deque[Group] = deque()
        self.total_rounds = 0  # generation rounds over the sampler's life
        self.total_batches = 0
        self.total_samples = 0

    def _round(self) -> list[Group]:
        """One generation round: B*G responses for the current prompts, verified and grouped."""
        if self.env.needs_reset:
            self.env.reset(seed=self.seed)
        prompts = list(self.env.prompts)
        responses = self.generate(prompts)
        if len(responses) != len(prompts):
            raise ValueError(
                f"generate returned {len(responses)} responses for {len(prompts)} prompts: return one per "
                "prompt, in the same (group-major) order"
            )
        completions = [as_completion(r) for r in responses]
        _, rewards, _, _, infos = self.env.step(completions)
        return groups_from_step(prompts, completions, rewards, infos, self.env.group_size)

    def sample(self) -> RolloutBatch:
        """The next batch of ``num_groups`` groups (informative ones unless ``filter_groups=False``)."""
        batch: list[Group] = []
        while self._surplus and len(batch) < self.num_groups:
            batch.append(self._surplus.popleft())
        rounds = samples = correct = 0
        generated: list[Group] = []
        while len(batch) < self.num_groups and rounds < self.max_rounds:
            groups = self._round()
            rounds += 1
            generated.extend(groups)
            for group in groups:
                samples += group.size
                correct += group.num_correct
                if self.filter_groups and not group.informative:
                    continue
                if len(batch) < self.num_groups:
                    batch.append(group)
                else:
                    self._surplus.append(group)
        self.total_rounds += rounds
        self.total_samples += samples
        self.total_batches += 1
        partial = len(batch) < self.num_groups
        if partial:
            warnings.warn(
                f"DynamicSampler: only {len(batch)} of {self.num_groups} informative groups after {rounds} "
                f"generation rounds (max_rounds={self.max_rounds}); returning a partial batch. The data may be "
                "too hard or too easy for the policy: raise max_rounds, lower num_groups or change the data",
                RuntimeWarning, stacklevel=2,
            )
        return RolloutBatch(groups=tuple(batch), stats=self._stats(generated, rounds, samples, correct, partial))

    def _stats(self, generated: list[Group], rounds: int, samples: int, correct: int, partial: bool) -> dict[str, float]:
        n = len(generated)

        def share(count: int) -> float:
            return count / n if n else 0.0

        return {
            "rounds": float(rounds),
            "samples_generated": float(samples),
            "accuracy_before_filter": correct / samples if samples else 0.0,
            "all_correct_share": share(sum(g.num_correct == g.size for g in generated)),
            "all_wrong_share": share(sum(g.num_correct == 0 for g in generated)),
            "zero_advantage_share": share(sum(len(set(g.rewards)) <= 1 for g in generated)),
            "informative_groups": float(sum(g.informative for g in generated)),
            "surplus_groups": float(len(self._surplus)),
            "partial": 1.0 if partial else 0.0,
        }

    @property
    def surplus(self) -> tuple[Group, ...]:
        """Groups kept for the next batch, oldest first."""
        return tuple(self._surplus)

    def state_dict(self) -> dict[str, Any]:
        """Surplus groups, counters and the env's RNG state (JSON-serialisable) for exact resume."""
        return {
            "surplus": [group_to_dict(g) for g in self._surplus],
            "total_rounds": self.total_rounds,
            "total_batches": self.total_batches,
            "total_samples": self.total_samples,
            "env": self.env.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the next ``sample`` draws the same prompts as the saved run."""
        self._surplus = deque(group_from_dict(g) for g in state["surplus"])
        self.total_rounds = int(state["total_rounds"])
        self.total_batches = int(state["total_batches"])
        self.total_samples = int(state["total_samples"])
        self.env.load_state_dict(state["env"])


__all__ = ["DynamicSampler", "group_from_dict", "group_to_dict", "grouped", "groups_from_step", "sample_infos"]
