"""Held-out evaluation: the one function that generates, verifies and grades a set of problems.

The trainer's ``eval/accuracy``, the warm start's probe, ``dapo-env eval`` and the benchmarks all call
:func:`evaluate`. It returns one :class:`~dapo_env.learners.run.run_folder.EvalSample` per sample (``samples``
per problem): the record of a run folder's ``eval/step_<N>.jsonl`` lines, so pass@k, avg@k and maj@k
(``dapo_env.evaluation``) can be computed from them.
Prompts are rendered exactly as the group env renders them (the task's template, then the chat template
when a tokenizer is given); verification runs in this process through ``verify_batch`` (the one inline
verification path); a truncated response counts as wrong. A multi-turn task (``task.turns ==
"multi-turn"``) is played as whole episodes by the env layer's :class:`~dapo_env.episodes.EpisodeGroupEnv`
(one engine call per round over the live episodes): one record per episode, ``correct`` = solved.

With a chat template episodes are token-exact, as in training: each turn is sampled by the engine's
``generate_turns`` after exactly the recorded tokens (the HF engine keeps each episode's KV cache, dropped by
``release()`` when the episodes end); without one each turn is generated from the conversation's text.

Example:
    >>> from dapo_env.learners.engines import HFEngine
    >>> from dapo_env.learners.models.tiny import build_tiny_model, build_tokenizer
    >>> from dapo_env.tasks import get_task
    >>> tok = build_tokenizer(); engine = HFEngine(build_tiny_model(tok, seed=0), tok)
    >>> task = get_task("Arithmetic-v0")
    >>> result = evaluate(engine, task, task.load(split="test")[:3], max_response_tokens=4)
    >>> len(result.records), result.accuracy, result.records[0].finish_reason in ("stop", "length")
    (3, 0.0, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dapo_env.envs import render_prompt
from dapo_env.types import Problem
from dapo_env.verifiers import as_verifier, verify_batch

from ..engines import RolloutEngine, SamplingParams
from ..engines.openai_engine import ENDPOINT_ERROR, endpoint_error
from .run_folder import EvalSample


@dataclass(frozen=True)
class EvalResult:
    """The records of one evaluation, problem-major (``samples`` consecutive records per problem); ``extras``:
    per record, the fields a served answer adds (``reasoning``, ``usage``: :mod:`.served`), empty otherwise."""

    records: tuple[EvalSample, ...]
    extras: tuple[dict[str, Any], ...] = ()

    @property
    def accuracy(self) -> float:
        """Mean of ``correct`` over the records whose request did not fail (avg@k with k samples; accuracy for
        greedy); 0.0 when there are none."""
        graded = [r for r in self.records if not is_failed(r)]
        return sum(r.correct for r in graded) / len(graded) if graded else 0.0

    @property
    def failed(self) -> int:
        """Records whose request failed (``reason`` starting with ``error:endpoint``): not wrong answers."""
        return sum(is_failed(r) for r in self.records)


def is_failed(record: EvalSample | dict[str, Any]) -> bool:
    """Whether a record (an :class:`EvalSample` or its JSON dict) is a failed request, not a graded answer.

    Example:
        >>> is_failed({"reason": "error:endpoint: HTTP 500 (5 attempts)"}), is_failed({"reason": "no_answer"})
        (True, False)
    """
    reason = record["reason"] if isinstance(record, dict) else record.reason
    return str(reason).startswith(ENDPOINT_ERROR)


def answer_text(problem: Problem) -> str | None:
    """The reference a record shows: the problem's answer when it is text (a mixture problem's: its task's), else
    ``None`` (code tests).

    Example:
        >>> from dapo_env.tasks.mixture import TaskReference
        >>> answer_text(Problem("A-v0/1", "q", TaskReference("A-v0", "7"))), answer_text(Problem("1", "q", ("t",)))
        ('7', None)
    """
    from dapo_env.tasks.mixture import TaskReference

    answer = problem.answer.reference if isinstance(problem.answer, TaskReference) else problem.answer
    return answer if isinstance(answer, str) else None


def _failed_sample(problem: Problem, prompt: str, k: int, cause: str) -> EvalSample:
    return EvalSample(problem_id=str(problem.id), prompt=prompt, completion="", extracted=None, correct=False,
                      reason=f"{ENDPOINT_ERROR}: {cause}", tokens=0, finish_reason="length", sample=k,
                      answer=answer_text(problem))


def load_eval_problems(task: Any, *, split: str, size: int, task_kwargs: dict[str, Any] | None = None) -> list[Problem]:
    """The first ``size`` problems of ``split`` (the held-out set of a run: fixed, in file order)."""
    problems = task.load(split=split, **dict(task_kwargs or {}))
    return [problems[i] for i in range(min(size, len(problems)))]


def evaluate(engine: RolloutEngine, task: Any, problems: Sequence[Problem], *, max_response_tokens: int,
             samples: int = 1, temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
             tokenizer: Any = None, system_prompt: str | None = None, max_turns: int | None = None,
             max_episode_tokens: int | None = None, messages: bool = False, served: bool = False,
             count_tokenizer: Any = None) -> EvalResult:
    """Generate ``samples`` responses per problem, verify them with the task's verifier, return the records.

    Args:
        engine: a rollout engine (its current weights are evaluated).
        task: the :class:`~dapo_env.tasks.Task` (prompt template and verifier).
        problems: the problems to evaluate.
        max_response_tokens: the response budget.
        samples: responses per problem (``k`` of avg@k / pass@k).
        temperature: 0 decodes greedily; otherwise samples with ``top_p`` and ``seed``.
        tokenizer, system_prompt: a tokenizer whose chat template wraps the prompts (as in the env); for a
            multi-turn task it records the episodes' exact tokens (turns sampled token-exact by ``generate_turns``).
        max_turns, max_episode_tokens: a multi-turn task's episode budgets (as in training); ignored otherwise.
        messages: play a multi-turn task's turns through ``engine.generate_turns`` from each episode's chat
            messages even without ``tokenizer`` (an endpoint's chat API applies its own template).
        served: the answers come from a server (an endpoint eval): grade the final content only, reasoning
            (the server's field, think blocks) kept apart in ``extras`` with each sample's token usage
            (:func:`~dapo_env.learners.run.served.served_record`); single-turn tasks.
        count_tokenizer: with ``served``, counts the tokens the server does not report.

    A sample whose request failed (an endpoint engine's :class:`~dapo_env.learners.engines.openai_engine.FailedCompletion`)
    is recorded with ``reason="error:endpoint: <cause>"`` and is not graded (:func:`is_failed`).
    """
    if getattr(task, "turns", "single-turn") == "multi-turn":
        return EvalResult(_episodes(engine, task, problems, samples=samples, seed=seed, tokenizer=tokenizer,
                                    system_prompt=system_prompt, max_turns=max_turns,
                                    max_episode_tokens=max_episode_tokens, messages=messages, sampling=dict(
                                        temperature=temperature, top_p=top_p, max_response_tokens=max_response_tokens)))
    prompts = [render_prompt(task, p, tokenizer, system_prompt) for p in problems]
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_response_tokens=max_response_tokens, seed=seed)
    outs = engine.generate(prompts, n=samples, sampling=sampling) if prompts else []
    flat = [(p, prompt, k, c) for p, prompt, group in zip(problems, prompts, outs) for k, c in enumerate(group)]
    if served:
        from .served import served_record

        split = [served_record(c, prompt, tokenizer=count_tokenizer) if endpoint_error(c) is None else (c.text, {})
                 for _, prompt, _, c in flat]
    else:
        split = [(c.text, {}) for *_, c in flat]
    verdicts = verify_batch(as_verifier(task.verifier), [text for text, _ in split], [p.answer for p, *_ in flat],
                            workers=0)
    records = tuple(
        _failed_sample(p, prompt, k, endpoint_error(c)) if endpoint_error(c) is not None else
        EvalSample(problem_id=str(p.id), prompt=prompt, completion=text, extracted=v.extracted,
                   correct=bool(v.correct) and not c.truncated, reason=v.reason, tokens=int(c.length or 0),
                   finish_reason=c.finish_reason, sample=k, answer=answer_text(p))
        for (p, prompt, k, c), (text, _), v in zip(flat, split, verdicts))
    return EvalResult(records, tuple(extra for _, extra in split))


@dataclass(frozen=True)
class _GivenProblems:
    """A problem source serving problems already loaded (whatever split is asked)."""

    problems: tuple[Problem, ...]

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Problem]:
        return self.problems


def _episodes(engine: RolloutEngine, task: Any, problems: Sequence[Problem], *, samples: int, seed: int,
              tokenizer: Any, system_prompt: str | None, sampling: dict[str, Any], max_turns: int | None = None,
              max_episode_tokens: int | None = None, messages: bool = False) -> tuple[EvalSample, ...]:
    """``samples`` episodes of each problem of a multi-turn task, played to their ends; one record per episode:
    ``prompt`` the first observation, ``completion`` every turn and reply after it, ``extracted``/``reason``
    the last turn's verdict, ``correct`` whether it was solved (a turn cut at the token limit ends it wrong),
    ``tokens`` the sampled tokens. Round ``r`` samples with seed ``derive_seed(seed, r, 2)``."""
    import dataclasses
    import itertools

    from dapo_env.episodes import EpisodeGroupEnv

    from ..algo.update import derive_seed

    if not problems:
        return ()
    rounds = itertools.count()
    turn_level = tokenizer is not None or bool(messages)
    failures: dict[tuple[int, int], str] = {}  # (problem, episode) -> the cause of its failed request

    def generate(requests: list[Any]) -> list[Any]:
        params = SamplingParams(**sampling, seed=derive_seed(seed, next(rounds), 2))
        if turn_level:  # token-exact (or, over a chat endpoint, from the episode's messages)
            turns = engine.generate_turns(requests, params)
        else:
            turns = [group[0] for group in engine.generate([r.text for r in requests], n=1, sampling=params)]
        for request, turn in zip(requests, turns):
            if endpoint_error(turn) is not None:  # the episode ends here (a cut turn): an error, not a loss
                failures[(request.group, int(request.key.rsplit(":", 1)[1]))] = endpoint_error(turn)
        return turns

    env = EpisodeGroupEnv(dataclasses.replace(task, source=_GivenProblems(tuple(problems))), num_envs=len(problems) * samples,
                          group_size=samples, tokenizer=tokenizer, system_prompt=system_prompt,
                          max_turns=max_turns, max_episode_tokens=max_episode_tokens)
    with env:
        env.reset(options={"indices": list(range(len(problems)))})
        groups = env.rollout(generate).groups
    engine.release()  # the episodes have ended: drop their kept caches
    return tuple(
        _failed_sample(p, g.prompt, k, failures[(b, k)]) if (b, k) in failures else
        EvalSample(problem_id=str(p.id), prompt=g.prompt, completion=t.text, extracted=info["extracted"],
                   correct=bool(solved) and not t.truncated, reason=info["reason"], tokens=int(t.num_tokens or 0),
                   finish_reason=t.finish_reason, sample=k, answer=answer_text(p))
        for b, (p, g) in enumerate(zip(problems, groups))
        for k, (t, solved, info) in enumerate(zip(g.completions, g.correct, g.infos)))


__all__ = ["EvalResult", "evaluate", "is_failed", "load_eval_problems"]
