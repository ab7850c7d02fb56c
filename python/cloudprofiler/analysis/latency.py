"""Latency between two trace points: per tuple id logged on both channels, with its bound, and its distribution."""
from __future__ import annotations

from pyspark.sql import functions as F

from .joins import merge_join, with_durations
from .reader import local_frame
from .sketch import log_bins

LATENCY_COLUMNS = ["tuple_id", "from_channel", "to_channel", "start_t_ns", "end_t_ns", "latency_ns", "err_ns",
                   "path", "remote", "start_host", "end_host", "extrapolated", "unbounded"]


def latency_pairs(app, from_channel: str, to_channel: str):
    """Records of the same tuple id on both channels joined (sort-merge), with durations: tuple_id, start_/end_
    tsc, domain_id, t_ns and host, and the DURATION_FIELDS."""
    sides = []
    for channel, prefix in ((from_channel, "start"), (to_channel, "end")):
        names = ("tsc", "domain_id", "t_ns", "host")
        frame = app.log_frame(channel, "records", ["tuple_id", *names])
        sides.append(frame.select("tuple_id", *(F.col(c).alias(f"{prefix}_{c}") for c in names)))
    return with_durations(merge_join(*sides, "tuple_id"), app.timebase)


def latency(app, from_channel: str, to_channel: str):
    """One row per pair of records with the same tuple id, the first on `from_channel`, the second on
    `to_channel` (a tuple logged once at each point: one row; a tuple a retried task logged twice: a row per
    pairing). `remote`: the ends lie in different TSC domains (hosts)."""
    return latency_pairs(app, from_channel, to_channel).select(
        "tuple_id", F.lit(from_channel).alias("from_channel"), F.lit(to_channel).alias("to_channel"), "start_t_ns",
        "end_t_ns", F.col("duration_ns").alias("latency_ns"), "err_ns", "path",
        (F.col("start_domain_id") != F.col("end_domain_id")).alias("remote"), "start_host", "end_host",
        "extrapolated", "unbounded")


def latency_histogram(latencies, bins: int = 60):
    """Counts of bounded latencies in `bins` log-spaced bins over [min, max] of latency_ns, per local/remote
    (the densities of the paper's Fig. 18). Latencies at or below 1 ns fall in bin 0."""
    if bins < 1:
        raise ValueError(f"bins={bins}: expected at least 1")
    bounded = latencies.where(~F.col("unbounded") & ~F.isnan("latency_ns"))
    low, high = bounded.agg(F.min("latency_ns"), F.max("latency_ns")).first()
    spark = latencies.sparkSession
    if low is None:
        return local_frame(spark, [], "remote boolean, bin int, lo_ns double, hi_ns double, count long")
    low, step = log_bins(low, high, bins)
    index = F.least(F.lit(bins - 1), F.greatest(F.lit(0), F.floor(
        F.log(F.greatest(F.col("latency_ns"), F.lit(low)) / low) / step))).cast("int")
    counts = bounded.groupBy("remote", index.alias("bin")).agg(F.count(F.lit(1)).alias("count"))
    return counts.select("remote", "bin", (F.lit(low) * F.exp(F.col("bin") * step)).alias("lo_ns"),
                         (F.lit(low) * F.exp((F.col("bin") + 1) * step)).alias("hi_ns"), "count").orderBy(
        "remote", "bin")
