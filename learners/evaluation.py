"""Held-out evaluation: the one function that generates, verifies and grades a set of problems.

The trainer's ``eval/accuracy``, the warm start's probe, ``dapo-env eval`` and the benchmarks all call
:func:`evaluate`. It returns one :class:`~dapo_env.learners.run_folder.EvalSample` per sample (``samples``
per problem): the record of a run folder's ``eval/step_<N>.jsonl`` lines, so pass@k, avg@k and maj@k
(``dapo_env.evaluation``) can be computed from them.
Prompts are rendered exactly as the group env renders them (the task's template, then the chat template
when a tokenizer is given); verification runs in this process through ``verify_batch`` (the one inline
verification path); a truncated response counts as wrong.

A multi-turn task (one with an interaction, e.g. ``GuessNumber-v0``) is evaluated on whole episodes, played
by the same :class:`~dapo_env.episodes.EpisodeGroupEnv` that produces training episodes (token-exact
through the chat template, the engine's ``generate_turns``): a record's ``correct`` is "solved and not
truncated", its ``completion`` the episode's text after the prompt (turns and replies), ``tokens`` the
tokens the model sampled over the episode.

Example:
    >>> from dapo_env.learners.engine import HFEngine
    >>> from dapo_env.learners.tiny import build_tiny_model, build_tokenizer
    >>> from dapo_env.tasks import get_task
    >>> tok = build_tokenizer(); engine = HFEngine(build_tiny_model(tok, seed=0), tok)
    >>> task = get_task("Arithmetic-v0")
    >>> result = evaluate(engine, task, task.load(split="test")[:3], max_response_tokens=4)
    >>> len(result.records), result.accuracy, result.records[0].finish_reason in ("stop", "length")
    (3, 0.0, True)
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dapo_env.envs import render_prompt
from dapo_env.types import Problem
from dapo_env.verifiers import as_verifier, verify_batch

from .engine import RolloutEngine, SamplingParams
from .run_folder import EvalSample


@dataclass(frozen=True)
class EvalResult:
    """The records of one evaluation, problem-major (``samples`` consecutive records per problem)."""

    records: tuple[EvalSample, ...]

    @property
    def accuracy(self) -> float:
        """Mean of ``correct`` over every record (avg@k with k samples; accuracy for greedy); 0.0 when empty."""
        return sum(r.correct for r in self.records) / len(self.records) if self.records else 0.0


def load_eval_problems(task: Any, *, split: str, size: int, task_kwargs: dict[str, Any] | None = None) -> list[Problem]:
    """The first ``size`` problems of ``split`` (the held-out set of a run: fixed, in file order)."""
    problems = task.load(split=split, **dict(task_kwargs or {}))
    return [problems[i] for i in range(min(size, len(problems)))]


def evaluate(engine: RolloutEngine, task: Any, problems: Sequence[Problem], *, max_response_tokens: int,
             samples: int = 1, temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
             chat_template: Any = None, system_prompt: str | None = None, max_turns: int | None = None,
             max_episode_tokens: int | None = None) -> EvalResult:
    """Generate ``samples`` responses per problem, verify them with the task's verifier, return the records.

    Args:
        engine: a rollout engine (its current weights are evaluated).
        task: the :class:`~dapo_env.tasks.Task` (prompt template and verifier).
        problems: the problems to evaluate.
        max_response_tokens: the response budget.
        samples: responses per problem (``k`` of avg@k / pass@k).
        temperature: 0 decodes greedily; otherwise samples with ``top_p`` and ``seed``.
        chat_template, system_prompt: a tokenizer whose chat template wraps the prompts (as in the env);
            required for a multi-turn task.
        max_turns, max_episode_tokens: a multi-turn task's episode budgets (as in training); ignored otherwise.
    """
    if getattr(task, "turns", "single-turn") == "multi-turn":
        return _evaluate_episodes(engine, task, problems, max_response_tokens=max_response_tokens, samples=samples,
                                  temperature=temperature, top_p=top_p, seed=seed, chat_template=chat_template,
                                  system_prompt=system_prompt, max_turns=max_turns,
                                  max_episode_tokens=max_episode_tokens)
    prompts = [render_prompt(task, p, chat_template, system_prompt) for p in problems]
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_response_tokens=max_response_tokens, seed=seed)
    outs = engine.generate(prompts, n=samples, sampling=sampling) if prompts else []
    flat = [(p, prompt, k, c) for p, prompt, group in zip(problems, prompts, outs) for k, c in enumerate(group)]
    verdicts = verify_batch(as_verifier(task.verifier), [c.text for *_, c in flat], [p.answer for p, *_ in flat],
                            workers=0)
    return EvalResult(tuple(
        EvalSample(problem_id=str(p.id), prompt=prompt, completion=c.text, extracted=v.extracted,
                   correct=bool(v.correct) and not c.truncated, reason=v.reason, tokens=int(c.length or 0),
                   finish_reason=c.finish_reason, sample=k, answer=p.answer if isinstance(p.answer, str) else None)
        for (p, prompt, k, c), v in zip(flat, verdicts)))


@dataclass(frozen=True)
class _GivenProblems:
    """A problem source that returns exactly the problems it holds (the evaluation set), whatever the split."""

    problems: tuple[Problem, ...]

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Problem]:
        return self.problems


def _evaluate_episodes(engine: Any, task: Any, problems: Sequence[Problem], *, max_response_tokens: int, samples: int,
                       temperature: float, top_p: float, seed: int, chat_template: Any, system_prompt: str | None,
                       max_turns: int | None, max_episode_tokens: int | None) -> EvalResult:
    """:func:`evaluate` for a multi-turn task: ``samples`` episodes per problem through ``EpisodeGroupEnv``."""
    from dapo_env.episodes import EpisodeGroupEnv

    if not problems:
        return EvalResult(())
    if chat_template is None:
        raise ValueError(f"{task.env_id} is multi-turn: its episodes are played token by token through a chat "
                         "template; pass chat_template=<the model's tokenizer>")
    generate_turns = getattr(engine, "generate_turns", None)
    if generate_turns is None:
        raise TypeError(f"{task.env_id} is multi-turn: the engine {type(engine).__name__} needs a "
                        "generate_turns(requests, sampling) method (HFEngine and VLLMEngine have one)")
    calls = itertools.count()

    def generate(requests: list[Any]) -> list[Any]:
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_response_tokens=max_response_tokens,
                                  seed=seed + next(calls))
        return generate_turns(requests, sampling)

    fixed = dataclasses.replace(task, source=_GivenProblems(tuple(problems)))
    with EpisodeGroupEnv(fixed, num_prompts=len(problems), group_size=samples, tokenizer=chat_template,
                         system_prompt=system_prompt, max_turns=max_turns, max_episode_tokens=max_episode_tokens) as env:
        env.reset(options={"indices": list(range(len(problems)))})
        groups = env.rollout(generate)
    release = getattr(engine, "release", None)
    if callable(release):
        release()
    return EvalResult(tuple(
        EvalSample(problem_id=str(p.id), prompt=group.prompt, completion=t.text, extracted=info["extracted"],
                   correct=bool(info["correct"]) and not t.truncated, reason=str(info["reason"]),
                   tokens=int(t.length or 0), finish_reason=t.finish_reason, sample=k,
                   answer=p.answer if isinstance(p.answer, str) else None)
        for p, group in zip(problems, groups) for k, (t, info) in enumerate(zip(group.completions, group.infos))))


__all__ = ["EvalResult", "evaluate", "load_eval_problems"]
