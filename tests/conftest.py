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


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT its default Python handler when the suite was started with it ignored (``nohup cmd &`` or a
    non-interactive shell's background job): the Ctrl-C tests send it to this process and to children that
    inherit its disposition, and an inherited SIG_IGN would make them hang or fail for no fault of the code."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
