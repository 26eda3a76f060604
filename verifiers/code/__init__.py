"""The code verifiers' room: the OS sandbox, the languages it runs, and the verifiers built on them.

- :mod:`.sandbox` (bubblewrap isolation, limits, :func:`run_python`) and :mod:`.seccomp` (its filter);
- :mod:`.python` (:class:`CodeVerifier`: Python asserts and stdio tests, values judged outside) with its
  :mod:`.harness`, :mod:`.plan` and :mod:`.values`.

The old module paths (``dapo_env.verifiers.sandbox``, ``.seccomp``, ``.code_harness``, ``.code_plan``,
``.code_values``) are aliases of the modules here.
"""

from __future__ import annotations

from .python import CodeReport, CodeVerifier, TestReport, assemble_program, extract_code

__all__ = ["CodeReport", "CodeVerifier", "TestReport", "assemble_program", "extract_code"]
