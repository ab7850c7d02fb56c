"""Python UDF batches (spark.cloudprofiler.udfs): per UDF evaluation and task, its batches and rows, and where its
worker's time went: setup (reading and unpickling the UDFs), waiting for the JVM's bytes, the transfer of the rest
of a batch (the JVM still writing it), reading (deserializing the batches), the function, and serializing its output
back.

The worker logs an event record at each boundary of a timed cycle (udf_records: the first EXACT output batches of
the task, then a sample); from one event to the next it is in one part, so the parts partition its time for the
task, the untimed cycles' time in one part of its own, "untimed". The socket's wait for a batch's first bytes and the
read's time off the CPU after them, timed in the worker around every read of a timed cycle, are carried in WAIT and
TRANSFER records (CARRIED) and taken out of the part they fell in. The untimed time is
split between the parts in the proportions of the sampled cycles (those past the first EXACT, drawn at random like
the untimed ones), or where the task has none of those of its exact cycles less the wait for the first batch: a
ratio estimate whose parts still sum to the worker's time, exact for a task of at most EXACT batches. Batches and
rows are counted in the worker, every one. Runs on Spark: a window per channel file (one per task and evaluation),
and only the aggregates come back."""
from __future__ import annotations

import warnings

from pyspark.sql import Window
from pyspark.sql import functions as F

from ..udf_records import (CARRIED, CHANNEL, END, ENDED, EVAL_TYPE_KEY, EVAL_TYPES, EXACT, FORMAT, FORMAT_KEY,
                           IN_BATCHES, IN_EXIT, IN_ROWS, KIND_BITS, KIND_KEY, LAST_EVENT, NAMES_KEY, OUT_BATCHES,
                           OUT_ENTER, OUT_EXIT, OUT_ROWS, PART_AFTER, PARTS, START, WAIT)
from .reader import local_frame

CYCLE_PARTS = PARTS[1:]  # the parts of a cycle (setup is before the first)
COUNTS = {IN_BATCHES: "batches", IN_ROWS: "rows", OUT_BATCHES: "out_batches", OUT_ROWS: "out_rows"}
UDFS_DDL = ("udf string, eval_type int, kind string, task_attempt_id long, stage_id int, partition int, "
            "executor_id string, sql_execution_id long, batches long, rows long, out_batches long, out_rows long, "
            "timed_batches long, setup_s double, first_wait_s double, wait_s double, transfer_s double, "
            "read_s double, function_s double, serialize_s double, worker_s double, task_s double, start_s double, "
            "complete boolean, failed boolean")


def _files(app):
    """A row per channel file: its UDFs' names, eval type and their words (the catalog's metadata, on the driver)."""
    rows, other_format = [], 0
    for f in app.catalog.logs:
        if f.channel == CHANNEL and f.meta.get(FORMAT_KEY) != FORMAT:
            other_format += 1
        elif f.channel == CHANNEL:
            eval_type = int(f.meta[EVAL_TYPE_KEY]) if str(f.meta.get(EVAL_TYPE_KEY, "")).isdigit() else None
            kind = f.meta.get(KIND_KEY) or EVAL_TYPES.get(eval_type, f"eval type {eval_type}")
            rows.append((f.file, f.meta.get(NAMES_KEY, "?"), eval_type, kind))
    if other_format:
        warnings.warn(f"{other_format} Python UDF channel files hold records of another layout than this version's "
                      f"({FORMAT_KEY}={FORMAT}: written by another version of cloudprofiler): their UDFs are left out")
    return local_frame(app.spark, rows, "file string, udf string, eval_type int, kind string")


def _events(app):
    """Every record of the UDF channels with its kind, value, part and timed cycle (`cycle`: the index of the output
    batch of the last OUT_ENTER); an event's `dur_ns` lasts to the next event."""
    records = app.log_frame(CHANNEL, "records", ["file", "task_attempt_id", "tuple_id", "tsc", "t_ns"], required=False)
    order = Window.partitionBy("file").orderBy("tsc")
    before = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_event = F.col("kind") <= LAST_EVENT
    part = F.lit(None).cast("string")
    for kind, name in PART_AFTER.items():
        part = F.when(F.col("state") == kind, F.lit(name)).otherwise(part)
    first_batch = F.when((F.col("kind") == IN_EXIT) & (F.col("value") != ENDED), F.col("t_ns"))
    return (records
            .select("file", "task_attempt_id", "tsc", "t_ns",
                    F.col("tuple_id").bitwiseAND(F.lit((1 << KIND_BITS) - 1)).alias("kind"),
                    F.shiftright("tuple_id", KIND_BITS).alias("value"))
            .withColumn("next_t", F.first(F.when(is_event, F.col("t_ns")), ignorenulls=True)
                        .over(order.rowsBetween(1, Window.unboundedFollowing)))
            .withColumn("state", F.last(F.when(is_event, F.col("kind")), ignorenulls=True).over(before))
            .withColumn("cycle", F.last(F.when(F.col("kind") == OUT_ENTER, F.col("value")), ignorenulls=True)
                        .over(before))
            .withColumn("first_batch_t", F.min(first_batch).over(Window.partitionBy("file")))
            .select("*", part.alias("part"),
                    F.when(is_event, F.col("next_t") - F.col("t_ns")).alias("dur_ns")))


def _sum_when(condition, value):
    return F.coalesce(F.sum(F.when(condition, value)), F.lit(0))


def _cycle_parts(sampled: bool) -> dict:
    """Per part of a cycle, its ns summed over the exact cycles (the first EXACT) or over the sampled ones."""
    carried, value = F.col("kind").isin(list(CARRIED)), F.col("value")
    cycles = F.col("cycle") >= EXACT if sampled else F.coalesce(F.col("cycle") < EXACT, F.lit(True))
    parts = {p: _sum_when(cycles & ~carried & (F.col("part") == p), F.col("dur_ns"))
             - _sum_when(cycles & carried & (F.col("part") == p), value)
             for p in CYCLE_PARTS if p not in CARRIED.values()}
    return {**{p: _sum_when(cycles & (F.col("kind") == k), value) for k, p in CARRIED.items()}, **parts}


def _estimated(p: str):
    """A part's ns: its exact and sampled cycles' and its share of the untimed time (the module's docstring)."""
    sampled = sum((F.col(f"{q}_sampled_ns") for q in CYCLE_PARTS), F.lit(0)) > 0

    def share(q):
        exact = F.col(f"{q}_exact_ns") - (F.col("first_wait_ns") if q == "wait" else F.lit(0))
        return F.when(sampled, F.col(f"{q}_sampled_ns")).otherwise(exact)

    total = sum((share(q) for q in CYCLE_PARTS), F.lit(0))
    untimed = F.when(total > 0, F.col("untimed_ns") * share(p) / total).otherwise(
        F.col("untimed_ns") if p == "function" else F.lit(0))
    return F.col(f"{p}_exact_ns") + F.col(f"{p}_sampled_ns") + untimed


def udfs(app, **scope):
    """One row per UDF evaluation and task attempt of the attempts in `scope` (UDFS_DDL): the UDFs' names (", "
    between the UDFs one node evaluates), PySpark's eval type and its words (`kind`: "pandas UDF", "mapInArrow"),
    the task, its input batches and rows and output batches and rows (-2 rows: not found in a batch; null where the
    worker did not log its end), the output batches timed (timed_batches: all of them up to EXACT), then seconds:
    setup, the wait for the first batch (first_wait_s, part of wait_s), wait, transfer, read, function, serialize
    (estimated past EXACT batches: the module's docstring), their sum (worker_s: the worker's time for the task's
    evaluation, exact), the task attempt's TSC duration (task_s) and the time from its start until the worker began
    reading the UDFs (start_s: a slot's first Python task waits there for its worker to start, later ones reuse
    it); complete: the worker logged the end of its output (false: killed, or its records not collected yet);
    failed: the function or the serializer raised. Empty where no Python worker timed its UDFs (without a Spark job:
    the report asks every application)."""
    if not app.udfs_timed:
        return local_frame(app.spark, [], UDFS_DDL)
    events = _events(app)
    wait, kind, value = F.col("kind") == WAIT, F.col("kind"), F.col("value")
    exact, sampled = _cycle_parts(sampled=False), _cycle_parts(sampled=True)
    per_file = events.groupBy("file", "task_attempt_id").agg(
        *[F.max(F.when(kind == k, value)).alias(name) for k, name in COUNTS.items()],
        F.count(F.when((kind == OUT_EXIT) & (value != ENDED), 1)).alias("timed_batches"),
        (_sum_when(~wait & (F.col("part") == "setup"), F.col("dur_ns")) + _sum_when(kind == START, value))
        .alias("setup_ns"),
        _sum_when(wait & (F.coalesce(F.col("t_ns") < F.col("first_batch_t"), F.lit(True))), value)
        .alias("first_wait_ns"),
        *[exact[p].alias(f"{p}_exact_ns") for p in CYCLE_PARTS],
        *[sampled[p].alias(f"{p}_sampled_ns") for p in CYCLE_PARTS],
        _sum_when(F.col("part") == "untimed", F.col("dur_ns")).alias("untimed_ns"),
        F.min(F.when(kind == START, F.col("t_ns") - value)).alias("began_t_ns"),
        F.max((kind == END).cast("int")).alias("complete"),
        F.max(F.when(kind == END, value)).alias("end_value"))
    per_file = per_file.select("*", *[_estimated(p).alias(f"{p}_ns") for p in CYCLE_PARTS])
    attempts = app.tasks(**scope).select("task_attempt_id", "stage_id", "partition", "executor_id",
                                         "sql_execution_id", "duration_ns", "start_t_ns")
    joined = per_file.join(_files(app), "file").join(attempts, "task_attempt_id")
    seconds = {p: (F.col(f"{p}_ns") / 1e9).alias(f"{p}_s") for p in PARTS + ("first_wait",)}
    worker = sum((F.col(f"{p}_ns") for p in PARTS), F.lit(0)) / 1e9
    return joined.select(
        "udf", "eval_type", "kind", "task_attempt_id", "stage_id", "partition", "executor_id", "sql_execution_id",
        *COUNTS.values(), "timed_batches", seconds["setup"], seconds["first_wait"], seconds["wait"],
        seconds["transfer"], seconds["read"], seconds["function"], seconds["serialize"], worker.alias("worker_s"),
        (F.col("duration_ns") / 1e9).alias("task_s"),
        ((F.col("began_t_ns") - F.col("start_t_ns")) / 1e9).alias("start_s"),
        (F.col("complete") == 1).alias("complete"),
        F.coalesce(F.col("end_value") == 1, F.lit(False)).alias("failed"))
