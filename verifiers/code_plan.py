"""Moved to :mod:`dapo_env.verifiers.code.plan` (the code verifiers' room); this old path is that same module."""

import sys

from .code import plan as _moved

sys.modules[__name__] = _moved
