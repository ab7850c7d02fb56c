"""Log files every tool reads: closed files are Arrow IPC files (polars, pyarrow, DuckDB read them with no project
code, int64 columns, clean metadata); files cut short by SIGKILL or mid-batch are read by cp.read_log up to their
last complete batch, with a warning that names the file."""
import io
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import cloudprofiler as cp
from conftest import run_python

HANDLERS = {"buffered": (), "identity": (), "xoy": (1, 2), "firstlast": (), "mpc": (1_000_000,), "spc": (1_000_000,)}


def write_logs(folder, compression):
    """Closed files of every kind of handler, written by a process of their own (options are per process)."""
    result = run_python(
        f"""
        import numpy as np, cloudprofiler as cp
        cp.start({str(folder)!r}, compression={compression!r}, block_records=4096)
        for handler, params in {HANDLERS!r}.items():
            with cp.Channel("f-" + handler, handler, params, metadata={{"job": "nightly"}}) as ch:
                ch.log_many(np.arange(-5_000, 45_000))
        """
    )
    assert result.returncode == 0, result.stderr
    return {cp.log_metadata(p)["handler"]: p for p in cp.log_files(folder)}


@pytest.fixture(scope="module", params=["none", "zstd"])
def logs(request, tmp_path_factory):
    return request.param, write_logs(tmp_path_factory.mktemp(f"logs-{request.param}"), request.param)


def test_closed_files_are_arrow_ipc_files_with_int64_columns_and_clean_metadata(logs):
    compression, files = logs
    for handler, path in files.items():
        with pa.OSFile(str(path)) as f:  # pyarrow's own file reader, no project code
            reader = pa.ipc.open_file(f)
            table = reader.read_all()
        table.validate(full=True)
        assert table.equals(cp.read_log(path))
        names = ("period_start_tsc", "count") if handler in ("mpc", "spc") else ("tuple_id", "tsc")
        assert table.schema.names == list(names)
        assert table.schema.types == [pa.int64(), pa.int64()]
        meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
        assert all(v == v.strip() for v in meta.values()), meta  # no padding in what other readers see
        assert meta["closed"] == "true" and meta["compression"] == compression and meta["job"] == "nightly"
        assert meta["records.written"] == str(table.num_rows)
        assert float(meta["tsc.hz"]) > 1e8  # what the README gives polars users: the pyarrow one-liner
    assert files["buffered"].stat().st_size < 50_000 * 16 / 2 or compression == "none"


def test_polars_pyarrow_dataset_and_duckdb_read_the_closed_files_lazily(logs):
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    _, files = logs
    records = [files[h] for h in ("buffered", "identity", "xoy", "firstlast")]
    expected = {str(p): cp.read_log(p) for p in records}
    rows = sum(t.num_rows for t in expected.values())
    assert rows == 50_000 + 50_000 + 25_000 + 2

    dataset = ds.dataset([str(p) for p in records], format="arrow")
    assert dataset.schema.types == [pa.int64(), pa.int64()]
    assert dataset.to_table().num_rows == rows

    lazy = polars.scan_ipc([str(p) for p in records])
    got = lazy.select(polars.len(), polars.col("tuple_id").min(), polars.col("tsc").max()).collect().row(0)
    assert got == (rows, -5_000, max(t.column("tsc").to_numpy().max() for t in expected.values()))
    assert polars.read_ipc_schema(records[0]) == {"tuple_id": polars.Int64, "tsc": polars.Int64}

    # A TSC minus a later one is negative: with uint64 columns DuckDB stopped with "Overflow in subtraction".
    first, last = duckdb.sql("select min(tsc) - max(tsc), max(tsc) - min(tsc) from dataset").fetchall()[0]
    buffered = expected[str(files["buffered"])].column("tsc").to_numpy()
    assert first < 0 and last > 0 and -first == last >= buffered.max() - buffered.min()
    counters = ds.dataset(str(files["mpc"]), format="arrow")  # noqa: F841 (DuckDB's SQL reads it by name)
    (count,) = duckdb.sql("select sum(count) from counters").fetchall()[0]
    assert count == 50_000


def test_a_process_killed_mid_run_leaves_a_file_read_up_to_its_last_complete_batch(tmp_path):
    code = textwrap.dedent(
        f"""
        import numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r}, flush_interval_ms=5, block_records=1024)
        ch = cp.Channel("killed", "buffered")
        print(ch.path, flush=True)
        i = 0
        while True:  # logs until it is killed
            ch.log_many(np.arange(i, i + 100))
            i += 100
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = child.stdout.readline().strip()
        assert path, child.stderr.read()
        deadline = time.monotonic() + 30
        while os.path.getsize(path) < 1_000_000 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
    with pytest.warns(cp.IncompleteLogWarning, match=path) as caught:
        table = cp.read_log(path)
    table.validate(full=True)
    ids = table.column("tuple_id").to_numpy()
    assert ids.size >= 1_000_000 // 16 // 2 and caught[0].message.batches > 0
    assert np.array_equal(ids, np.arange(ids.size))  # one thread: every record up to the last batch, in order
    meta = cp.log_metadata(path)
    assert meta["closed"] is False and ids.size >= meta["records.written"]
    with pytest.raises(pa.ArrowInvalid):  # no footer yet: the file readers refuse it, cp.read_log reads it
        pa.ipc.open_file(path)


def test_a_file_cut_inside_a_batch_is_read_up_to_the_batch_before(tmp_path, log_dir):
    with cp.Channel("cut", "identity") as ch:  # batches of 1024 records
        ch.log_many(np.arange(10_000))
    data = open(ch.path, "rb").read()
    cut = tmp_path / "cut.arrows"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.warns(cp.IncompleteLogWarning, match=str(cut)) as caught:
        table = cp.read_log(cut)
    warning = caught[0].message
    assert warning.cut and warning.file == str(cut) and warning.batches == table.num_rows // 1024
    assert 0 < table.num_rows < 10_000 and table.num_rows % 1024 == 0
    assert np.array_equal(table.column("tuple_id").to_numpy(), np.arange(table.num_rows))
    assert cp.log_metadata(table)["closed"] is True  # this file was cut after its close: no warning for that


def test_read_log_takes_bytes_and_file_objects(log_dir):
    with cp.Channel("sources", "buffered", metadata={"executor": "7"}) as ch:
        ch.log_many(np.arange(3000))
    expected = cp.read_log(ch.path)
    data = open(ch.path, "rb").read()
    assert cp.read_log(data).equals(expected)  # e.g. the content column of Spark's binaryFile source
    assert cp.read_log(io.BytesIO(data)).equals(expected)
    with open(ch.path, "rb") as f:
        assert cp.read_log(f).equals(expected)
    assert cp.log_metadata(data) == cp.log_metadata(ch.path) == cp.log_metadata(expected)
    with pytest.warns(cp.IncompleteLogWarning, match="part-0007"):
        cp.read_log(data[: len(data) - 100 - len(data) // 3], name="part-0007")
    with pytest.raises(pa.ArrowInvalid, match="part-0008 is not a log file"):
        cp.read_log(b"not a log", name="part-0008")
    with pytest.raises(TypeError, match="from int 7"):
        cp.read_log(7)


def test_streams_of_earlier_versions_still_read(tmp_path):
    table = pa.table({"tuple_id": pa.array([1, 2], pa.int64()), "tsc": pa.array([10, 20], pa.uint64())},
                     metadata={"closed": "true ", "tsc.hz": "2000000000.000"})
    path = tmp_path / "old.arrows"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema) as writer:
        writer.write_table(table)
    read = cp.read_log(path)
    assert read.column("tsc").to_pylist() == [10, 20] and read.schema.metadata[b"closed"] == b"true"
    assert cp.log_metadata(path)["tsc.hz"] == 2e9
