"""Which task grades a row: verl's and TRL's ``data_source`` names, task ids, ``extra_info["task"]``.

Routing travels with the data (``data_source``, ``extra_info["task"]``) or with the config
(``reward_kwargs``), never with state set in the driver, so it holds in Ray workers.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Mapping
from typing import Any

from dapo_env.tasks import Task, get_task
from dapo_env.tasks.mixture import is_mixture, resolve_task_text
from dapo_env.types import CodeTests, InvalidReference


# verl ``data_source`` values (verl's ``default_compute_score``, its example preprocessors and public
# verl-format datasets) -> the task whose verifier grades them.
VERL_DATA_SOURCES: dict[str, str] = {
    "math_dapo": "DAPOMath-v0",
    "math_dapo_reasoning": "DAPOMath-v0",
    "math": "DAPOMath-v0",  # verl grades "math" with its DAPO scorer ("Answer:" line)
    "DAPO-17k": "DAPOMath-v0",
    "BytedTsinghua-SIA/DAPO-Math-17k": "DAPOMath-v0",
    "openai/gsm8k": "GSM8K-v0",
    "gsm8k": "GSM8K-v0",
    "lighteval/MATH": "MATH500-v0",
    "DigitalLearningGmbH/MATH-lighteval": "MATH500-v0",
    "HuggingFaceH4/MATH-500": "MATH500-v0",
    "HuggingFaceH4/aime_2024": "AIME24-v0",
    "math-ai/aime25": "AIME25-v0",
    "aime25": "AIME25-v0",
    "aime2025": "AIME25-v0",
    "aime_2025": "AIME25-v0",
    "numina_aops_forum": "MATH500-v0",
    "numina_synthetic_math": "MATH500-v0",
    "numina_amc_aime": "MATH500-v0",
    "numina_synthetic_amc": "MATH500-v0",
    "numina_cn_k12": "MATH500-v0",
    "numina_olympiads": "MATH500-v0",
    "hiyouga/geometry3k": "MATH500-v0",
    "codecontests": "MBPP-v0",  # APPS-style {"inputs", "outputs", "fn_name"} tests are converted
    "apps": "MBPP-v0",
    "codeforces": "MBPP-v0",
    "taco": "MBPP-v0",
    "google-research-datasets/mbpp": "MBPP-v0",
    "openai/openai_humaneval": "HumanEval-v0",
}
_VERL_PREFIXES: tuple[tuple[str, str], ...] = (("aime", "AIME24-v0"),)  # verl: data_source.startswith("aime")
_warned: set[str] = set()
_warned_lock = threading.Lock()


class InteropWarning(UserWarning, RuntimeWarning):
    """A one-time warning from the TRL/verl shims (an unknown ``data_source``, an ignored keyword). Both a
    ``UserWarning`` and a ``RuntimeWarning``, so filters on either catch it."""


def register_data_source(data_source: str, task_or_id: str | Task, *, overwrite: bool = False) -> None:
    """Route a ``data_source`` to a task in this process. Processes that verl starts (Ray workers) do
    not see it: route there with ``reward_kwargs`` (``task=`` or ``data_source_tasks=``) instead."""
    env_id = get_task(task_or_id).env_id
    if data_source in VERL_DATA_SOURCES and not overwrite:
        raise ValueError(f"data_source {data_source!r} already maps to {VERL_DATA_SOURCES[data_source]}: pass overwrite=True")
    VERL_DATA_SOURCES[data_source] = env_id


def task_for_data_source(data_source: Any, *, task: str | None = None,
                         data_source_tasks: Mapping[str, str] | None = None, extra_info: Any = None) -> Task | None:
    """The task that grades a row, ``None`` when nothing names one.

    In order: ``task`` (one task for every row; a mixture routes each row as below),
    ``data_source_tasks[data_source]``, the
    :data:`VERL_DATA_SOURCES` table (and verl's ``aime*`` prefix), ``data_source`` as a task name or id,
    ``extra_info["task"]`` (written by :func:`to_hf_dataset`).
    """
    if task is not None:
        named_task = resolve_task_text(str(task))
        if not is_mixture(named_task):  # a mixture's rows each name their own task: route them below
            return named_task
    source = str(data_source) if data_source is not None else ""
    if data_source_tasks and source in data_source_tasks:
        return get_task(str(data_source_tasks[source]))
    if source in VERL_DATA_SOURCES:
        return get_task(VERL_DATA_SOURCES[source])
    try:
        return get_task(source)
    except KeyError:
        pass
    named = extra_info.get("task") if isinstance(extra_info, Mapping) else None
    if named is not None:
        try:
            return get_task(str(named))
        except KeyError:
            pass
    for prefix, env_id in _VERL_PREFIXES:
        if source.startswith(prefix):
            return get_task(env_id)
    return None


def route(data_source: Any, *, task: str | None = None, data_source_tasks: Mapping[str, str] | None = None,
          extra_info: Any = None) -> tuple[str, Any]:
    """``(task id, verifier)`` for a row; an unknown ``data_source`` gets the auto math verifier
    (``("math:auto", MathVerifier())``) and a one-time warning per name."""
    found = task_for_data_source(data_source, task=task, data_source_tasks=data_source_tasks, extra_info=extra_info)
    if found is not None:
        return found.env_id, found.verifier
    warn_once(f"data_source:{data_source}", (
        f"dapo_env: unknown data_source {data_source!r}: graded as math with MathVerifier() (answer_format='auto'). "
        "Route it with reward_kwargs task='<task id>' or data_source_tasks={'<data_source>': '<task id>'} "
        "(known: dapo_env.interop.VERL_DATA_SOURCES and every task id)"))
    if "verifier" not in _AUTO_MATH:
        from dapo_env.verifiers.math import MathVerifier

        _AUTO_MATH["verifier"] = MathVerifier()
    return "math:auto", _AUTO_MATH["verifier"]


_AUTO_MATH: dict[str, Any] = {}


def warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, InteropWarning, stacklevel=3)


def _is_code(verifier: Any) -> bool:
    from dapo_env.verifiers.code import CodeVerifier

    return isinstance(verifier, CodeVerifier)


def ground_truth(reward_model: Any) -> Any:
    return reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else reward_model


def code_reference(verifier: Any, reference: Any) -> Any:
    """For a code verifier, APPS-style tests (verl's ``codecontests``/``apps``/``taco`` rows) become CodeTests;
    anything else is passed on for the verifier's own ``prepare_reference``."""
    if not _is_code(verifier):
        return reference
    data = reference
    if isinstance(data, str) and data.lstrip().startswith("{"):
        try:
            data = json.loads(data)
        except ValueError:
            return reference
    if not isinstance(data, Mapping) or "inputs" not in data or "outputs" not in data:
        return reference
    return apps_tests(data)


def apps_tests(data: Mapping[str, Any]) -> CodeTests:
    """APPS/TACO-style tests ``{"inputs": [...], "outputs": [...], "fn_name"?: ...}`` as :class:`CodeTests`:
    stdin/stdout pairs, or with ``fn_name`` one call per input (the output may be wrapped in a list).

    Example:
        >>> apps_tests({"inputs": ["1 2\\n"], "outputs": ["3\\n"]}).stdio
        (('1 2\\n', '3\\n'),)
    """
    inputs, outputs = list(data["inputs"]), list(data["outputs"])
    if len(inputs) != len(outputs) or not inputs:
        raise InvalidReference(f"APPS-style tests need as many outputs as inputs (>= 1), got {len(inputs)} and {len(outputs)}")
    fn_name = data.get("fn_name")
    if fn_name:
        tests = tuple(
            f"_out = {fn_name}(*{list(args)!r})\n"
            f"assert _out == {expected!r} or [_out] == {expected!r} or (isinstance(_out, tuple) and list(_out) == {expected!r})"
            for args, expected in zip(inputs, outputs)
        )
        return CodeTests(tests=tests, entry_point=str(fn_name))

    def text(value: Any) -> str:
        return "\n".join(map(str, value)) if isinstance(value, list) else str(value)

    return CodeTests(stdio=tuple((text(i), text(o)) for i, o in zip(inputs, outputs)))
