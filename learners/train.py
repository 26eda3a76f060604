"""``python -m dapo_env.learners.train ...``: the same as ``dapo-env train ...`` (for torchrun and scripts).

Example:
    python -m dapo_env.learners.train --max-steps 5 --run-name quick
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dapo-env train`` with ``argv`` (default: ``sys.argv[1:]``)."""
    return cli_main(["train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
