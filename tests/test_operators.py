"""Operator timing (spark.cloudprofiler.operators): a probe above every operator of each whole-stage-codegen
pipeline, inside the generated code; queries return what they return without it; rows are exact; the time of the
pipeline's top operator is its task's; the driver's two tables name every probe and its values per task."""
import re
import time

import pyarrow.ipc as ipc
import pytest
from pyspark.sql import functions as F

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler import tables
from cloudprofiler.analysis.logfile import read_log_bytes
from conftest import metric, plan_nodes

OPERATORS = "spark.cloudprofiler.operators"
ROW_CHANNELS, ROW_CHANNELS_OPEN = "spark.cloudprofiler.operators.rows.channels", 8
ROWS_IDLE, ROWS_IDLE_S = "spark.cloudprofiler.operators.rows.idleSeconds", 5

# a query per kind of operator the probes sit above or under: scans, filters, projections, partial and final
# aggregation, shuffles read through AQE, sort, window, both join strategies (broadcast and sort-merge), a
# semi and an anti join (whose generated code drops rows with `continue`), limit, union, expand, a Python UDF
QUERIES = {
    "aggregate": "select id % 7 k, count(*) c, sum(id) s from range(0, 200000, 1, 4) where id % 3 = 0 "
                 "group by id % 7 order by k",
    "broadcast join": "select a.id, b.id * 2 from range(0, 50000, 1, 2) a join range(0, 500) b on a.id = b.id",
    "merge join": "select /*+ MERGE(b) */ a.id % 10 k, count(*) from range(0, 50000, 1, 2) a "
                  "join range(0, 50000, 1, 2) b on a.id = b.id * 3 group by 1 order by 1",
    "semi and anti": "select count(*) from range(0, 20000) a where a.id in (select id * 2 from range(0, 5000)) "
                     "and a.id not in (select id * 5 from range(0, 3000))",
    "window": "select id, rank() over (partition by id % 5 order by id desc) r from range(0, 5000, 1, 2) "
              "order by id limit 20",
    "union and expand": "select k, count(distinct v), sum(v) from (select id % 3 k, id v from range(1000) "
                        "union all select id % 4 k, id v from range(2000)) group by cube(k) order by 1",
    "strings": "select concat('x', cast(id as string)) s, length(repeat('ab', cast(id % 5 as int))) n "
               "from range(0, 3000) where id % 11 != 0 order by s desc limit 7",
}


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    base = tmp_path_factory.mktemp("operators")
    session = (cps.builder(log_dir=str(base / "logs"), local_dir=str(base / "local"), collect_interval_seconds=1)
               .master("local[2]")
               .config("spark.ui.enabled", "false")
               # a pipeline whose generated code fails to compile fails the query instead of running uninstrumented
               .config("spark.sql.codegen.fallback", "false")
               # few sampled rows' channels open at once, so that a few queries reach the limit
               .config(ROW_CHANNELS, str(ROW_CHANNELS_OPEN))
               # the channels of queries that ended close soon (longer than the limit's test takes to reach it)
               .config(ROWS_IDLE, str(ROWS_IDLE_S))
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    yield session, base / "logs"
    session.stop()


def run(spark, query, operators: bool):
    spark.conf.set(OPERATORS, str(operators).lower())
    try:
        df = spark.sql(query) if isinstance(query, str) else query()
        rows = df.collect()
        return rows, df._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset(OPERATORS)


@pytest.mark.parametrize("name", QUERIES)
def test_a_query_returns_the_same_rows_with_its_operators_timed(spark, name):
    session, _ = spark
    plain, plain_plan = run(session, QUERIES[name], False)
    timed, timed_plan = run(session, QUERIES[name], True)
    assert timed == plain and plain
    assert "CloudprofilerProbe" not in plain_plan and "CloudprofilerProbe" in timed_plan


def test_a_query_run_again_with_its_operators_timed_compiles_nothing(spark):
    # each run's probes have ids of their own; if the generated code named them, every run would compile its
    # pipelines anew and run them in the interpreter until the JIT caught up (TPC-H: up to +60% per query)
    session, _ = spark
    compiled = session._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    query = QUERIES["merge join"]
    first, plan = run(session, query, True)
    assert "CloudprofilerProbe" in plan
    before = compiled.getCount()
    again, _ = run(session, query, True)
    assert again == first and compiled.getCount() == before


def test_without_whole_stage_code_generation_no_probe_is_placed(spark):
    session, _ = spark
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    try:
        plain, _ = run(session, QUERIES["aggregate"], False)
        timed, plan = run(session, QUERIES["aggregate"], True)
    finally:
        session.conf.unset("spark.sql.codegen.wholeStage")
    assert timed == plain and "CloudprofilerProbe" not in plan


def test_a_python_udf_returns_the_same_rows_and_is_timed_where_its_rows_are_read(spark):
    session, _ = spark
    double = F.udf(lambda v: v * 2, "long")

    def query():
        return session.range(0, 300, 1, 2).select(double("id").alias("d")).where("d % 3 = 0")

    plain, _ = run(session, query, False)
    timed, plan = run(session, query, True)
    assert timed == plain and len(plain) == 100
    assert re.search(r"CloudprofilerProbe \d+ \((Batch|Arrow)EvalPython\)", plan)  # Spark 4 runs it through Arrow


def read_tables(logs, app_id):
    folder = logs / app_id
    return [ipc.open_file(folder / name).read_all().to_pylist()
            for name in ("spark-operator-nodes.arrows", "spark-operators.arrows")]


@pytest.fixture(scope="module")
def filtered(spark):
    """One query, operators timed: a range of 400,000 rows over 4 partitions, a filter keeping one in four, then
    a global aggregation; the tables as the driver publishes them while the application runs (every second)."""
    session, logs = spark
    session.conf.set(OPERATORS, "true")
    try:
        total = session.sql("select count(*), sum(id) from range(0, 400000, 1, 4) where id % 4 = 0").first()
    finally:
        session.conf.unset(OPERATORS)
    app_id = session.sparkContext.applicationId
    deadline = time.monotonic() + 60
    while True:  # until the tables published hold the query's four scan tasks (earlier queries' probes are there too)
        try:
            nodes, tasks = read_tables(logs, app_id)
        except (FileNotFoundError, OSError):
            nodes, tasks = [], []
        scan = [n for n in nodes if n["operator"] == "Range" and "400000" in n["description"]]
        if scan:
            query = [n for n in nodes if n["sql_execution_id"] == scan[0]["sql_execution_id"]]
            probes = {n["probe_id"] for n in query}
            ran = [t for t in tasks if t["probe_id"] in probes]
            filters = {scan[0]["probe_id"], scan[0]["parent_probe_id"]}
            if len({(t["task_attempt_id"], t["probe_id"]) for t in ran if t["probe_id"] in filters}) == 8:
                return total, query, ran
        assert time.monotonic() < deadline, f"the query's operator rows were not published: {nodes} {tasks}"
        time.sleep(0.5)


def test_every_probe_counts_its_operators_rows_exactly(filtered):
    total, nodes, tasks = filtered
    assert total[0] == 100000
    probe = {n["operator"]: n["probe_id"] for n in nodes}
    rows = {}
    for row in tasks:
        rows[row["probe_id"]] = rows.get(row["probe_id"], 0) + row["rows"]
    assert rows[probe["Range"]] == 400000 and rows[probe["Filter"]] == 100000
    by_id = {n["probe_id"]: n for n in nodes}
    assert by_id[probe["Range"]]["parent_probe_id"] == probe["Filter"]  # the filter consumes the range's rows


def test_each_operator_takes_at_least_the_time_of_its_children_in_each_task(filtered):
    _, nodes, tasks = filtered
    parent = {n["probe_id"]: n["parent_probe_id"] for n in nodes}
    ticks = {(t["task_attempt_id"], t["probe_id"]): t for t in tasks}
    checked = 0
    for (task, probe), row in ticks.items():
        up = ticks.get((task, parent.get(probe)))
        if up is None or row["timed_gaps"] == 0:
            continue
        # inclusive times nest; a sampled estimate may overshoot its parent's by its standard errors
        slack = 3 * ((row["ticks_error"] or 0) + (up["ticks_error"] or 0))
        assert row["ticks"] <= up["ticks"] + slack, (row, up)
        checked += 1
    assert checked >= 4


def test_the_setting_takes_only_true_or_false_and_names_the_bad_value(spark):
    session, _ = spark
    session.conf.set(OPERATORS, "yes")
    try:
        with pytest.raises(Exception, match=r"spark\.cloudprofiler\.operators must be true or false, got 'yes'"):
            session.sql("select count(*) from range(10)").collect()
    finally:
        session.conf.unset(OPERATORS)


@pytest.mark.parametrize("x, y, message", [
    ("5", "4", r"spark\.cloudprofiler\.operators\.rows\.x=5 is invalid: expected at most "
               r"spark\.cloudprofiler\.operators\.rows\.y=4"),
    ("1", "0", r"spark\.cloudprofiler\.operators\.rows\.y=0 is invalid: expected an integer from 1 to"),
])
def test_the_row_sample_takes_x_of_y_and_names_the_bad_value(spark, x, y, message):
    session, _ = spark
    keys = {OPERATORS + ".rows.x": x, OPERATORS + ".rows.y": y}
    for key, value in keys.items():
        session.conf.set(key, value)
    try:
        with pytest.raises(Exception, match=message):
            run(session, "select count(*) from range(10) where id % 2 = 0", True)
    finally:
        for key in keys:
            session.conf.unset(key)


def test_ticks_read_as_seconds_by_the_tsc_frequency(filtered):
    _, _, tasks = filtered
    hz = cp.tsc_frequency().hz
    # 400,000 rows through four operators in well under a minute, and more than nothing
    assert all(0 <= t["ticks"] / hz < 60 for t in tasks) and any(t["ticks"] > 0 for t in tasks)


def test_probes_agree_with_spark_s_own_sql_metrics(spark):
    # Spark's figures, which nobody here computed: each probed operator's numOutputRows equals the probe's rows; a
    # pipeline ending in a hash aggregation holds its probe's time between Spark's two clocks around it: at least
    # the aggregation's build ("time in aggregation build", which leaves out making its hash maps), at most the
    # pipeline's duration (from its iterator's creation to its end); Spark floors each task's ms, 4 tasks here
    rows, nodes = timed(spark[0], "select id % 5 k, sum(id * 3) s from range(0, 4000000, 1, 4) where id % 3 != 0 "
                                  "group by 1")
    assert len(rows) == 5
    compared = set()
    for probe in (n for n in nodes if n.nodeName() == "CloudprofilerProbe"):
        child = probe.children().apply(0)
        rows = metric(child, "numOutputRows")
        if rows is not None:
            assert metric(probe, "cpRows") == rows, child.nodeName()
            compared.add(child.nodeName())
    for pipeline in (n for n in nodes if n.nodeName().startswith("WholeStageCodegen")):
        probe = pipeline.children().apply(0)
        aggregate = probe.children().apply(0)
        if probe.nodeName() == "CloudprofilerProbe" and metric(aggregate, "numOutputRows") == 20:  # the partial one
            timed_ms = metric(probe, "cpTime") / 1e6
            build_ms, pipeline_ms = metric(aggregate, "aggTime"), metric(pipeline, "pipelineTime")
            assert build_ms <= timed_ms + 1 <= pipeline_ms + 4 + 1, (build_ms, timed_ms, pipeline_ms)
            compared.add("pipeline")
    assert {"Range", "Filter", "HashAggregate", "pipeline"} <= compared, compared


def test_a_sort_s_own_time_holds_spark_s_sort_time(spark):
    # Spark's "sort time" (the sorter's sort alone, floored to ms per task) is part of the Sort's own time, which
    # also holds putting the rows into the sorter and reading them back: the probe above the Sort less the probe
    # below it holds it, within their errors; and the Sort with its child lies within the pipeline's duration
    # a window sorts each partition by two keys, so the sort compares rows (no radix sort) and takes its time
    rows, nodes = timed(spark[0], "select max(rk) m from (select rank() over (partition by id % 2 order by r) rk "
                                  "from (select id, rand(7) r from range(0, 400000, 1, 2)))")
    assert rows[0].m == 200000
    hz = cp.tsc_frequency().hz
    pipeline = next(n for n in nodes if n.nodeName().startswith("WholeStageCodegen")
                    and n.children().apply(0).children().apply(0).nodeName() == "Sort")
    above = pipeline.children().apply(0)
    sort = above.children().apply(0)
    below = sort.children().apply(0)
    assert below.nodeName() == "CloudprofilerProbe"
    own_ms = (metric(above, "cpTime") - metric(below, "cpTime")) / 1e6
    error_ms = (metric(above, "cpTicksError") ** 2 + metric(below, "cpTicksError") ** 2) ** 0.5 / hz * 1e3
    sort_ms, pipeline_ms = metric(sort, "sortTime"), metric(pipeline, "pipelineTime")
    assert sort_ms > 50 and sort_ms <= own_ms + 3 * error_ms, (sort_ms, own_ms, error_ms)
    assert metric(above, "cpTime") / 1e6 <= pipeline_ms + 2 + 3 * error_ms, (pipeline_ms, own_ms, error_ms)


def test_a_join_whose_matches_all_come_first_takes_no_less_time_than_its_streamed_side(spark):
    # all 500 matches come from the first rows of a partition of 25,000: the join's last gap spans the other
    # 24,500 rows of the range, which a sample of one gap in 64 missed (or counted 64 times); it is timed exactly,
    # so the join's time holds the range's, within the estimates' errors. Run twice: the first run's rows go
    # through code the JIT has not compiled yet, whose stalls widen every estimate's error
    rows, nodes = timed(spark[0], "select count(*) c from range(0, 25000, 1, 1) r join (select id k from range(500)) "
                                  "s on r.id = s.k", runs=2)
    assert rows[0].c == 500
    probes = [n for n in nodes if n.nodeName() == "CloudprofilerProbe"]

    def above(operator, child):
        """The probe above operator whose child is child (a probe, or None: any)."""
        [found] = [p for p in probes if p.children().apply(0).nodeName() == operator and (
            child is None or p.children().apply(0).children().apply(0) == child)]
        return found

    # up the chain: the range, the join, the projection above it (its rows come through the join: its last gap is
    # as long)
    [streamed] = [p for p in probes if p.children().apply(0).nodeName() == "Range" and metric(p, "cpRows") == 25000]
    join = above("BroadcastHashJoin", streamed)
    chain = [streamed, join, above("Project", join)]
    times = [(metric(p, "cpTicks"), metric(p, "cpTicksError")) for p in chain]
    for (below, below_error), (above, above_error) in zip(times, times[1:]):
        assert above >= below - 3 * (below_error + above_error), times


def test_a_merge_join_whose_last_match_comes_early_holds_the_rest_of_its_input_s_reading(spark):
    # a merge join reads its inputs' pipelines from its own: its 20,000 matches come from the first rows of a range,
    # and the gap after its last row (past its 16,384th: one gap in 256 is in the sample) holds the reading (a hash
    # per row) of the range's other 280,000 rows, as the join looks for a key past them all. Its inputs' probes find
    # that gap long, as a probe below does in one pipeline, so the join's time holds that reading: most of Spark's
    # pipeline time of the range's pipeline (its duration, in ms), which runs from the join's first call to its last
    # (one partition: no exchange between them)
    session = spark[0]
    partitions = session.conf.get("spark.sql.shuffle.partitions")
    session.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        rows, nodes = timed(session, "select /*+ MERGE(b) */ count(*) c, max(a.h) m from (select id, "
                                     "sha2(cast(id as string), 512) h from range(0, 300000, 1, 1)) a join "
                                     "(select id k from range(0, 20000, 1, 1) union all select 1000000000000 k) b "
                                     "on a.id = b.k", runs=2)
    finally:
        session.conf.set("spark.sql.shuffle.partitions", partitions)
    assert rows[0].c == 20000
    [join] = [n for n in nodes if n.nodeName() == "CloudprofilerProbe"
              and n.children().apply(0).nodeName() == "SortMergeJoin"]
    [reading] = [n for n in nodes if n.nodeName().startswith("WholeStageCodegen") and "Range (0, 300000" in
                 n.treeString() and "SortMergeJoin" not in n.treeString()]
    joined_ms, reading_ms = metric(join, "cpTime") / 1e6, metric(reading, "pipelineTime")
    assert reading_ms > 100 and joined_ms >= 0.8 * reading_ms, (joined_ms, reading_ms)


def row_folder(session, logs):
    """The driver's (the local executor's) folder of channel files, as the native library writes them."""
    return logs.parent / "local" / session.sparkContext.applicationId / "vm-driver"


def logged_partitions(session, logs) -> list:
    """The partitions of the sampled rows' records of their shuffle partitions so far, read as their files say."""
    session._jvm.io.cloudprofiler.CloudProfiler.flushAll()
    bits = tables.channel("shuffled_rows").keys["partition_bits"]
    logged = [read_log_bytes(str(p), p.read_bytes()) for p in row_folder(session, logs)
              .glob("spark.shuffle.partitions.*.arrows")]
    return [i & ((1 << int(log.metadata[bits])) - 1) for log in logged
            for i in log.table().column("tuple_id").to_pylist()]


def row_files(folder, probe):
    """The files of probe's row channel in folder, read (a file still open reads up to its last flush)."""
    return [read_log_bytes(str(path), path.read_bytes()) for path in folder.glob(f"spark.operator.{probe}.*.arrows")]


def timed(session, sql: str, runs: int = 1):
    """`sql` run `runs` times with its operators timed: the last run's rows, and the nodes of its executed plan."""
    session.conf.set(OPERATORS, "true")
    try:
        for _ in range(runs):
            df = session.sql(sql)
            rows = df.collect()
        return rows, list(plan_nodes(df._jdf.queryExecution().executedPlan()))
    finally:
        session.conf.unset(OPERATORS)


def logged_ids(session, logs, query):
    """query() (a DataFrame) collected with its operators timed: its rows, and per operator of its plan whose probe
    logged rows the ids it logged (once the JVM flushed every channel)."""
    session.conf.set(OPERATORS, "true")
    try:
        df = query()
        rows = df.collect()
        nodes = list(plan_nodes(df._jdf.queryExecution().executedPlan()))
    finally:
        session.conf.unset(OPERATORS)
    session._jvm.io.cloudprofiler.CloudProfiler.flushAll()
    ids = {}
    for node in nodes:
        found = re.fullmatch(r"CloudprofilerProbe (\d+) \((\w+)\)", node.simpleString(0))
        for log in row_files(row_folder(session, logs), int(found[1])) if found else ():
            ids.setdefault(found[2], set()).update(log.table().column("tuple_id").to_pylist())
    return rows, ids


def test_the_rows_a_python_udf_reads_are_logged_at_the_operator_below_it_and_at_the_udf(spark):
    # a range, a filter keeping even ids, a Python UDF: the filter's probe, the UDF's input, logs the range's
    # sampled rows that pass (the hop from the range to the filter) and its own rows by ordinal, flagged (bit 31),
    # as the probe above the UDF numbers the UDF's rows (the hop from the filter to the UDF)
    session, logs = spark
    double = F.udf(lambda v: v * 2, "long")
    time.sleep(1.1)  # every open row channel idle a second: this query's channels may take their places
    rows, ids = logged_ids(session, logs, lambda: session.range(0, 3000, 1, 1).where("id % 2 = 0")
                           .select(double("id").alias("d")).agg(F.sum("d")))
    assert rows[0][0] == 2 * sum(range(0, 3000, 2))
    [udf] = [v for k, v in ids.items() if k.endswith("EvalPython")]  # Spark 4 runs it through Arrow
    [task] = {i >> 32 for i in ids["Range"]}
    assert ids["Range"] == {task << 32 | ordinal for ordinal in (0, 1024, 2048)}  # 1 in 1,024, every one even
    assert udf == {task << 32 | 1 << 31 | ordinal for ordinal in (0, 1024)}  # the 1,500 rows in and out
    assert ids["Filter"] == ids["Range"] | udf


def test_a_long_session_logs_sampled_rows_past_the_open_channels_limit(spark):
    # queries of a range and a filter take two sampled rows' channels each, more than the JVM keeps open; the
    # query that comes when they have been idle a second (a channel then closes to make room) still logs its
    # sampled rows, and every closed channel's file holds every record logged to it
    session, logs = spark
    session.conf.set(OPERATORS, "true")
    try:
        for _ in range(ROW_CHANNELS_OPEN // 2 + 1):
            assert session.sql("select count(*) c from range(0, 3000, 1, 1) where id % 2 = 0").first().c == 1500
    finally:
        session.conf.unset(OPERATORS)
    time.sleep(1.1)
    rows, ids = logged_ids(session, logs, lambda: session.sql("select count(*) c from range(0, 5000, 1, 1) "
                                                              "where id % 3 = 0"))
    assert rows[0].c == len(range(0, 5000, 3))
    # the task's rows of ordinals 0, 1024, ... 4096 at the range; those of them that are multiples of 3 on
    ordinals = {operator: sorted(i & 0xFFFFFFFF for i in ids[operator]) for operator in ("Range", "Filter")}
    assert ordinals == {"Range": [0, 1024, 2048, 3072, 4096], "Filter": [0, 3072]}
    folder = row_folder(session, logs)
    files = [read_log_bytes(str(p), p.read_bytes()) for p in folder.glob("spark.operator.*.arrows")]
    closed = [log for log in files if log.ended]
    assert len(closed) >= len(files) - ROW_CHANNELS_OPEN > 0  # the limit was reached: channels closed meanwhile
    for log in closed:
        meta = log.metadata
        assert int(meta["records.written"]) == int(meta["records.logged"]) == log.rows > 0, (log.path, meta)


def test_the_channels_of_a_query_that_ended_close_once_idle(spark):
    # no task uses a query's sampled rows' channels once it ended: at the first collection after rows.idleSeconds
    # they close, their files end, and every record logged to them is in them
    session, logs = spark
    session.conf.set(OPERATORS, "true")
    try:
        df = session.sql("select count(*) c from range(0, 4000, 1, 1) where id % 2 = 0")
        assert df.collect()[0].c == 2000
        ended = time.monotonic()
        probes = [int(found[1]) for node in plan_nodes(df._jdf.queryExecution().executedPlan())
                  if (found := re.fullmatch(r"CloudprofilerProbe (\d+) \(\w+\)", node.simpleString(0)))]
    finally:
        session.conf.unset(OPERATORS)
    folder = row_folder(session, logs)
    session._jvm.io.cloudprofiler.CloudProfiler.flushAll()
    files = [log for probe in probes for log in row_files(folder, probe)]
    count = len(files)  # the range's, the filter's and the projection's above it: open
    assert count >= 2 and not any(log.ended for log in files), [(log.path, log.ended) for log in files]
    while time.monotonic() - ended < ROWS_IDLE_S + 10:
        files = [log for probe in probes for log in row_files(folder, probe)]
        if all(log.ended for log in files):
            break
        time.sleep(0.5)
    assert len(files) == count and all(log.ended for log in files), [(log.path, log.ended) for log in files]
    assert time.monotonic() - ended >= ROWS_IDLE_S - 0.5  # not before they were idle that long
    for log in files:
        meta = log.metadata
        assert int(meta["records.written"]) == int(meta["records.logged"]) == log.rows > 0, (log.path, meta)


@pytest.mark.parametrize("window, logged", [(("1 second",), True), (("1500 milliseconds", "1 second"), True),
                                            (("10 seconds", "1 second"), False)], ids=["tumbling", "sliding", "long"])
def test_a_stateful_aggregation_returns_the_same_rows_with_its_rows_partitions_logged(spark, tmp_path, window, logged):
    # a streaming count and sum per window (Spark computes a tumbling one above a filter on its time, a sliding one
    # by expanding each row to a row per window below a filter that keeps the windows that hold its time) and per
    # key computed in a projection (a string and a number): the top of the chain below the watermark evaluates the
    # columns the shuffle's partition reads and logs each sampled row's partitions, but for a window longer than 8
    # slides (the plugin's ShuffledRows.MAX_MADE); the results are those of the same queries untimed, and of the same
    # aggregation of the files as a batch
    session, logs = spark
    source = tmp_path / "in"
    source.mkdir()
    start_ms = (int(time.time()) - 300) * 1000  # 5 minutes ago, on a second: the rows' times span 4 seconds
    for n in range(3):
        (source / f"part-{n}.json").write_text("".join(
            f'{{"v": {n * 1000 + i}, "name": "k{i % 7}", "t": {start_ms + n * 1000 + i}}}\n' for i in range(1500)))
    time.sleep(1.1)  # the open row channels idle a second: this query's channels may take their places
    earlier = logged_partitions(session, logs)  # the other window's query's

    def rows(read):
        return (read.schema("v long, name string, t long").json(str(source))
                .select("v", F.upper("name").alias("key"), (F.col("v") % 3).alias("m"),
                        F.timestamp_millis("t").alias("t")))

    def aggregated(frame):
        return frame.groupBy(F.window("t", *window), "key", "m").agg(F.count("*").alias("n"), F.sum("v").alias("s"))

    def counted(operators: bool):
        name = f"counted_{'_'.join(window).replace(' ', '')}_{operators}"
        session.conf.set(OPERATORS, str(operators).lower())
        try:
            stream = rows(session.readStream.option("maxFilesPerTrigger", 3)).withWatermark("t", "1 hour")
            query = (aggregated(stream).writeStream.queryName(name).outputMode("complete").format("memory")
                     .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / name)).start())
            query.awaitTermination(120)
        finally:
            session.conf.unset(OPERATORS)
        return sorted(tuple(r) for r in session.sql(f"select window.start, key, m, n, s from {name}").collect())

    plain, timed = counted(False), counted(True)
    batch = sorted(tuple(r) for r in aggregated(rows(session.read)).select("window.start", "key", "m", "n", "s")
                   .collect())
    assert timed == plain == batch and len(batch) >= 4 * 7 * 3
    partitions = logged_partitions(session, logs)
    assert (len(partitions) > len(earlier)) == logged and set(partitions) <= set(range(4)), partitions  # 4 of them
