"""Streaming queries, per micro-batch: Spark's progress of each batch (the driver's table "streaming_batches":
when its trigger started, its input rows and rates, the driver's phases, the state's rows) beside what its tasks did
(the task table: each job of a batch carries its query's run id and the batch id) and, where operator timing was on
(spark.cloudprofiler.operators), each operator's time in the batch.

A micro-batch plans the same physical plan each time with new probes, so an operator is followed from batch to
batch by its place in the plan: `position`, the probes of the batch in the order the rule placed them (its SQL
executions in order, then its probes from the root down). Everything runs on Spark: only the rows per batch (and per
batch and operator) come back."""
from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from .operators import operators
from .tasks import in_scope, values_of

BATCH = ["query_id", "run_id", "batch_id"]



def _attempts(app, streaming_query_id):
    """The task table's attempts of streaming batches (of the queries named: an id or a list of them; None: all)."""
    attempts = app.task_table().where(F.col("streaming_batch_id").isNotNull())
    return in_scope(attempts, streaming_query_id=streaming_query_id)


def _batch_keys():
    """The task table's streaming columns under the progress table's names (BATCH)."""
    return [F.col(f"streaming_{name}").alias(name) for name in BATCH]


def attempts_by_batch(app, streaming_query_id=None):
    """task_attempt_id and its batch (BATCH) for every attempt of a streaming batch in scope."""
    return _attempts(app, streaming_query_id).select("task_attempt_id", *_batch_keys())


def batch_tasks(app, streaming_query_id=None):
    """Per streaming query run and batch (the task table's job properties): jobs, task attempts and their executor
    run time in seconds."""
    return (_attempts(app, streaming_query_id).groupBy(*_batch_keys())
            .agg(F.countDistinct("job_id").alias("jobs"), F.count(F.lit(1)).alias("tasks"),
                 (F.sum("executor_run_time_ms") / 1e3).alias("task_s")))


def _placed_operators(app, streaming_query_id):
    """operators() of the batches' SQL executions (of the queries named), each with its batch (BATCH) and its place
    in the batch's plan. Those of every batch are computed once and kept: batches(), batch_operators() and the
    source latency ask for them in turn (0.65 s and 10 Spark jobs each on the demo's folder, warm)."""
    placed = app.keep("placed_operators", lambda: _place_operators(app))
    if streaming_query_id is None:
        return placed
    return placed.where(F.col("query_id").isin(*values_of(streaming_query_id)))


def _place_operators(app):
    executions = (_attempts(app, None).where(F.col("sql_execution_id").isNotNull())
                  .select("sql_execution_id", *_batch_keys()).distinct())
    place = Window.partitionBy(*BATCH).orderBy("sql_execution_id", "probe_id")
    return operators(app).join(executions, "sql_execution_id").withColumn("position", F.row_number().over(place))


def batch_operators(app, streaming_query_id=None):
    """One row per streaming query run, batch and operator probe: query_id, run_id, batch_id, position (the
    operator's place in the batch's plan, the same in every batch of a run), probe_id, operator, description,
    tasks, rows, inclusive_s, exclusive_s with their standard errors, and `share`: the exclusive time's share of the
    batch's task time. Empty where operator timing was off."""
    ops = _placed_operators(app, streaming_query_id)
    with_tasks = ops.join(batch_tasks(app, streaming_query_id).select(*BATCH, "task_s"), BATCH, "left")
    return with_tasks.select(
        *BATCH, "position", "probe_id", "sql_execution_id", "operator", "description", "tasks", "rows",
        "inclusive_s", "inclusive_err_s", "exclusive_s", "exclusive_err_s",
        F.when(F.col("task_s") > 0, F.col("exclusive_s") / F.col("task_s")).alias("share"))


def batches(app, streaming_query_id=None):
    """One row per micro-batch of every streaming query (or of those named: an id or a list of them): the columns
    of its progress (streaming_progress(): its driver phases in ms, trigger_execution_ms being the batch's whole
    time), then committed_ms, event_lag_min_ms, event_lag_max_ms, jobs, tasks, task_s (its jobs, tasks and their run
    time), operators_s, top_position, top_operator, top_operator_s (where operator timing was on: the operators'
    exclusive time summed and the operator that took longest). committed_ms: when the batch ended (its trigger's
    start plus its time); where the query has event times (a watermark), event_lag_min_ms and event_lag_max_ms are
    the newest and the oldest of its records' age in event time at that moment: their latency from the source's
    event time to the sink, by the driver's wall clock against the event times' clock."""
    progress = app.streaming_progress()
    if streaming_query_id is not None:
        progress = progress.where(F.col("query_id").isin(*values_of(streaming_query_id)))
    ops = _placed_operators(app, streaming_query_id)  # the batch's task time is joined below, once
    top = F.max_by(F.struct("position", "operator", "exclusive_s"), "exclusive_s")
    per_batch = ops.groupBy(*BATCH).agg(F.sum("exclusive_s").alias("operators_s"), top.alias("top"))
    joined = progress.join(batch_tasks(app, streaming_query_id), BATCH, "left").join(per_batch, BATCH, "left")
    committed = F.col("trigger_start_ms") + F.col("trigger_execution_ms")
    return joined.select(
        *progress.columns, committed.alias("committed_ms"),
        (committed - F.col("event_time_max_ms")).alias("event_lag_min_ms"),
        (committed - F.col("event_time_min_ms")).alias("event_lag_max_ms"), F.coalesce("jobs", F.lit(0)).alias("jobs"),
        F.coalesce("tasks", F.lit(0)).alias("tasks"), "task_s", "operators_s",
        F.col("top.position").alias("top_position"), F.col("top.operator").alias("top_operator"),
        F.col("top.exclusive_s").alias("top_operator_s")).orderBy("query_id", "trigger_start_ms", "batch_id")

