"""The code verifiers' room: the OS sandbox, the languages it runs, and the verifiers built on them.

- :mod:`.sandbox` (bubblewrap isolation, limits, :func:`run_python`) and :mod:`.seccomp` (its filter);
- :mod:`.python` (:class:`CodeVerifier`: Python asserts and stdio tests, values judged outside) with its
  :mod:`.harness`, :mod:`.plan` and :mod:`.values`;
- :mod:`.languages` (the registry: Python, C++, JavaScript, one entry each), :mod:`.compare` (output
  comparison modes) and :mod:`.programs` (:class:`ProgramVerifier`: any registered language on stdin/stdout
  tests with checkers, function calls, per-test time limits and scoring modes).

The old module paths (``dapo_env.verifiers.sandbox``, ``.seccomp``, ``.code_harness``, ``.code_plan``,
``.code_values``) are aliases of the modules here.
"""

from __future__ import annotations

from .compare import COMPARE_MODES, compare_output
from .languages import Language, get_language, languages, register_language
from .programs import SCORING_MODES, CallTest, IOTest, ProgramTests, ProgramVerifier
from .python import STATUSES, CodeReport, CodeVerifier, TestReport, assemble_program, extract_code

__all__ = ["COMPARE_MODES", "SCORING_MODES", "STATUSES", "CallTest", "CodeReport", "CodeVerifier", "IOTest", "Language",
           "ProgramTests", "ProgramVerifier", "TestReport", "assemble_program", "compare_output", "extract_code",
           "get_language", "languages", "register_language"]
