"""operators() and the report's Queries section held to known answers: a real local application with operator
timing on (one session for every query), a filter that keeps one row in four, a Python UDF that sleeps a known
time per row, a query whose partition 2 holds twenty times the rows of the others, a streaming query whose UDF
sleeps from a known micro-batch on; then the analysis and the report of its folder."""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import functions as F

import browser
import cloudprofiler.spark as cps
from cloudprofiler import tables
from cloudprofiler.analysis import open_application
from cloudprofiler.analysis.operator_hops import row_channels, sourced_probes
from cloudprofiler.analysis.reader import TASK_METRICS
from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
from cloudprofiler.harness.maxtput import free_port_base
from cloudprofiler.harness.standalone import free_port, spark_class
from cloudprofiler.harness.trial import stop_query
from cloudprofiler.spark import read_generator
from cloudprofiler.analysis.report import format as fmt
from cloudprofiler.analysis.report import report as write_report
from conftest import assert_tables_as_declared

N = 400_000  # rows of the filter and skew queries' range, 4 partitions
UDF_ROWS, UDF_PARTITIONS, SLEEP_S = 200, 2, 0.015
UDF_DESCRIPTION = "a Python UDF sleeping 15 ms per row"
SKEWED_PARTITION = 2  # range(0, N, 1, 4)'s partition 2 holds ids [N/2, 3N/4): the skew query keeps all of them
STREAM_NAME, STREAM_BATCHES, STREAM_ROWS, SLOWED_BATCH, STREAM_SLEEP_S = "slowed", 5, 200, 3, 0.01
# 5 minutes before this module's import: older than any batch's lag, younger than the machine's TSC count (an event
# older than the machine's start is not timed from its event time)
EVENTS_FROM_MS = int(time.time() * 1000) - 300_000
GENERATED_NAME, GENERATED_RATE, GENERATED_S = "generated", 20_000, 3
# the slowed query's files again, 3 a batch (2 batches), read twice and joined by value past their watermarks
SHUFFLED_NAME, SHUFFLED_FILES = "joined", (3, 2)
# the slowed query's files again, SHUFFLED_FILES a batch, deduplicated, then a watermark over the deduplication
DEDUPED_NAME = "deduplicated"
# the slowed query's files again, SHUFFLED_FILES a batch, counted per WINDOW (2 s long, one every second: each row in
# two) and key (append mode, the watermark right at the newest event time), then a filter on the counts
WINDOWED_NAME, WINDOW = "windowed", ("2 seconds", "1 second")
# a chain of operators that keep a row's identity: the range's rows, a third of them through the filter, those whose
# id % 10 < 5 through the broadcast join (one match each)
CHAIN = (f"select count(*) c from range(0, {N}, 1, 4) r join (select id k from range(5)) s on r.id % 10 = s.k "
         f"where r.id % 3 = 0")
ROWS_Y = 1024  # spark.cloudprofiler.operators.rows.y's default (rows.x: 1): a row id's ordinal is a multiple of it
# cp_trace points placed by hand in two projections, a filter between them, on the rows the probes sample: one
# partition, so that a row's ordinal in its task is its id, which XoY samples as the probes sample ordinals
TRACED = (f"select sum(b) s from (select cp_trace('traced.upper', a, 1, {ROWS_Y}) b from (select "
          f"cp_trace('traced.lower', id, 1, {ROWS_Y}) a from range(0, {N // 4}, 1, 1)) where a % 3 = 0)")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The application's analysis: each query in a job group of its own (operators() takes it as a scope)."""
    base = tmp_path_factory.mktemp("operator-analysis")
    events = base / "events"  # the application's event log, which the History Server test reads
    events.mkdir()
    spark = (cps.builder(log_dir=str(base / "logs"), local_dir=str(base / "local"), calibration_enabled=False)
             .master("local[2]").config("spark.ui.port", "0").config("spark.eventLog.enabled", "true")
             .config("spark.eventLog.dir", str(events)).getOrCreate())
    sc = spark.sparkContext
    spark.conf.set("spark.cloudprofiler.operators", "true")
    pause = SLEEP_S

    def _sleepy(value):  # defined here so that workers get it by value, not by module
        import time

        time.sleep(pause)
        return value

    sleepy = F.udf(_sleepy, "long", useArrow=False)
    # warm up: the Python workers start and the JVM loads the classes the tasks below use, so that their time is
    # the queries' own
    spark.range(0, 20, 1, 2).select(sleepy("id").alias("y")).agg(F.sum("y")).collect()
    early = _tab_json(sc)  # the tab while the application runs: refreshed below, as more stages end
    spark.sql("select count(*) from range(0, 40000, 1, 4) where id % 4 = 0").collect()
    skew = (f"select sum(length(sha2(repeat(cast(id as string), 40), 512))) s from range(0, {N}, 1, 4) "
            f"where (id >= {N // 2} and id < {3 * N // 4}) or id % 20 = 0")
    spark.sql(skew).collect()  # the JIT compiles the hashing first: else the first tasks' rows cost several times more
    sc.setJobGroup("filter", "a filter keeping one row in four")
    assert spark.sql(f"select count(*) c from range(0, {N}, 1, 4) where id % 4 = 0").first().c == N // 4
    # 3 s of sleep in all: the query stays among the 5 with the most task time that the report's Queries section
    # shows, above the 400,000-row scans however a busy machine stretches them (at 2 ms a row, 0.4 s in all, a
    # loaded run left it out)
    sc.setJobGroup("udf", UDF_DESCRIPTION)
    total = spark.range(0, UDF_ROWS, 1, UDF_PARTITIONS).select(sleepy("id").alias("y")).agg(F.sum("y")).first()
    assert total[0] == sum(range(UDF_ROWS))
    sc.setJobGroup("skew", "partition 2 keeps twenty times the rows of the others")
    assert spark.sql(skew).first().s == 128 * (N // 4 + 3 * N // 80)
    sc.setJobGroup("chain", "a range, a filter and a broadcast join: a chain of operators that keep a row's id")
    assert spark.sql(CHAIN).first().c == sum(1 for v in range(0, N, 3) if v % 10 < 5)
    sc.setJobGroup("traced", "cp_trace points placed by hand beside the probes, on the same rows")
    assert spark.sql(TRACED).first().s == sum(range(0, N // 4, 3))
    _slowed_stream(spark, base)
    _shuffled_stream(spark, base)
    _deduplicated_stream(spark, base)
    _windowed_stream(spark, base)
    _generator_stream(spark, base)
    tab = _cloudprofiler_tab(sc, base)
    tab["early"] = early
    app_id = sc.applicationId
    spark.stop()
    application = open_application(str(base / "logs" / app_id))
    application.tab = tab  # what the live application's Cloudprofiler tab showed before it stopped
    return application


def _ui(sc) -> str:
    # the loopback: what the test's chromium may reach
    return f"http://127.0.0.1:{urllib.parse.urlparse(sc.uiWebUrl).port}"


def _get(sc, path: str) -> str:
    with urllib.request.urlopen(_ui(sc) + path, timeout=30) as reply:
        return reply.read().decode()


def _tab_json(sc) -> dict:
    return json.loads(_get(sc, "/cloudprofiler/json/"))


def _cloudprofiler_tab(sc, base: Path) -> dict:
    """The Cloudprofiler tab of the running application's UI: its JSON, its page, whether the jobs page lists it,
    its metrics page, and what headless chromium saw of it (None without chromium)."""
    tab = {"json": _tab_json(sc), "page": _get(sc, "/cloudprofiler/"), "listed": 'href="/cloudprofiler/"' in _get(
        sc, "/jobs/"), "metrics": _get(sc, "/cloudprofiler/metrics/prometheus"),
           "report": _get(sc, "/cloudprofiler/report")}
    tab["browser"] = browser.load(_ui(sc) + "/cloudprofiler/", base / "profile") if browser.CHROMIUM else None
    return tab


def _slowed_stream(spark, base: Path) -> None:
    """A streaming query of STREAM_BATCHES micro-batches (a file each, STREAM_ROWS rows): a Python UDF, then an
    aggregation kept in state; from batch SLOWED_BATCH on the UDF sleeps STREAM_SLEEP_S per row."""
    source = base / "stream-in"
    source.mkdir()
    for batch in range(STREAM_BATCHES):
        lines = [f'{{"v": {batch * 1000 + i}, "k": {i % 10}, "t": {_event_ms(batch, i)}}}' for i in range(STREAM_ROWS)]
        path = source / f"part-{batch}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (time.time() - 100 + batch, time.time() - 100 + batch))  # the source reads oldest first
    slowed_from, pause = SLOWED_BATCH * 1000, STREAM_SLEEP_S

    def _slowed(v):
        import time

        if v >= slowed_from:
            time.sleep(pause)
        return v

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")  # no batch only to move the watermark
    slowed = F.udf(_slowed, "long", useArrow=False)
    counts = (spark.readStream.schema("v long, k long, t long").option("maxFilesPerTrigger", 1).json(str(source))
              .select("k", slowed("v").alias("v"), F.timestamp_millis("t").alias("t"))
              .withWatermark("t", "1 hour").groupBy("k").agg(F.sum("v").alias("s")))
    query = (counts.writeStream.queryName(STREAM_NAME).outputMode("update").format("noop")
             .trigger(availableNow=True).option("checkpointLocation", str(base / "stream-checkpoint")).start())
    query.awaitTermination(120)
    assert [p["batchId"] for p in query.recentProgress] == list(range(STREAM_BATCHES))


def _shuffled_stream(spark, base: Path) -> None:
    """A stream-stream join: the slowed query's input files on both sides, SHUFFLED_FILES a batch, each side's event
    times through a watermark, joined on their value (one match each) in 2 shuffle partitions, and a projection past
    the join that keeps one side's event-time column."""
    def side(name: str):
        return (spark.readStream.schema("v long, k long, t long").option("maxFilesPerTrigger", SHUFFLED_FILES[0])
                .json(str(base / "stream-in"))
                .select(F.col("v").alias(f"v{name}"), F.timestamp_millis("t").alias(f"t{name}"))
                .withWatermark(f"t{name}", "1 hour"))

    joined = (side("a").join(side("b"), F.expr("va = vb and tb between ta - interval 1 minute and ta"))
              .select((F.col("va") * 2).alias("v2"), "ta"))
    query = (joined.writeStream.queryName(SHUFFLED_NAME).format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(base / "joined-checkpoint")).start())
    query.awaitTermination(120)
    assert [p["numInputRows"] for p in query.recentProgress] == [2 * n * STREAM_ROWS for n in SHUFFLED_FILES]


def _deduplicated_stream(spark, base: Path) -> None:
    """The slowed query's input files, SHUFFLED_FILES a batch, deduplicated by value (in 2 shuffle partitions), then
    a watermark over the deduplication, which generates no code (so no chain runs below the watermark), and a filter
    on the event time (which Spark cannot move below the watermark)."""
    deduplicated = (spark.readStream.schema("v long, k long, t long").option("maxFilesPerTrigger", SHUFFLED_FILES[0])
                    .json(str(base / "stream-in")).select("v", F.timestamp_millis("t").alias("t"))
                    .dropDuplicates(["v"]).withWatermark("t", "1 hour")
                    .where(F.col("t") > F.lit("2000-01-01").cast("timestamp")))
    query = (deduplicated.writeStream.queryName(DEDUPED_NAME).format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(base / "deduplicated-checkpoint")).start())
    query.awaitTermination(120)
    assert [p["numInputRows"] for p in query.recentProgress] == [n * STREAM_ROWS for n in SHUFFLED_FILES]


def _windowed_stream(spark, base: Path) -> None:
    """The slowed query's input files, SHUFFLED_FILES a batch, counted per sliding WINDOW and key in 2 shuffle
    partitions, in the append mode with no delay to the watermark: batch 0 emits nothing (no watermark yet), batch 1
    the windows that ended by batch 0's newest event time; then a filter on the counts, which keeps every window."""
    counts = (spark.readStream.schema("v long, k long, t long").option("maxFilesPerTrigger", SHUFFLED_FILES[0])
              .json(str(base / "stream-in")).select("k", F.timestamp_millis("t").alias("t"))
              .withWatermark("t", "0 seconds").groupBy(F.window("t", *WINDOW), "k").agg(F.count("*").alias("n"))
              .where("n > 0"))
    query = (counts.writeStream.queryName(WINDOWED_NAME).outputMode("append").format("noop")
             .trigger(availableNow=True).option("checkpointLocation", str(base / "windowed-checkpoint")).start())
    query.awaitTermination(120)
    assert [p["numInputRows"] for p in query.recentProgress] == [n * STREAM_ROWS for n in SHUFFLED_FILES]


def _generator_stream(spark, base: Path) -> None:
    """A streaming query on the generator source (GENERATED_RATE tuples/s from 2 emitters on this host for
    GENERATED_S s, a batch a second): a filter, then a watermark on the emission time (so that each batch's progress
    has its event-time range), into the noop sink."""
    generator = Generator(GeneratorConfig(rate=GENERATED_RATE, duration_s=GENERATED_S, emitters=2, transport="serve",
                                          port=free_port_base(2), timeout_s=30)).start()
    frame = (read_generator(spark, generator.endpoints, timeout=10).where("id % 3 != 0")
             .select("id", "event_time").withWatermark("event_time", "1 hour"))
    query = (frame.writeStream.queryName(GENERATED_NAME).format("noop").trigger(processingTime="1 second")
             .option("checkpointLocation", str(base / "generated-checkpoint")).start())
    results = generator.join(120)
    assert [r.error for r in results] == [None, None]
    assert [r.committed_tuples for r in results] == [r.emitted_tuples for r in results]
    stop_query(spark, query)


def _event_ms(batch: int, row: int) -> int:
    """The event time of a row of the streaming query's input: 5 minutes ago, a second apart per batch."""
    return EVENTS_FROM_MS + batch * 1000 + row


@pytest.fixture(scope="module")
def operators(app):
    """operators() of each job group, as pandas."""
    return {group: app.operators(job_group=group).toPandas() for group in ("filter", "udf", "skew")}


def _one(frame: pd.DataFrame, operator: str):
    rows = frame[frame["operator"] == operator]
    assert len(rows) == 1, frame[["probe_id", "operator", "rows"]]
    return rows.iloc[0]


def test_a_filter_keeps_a_quarter_of_the_ranges_rows_exactly(operators):
    ops = operators["filter"]
    assert ops["sql_execution_id"].nunique() == 1
    range_, filter_ = _one(ops, "Range"), _one(ops, "Filter")
    assert range_["rows"] == N and range_["tasks"] == 4
    assert filter_["rows"] == N // 4 and filter_["tasks"] == 4
    assert range_["parent_probe_id"] == filter_["probe_id"]  # the filter consumes the range's rows
    # per task the filter read its child's rows: 100,000 each, and produced a quarter of them
    assert filter_["median_rows_read"] == N // 4 and filter_["median_rows"] == N // 16
    # times add up: the filter's own time is its inclusive less the range's, errors in quadrature
    assert filter_["inclusive_s"] >= 0 and filter_["exclusive_s"] <= filter_["inclusive_s"]
    assert filter_["exclusive_err_s"] >= range_["inclusive_err_s"] - 1e-12
    # no operator takes more than the query's task time (a probe's estimate is bounded by its pipeline's span,
    # which a stall in a sampled gap would else exceed on a loaded host), and the shares add up to at most all of
    # it within their stated errors (ms-rounded run times: 5% slack)
    assert 0 < filter_["query_task_s"] and (ops["share"] <= 1.05).all(), ops[["operator", "share"]]
    stated = 2 * (ops["exclusive_err_s"] ** 2).sum() ** 0.5 / filter_["query_task_s"]
    assert ops["share"].sum() <= 1.05 + stated, ops[["operator", "share", "exclusive_err_s"]]


def test_the_sleeping_udf_is_the_largest_share_and_its_own_time_is_the_sleep(operators):
    ops = operators["udf"]
    top = ops.sort_values("share", ascending=False).iloc[0]
    assert top["operator"] == "BatchEvalPython" and top["rows"] == UDF_ROWS
    sleep = UDF_ROWS * SLEEP_S  # 3 s over both tasks
    # at least the sleep (time.sleep never returns early); above it: the Python worker's per-row work, pickling
    # batches both ways, and the scheduling of a machine whose 2 cores other processes share (both tasks run at
    # once), stated as 0.4 s plus half the sleep
    assert sleep - 3 * top["exclusive_err_s"] <= top["exclusive_s"] <= 1.5 * sleep + 0.4, top.to_dict()
    # far above any other operator of the query (the next is a projection of 200 rows or an aggregation of 2)
    assert top["share"] >= 5 * ops.sort_values("share", ascending=False).iloc[1]["share"], ops[["operator", "share"]]


def test_the_finding_names_the_partition_that_holds_the_skew(app, report):
    ops = app.operators(job_group="skew").toPandas()
    top = ops.sort_values("share", ascending=False).iloc[0]
    assert top["max_partition"] == SKEWED_PARTITION, top.to_dict()
    assert top["max_rows_read"] == 20 * top["median_rows_read"] == N // 4  # its child's rows: 100,000 against 5,000
    page, out = report
    execution = int(top["sql_execution_id"])
    [line] = [text for kind, text in _findings(page) if kind == "operator" and f"(SQL execution {execution}:" in text]
    assert re.search(rf"of it in partition {SKEWED_PARTITION}, which read 20x the median rows", line)
    assert f"{top['operator']} (probe {int(top['probe_id'])}) takes" in line


def test_the_same_sampled_rows_are_timed_from_operator_to_operator_along_a_chain(app):
    ops = app.operators(job_group="chain").toPandas()
    range_ = ops[(ops["operator"] == "Range") & (ops["rows"] == N)].iloc[0]
    filter_, join = _one(ops, "Filter"), _one(ops, "BroadcastHashJoin")
    assert filter_["rows"] == len(range(0, N, 3))  # the probes' rows are as exact as without the sampled rows
    assert range_["parent_probe_id"] == filter_["probe_id"] and filter_["parent_probe_id"] == join["probe_id"]
    partition = app.task_table().toPandas().set_index("task_attempt_id")["partition"]

    def sampled(probe) -> dict:
        """The ids the probe logged -> the value of the range's row (its partition's start + the row's ordinal)."""
        ids = app.records(f"spark.operator.{int(probe['probe_id'])}").toPandas()["tuple_id"]
        return {i: int(partition[i >> 32]) * (N // 4) + (i & 0xFFFFFFFF) for i in ids}

    at_range, at_filter, at_join = (sampled(p) for p in (range_, filter_, join))
    # XoY on the id: the rows whose ordinal in their task is a multiple of y, at the range: every one of them
    assert sorted(at_range.values()) == [v for v in range(N) if (v % (N // 4)) % ROWS_Y == 0]
    # the same ids further up: exactly the sampled rows that pass the filter, then the join
    assert at_filter == {i: v for i, v in at_range.items() if v % 3 == 0} and at_filter
    assert at_join == {i: v for i, v in at_filter.items() if v % 10 < 5} and at_join
    hops = app.operator_hops(job_group="chain").toPandas().set_index("from_probe_id")
    for below, above, rows in ((range_, filter_, at_filter), (filter_, join, at_join)):
        hop = hops.loc[below["probe_id"]]
        assert (hop["to_probe_id"], hop["from_operator"], hop["to_operator"]) == (
            above["probe_id"], below["operator"], above["operator"])
        assert hop["rows"] == len(rows) and hop["sql_execution_id"] == filter_["sql_execution_id"]
        # a row goes through a filter or a join's lookup in under a microsecond or two (with one log call): the
        # median stays far below 100 us even when preemption on a loaded host stretches the tail
        assert 0 <= hop["min_ns"] <= hop["p50_ns"] <= hop["p99_ns"] <= hop["max_ns"] and hop["p50_ns"] < 100_000
    assert app.operator_hops(job_group="filter").toPandas()["rows"].sum() > 0  # the filter query's chain too
    assert app.operator_hops(job_group="nothing of this name").count() == 0


def test_a_row_s_time_between_two_operators_is_what_cp_trace_points_placed_there_by_hand_measure(app):
    """The probes above the two projections log the rows their cp_trace points log (the same sample of the same
    ids); per row, the time from the lower projection's probe to the upper one's is what the two points measured,
    each probe logging a moment after its projection's point (a log call and the filter between them)."""
    ops = app.operators(job_group="traced").toPandas()
    filter_ = _one(ops, "Filter")
    [lower] = ops[(ops["operator"] == "Project") & (ops["parent_probe_id"] == filter_["probe_id"])].itertuples()
    [upper] = ops[ops["probe_id"] == filter_["parent_probe_id"]].itertuples()
    assert upper.operator == "Project"

    def ns(channel: str, mask: int = -1) -> dict:
        """A channel's records: its row (a probe's: the row's ordinal in its task) -> when it passed, in ns."""
        records = app.records(channel).toPandas()
        return dict(zip(records["tuple_id"].to_numpy().astype("int64") & mask, records["t_ns"]))

    at_lower, at_upper = (ns(f"spark.operator.{p.probe_id}", 0xFFFFFFFF) for p in (lower, upper))
    traced_lower, traced_upper = ns("traced.lower"), ns("traced.upper")
    assert sorted(at_lower) == sorted(traced_lower) == list(range(0, N // 4, ROWS_Y))
    assert sorted(at_upper) == sorted(traced_upper) == [i for i in range(0, N // 4, ROWS_Y) if i % 3 == 0]
    by_probes = np.array([at_upper[i] - at_lower[i] for i in sorted(at_upper)])
    by_hand = np.array([traced_upper[i] - traced_lower[i] for i in sorted(at_upper)])
    assert (by_probes > 0).all() and (by_hand > 0).all()
    # measured 35 ns apart per row (p50) on a quiet machine, 250 ns at p90; a row paired with the wrong one would
    # be 1,024 rows (tens of microseconds) apart
    assert np.median(np.abs(by_probes - by_hand)) < 2_000, (by_probes, by_hand)


def test_a_python_udf_s_sampled_rows_are_timed_from_its_input_to_its_output(app):
    ops = app.operators(job_group="udf").toPandas()
    udf = _one(ops, "BatchEvalPython")
    [below] = ops[ops["parent_probe_id"] == udf["probe_id"]].itertuples()  # the rows the UDF's worker reads
    hops = app.operator_hops(job_group="udf").toPandas()
    [hop] = hops[hops["to_probe_id"] == udf["probe_id"]].itertuples()
    # the n-th row out is the n-th row in: each task's row 0 (1 in 1,024) is paired, from its read to its result
    assert (hop.from_probe_id, hop.to_operator, hop.rows) == (below.probe_id, "BatchEvalPython", UDF_PARTITIONS)
    # a row's result comes back at least its own sleep later (with its batch's: 100 rows of 15 ms)
    assert SLEEP_S * 1e9 <= hop.min_ns <= hop.max_ns < 60e9


def test_the_top_probes_inclusive_time_is_its_tasks_run_time(app):
    values = app.operator_tasks(job_group=["filter", "udf", "skew"]).toPandas()
    tasks = app.task_table().toPandas().set_index("task_attempt_id")
    tops = values[values["parent_probe_id"].isna()]
    above = checked = 0
    for row in tops.itertuples():
        run_s = tasks.loc[row.task_attempt_id, "executor_run_time_ms"] / 1e3
        cpu_s = tasks.loc[row.task_attempt_id, "executor_cpu_time_ns"] / 1e9
        # never above: the pipeline runs inside the task's run time (Spark's ms, hence 2 ms of rounding)
        assert row.inclusive_s <= run_s + 0.002 + 3 * row.inclusive_err_s, (row, run_s)
        above += row.inclusive_s > 0
        if cpu_s >= 0.2:
            # not far below where the pipeline is the task's work (the skew query's hashing: 0.2 s of CPU and
            # more): outside it the task deserializes, sets up its iterators and code, and writes the shuffle (the
            # consumer's time, which the probes leave out), tens of ms of CPU. On a machine shared with others all
            # of it stretches alike (a task of 28 ms of CPU took 650 ms here, its pipeline 140 ms: those small tasks
            # are left out), hence at least 60% of the run time; measured: 81-98%
            assert row.inclusive_s >= 0.6 * run_s, (row, run_s, cpu_s)
            checked += 1
    assert above == len(tops) >= 11 and checked >= 1


@pytest.fixture(scope="module")
def report(app, tmp_path_factory):
    out = tmp_path_factory.mktemp("operator-report") / "report.html"
    write_report(app, out, quiet=True)  # its copy in the folder is the History Server's download
    return out.read_text(), out


def _findings(page: str) -> list:
    return re.findall(r'<li class="\w+" data-kind="(\w+)">([^<]*)</li>', page)


def test_the_queries_section_draws_each_tree_and_the_udf_finding(app, report, operators, tmp_path):
    page, out = report
    udf = operators["udf"]
    execution = int(udf["sql_execution_id"].iloc[0])
    top = udf.sort_values("share", ascending=False).iloc[0]
    share = f"{top['share'] * 100:.0f}%"
    # the query named by its job's description
    [line] = [text for kind, text in _findings(page) if kind == "operator" and f"(SQL execution {execution}:" in text]
    assert line.startswith(f"query (SQL execution {execution}: {UDF_DESCRIPTION}): the Python UDF (BatchEvalPython, "
                           f"probe {int(top['probe_id'])}) takes {share} of the query&#x27;s task time")
    section = page.split('<section id="queries">')[1].split("</section>")[0]
    # the UDF's tree: the aggregation of its stage over the project over the UDF over the range, the shuffle's
    # reader in the next stage above them all
    table = section.split(f"SQL execution {execution}:")[1].split("</table>")[0]
    names = [re.sub(r"^[\s\u2514\u2500\u2550]+", "", n) for n in re.findall(r'<td class="tree">([^<]*)</td>', table)]
    depths = [len(n) - len(n.lstrip(" \u2514\u2500\u2550")) for n in re.findall(r'<td class="tree">([^<]*)</td>',
                                                                             table)]
    assert names[-4:] == ["HashAggregate", "Project", "BatchEvalPython", "Range"], names
    assert depths == sorted(depths) and len(set(depths)) == len(depths)  # one chain, each under the one before
    # beside the UDF, its sampled rows' latency from the range (each task's row 0: 2 rows, so a max rather than a
    # p99): at least the sleep of one row (with its batch's wait: 100 rows of 15 ms), the p50 not above the max; the
    # range reaches no operator
    cells = {}  # operator -> (data-value, text) of its row latency
    for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1]):
        found = re.findall(r'<td(?: data-value="([^"]+)")?[^>]*>(.*?)</td>', row)
        cells[found[0][1].split(" ")[-1]] = found[9]
    p50 = float(cells["BatchEvalPython"][0])
    shown = re.fullmatch(r"p50 (\S+) (m?s), max (\S+) (m?s) \(2 rows\)", cells["BatchEvalPython"][1])
    assert shown and fmt.duration(p50) == f"{shown[1]} {shown[2]}", cells["BatchEvalPython"]
    assert SLEEP_S * 1e9 <= p50 <= 1.01 * float(shown[3]) * {"ms": 1e6, "s": 1e9}[shown[4]]
    assert cells["Range"] == ("", "-")
    # and a finding: the UDF's hop holds nearly all of its rows' time between operators (the hop above it, into
    # the projection, takes microseconds). Other queries' hops of 10 us or more make findings of their own by the same
    # rule (the skew query's projection hashes a 40-fold string per row: 28 us; a broadcast's 5-row build side: 27 us)
    udf_rows = [text for kind, text in _findings(page) if kind == "row_hop" and f"(SQL execution {execution}:" in text]
    range_ = udf[udf["operator"] == "Range"].iloc[0]
    assert len(udf_rows) == 1 and re.match(
        rf"query \(SQL execution {execution}: {UDF_DESCRIPTION}\): its sampled rows spend (9\d|100)% of their time "
        rf"between operators from Range \(probe {int(range_['probe_id'])}\) to the Python UDF \(BatchEvalPython, probe "
        rf"{int(top['probe_id'])}\): {re.escape(cells['BatchEvalPython'][1])}, against ", udf_rows[0]), udf_rows
    row_hop = udf_rows[0]
    if browser.CHROMIUM is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    loaded = browser.load(out, tmp_path / "profile")
    assert loaded.console_errors == [] and loaded.failed_requests == []
    assert "queries" in loaded.sections
    assert unescape(line) in loaded.text and unescape(row_hop) in loaded.text


def test_without_operator_tables_the_application_analyses_and_the_section_says_how_to_turn_them_on(app, tmp_path):
    from cloudprofiler.analysis.report import html
    from cloudprofiler.analysis.report.data import ReportData, _queries

    folder = Path(shutil.copytree(app.path, tmp_path / Path(app.path).name))
    for name in ("spark-operator-nodes.arrows", "spark-operators.arrows"):
        (folder / name).unlink()
    plain = open_application(str(folder), app.spark)
    assert not plain.operators_timed and plain.operators().count() == 0
    assert plain.tasks().count() == app.tasks().count()
    data = ReportData(summary={"app_id": plain.app_id})
    _queries(plain, data)
    assert data.operators.empty and data.queries.empty
    section = html.queries_section(data, [])
    assert re.fullmatch(r'<section id="queries"><h2>Queries</h2><p class="note">[^<]*spark\.cloudprofiler\.operators='
                        r'true[^<]*</p></section>', section), section


def _slowed_batches(app) -> pd.DataFrame:
    """batches() of the slowed query (the joined, the deduplicated, the windowed and the generator's queries run
    beside it)."""
    batches = app.batches().toPandas()
    assert set(batches["query_name"]) == {STREAM_NAME, SHUFFLED_NAME, DEDUPED_NAME, WINDOWED_NAME, GENERATED_NAME}
    return batches[batches["query_name"] == STREAM_NAME].reset_index(drop=True)


def test_each_micro_batch_has_its_progress_tasks_and_operators(app):
    batches = _slowed_batches(app)
    assert list(batches["batch_id"]) == list(range(STREAM_BATCHES))
    assert batches["run_id"].nunique() == 1
    assert (batches["num_input_rows"] == STREAM_ROWS).all()
    # a file's partition, then the aggregation's two shuffle partitions: each batch's tasks carry its ids
    assert (batches["tasks"] == 3).all() and (batches["jobs"] >= 1).all()
    query_id = batches["query_id"].iloc[0]
    assert app.tasks(streaming_query_id=query_id, streaming_batch_id=SLOWED_BATCH).count() == 3
    assert (batches["add_batch_ms"] <= batches["trigger_execution_ms"]).all()
    # each batch's event times as written, and its records' age at its commit
    assert list(batches["event_time_min_ms"]) == [_event_ms(b, 0) for b in range(STREAM_BATCHES)]
    assert list(batches["event_time_max_ms"]) == [_event_ms(b, STREAM_ROWS - 1) for b in range(STREAM_BATCHES)]
    committed = batches["trigger_start_ms"] + batches["trigger_execution_ms"]
    assert (batches["event_lag_min_ms"] == committed - batches["event_time_max_ms"]).all()
    assert (batches["event_lag_max_ms"] - batches["event_lag_min_ms"] == STREAM_ROWS - 1).all()
    assert (batches["event_lag_min_ms"] > 290_000).all()
    ops = app.batch_operators(query_id).toPandas()
    udf = ops[ops["operator"] == "BatchEvalPython"].set_index("batch_id")
    assert list(udf.index.sort_values()) == list(range(STREAM_BATCHES))
    assert udf["position"].nunique() == 1  # the same place in every batch's plan
    assert (ops.groupby("batch_id")["position"].max() == ops["position"].max()).all()
    slept = STREAM_ROWS * STREAM_SLEEP_S
    for batch in range(SLOWED_BATCH, STREAM_BATCHES):  # the sleep is in the UDF's own time, within its batch's tasks
        assert slept <= udf.loc[batch, "exclusive_s"] <= batches.loc[batch, "task_s"]
    for batch in range(1, SLOWED_BATCH):
        assert udf.loc[batch, "exclusive_s"] < slept / 2
    assert app.batches(streaming_query_id="no such query").count() == 0


def test_the_report_says_which_operator_slowed_the_streaming_query(app, report):
    page, _ = report
    # the slowed query's: the generated query's batches may grow slower too on a loaded machine (a finding of its own)
    [line] = [text for kind, text in _findings(page) if kind == "streaming_slower" and f"`{STREAM_NAME}`" in text]
    assert line.startswith(f"The streaming query `{STREAM_NAME}`&#x27;s batches grew slower: from ")
    assert f"(batches 1-{SLOWED_BATCH - 1}) to " in line and "BatchEvalPython (operator " in line
    section = page.split('<section id="streaming">')[1].split("</section>")[0]
    section = section.split(f"<h3>`{STREAM_NAME}`")[1].split("<h3>")[0]
    assert f"{STREAM_BATCHES} batches" in section
    assert len(re.findall(r"<tr><td>\d+</td>", section)) == STREAM_BATCHES
    # the micro-batches' SQL executions are the streaming section's, not queries of their own
    streaming = set(app.task_table().where("streaming_batch_id is not null").toPandas()["sql_execution_id"])
    queries = page.split('<section id="queries">')[1].split("</section>")[0]
    assert not any(f"SQL execution {e}:" in queries for e in streaming)


def test_the_generator_sources_records_are_timed_from_the_source_to_each_operator(app):
    """Known answers: every sampled record (each task's rows 0, 1024, ...) pairs at the probe above the scan; from
    its emission it takes at least as long to reach an operator as from its delivery to Spark, and less than the
    driver's clock says its batch's oldest record had waited at the batch's commit."""
    batches = app.batches().toPandas()
    generated = batches[batches["query_name"] == GENERATED_NAME].set_index("batch_id")
    query_id = generated["query_id"].iloc[0]
    latency = app.source_latency(query_id).toPandas()
    # the emitters run on this host; the watermark reads the event time, the emission's wall clock
    assert set(latency["source"]) == {"delivered", "emitted", "event_time"}
    assert set(latency["batch_id"]) == set(generated.index[generated["num_input_rows"] > 0])
    scan = latency[latency["operator"] == "ColumnarToRow"]
    assert scan.groupby(["batch_id", "source"]).size().eq(1).all()
    # each task's sampled rows: ceil(its rows / 1024), every one of them paired above the scan
    tasks = app.operator_tasks(streaming_query_id=query_id).toPandas()
    rows = tasks[tasks["probe_id"].isin(scan["probe_id"])].groupby("probe_id")["rows"].apply(
        lambda r: int(np.sum(-(-r // ROWS_Y))))
    for source, part in scan[scan["source"] != "event_time"].groupby("source"):
        assert dict(zip(part["probe_id"], part["rows"])) == rows.to_dict(), source
    # the filter's probe pairs the sampled rows it kept, later than the scan's (the same rows, one operator on)
    kept = latency[latency["operator"] == "Filter"].set_index(["batch_id", "source"])
    below = scan.set_index(["batch_id", "source"])
    assert not kept.empty and (kept["rows"] <= below.loc[kept.index, "rows"]).all()
    assert (kept["rows"] >= 0.5 * below.loc[kept.index, "rows"]).all()  # id % 3 != 0 keeps two in three
    assert (latency["min_ns"] >= 0).all()
    on_tsc = latency["source"] != "event_time"
    assert (latency.loc[on_tsc, "err_max_ns"] == 0).all()  # one host: exact
    assert latency.loc[~on_tsc, "err_max_ns"].isna().all()  # from a wall clock: not bounded
    by = latency.set_index(["batch_id", "position", "source"]).sort_index()
    delivered, emitted = by.xs("delivered", level="source"), by.xs("emitted", level="source")
    # from the event time: the rows that reached the watermark's child (the projection), each at the same moment as
    # its emission (the emitter read both clocks together), so to the projection and to the sink as from the
    # emission, but for how the two clocks were read (within 1 ms)
    event = by.xs("event_time", level="source")
    kept = by[by["operator"].isin(["Project", "sink"])].xs("emitted", level="source")
    assert set(event.index) == set(emitted.index) and not kept.empty
    assert (event["rows"] <= emitted["rows"]).all()
    assert (event.loc[kept.index, "rows"] == kept["rows"]).all()
    for column in ("min_ns", "max_ns", "p50_ns"):
        assert (event.loc[kept.index, column] - kept[column]).abs().max() < 1e6, column
    assert (emitted["rows"] == delivered["rows"]).all()
    assert (emitted["min_ns"] >= delivered["min_ns"]).all() and (emitted["max_ns"] >= delivered["max_ns"]).all()
    for (batch, _), row in emitted.iterrows():
        # the driver's wall clock at the commit against the oldest record's emission time (ms), the TSC's ns
        assert row["max_ns"] <= (generated.loc[batch, "event_lag_max_ms"] + 2) * 1e6, (batch, row)
        assert delivered.loc[(batch, _), "max_ns"] <= generated.loc[batch, "trigger_execution_ms"] * 1e6
    # to the sink: the records that reached the chain's top (the projection), at their batch's last task's end
    top, sink = by[by["operator"] == "Project"], by[by["operator"] == "sink"]
    assert set(sink.index.droplevel("position")) == set(top.index.droplevel("position"))
    for (batch, _, source), row in sink.iterrows():
        reached = top.xs((batch, source), level=["batch_id", "source"]).iloc[0]
        assert row["rows"] == reached["rows"] and row["min_ns"] >= reached["min_ns"], (batch, source)
        assert row["max_ns"] >= reached["max_ns"]
        sunk = _sink_truth(app, query_id, batch, int(reached["probe_id"]), source)
        assert row["min_ns"] == pytest.approx(sunk[0], abs=1e3) and row["max_ns"] == pytest.approx(sunk[1], abs=1e3)
        if source == "emitted":
            assert row["max_ns"] <= (generated.loc[batch, "event_lag_max_ms"] + 2) * 1e6, (batch, row)
    # batches() gives each batch's records from their emission to the sink; the slowed query's batches have none
    emitted_sink = sink.xs("emitted", level="source").droplevel("position")
    timed = generated.loc[emitted_sink.index]
    assert (timed["latency_source"] == "emitted").all() and (timed["latency_to"] == "sink").all()
    for column in ("rows", "p50_ns", "p99_ns", "max_ns", "err_max_ns"):
        assert list(timed[f"latency_{column}"]) == list(emitted_sink[column]), column
    assert generated.drop(emitted_sink.index)["latency_rows"].isna().all()
    assert (batches.loc[batches["query_name"] == STREAM_NAME, "latency_source"] == "event_time").all()
    untimed = app.batches(query_id, latency=False).toPandas()
    assert untimed.columns.equals(batches.columns) and untimed["latency_p99_ns"].isna().all()
    with pytest.raises(TypeError, match="latency='no'"):
        app.batches(latency="no")
    # over the query's life: every batch's records together
    life = app.source_latency_lifetime(query_id).toPandas().set_index(["source", "operator"])
    for (source, operator), part in latency.groupby(["source", "operator"]):
        assert life.loc[(source, operator), "rows"] == part["rows"].sum()
        assert life.loc[(source, operator), "max_ns"] == part["max_ns"].max()
        assert life.loc[(source, operator), "batches"] == len(part)
    # the slowed query reads files: no source logs its rows, but its watermark's event times (5 minutes old) time the
    # rows from them (below)
    slowed = app.source_latency(batches.loc[batches["query_name"] == STREAM_NAME, "query_id"].iloc[0]).toPandas()
    assert set(slowed["source"]) == {"event_time"}


def _sink_truth(app, query_id: str, batch: int, top_probe: int, source: str) -> tuple:
    """(min, max) ns from the `source` TSC's records of the rows the top probe logged to the batch's last task's end,
    from the raw records and tasks() (each record's t_ns on the axis)."""
    tasks = app.tasks(streaming_query_id=query_id, streaming_batch_id=batch).toPandas()
    reached = set(app.records(tables.channel("operator_rows").prefix + str(top_probe)).toPandas()["tuple_id"])
    records = app.records(tables.channel("source_rows").prefix + source).toPandas()
    t = records.loc[records["tuple_id"].isin(reached), "t_ns"]
    assert len(t) == len(reached)
    return tasks["end_t_ns"].max() - t.max(), tasks["end_t_ns"].max() - t.min()


def test_a_file_sources_rows_are_timed_from_their_event_time_to_the_sink(app):
    """Known answer: the slowed query reads JSON files whose rows' event times were written (5 minutes ago, a second
    apart per batch) and its watermark reads them, so each batch's sampled row (its one task's first: 200 rows a
    task, 1 in 1,024 sampled) is timed from its event time to the sink: its batch's last task's end less the event
    time written, both on the application's time axis; with no bound (the event's wall clock is not calibrated)."""
    batches = _slowed_batches(app).set_index("batch_id")
    query_id = batches["query_id"].iloc[0]
    latency = app.source_latency(query_id).toPandas()
    assert set(latency["operator"]) == {"BatchEvalPython", "Project", "StateStoreSave", "sink"}, latency
    sink = latency[latency["operator"] == "sink"].set_index("batch_id")
    assert sorted(sink.index) == list(range(STREAM_BATCHES))
    assert (sink["rows"] == 1).all() and sink["err_max_ns"].isna().all()
    for batch, row in sink.iterrows():
        end = app.tasks(streaming_query_id=query_id, streaming_batch_id=batch).toPandas()["end_t_ns"].max()
        truth = end - app.timebase.t_ns_of_wall_ms(_event_ms(batch, 0))
        assert row["min_ns"] == row["max_ns"] == pytest.approx(truth, abs=5e6), batch
        # the driver committed the batch after its last task: the event-time lag it measured is at least this
        assert row["max_ns"] <= batches.loc[batch, "event_lag_max_ms"] * 1e6 + 5e6, batch


def _logged_partitions(app) -> pd.DataFrame:
    """The sampled rows' shuffle partitions, each id read as its files' metadata says: the partition in its low bits,
    the row's ordinal in the 32 above them, the sign bit set (`marked`: no row id has it)."""
    declared = tables.channel("shuffled_rows")
    [bits] = {int(f.meta[declared.keys["partition_bits"]]) for f in app.catalog.files_of([declared.prefix], "records")}
    logged = app.records(declared.prefix).toPandas()
    ids = logged["tuple_id"].to_numpy()
    return logged.assign(ordinal=(ids >> bits) & 0xFFFFFFFF, partition=ids & ((1 << bits) - 1), marked=ids < 0)


def test_a_record_is_timed_to_the_task_that_saved_its_key_s_state(app, report):
    """Known answer: the slowed query's sampled row of each batch (its one file's first row, key 0) goes through the
    shuffle to the partition Spark's hash of key 0 picks (pmod(hash(0), 2)): the chain's top logs that partition, and
    the record is timed from its event time to the end of that partition's task in the batch's last stage, where the
    aggregation saved key 0's state (and, in the update mode, wrote its sum): before the sink or with it. The report's
    path table puts it between the chain's operators and the sink."""
    query_id = _query_id(app, STREAM_NAME)
    partition = app.spark.sql("select pmod(hash(cast(0 as bigint)), 2) p").first().p
    probes = sourced_probes(app)
    ops = app.batch_operators(query_id).toPandas()
    tops = ops[ops["probe_id"].isin(list(probes)) & (ops["operator"] == "Project")]
    assert len(tops) == STREAM_BATCHES, ops
    reached = pd.concat([app.records(probes[p].channel).toPandas() for p in tops["probe_id"]])
    logged = _logged_partitions(app)
    mine = logged[logged["tsc"].isin(reached["tsc"])]
    assert len(mine) == STREAM_BATCHES and mine["marked"].all(), (logged, reached)
    # each the row's ordinal (its id's low half: row 0, numbered by the UDF's output) above the partition
    ordinals = reached["tuple_id"].to_numpy() & 0xFFFFFFFF
    assert set(mine["ordinal"]) == set(ordinals) and len(set(ordinals)) == 1, (mine, reached)
    assert set(mine["partition"]) == {partition}, mine
    latency = app.source_latency(query_id).toPandas()
    saved = latency[latency["operator"] == "StateStoreSave"].set_index("batch_id")
    sink = latency[latency["operator"] == "sink"].set_index("batch_id")
    assert sorted(saved.index) == list(range(STREAM_BATCHES)) and (saved["rows"] == 1).all(), saved
    assert (saved["position"] == ops.loc[ops["operator"] == "StateStoreSave", "position"].iloc[0]).all()
    for batch, row in saved.iterrows():
        tasks = app.tasks(streaming_query_id=query_id, streaming_batch_id=batch).toPandas()
        last = tasks[(tasks["stage_id"] == tasks["stage_id"].max()) & (tasks["status"] == "SUCCESS")]
        [end] = last.loc[last["partition"] == partition, "end_t_ns"]
        truth = end - app.timebase.t_ns_of_wall_ms(_event_ms(batch, 0))
        assert row["min_ns"] == row["max_ns"] == pytest.approx(truth, abs=5e6), batch
        assert row["max_ns"] <= sink.loc[batch, "max_ns"], batch
    page, _ = report
    section = page.split('<section id="streaming">')[1].split("</section>")[0]
    section = section.split(f"<h3>`{STREAM_NAME}`")[1].split("<h3>")[0]
    [table] = re.findall(r'<table class="path">(.*?)</table>', section)
    places = [unescape(c).split(" (")[0] for c in re.findall(r"<tr><td>([^<]*)</td>", table.split("<tbody>")[1])]
    assert places == ["BatchEvalPython", "Project", "StateStoreSave", "the sink"], places
    assert f"StateStoreSave (operator {int(saved['position'].iloc[0])}: its key&#x27;s task&#x27;s end)" in table


def test_a_windowed_record_is_timed_to_the_last_task_that_saved_one_of_its_windows_states(app):
    """Known answer: the windowed query groups by a sliding window and key; Spark expands each row to one a window
    (two) above a filter (its time not null) that the partitions' expression passes too: each scan task's sampled
    row (the first row of a file, key 0, its event time telling which file: a second apart) logs the partitions
    Spark's hash of (each of its windows, 0) picks, and is timed once, to the last of those partitions' tasks, no
    later than the sink."""
    query_id = _query_id(app, WINDOWED_NAME)
    files = [(f, _event_ms(f, 0)) for f in range(sum(SHUFFLED_FILES))]
    window = F.window(F.timestamp_millis("t"), *WINDOW)
    expected = {r.f: set(r.p) for r in app.spark.createDataFrame(files, "f int, t long")
                .select("f", F.pmod(F.hash(window, F.lit(0).cast("long")), F.lit(2)).alias("p"))
                .groupBy("f").agg(F.collect_set("p").alias("p")).collect()}
    probes = sourced_probes(app)
    ops = app.batch_operators(query_id).toPandas()
    tops = ops[ops["probe_id"].isin(list(probes)) & (ops["operator"] == "Project")]
    reached = pd.concat([app.records(probes[p].channel).toPandas() for p in tops["probe_id"]])[["tuple_id", "tsc"]]
    logged = _logged_partitions(app)[["tsc", "partition"]].groupby("tsc")["partition"].agg(set).reset_index()
    events = app.records(tables.channel("source_rows").prefix + "event_time").toPandas()[["tuple_id", "t_ns"]]
    rows = reached.merge(logged, on="tsc").merge(events, on="tuple_id")
    rows["file"] = ((rows["t_ns"] - app.timebase.t_ns_of_wall_ms(EVENTS_FROM_MS)) / 1e9).round().astype(int)
    assert len(rows) == len(reached) > 0, (reached, logged)
    assert list(rows["partition"]) == [expected[f] for f in rows["file"]], (rows, expected)
    latency = app.source_latency(query_id).toPandas()
    records = latency[latency["source"] == "event_time"]
    saved, top = (records[records["operator"] == op].set_index("batch_id")["rows"]
                  for op in ("StateStoreSave", "Project"))
    assert sorted(saved.index) == [0, 1] and saved.equals(top.loc[saved.index]), records  # every sampled row
    maxima = records.pivot(index="batch_id", columns="operator", values="max_ns")
    assert (maxima["StateStoreSave"] <= maxima["sink"]).all(), records


def _query_id(app, name: str) -> str:
    """The id of the streaming query named `name`, from the driver's progress table."""
    [row] = app.streaming_progress().where(F.col("query_name") == name).select("query_id").distinct().collect()
    return row.query_id


def _event_times(app, files: int, count: int) -> tuple:
    """(newest, oldest) event time on the application's axis of the input files files .. files + count - 1."""
    return (app.timebase.t_ns_of_wall_ms(_event_ms(files + count - 1, STREAM_ROWS - 1)),
            app.timebase.t_ns_of_wall_ms(_event_ms(files, 0)))


def test_rows_past_a_shuffle_are_timed_from_their_event_time_to_each_operator(app):
    """Known answer: past the shuffle the joined rows are new ones (other tasks), and the chain there logs its sampled
    rows' event times (written 5 minutes ago, a millisecond apart) itself: each join task's row 0 reaches the join
    and the projection after its task started and before it ended, less the event times its batch's files hold. The
    sink is timed from each side's own chain below its watermark: each scan task's row 0, of both sides."""
    query_id = _query_id(app, SHUFFLED_NAME)
    latency = app.source_latency(query_id).toPandas()
    assert set(latency["source"]) == {"event_time"} and latency["err_max_ns"].isna().all()
    assert sorted(latency["batch_id"].unique()) == [0, 1]
    events_only = {probe for probe, sourced in sourced_probes(app).items() if sourced.events_only}
    files = 0
    for batch, count in enumerate(SHUFFLED_FILES):
        tasks = app.tasks(streaming_query_id=query_id, streaming_batch_id=batch).toPandas()
        assert tasks["stage_id"].nunique() == 3  # each side's scan, the join
        after = tasks[tasks["stage_id"] == tasks["stage_id"].max()]
        scans = tasks.groupby("stage_id").size().drop(after["stage_id"].iloc[0])
        assert len(after) == 2  # the shuffle's 2 partitions
        part = latency[latency["batch_id"] == batch]
        past = part[part["probe_id"].isin(events_only)]
        assert set(past["operator"]) == {"StreamingSymmetricHashJoin", "Project"} and (past["rows"] == 2).all(), part
        below = part[~part["probe_id"].isin(events_only) & (part["operator"] != "sink")]
        assert len(below) >= 4 and below["rows"].isin(list(scans)).all(), part  # each side's scan tasks' row 0
        newest, oldest = _event_times(app, files, count)
        assert (past["min_ns"] >= after["start_t_ns"].min() - newest - 5e6).all(), (past, after)
        assert (past["max_ns"] <= after["end_t_ns"].max() - oldest + 5e6).all(), (past, after)
        # from below the shuffle, both sides: each scan task's row 0 (the first row of one of the batch's files), to
        # the sink at the batch's last task's end
        sink = part[part["operator"] == "sink"]
        assert list(sink["rows"]) == [scans.sum()], (sink, scans)
        first_rows = [app.timebase.t_ns_of_wall_ms(_event_ms(f, 0)) for f in (files, files + count - 1)]
        end, [sunk] = tasks["end_t_ns"].max(), sink.itertuples()
        assert end - first_rows[1] - 5e6 <= sunk.min_ns <= sunk.max_ns <= end - first_rows[0] + 5e6
        files += count


def test_the_report_gives_the_joined_querys_latency_from_the_event_time_to_each_operator(app, report):
    """The streaming section's table of a query's records from the source to each operator they reach and to the
    sink, over its life: a row per operator of source_latency_lifetime(), in the plan's order from its leaves (the
    sink last)."""
    page, _ = report
    section = page.split('<section id="streaming">')[1].split("</section>")[0]
    section = section.split(f"<h3>`{SHUFFLED_NAME}`")[1].split("<h3>")[0]
    [table] = re.findall(r'<table class="path">(.*?)</table>', section)
    assert "<th>from event time to</th><th>records</th><th>p50</th><th>p99</th><th>max</th>" in table
    body = table.split("<tbody>")[1]
    rows = [[unescape(c) for c in re.findall(r"<td>([^<]*)</td>", row)] for row in re.findall(r"<tr>(.*?)</tr>", body)]
    query_id = _query_id(app, SHUFFLED_NAME)
    life = app.source_latency_lifetime(query_id).toPandas().sort_values("position", ascending=False)
    assert [r[1:4] for r in rows] == [[fmt.count(r.rows), fmt.duration(r.p50_ns), fmt.duration(r.p99_ns)]
                                      for r in life.itertuples()]
    places = [r[0] for r in rows]
    assert "the sink (its batch's last task's end)" in places, places
    assert any(p.startswith("StreamingSymmetricHashJoin (operator ") for p in places), places


def test_a_watermark_over_an_operator_without_code_generation_times_the_rows_above_it(app):
    """Known answer: below the watermark runs no chain (its child, the deduplication, generates no code), so the
    chain above it (the watermark's probe, the filter) logs the rows' event times: each task's row 0 reaches both
    after its task started and before it ended, less the event times its batch's files hold, and the sink at the
    batch's last task's end less them."""
    query_id = _query_id(app, DEDUPED_NAME)
    latency = app.source_latency(query_id).toPandas()
    assert set(latency["source"]) == {"event_time"} and latency["err_max_ns"].isna().all()
    assert sorted(latency["batch_id"].unique()) == [0, 1]
    files = 0
    for batch, count in enumerate(SHUFFLED_FILES):
        tasks = app.tasks(streaming_query_id=query_id, streaming_batch_id=batch).toPandas()
        after = tasks[tasks["stage_id"] == tasks["stage_id"].max()]
        assert len(after) == 2  # the deduplication's 2 partitions
        newest, oldest = _event_times(app, files, count)
        part = latency[latency["batch_id"] == batch]
        ops = part[part["operator"] != "sink"]
        assert set(ops["operator"]) == {"EventTimeWatermark", "Filter"} and (ops["rows"] == 2).all(), part
        assert (ops["min_ns"] >= after["start_t_ns"].min() - newest - 5e6).all(), (ops, after)
        assert (ops["max_ns"] <= after["end_t_ns"].max() - oldest + 5e6).all(), (ops, after)
        [sink] = part[part["operator"] == "sink"].itertuples()
        end = tasks["end_t_ns"].max()
        assert sink.rows == 2 and end - newest - 5e6 <= sink.min_ns <= sink.max_ns <= end - oldest + 5e6
        files += count


def test_a_windowed_aggregations_results_are_timed_from_their_windows_end(app, report):
    """Known answer: the windowed query's batch 0 emits no result (the watermark is not set before its end); batch 1
    emits the windows that ended by batch 0's newest event time (files 0 to 2, written 5 minutes ago), so each
    result task's row 0 (both partitions hold some of the windows and keys) reaches the aggregation and the
    filter above it after its task started less the latest such end, and before it ended less the earliest (after
    the oldest event time), and the sink at the batch's last task's end less them; unbounded. The report says it."""
    query_id = _query_id(app, WINDOWED_NAME)
    latency = app.source_latency(query_id).toPandas()
    results = latency[latency["source"] == "window_end"]
    assert set(results["batch_id"]) == {1} and results["err_max_ns"].isna().all(), latency
    assert set(results["operator"]) == {"HashAggregate", "Filter", "sink"} and (results["rows"] == 2).all(), results
    tasks = app.tasks(streaming_query_id=query_id, streaming_batch_id=1).toPandas()
    after = tasks[tasks["stage_id"] == tasks["stage_id"].max()]
    assert len(after) == 2  # the aggregation's 2 partitions
    latest_end, earliest = _event_times(app, 0, SHUFFLED_FILES[0])  # the watermark: batch 0's newest event time
    ops = results[results["operator"] != "sink"]
    assert (ops["min_ns"] >= after["start_t_ns"].min() - latest_end - 5e6).all(), (ops, after)
    assert (ops["max_ns"] <= after["end_t_ns"].max() - earliest + 5e6).all(), (ops, after)
    [sink] = results[results["operator"] == "sink"].itertuples()
    end = tasks["end_t_ns"].max()
    assert end - latest_end - 5e6 <= sink.min_ns <= sink.max_ns <= end - earliest + 5e6, sink
    page, _ = report
    section = page.split('<section id="streaming">')[1].split("</section>")[0]
    section = section.split(f"<h3>`{WINDOWED_NAME}`")[1].split("<h3>")[0]
    assert re.search(r"Its windowed results from the window&#x27;s end to the sink \(its batch&#x27;s last task&#x27;s "
                     r"end\), 2 sampled in 1 batches: p50 [\d.,]+ s, p99 [\d.,]+ s, max [\d.,]+ s \(the event&#x27;s "
                     r"clock against the executors&#x27; wall clocks: not bounded\)\.", section), section[:2000]


def test_a_batch_that_had_not_ended_has_no_latency_from_the_source(app, tmp_path):
    """Known answer: the slowed query's folder as a report made during its last batch finds it (its tasks, its
    records), but without the progress Spark posts as a batch ends: that batch is left out of source_latency(), whose
    last task and state-saving tasks were yet to end; the others are as they were."""
    query_id = _query_id(app, STREAM_NAME)
    folder = Path(shutil.copytree(app.path, tmp_path / Path(app.path).name))
    table = folder / "spark-streaming-batches.arrows"
    progress = ipc.open_file(pa.BufferReader(table.read_bytes())).read_all()  # not mapped: rewritten below
    last = pc.and_(pc.equal(progress["query_id"], query_id), pc.equal(progress["batch_id"], STREAM_BATCHES - 1))
    ended = pc.invert(last)
    with ipc.new_file(str(table), progress.schema) as f:
        f.write_table(progress.filter(ended))
    during = open_application(str(folder), app.spark).source_latency(query_id).toPandas()
    after = app.source_latency(query_id).toPandas()
    assert sorted(set(after["batch_id"])) == list(range(STREAM_BATCHES))
    assert sorted(set(during["batch_id"])) == list(range(STREAM_BATCHES - 1))
    key = ["batch_id", "source", "operator"]
    kept = after[after["batch_id"] < STREAM_BATCHES - 1].sort_values(key, ignore_index=True)
    assert during.sort_values(key, ignore_index=True)[kept.columns].equals(kept)


def test_throughput_leaves_out_the_channels_of_event_times_unless_named(app):
    """Known answer: the file queries' event times were written 5 minutes before the application: counted per period
    they would stretch the throughput's time axis 5 minutes before its start. Left out by default, they are counted
    at their event times where named (the generator's query's among them, of this minute)."""
    event_time = tables.channel("source_rows").prefix + "event_time"
    periods = app.throughput(period_ms=1000).toPandas()
    assert event_time not in set(periods["channel"]) and "spark.task.end" in set(periods["channel"])
    assert periods["period_start_t_ns"].min() >= -1e9, periods.sort_values("period_start_t_ns").head()
    named = app.throughput(channel=event_time, period_ms=1000).toPandas()
    assert named["records"].sum() > 0 and named["period_start_t_ns"].min() < -200e9, named


def test_the_report_gives_the_file_querys_latency_from_its_event_time_unbounded(app, report):
    page, _ = report
    section = page.split('<section id="streaming">')[1].split("</section>")[0]
    section = section.split(f"<h3>`{STREAM_NAME}`")[1].split("<h3>")[0]
    assert re.search(r"Its records from event time to the sink \(its batch&#x27;s last task&#x27;s end\), "
                     rf"{STREAM_BATCHES} sampled in {STREAM_BATCHES} batches: p50 [\d.,]+ s, p99 [\d.,]+ s, max "
                     r"[\d.,]+ s \(the event&#x27;s clock against the executors&#x27; wall clocks: not bounded\)\.",
                     section), section[:2000]


def test_the_report_gives_the_generated_querys_latency_from_the_source(app, report):
    page, _ = report
    section = page.split('<section id="streaming">')[1].split("</section>")[0]
    section = section.split(f"<h3>`{GENERATED_NAME}`")[1].split("<h3>")[0]
    life = app.source_latency_lifetime().toPandas()
    reach = life[life["source"] == "emitted"].sort_values("position").iloc[0]  # the sink, past every operator
    assert reach["operator"] == "sink" and reach["position"] == 0
    words = (f"Its records from emission to the sink (its batch's last task's end), "
             f"{fmt.count(reach['rows'])} sampled in {fmt.count(reach['batches'])} batches: p50 "
             f"{fmt.duration(reach['p50_ns'])}, p99 {fmt.duration(reach['p99_ns'])}")
    assert unescape(words) in unescape(section), section[:2000]
    cells = re.findall(r"<td>([\d.]+ [mun]?s / [\d.]+ [mun]?s)</td>", section)
    assert len(cells) == reach["batches"]


def test_the_driver_writes_each_table_with_the_columns_and_types_the_analysis_reads(app):
    assert_tables_as_declared(app.path, {"tasks", "operator_nodes", "operators", "streaming_batches"})
    # the analysis's frames of them have the declared columns
    assert app.operator_values().columns == tables.table("operators").schema.names
    assert set(app.catalog.tables) == {t for t in tables.tables() if (Path(app.path) / tables.file(t)).exists()}
    assert set(TASK_METRICS) <= set(tables.table("tasks").schema.names)  # the metrics the stages sum
    # the operators' row channels, whose name and metadata the plugin declares once (OperatorRows) and the analysis
    # reads from the jar: each channel the executors wrote is named and tagged as declared, and the analysis finds it
    declared = tables.channel("operator_rows")
    written = [f for f in app.catalog.logs if f.kind == "records" and f.channel.startswith(declared.prefix)]
    assert written and {f.meta.get("spark.event") for f in written} == {declared.event}
    probes = {int(f.meta[declared.keys["probe"]]) for f in written if f.meta.get(declared.keys["first_probe"])}
    assert {declared.prefix + str(p) for p in probes} == {f.channel for f in written}
    assert set(row_channels(app)) == probes


def test_the_live_tab_shows_each_stage_and_batch_as_the_analysis_finds_them(app):
    tab = app.tab
    assert tab["listed"], "the Spark UI's jobs page lists no Cloudprofiler tab"
    assert tab["json"]["app_folder"] == app.path
    # each stage the tab kept: its attempts, and its median and max of Spark's durations, as the task table has them
    spark_ms = (app.task_table().toPandas().assign(ms=lambda t: t["finish_time_ms"] - t["launch_time_ms"]))
    shown = tab["json"]["stages"]
    assert len(shown) >= 10 and all(s["completed"] and s["exact"] for s in shown)
    # live: what it showed early on was the stages then, all of which it still shows
    early = {(s["stage_id"], s["stage_attempt"]) for s in tab["early"]["stages"]}
    assert early and early < {(s["stage_id"], s["stage_attempt"]) for s in shown}
    assert tab["early"]["streaming"] == []
    for stage in shown:
        mine = spark_ms[(spark_ms["stage_id"] == stage["stage_id"]) &
                        (spark_ms["stage_attempt"] == stage["stage_attempt"])]
        ok = mine[mine["status"] == "SUCCESS"]["ms"].sort_values().to_numpy()
        assert stage["tasks"] == len(mine) and stage["failed"] == len(mine) - len(ok), stage
        assert stage["max_ms"] == ok[-1] and stage["median_ms"] == ok[(len(ok) + 1) // 2 - 1], stage
        assert stage["stragglers"] == int((ok > 1.5 * stage["median_ms"]).sum()), stage
        assert stage["slowest"][0]["duration_ms"] == ok[-1]
    # the streaming query's batches, as Spark's progress gave them
    [query] = [q for q in tab["json"]["streaming"] if q["query_name"] == STREAM_NAME]
    batches = _slowed_batches(app)
    assert [b["batch_id"] for b in query["batches"]] == list(batches["batch_id"])
    assert [b["trigger_execution_ms"] for b in query["batches"]] == list(batches["trigger_execution_ms"])
    assert '<table class="table table-bordered table-sm" id="cloudprofiler-stages">' in tab["page"]
    # no report made yet: the tab and its download say how to make one
    how = f"Make one with cps.report(spark) in the application&#39;s session, or with: cloudprofiler report {app.path}"
    assert how in tab["page"] and "No report of this application yet" in tab["report"]
    if tab["browser"] is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    loaded = tab["browser"]
    assert loaded.console_errors == [] and loaded.failed_requests == []
    assert "Stragglers" in loaded.text and f"{STREAM_NAME} (" in loaded.text


def test_the_live_tab_times_each_operator_as_the_analysis_does(app):
    live = pd.DataFrame(app.tab["json"]["operators"])
    assert live["sql_execution_id"].nunique() >= 5  # the streaming batches' at least
    analysed = app.operators().toPandas().set_index(["sql_execution_id", "probe_id"])
    both = live.join(analysed, on=["sql_execution_id", "probe_id"], rsuffix="_analysed", how="inner")
    assert len(both) == len(live) and (both["operator"] == both["operator_analysed"]).all()
    assert (both["rows"] == both["rows_analysed"]).all() and (both["tasks"] == both["tasks_analysed"]).all()
    for column in ("inclusive_s", "exclusive_s"):
        assert both[column].to_numpy() == pytest.approx(both[column + "_analysed"].to_numpy(), rel=1e-9, abs=1e-12)
    # the metrics page has each of them, its own time as the tab's
    [family] = [f for f in text_string_to_metric_families(app.tab["metrics"])
                if f.name == "cloudprofiler_operator_exclusive_seconds"]
    scraped = {(int(s.labels["sql_execution_id"]), int(s.labels["probe_id"])): s.value for s in family.samples}
    assert scraped == pytest.approx(
        {(r.sql_execution_id, r.probe_id): r.exclusive_s for r in live.itertuples()}, rel=1e-12)
    # the tab's page names the sleeping UDF's operator among the top ones of its query
    assert "BatchEvalPython (probe " in app.tab["page"]


@pytest.fixture(scope="module")
def history(app, tmp_path_factory):
    """Spark's History Server (its own process, pyspark's distribution) over the application's event log, the
    plugin jar on its class path as the README says: its address once it lists the application."""
    folder = tmp_path_factory.mktemp("history")
    port = free_port()
    env = {**os.environ, "SPARK_DAEMON_CLASSPATH": cps.jar_path(), "SPARK_HISTORY_OPTS": (
        f"-Dspark.history.fs.logDirectory=file:{Path(app.path).parent.parent / 'events'} "
        f"-Dspark.history.ui.port={port} -Dspark.history.fs.update.interval=1s")}
    log = open(folder / "history.log", "w")
    server = subprocess.Popen([spark_class(), "org.apache.spark.deploy.history.HistoryServer"], env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v1/applications", timeout=5) as reply:
                    if any(a["id"] == app.app_id for a in json.load(reply)):
                        break
            except (OSError, ValueError):  # not listening yet, or a page of its own while it starts
                pass
            assert server.poll() is None and time.monotonic() < deadline, (folder / "history.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(server.pid, 9)
        server.wait(30)
        log.close()


def test_the_history_server_shows_the_tab_as_it_was_when_the_application_ended(app, history, report, tmp_path):
    page = f"{history}/history/{app.app_id}/cloudprofiler/"
    with urllib.request.urlopen(page + "json/", timeout=60) as reply:  # the first request replays the event log
        figures = json.load(reply)
    live = app.tab["json"]  # read from the live tab just before the application stopped
    assert figures["app_folder"] == live["app_folder"]
    assert figures["stages"] == live["stages"] and figures["streaming"] == live["streaming"]
    # its metrics page, under the application's path, has the same stages
    with urllib.request.urlopen(page + "metrics/prometheus", timeout=60) as reply:
        [family] = [f for f in text_string_to_metric_families(reply.read().decode())
                    if f.name == "cloudprofiler_stage_stragglers"]
    assert {(s.labels["stage_id"], s.labels["stage_attempt"]): s.value for s in family.samples} == {
        (str(s["stage_id"]), str(s["stage_attempt"])): s["stragglers"] for s in live["stages"]}
    with urllib.request.urlopen(f"{history}/history/{app.app_id}/jobs/", timeout=60) as reply:
        assert 'href="/history/' + app.app_id + '/cloudprofiler/"' in reply.read().decode()
    # the report written after the run is the tab's download
    with urllib.request.urlopen(page + "report", timeout=60) as reply:
        assert reply.read() == report[1].read_bytes()
    with urllib.request.urlopen(page, timeout=60) as reply:
        assert f'href="report" download="cloudprofiler-report-{app.app_id}.html">download</a>' in reply.read().decode()
    if browser.CHROMIUM is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    loaded = browser.load(page, tmp_path / "profile")
    assert loaded.console_errors == [] and loaded.failed_requests == []
    assert "The application has ended" in loaded.text and "Stragglers" in loaded.text
