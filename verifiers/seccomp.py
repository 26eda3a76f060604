"""Moved to :mod:`dapo_env.verifiers.code.seccomp` (the code verifiers' room); this old path is that same module."""

import sys

from .code import seccomp as _moved

sys.modules[__name__] = _moved
