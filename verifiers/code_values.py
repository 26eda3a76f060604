"""Moved to :mod:`dapo_env.verifiers.code.values` (the code verifiers' room); this old path is that same module."""

import sys

from .code import values as _moved

sys.modules[__name__] = _moved
