"""Records handed to the IO thread survive SIGKILL; exit flushes everything."""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import run_python


def test_flushed_records_survive_sigkill(tmp_path):
    code = textwrap.dedent(
        f"""
        import sys, time, numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r}, flush_interval_ms=0)
        ch = cp.Channel("killed", "buffered")
        ch.log_many(np.arange(150_000))
        ch.flush()
        ch.log_many(np.arange(150_000, 150_100))  # not flushed: may or may not be in the file
        print(ch.path, flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = child.stdout.readline().strip()
        assert path, child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
    with pytest.warns(cp.IncompleteLogWarning, match=path):  # no footer: the file ends where the kill left it
        table = cp.read_log(path)
    table.validate(full=True)
    ids = table.column("tuple_id").to_numpy()
    assert np.array_equal(ids[:150_000], np.arange(150_000))
    meta = cp.log_metadata(table)
    assert meta["closed"] is False and meta["records.written"] >= 150_000


def test_exit_without_close_flushes_everything(tmp_path):
    result = run_python(
        f"""
        import numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r})
        for handler in ("buffered", "identity", "downsample"):
            ch = cp.Channel("at-exit-" + handler, handler, (3,) if handler == "downsample" else ())
            ch.log_many(np.arange(100_001))
        """
    )
    assert result.returncode == 0, result.stderr
    counts = {cp.log_metadata(p)["handler"]: cp.read_log(p).num_rows for p in cp.log_files(tmp_path)}
    assert counts == {"buffered": 100_001, "identity": 100_001, "downsample": 33_334}
    assert all(cp.log_metadata(p)["closed"] for p in cp.log_files(tmp_path))


def test_background_threads_sleep_when_idle(tmp_path):
    result = run_python(
        f"""
        import resource, time, numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r}, compression="zstd")
        channels = [cp.Channel(h, h, p) for h, p in (("buffered", ()), ("mpc", (10_000_000,)), ("xoy", (1, 2)))]
        for ch in channels:
            ch.log_many(np.arange(100_000))
        time.sleep(0.5)
        before = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(2.0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        print((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        """
    )
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 0.1  # seconds of CPU in 2 s of idleness: the threads sleep
