"""Every task attempt: Spark's view (the driver's task table) beside its TSC records (spark.task.start/end, whose
tuple id is the task attempt id), with the duration and its bound."""
from __future__ import annotations

from pyspark.sql import functions as F

from .catalog import TASK_CHANNELS
from .joins import merge_join, with_durations

TASK_COLUMNS = ["task_attempt_id", "job_id", "stage_id", "stage_attempt", "partition", "attempt_number",
                "executor_id", "host", "status", "failure_reason", "launch_time_ms", "finish_time_ms",
                "spark_duration_ms", "start_t_ns", "end_t_ns", "duration_ns", "err_ns", "path", "extrapolated",
                "unbounded", "launch_t_ns", "finish_t_ns"]


def _side(app, channel: str, prefix: str):
    columns = ["tuple_id", "tsc", "domain", "t_ns"]
    frame = app.log_frame(channel, "records", columns, required=False)
    return frame.select(F.col("tuple_id").alias("task_attempt_id"), F.col("tsc").alias(f"{prefix}_tsc"),
                        F.col("domain").alias(f"{prefix}_domain"), F.col("t_ns").alias(f"{prefix}_t_ns"))


def tasks(app):
    """One row per task attempt (TASK_COLUMNS). Attempts of the task table without TSC records (task logging off,
    an executor lost before its logs were copied) have null TSC columns and unbounded true; TSC records without a
    row in the task table (a running application: the table is written at its end) have null Spark columns.
    launch_t_ns / finish_t_ns: Spark's millisecond times placed on the same axis through the driver's wall clock."""
    start, end = (_side(app, channel, prefix) for channel, prefix in zip(TASK_CHANNELS, ("start", "end")))
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
        (F.col("finish_time_ms") * 1e6 + F.lit(float(base))).alias("finish_t_ns"))
