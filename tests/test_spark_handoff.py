"""Python workers of a real local-mode application hand their records to the executor's library: a worker killed
mid-partition loses nothing it logged, a worker starts no library of its own, and with the hand-off off (or no
inbox to reach) workers write files of their own as before."""
import json
import os
import time
import urllib.request

import numpy as np
import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler import tables

ROWS, PARTITIONS = 40_000, 4


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the UDFs are defined here so that workers get them by value, not by module
    def _log_then_die_once(batches):
        """Logs its partition's ids through the executor; the first attempt of partition 1 kills its worker after half
        of them (no atexit, no close)."""
        import signal as signals

        from pyspark import TaskContext

        import cloudprofiler.spark as workers

        ctx = TaskContext.get()
        dies = ctx.partitionId() == 1 and ctx.attemptNumber() == 0
        ch = workers.worker_channel("killed", metadata={"spark.task_attempt_id": str(ctx.taskAttemptId()),
                                                          "attempt": str(ctx.attemptNumber())})
        logged = 0
        for batch in batches:
            ids = batch.column("id")
            ch.log_many(ids)
            logged += len(ids)
            if dies and logged >= ROWS // PARTITIONS // 2:
                os.kill(os.getpid(), signals.SIGKILL)
            yield batch
        ch.close()


    def _library_of_worker(batches):
        import pyarrow as pa

        import cloudprofiler

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "library": [cloudprofiler.log_dir() or ""]})

    log_dir, local_dir = tmp_path_factory.mktemp("handoff-logs"), tmp_path_factory.mktemp("handoff-local")
    spark = (cps.builder(log_dir=str(log_dir), local_dir=str(local_dir), collect_interval_seconds=1)
             .master("local[2,2]").config("spark.ui.port", "0")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000").getOrCreate())
    df = spark.range(0, ROWS, numPartitions=PARTITIONS)
    out = {"killed": df.mapInArrow(_log_then_die_once, df.schema).count()}
    out["handoff_count"] = cps.trace(df, "handed", "id").count()
    out["workers_handoff"] = df.mapInArrow(_library_of_worker, "pid long, library string").collect()
    spark.conf.set("spark.cloudprofiler.python.handoff", "false")
    out["files_count"] = cps.trace(df, "own-files", "id").count()
    out["workers_files"] = df.mapInArrow(_library_of_worker, "pid long, library string").collect()
    # two trace points on the same rows in workers of files of their own: their hop on the tab, from the samples
    # each worker hands its executor
    assert cps.trace(cps.trace(df, "own.a", "id"), "own.b", "id").count() == ROWS
    tab, deadline = {}, time.monotonic() + 60
    while time.monotonic() < deadline:
        with urllib.request.urlopen(spark.sparkContext.uiWebUrl + "/cloudprofiler/json/", timeout=30) as reply:
            tab = json.loads(reply.read())
        # the hop is listed once its two channels share an id, and counts durations as the workers' samples come in
        # (once with count 0 in CI: the loop stopped there)
        if any(h["from_channel"] == "own.a" and h["count"] > 0 for h in tab["hops"]):
            break
        time.sleep(0.5)
    out["tab"], out["local_dir"] = tab, local_dir
    out["app"] = log_dir / spark.sparkContext.applicationId
    spark.stop()
    return out


def test_a_worker_killed_mid_partition_loses_nothing_it_logged(run):
    assert run["killed"] == ROWS  # the retried attempt finished the job
    table = cp.read_log_dir(run["app"], channel="killed")
    by_attempt = {}
    for path in set(table.column("file").to_pylist()):
        meta = cp.log_metadata(path)
        by_attempt[meta["attempt"], meta["spark.task_attempt_id"]] = cp.read_log(path).column("tuple_id").to_numpy()
    killed = [ids for (attempt, _), ids in by_attempt.items() if attempt == "0" and ids.min() >= 10_000
              and ids.max() < 20_000]
    (ids,) = killed  # partition 1's first attempt: what it logged before it died, every id once
    assert np.array_equal(ids, np.arange(10_000, 10_000 + ROWS // PARTITIONS // 2))
    retried = [ids for (attempt, _), ids in by_attempt.items() if attempt == "1"]
    assert len(retried) == 1 and np.array_equal(retried[0], np.arange(10_000, 20_000))


def each_batch_takes_one_tsc(table) -> None:
    """An Arrow batch (maxRecordsPerBatch 1000) passes the trace point whole: its 1000 ids, consecutive, share one
    TSC, and no two batches do."""
    tscs, ids = table.column("tsc").to_numpy(), table.column("tuple_id").to_numpy()
    values, first, counts = np.unique(tscs, return_index=True, return_counts=True)
    assert len(values) == ROWS // 1000 and set(counts) == {1000}
    for value, start in zip(values, ids[first]):
        assert np.array_equal(np.sort(ids[tscs == value]), np.arange(start, start + 1000))


def test_trace_points_hand_over_and_workers_start_no_library(run):
    assert run["handoff_count"] == ROWS
    table = cp.read_log_dir(run["app"], channel="handed")
    assert np.array_equal(np.sort(table.column("tuple_id").to_numpy()), np.arange(ROWS))
    each_batch_takes_one_tsc(table)
    assert all(row.library == "" for row in run["workers_handoff"])  # no thread, no file of their own


def test_with_the_handoff_off_workers_write_files_of_their_own(run):
    assert run["files_count"] == ROWS
    table = cp.read_log_dir(run["app"], channel="own-files")
    assert np.array_equal(np.sort(table.column("tuple_id").to_numpy()), np.arange(ROWS))
    each_batch_takes_one_tsc(table)
    metas = [cp.log_metadata(p) for p in set(table.column("file").to_pylist())]
    handed = cp.read_log_dir(run["app"], channel="handed").column("file").to_pylist()
    executor_pid = cp.log_metadata(handed[0])["pid"]
    assert all("handoff.pid" not in m and m["pid"] not in (executor_pid, os.getpid()) for m in metas)


def test_workers_of_files_of_their_own_hand_their_samples_to_the_tab(run):
    """The hop between two trace points in workers without the hand-off, as their libraries sampled it: on the tab,
    in one machine's clock (exact: no bound), from one to the other in the order the rows pass them; the samples'
    files were read and removed, never collected."""
    [hop] = [h for h in run["tab"]["hops"] if h["from_channel"] == "own.a"]
    assert hop["to_channel"] == "own.b" and hop["count"] > 0 and hop["remote_count"] == 0
    assert 0 <= hop["min_s"] <= hop["p50_s"] <= hop["max_s"] < 60 and hop["bound_max_s"] == 0
    suffix = tables.table("worker_samples").file
    assert not list(run["local_dir"].rglob("*" + suffix)) and not list(run["app"].rglob("*" + suffix))
