"""Joins on tuple id, planned explicitly, and durations with bounds over the joined rows.

Spark cannot estimate how many rows a `mapInArrow` yields, and it may plan a broadcast join of one side of records,
which collects that side on the driver and runs it out of heap. Every join of records is therefore a sort-merge
join (the "merge" hint): both sides are shuffled by tuple id and merged in sorted order, in bounded memory per
task, at any size."""
from __future__ import annotations

import functools
import hashlib
import json

import numpy as np
import pyarrow as pa

from ..calibration.spark import domain_pairs
from ..calibration.translate import PATH, path_names

DURATION_FIELDS = [("duration_ns", pa.float64()), ("err_ns", pa.float64()), ("path", pa.string()),
                   ("extrapolated", pa.bool_()), ("unbounded", pa.bool_())]


def merge_join(left, right, on: str, how: str = "inner"):
    """left joined with right on column `on` by a sort-merge join, whatever Spark estimates of their sizes."""
    return left.hint("merge").join(right.hint("merge"), on, how)


def durations_of(timebase, start_domain, start, end_domain, end, present=None) -> tuple:
    """(duration_ns, err_ns, path, extrapolated, unbounded) numpy arrays from (start_domain, start) to (end_domain,
    end), ticks and domain names or domain_id numbers, per pair of domains; path as translate.PATHS codes; rows not
    `present` (an end missing) stay NaN, inf, "unbounded"."""
    n = len(start)
    present = np.ones(n, bool) if present is None else present
    value, error = np.full(n, np.nan), np.full(n, np.inf)
    path, flag, unbounded = np.full(n, PATH["unbounded"], np.int8), np.zeros(n, bool), np.ones(n, bool)
    for *pair, rows in domain_pairs(start_domain, end_domain, present):
        first, second = (timebase.domain_name(d) if isinstance(d, (int, np.integer)) else d for d in pair)
        value[rows], error[rows], path[rows], flag[rows], unbounded[rows] = timebase.durations(
            first, start[rows], second, end[rows])
    return value, error, path, flag, unbounded


def _durations(batches, timebase, names):
    start_domain, start, end_domain, end = names
    for batch in batches:
        sd = batch.column(start_domain).to_numpy(zero_copy_only=False)
        ed = batch.column(end_domain).to_numpy(zero_copy_only=False)
        s_col, e_col = batch.column(start), batch.column(end)
        present = ~(s_col.is_null().to_numpy(zero_copy_only=False) | e_col.is_null().to_numpy(zero_copy_only=False))
        value, error, path, flag, unbounded = durations_of(
            timebase, sd, s_col.fill_null(0).to_numpy(), ed, e_col.fill_null(0).to_numpy(), present)
        columns = [pa.array(value, mask=~present), pa.array(error, mask=~present),
                   pa.array(path_names(path), pa.string()),
                   pa.array(flag), pa.array(unbounded)]
        yield pa.RecordBatch.from_arrays(list(batch.columns) + columns,
                                         names=batch.schema.names + [name for name, _ in DURATION_FIELDS])


def with_durations(frame, timebase, start_domain="start_domain_id", start="start_tsc", end_domain="end_domain_id",
                   end="end_tsc", in_jvm: "bool | None" = None):
    """`frame` with the columns of DURATION_FIELDS: the duration from (start_domain, start) to (end_domain, end)
    in ns by the best path of Timebase.durations; null where an end is missing (duration, err_ns), then path
    "unbounded". Domains are domain_id numbers. Computed in the executors' JVMs by the plugin's DurationColumns where
    the session reads log files there (the same doubles), else in Python workers, vectorized per Arrow batch and per
    pair of domains; `in_jvm` chooses."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from .reader import jvm_reader, spark_schema

    fields = spark_schema(pa.schema(DURATION_FIELDS))
    spark = frame.sparkSession
    if jvm_reader(spark) if in_jvm is None else in_jvm:
        plan = json.dumps(timebase.jvm_durations())
        name = "cloudprofiler_durations_" + hashlib.sha256(plan.encode()).hexdigest()[:16]
        spark._jvm.io.cloudprofiler.spark.analysis.DurationColumns.register(spark._jsparkSession, name, plan,
                                                                            fields.json())
        durations = F.call_function(name, *(F.col(c) for c in (start_domain, start, end_domain, end)))
        return frame.withColumn("_durations", durations).select(
            *(F.col(c) for c in frame.columns), *(F.col(f"_durations.{f.name}").alias(f.name) for f in fields))
    schema = StructType(frame.schema.fields + fields.fields)
    compute = functools.partial(_durations, timebase=timebase, names=(start_domain, start, end_domain, end))
    return frame.mapInArrow(compute, schema)
