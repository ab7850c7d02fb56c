"""Every task attempt: Spark's view (the driver's task table) beside its TSC records (spark.task.start/end, whose
tuple id is the task attempt id), with the duration and its bound."""
from __future__ import annotations

import errno
import numbers

from pyspark.sql import functions as F

from ..errors import InvalidArgumentError

from .catalog import TASK_CHANNELS
from .joins import merge_join, with_durations
from .reader import TASK_METRICS

JOB_COLUMNS = ["job_group", "job_description", "job_tags", "sql_execution_id", "connect_session_id",
               "connect_operation_id", "streaming_query_id", "streaming_run_id", "streaming_batch_id",
               "call_site"]
TASK_COLUMNS = ["task_attempt_id", "job_id", "stage_id", "stage_attempt", "partition", "attempt_number",
                "executor_id", "host", "status", "failure_reason", "launch_time_ms", "finish_time_ms",
                "spark_duration_ms", "start_t_ns", "end_t_ns", "duration_ns", "err_ns", "path", "extrapolated",
                "unbounded", "launch_t_ns", "finish_t_ns", *TASK_METRICS, *JOB_COLUMNS]


def task_records(app, channel: str, prefix: str):
    """The task records of `channel` (spark.task.start or .end): task_attempt_id and <prefix>_tsc, _domain_id, _t_ns."""
    columns = ["tuple_id", "tsc", "domain_id", "t_ns"]
    frame = app.log_frame(channel, "records", columns, required=False)
    return frame.select(F.col("tuple_id").alias("task_attempt_id"), F.col("tsc").alias(f"{prefix}_tsc"),
                        F.col("domain_id").alias(f"{prefix}_domain_id"), F.col("t_ns").alias(f"{prefix}_t_ns"))


def tasks(app):
    """One row per task attempt (TASK_COLUMNS). Attempts of the task table without TSC records (task logging off,
    an executor lost before its logs were copied) have null TSC columns and unbounded true; TSC records without a
    row in the task table (a running application: the table is written at its end) have null Spark columns.
    launch_t_ns / finish_t_ns: Spark's millisecond times placed on the same axis through the driver's wall clock.
    Spark's metrics and the job's properties as the task table has them, job_tags split into an array (`in_scope`
    keeps the attempts of some jobs only)."""
    start, end = (task_records(app, channel, prefix) for channel, prefix in zip(TASK_CHANNELS, ("start", "end")))
    records = merge_join(start, end, "task_attempt_id", "full_outer")
    joined = merge_join(app.task_table(), records, "task_attempt_id", "full_outer")
    timed = with_durations(joined, app.timebase)
    base = app.timebase.t_ns_of_wall_ms(0.0)  # t_ns of the wall clock's epoch (NaN without a pairing)
    return timed.select(
        *TASK_COLUMNS[:12],
        (F.col("finish_time_ms") - F.col("launch_time_ms")).alias("spark_duration_ms"),
        "start_t_ns", "end_t_ns", "duration_ns", "err_ns", "path", "extrapolated",
        (F.col("unbounded") | F.col("start_tsc").isNull() | F.col("end_tsc").isNull()).alias("unbounded"),
        (F.col("launch_time_ms") * 1e6 + F.lit(float(base))).alias("launch_t_ns"),
        (F.col("finish_time_ms") * 1e6 + F.lit(float(base))).alias("finish_t_ns"),
        *TASK_METRICS, *JOB_COLUMNS[:2], F.split("job_tags", ",").alias("job_tags"), *JOB_COLUMNS[3:])


# the filters of `in_scope`: name -> the type of its values (a value, or a list of them)
SCOPE_FILTERS = {"job_id": numbers.Integral, "job_group": str, "job_tag": str, "sql_execution_id": numbers.Integral,
                 "connect_session_id": str, "connect_operation_id": str, "streaming_query_id": str,
                 "streaming_batch_id": numbers.Integral}


def check_scope(method: str, scope: dict) -> None:
    """Every filter of `scope` is one of SCOPE_FILTERS with a value (or a list of values) of its type; else
    InvalidArgumentError naming `method`, the filter and the value, before any Spark job."""
    for name, wanted in scope.items():
        if name not in SCOPE_FILTERS:
            raise InvalidArgumentError(errno.EINVAL, f"{method}(): no filter {name!r}; the filters are "
                                                     f"{', '.join(SCOPE_FILTERS)}")
        kind = SCOPE_FILTERS[name]
        if wanted is not None and not all(isinstance(v, kind) and not isinstance(v, bool) for v in values_of(wanted)):
            what = "an integer" if kind is numbers.Integral else "a string"
            raise InvalidArgumentError(errno.EINVAL, f"{method}({name}={wanted!r}): {name} takes {what} or a list of "
                                                     "them")


def in_scope(attempts, job_id=None, job_group=None, job_tag=None, sql_execution_id=None, connect_session_id=None,
             connect_operation_id=None, streaming_query_id=None, streaming_batch_id=None):
    """The attempts of the jobs that match every filter given: a value, or a list of values any of which matches
    (job_tag: one of the job's tags). Attempts without a task table row (a running application) match none."""
    filters = {"job_id": job_id, "job_group": job_group, "sql_execution_id": sql_execution_id,
               "connect_session_id": connect_session_id, "connect_operation_id": connect_operation_id,
               "streaming_query_id": streaming_query_id, "streaming_batch_id": streaming_batch_id}
    for name, wanted in filters.items():
        if wanted is not None:
            attempts = attempts.where(F.col(name).isin(*values_of(wanted)))
    if job_tag is not None:
        attempts = attempts.where(F.arrays_overlap("job_tags", F.array(*[F.lit(t) for t in values_of(job_tag)])))
    return attempts


def values_of(wanted) -> list:
    """A filter's values: the list, tuple or set given, or the one value."""
    return list(wanted) if isinstance(wanted, (list, tuple, set)) else [wanted]
