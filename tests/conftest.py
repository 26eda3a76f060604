from __future__ import annotations

from pathlib import Path

import pytest
from data_folder import data_folder, real_data_skip_reason


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real datasets (``$DAPO_ENV_DATA``, see docs/tasks.md); skip with the fix where absent."""
    reason = real_data_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return data_folder()
