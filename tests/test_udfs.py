"""Python UDF batches timed in their workers (spark.cloudprofiler.udfs), held to known answers on a real local
application (one session for the module): a pandas UDF that sleeps a known time per batch, one returning small and
one returning large rows, a pickled Python UDF, mapInArrow and mapInPandas; then the same queries with the session's
setting off, which must return the same rows and log nothing."""
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application
from cloudprofiler.analysis.report import render, tables
from cloudprofiler.analysis.report import udfs as udfs_section
from cloudprofiler.analysis.report.data import ReportData
from cloudprofiler.analysis.report.findings import findings
from cloudprofiler.analysis.report.stragglers import causes
from cloudprofiler.spark.jar import option_table
from cloudprofiler.spark.python_trace import FAIL_ENV
from cloudprofiler.spark.udf_profiles import PROFILER_KEY, function_seconds
from cloudprofiler import _udf_timing
from cloudprofiler.spark.udf_timing import PIPELINED_ENV, TIMED_KINDS
from cloudprofiler.udf_records import (ENDED, EXACT, IN_ENTER, IN_EXIT, KIND_BITS, OUT_ENTER, OUT_EXIT, SAMPLE_EVERY,
                                       TRANSFER, UNTIMED, WAIT)
from cloudprofiler.udf_records import PARTS as PART_NAMES

ROWS, PARTITIONS, BATCH_ROWS = 2000, 2, 500  # 2 tasks of 1000 rows: 2 Arrow batches each (maxRecordsPerBatch)
SLEEP_S, SLEEP_BATCHES = 0.2, 2  # the sleeping UDF's sleep per batch, and its batches per task
SMALL, LARGE = 8, 40_000  # characters of each row the sized UDFs return
# the pickled UDF: batches of 100 rows (PySpark's), past the first EXACT of a task timed by a sample only; the first
# row of each batch sleeps PICKLED_SLEEP_S (and adds the time it slept to an accumulator: on a loaded host a sleep
# overruns), the rest adds 1
PICKLED_ROWS, PICKLED_BATCHES, PICKLED_SLEEP_S = 20_000, 100, 0.01
# per task, the share of the worker's time past its setup and its wait for the first batch the function holds at
# least: nearly all, in the timed and in the untimed batches alike
PICKLED_FUNCTION_SHARE = 0.8
# the margins stated in the README: the function part holds the sleep and PySpark's Arrow <-> pandas conversions of
# a batch (Spark 4 converts inside the evaluation), at most this much more per task; the task holds the worker's
# time and the JVM's around it (the range, the worker's hand-over, the aggregation), at most this much more
FUNCTION_MARGIN_S, TASK_MARGIN_S = 0.1, 1.0
UDFS_KEY = "spark.cloudprofiler.udfs"
ROOT = Path(__file__).resolve().parent.parent
GROUPS = ("sleep", "small", "large", "large_in", "pickled", "arrow", "pandas", "source", "udtf", "rdd")
SOURCE = "sleepy_source"  # a Python data source of PARTITIONS partitions, each read sleeping SLEEP_S, then ROWS rows
# a Python UDTF lateral-joined with UDTF_ROWS ids in PARTITIONS partitions: each call sleeps SLEEP_S and yields
# UDTF_OUT rows
UDTF, UDTF_ROWS, UDTF_OUT = "Tens", 4, 10
# an RDD's map and filter over RDD_ROWS items in PARTITIONS partitions: the map sleeps RDD_SLEEP_S on every
# RDD_SLEEP_EVERY-th item (adding the time it slept to an accumulator), the filter keeps 3 items in 4
RDD_ROWS, RDD_SLEEP_EVERY, RDD_SLEEP_S = 20_000, 1000, 0.02
# the stragglers' job: 8 tasks on the 2 slots, the row SLEEPER's UDF call sleeping STRAGGLER_SLEEP_S (partition 5)
STRAGGLING_ROWS, STRAGGLING_PARTITIONS, SLEEPER, STRAGGLER_SLEEP_S = 800, 8, 550, 0.3


def _sleeps_once(column):
    def pass_through(v):
        if v == SLEEPER:
            import time

            time.sleep(STRAGGLER_SLEEP_S)
        return v

    return F.udf(pass_through, "long", useArrow=False)(column)


def _queries(spark, slept):
    """group -> a function that makes its query; `slept`: the accumulator of the pickled UDF's sleeps."""
    pause = SLEEP_S

    @F.pandas_udf("long")
    def sleepy(v: pd.Series) -> pd.Series:
        import time

        time.sleep(pause)
        return v

    def sized(n):
        def rows_of(v: pd.Series) -> pd.Series:
            return pd.Series(["x" * n] * len(v))

        rows_of.__name__ = f"rows_of_{n}"  # the name the worker unpickles
        return F.pandas_udf(rows_of, "string")

    def arrow_batches(batches):
        yield from batches

    @F.pandas_udf("long")
    def lengths(v: pd.Series) -> pd.Series:
        return v.str.len()

    def pandas_frames(frames):
        for frame in frames:
            yield frame.assign(id=frame["id"] + 1)

    pickled_pause = PICKLED_SLEEP_S

    def plus_one(v):
        if v % 100 == 0:  # the first row of its batch
            import time

            began = time.perf_counter()
            time.sleep(pickled_pause)
            slept.add(time.perf_counter() - began)
        return v + 1

    plus_one = F.udf(plus_one, "long", useArrow=False)

    every, rdd_pause = RDD_SLEEP_EVERY, RDD_SLEEP_S

    def slow_double(x):
        if x % every == 0:
            import time

            began = time.perf_counter()
            time.sleep(rdd_pause)
            slept.add(time.perf_counter() - began)
        return 2 * x

    def keep(x):
        return x % 8 != 0

    ids = spark.range(0, ROWS, 1, PARTITIONS)
    spark.dataSource.register(_sleepy_source())
    spark.udtf.register("tens", _tens())
    return {
        "sleep": lambda: ids.select(sleepy("id").alias("y")).agg(F.sum("y")),
        "small": lambda: ids.select(sized(SMALL)("id").alias("s")).agg(F.sum(F.length("s"))),
        "large": lambda: ids.select(sized(LARGE)("id").alias("s")).agg(F.sum(F.length("s"))),
        "large_in": lambda: ids.select(lengths(F.repeat(F.col("id").cast("string"), LARGE // 4)).alias("n")).agg(
            F.sum("n")),
        "pickled": lambda: spark.range(0, PICKLED_ROWS, 1, PARTITIONS).select(plus_one("id").alias("y")).agg(
            F.sum("y")),
        "arrow": lambda: ids.mapInArrow(arrow_batches, "id long").agg(F.sum("id")),
        "pandas": lambda: ids.mapInPandas(pandas_frames, "id long").agg(F.sum("id")),
        "source": lambda: spark.read.format(SOURCE).load().agg(F.sum("id")),
        "udtf": lambda: spark.sql(f"select sum(t.n) from range(0, {UDTF_ROWS}, 1, {PARTITIONS}) r, "
                                  "lateral tens(r.id) t"),
        # a list, not a range: PySpark makes a range's numbers in the workers, with no input
        "rdd": lambda: spark.sparkContext.parallelize(list(range(RDD_ROWS)), PARTITIONS).map(slow_double).filter(keep),
    }


def _tens():
    """The UDTF (made here, so that the workers get it by value, not by module)."""
    pause, out = SLEEP_S, UDTF_OUT

    class Tens:
        def eval(self, start: int):
            import time

            time.sleep(pause)
            for n in range(start, start + out):
                yield (n,)

    Tens.__name__ = Tens.__qualname__ = UDTF
    return F.udtf(Tens, returnType="n long")


def _sleepy_source():
    """The SOURCE data source (its classes made here, so that the workers get them by value, not by module)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    pause, rows = SLEEP_S, ROWS // PARTITIONS

    class SleepyReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition):
            import time

            time.sleep(pause)
            for i in range(rows):
                yield (partition.value * rows + i,)

    class Sleepy(DataSource):
        @classmethod
        def name(cls):
            return SOURCE

        def schema(self):
            return "id long"

        def reader(self, schema):
            return SleepyReader()

    return Sleepy


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(the application's analysis, each group's result with the setting on, and with it off, the seconds Spark's
    UDF profiler measured per UDF, and the seconds the pickled UDF slept with the setting on)."""
    base = tmp_path_factory.mktemp("udfs")
    spark = (cps.builder(log_dir=str(base / "logs"), local_dir=str(base / "local"), calibration_enabled=False,
                         udfs=True)
             .master(f"local[{PARTITIONS}]").config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS)).getOrCreate())
    sc = spark.sparkContext
    # first of all, while no Python worker runs: the first task on each slot waits for its worker to start
    sc.setJobGroup("stragglers", "one partition's UDF sleeps, the first two tasks start the workers")
    straggling = spark.range(0, STRAGGLING_ROWS, 1, STRAGGLING_PARTITIONS).select(_sleeps_once("id").alias("y"))
    assert straggling.agg(F.sum("y")).first()[0] == sum(range(STRAGGLING_ROWS))
    slept = sc.accumulator(0.0)
    queries = _queries(spark, slept)
    sc.setJobGroup("warm-up", "the workers start and import pandas and pyarrow")
    for group, query in queries.items():
        if group not in ("pickled", "rdd"):  # the stragglers' job ran pickled UDFs already
            query().collect()
    on, off, slept_in = {}, {}, {}
    for group, query in queries.items():
        sc.setJobGroup(group, group)
        if group == "sleep":  # Spark's own UDF profiler too, on this query only
            spark.conf.set(PROFILER_KEY, "perf")
        before = slept.value
        on[group] = query().collect()
        slept_in[group] = slept.value - before  # the task's updates come with its end, before its job's
        spark.conf.unset(PROFILER_KEY)
    sc.environment[FAIL_ENV] = "udf-timing"  # the UDFs made now run in workers (and a daemon) with this variable
    faulty = _queries(spark, slept)["arrow"]()  # its UDF's function, with the environment, is made with the DataFrame
    del sc.environment[FAIL_ENV]
    sc.setJobGroup("fault", "the timing fails as it starts")
    on["fault"] = faulty.collect()
    spark.conf.set(UDFS_KEY, "false")
    sc.setLocalProperty(UDFS_KEY, "false")  # an RDD's jobs: no SQL execution carries the session's setting
    for group, query in queries.items():
        sc.setJobGroup(f"{group}-off", group)
        off[group] = query().collect()
    app_id = sc.applicationId
    profiled = function_seconds(spark)  # as cps.report(spark) takes them: they live in this session only
    spark.stop()
    return open_application(str(base / "logs" / app_id)), on, off, profiled, slept_in


@pytest.fixture(scope="module")
def udfs(run):
    """udfs() of each job group, as pandas."""
    frame = run[0].udfs(job_group=list(GROUPS)).toPandas()
    tasks = run[0].tasks(job_group=list(GROUPS)).select("task_attempt_id", "job_group").toPandas()
    frame = frame.merge(tasks, on="task_attempt_id")
    return {group: frame[frame["job_group"] == group] for group in GROUPS}


PARTS = [f"{p}_s" for p in PART_NAMES]


def test_the_analysis_in_the_profiled_process_times_none_of_its_own_functions(tmp_path):
    """In a process whose first session timed its UDFs, the analysis's session (the same JVM, started with that
    session's settings as system properties) runs PySpark's own daemon: its Python workers (udfs() runs some) log
    nothing, and the log folder holds the profiled application's folder only (before: a file of UDF records per
    analysis task there, beside it)."""
    logs = tmp_path / "logs"
    script = f"""
import json, os
import cloudprofiler.spark as cps
from pyspark.sql import functions as F
from cloudprofiler.analysis import open_application
spark = (cps.builder(log_dir={str(logs)!r}, local_dir={str(tmp_path / "local")!r}, calibration_enabled=False,
                     udfs=True).master("local[1]").config("spark.ui.enabled", "false").getOrCreate())
spark.range(0, 100, 1, 1).select(F.udf(lambda v: v + 1, "long", useArrow=False)("id")).collect()
app_id = spark.sparkContext.applicationId
spark.stop()
print(json.dumps({{"app": app_id, "udfs": open_application(f"{logs}/{{app_id}}").udfs().count()}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["udfs"] == 1  # the profiled task's UDF, timed
    assert sorted(p.name for p in logs.iterdir()) == [seen["app"]]


def test_a_pandas_udf_sleeping_per_batch_shows_its_sleep_in_the_function_and_the_task_time_in_the_parts(udfs):
    rows = udfs["sleep"]
    assert len(rows) == PARTITIONS and (rows["udf"] == "sleepy").all() and (rows["kind"] == "pandas UDF").all()
    assert (rows["batches"] == SLEEP_BATCHES).all() and (rows["rows"] == ROWS // PARTITIONS).all(), rows
    assert (rows["out_rows"] == ROWS // PARTITIONS).all() and rows["complete"].all() and not rows["failed"].any()
    slept = SLEEP_S * SLEEP_BATCHES
    for row in rows.itertuples():
        assert slept <= row.function_s <= slept + FUNCTION_MARGIN_S, row
        others = row.worker_s - row.function_s
        assert others < FUNCTION_MARGIN_S, row
        assert abs(sum(getattr(row, p) for p in PARTS) - row.worker_s) < 1e-6
        # the task's own TSC duration, measured by the executor: the worker's time and the JVM's around it
        assert row.worker_s <= row.task_s <= row.worker_s + TASK_MARGIN_S, row


def test_a_python_data_sources_reads_are_timed_under_its_name(udfs):
    """Known answer: PySpark reads a Python data source as a mapInArrow of its partitions; each task's read shows under
    the source's name and kind, its one input batch (the partition) and its rows out, and the sleep of its read in the
    function part."""
    rows = udfs["source"]
    assert len(rows) == PARTITIONS and set(rows["udf"]) == {SOURCE}, rows
    assert set(rows["kind"]) == {"Python data source"} and (rows["batches"] == 1).all()
    assert (rows["out_rows"] == ROWS // PARTITIONS).all() and rows["complete"].all()
    assert (rows["function_s"] >= SLEEP_S).all() and (rows["function_s"] <= SLEEP_S + FUNCTION_MARGIN_S).all(), rows
    assert rows[PARTS].sum(axis=1).to_numpy() == pytest.approx(rows["worker_s"].to_numpy(), abs=1e-6)


def test_a_python_udtfs_calls_are_timed_under_its_class_name(udfs):
    """Known answer: each task evaluates the UDTF on its UDTF_ROWS / PARTITIONS ids, each call sleeping SLEEP_S and
    yielding UDTF_OUT rows: the function part holds the sleeps, and the rows in and out are the calls and their rows."""
    rows = udfs["udtf"]
    calls = UDTF_ROWS // PARTITIONS
    assert len(rows) == PARTITIONS and set(rows["udf"]) == {UDTF}, rows
    assert set(rows["kind"]) <= {"Python UDTF", "Arrow Python UDTF"} and rows["complete"].all(), rows
    assert (rows["rows"] == calls).all() and (rows["out_rows"] == calls * UDTF_OUT).all(), rows
    assert (rows["function_s"] >= calls * SLEEP_S).all(), rows
    assert (rows["function_s"] <= calls * SLEEP_S + FUNCTION_MARGIN_S).all(), rows
    assert rows[PARTS].sum(axis=1).to_numpy() == pytest.approx(rows["worker_s"].to_numpy(), abs=1e-6)


def test_serialization_grows_with_the_size_of_the_rows_returned(udfs):
    small, large = udfs["small"], udfs["large"]
    assert (small["udf"] == f"rows_of_{SMALL}").all() and (large["udf"] == f"rows_of_{LARGE}").all()
    assert (large["out_rows"] == ROWS // PARTITIONS).all()
    # 1000 rows of 40 kB: 40 MB written back per task, against 8 kB
    assert large["serialize_s"].sum() > 10 * small["serialize_s"].sum(), (small[PARTS], large[PARTS])
    assert large["serialize_s"].min() > small["serialize_s"].max()


def test_the_transfer_grows_with_the_size_of_the_rows_sent(udfs):
    """Batches of 500 rows of about 10 kB (5 MB) come over the socket in many reads, the worker waiting for the JVM's
    writes; batches of 500 numbers (4 kB) in one."""
    small, large = udfs["sleep"], udfs["large_in"]
    assert (large["udf"] == "lengths").all() and (large["rows"] == ROWS // PARTITIONS).all(), large
    assert large["transfer_s"].sum() > 10 * small["transfer_s"].sum(), (small[PARTS], large[PARTS])
    assert (large[PARTS].sum(axis=1) - large["worker_s"]).abs().max() < 1e-6


def test_a_pickled_python_udf_is_timed_per_batch_of_rows_and_past_the_first_ones_by_a_sample(run, udfs):
    rows = udfs["pickled"]
    assert len(rows) == PARTITIONS and (rows["kind"] == "Python UDF").all() and (rows["udf"] == "plus_one").all()
    # the JVM sends batches of 100 pickled rows; the worker packs its answers by 100 (PYTHON_UDF_BATCH_SIZE)
    per_task = PICKLED_ROWS // PARTITIONS
    assert (rows["rows"] == per_task).all() and (rows["out_rows"] == per_task).all(), rows
    assert (rows["batches"] == PICKLED_BATCHES).all() and (rows["out_batches"] == PICKLED_BATCHES).all()
    assert rows["complete"].all() and not rows["failed"].any()
    # the first EXACT batches timed, then about 1 in SAMPLE_EVERY: the rest split in the timed ones' proportions
    assert ((rows["timed_batches"] >= EXACT) & (rows["timed_batches"] < PICKLED_BATCHES)).all(), rows
    slept = run[4]["pickled"]
    assert slept >= PICKLED_SLEEP_S * PICKLED_BATCHES * PARTITIONS
    # the function part holds the sleeps of every batch, timed or not, and the rows' own time
    assert slept - FUNCTION_MARGIN_S <= rows["function_s"].sum() <= slept + FUNCTION_MARGIN_S * PARTITIONS, rows
    for row in rows.itertuples():
        assert abs(sum(getattr(row, p) for p in PARTS) - row.worker_s) < 1e-6
        assert row.function_s >= PICKLED_FUNCTION_SHARE * (row.worker_s - row.setup_s - row.first_wait_s), row


def test_an_rdds_functions_are_timed_under_the_users_names_per_pickled_batch(run, udfs):
    """Known answer: the tasks map RDD_ROWS items, sleeping on every RDD_SLEEP_EVERY-th, and keep 3 in 4: the map's
    and the filter's names, their items in and out exactly, and the sleeps in the function part."""
    rows = udfs["rdd"]
    assert len(rows) == PARTITIONS and set(rows["kind"]) == {"RDD function"}, rows
    assert all(set(udf.split(", ")) == {"slow_double", "keep"} for udf in rows["udf"]), rows
    # PySpark slices the list's pickled batches of 1,024 items: each task keeps 3 in 4 of those it got
    assert rows["rows"].sum() == RDD_ROWS and (rows["out_rows"] == rows["rows"] * 3 // 4).all(), rows
    assert rows["complete"].all() and not rows["failed"].any() and (rows["timed_batches"] >= 1).all()
    slept = run[4]["rdd"]
    assert slept >= RDD_SLEEP_S * RDD_ROWS / RDD_SLEEP_EVERY
    assert slept - FUNCTION_MARGIN_S <= rows["function_s"].sum() <= slept + FUNCTION_MARGIN_S * PARTITIONS, rows
    assert rows[PARTS].sum(axis=1).to_numpy() == pytest.approx(rows["worker_s"].to_numpy(), abs=1e-6)


@pytest.mark.parametrize("group, kind", [("arrow", "mapInArrow"), ("pandas", "mapInPandas")])
def test_map_in_arrow_and_in_pandas_are_timed_per_arrow_batch(udfs, group, kind):
    rows = udfs[group]
    assert len(rows) == PARTITIONS and (rows["kind"] == kind).all(), rows
    assert (rows["batches"] == ROWS // PARTITIONS // BATCH_ROWS).all() and (rows["rows"] == ROWS // PARTITIONS).all()
    assert (rows["out_rows"] == ROWS // PARTITIONS).all() and rows["complete"].all()
    assert (rows[PARTS] >= 0).all().all()


def test_a_failing_timing_never_fails_the_udf_and_turns_itself_off(run):
    app, on = run[:2]
    assert on["fault"] == on["arrow"]
    assert app.tasks(job_group="fault").count() >= PARTITIONS and app.udfs(job_group="fault").count() == 0


def test_the_results_are_the_same_with_the_setting_on_and_off(run):
    on, off = run[1:3]
    assert {g: on[g] for g in GROUPS} == off
    assert on["sleep"][0][0] == sum(range(ROWS)) and on["large"][0][0] == ROWS * LARGE
    assert on["pickled"][0][0] == sum(range(1, PICKLED_ROWS + 1))


def test_a_session_with_the_setting_off_logs_nothing(run):
    app = run[0]
    groups = [f"{g}-off" for g in GROUPS]
    assert app.tasks(job_group=groups).count() >= 2 * len(GROUPS)  # the jobs ran
    assert app.udfs(job_group=groups).count() == 0


def test_the_helper_sets_the_daemon_and_worker_only_when_asked_and_leaves_the_application_s_own():
    daemon_key, worker_key = option_table()["python_module_keys"]
    ours = {daemon_key: "cloudprofiler_udfs", worker_key: "cloudprofiler_udfs.worker"}
    assert {k: cps.spark_conf(udfs=True)[k] for k in ours} == ours
    for conf in (cps.spark_conf(), cps.spark_conf(udfs=False)):
        assert not ours.keys() & conf.keys()
    for key, other in ((daemon_key, worker_key), (worker_key, daemon_key)):
        builder = SparkSession.Builder().config(key, "mytool.module")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            cps.configure(builder, udfs=True)
        assert builder._options[key] == "mytool.module" and other not in builder._options
        assert any(f"{key}=mytool.module" in str(w.message) and "not timed" in str(w.message) for w in said)


def test_a_bad_value_is_refused_naming_it():
    with pytest.raises(cp.InvalidArgumentError, match=f"{UDFS_KEY}=yes is invalid: expected true or false"):
        cps.spark_conf(udfs="yes")


def test_each_straggler_is_explained_by_what_was_measured_of_it(run):
    """The partition whose UDF slept, by its function's time; the first task on each slot, by its worker's start
    (the issue's case: the report used to name the first task for its time alone and list the sleeper among "more
    stragglers"); every straggler in the report's table with its words."""
    app = run[0]
    rows = {r.partition: r for r in app.stragglers(job_group="stragglers").toPandas().itertuples()}
    sleeper = rows[SLEEPER * STRAGGLING_PARTITIONS // STRAGGLING_ROWS]
    assert sleeper.udf == "pass_through" and sleeper.udf_function_s >= STRAGGLER_SLEEP_S
    assert any(c.startswith("the Python UDF pass_through 3") for c in causes(sleeper)), causes(sleeper)
    assert sleeper.off_cpu_ms >= STRAGGLER_SLEEP_S * 1e3  # the executor's thread waited for its worker
    starters = [r for p, r in rows.items() if p in (0, 1)]  # a slot's first task: its worker was started for it
    assert starters, rows
    for row in starters:
        assert row.udf_start_s >= 1.5 * row.udf_start_median_s, row
        assert any(c.startswith("its Python worker began ") for c in causes(row)), causes(row)
    later = app.udfs(job_group="stragglers").toPandas()
    assert (later[later["partition"] >= 2]["start_s"] < min(r.udf_start_s for r in starters)).all(), later
    data = ReportData(summary={}, stragglers=app.stragglers(job_group="stragglers").toPandas())
    table = tables.stragglers(data)
    assert sorted(int(r[1].text) for r in table.rows) == sorted(rows) and all(r[-1].text != "-" for r in table.rows)


def test_the_report_says_in_words_where_each_udf_s_time_went(run, tmp_path):
    app = run[0]
    data = ReportData(summary=dict(app.summary()))
    udfs_section.gather(app, data)
    # the UDFs with the most worker time (those that sleep or write large rows among them); the cheapest of this
    # application's 12 or so, whose workers' start-up decides their order, may be left out
    every = app.udfs().groupBy("udf", "kind").agg(F.sum("worker_s").alias("worker_s")).toPandas()
    is_shown = every.set_index(["udf", "kind"]).index.isin(data.udfs.set_index(["udf", "kind"]).index)
    shown, left_out = every[is_shown], every[~is_shown]
    assert len(shown) == len(data.udfs) == min(udfs_section.UDFS_SHOWN, len(every)), (every, data.udfs)
    assert left_out.empty or shown["worker_s"].min() >= left_out["worker_s"].max(), (shown, left_out)
    assert {"sleepy", f"rows_of_{LARGE}"} <= set(data.udfs["udf"]), data.udfs
    found = [f.text for f in findings(data) if f.kind == "python_udf"]
    sleepy = [text for text in found if "`sleepy`" in text]
    assert len(sleepy) == 1 and re.match(r"The pandas UDF `sleepy` spends \d+% of its workers' time \(.* over \d+ "
                                         r"tasks, \d+ batches\) .*", sleepy[0]) and "in the function" in sleepy[0]
    # an RDD's batches: the list's pickled batches of 1,024 items in, its serializer's auto-sized batches out
    [rdd] = [udfs_section.sentence(row) for row in data.udfs.itertuples() if row.kind == "RDD function"]
    assert re.match(r"The RDD function `(slow_double, keep|keep, slow_double)` spends .* over 2 tasks, 20 batches in, "
                    r"\d+ out\) ", rdd), rdd
    page = render(data, tmp_path / "report.html", quiet=True).read_text()
    assert '<section id="udfs"><h2>Python UDFs</h2>' in page and 'href="#udfs"' in page and "sleepy" in page
    assert "Spark&#x27;s UDF profiler" not in page  # none given


def test_spark_s_own_python_metrics_sit_beside_the_parts_of_the_same_tasks(run, udfs, tmp_path):
    """Spark 4's SQL metrics of its Python nodes, per task in the task table: for the sleeping UDF's tasks, the time
    executing Python code holds the sleeps and is the function part's within FUNCTION_MARGIN_S (Spark counts whole
    milliseconds; 1 to 2 ms apart on an idle host), and the time its JVM ran the workers holds the worker's time;
    the report says both beside the parts."""
    app = run[0]
    tasks = app.tasks(job_group="sleep").toPandas().set_index("task_attempt_id")
    slept = SLEEP_S * SLEEP_BATCHES
    for row in udfs["sleep"].itertuples():
        spark = tasks.loc[row.task_attempt_id]
        assert slept <= spark.python_processing_ms / 1e3 + 1e-3 <= slept + FUNCTION_MARGIN_S, spark
        assert abs(spark.python_processing_ms / 1e3 - row.function_s) <= FUNCTION_MARGIN_S, (spark, row)
        assert spark.python_total_ms / 1e3 >= row.worker_s - 0.01, (spark, row)
    none = app.tasks(job_group="warm-up").where("python_total_ms is null").count()
    assert none >= 1  # the aggregation's tasks ran no Python
    data = ReportData(summary=dict(app.summary()))
    udfs_section.gather(app, data)
    sleepy = [f.text for f in findings(data) if f.kind == "python_udf" and "`sleepy`" in f.text][0]
    assert re.search(r"Spark's own metrics of its tasks: .+ running Python workers, .+ of it executing Python code "
                     r"\(the function part here: .+\)", sleepy), sleepy
    page = render(data, tmp_path / "report.html", quiet=True).read_text()
    assert "Spark: running workers (executing code)" in page


def test_spark_s_own_udf_profiler_is_shown_beside_the_parts(run, udfs, tmp_path):
    """Spark 4's profiler, on for the sleeping UDF's query only: its time in `sleepy` holds the sleeps, as the
    function part of that query's tasks does; the report shows it beside the parts, and only for that UDF."""
    app, profiled = run[0], run[3]
    slept = SLEEP_S * SLEEP_BATCHES * PARTITIONS
    assert slept <= profiled["sleepy"] <= slept + FUNCTION_MARGIN_S * PARTITIONS, profiled
    ours = udfs["sleep"]["function_s"].sum()
    assert abs(ours - profiled["sleepy"]) <= FUNCTION_MARGIN_S * PARTITIONS, (ours, profiled)
    data = ReportData(summary=dict(app.summary()))
    udfs_section.gather(app, data)
    udfs_section.beside_spark_profiler(data, profiled)
    row = data.udfs.set_index("udf").loc["sleepy"]
    assert row["spark_profiler_s"] == profiled["sleepy"]
    assert data.udfs.set_index("udf")["spark_profiler_s"].drop("sleepy").isna().all()
    (sentence,) = [f.text for f in findings(data) if "`sleepy`" in f.text]
    assert "; Spark's UDF profiler measured " in sentence and " in its function, against " in sentence
    page = render(data, tmp_path / "report.html", quiet=True).read_text()
    assert "<th>Spark&#x27;s UDF profiler</th>" in page


@pytest.mark.parametrize("version, daemon, pipelined", [("3.5", True, False), ("3.5", False, False),
                                                        ("4", False, False), ("4", True, True)],
                         ids=["spark-3.5", "spark-3.5-no-daemon", "spark-4-no-daemon", "spark-4-pipelined"])
def test_the_same_batches_are_timed_on_spark_3_5_without_the_daemon_and_with_the_pipelined_reader(
        tmp_path, version, daemon, pipelined):
    """Spark 3.5, with PySpark's daemon (the helper's daemon module times its workers) and without it (the JVM starts
    each worker with the helper's worker module, spark.python.use.daemon=false), Spark 4 without it, and Spark 4's
    pipelined reader (its thread reads the input ahead of the function): the same batches, rows and sleep as the
    module's session above."""
    python = ROOT / "build" / "pyspark-3.5" / "bin" / "python" if version == "3.5" else Path(sys.executable)
    if not python.exists():
        pytest.skip(f"no pyspark 3.5 environment at {python.parent.parent}: `make build` creates it")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", PIPELINED_ENV))}  # its own Python
    result = subprocess.run([str(python), str(Path(__file__).with_name("spark_version_udfs.py")), str(tmp_path),
                             *([] if daemon else ["no-daemon"])], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path, env={**env, **({PIPELINED_ENV: "1"} if pipelined else {})})
    assert result.returncode == 0, result.stderr[-4000:]
    assert "are not timed" not in result.stderr, result.stderr[-4000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    udtf_sum = sum(n for start in range(4) for n in range(start, start + 10))
    arrow = version != "3.5"  # applyInArrow, grouped and cogrouped: Spark 4's
    assert seen["pyspark"].startswith(f"{version}.") and seen["sums"] == [
        1999000, 2001000, 1999000, udtf_sum, 2001000, 1999000, 3998.0, 1999000.0, 1999000 + 499500,
        *([1999000, 1999000 + 499500] if arrow else [])], seen
    kinds = seen["kinds"]
    udtf_kind = "Python UDTF" if version == "3.5" else "Arrow Python UDTF"  # each version's default UDTF
    grouped_kinds = [("applyInPandas", 2000, 2000), ("pandas aggregate UDF", 2000, 4),
                     ("pandas window UDF", 2000, 2000), ("cogrouped applyInPandas", 3000, 3000)]
    grouped_kinds += [("applyInArrow", 2000, 2000), ("cogrouped applyInArrow", 3000, 3000)] if arrow else []
    assert set(kinds) == {"pandas UDF", "Python UDF", "mapInArrow", udtf_kind, "RDD function",
                          *(kind for kind, _, _ in grouped_kinds)}, seen
    # the RDD's map, then its sum's mapPartitions (one number a task), pipelined into one function
    rdd = kinds["RDD function"]
    assert rdd["tasks"] == 2 and rdd["rows"] == 2000 and rdd["out_rows"] == 2 and rdd["complete"] == 1, seen
    # the UDTF: its 4 calls (2 a task), their 10 rows each
    udtf = kinds[udtf_kind]
    assert udtf["tasks"] == 2 and udtf["rows"] == 4 and udtf["out_rows"] == 40 and udtf["complete"] == 1, seen
    # the grouped maps and the pandas aggregate UDF: their 4 groups of 500 rows, one Arrow batch each (Spark 4 reads a
    # group's batches as the function asks for them), in the shuffle's 2 partitions (or 1, which adaptive execution may
    # make of them), each sleeping 0.1 s in the function; the aggregate a row out per group, over a window a row out
    # per row; the cogrouped maps their 4 keys' rows of both sides (500 and 250 each) in one item each
    for kind, rows, out_rows in grouped_kinds:
        grouped = kinds[kind]
        assert grouped["tasks"] in (1, 2) and grouped["batches"] == 4 and grouped["complete"] == 1, (kind, seen)
        assert grouped["rows"] == rows and grouped["out_rows"] == out_rows, (kind, seen)
        assert 0.4 <= grouped["function_s"] <= 0.4 + 0.1 * grouped["tasks"], (kind, seen)
    for kind, batches in (("pandas UDF", 4), ("Python UDF", 20), ("mapInArrow", 4)):
        assert kinds[kind]["tasks"] == 2 and kinds[kind]["batches"] == batches, (kind, seen)
        assert kinds[kind]["rows"] == kinds[kind]["out_rows"] == 2000 and kinds[kind]["complete"] == 1, (kind, seen)
    # 0.1 s per batch, 2 batches per task (the same margin as above: Spark 3.5 converts Arrow to pandas in reading)
    assert 0.2 <= kinds["pandas UDF"]["min_function_s"] <= kinds["pandas UDF"]["max_function_s"] <= 0.2 + 0.1, seen
    # the UDFs' reads: from the socket, with the JVM's wait and transfer apart; from the pipelined reader's queue, the
    # wait for what it had not read yet, and no wait or transfer apart
    for kind in set(kinds) - {"RDD function"}:
        assert kinds[kind]["read_s"] > 0 and (kinds[kind]["waited_s"] == 0) == pipelined, (kind, seen)


def test_the_helper_leaves_pyspark_s_daemon_to_local_workers_whose_python_lacks_ours(monkeypatch):
    python = "/usr/bin/python3"  # the system's, without this package
    if not Path(python).exists():
        pytest.skip(f"no {python}")
    monkeypatch.setenv("PYSPARK_PYTHON", python)
    daemon_key = option_table()["python_module_keys"][0]
    builder = SparkSession.Builder().master("local[1]")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        cps.configure(builder, udfs=True)
    assert daemon_key not in builder._options
    assert any(f"({python}, PYSPARK_PYTHON) cannot import cloudprofiler_udfs" in str(w.message) for w in said), said


def _events(logged: list) -> list:
    """(kind, value) of each record but TRANSFER (a read off the CPU for a moment logs one)."""
    kinds = [(r & ((1 << KIND_BITS) - 1), r >> KIND_BITS) for r in logged]
    return [(kind, value) for kind, value in kinds if kind != TRANSFER]


def _pipeline(timing, batches):
    """A UDF's function doubling each input batch between two counting iterators, as the timing places them."""
    inputs = _udf_timing.counted(batches, len, timing, False)
    return inputs, _udf_timing.counted((batch * 2 for batch in inputs), len, timing, True)


def test_the_counting_iterators_count_every_batch_and_log_only_the_timed_cycles():
    logged, failures = [], []
    # the first 2 output batches timed; then 1 in a million: none of the rest (the seed's first draw skips 10^5)
    timing = _udf_timing.timing(logged.append, failures.append, 0, 2, 10**6, KIND_BITS, TIMED_KINDS, ENDED)
    inputs, outputs = _pipeline(timing, [[1, 2], [], [3, 4, 5], [6]])
    assert list(outputs) == [[1, 2, 1, 2], [], [3, 4, 5, 3, 4, 5], [6, 6]]
    assert list(outputs) == []  # it ended once and stays ended
    assert (inputs.batches, inputs.rows, outputs.batches, outputs.rows) == (4, 6, 4, 12)
    assert _events(logged) == [(OUT_ENTER, 0), (IN_ENTER, 0), (IN_EXIT, 2), (OUT_EXIT, 4),
                               (OUT_ENTER, 1), (IN_ENTER, 1), (IN_EXIT, 0), (OUT_EXIT, 0),
                               (UNTIMED, 0)]  # nothing around the untimed batches
    assert timing.next > 10**4 and not timing.timed and not failures

    logged.clear()
    timing = _udf_timing.timing(logged.append, failures.append, 0, 16, 64, KIND_BITS, TIMED_KINDS, ENDED)
    inputs, outputs = _pipeline(timing, iter([[1, 2, 3]]))
    assert list(outputs) == [[1, 2, 3] * 2] and (inputs.batches, inputs.rows) == (1, 3)
    assert _events(logged) == [(OUT_ENTER, 0), (IN_ENTER, 0), (IN_EXIT, 3), (OUT_EXIT, 6),
                               (OUT_ENTER, 1), (IN_ENTER, 1), (IN_EXIT, ENDED), (OUT_EXIT, ENDED)]  # the ends

    def failing():
        yield [1]
        raise ValueError("the UDF's own error")

    inputs, outputs = _pipeline(timing, failing())
    with pytest.raises(ValueError, match="the UDF's own error"):  # the function's error, as it raised it
        list(outputs)
    assert (inputs.batches, inputs.rows) == (1, 1)
    with pytest.raises(TypeError, match="rows_of"):
        _udf_timing.counted([], 3, timing, False)
    with pytest.raises(ValueError, match="sample_every 1 >= 2"):
        _udf_timing.timing(print, print, 0, 16, 1, KIND_BITS, TIMED_KINDS, ENDED)


def test_the_timed_cycles_are_the_first_exact_then_one_in_sample_every_drawn_again_alike_from_the_same_seed():
    def timed(seed: int, batches: int = 64_000) -> list:
        logged = []
        timing = _udf_timing.timing(logged.append, print, seed, EXACT, SAMPLE_EVERY, KIND_BITS, TIMED_KINDS, ENDED)
        list(_pipeline(timing, ([i] for i in range(batches)))[1])
        return [value for kind, value in _events(logged) if kind == OUT_ENTER]

    first = timed(7)
    assert first[:EXACT] == list(range(EXACT)) and first == sorted(set(first))
    sampled = len(first) - EXACT  # binomial: 1000 expected, its standard deviation 31
    assert 1000 - 5 * 31 < sampled < 1000 + 5 * 31, sampled
    gaps = [b - a for a, b in zip(first[EXACT:], first[EXACT + 1:])]  # geometric: as many gaps of 1 as 1/64 says
    assert 1 / SAMPLE_EVERY / 2 < sum(g == 1 for g in gaps) / len(gaps) < 2 / SAMPLE_EVERY, gaps
    assert timed(7) == first and timed(8) != first


def test_a_failure_to_log_stops_the_timing_once_and_never_the_udf():
    calls, failures = [], []

    def log(record):
        calls.append(record)
        if len(calls) == 3:
            raise OSError("the channel is gone")

    timing = _udf_timing.timing(log, failures.append, 0, 16, 64, KIND_BITS, TIMED_KINDS, ENDED)

    def peek(n):
        raise OSError("the stream is closed")  # the deserializer's own read meets it

    timing.peek = peek
    inputs, outputs = _pipeline(timing, [[1], [2, 3]])
    assert list(outputs) == [[1, 1], [2, 3, 2, 3]] and outputs.rows == 6
    assert len(calls) == 3 and timing.off  # nothing logged after the failure
    assert [str(f) for f in failures] == ["the channel is gone"] and timing.peek is None


def test_a_timed_cycle_s_wait_is_the_time_until_its_input_batch_s_first_bytes_arrive_and_then_the_transfer():
    """Known answer, without Spark: PySpark's own pickled batches written on a socket by a thread that sleeps
    JVM_SLEEP_S before each of 3 batches and JVM_WRITE_S between its two halves, read by a task whose cycles are all
    timed (the first EXACT)."""
    import io
    import socket
    import threading
    import time

    from pyspark.serializers import BatchedSerializer, CPickleSerializer

    from cloudprofiler.spark.udf_timing import Task

    class Records:
        def __init__(self):
            self.ids = []
            self.log = self.ids.append

        def close(self):
            pass

    batches = [[(i,) for i in range(b * 100, b * 100 + 100)] for b in range(3)]

    def jvm(sock):
        """Each batch: JVM_SLEEP_S computing it, then its first half written, JVM_WRITE_S, the rest."""
        with sock, sock.makefile("wb") as out:
            for batch in batches:
                time.sleep(JVM_SLEEP_S)
                payload = io.BytesIO()
                BatchedSerializer(CPickleSerializer(), 100).dump_stream(iter(batch), payload)
                half = len(payload.getvalue()) // 2
                out.write(payload.getvalue()[:half])
                out.flush()
                time.sleep(JVM_WRITE_S)
                out.write(payload.getvalue()[half:])
                out.flush()

    ours, theirs = socket.socketpair()
    writer = threading.Thread(target=jvm, args=(theirs,))
    writer.start()
    records = Records()
    serializer = BatchedSerializer(CPickleSerializer(), 100)
    func, _, deserializer, serializer = Task(100, 0, records).wrap(
        lambda split, rows: (row[0] + 1 for row in rows), None, serializer, serializer)
    with ours, ours.makefile("rb") as stream:
        out = io.BytesIO()
        serializer.dump_stream(func(0, deserializer.load_stream(stream)), out)
    writer.join()
    kinds = [(r & ((1 << KIND_BITS) - 1), r >> KIND_BITS) for r in records.ids]
    waits = [value / 1e9 for kind, value in kinds if kind == WAIT]
    assert [value for kind, value in kinds if kind == IN_EXIT] == [100, 100, 100, ENDED]
    # each wait is the writer's sleep less what the reader did since the batch before (a few ms; more on a loaded
    # host, which may also wake the reader late)
    assert len(waits) >= 3 and all(JVM_SLEEP_S / 2 <= w <= 3 * JVM_SLEEP_S for w in waits[:3]), waits
    assert 2.5 * JVM_SLEEP_S <= sum(waits) <= 6 * JVM_SLEEP_S, waits
    # the rest of each batch came JVM_WRITE_S after its first bytes: the read's time off the CPU (a loaded host adds
    # its own; the reader woke by the first bytes may have read them before the rest was written)
    transfers = [value / 1e9 for kind, value in kinds if kind == TRANSFER]
    assert len(transfers) >= 3, kinds
    assert all(JVM_WRITE_S * 0.8 <= t <= 3 * JVM_WRITE_S for t in sorted(transfers)[-3:]), transfers
    assert sum(t for t in transfers if t < JVM_WRITE_S * 0.8) < 0.01, transfers  # the other reads: no transfer


JVM_SLEEP_S = 0.1  # the simulated JVM's time to compute each batch
JVM_WRITE_S = 0.05  # and to write the second half of its bytes
