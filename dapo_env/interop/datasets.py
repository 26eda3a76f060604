"""A task's problems as a ``datasets.Dataset`` that TRL and verl read as is.

:func:`to_hf_dataset` writes ``prompt`` (a string, or chat messages with ``chat=True``), ``answer`` (the
reference as a string: the gold answer for math, JSON of the tests for code), ``data_source`` (the task
id), ``ability``, ``reward_model = {"style": "rule", "ground_truth": <answer>}`` and ``extra_info`` as
verl's preprocessors write them, and ``problem_id``. A mixture's rows each carry their own task (its id as
``data_source`` and ``extra_info["task"]``, its reference and problem id), so TRL's and verl's reward
functions route every row to its task's verifier. Every column is a string, an int or a struct of
them, so rows survive ``Dataset.map``, Parquet and JSON round trips, and datasets of different tasks
concatenate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dapo_env.envs import load_problems, resolve_task
from dapo_env.tasks import Task
from dapo_env.tasks.mixture import component_of
from dapo_env.types import CodeTests, InvalidReference


def reference_to_str(reference: Any) -> str:
    """A task's reference in the string form every verifier accepts back: the gold answer for math,
    ``CodeTests.to_dict()`` as JSON for code, ``to_json()`` for references that define it.

    Example:
        >>> reference_to_str(CodeTests(tests=("assert f() == 1",)))[:30]
        '{"tests": ["assert f() == 1"],'
    """
    if isinstance(reference, str):
        return reference
    if isinstance(reference, CodeTests):
        return json.dumps(reference.to_dict(), ensure_ascii=False)
    if callable(getattr(reference, "to_json", None)):
        return str(reference.to_json())
    if isinstance(reference, (int, float)) and not isinstance(reference, bool):
        from dapo_env.verifiers.references import math_gold

        return math_gold(reference)
    raise TypeError(
        f"a reference of type {type(reference).__name__} has no string form: give it a to_json() method "
        "that its verifier accepts back, or store the reference as a string"
    )


def _ability(task: Task, reference: Any) -> str:
    from dapo_env.verifiers.math import MathVerifier

    if isinstance(reference, CodeTests):
        return "code"
    return "math" if isinstance(task.verifier, MathVerifier) else "reasoning"


def to_hf_dataset(task_id: str | Task, split: str | None = None, *, chat: bool = False,
                  system_prompt: str | None = None, limit: int | None = None, prompt_template: str | None = None,
                  strict_references: bool = True, **task_kwargs: Any) -> Any:
    """A task's problems as a ``datasets.Dataset`` for TRL and verl (columns in the module docstring).

    Args:
        task_id: a task name, Gymnasium id or :class:`~dapo_env.tasks.Task`.
        split: the split to load (default: the task's).
        chat: ``prompt`` as chat messages ``[{"role": "user", "content": ...}]`` (TRL's conversational
            format; verl's ``RLHFDataset`` needs it) instead of the formatted prompt string.
        system_prompt: a system message placed before the user message (needs ``chat=True``).
        limit: keep the first ``limit`` problems.
        prompt_template: overrides the task's ``str.format`` template.
        strict_references: raise :class:`~dapo_env.types.InvalidReference` when a problem's reference cannot
            be read (the default: verl cannot skip a sample); ``False`` keeps such rows, warned about once, for
            a reward function that scores them ``None`` (TRL's unscorable rows). A reference that does not
            survive serialisation always raises.
        **task_kwargs: passed to ``task.load`` (``data_files=...`` for dataset tasks, ``size=...`` for
            procedural ones).

    Example:
        >>> ds = to_hf_dataset("Arithmetic-v0", limit=2, chat=True)
        >>> ds[0]["prompt"], ds[0]["answer"], ds[0]["data_source"]
        ([{'role': 'user', 'content': 'Compute 17-13.'}], '4', 'Arithmetic-v0')
        >>> ds[0]["reward_model"], ds[0]["extra_info"]["task"]
        ({'style': 'rule', 'ground_truth': '4'}, 'Arithmetic-v0')
    """
    from datasets import Dataset

    if system_prompt is not None and not chat:
        raise ValueError("system_prompt needs chat=True (a plain string prompt has no system message)")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    task = resolve_task(task_id, prompt_template)
    split = split or task.split
    problems = load_problems(task, split, task_kwargs.pop("data_files", None), task_kwargs)
    problems = problems[:limit] if limit is not None else problems
    owners = [component_of(task, p) for p in problems]  # a mixture's rows: each its own task's
    references = [reference_to_str(inner.answer) for _, inner in owners]
    for owner in dict.fromkeys(owner for owner, _ in owners):
        rows = [i for i, (o, _) in enumerate(owners) if o is owner]
        _check_references(owner, [references[i] for i in rows], [owners[i][1].answer for i in rows],
                          strict_references)
    rows = []
    for index, (problem, (owner, inner), reference) in enumerate(zip(problems, owners, references)):
        text = task.format_prompt(problem)
        prompt: Any = text
        if chat:
            prompt = ([{"role": "system", "content": system_prompt}] if system_prompt is not None else [])
            prompt.append({"role": "user", "content": text})
        rows.append({
            "prompt": prompt,
            "answer": reference,
            "data_source": owner.env_id,
            "ability": _ability(owner, inner.answer),
            "reward_model": {"style": "rule", "ground_truth": reference},
            "problem_id": inner.id,
            "extra_info": {"task": owner.env_id, "split": split, "index": index, "problem_id": inner.id},
        })
    return Dataset.from_list(rows)


def _check_references(task: Task, references: Sequence[str], originals: Sequence[Any], strict: bool) -> None:
    """Every serialised reference must be accepted back by the task's verifier (raises InvalidReference). With
    ``strict=False`` a reference the verifier cannot read in its original form either is only warned about."""
    from dapo_env.interop.routing import warn_once
    from dapo_env.verifiers.pool import prepare_references

    prepare = getattr(task.verifier, "prepare_reference", None)
    unreadable: list[int] = []
    for i, (reference, original) in enumerate(zip(references, originals)):
        try:
            prepare_references(task.verifier, [reference])
        except InvalidReference as exc:
            readable = prepare is None
            if not readable:
                try:
                    prepare(original)
                    readable = True
                except InvalidReference:
                    pass
            if strict or readable:
                what = "its references do not survive serialisation" if readable else "a reference cannot be read"
                raise InvalidReference(f"{task.env_id}: {what} (reference {i}: {exc})") from None
            unreadable.append(i)
    if unreadable:
        warn_once(f"unreadable:{task.env_id}:{len(references)}:{unreadable[:3]}", (
            f"{task.env_id}: {len(unreadable)} of {len(references)} references cannot be read (rows {unreadable[:5]}"
            f"{'...' if len(unreadable) > 5 else ''}): kept, and scored None (unscorable) by the reward"))
