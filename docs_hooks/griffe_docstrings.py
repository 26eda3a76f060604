"""Griffe extension: read the project's docstrings the way they are written before mkdocstrings renders them.

The code's docstrings are Google style with two habits Markdown does not know: Sphinx roles
(``:class:`~dapo_env.types.Completion```) and a singular ``Example:`` section holding doctests. Roles become
inline code (the name as the role would show it) and ``Example:`` becomes the ``Examples:`` section, so
doctests render as code blocks instead of paragraphs. The source files are not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|obj|exc|const):`(~?)([^`]+)`")
EXAMPLE_HEADING = re.compile(r"^(\s*)Example:\s*$", flags=re.MULTILINE)


def markdown_docstring(text: str) -> str:
    """The docstring with Sphinx roles turned into code spans and ``Example:`` into ``Examples:``.

    Example:
        >>> markdown_docstring("See :class:`~dapo_env.types.Completion` and :func:`dapo_env.shape`.")
        'See `Completion` and `dapo_env.shape`.'
        >>> markdown_docstring("Args:\\n    x: a number.\\n\\nExample:\\n    >>> 1\\n    1")
        'Args:\\n    x: a number.\\n\\nExamples:\\n    >>> 1\\n    1'
    """
    text = ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    return EXAMPLE_HEADING.sub(r"\1Examples:", text)


class MarkdownDocstrings(griffe.Extension):
    """Rewrites every object's docstring with :func:`markdown_docstring` as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
