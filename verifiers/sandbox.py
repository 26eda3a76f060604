"""Moved to :mod:`dapo_env.verifiers.code.sandbox` (the code verifiers' room); this old path is that same module."""

import sys

from .code import sandbox as _moved

sys.modules[__name__] = _moved
