"""Stages: the distribution of their task attempts' durations, stragglers, and the gaps between stages."""
from __future__ import annotations

import bisect
import errno
import math
import numbers

from pyspark.sql import Window
from pyspark.sql import functions as F

from ..errors import InvalidArgumentError
from .reader import TASK_METRICS, local_frame

# A straggler takes longer than STRAGGLER_RATIO x its stage's median: Spark's own threshold for launching a
# speculative copy of a task (spark.speculation.multiplier, default 1.5).
STRAGGLER_RATIO = 1.5
STAGE = ["stage_id", "stage_attempt"]
STAGES_DDL = ("stage_id int, stage_attempt int, job_id int, tasks long, failed long, p50_ns double, p90_ns double, "
              "p99_ns double, max_ns double, mean_ns double, skew double, stragglers long, start_t_ns double, "
              "end_t_ns double, gap_before_ns double, " + ", ".join(f"{m} long" for m in TASK_METRICS))


def finite(column):
    """The column where it is a number (null where NaN): Spark orders NaN above every number."""
    return F.when(~F.isnan(column), column)


def _with_medians(tasks):
    """Attempts that belong to a stage, with `timed` (a successful attempt with a duration) and its stage's median
    duration over the timed attempts."""
    timed = (F.col("status") == "SUCCESS") & finite(F.col("duration_ns")).isNotNull()
    staged = tasks.where(F.col("stage_id").isNotNull()).withColumn("timed", F.coalesce(timed, F.lit(False)))
    median = F.percentile_approx(F.when(F.col("timed"), F.col("duration_ns")), 0.5).over(Window.partitionBy(*STAGE))
    return staged.withColumn("median_ns", median)


# Spark's metrics of an attempt that say where its time went (null where the task table has none)
STRAGGLER_METRICS = ["spark_duration_ms", "executor_run_time_ms", "executor_cpu_time_ns",
                     "executor_deserialize_time_ms", "jvm_gc_time_ms", "shuffle_fetch_wait_ms", "scheduler_delay_ms",
                     "memory_spilled_bytes", "disk_spilled_bytes"]
# where a straggler's time went by the profiler's own records, each beside its stage's median (null where the
# application did not time its operators or UDFs): the operator whose exclusive time exceeds its median in the stage
# most, and the task's Python UDFs (the evaluation with most worker time names them): how long after the task's
# start its worker began (a slot's first Python task waits for the worker to start), and the function's time
OPERATOR_PARTS = {"top_operator": "string", "top_probe_id": "long", "top_operator_s": "double",
                  "top_operator_median_s": "double"}
UDF_PARTS = {"udf": "string", "udf_start_s": "double", "udf_start_median_s": "double", "udf_function_s": "double",
             "udf_function_median_s": "double"}


def check_ratio(method: str, ratio) -> None:
    """A straggler ratio is a finite number >= 1 (below 1, a task faster than its stage's median is a straggler);
    else InvalidArgumentError naming `method` and the value."""
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 1 <= ratio < math.inf:
        raise InvalidArgumentError(errno.EINVAL, f"{method}(ratio={ratio!r}): ratio is how many times its stage's "
                                                 "median a straggler takes at least: a number >= 1")


def stragglers(tasks, ratio: float = STRAGGLER_RATIO, operator_tasks=None, udfs=None):
    """Successful attempts over `ratio` x their stage's median duration, the slowest first, with Spark's metrics
    that explain them (STRAGGLER_METRICS), the records they read (input and shuffle) and their time off the CPU
    (executor run time less CPU time: sleeping, IO, locks, waiting on a Python worker) beside their stage's medians,
    and where `operator_tasks` (operators.operator_tasks) and `udfs` (udfs.udfs) are given, the parts of their time
    those timed (OPERATOR_PARTS, UDF_PARTS)."""
    read = F.col("input_records") + F.col("shuffle_read_records")
    off_cpu = F.col("executor_run_time_ms") - F.col("executor_cpu_time_ns") / 1e6
    stage = Window.partitionBy(*STAGE)
    slow = (_with_medians(tasks).withColumn("records_read", read).withColumn("off_cpu_ms", off_cpu)
            .withColumn("median_records_read", F.percentile_approx(F.when(F.col("timed"), read), 0.5).over(stage))
            .withColumn("median_off_cpu_ms", F.percentile_approx(F.when(F.col("timed"), off_cpu), 0.5).over(stage))
            .where("timed").withColumn("ratio", F.col("duration_ns") / F.col("median_ns")))
    slow = slow.where(F.col("ratio") > ratio).select(
        *STAGE, "task_attempt_id", "partition", "executor_id", "host", "duration_ns", "median_ns",
        "ratio", *STRAGGLER_METRICS, "records_read", "median_records_read", "off_cpu_ms", "median_off_cpu_ms")
    parts = [_operator_parts(slow, operator_tasks), _udf_parts(slow, udfs)]
    for columns, found in zip((OPERATOR_PARTS, UDF_PARTS), parts):
        if found is None:  # not timed: the columns, null
            slow = slow.select("*", *[F.lit(None).cast(type_).alias(name) for name, type_ in columns.items()])
        else:
            slow = slow.join(found, "task_attempt_id", "left")
    return slow.orderBy(F.col("ratio").desc())


def _operator_parts(slow, operator_tasks):
    """Per straggler: its operator whose exclusive time exceeds that operator's median over its stage's tasks most."""
    if operator_tasks is None:
        return None
    median = F.percentile_approx("exclusive_s", 0.5).over(Window.partitionBy("stage_id", "probe_id"))
    ranked = (operator_tasks.withColumn("top_operator_median_s", median)
              .join(slow.select("task_attempt_id"), "task_attempt_id", "left_semi")
              .withColumn("rank", F.row_number().over(Window.partitionBy("task_attempt_id").orderBy(
                  (F.col("exclusive_s") - F.col("top_operator_median_s")).desc(), "probe_id"))))
    return ranked.where("rank = 1").select(
        "task_attempt_id", F.col("operator").alias("top_operator"), F.col("probe_id").alias("top_probe_id"),
        F.col("exclusive_s").alias("top_operator_s"), "top_operator_median_s")


def _udf_parts(slow, udfs):
    """Per straggler: its UDFs (the evaluation with most worker time), the wait for its first worker to begin and
    the functions' time, beside their medians over its stage's tasks."""
    if udfs is None:
        return None
    first = Window.partitionBy("task_attempt_id").orderBy(F.col("worker_s").desc(), "udf")
    per_task = (udfs.withColumn("udf", F.first("udf").over(first))
                .groupBy("task_attempt_id", "stage_id", "udf")
                .agg(F.min("start_s").alias("udf_start_s"), F.sum("function_s").alias("udf_function_s")))
    stage = Window.partitionBy("stage_id")
    return (per_task
            .withColumn("udf_start_median_s", F.percentile_approx("udf_start_s", 0.5).over(stage))
            .withColumn("udf_function_median_s", F.percentile_approx("udf_function_s", 0.5).over(stage))
            .join(slow.select("task_attempt_id"), "task_attempt_id", "left_semi")
            .select("task_attempt_id", *UDF_PARTS))


def stages(tasks, ratio: float = STRAGGLER_RATIO):
    """One row per stage attempt (STAGES_DDL): job, attempts, failed attempts, percentiles, max and mean of the
    successful attempts' durations, skew (max / median), stragglers (over `ratio` x median), first start and last
    end, the gap since the latest end of a stage that ended before this one started (null for none), and each of
    Spark's task metrics (TASK_METRICS) summed over every attempt, failed ones included, as Spark's stage page sums
    them (null where no attempt has it). One pass over the tasks; the stage rows (small) are gathered to compute
    the gaps."""
    timed = F.when(F.col("timed"), F.col("duration_ns"))
    rows = _with_medians(tasks).groupBy(*STAGE).agg(
        F.min("job_id").alias("job_id"), F.count(F.lit(1)).alias("tasks"),
        F.sum((F.col("status") != "SUCCESS").cast("long")).alias("failed"),
        F.percentile_approx(timed, [0.5, 0.9, 0.99]).alias("q"), F.max(timed).alias("max_ns"),
        F.mean(timed).alias("mean_ns"),
        F.sum((F.col("timed") & (F.col("duration_ns") > ratio * F.col("median_ns"))).cast("long")).alias("slow"),
        F.min(finite(F.col("start_t_ns"))).alias("start_t_ns"),
        F.max(finite(F.col("end_t_ns"))).alias("end_t_ns"), *[F.sum(m).alias(m) for m in TASK_METRICS]).collect()
    ends = sorted(r["end_t_ns"] for r in rows if r["end_t_ns"] is not None)
    out = []
    for r in rows:
        q = r["q"] or [None] * 3
        before = bisect.bisect_left(ends, r["start_t_ns"]) if r["start_t_ns"] is not None else 0
        out.append({**{k: r[k] for k in (*STAGE, "job_id", "tasks", "failed", "max_ns", "mean_ns", "start_t_ns",
                                          "end_t_ns", *TASK_METRICS)},
                    "p50_ns": q[0], "p90_ns": q[1], "p99_ns": q[2], "stragglers": r["slow"] or 0,
                    "skew": r["max_ns"] / q[0] if q[0] else None,
                    "gap_before_ns": r["start_t_ns"] - ends[before - 1] if before else None})
    out.sort(key=lambda r: (r["start_t_ns"] is None, r["start_t_ns"] or 0.0, r["stage_id"], r["stage_attempt"]))
    return local_frame(tasks.sparkSession, out, STAGES_DDL)
