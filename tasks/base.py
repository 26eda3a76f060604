"""The `Task` type: a named source of problems with a prompt template, a verifier and a split.

A task never imports the environment layer: the Gymnasium id it gets when registered (see
:mod:`dapo_env.tasks.registry`) names the env classes by string.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dapo_env.types import Interaction, Problem, Verifier

DataFiles = str | Sequence[str] | Mapping[str, str | Sequence[str]]
ReferenceReader = Callable[[Any, Mapping[str, Any]], Any]
"""``reader(value, row) -> reference``: the value of a dataset's answer column (``None`` when the row has
none) and the rest of the row (other columns, or verl's ``extra_info``) as the verifier's reference."""

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_VERSIONED_RE = re.compile(r"-v\d+$")


class TaskDataError(ValueError):
    """A task's data could not be loaded or a row is malformed; the message says how to fix it.

    ``cli_message``, when given, is the same message with the fix in the command line's spelling
    (``--set data_files=F`` rather than ``gym.make(..., data_files=F)``); ``dapo-env`` shows it instead.
    """

    def __init__(self, message: str, *, cli_message: str | None = None) -> None:
        super().__init__(message)
        self.cli_message = cli_message


@runtime_checkable
class ProblemSource(Protocol):
    """Where a task's problems come from: a dataset loader or a procedural generator.

    ``load`` returns an indexable, sized sequence of :class:`~dapo_env.types.Problem` in a
    deterministic order. ``kwargs`` are source-specific (e.g. difficulty knobs of a generator).
    """

    def load(self, split: str, data_files: DataFiles | None = None, **kwargs: Any) -> Sequence[Problem]: ...


def template_fields(template: str) -> tuple[str, ...]:
    """The top-level field names a ``str.format`` template uses, e.g. ``("question", "level")``.

    Raises:
        ValueError: when the template is not a valid format string.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(
            f"prompt template {template!r} is not a valid str.format template ({exc}); "
            "write literal braces as '{{' and '}}'"
        ) from exc
    names: list[str] = []
    for _, field_name, _, _ in parsed:
        if field_name is None:
            continue
        if field_name == "" or field_name[0].isdigit():
            raise ValueError(
                f"prompt template {template!r} uses a positional field '{{{field_name}}}': use named fields "
                "such as {question}; write literal braces as '{{' and '}}'"
            )
        root = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        if root not in names:
            names.append(root)
    return tuple(names)


@dataclass(frozen=True, kw_only=True)
class Task:
    """A named source of problems, a prompt template and a verifier.

    Attributes:
        name: the task's name without version, e.g. ``"GSM8K"``.
        source: a :class:`ProblemSource` (dataset loader or procedural generator).
        verifier: called as ``verifier(response, problem.answer) -> VerifyResult``; must be picklable.
        prompt_template: a ``str.format`` template with ``{question}`` and any of the row's metadata
            fields; literal braces are written ``{{`` and ``}}``.
        split: the split ``load()`` uses when none is given.
        version: the integer in the Gymnasium id ``f"{name}-v{version}"``.
        description: one line for listings and docs.
        interaction: for a multi-turn task, the :class:`~dapo_env.types.Interaction` that answers each
            assistant turn (``respond(history, action, verdict) -> Turn``); ``None`` for a single-turn task.
        reference_reader: reads a reference as the task's hub dataset holds it (e.g. HumanEval's ``test``
            with the row's ``entry_point``) besides the exported form; ``None``: the value as it is.
        reference_columns: hub columns the reader takes the reference from when a row has no ``answer``.
        system_prompt: the system message a chat client puts before the prompt (``None``: none).

    Example:
        >>> from dapo_env.tasks import get_task
        >>> task = get_task("Arithmetic-v0")
        >>> problems = task.load(size=3)
        >>> task.format_prompt(problems[0]).startswith("Compute ")
        True
    """

    name: str
    source: ProblemSource
    verifier: Verifier
    prompt_template: str = "{question}"
    split: str = "train"
    version: int = 0
    description: str = ""
    interaction: Interaction | None = None
    reference_reader: ReferenceReader | None = None
    reference_columns: tuple[str, ...] = ()
    system_prompt: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.name, str) and _VERSIONED_RE.search(self.name):
            raise ValueError(f"Task name {self.name!r} must not carry a version suffix: pass version=... instead")
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(
                f"Task name {self.name!r} is invalid: use letters, digits, '_', '.' or '-', starting with a letter "
                "(e.g. 'MyMath')"
            )
        if not isinstance(self.version, int) or isinstance(self.version, bool) or self.version < 0:
            raise ValueError(f"Task version must be an integer >= 0, got {self.version!r}")
        if not callable(getattr(self.source, "load", None)):
            raise TypeError(
                f"Task source must have a load(split, data_files, **kwargs) method, got {type(self.source).__name__}"
            )
        if not callable(self.verifier):
            raise TypeError(f"Task verifier must be callable as verifier(response, answer), got {self.verifier!r}")
        if not isinstance(self.prompt_template, str):
            raise TypeError(f"prompt_template must be a str, got {type(self.prompt_template).__name__}")
        template_fields(self.prompt_template)  # raises on a malformed template
        if not isinstance(self.split, str) or not self.split:
            raise ValueError(f"Task split must be a non-empty string such as 'train' or 'test', got {self.split!r}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError(f"system_prompt must be a str or None, got {type(self.system_prompt).__name__}")
        if self.interaction is not None and not callable(getattr(self.interaction, "respond", None)):
            raise TypeError(
                f"Task interaction must have a respond(history, action, verdict) -> Turn method, got {self.interaction!r}")

    @property
    def turns(self) -> str:
        """``"multi-turn"`` for a task with an interaction, else ``"single-turn"``."""
        return "single-turn" if self.interaction is None else "multi-turn"

    @property
    def env_id(self) -> str:
        """The Gymnasium id, ``f"{name}-v{version}"``."""
        return f"{self.name}-v{self.version}"

    def load(self, split: str | None = None, data_files: DataFiles | None = None, **kwargs: Any) -> Sequence[Problem]:
        """Load the problems of a split (default: ``self.split``), from ``data_files`` when given.

        Load once and keep the result: dataset sources cache the converted rows, so calling this again
        with the same arguments is cheap, but callers should not call it per episode.
        """
        return self.source.load(split or self.split, data_files, **kwargs)

    def prepare_reference(self, reference: Any, row: Mapping[str, Any] | None = None) -> Any:
        """A reference as a dataset row holds it, for this task's verifier: the answer column in the hub
        dataset's own format (a GSM8K solution ending in ``#### 18``, HumanEval's ``test``) or as
        ``to_hf_dataset`` exports it. ``row`` is the rest of the row (TRL's other columns, verl's
        ``extra_info``). A reference that cannot be read raises ``InvalidReference`` (here or when the
        verifier prepares it), never a silent 0.

        Example:
            >>> from dapo_env.tasks import get_task
            >>> get_task("GSM8K-v0").prepare_reference("9 * 2 = 18 dollars.\\n#### 18")
            '18'
        """
        if self.reference_reader is None:
            return reference
        return self.reference_reader(reference, row or {})

    def format_prompt(self, problem: Problem, template: str | None = None) -> str:
        """Fill the prompt template (``template`` overrides the task's) with the problem's fields."""
        template = self.prompt_template if template is None else template
        values = {**problem.metadata, "question": problem.question}
        missing = [name for name in template_fields(template) if name not in values]
        if missing:
            raise KeyError(
                f"prompt template of {self.env_id} uses {missing} but problem {problem.id!r} only has "
                f"{sorted(values)}: use those fields or add them to the rows' metadata"
            )
        return template.format(**values)


__all__ = ["DataFiles", "ProblemSource", "ReferenceReader", "Task", "TaskDataError", "template_fields"]
