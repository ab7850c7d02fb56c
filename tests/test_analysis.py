"""The analysis on Spark (cloudprofiler.analysis) over a real application's log folder: the numbers it reports
are the raw files' numbers, cut files and folders without calibration say so, and bad input names the value.

The application runs once, in a subprocess (local[2,2]: a task may fail once): trace points 'a' before and 'b'
after a shuffle, a Python trace point 'py', a counter channel, a task that fails its first attempt, and trace points
'early' and 'late' with a filter between them that keeps the first quarter of the rows."""
import json
import math
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
from cloudprofiler.analysis import NotAnApplicationError, UnknownChannelError, open_application
from cloudprofiler.analysis.logfile import kind_of
from cloudprofiler.analysis.sketch import RELATIVE_ACCURACY
from conftest import assert_same_sketches, run_python

ROWS = 20_000
RECORD_COLUMNS = ["channel", "handler", "host", "executor_id", "pid", "domain", "task_attempt_id", "file", "tuple_id",
                  "tsc", "t_ns", "err_ns", "extrapolated", "unbounded"]

APPLICATION = r"""
import sys
import cloudprofiler.spark as cps
log_dir, rows = sys.argv[1], int(sys.argv[2])
spark = (cps.builder(log_dir=log_dir, local_dir=log_dir + "-local", channels={"counted": ("mpc", 1_000_000)})
         .master("local[2,2]").config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "3")
         .getOrCreate())

def fail_once(rows):
    from pyspark import TaskContext
    ctx = TaskContext.get()
    if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
        raise RuntimeError("failing the first attempt on purpose")
    yield from rows

spark.sparkContext.parallelize(range(1000), 4).mapPartitions(fail_once).count()
spark.sql(f"select sum(x) from (select cp_trace('b', x) as x from (select cp_trace('a', id) as x "
          f"from range(0, {rows}, 1, 4)) distribute by x % 3)").collect()
cps.trace(spark.range(0, 1000, numPartitions=2), "py", "id").count()
spark.sql("select sum(t) from (select cp_trace('counted', id) as t from range(0, 30000, 1, 2))").collect()
spark.sql("select sum(x) from (select cp_trace('late', x) as x from (select cp_trace('early', id) as x "
          "from range(0, 20000, 1, 1)) where x < 5000)").collect()
print("app", spark.sparkContext.applicationId)
spark.stop()
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    log_dir = tmp_path_factory.mktemp("analysis-logs")
    result = run_python(f"import sys; sys.argv = ['app', {str(log_dir)!r}, '{ROWS}']\n" + APPLICATION, timeout=300)
    assert result.returncode == 0 and "app " in result.stdout, result.stderr[-3000:]
    return log_dir / result.stdout.split("app ")[1].split()[0]


@pytest.fixture(scope="module")
def app(folder):
    return open_application(folder)


def _raw(folder: Path, channel: str) -> pa.Table:
    """Every record of a channel, read by hand: tuple_id, tsc (int64)."""
    tables = [cp.read_log(p).select(["tuple_id", "tsc"]) for p in folder.rglob("*.arrows")
              if cp.log_metadata(p).get("channel.name") == channel]
    return pa.concat_tables([t.cast(pa.schema([("tuple_id", pa.int64()), ("tsc", pa.int64())])) for t in tables])


def _driver(folder: Path) -> dict:
    """The driver's start clock and TSC frequency from the task table's metadata."""
    return cp.log_metadata(folder / "spark-tasks.arrows")


def _task_durations(folder: Path, hz: float) -> dict:
    start, end = _raw(folder, "spark.task.start").to_pydict(), _raw(folder, "spark.task.end").to_pydict()
    begin = dict(zip(start["tuple_id"], start["tsc"]))
    return {t: (e - begin[t]) / hz * 1e9 for t, e in zip(end["tuple_id"], end["tsc"]) if t in begin}


def test_records_are_the_files_records_on_the_drivers_time_axis(app, folder):
    driver = _driver(folder)
    start = int(json.loads(driver["application.start.clock"])["tsc"])
    hz = driver["tsc.hz"]
    assert app.timebase.start_tick == start and app.timebase.hz == hz
    records = app.records("a")
    assert records.columns == RECORD_COLUMNS
    got = records.select("tuple_id", "tsc", "t_ns", "err_ns", "unbounded").toPandas().sort_values("tuple_id")
    raw = _raw(folder, "a").to_pandas().sort_values("tuple_id")
    assert np.array_equal(got["tuple_id"], raw["tuple_id"]) and np.array_equal(got["tsc"], raw["tsc"])
    assert np.allclose(got["t_ns"], (raw["tsc"].to_numpy() - start) / hz * 1e9, rtol=0, atol=1e-3)
    assert (got["t_ns"] > 0).all() and (got["err_ns"] == 0).all() and not got["unbounded"].any()
    channels = {r["channel"]: r for r in app.channels().collect()}
    assert channels["a"]["records"] == channels["b"]["records"] == ROWS and channels["counted"]["kind"] == "counters"
    assert app.summary()["records"] == sum(r["records"] for r in channels.values())


def test_trace_points_are_chained_in_the_order_their_tuples_pass_them(app):
    """'late' logs the first quarter of the ids that 'early' logs, each some nanoseconds after it: the channels'
    median times put 'late' first, and the pipeline chains them the other way, with a positive latency."""
    from cloudprofiler.analysis.pipeline import channel_order, ordered_sketches

    assert channel_order(app, ["early", "late"]) == ["late", "early"]
    sketches, pairs = ordered_sketches(app, ["early", "late"])
    hop = sketches.hop_statistics(0, [0.5])
    assert sketches.channels == ["early", "late"] and hop["count"] == 5000 and hop["q"][0] > 0, hop
    # the pass that ordered them counted both directions: the chosen one as a pass of its hop alone counts it
    columns = ["hop", "remote", "measure", "key", "count", "min_ns", "max_ns", "sum_ns", "err_max_ns"]
    alone = app.hop_sketches(["early", "late"]).rows[columns].sort_values(columns[:4], ignore_index=True)
    pd.testing.assert_frame_equal(sketches.rows[columns].sort_values(columns[:4], ignore_index=True), alone,
                                  check_dtype=False)
    backwards = pairs.chain(["late", "early"]).hop_statistics(0, [0.5])
    assert backwards["count"] == 5000 and backwards["q"][0] < 0


def test_a_large_applications_trace_points_are_ordered_on_a_sample_then_counted_in_one_pass(app, monkeypatch):
    """Past ORDER_SAMPLE_RECORDS the order is found on one tuple id in ORDER_SAMPLE: 'late' before 'early' by their
    median times is put right from the sample's pairs, and the one pass over every record counts the chain as it
    would alone."""
    from cloudprofiler.analysis import hops, pipeline

    passes, count = [], hops.hop_sketches

    def counted(*args, **kwargs):
        passes.append(kwargs.get("sample", 1))
        return count(*args, **kwargs)

    monkeypatch.setattr(pipeline, "ORDER_SAMPLE_RECORDS", ROWS)  # "early" and "late" hold 1.25 x ROWS records
    monkeypatch.setattr(pipeline, "ORDER_SAMPLE", 4)
    monkeypatch.setattr(pipeline, "hop_sketches", counted)
    monkeypatch.setattr(hops, "hop_sketches", counted)
    sketches, _ = pipeline.ordered_sketches(app, ["early", "late"])
    assert passes == [4, 1]  # the sample's pairs, then the chain: no pass of every pair
    hop = sketches.hop_statistics(0, [0.5])
    assert sketches.channels == ["early", "late"] and hop["count"] == 5000 and hop["q"][0] > 0, hop
    monkeypatch.setattr(pipeline, "ORDER_SAMPLE_RECORDS", 3 * ROWS)  # below it: the chain, then every pair
    passes.clear()
    pipeline.ordered_sketches(app, ["early", "late"])
    assert passes == [1, 1]


def test_the_task_attempts_are_read_once_until_released(app):
    """Every analysis starts from the attempts: kept in the session's cache from the first call, scopes filter the
    kept rows, and release() gives the memory back (the next call reads them again)."""
    every = app.tasks()
    assert every.is_cached and app.task_table().is_cached
    assert app.tasks(job_id=0).count() == every.where("job_id = 0").count() > 0
    app.release()
    assert not every.is_cached
    assert app.tasks().is_cached and app.tasks().count() == every.count()


def _python_rdds(frame) -> int:
    """How many of Spark's PythonRDDs (each a Python worker's task) the JVM's RDD of `frame` is made of."""
    return frame._jdf.queryExecution().toRdd().toDebugString().count("PythonRDD")


def test_the_analyses_own_rows_reach_spark_without_a_python_worker(app):
    """Spark's createDataFrame of a Python list decodes it in a Python worker (a second of a cold report, to start
    it); the analyses' own rows go as an Arrow table instead, with the values and types createDataFrame gives."""
    from cloudprofiler.analysis.reader import local_frame

    plain = app.spark.createDataFrame([(1, "a", 0.5, None)], "n long, s string, x double, b boolean")
    assert _python_rdds(plain) > 0  # what this test would see if the Arrow way were not taken
    ddl = "n long, s string, x double, b boolean, i int"
    rows = [(1, "a", 0.5, None, 3), (None, None, float("nan"), True, None)]
    ours = local_frame(app.spark, rows, ddl)
    assert _python_rdds(ours) == 0
    assert ours.schema == app.spark.createDataFrame(rows, ddl).schema
    got = ours.collect()
    assert got[0] == (1, "a", 0.5, None, 3) and got[1][:2] == (None, None) and math.isnan(got[1][2])
    assert local_frame(app.spark, [{"s": "b", "n": 2, "unused": 1}], ddl).collect() == [(2, "b", None, None, None)]
    assert local_frame(app.spark, [], ddl).count() == 0
    for frame in (app.channels(), app.files(), app.health(), app.stages(), app.pipeline(), app.calibration()):
        assert _python_rdds(frame) == 0


def test_the_driver_s_tables_of_a_local_folder_are_read_without_a_spark_job(app):
    """A table the driver wrote (tasks, TSC domains, calibration probes...) in a folder on this machine is read from
    its file: through Spark each read was a job of 50-100 ms. The table is the one Spark's binaryFile gives."""
    from cloudprofiler.analysis import reader

    sc = app.spark.sparkContext
    read = {}
    for id, (file, *_) in app.catalog.tables.items():
        sc.setJobGroup(f"read-{id}", "a driver table", False)
        read[id] = reader.read_table(app.spark, id, file)
        assert list(sc.statusTracker().getJobIdsForGroup(f"read-{id}")) == [], id
    sc.setLocalProperty("spark.jobGroup.id", None)
    assert {"tasks", "tsc_domains"} <= set(read) and read["tasks"].num_rows > 0
    for id, (file, *_) in app.catalog.tables.items():
        content = reader.binary_files(app.spark, [file]).select("content").first()["content"]
        through_spark = reader.cast_table(reader.read_log_bytes(file, content).table(),
                                          reader.plugin_tables.table(id).schema)
        assert read[id].equals(through_spark), id


def test_one_tasks_duration_and_a_stages_p99_match_the_raw_files(app, folder):
    hz = _driver(folder)["tsc.hz"]
    by_hand = _task_durations(folder, hz)
    tasks = app.tasks().toPandas().set_index("task_attempt_id")
    some = max(by_hand)
    assert math.isclose(tasks.loc[some, "duration_ns"], by_hand[some], rel_tol=1e-12)
    assert tasks.loc[some, "path"] == "trivial" and tasks.loc[some, "err_ns"] == 0
    failed = tasks[tasks["status"] != "SUCCESS"]
    assert len(failed) == 1 and "failing the first attempt" in failed["failure_reason"].iloc[0]
    assert (tasks["spark_duration_ms"] == tasks["finish_time_ms"] - tasks["launch_time_ms"]).all()
    # on one axis, the driver launches an attempt before its executor starts it, and learns that it finished after
    # it ended (Spark's times are whole milliseconds: 2 ms of slack)
    timed = tasks.dropna(subset=["start_t_ns"])
    assert (timed["launch_t_ns"] <= timed["start_t_ns"] + 2e6).all()
    assert (timed["finish_t_ns"] >= timed["end_t_ns"] - 2e6).all()

    ok = tasks[tasks["status"] == "SUCCESS"]
    stage = ok.groupby("stage_id").size().idxmax()
    durations = np.array([by_hand[t] for t in ok[ok["stage_id"] == stage].index])
    row = app.stages().where(f"stage_id = {stage}").first()
    assert math.isclose(row["p99_ns"], np.quantile(durations, 0.99, method="inverted_cdf"), rel_tol=1e-12)
    assert math.isclose(row["p50_ns"], np.quantile(durations, 0.5, method="inverted_cdf"), rel_tol=1e-12)
    assert math.isclose(row["p90_ns"], np.quantile(durations, 0.9, method="inverted_cdf"), rel_tol=1e-12)
    assert math.isclose(row["skew"], durations.max() / row["p50_ns"], rel_tol=1e-12)
    assert row["tasks"] == len(tasks[tasks["stage_id"] == stage]) and row["stragglers"] == sum(
        durations > 1.5 * row["p50_ns"])


def test_each_stages_gap_matches_the_raw_files(app, folder):
    """gap_before_ns: from the latest end of a stage that ended before this one started to this one's first task
    start, by hand from the task records' TSCs and the task table's stages (one host: no translation needed)."""
    hz = _driver(folder)["tsc.hz"]
    table = cp.read_log(folder / "spark-tasks.arrows").to_pandas().set_index("task_attempt_id")
    start, end = (dict(zip(*_raw(folder, c).to_pydict().values())) for c in ("spark.task.start", "spark.task.end"))
    spans = {}
    for attempt, task in table.iterrows():
        key = (task["stage_id"], task["stage_attempt"])
        low, high = spans.get(key, (None, None))
        if attempt in start:
            low = start[attempt] if low is None else min(low, start[attempt])
        if attempt in end:
            high = end[attempt] if high is None else max(high, end[attempt])
        spans[key] = (low, high)
    ends = sorted(high for _, high in spans.values() if high is not None)
    rows = {(r["stage_id"], r["stage_attempt"]): r for r in app.stages().collect()}
    assert set(rows) == set(spans) and len(rows) >= 5
    gaps = 0
    for key, (low, _) in spans.items():
        before = [e for e in ends if e < low]
        if not before:
            assert rows[key]["gap_before_ns"] is None, key
            continue
        gaps += 1
        assert math.isclose(rows[key]["gap_before_ns"], (low - before[-1]) / hz * 1e9, rel_tol=1e-9, abs_tol=1), key
    assert gaps >= 4


def test_a_hops_median_matches_the_raw_files_and_joins_are_sort_merge_joins(app, folder):
    hz = app.timebase.hz
    a, b = (_raw(folder, c).to_pandas().set_index("tuple_id")["tsc"] for c in ("a", "b"))
    latencies = np.sort(((b - a[b.index]) / hz * 1e9).to_numpy())
    hops = {r["hop"]: r for r in app.pipeline(["a", "b", "py"]).collect()}
    hop = hops[0]
    assert hop["count"] == ROWS and hop["remote_count"] == 0 and hop["err_max_ns"] == 0
    # the sketch's quantile: within its relative accuracy of the value at the exact rank
    for name, q in (("p50_ns", 0.5), ("p99_ns", 0.99), ("p1_ns", 0.01)):
        exact = np.quantile(latencies, q, method="inverted_cdf")
        assert abs(hop[name] - exact) <= RELATIVE_ACCURACY * exact, (name, hop[name], exact)
    assert hop["min_ns"] == pytest.approx(latencies[0]) and hop["max_ns"] == pytest.approx(latencies[-1])
    assert hops[-1]["share_of_p99"] == 1 and hops[-1]["count"] == 1000 and set(hops) == {0, 1, -1}
    plan = app.latency("a", "b")._jdf.queryExecution().executedPlan().toString()
    assert "SortMergeJoin" in plan and "BroadcastHashJoin" not in plan
    histogram = app.latency_histogram("a", "b", bins=8).collect()
    assert sum(r["count"] for r in histogram) == ROWS and all(r["lo_ns"] < r["hi_ns"] for r in histogram)


def test_latency_joins_records_past_what_a_broadcast_may_collect(app):
    """A broadcast join collects one side on the driver, and fails the query past spark.driver.maxResultSize (lowered
    here so that 20,000 records are past it, as a large application's are past a driver's default). The analysis
    joins the same records by a sort-merge join and gets every pair."""
    conf = app.spark.sparkContext._jsc.sc().conf()  # the driver's own, read as each stage is scheduled
    held = conf.get("spark.driver.maxResultSize", "1g")
    columns = ["tuple_id", "tsc", "domain_id", "t_ns", "host"]
    a, b = (app.log_frame(channel, "records", columns) for channel in ("a", "b"))
    conf.set("spark.driver.maxResultSize", "32k")
    try:
        with pytest.raises(Exception, match="bigger than spark.driver.maxResultSize"):
            a.join(b.hint("broadcast"), "tuple_id").count()
        assert app.latency("a", "b").count() == ROWS
    finally:
        conf.set("spark.driver.maxResultSize", held)


def test_counter_channels_give_periods_and_throughput(app):
    assert app.counters("counted").agg({"count": "sum"}).first()[0] == 30_000
    throughput = {r["channel"]: r["records"] for r in app.throughput(["counted", "a"], period_ms=100)
                  .groupBy("channel").agg({"records": "sum"}).withColumnRenamed("sum(records)", "records").collect()}
    assert throughput == {"counted": 30_000, "a": ROWS}


def test_a_cut_file_is_read_up_to_its_last_complete_batch_with_a_warning(folder, tmp_path):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    target = next(p for p in copy.rglob("a.*.arrows"))
    data = target.read_bytes()
    target.write_bytes(data[: len(data) * 6 // 10])  # in the middle of a batch, whichever IPC layout
    with pytest.warns(UserWarning, match=target.name):
        expected = cp.read_log(target).num_rows
    with pytest.warns(UserWarning, match=target.name):
        cut = open_application(copy)
    assert 0 < expected < ROWS and cut.records("a").count() == expected
    files = {r["file"].rsplit("/", 1)[-1]: r for r in cut.files().collect()}
    whole = files[next(copy.rglob("b.*.arrows")).name]
    assert files[target.name]["cut"] and not files[target.name]["ended"] and not whole["cut"] and whole["ended"]
    health = cut.health().where("kind = 'cut_file'").collect()
    assert len(health) == 1 and target.name in health[0]["subject"] and health[0]["severity"] == "warning"


def test_a_python_workers_malformed_hand_off_is_a_health_finding_naming_its_pid(folder, tmp_path):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    path = next(copy.rglob("py.*.arrows"))
    table = cp.read_log(path)
    meta = {**table.schema.metadata, b"handoff.pid": b"31337", b"handoff.rejected_blocks": b"2",
            b"handoff.rejected_files": b"1"}
    with ipc.new_file(str(path), table.schema.with_metadata(meta)) as writer:  # as the inbox writes it
        writer.write_table(table)
    rows = open_application(copy).health().where("kind like '%_handoff'").collect()
    row, unsealed = sorted(rows, key=lambda r: r["kind"])
    assert row["kind"] == "malformed_handoff" and row["severity"] == "warning" and row["count"] == 2
    assert row["subject"].endswith(path.name)
    assert "the Python worker pid 31337 wrote 2 malformed blocks" in row["message"]
    assert unsealed["kind"] == "unsealed_handoff" and unsealed["count"] == 1 and unsealed["subject"].endswith(path.name)
    assert "the Python worker pid 31337 handed the executor shared memory not sealed" in unsealed["message"]


def _move_to_another_host(path: Path) -> None:
    """Rewrites a log file as if another machine (another boot id, no calibration) had written it."""
    table = cp.read_log(path)
    meta = {**table.schema.metadata, b"boot_id": b"other-machine", b"host": b"other-host", b"pid": b"424242"}
    with ipc.new_stream(str(path), table.schema.with_metadata(meta)) as writer:
        writer.write_table(table)


def test_without_calibration_durations_stay_per_host_and_cross_host_ones_are_unbounded(folder, tmp_path):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    (copy / "tsc-domains.arrows").unlink()  # as with spark.cloudprofiler.calibration.enabled=false
    for channel in ("a", "b"):
        _move_to_another_host(next(copy.rglob(f"{channel}.*.arrows")))
    app = open_application(copy)
    health = {(r["kind"], r["subject"]): r for r in app.health().collect()}
    assert health[("no_calibration", str(copy))]["severity"] == "warning"
    assert "across hosts are unbounded" in health[("no_calibration", str(copy))]["message"]
    assert "other-machine" in health[("uncalibrated", "other-machine")]["message"]
    assert health[("unbounded", "a")]["count"] == ROWS

    meta = cp.log_metadata(next(copy.rglob("a.*.arrows")))
    a, b = (_raw(copy, c).to_pandas().set_index("tuple_id")["tsc"] for c in ("a", "b"))
    by_hand = ((b - a[b.index]) / meta["tsc.hz"] * 1e9).sort_index()
    local = app.latency("a", "b").toPandas().set_index("tuple_id").sort_index()
    assert set(local["path"]) == {"local"} and not local["unbounded"].any() and not local["remote"].any()
    assert np.allclose(local["latency_ns"], by_hand, rtol=1e-12)
    assert np.allclose(local["err_ns"], by_hand * meta["tsc.hz_uncertainty"] / meta["tsc.hz"], rtol=1e-9)
    cross = app.latency("a", "py").toPandas()
    assert len(cross) == 1000 and cross["unbounded"].all() and cross["remote"].all()
    assert cross["latency_ns"].isna().all() and set(cross["path"]) == {"unbounded"}
    assert set(app.tasks().toPandas()["path"]) == {"trivial"}  # the driver's own host stays exact
    assert_same_sketches(app, ["a", "b", "py"], [(0, 0, 1), (1, 0, 2)])  # local and unbounded, in the JVM too


def test_bad_input_names_the_value(app, folder, tmp_path):
    with pytest.raises(NotAnApplicationError, match=str(tmp_path / "missing")):
        open_application(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotAnApplicationError, match="no .arrows files"):
        open_application(tmp_path / "empty")
    with pytest.raises(NotAnApplicationError, match=folder.name):  # the log folder, not the application's
        open_application(folder.parent)
    with pytest.raises(UnknownChannelError, match="'nope'.*a, b, early, late, py"):
        app.records("nope")
    with pytest.raises(UnknownChannelError, match="'nope'"):
        app.latency("a", "nope")
    looped = tmp_path / "looped" / folder.name
    shutil.copytree(folder, looped)
    (looped / "back").symlink_to(looped, target_is_directory=True)  # a link that leads back up: no endless listing
    nested = rf"looped/{re.escape(folder.name)}/back/back/.*nested more than 16 deep"
    with pytest.raises(NotAnApplicationError, match=nested):
        open_application(looped)


def test_the_data_source_gives_the_rows_of_records(app, folder):
    if not hasattr(app.spark, "dataSource"):
        pytest.skip("Python data sources need Spark 4.0")
    via_source = app.spark.read.format("cloudprofiler-logs").option("channel", "b").load(str(folder))
    assert via_source.columns == RECORD_COLUMNS
    assert sorted(map(tuple, via_source.collect())) == sorted(map(tuple, app.records("b").collect()))


def test_the_plugins_reader_gives_the_python_readers_values(app, folder, tmp_path):
    """The log files read in the JVM (the plugin's reader) and in Python workers give the same rows, every column
    value for value (the time columns to the bit), for records and counters, a cut file, an uncalibrated host and a
    file compressed with zstd."""
    from pandas.testing import assert_frame_equal

    from cloudprofiler.analysis import reader

    def same(app, kind: str) -> None:
        files = app.catalog.files_of(app.catalog.channels(kind), kind)
        schema = reader.kind_schema(kind, [*reader.kind_schema(kind).names, "domain_id", "channel_id"])
        ids = {c: i for i, c in enumerate(app.catalog.channels(kind))}
        frames = [f(app.spark, files, app.timebase, schema, ids).toPandas()
                  for f in (reader.python_log_frame, reader.jvm_log_frame)]
        keys = ["file", *schema.names[schema.get_field_index("file") + 1:][:2]]
        old, new = (f.sort_values(keys, kind="stable").reset_index(drop=True) for f in frames)
        assert len(old) == sum(f.rows for f in files) > 0
        assert_frame_equal(new, old, check_exact=True)

    assert reader.jvm_reader(app.spark)
    for kind in ("records", "counters"):
        same(app, kind)
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    (copy / "tsc-domains.arrows").unlink()
    _move_to_another_host(next(copy.rglob("b.*.arrows")))
    target = next(copy.rglob("a.*.arrows"))
    target.write_bytes(target.read_bytes()[: target.stat().st_size * 6 // 10])
    compressed = next(copy.rglob("early.*.arrows"))
    table = cp.read_log(compressed)
    with ipc.new_file(str(compressed), table.schema, options=ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table, max_chunksize=1000)  # as the library's compression option writes batches
    with pytest.warns(UserWarning, match=target.name):
        same(open_application(copy), "records")
    (copy / ".hidden").mkdir()
    shutil.copy(compressed, copy / ".hidden" / compressed.name)  # a file being written under a hidden name
    _catalogs_agree(app.spark, str(copy))


def _catalogs_agree(spark, path: str) -> None:
    """The files described in the JVM (FileDescriptions) as catalog.describe_file describes them: the same files
    and values; a driver table's row has its schema only; a log file's median TSC is the exact one of its values
    (Python's is pyarrow's estimate)."""
    from cloudprofiler.analysis import reader
    from cloudprofiler.analysis.catalog import FILE_ROW, describe_files
    from cloudprofiler.logs import unpadded

    jvm = {r["file"]: r for r in reader.catalog_rows(spark, path)}
    python = {r["file"]: r.asDict() for r in reader.binary_files(spark, path).select("path", "content")
              .mapInArrow(describe_files, reader.spark_schema(FILE_ROW)).collect()}
    assert jvm.keys() == python.keys() and not any("/.hidden/" in f for f in jvm)
    kinds = set()
    for file, mine in jvm.items():
        theirs = python[file]
        schema = unpadded(pa.ipc.read_schema(pa.py_buffer(mine["schema"])))
        assert schema.equals(pa.ipc.read_schema(pa.py_buffer(theirs["schema"])), check_metadata=True), file
        kind = kind_of(schema)
        kinds.add((kind, mine["cut"]))
        if kind == "table":
            assert (mine["ended"], mine["cut"], mine["rows"], mine["error"]) == (True, False, 0, None), file
            continue
        assert {k: mine[k] for k in FILE_ROW.names if k not in ("schema", "median_tsc")} == \
            {k: theirs[k] for k in FILE_ROW.names if k not in ("schema", "median_tsc")}, file
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = np.sort(cp.read_log(file.removeprefix("file:")).column(1 if kind == "records" else 0).to_numpy())
        assert mine["median_tsc"] == values[(len(values) + 1) // 2 - 1], file
    assert {("records", True), ("records", False), ("counters", False), ("table", False)} <= kinds
    # the files go into partitions as Spark's own file sources pack the same files, at its settings
    counts = set()
    for cost in ("4MB", "64kB", "1kB"):
        spark.conf.set("spark.sql.files.openCostInBytes", cost)
        try:
            mine = spark.read.format(reader.JVM_CATALOG).option("path", path).load().rdd.getNumPartitions()
            assert mine == reader.binary_files(spark, path).rdd.getNumPartitions(), cost
            counts.add(mine)
        finally:
            spark.conf.unset("spark.sql.files.openCostInBytes")
    assert len(counts) > 1 and min(counts) < len(jvm), (counts, len(jvm))
