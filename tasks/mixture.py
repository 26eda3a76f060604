"""Mixtures: several tasks trained as one, each group drawn from one task by weight, each sample graded by its own.

A mixture is a :class:`~dapo_env.tasks.Task` built by composition, so every consumer of a task (the group
envs, the learner, evaluation, the TRL/verl exports) takes it unchanged:

- its source, :class:`MixtureSource`, loads every component task's split and interleaves them by weight
  (so any first N problems hold each task in proportion to its weight; read on demand). A problem keeps its
  task: its id is ``"<task id>/<problem id>"`` (unique across tasks), its question is the component's
  rendered prompt (the mixture's template is ``"{question}"``) and its answer is a :class:`TaskReference`
  (the component's id and reference);
- its verifier, :class:`RoutedVerifier`, grades each response with the verifier of the reference's task;
- the group envs' prompt schedule draws each group's task by weight, then a problem of that task
  (:func:`mixture_strata`; uniform or by difficulty within the task), from the schedule's one seeded
  generator, so the draws are deterministic and a resumed run neither skips nor repeats any.

A mixture is written ``"GSM8K-v0:0.7,MyMath-v0:0.3"`` (``--task`` of ``dapo-env train`` and ``eval``; a
missing weight is 1; weights are normalised) or declared in a spec file (:func:`load_mixture_spec`)::

    name: MathMix
    mixture:
      - {task: GSM8K-v0, weight: 0.7}
      - {task: MyMath-v0, weight: 0.3}

Example:
    >>> mix = resolve_task_text("Arithmetic-v0:0.75,Largest-v0:0.25")
    >>> mixture_task_ids(mix), mixture_weights(mix)
    (('Arithmetic-v0', 'Largest-v0'), (0.75, 0.25))
    >>> problems = mix.load(size=8)
    >>> [p.id.split("/")[0] for p in problems[:4]]
    ['Arithmetic-v0', 'Arithmetic-v0', 'Largest-v0', 'Arithmetic-v0']
    >>> p = problems[0]; mix.verifier(f"Answer: {p.answer}", p.answer).correct, sample_task(mix, p)
    (True, 'Arithmetic-v0')
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dapo_env.types import InvalidReference, Problem, VerifyResult

from .base import Task, TaskDataError
from .registry import get_task

#: The name (and Gymnasium id ``Mixture-v0``) of a mixture written on the command line.
MIXTURE_NAME = "Mixture"
SPEC_SUFFIXES = (".yaml", ".yml")
_WEIGHT = re.compile(r"^\s*[0-9.eE+-]+\s*$")


@dataclass(frozen=True)
class TaskReference:
    """A mixture problem's reference: the component task that grades it and that task's own reference.

    Printed, it is the component's reference (``f"Answer: {problem.answer}"`` reads as for the task).

    Example:
        >>> str(TaskReference("Arithmetic-v0", "4"))
        '4'
    """

    task: str
    reference: Any

    def __str__(self) -> str:
        return str(self.reference)


@dataclass(frozen=True, kw_only=True)
class MixtureEntry:
    """One component of a mixture: a task (an id, resolved when first needed, or a :class:`Task`), its weight
    and the keyword arguments of its loader (e.g. ``{"size": 200}`` for a procedural task)."""

    task: Task | str
    weight: float = 1.0
    task_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.task, (Task, str)) or (isinstance(self.task, str) and not self.task.strip()):
            raise TypeError(f"a mixture entry's task must be a task id or a Task, got {self.task!r}")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"mixture weight of {self.task_id} must be a positive number, got {weight!r}")
        if not isinstance(self.task_kwargs, Mapping):
            raise TypeError(f"task_kwargs of {self.task_id} must be a mapping, got {type(self.task_kwargs).__name__}")
        object.__setattr__(self, "weight", float(weight))
        object.__setattr__(self, "task_kwargs", dict(self.task_kwargs))

    @property
    def task_id(self) -> str:
        return self.task.env_id if isinstance(self.task, Task) else self.task.strip()

    def resolve(self) -> Task:
        """The component :class:`Task` (looked up in the registry when given by id); a multi-turn task is refused."""
        if isinstance(self.task, str) and self.task_id.endswith(SPEC_SUFFIXES):  # a spec file (a mixture spec's)
            task = get_task(_register_spec_file(self.task_id))
        else:
            task = get_task(self.task_id) if isinstance(self.task, str) else self.task
        if task.turns == "multi-turn":
            raise ValueError(f"{task.env_id} is multi-turn: a mixture draws single-turn tasks only for now; train it "
                             "on its own (--task " + task.env_id + ")")
        return task


def _register_spec_file(path: str) -> str:
    """The id of the task spec at ``path``, registered here (once) and exported to child processes."""
    try:
        from .spec_cli import register_spec_argument
    except ImportError:
        raise ValueError(f"{path}: task spec files are not supported by this version of dapo-env; name a "
                         "registered task id instead") from None
    return register_spec_argument(Path(path))


def interleave(counts: Sequence[int], weights: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """``(component, position)`` arrays of every component's items interleaved by weight: item ``i`` of component
    ``k`` sits at ``(i + 1/2) / weights[k]`` on one line (ties: the earlier component first), so any prefix holds
    each component in proportion to its weight until one runs out. Shapes (N,), N = sum(counts).

    Example:
        >>> components, positions = interleave([3, 2], [0.75, 0.25])
        >>> components.tolist(), positions.tolist()
        ([0, 0, 1, 0, 1], [0, 1, 0, 2, 1])
    """
    components = np.concatenate([np.full(n, k, dtype=np.int64) for k, n in enumerate(counts)])  # (N,)
    positions = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])  # (N,)
    keys = np.concatenate([(np.arange(n) + 0.5) / w for n, w in zip(counts, weights)])  # (N,)
    order = np.lexsort((components, keys))
    return components[order], positions[order]


class MixtureProblems(Sequence):
    """A mixture's problems, read on demand from its components' (procedural tasks generate theirs lazily):
    ``components[i]`` is the component of problem ``i``."""

    def __init__(self, tasks: Sequence[Task], parts: Sequence[Sequence[Problem]], weights: Sequence[float]) -> None:
        self.tasks, self.parts = tuple(tasks), tuple(parts)
        self.components, self._positions = interleave([len(p) for p in parts], weights)

    def __len__(self) -> int:
        return len(self.components)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        k, i = int(self.components[index]), int(self._positions[index])
        return _tag(self.tasks[k], self.parts[k][i])


class MixtureSource:
    """The :class:`~dapo_env.tasks.ProblemSource` of a mixture: every component's split, interleaved by weight,
    each problem keeping its task (``"<task id>/<id>"`` ids, :class:`TaskReference` answers, the component's
    rendered prompt as question).

    Args:
        entries: the components (at least one; each task once).
    """

    def __init__(self, entries: Sequence[MixtureEntry]) -> None:
        entries = tuple(entries)
        if not entries:
            raise ValueError("a mixture needs at least one task: e.g. 'GSM8K-v0:0.7,MyMath-v0:0.3'")
        ids = [e.task_id for e in entries]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"a mixture names {twice} more than once: give each task once, with its total weight")
        total = sum(e.weight for e in entries)
        self.entries = entries
        self.weights = tuple(e.weight / total for e in entries)

    def tasks(self) -> tuple[Task, ...]:
        """The component tasks, in order."""
        return tuple(e.resolve() for e in self.entries)

    def load(self, split: str, data_files: Any = None, **kwargs: Any) -> Sequence[Problem]:
        """Each component's ``split`` (its entry's ``task_kwargs``, then ``kwargs``), interleaved by weight."""
        if data_files is not None:
            raise ValueError("a mixture loads each task's own data: set data files in each task (its spec), not "
                             "data_files on the mixture")
        tasks = self.tasks()
        parts = []
        for entry, task in zip(self.entries, tasks):
            loaded = task.load(split, **{**entry.task_kwargs, **kwargs})
            if len(loaded) == 0:
                raise ValueError(f"mixture component {task.env_id} loaded no problems from split {split!r}: pass "
                                 "another split or drop it from the mixture")
            parts.append(loaded)
        return MixtureProblems(tasks, parts, self.weights)


def _tag(task: Task, problem: Problem) -> Problem:
    """``problem`` of ``task`` as a mixture problem (it keeps its task)."""
    return Problem(id=f"{task.env_id}/{problem.id}", question=task.format_prompt(problem),
                   answer=TaskReference(task.env_id, problem.answer), metadata=dict(problem.metadata))


class RoutedVerifier:
    """A mixture's verifier: ``verifier(response, TaskReference(task, reference))`` is the component task's
    ``verifier(response, reference)``. Picklable (the component verifiers travel to worker processes).

    Args:
        tasks: the component tasks (ids are looked up in the registry on first use).
    """

    def __init__(self, tasks: Sequence[Task | str | MixtureEntry]) -> None:
        self._tasks = tuple(t if isinstance(t, MixtureEntry) else MixtureEntry(task=t) for t in tasks)
        self._by_id: dict[str, Callable[[str, Any], VerifyResult]] | None = None

    def verifiers(self) -> dict[str, Callable[[str, Any], VerifyResult]]:
        """Task id -> the verifier that grades its samples."""
        if self._by_id is None:
            from dapo_env.verifiers.callable import as_verifier

            tasks = [entry.resolve() for entry in self._tasks]
            self._by_id = {t.env_id: as_verifier(t.verifier) for t in tasks}
        return self._by_id

    def _route(self, reference: Any) -> Callable[[str, Any], VerifyResult]:
        if not isinstance(reference, TaskReference):
            raise InvalidReference(f"a mixture's reference must name its task (TaskReference), got {reference!r}: "
                                   "grade an exported row with its data_source's task")
        verifier = self.verifiers().get(reference.task)
        if verifier is None:
            raise InvalidReference(f"{reference.task} is not in this mixture ({sorted(self.verifiers())})")
        return verifier

    def __call__(self, response: str, reference: Any) -> VerifyResult:
        return self._route(reference)(response, reference.reference)

    def prepare_reference(self, reference: Any) -> TaskReference:
        """The component verifier's ``prepare_reference`` (when it has one) applied inside the reference."""
        prepare = getattr(self._route(reference), "prepare_reference", None)
        return reference if prepare is None else TaskReference(reference.task, prepare(reference.reference))

    def __getstate__(self) -> dict[str, Any]:
        return {"_tasks": (), "_by_id": self.verifiers()}  # resolved: a worker needs no registry

    def __repr__(self) -> str:
        return f"RoutedVerifier({[e.task_id for e in self._tasks]})"


def task_verifier(task: str) -> Callable[[str, Any], VerifyResult]:
    """The verifier of the registered task ``task``: what a spec's ``verifier: {name:
    "dapo_env.tasks.mixture:task_verifier", options: {task: ID}}`` names to grade its rows as ``ID`` grades its
    own (``dapo-env curate`` writes such specs).

    Example:
        >>> task_verifier("Arithmetic-v0")("Answer: 4", "4").correct
        True
    """
    from dapo_env.verifiers.callable import as_verifier

    return as_verifier(get_task(task).verifier)


def mixture_task(entries: Sequence[MixtureEntry], *, name: str = MIXTURE_NAME, version: int = 0,
                 description: str = "") -> Task:
    """The :class:`Task` of a mixture of ``entries`` (see the module docstring).

    Example:
        >>> t = mixture_task([MixtureEntry(task="Arithmetic-v0", weight=3), MixtureEntry(task="Largest-v0")])
        >>> t.env_id, mixture_weights(t)
        ('Mixture-v0', (0.75, 0.25))
    """
    source = MixtureSource(entries)
    if all(isinstance(e.task, Task) for e in source.entries):
        source.tasks()  # refuse a multi-turn component now when nothing is left to look up
    described = ", ".join(f"{e.task_id} ({w:.3g})" for e, w in zip(source.entries, source.weights))
    return Task(name=name, version=version, source=source, verifier=RoutedVerifier(source.entries),
                prompt_template="{question}", description=description or f"mixture of {described}")


def parse_mixture(text: str) -> tuple[MixtureEntry, ...] | None:
    """The entries of a ``"ID:W,ID:W"`` mixture string, ``None`` when ``text`` names one task (no comma and no
    ``:weight``). A missing weight is 1.

    Example:
        >>> [(e.task, e.weight) for e in parse_mixture("GSM8K-v0:0.7, MATH500-v0:0.3")]
        [('GSM8K-v0', 0.7), ('MATH500-v0', 0.3)]
        >>> parse_mixture("GSM8K-v0") is None
        True
    """
    if not isinstance(text, str):
        return None
    items = [item.strip() for item in text.split(",")]
    weighted = [item.rpartition(":") for item in items]
    if len(items) == 1 and not (weighted[0][1] and _WEIGHT.match(weighted[0][2])):
        return None
    entries = []
    for item, (head, colon, tail) in zip(items, weighted):
        if not item:
            raise ValueError(f"mixture {text!r} has an empty entry: write 'ID:WEIGHT,ID:WEIGHT'")
        if colon and _WEIGHT.match(tail):
            try:
                weight = float(tail)
            except ValueError:
                raise ValueError(f"mixture entry {item!r}: {tail!r} is not a number; write 'ID:WEIGHT'") from None
            entries.append(MixtureEntry(task=head.strip(), weight=weight))
        else:
            entries.append(MixtureEntry(task=item))
    return tuple(entries)


def resolve_task_text(text: str | Task) -> Task:
    """The task a ``--task`` value names: a mixture string (:func:`parse_mixture`) as a :func:`mixture_task`,
    anything else through :func:`~dapo_env.tasks.get_task`."""
    entries = parse_mixture(text) if isinstance(text, str) else None
    if entries is None:
        return get_task(text)
    return mixture_task(entries)


def is_mixture(task: Any) -> bool:
    """Whether ``task`` is a mixture (a :class:`Task` whose source is a :class:`MixtureSource`)."""
    return isinstance(getattr(task, "source", None), MixtureSource)


def mixture_task_ids(task: Any) -> tuple[str, ...]:
    """The component ids of a mixture, in order; ``()`` for any other task."""
    return tuple(t.env_id for t in task.source.tasks()) if is_mixture(task) else ()


def mixture_weights(task: Any) -> tuple[float, ...]:
    """The normalised weights of a mixture's components; ``()`` for any other task."""
    return task.source.weights if is_mixture(task) else ()


def map_components(task: Task, fn: Callable[[Task], Task]) -> Task:
    """A mixture with ``fn`` applied to each component (e.g. a verifier or template swapped in), same weights."""
    entries = [MixtureEntry(task=fn(t), weight=e.weight, task_kwargs=e.task_kwargs)
               for e, t in zip(task.source.entries, task.source.tasks())]
    return mixture_task(entries, name=task.name, version=task.version, description=task.description)


def sample_task(task: Any, problem: Problem) -> str:
    """The id of the task that grades ``problem``: its component for a mixture problem, else ``task``'s own."""
    return problem.answer.task if isinstance(problem.answer, TaskReference) else task.env_id


def component_of(task: Any, problem: Problem) -> tuple[Task, Problem]:
    """``(component task, the problem as that task holds it)`` for a mixture problem; ``(task, problem)`` else.
    The returned problem's question is the rendered prompt (the mixture renders it when loading)."""
    if not (is_mixture(task) and isinstance(problem.answer, TaskReference)):
        return task, problem
    component = {t.env_id: t for t in task.source.tasks()}[problem.answer.task]
    inner = Problem(id=problem.id.split("/", 1)[1], question=problem.question, answer=problem.answer.reference,
                    metadata=dict(problem.metadata))
    return component, inner


# --- drawing groups by weight -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Strata:
    """A mixture's problem indices by component (``members[k]``: the indices of component k's problems among
    the loaded ones) and the components' weights (summing to 1)."""

    members: tuple[np.ndarray, ...]
    weights: tuple[float, ...]

    def draw(self, rng: np.random.Generator, size: int, difficulty: Any = None) -> np.ndarray:
        """``size`` problem indices: each group's component drawn by weight, then, per component in order, its
        groups' problems (without replacement while it has enough; by ``difficulty``'s weights when given)."""
        components = rng.choice(len(self.weights), size=size, p=np.asarray(self.weights))  # (size,)
        out = np.empty(size, dtype=np.int64)
        for k, members in enumerate(self.members):
            where = np.flatnonzero(components == k)
            if where.size == 0:
                continue
            p = None
            if difficulty is not None:
                w = difficulty.weights()[members]
                p = w / w.sum()
            out[where] = rng.choice(members, size=where.size, replace=where.size > members.size, p=p)
        return out


def mixture_strata(task: Any, problems: Sequence[Problem]) -> Strata | None:
    """The :class:`Strata` of a mixture's loaded ``problems``; ``None`` for any other task (uniform draws)."""
    if not is_mixture(task):
        return None
    ids = mixture_task_ids(task)
    if isinstance(problems, MixtureProblems) and tuple(t.env_id for t in problems.tasks) == ids:
        owner = problems.components  # known without reading the problems
    else:
        position = {task_id: k for k, task_id in enumerate(ids)}
        owner = np.array([position[sample_task(task, p)] for p in problems], dtype=np.int64)
    members = tuple(np.flatnonzero(owner == k) for k in range(len(ids)))
    empty = [ids[k] for k, m in enumerate(members) if m.size == 0]
    if empty:
        raise ValueError(f"mixture components {empty} have no problems here: load a split they have")
    return Strata(members=members, weights=mixture_weights(task))


# --- spec files ---------------------------------------------------------------------------------------------------
def load_mixture_spec(data: Mapping[str, Any], path: Path) -> Task:
    """The mixture a spec file declares (``name``, ``version``, ``description`` and ``mixture``: a list of
    ``{task: ID, weight: W, task_kwargs: {...}}``; ``weight`` defaults to 1). Component ids are looked up when
    the mixture is first used, so a mixture may name tasks registered after it (other spec files, packages).

    A component may also be a spec file (``task: mymath.yaml``, relative to this file), registered when the
    mixture is first used.

    Raises:
        TaskDataError: naming the file and field, for a malformed ``mixture``.
    """
    where = f"{path}: field 'mixture'"
    entries_data = data.get("mixture")
    if not isinstance(entries_data, list) or not entries_data:
        raise TaskDataError(f"{where}: expected a non-empty list of {{task: ID, weight: W}}, got {entries_data!r}")
    entries = []
    for i, item in enumerate(entries_data):
        if not isinstance(item, Mapping) or "task" not in item:
            raise TaskDataError(f"{where}[{i}]: expected a mapping with 'task' (and 'weight'), got {item!r}")
        unknown = sorted(set(item) - {"task", "weight", "task_kwargs"})
        if unknown:
            raise TaskDataError(f"{where}[{i}]: unknown key(s) {unknown}; expected task, weight, task_kwargs")
        task = item["task"]
        if isinstance(task, str) and task.strip().endswith(SPEC_SUFFIXES):
            task = str((Path(path).parent / task.strip()).resolve())  # relative to the mixture's spec file
        try:
            entries.append(MixtureEntry(task=task, weight=item.get("weight", 1.0),
                                        task_kwargs=item.get("task_kwargs") or {}))
        except (TypeError, ValueError) as exc:
            raise TaskDataError(f"{where}[{i}]: {exc}") from None
    try:
        return mixture_task(entries, name=str(data.get("name", MIXTURE_NAME)), version=int(data.get("version", 0)),
                            description=str(data.get("description", "")))
    except (TypeError, ValueError) as exc:
        raise TaskDataError(f"{where}: {exc}") from None


__all__ = ["MIXTURE_NAME", "SPEC_SUFFIXES", "MixtureEntry", "MixtureProblems", "MixtureSource", "RoutedVerifier", "Strata", "TaskReference",
           "component_of", "interleave", "is_mixture", "load_mixture_spec", "map_components", "mixture_strata", "mixture_task",
           "mixture_task_ids", "mixture_weights", "parse_mixture", "resolve_task_text", "sample_task", "task_verifier"]
