"""The plugin in a real local-mode Spark application: every task attempt is logged at start and end."""
import os
import re
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.harness.pipelines import ysb, ysb_events


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One application: a shuffle job with a retried task and a Python trace point; logs read after stop()."""
    log_dir = tmp_path_factory.mktemp("spark-logs")
    local_dir = tmp_path_factory.mktemp("spark-local")
    spark = (
        cps.builder(log_dir=str(log_dir), local_dir=str(local_dir), tsc_read="unordered",
                    channels={"sql-counting": ("mpc", 1_000_000), "py-counting": ("mpc", [1_000_000]),
                              "sql-xoy-down": ("downsample", 1)})
        .master("local[2,2]")  # two threads, a task may fail once
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .getOrCreate()
    )
    sc = spark.sparkContext

    def _fail_first_attempt(rows):  # defined here so that workers get it by value, not by module
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            raise RuntimeError("failing the first attempt on purpose")
        yield from rows

    rdd = sc.parallelize(range(10_000), 4).mapPartitions(_fail_first_attempt)
    counts = rdd.map(lambda x: (x % 5, 1)).reduceByKey(lambda a, b: a + b, 3).collect()
    traced = cps.trace(spark.range(0, 50_000, numPartitions=4), "py-trace", "id").count()
    spark.range(0, 4200, 1, 4200).selectExpr("sum(id)").collect()  # more attempts than one batch of the task table
    sc.setJobGroup("quiet", "task logging switched off for these jobs")
    sc.setLocalProperty("spark.cloudprofiler.task.enabled", "false")
    spark.range(0, 10, 1, 3).selectExpr("sum(id)").collect()
    sc.setLocalProperty("spark.cloudprofiler.task.enabled", None)
    quiet_jobs = set(sc.statusTracker().getJobIdsForGroup("quiet"))
    sc.setJobGroup("loud", "task logging back on")
    sql_sum = spark.sql(
        "select sum(t) from (select cp_trace('sql-trace', id) as t from range(0, 50000, 1, 4))").collect()[0][0]
    counted = spark.sql("select count(t) from (select cp_trace('sql-counted', id) as t from range(0, 1000, 1, 2))"
                        ).first()[0]
    sampled = spark.sql(  # ints, XoY 3 of 8, one null
        "select cp_trace('sql-xoy', if(id = 5, null, cast(id - 100 as int)), 3, 8) as t from range(0, 1000, 1, 2)")
    sampled_rows = [r.t for r in sampled.collect()]
    sampled_type = dict(sampled.dtypes)["t"]
    spark.sql("select sum(t) from (select cp_trace('sql-counting', id) as t from range(0, 30000, 1, 2))").collect()
    cps.trace(spark.range(0, 20_000, numPartitions=2), "py-counting", "id").count()
    spark.sql("select sum(t) from (select cp_trace('sql-xoy-down', id, 1, 4) as t from range(0, 1000, 1, 2))").collect()
    ysb_rows = ysb(ysb_events(spark, 30_000, per_second=1000), trace=(1, 8)).collect()
    spark.conf.set("spark.sql.codegen.wholeStage", "false")  # the interpreted path: eval(), the plan serialized
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    interpreted = spark.sql(
        "select sum(t) from (select cp_trace('sql-interpreted', id, 1, 2) as t from range(0, 1000, 1, 2))").first()[0]
    spark.conf.unset("spark.sql.codegen.wholeStage")
    spark.conf.unset("spark.sql.codegen.factoryMode")
    errors = {}
    for name, query in {"empty channel": "select cp_trace('', id) from range(3)",
                        "column channel": "select cp_trace(concat('a', id), id) from range(3)",
                        "string id": "select cp_trace('s', cast(id as string)) from range(3)",
                        "bad xoy": "select cp_trace('s', id, 9, 8) from range(3)",
                        "zero y": "select cp_trace('s', id, 0, 0) from range(3)"}.items():
        try:
            spark.sql(query).collect()
        except Exception as e:  # noqa: BLE001 -- the message is what the test checks
            errors[name] = str(e)
    try:
        cps.trace(spark.range(3), "py-bad", "id", handler="downsample", params=(0,))
    except ValueError as e:
        errors["python trace params"] = str(e)
    before = cp.clock_read()
    jvm_clock = list(spark._jvm.io.cloudprofiler.CloudProfiler.clockRead())  # the driver JVM: same machine, same TSC
    after = cp.clock_read()
    app_id = sc.applicationId
    spark.stop()
    return {"log_dir": log_dir, "app": log_dir / app_id, "counts": dict(counts), "traced": traced,
            "sql_sum": sql_sum, "counted": counted, "sampled": sampled_rows, "sampled_type": sampled_type,
            "interpreted": interpreted,
            "errors": errors, "quiet_jobs": quiet_jobs, "ysb": ysb_rows, "clocks": (before, jvm_clock, after)}


def _tasks(run):
    with open(run["app"] / "spark-tasks.arrows", "rb") as f:
        return ipc.open_file(f).read_all()


def test_the_job_ran_with_a_retried_task(run):
    assert run["counts"] == {k: 2000 for k in range(5)}
    tasks = _tasks(run).to_pylist()
    failed = [t for t in tasks if t["status"] == "FAILED"]
    assert len(failed) == 1 and "on purpose" in failed[0]["failure_reason"]
    assert {t["stage_id"] for t in tasks} >= {0, 1}  # the shuffle made two stages


def test_the_task_table_holds_every_attempt_across_several_batches(run):
    with open(run["app"] / "spark-tasks.arrows", "rb") as f:
        reader = ipc.open_file(f)
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    ids = [i for b in batches for i in b.column(0).to_pylist()]
    assert len(batches) >= 2 and max(b.num_rows for b in batches) <= 4096  # the driver holds one batch at most
    assert len(ids) == len(set(ids)) > 4200


def test_the_drivers_tables_are_arrow_ipc_files_that_polars_pyarrow_and_duckdb_read(run):
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    tasks = _tasks(run)
    path = run["app"] / "spark-tasks.arrows"
    dataset = ds.dataset(str(path), format="arrow")
    assert dataset.to_table().equals(tasks)
    assert polars.scan_ipc(path).filter(polars.col("status") == "FAILED").select(polars.len()).collect().item() == 1
    (attempts,) = duckdb.sql("select count(distinct task_attempt_id) from dataset").fetchall()[0]
    assert attempts == tasks.num_rows
    assert cp.read_log(path).equals(tasks)  # the package's readers read them too
    domains = polars.scan_ipc(run["app"] / "tsc-domains.arrows").collect()
    assert domains.height >= 1 and domains["role"].to_list()[0] == "reference"


def test_every_task_attempt_has_a_start_and_an_end_record_unless_its_job_switched_logging_off(run):
    start = cp.read_log_dir(run["app"], channel="spark.task.start")
    end = cp.read_log_dir(run["app"], channel="spark.task.end")
    tasks = _tasks(run).to_pylist()
    attempts = {t["task_attempt_id"] for t in tasks if t["job_id"] not in run["quiet_jobs"]}
    quiet = {t["task_attempt_id"] for t in tasks if t["job_id"] in run["quiet_jobs"]}
    assert len(quiet) >= 3  # the job that switched task logging off: in Spark's table, not in the records
    starts = dict(zip(start.column("tuple_id").to_pylist(), start.column("tsc").to_pylist()))
    ends = dict(zip(end.column("tuple_id").to_pylist(), end.column("tsc").to_pylist()))
    assert len(starts) == start.num_rows and len(ends) == end.num_rows  # each attempt logged once
    assert set(starts) == set(ends) == attempts
    assert all(starts[a] < ends[a] for a in attempts)


def test_task_files_carry_the_executor_metadata(run):
    for path in run["app"].rglob("spark.task.*.arrows"):
        meta = cp.log_metadata(path)
        assert meta["spark.app_id"] == run["app"].name and meta["spark.executor_id"] == "driver"
        assert meta["closed"] is True and meta["tsc.read"] == "unordered"  # as the session asked


def test_python_trace_logs_every_id_exactly_once_into_the_executors_folder(run):
    assert run["traced"] == 50_000
    traced = cp.read_log_dir(run["app"], channel="py-trace")
    assert np.array_equal(np.sort(traced.column("tuple_id").to_numpy()), np.arange(50_000))
    # written by Python workers (other processes) into the folder the executor collected, beside its task files
    (executor_folder,) = {p.parent for p in run["app"].rglob("spark.task.start.*.arrows")}
    files = {Path(f) for f in traced.column("file").to_pylist()}
    assert {f.parent for f in files} == {executor_folder}
    metas = [cp.log_metadata(f) for f in files]
    assert all("spark.task_attempt_id" in m and m["pid"] != os.getpid() for m in metas)
    # handed over to the executor's library: its process wrote the files, the workers wrote none
    executor_pid = cp.log_metadata(next(executor_folder.glob("spark.task.start.*.arrows")))["pid"]
    assert {m["pid"] for m in metas} == {executor_pid}
    assert all(int(m["handoff.pid"]) not in (executor_pid, os.getpid()) for m in metas)
    assert len({m["spark.task_attempt_id"] for m in metas}) == 4  # a file per task attempt
    assert not list(run["log_dir"].glob("*.arrows"))  # nothing left outside the application's folder


def test_sql_trace_logs_every_id_exactly_once(run):
    assert run["sql_sum"] == sum(range(50_000))
    ids = cp.read_log_dir(run["app"], channel="sql-trace").column("tuple_id").to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(50_000))


def test_sql_trace_stays_in_the_plan_when_only_counted(run):
    assert run["counted"] == 1000  # count(non-null column) would become count(1), without the trace point
    ids = cp.read_log_dir(run["app"], channel="sql-counted").column("tuple_id").to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(1000))


def test_sql_trace_xoy_keeps_the_same_ids_everywhere_and_returns_ids_unchanged(run):
    expected = [None if i == 5 else i - 100 for i in range(1000)]
    assert run["sampled"] == expected and run["sampled_type"] == "int"
    ids = cp.read_log_dir(run["app"], channel="sql-xoy").column("tuple_id").to_pylist()
    assert sorted(ids) == [i for i in expected if i is not None and i % 8 < 3]  # Python's % is floorMod
    meta = cp.log_metadata(next(run["app"].rglob("sql-xoy.*.arrows")))
    assert meta["handler"] == "xoy"


def test_ysb_sampled_trace_points_log_the_same_ids_and_every_window(run):
    assert sum(r.events for r in run["ysb"]) == 10_000  # every third event of 30,000 is a view
    views = np.arange(0, 30_000, 3)
    for channel in ("ysb.filter", "ysb.join"):
        ids = cp.read_log_dir(run["app"], channel=channel).column("tuple_id").to_numpy()
        assert np.array_equal(np.sort(ids), views[views % 8 < 1]), channel
    windows = cp.read_log_dir(run["app"], channel="ysb.window").column("tuple_id").to_pylist()
    assert sorted(windows) == sorted(r.trace_id for r in run["ysb"]) and len(windows) == 300  # 3 windows x 100


def test_configured_channels_take_their_handler_in_sql_and_python(run):
    for channel, rows in (("sql-counting", 30_000), ("py-counting", 20_000)):
        counters = cp.read_log_dir(run["app"], channel=channel, kind="counters")
        assert counters.num_rows >= 1 and sum(counters.column("count").to_pylist()) == rows, channel
        assert {cp.log_metadata(f)["handler"] for f in set(counters.column("file").to_pylist())} == {"mpc"}
        assert cp.read_log_dir(run["app"], channel=channel).num_rows == 0  # no (id, TSC) records in any file
    # a configured handler replaces xoy(x, y) behind the sampled form; the sample is still taken in the query
    sampled = cp.read_log_dir(run["app"], channel="sql-xoy-down")
    assert sorted(sampled.column("tuple_id").to_pylist()) == list(range(0, 1000, 4))
    assert {cp.log_metadata(f)["handler"] for f in set(sampled.column("file").to_pylist())} == {"downsample"}


def test_sql_trace_without_generated_code_logs_the_same(run):
    assert run["interpreted"] == sum(range(1000))
    ids = cp.read_log_dir(run["app"], channel="sql-interpreted").column("tuple_id").to_pylist()
    assert sorted(ids) == list(range(0, 1000, 2))


def test_sql_trace_bad_arguments_are_named(run):
    errors = run["errors"]
    assert "the channel name must be a non-empty string literal, got ''" in errors["empty channel"]
    assert "got concat('a', CAST(id AS STRING))" in errors["column channel"]
    assert "cp_trace('s', ...) takes an integral id" in errors["string id"] and "got STRING" in errors["string id"]
    assert "expected 0 <= x <= y and y >= 1, got x=9, y=8" in errors["bad xoy"]
    assert "got x=0, y=0" in errors["zero y"]
    assert errors["python trace params"] == "trace('py-bad'): downsample n=0 is out of range: expected n >= 1"


@pytest.mark.parametrize("conf, message", [
    ({"spark.cloudprofiler.task.handler": "fastest"}, "spark.cloudprofiler.task.handler=fastest is invalid"),
    ({"spark.cloudprofiler.task.handler": "downsample", "spark.cloudprofiler.task.params": "a"},
     "spark.cloudprofiler.task.params=a is invalid: expected comma-separated integers"),
    ({"spark.cloudprofiler.tsc.read": "fenced"},
     "spark.cloudprofiler.tsc.read=fenced is invalid: expected ordered or unordered"),
    ({"spark.cloudprofiler.channel.after-join.handler": "sometimes"},
     "spark.cloudprofiler.channel.after-join.handler=sometimes is invalid: unknown handler 'sometimes': expected one "
     "of null, identity"),
    ({"spark.cloudprofiler.task.handler": "downsample", "spark.cloudprofiler.task.params": "0"},  # the library's check
     "spark.cloudprofiler.task.params=0 is invalid: downsample n=0 is out of range: expected n >= 1"),
    ({"spark.cloudprofiler.channel.j.handler": "xoy", "spark.cloudprofiler.channel.j.params": "5, 3"},
     "spark.cloudprofiler.channel.j.params=5, 3 is invalid: xoy x=5 is out of range: expected 0 <= x <= y (y=3)"),
    ({"spark.cloudprofiler.channelBlocks": "1"},
     "spark.cloudprofiler.channelBlocks=1 is invalid: expected an integer from 2 to 65536"),
    ({"spark.cloudprofiler.channel.j.handler": "downsample", "spark.cloudprofiler.channel.j.params": "4,5"},
     "spark.cloudprofiler.channel.j.params=4,5 is invalid: handler downsample takes 1 parameter"),
    ({"spark.cloudprofiler.channel.j.params": "4"},
     "spark.cloudprofiler.channel.j.params=4 is invalid: spark.cloudprofiler.channel.j.handler is not set"),
    ({"spark.cloudprofiler.logdir": "/tmp/x"},
     "spark.cloudprofiler.logdir is not an option of cloudprofiler: did you mean spark.cloudprofiler.logDir"),
    ({"spark.cloudprofiler.colect.intervalSeconds": "5"},
     "spark.cloudprofiler.colect.intervalSeconds is not an option of cloudprofiler: expected one of"),
])
def test_bad_option_names_the_key(run, conf, message):
    from pyspark.sql import SparkSession

    builder = cps.builder().master("local[1]").config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with pytest.raises(Exception, match=re.escape(message)):
            builder.getOrCreate()
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def test_with_task_logging_off_trace_channels_of_a_later_application_are_collected(run, tmp_path):
    """A second application in the same JVM, task records off: its trace points (one of the same name as the first
    application's) still log into its own folder, which the executor collects. Its localDir is set by hand, not
    through the helper: the Python trace point finds the executor's folder through the session's configuration."""
    spark = (cps.builder(log_dir=str(tmp_path), task_enabled=False, calibration_enabled=False).master("local[2]")
             .config("spark.cloudprofiler.localDir", str(tmp_path / "set-by-hand"))
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        spark.sql("select sum(t) from (select cp_trace('sql-trace', id) as t from range(0, 1000, 1, 2))").collect()
        cps.trace(spark.range(0, 500, numPartitions=2), "py-quiet", "id").count()
        app = tmp_path / spark.sparkContext.applicationId
    finally:
        spark.stop()
    assert sorted(cp.read_log_dir(app, channel="sql-trace").column("tuple_id").to_pylist()) == list(range(1000))
    assert sorted(cp.read_log_dir(app, channel="py-quiet").column("tuple_id").to_pylist()) == list(range(500))
    assert not list(app.rglob("spark.task.*.arrows"))


def test_an_unwritable_log_folder_stops_the_application_at_start_naming_the_option(run, tmp_path):
    from pyspark.sql import SparkSession

    (tmp_path / "a-file").write_text("")
    log_dir = tmp_path / "a-file" / "logs"  # not even root makes a folder inside a file
    builder = cps.builder(log_dir=str(log_dir)).master("local[1]").config("spark.ui.enabled", "false")
    try:
        message = f"spark.cloudprofiler.logDir={log_dir} is invalid: cannot write"
        with pytest.raises(Exception, match=re.escape(message)):
            builder.getOrCreate()
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def test_the_jni_clock_reading_pairs_the_tsc_with_the_raw_monotonic_clock(run):
    before, (tsc, mono_raw, realtime, uncertainty, cpu), after = run["clocks"]
    assert before.tsc < tsc < after.tsc and before.monotonic_raw_ns < mono_raw < after.monotonic_raw_ns
    assert before.realtime_ns <= realtime <= after.realtime_ns and 0 <= uncertainty < cp.tsc_frequency().hz * 1e-3
    assert 0 <= cpu < 4096
