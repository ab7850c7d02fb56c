"""Channels under concurrency, metadata, compression (what other readers see: test_file_format.py)."""
import json
import threading

import numpy as np
import pyarrow as pa

import cloudprofiler as cp
from conftest import run_python


def test_eight_threads_log_eight_million_records_each_once(log_dir):
    ch = cp.Channel("eight threads", "buffered")
    per_thread = 1_000_000

    def work(k):
        ch.log_many(np.arange(k * per_thread, (k + 1) * per_thread, dtype=np.int64))

    workers = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    ch.close()
    ids = cp.read_log_dir(log_dir, channel="eight threads").column("tuple_id").to_numpy()  # 128 MB: rolled
    assert ids.size == 8 * per_thread
    assert np.array_equal(np.sort(ids), np.arange(8 * per_thread))
    assert ch.stats.written == ch.stats.logged == 8 * per_thread


def test_threads_calling_log_one_at_a_time_lose_nothing(log_dir):
    ch = cp.Channel("log per call", "buffered")

    def work(k):
        for i in range(k * 40_000, (k + 1) * 40_000):
            ch.log(i)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    ch.close()
    ids = np.sort(cp.read_log(ch.path).column("tuple_id").to_numpy())
    assert np.array_equal(ids, np.arange(160_000))


def test_a_record_logged_at_an_earlier_tsc_keeps_that_tsc(log_dir):
    earlier = cp.tsc()
    ch = cp.Channel("logged late", "buffered")
    ch.log(1)
    ch.log_at(0, earlier)
    ch.close()
    table = cp.read_log(ch.path)
    tsc = dict(zip(table.column("tuple_id").to_pylist(), table.column("tsc").to_pylist()))
    assert tsc[0] == earlier < tsc[1]


def test_metadata_describes_the_channel(log_dir):
    with cp.Channel("meta", "downsample", (5,), metadata={"spark.task_attempt_id": "42"}) as ch:
        ch.log_many(np.arange(100))
    meta = cp.log_metadata(ch.path)
    assert meta["channel.name"] == "meta"
    assert meta["handler"] == "downsample" and meta["handler.params"] == [5]
    assert meta["records.logged"] == 100 and meta["records.written"] == 20 and meta["records.dropped"] == 0
    assert meta["closed"] is True and meta["close.clock"]["tsc"] > meta["open.clock"]["tsc"]
    assert meta["tsc.hz"] > 1e8 and meta["spark.task_attempt_id"] == "42"
    assert meta["pid"] > 0 and meta["boot_id"] and meta["host"] and meta["tsc.read"] == "ordered"


def test_unordered_tsc_read_is_recorded_and_its_values_stay_inside_the_channel_span(tmp_path):
    result = run_python(
        f"""
        import numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r}, tsc_read="unordered")
        with cp.Channel("u", "buffered") as ch:
            for i in range(100_000):
                ch.log(i)
        t = cp.read_log(ch.path)
        meta = cp.log_metadata(t)
        tsc = t.column("tsc").to_numpy()
        assert meta["tsc.read"] == "unordered", meta["tsc.read"]
        assert meta["open.clock"]["tsc"] <= tsc.min() and tsc.max() <= meta["close.clock"]["tsc"]
        assert np.array_equal(t.column("tuple_id").to_numpy(), np.arange(100_000))
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "ok"


def test_zstd_files_read_back_identical_and_smaller(tmp_path):
    result = run_python(
        f"""
        import numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r}, compression="zstd")
        ids = np.arange(2_000_000, dtype=np.int64)
        with cp.Channel("z", "buffered") as ch:
            ch.log_many(ids)
        t = cp.read_log(ch.path)
        t.validate(full=True)
        assert np.array_equal(t.column("tuple_id").to_numpy(), ids)
        assert cp.log_metadata(t)["compression"] == "zstd"
        print(ch.stats.bytes_written)
        """
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) < 2_000_000 * 16 / 2


def test_drop_policy_counts_every_record_it_drops(tmp_path):
    result = run_python(
        f"""
        import threading, numpy as np, cloudprofiler as cp
        cp.start({str(tmp_path)!r}, block_records=16, channel_blocks=2, full_policy="drop", compression="zstd",
                 zstd_level=19)
        ch = cp.Channel("drops", "buffered")
        ch.log_many(np.arange(200_000))
        ch.close()
        s = ch.stats
        n = cp.read_log(ch.path).num_rows
        print(s.logged, s.written, s.dropped, n, cp.log_metadata(ch.path)["records.dropped"])
        """
    )
    assert result.returncode == 0, result.stderr
    logged, written, dropped, rows, meta_dropped = map(int, result.stdout.split())
    assert logged == 200_000 and dropped > 0
    assert written == rows and written + dropped == logged and meta_dropped == dropped


def test_an_id_s_sample_level_is_splitmix64_s_trailing_zero_bits():
    """The level the library samples ids by for the live hops (the driver's Java computes the same), against
    splitmix64 worked out here with Python's integers."""
    def splitmix(i):
        z = (i + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    for i in [0, 1, 42, -1, -2**63, 2**63 - 1, 6, 59587, *range(-3000, 3000, 7)]:
        z = splitmix(i)
        assert cp.sample_level(i) == (64 if z == 0 else (z & -z).bit_length() - 1), i
    assert cp.sample_level(2**64 - 0x9E3779B97F4A7C15) == 64  # the one id whose mix is 0


def test_the_samples_of_a_channel_are_taken_once_with_its_level(log_dir):
    """What the library kept for the live hops: a channel that logged fewer ids than it keeps has them all, at level 0,
    with their TSCs in logging order; the next take has nothing more of it."""
    ids = [7 * i + 3 for i in range(100)]
    with cp.Channel("sampled.py", "buffered") as ch:
        for i in ids:
            ch.log(i)
    level, taken, tscs = cp.take_samples()["sampled.py"]
    assert level == 0 and taken == ids and tscs == sorted(tscs) and tscs[0] > 0
    assert "sampled.py" not in cp.take_samples()


def test_a_batch_takes_one_tsc_and_log_many_one_per_record(log_dir):
    with cp.Channel("batch", "buffered") as ch:
        ch.log_many(np.arange(0, 1000))
        ch.log_batch(np.arange(1000, 3000))
        ch.log_batch(pa.chunked_array([pa.array(np.arange(3000, 3010))]))
    with cp.Channel("batch-xoy", "xoy", (1, 2)) as sampled:
        sampled.log_batch(np.arange(1000))
    table = cp.read_log(ch.path)
    tsc, ids = table.column("tsc").to_numpy(), table.column("tuple_id").to_numpy()
    assert np.array_equal(ids, np.arange(3010))
    assert len(set(tsc[:1000])) > 1 and len(set(tsc[1000:3000])) == 1 and len(set(tsc[3000:])) == 1
    assert tsc[999] <= tsc[1000] < tsc[3000]
    kept = cp.read_log(sampled.path)  # a handler that keeps some records gives the kept ones the batch's TSC
    assert 0 < kept.num_rows < 1000 and len(set(kept.column("tsc").to_pylist())) == 1


def test_a_worker_s_trace_imports_neither_pandas_nor_the_package_metadata(tmp_path):
    """A Python worker started for a task imports the package, logs Arrow batches as Spark hands them over (views on
    IPC buffers: a slice starts at an offset) and hands its samples to its executor: with nothing of that importing
    pandas (pyarrow's conversions do: 0.2-0.3 s a worker) or importlib.metadata (30-50 ms), the ids as given."""
    out = run_python(f"""
        import json, os, sys
        import numpy as np, pyarrow as pa
        import cloudprofiler as cp
        from cloudprofiler.spark.worker import hand_samples_over

        cp.start({str(tmp_path)!r})
        logged = []
        for dtype, type_ in ((np.int64, pa.int64()), (np.int32, pa.int32()), (np.uint8, pa.uint8())):
            values = np.arange(10, 30, dtype=dtype)
            batch = pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)]).slice(5, 10)
            with cp.Channel(f"worker-{{type_}}", "buffered") as ch:
                ch.log_batch(batch)
                ch.log_batch(batch.slice(0, 0))
            logged.append(cp.read_log(ch.path).column("tuple_id").to_pylist())
        hand_samples_over()
        modules = [m for m in ("pandas", "importlib.metadata") if m in sys.modules]
        from cloudprofiler import tables
        (handed,) = [f for f in os.listdir({str(tmp_path)!r}) if f.endswith(tables.table("worker_samples").file)]
        samples = pa.ipc.open_file(os.path.join({str(tmp_path)!r}, handed)).read_all()
        handed = sorted(set(zip(samples["channel"].to_pylist(), samples["tuple_id"].to_pylist())))
        print(json.dumps({{"modules": modules, "logged": logged, "handed": handed}}))
        """)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["modules"] == [] and result["logged"] == [list(range(15, 25))] * 3
    assert result["handed"] == [[f"worker-{t}", i] for t in ("int32", "int64", "uint8") for i in range(15, 25)]
