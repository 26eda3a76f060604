"""Tasks: named sources of problems with a prompt template and a verifier."""

from __future__ import annotations
