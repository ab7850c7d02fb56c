"""Spark's task metrics and job properties in the task table, held to Spark's own figures: a real local application
with a shuffle that spills, a retried attempt, job groups, tags and SQL executions; every attempt's columns against
the status store's (the REST API Spark's UI serves)."""
import json
import urllib.error
import urllib.parse
import urllib.request

import pandas as pd
import pytest

import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application
from cloudprofiler.analysis.report.findings import _why

SKEWED_ROWS = 400_000  # the skewed query's rows, 7 in 8 of which one reducer reads
# REST taskList field -> task table column (times in ms but CPU and shuffle write time in ns, as Spark keeps them)
REST_METRICS = {
    "executorRunTime": "executor_run_time_ms", "executorCpuTime": "executor_cpu_time_ns",
    "executorDeserializeTime": "executor_deserialize_time_ms",
    "executorDeserializeCpuTime": "executor_deserialize_cpu_time_ns",
    "resultSerializationTime": "result_serialization_time_ms", "jvmGcTime": "jvm_gc_time_ms",
    "schedulerDelay": "scheduler_delay_ms", "gettingResultTime": "getting_result_time_ms",
    "resultSize": "result_size_bytes", "peakExecutionMemory": "peak_execution_memory_bytes",
    "memoryBytesSpilled": "memory_spilled_bytes", "diskBytesSpilled": "disk_spilled_bytes",
    "inputMetrics.bytesRead": "input_bytes", "inputMetrics.recordsRead": "input_records",
    "outputMetrics.bytesWritten": "output_bytes", "outputMetrics.recordsWritten": "output_records",
    "shuffleReadMetrics.localBlocksFetched": "shuffle_local_blocks",
    "shuffleReadMetrics.remoteBlocksFetched": "shuffle_remote_blocks",
    "shuffleReadMetrics.localBytesRead": "shuffle_local_bytes",
    "shuffleReadMetrics.remoteBytesRead": "shuffle_remote_bytes",
    "shuffleReadMetrics.remoteBytesReadToDisk": "shuffle_remote_bytes_to_disk",
    "shuffleReadMetrics.fetchWaitTime": "shuffle_fetch_wait_ms",
    "shuffleReadMetrics.recordsRead": "shuffle_read_records",
    "shuffleWriteMetrics.bytesWritten": "shuffle_write_bytes",
    "shuffleWriteMetrics.recordsWritten": "shuffle_write_records",
    "shuffleWriteMetrics.writeTime": "shuffle_write_time_ns",
}


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _served(url: str) -> "str | None":
    """The page's path as served, after any redirect (Spark's UI sends a path it lacks to its jobs page); None where
    it answers with an error."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return urllib.parse.urlparse(answer.geturl()).path
    except urllib.error.HTTPError:
        return None


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The application's folder and Spark's own view of it (REST API, read before the application stops)."""
    log_dir = tmp_path_factory.mktemp("metrics-logs")
    spark = (cps.builder(log_dir=str(log_dir), local_dir=str(tmp_path_factory.mktemp("metrics-local")),
                         calibration_enabled=False, ui_enabled=False)  # Spark's UI only: no Cloudprofiler tab
             .master("local[2,2]")  # a task may fail once
             .config("spark.ui.port", "0")  # any free port: Spark's REST API is what the table is held to
             .config("spark.shuffle.spill.numElementsForceSpillThreshold", "2000")  # spill, with little data
             .config("spark.sql.shuffle.partitions", "3")
             .getOrCreate())
    sc = spark.sparkContext

    def _fail_first_attempt(rows):  # defined here so that workers get it by value, not by module
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            raise RuntimeError("failing the first attempt on purpose")
        yield from rows

    sc.setJobGroup("q-rdd", "a shuffle with a retried attempt")
    sc.addJobTag("tag-a")
    pairs = sc.parallelize(range(20_000), 4).mapPartitions(_fail_first_attempt).map(lambda x: (x % 97, x))
    assert len(pairs.groupByKey(3).mapValues(len).collect()) == 97
    sc.removeJobTag("tag-a")
    sc.setJobGroup("q-sql", "SQL with a shuffle and a sort that spills")
    sc.addJobTag("tag-b")
    sc.addJobTag("tag-c")
    ordered = spark.range(0, 30_000, 1, 4).selectExpr("(id * 7919) % 30000 as k").orderBy("k").collect()
    assert [r.k for r in ordered] == list(range(30_000))
    # 7 rows in 8 to one partition: enough rows that it takes longer than the others even on a loaded machine
    skewed = spark.range(0, SKEWED_ROWS, 1, 2).selectExpr("if(id % 8 = 0, id, 0) as k").repartition(3, "k")
    assert skewed.selectExpr("sum(k)").first()[0] == sum(range(0, SKEWED_ROWS, 8))
    sc._jsc.sc().listenerBus().waitUntilEmpty()  # the status store has seen every task's end
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    rest = {"jobs": _get(f"{api}/jobs"), "sql": _get(f"{api}/sql?details=false"), "tasks": [],
            "stages": _get(f"{api}/stages")}
    for stage in rest["stages"]:
        rest["tasks"] += [{**t, "stageId": stage["stageId"], "stageAttemptId": stage["attemptId"]} for t in _get(
            f"{api}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=100000")]
    rest["tab"] = [_served(f"{sc.uiWebUrl}/cloudprofiler/{page}") for page in ("", "metrics/prometheus/")]
    with urllib.request.urlopen(f"{sc.uiWebUrl}/jobs/", timeout=30) as answer:
        rest["tab_listed"] = 'href="/cloudprofiler/"' in answer.read().decode()
    app_id = sc.applicationId
    spark.stop()
    return open_application(str(log_dir / app_id)), rest


def _rest_value(task: dict, field: str):
    """A task's field of the REST API: at the top (schedulerDelay, gettingResultTime) or in its taskMetrics."""
    if field in task:
        return task[field]
    value = task.get("taskMetrics") or {}
    for part in field.split("."):
        value = value.get(part)
    return value


def test_with_the_ui_setting_off_the_application_has_no_cloudprofiler_tab(run):
    _, rest = run
    assert rest["tab"] == [None, None] or not any(
        (path or "").startswith("/cloudprofiler") for path in rest["tab"]), rest["tab"]
    assert not rest["tab_listed"]


def test_every_attempt_has_sparks_own_figures(run):
    app, rest = run
    table = {r["task_attempt_id"]: r for r in app.task_table().toPandas().to_dict("records")}
    assert {t["taskId"] for t in rest["tasks"]} == set(table)
    assert any(t["status"] == "FAILED" for t in rest["tasks"])
    for task in rest["tasks"]:
        row = table[task["taskId"]]
        assert (row["stage_id"], row["stage_attempt"], row["partition"], row["attempt_number"]) == (
            task["stageId"], task["stageAttemptId"], task["partitionId"], task["attempt"])
        ours = {column: row[column] for column in REST_METRICS.values()}
        theirs = {column: _rest_value(task, field) for field, column in REST_METRICS.items()}
        assert ours == theirs, task["taskId"]
    # the job exercises what the columns are for
    rows = table.values()
    assert sum(r["disk_spilled_bytes"] for r in rows) > 0 and sum(r["memory_spilled_bytes"] for r in rows) > 0
    assert sum(r["shuffle_write_records"] for r in rows) == sum(r["shuffle_read_records"] for r in rows) > 0
    assert all(r["executor_cpu_time_ns"] > 0 for r in rows if r["status"] == "SUCCESS")


# REST stage field -> task table column it sums, for the metrics a stage of the REST API carries
REST_STAGE_SUMS = {
    "executorRunTime": "executor_run_time_ms", "executorCpuTime": "executor_cpu_time_ns",
    "executorDeserializeTime": "executor_deserialize_time_ms",
    "executorDeserializeCpuTime": "executor_deserialize_cpu_time_ns", "resultSize": "result_size_bytes",
    "jvmGcTime": "jvm_gc_time_ms", "resultSerializationTime": "result_serialization_time_ms",
    "memoryBytesSpilled": "memory_spilled_bytes", "diskBytesSpilled": "disk_spilled_bytes",
    "inputBytes": "input_bytes", "inputRecords": "input_records", "outputBytes": "output_bytes",
    "outputRecords": "output_records", "shuffleRemoteBlocksFetched": "shuffle_remote_blocks",
    "shuffleLocalBlocksFetched": "shuffle_local_blocks", "shuffleFetchWaitTime": "shuffle_fetch_wait_ms",
    "shuffleRemoteBytesRead": "shuffle_remote_bytes", "shuffleRemoteBytesReadToDisk": "shuffle_remote_bytes_to_disk",
    "shuffleLocalBytesRead": "shuffle_local_bytes", "shuffleReadRecords": "shuffle_read_records",
    "shuffleWriteBytes": "shuffle_write_bytes", "shuffleWriteTime": "shuffle_write_time_ns",
    "shuffleWriteRecords": "shuffle_write_records",
}


def test_every_stage_sums_its_attempts_metrics_as_sparks_stage_page_does(run):
    app, rest = run
    ours = {(r["stage_id"], r["stage_attempt"]): r for r in app.stages().toPandas().to_dict("records")}
    run_stages = [s for s in rest["stages"] if s["status"] != "SKIPPED"]  # a skipped stage ran no task
    assert set(ours) == {(s["stageId"], s["attemptId"]) for s in run_stages}
    for stage in run_stages:
        row = ours[stage["stageId"], stage["attemptId"]]
        assert {c: row[c] for c in REST_STAGE_SUMS.values()} == {c: stage[f] for f, c in REST_STAGE_SUMS.items()}
        assert row["tasks"] == stage["numCompleteTasks"] + stage["numFailedTasks"]
    assert sum(r["disk_spilled_bytes"] for r in ours.values()) > 0  # the job exercises the sums


def test_every_attempt_has_its_jobs_group_description_tags_and_sql_execution(run):
    app, rest = run
    jobs = {j["jobId"]: j for j in rest["jobs"]}
    execution_of_job = {job: e["id"] for e in rest["sql"] for job in e["successJobIds"] + e["failedJobIds"]}
    rows = app.task_table().toPandas().to_dict("records")
    for row in rows:
        job = jobs[row["job_id"]]
        assert row["job_group"] == job["jobGroup"] and row["job_description"] == job["description"]
        assert row["call_site"] == job["name"] and ".py:" in row["call_site"], (row["call_site"], job["name"])
        assert set(row["job_tags"].split(",")) == set(job["jobTags"])
        execution = execution_of_job.get(row["job_id"])
        assert pd.isna(row["sql_execution_id"]) if execution is None else row["sql_execution_id"] == execution
        assert row["connect_session_id"] is None and row["connect_operation_id"] is None
    assert {r["job_group"] for r in rows} == {"q-rdd", "q-sql"}
    assert {r["job_tags"] for r in rows if r["job_group"] == "q-rdd"} == {"tag-a"}
    assert all({"tag-b", "tag-c"} <= set(r["job_tags"].split(",")) for r in rows if r["job_group"] == "q-sql")


def test_tasks_are_scoped_to_a_query(run):
    app, _ = run
    everything = app.tasks().toPandas()
    sql = everything[everything["job_group"] == "q-sql"]
    assert set(app.tasks(job_group="q-sql").toPandas()["task_attempt_id"]) == set(sql["task_attempt_id"])
    execution = int(sql["sql_execution_id"].min())
    scoped = app.tasks(sql_execution_id=[execution, -1], job_tag=["tag-c", "tag-x"]).toPandas()
    assert len(scoped) and set(scoped["task_attempt_id"]) == set(sql[sql["sql_execution_id"] == execution][
        "task_attempt_id"])
    assert set(app.stages(job_group="q-rdd").toPandas()["stage_id"]) == set(
        everything[everything["job_group"] == "q-rdd"]["stage_id"])


def test_tasks_carry_the_metrics_beside_the_tsc_durations(run):
    app, _ = run
    tasks = app.tasks().toPandas().set_index("task_attempt_id")
    table = app.task_table().toPandas().set_index("task_attempt_id")
    for column in REST_METRICS.values():
        assert (tasks[column] == table.loc[tasks.index, column]).all(), column
    for row in tasks.itertuples():
        assert list(row.job_tags) == table.loc[row.Index, "job_tags"].split(",")
    assert tasks["duration_ns"].notna().all()


def test_a_straggler_is_explained_by_the_records_it_read(run):
    """The skewed stage's reducer that got 7 rows in 8: its records beside the median's, in the finding's words."""
    app, _ = run
    tasks = app.tasks(job_group="q-sql").toPandas()
    reducers = tasks[(tasks["shuffle_read_records"] > 0) & (tasks["shuffle_read_records"] <= SKEWED_ROWS)]
    stage = reducers.groupby("stage_id")["shuffle_read_records"].max().idxmax()
    heavy = reducers[reducers["stage_id"] == stage].sort_values("shuffle_read_records").iloc[-1]
    assert heavy["shuffle_read_records"] >= SKEWED_ROWS * 7 // 8
    every = app.stragglers(ratio=1.0, job_group="q-sql").toPandas()  # every attempt slower than its median
    row = next(every[every["task_attempt_id"] == heavy["task_attempt_id"]].itertuples())
    median = reducers[reducers["stage_id"] == stage]["shuffle_read_records"].median()
    assert (row.records_read, row.median_records_read) == (heavy["shuffle_read_records"], median)
    assert row.spark_duration_ms == heavy["spark_duration_ms"]
    assert f"it read {heavy['shuffle_read_records'] / median:.1f}x the median records (" in _why(row)
