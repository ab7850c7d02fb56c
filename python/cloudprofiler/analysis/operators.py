"""SQL operators timed by the plugin's probes (spark.cloudprofiler.operators): per SQL execution and probe, the rows,
the inclusive time (the operator with its children), the exclusive time (its own) with their standard errors, its
share of the query's task time, and where it took longest.

The driver writes two tables (cloudprofiler.tables): "operator_nodes" (a row per probe: its operator and the probe
of the operator that consumes its rows) and "operators" (a row per probe and task attempt: rows, inclusive
TSC ticks estimated from a sample of the gaps between rows, that estimate's standard error). The exclusive time of
probe p in task t is ticks(p, t) minus the ticks of p's children in the same task t (a child in another stage ran
in other tasks and is not subtracted); errors add in quadrature; a negative estimate (sampling noise) is clipped
at 0 and counted. Everything runs on Spark: only the aggregates (a row per probe) are ever collected."""
from __future__ import annotations

from pyspark.sql import functions as F

from .joins import merge_join
from .tasks import in_scope

MEDIAN_ACCURACY = 10_000  # percentile_approx: exact up to this many tasks per probe
QUERY = ["sql_execution_id", "probe_id"]

OPERATORS_DDL = (
    "sql_execution_id long, probe_id long, parent_probe_id long, operator string, description string, "
    "stage_id int, tasks long, rows long, inclusive_s double, inclusive_err_s double, exclusive_s double, "
    "exclusive_err_s double, clipped_tasks long, query_task_s double, share double, inclusive_share double, "
    "skew double, max_task_attempt_id long, max_partition int, max_exclusive_s double, median_exclusive_s double, "
    "max_rows long, median_rows double, max_rows_read long, median_rows_read double")


def tsc_hz_of_executors(app) -> tuple[dict, float]:
    """(executor id -> TSC frequency of its host, the default): the probes count ticks of the executor's own TSC,
    whose frequency its log files' metadata give (through its domain); else the operator table's `tsc.hz` (the
    driver's), else the reference domain's."""
    rates = {}
    for f in app.catalog.logs:
        if f.executor_id is not None and f.domain is not None and f.executor_id not in rates:
            hz = app.timebase.hz_of(f.domain)
            if hz == hz and hz > 0:
                rates[f.executor_id] = hz
    default = app.catalog.table_metadata("operators").get("tsc.hz") or app.timebase.hz
    return rates, float(default)


def _attempts(app, **scope):
    """The task table's attempts in `scope`, job_tags split as tasks() splits them."""
    table = app.task_table()
    return in_scope(table.withColumn("job_tags", F.split("job_tags", ",")), **scope)


def _squares(name: str):
    return F.sum(F.col(name) ** 2)


def _seconds(column, rates: dict, default: float):
    """Ticks of the task's executor as seconds."""
    hz = F.lit(default)
    for executor, rate in sorted(rates.items()):
        hz = F.when(F.col("executor_id") == executor, F.lit(rate)).otherwise(hz)
    return column.cast("double") / hz


def operator_tasks(app, **scope):
    """One row per probe and task attempt of the attempts in `scope` (tasks.in_scope): task_attempt_id, probe_id,
    parent_probe_id, operator, sql_execution_id, stage_id, partition, executor_id, rows, rows_read (its children's
    rows in the same task; null for none), inclusive_s, inclusive_err_s, exclusive_s (clipped at 0),
    exclusive_err_s, clipped (the estimate came out negative). Those of every attempt are computed once and kept:
    the stragglers, operators() and the streaming batches' operators read them in turn."""
    if not scope:
        return app.keep("operator_tasks", lambda: _operator_tasks(app))
    return _operator_tasks(app, **scope)


def _operator_tasks(app, **scope):
    rates, default = tsc_hz_of_executors(app)
    nodes = app.operator_nodes().dropDuplicates(["probe_id"]).select("probe_id", "parent_probe_id", "operator")
    attempts = _attempts(app, **scope)
    values = merge_join(app.operator_values(), nodes, "probe_id", "left")
    timed = merge_join(values, attempts.select("task_attempt_id", "sql_execution_id", "stage_id", "partition",
                                               "executor_id"), "task_attempt_id")
    timed = timed.select(
        "task_attempt_id", "probe_id", "parent_probe_id", "operator", "sql_execution_id", "stage_id", "partition",
        "executor_id", "rows", _seconds(F.col("ticks"), rates, default).alias("inclusive_s"),
        _seconds(F.coalesce(F.col("ticks_error"), F.lit(0)), rates, default).alias("inclusive_err_s"))
    children = (timed.where(F.col("parent_probe_id").isNotNull())
                .groupBy("task_attempt_id", F.col("parent_probe_id").alias("probe_id"))
                .agg(F.sum("inclusive_s").alias("children_s"), _squares("inclusive_err_s").alias("children_var"),
                     F.sum("rows").alias("rows_read")))
    own = timed.join(children, ["task_attempt_id", "probe_id"], "left")
    exclusive = F.col("inclusive_s") - F.coalesce(F.col("children_s"), F.lit(0.0))
    return own.select(
        "task_attempt_id", "probe_id", "parent_probe_id", "operator", "sql_execution_id", "stage_id", "partition",
        "executor_id", "rows", "rows_read", "inclusive_s", "inclusive_err_s",
        F.greatest(exclusive, F.lit(0.0)).alias("exclusive_s"),
        F.sqrt(F.col("inclusive_err_s") ** 2 + F.coalesce(F.col("children_var"), F.lit(0.0))).alias("exclusive_err_s"),
        (exclusive < 0).alias("clipped"))


def query_task_time(app, **scope):
    """Per SQL execution: its task attempts' executor run time summed (every attempt, as Spark's stage page sums
    them), in seconds, and how many attempts."""
    return (_attempts(app, **scope).where(F.col("sql_execution_id").isNotNull()).groupBy("sql_execution_id")
            .agg((F.sum("executor_run_time_ms") / 1e3).alias("query_task_s"), F.count(F.lit(1)).alias("query_tasks")))


def operators(app, **scope):
    """One row per SQL execution (the task table's, per task) and probe (OPERATORS_DDL): the operator, its
    description and consumer's probe, the stage that ran it, tasks, rows; inclusive and exclusive seconds summed
    over the tasks with their standard errors; tasks whose exclusive estimate was clipped at 0; the query's task
    time (its attempts' executor run time) and the exclusive (`share`) and inclusive shares of it; skew (max / median
    of the exclusive time per task) and the attempt and partition where it took longest, with its rows produced
    and read (its children's rows) beside the medians over the probe's tasks. Planned lazily."""
    per_task = operator_tasks(app, **scope)
    slowest = F.max_by(F.struct("task_attempt_id", "partition", "exclusive_s", "rows", "rows_read"), "exclusive_s")
    rows = per_task.groupBy(*QUERY).agg(
        F.min("stage_id").alias("stage_id"), F.count(F.lit(1)).alias("tasks"), F.sum("rows").alias("rows"),
        F.sum("inclusive_s").alias("inclusive_s"), F.sqrt(_squares("inclusive_err_s")).alias("inclusive_err_s"),
        F.sum("exclusive_s").alias("exclusive_s"), F.sqrt(_squares("exclusive_err_s")).alias("exclusive_err_s"),
        F.sum(F.col("clipped").cast("long")).alias("clipped_tasks"),
        F.percentile_approx("exclusive_s", 0.5, MEDIAN_ACCURACY).alias("median_exclusive_s"),
        F.percentile_approx("rows", 0.5, MEDIAN_ACCURACY).alias("median_rows"),
        F.percentile_approx("rows_read", 0.5, MEDIAN_ACCURACY).alias("median_rows_read"),
        slowest.alias("slowest"))
    nodes = app.operator_nodes().dropDuplicates(["probe_id"]).select("probe_id", "parent_probe_id", "operator",
                                                                    "description")
    described = rows.join(nodes, "probe_id", "left").join(query_task_time(app, **scope), "sql_execution_id", "left")
    share = F.when(F.col("query_task_s") > 0, F.col("exclusive_s") / F.col("query_task_s"))
    return described.select(
        "sql_execution_id", "probe_id", "parent_probe_id", "operator", "description", "stage_id", "tasks", "rows",
        "inclusive_s", "inclusive_err_s", "exclusive_s", "exclusive_err_s", "clipped_tasks", "query_task_s",
        share.alias("share"),
        F.when(F.col("query_task_s") > 0, F.col("inclusive_s") / F.col("query_task_s")).alias("inclusive_share"),
        F.when(F.col("median_exclusive_s") > 0, F.col("slowest.exclusive_s") / F.col("median_exclusive_s"))
        .alias("skew"),
        F.col("slowest.task_attempt_id").alias("max_task_attempt_id"),
        F.col("slowest.partition").alias("max_partition"),
        F.col("slowest.exclusive_s").alias("max_exclusive_s"), "median_exclusive_s",
        F.col("slowest.rows").alias("max_rows"), F.col("median_rows").cast("double").alias("median_rows"),
        F.col("slowest.rows_read").alias("max_rows_read"),
        F.col("median_rows_read").cast("double").alias("median_rows_read"))

