"""Batch phase: a job with a shuffle whose second stage is skewed on purpose. Seven rows in eight share one key,
so after the shuffle one partition holds most rows and its task straggles; the rest spread evenly. A trace point
before the shuffle and one after it log every row's id (`cp_trace`, in the executors' JVMs)."""
from __future__ import annotations

import time

CHANNELS = ("batch.map", "batch.reduce")
FIRST_ID = 1 << 52  # above the generator's event ids and YSB's window ids: one id, one tuple in the application
PARTITIONS = 8
OTHER_KEYS = 127  # keys of the other rows, spread over every partition


def run(spark, progress, rows: int) -> None:
    from pyspark.sql import functions as F

    # adaptive execution would split the skewed partition, which is what the phase wants to show
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.sparkContext.setJobDescription("demo batch: a skewed shuffle")
    began = time.monotonic()
    mapped = spark.range(FIRST_ID, FIRST_ID + rows, 1, PARTITIONS).select(
        F.expr(f"cp_trace('{CHANNELS[0]}', id)").alias("id"))
    keyed = mapped.withColumn("key", F.when(F.col("id") % 8 != 0, F.lit(0)).otherwise(1 + F.col("id") % OTHER_KEYS))
    reduced = keyed.repartition(PARTITIONS, "key").select(
        F.expr(f"cp_trace('{CHANNELS[1]}', id)").alias("id"), "key",
        F.sha2(F.col("id").cast("string"), 256).alias("digest"))  # some work per row, so time follows rows
    keys = reduced.groupBy("key").agg(F.count("id").alias("rows"), F.max("digest").alias("digest")).collect()
    biggest = max(keys, key=lambda r: r["rows"])
    progress.detail(f"{rows:,} rows through a shuffle into {PARTITIONS} partitions in {time.monotonic() - began:.1f} "
                    f"s; key {biggest['key']} alone holds {biggest['rows'] / rows:.0%} of the rows, so its partition "
                    f"straggles")
    progress.detail(f"trace channels: {', '.join(CHANNELS)}")
