import os
import subprocess
import sys
import textwrap

import pytest


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory):
    """The library of the test process logs here (it starts once per process)."""
    import cloudprofiler as cp

    folder = tmp_path_factory.mktemp("logs")
    cp.start(str(folder))
    return folder


def run_python(code: str, *, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a Python snippet in a fresh process (for options that are fixed once per process)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
