"""Records handed to the IO thread survive SIGKILL; exit flushes everything."""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import run_python
from neighbour import as_neighbour, neighbour


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


def test_log_files_are_private_and_a_link_planted_at_a_name_is_not_followed(tmp_path):
    """Log files are created 0600 in folders of 0700, exclusively and never through a link: a symbolic link at a log
    file's name (which a neighbour could plant where it can write) is replaced by the log file, its target stays
    untouched."""
    logs, target = tmp_path / "logs" / "app", tmp_path / "target.txt"
    target.write_text("not a log")
    result = run_python(
        f"""
        import os, numpy as np, cloudprofiler as cp
        cp.start({str(logs)!r})
        first = cp.Channel("first", "buffered")
        second_name = os.path.basename(first.path).replace("first.", "second.", 1).replace(".0.arrows", ".1.arrows")
        os.symlink({str(target)!r}, os.path.join({str(logs)!r}, second_name))
        second = cp.Channel("second", "buffered")
        assert os.path.basename(second.path) == second_name, (second.path, second_name)
        second.log_many(np.arange(1000))
        cp.stop()
        """
    )
    assert result.returncode == 0, result.stderr
    assert target.read_bytes() == b"not a log"
    files = cp.log_files(logs)
    assert len(files) == 2 and sum(cp.read_log(p).num_rows for p in files) == 1000
    for p in files:
        assert not os.path.islink(p) and stat.S_IMODE(os.lstat(p).st_mode) == 0o600, p
    assert stat.S_IMODE(os.stat(logs).st_mode) == stat.S_IMODE(os.stat(logs.parent).st_mode) == 0o700


def test_a_log_folder_another_user_made_is_refused(tmp_path):
    """A neighbour who made the log folder first (0777, e.g. the default one in /tmp) could read the files or plant
    links at their names: the library refuses it, naming the folder, and writes nothing there."""
    neighbour()
    shared = Path(tempfile.mkdtemp(prefix="cp-shared-logs-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        planted = shared / "cloudprofiler-logs"
        made = as_neighbour(["sh", "-c", f"mkdir {planted} && chmod 0777 {planted}"])
        assert made.returncode == 0, made.stderr
        result = run_python(f"""
            import cloudprofiler as cp
            try:
                cp.start({str(planted)!r})
                cp.Channel("c", "buffered").log(1)
            except cp.CloudProfilerError as e:
                print("refused", e)
            """)
        assert f"refused refusing log folder {planted}: it belongs to another user" in result.stdout, \
            result.stdout + result.stderr
        assert not list(planted.iterdir())
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_repair_makes_a_killed_processs_files_whole_for_every_reader(tmp_path):
    import duckdb
    import polars
    import pyarrow.dataset as ds

    folder = tmp_path / "app"
    code = textwrap.dedent(
        f"""
        import os, numpy as np, cloudprofiler as cp
        cp.start({str(folder)!r}, flush_interval_ms=0, compression="zstd")
        for name in ("flushed", "mid-batch"):
            ch = cp.Channel(name, "buffered")
            ch.log_many(np.arange(200_000))
            ch.flush()
        done = cp.Channel("closed", "buffered")
        done.log_many(np.arange(10))
        done.close()
        os.kill(os.getpid(), 9)
        """
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == -signal.SIGKILL
    files = {p.name.split(".")[0]: p for p in folder.rglob("*.arrows")}
    cut = files["mid-batch"]
    cut.write_bytes(cut.read_bytes()[:-100])  # the kill in the middle of a batch
    with pytest.warns(cp.IncompleteLogWarning, match=cut.name):
        before = {name: cp.read_log(p) for name, p in files.items()}
    with pytest.raises(Exception):
        polars.scan_ipc(str(cut)).collect()  # no footer: readers of Arrow IPC files refuse it
    mode = stat.S_IMODE(cut.stat().st_mode)

    run = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", "repair", str(folder)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    # a flushed file has its footer already (live readers read it): only the one cut mid-batch lacks it
    assert run.stdout.splitlines()[-1] == "3 log files: 1 repaired, 2 whole already"
    every = polars.scan_ipc(str(folder / "**" / "*.arrows")).collect()
    assert len(every) == sum(t.num_rows for t in before.values())
    assert ds.dataset(str(folder), format="arrow").count_rows() == len(every)
    repaired = ds.dataset(str(cut), format="arrow")  # noqa: F841 (DuckDB's SQL reads it by name)
    assert duckdb.sql("select count(*) from repaired").fetchall()[0][0] == before["mid-batch"].num_rows
    for name, path in files.items():
        after = cp.read_log(path)  # no warning: each has its footer now
        assert after.equals(before[name].replace_schema_metadata(after.schema.metadata))
    meta = cp.log_metadata(cut)
    assert meta["closed"] is False and meta["cut.bytes"] > 0
    assert meta["cut.batches"] == len(before["mid-batch"].to_batches())
    assert "cut.bytes" not in cp.log_metadata(files["flushed"]) and "cut.bytes" not in cp.log_metadata(files["closed"])
    assert stat.S_IMODE(cut.stat().st_mode) == mode and not list(folder.rglob(".*.tmp"))

    again = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", "repair", str(folder)], capture_output=True,
                           text=True, timeout=60)
    assert again.stdout.splitlines()[-1] == "3 log files: 0 repaired, 3 whole already"
    missing = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", "repair", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and str(tmp_path / "nope") in missing.stderr
