"""Stages: the distribution of their task attempts' durations, stragglers, and the gaps between stages."""
from __future__ import annotations

import bisect
import errno
import math
import numbers

from pyspark.sql import Window
from pyspark.sql import functions as F

from ..errors import InvalidArgumentError
from .reader import TASK_METRICS

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
STRAGGLER_METRICS = ["spark_duration_ms", "executor_run_time_ms", "jvm_gc_time_ms", "shuffle_fetch_wait_ms",
                     "scheduler_delay_ms", "memory_spilled_bytes", "disk_spilled_bytes"]


def check_ratio(method: str, ratio) -> None:
    """A straggler ratio is a finite number >= 1 (below 1, a task faster than its stage's median is a straggler);
    else InvalidArgumentError naming `method` and the value."""
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 1 <= ratio < math.inf:
        raise InvalidArgumentError(errno.EINVAL, f"{method}(ratio={ratio!r}): ratio is how many times its stage's "
                                                 "median a straggler takes at least: a number >= 1")


def stragglers(tasks, ratio: float = STRAGGLER_RATIO):
    """Successful attempts over `ratio` x their stage's median duration, the slowest first, with Spark's metrics
    that explain them (STRAGGLER_METRICS) and the records they read (input and shuffle) beside their stage's
    median."""
    read = F.col("input_records") + F.col("shuffle_read_records")
    median_read = F.percentile_approx(F.when(F.col("timed"), read), 0.5).over(Window.partitionBy(*STAGE))
    slow = (_with_medians(tasks).withColumn("records_read", read).withColumn("median_records_read", median_read)
            .where("timed").withColumn("ratio", F.col("duration_ns") / F.col("median_ns")))
    return slow.where(F.col("ratio") > ratio).select(
        *STAGE, "task_attempt_id", "partition", "executor_id", "host", "duration_ns", "median_ns",
        "ratio", *STRAGGLER_METRICS, "records_read", "median_records_read").orderBy(F.col("ratio").desc())


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
    return tasks.sparkSession.createDataFrame(out, STAGES_DDL)
