"""Per-operator latency along an ordered list of trace points: the box-plot statistics of each hop, its bounds,
and its share of the end-to-end tail (the paper's Fig. 17)."""
from __future__ import annotations

from pyspark.sql import functions as F

from .catalog import TASK_CHANNELS
from .latency import latency_pairs

QUANTILES = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]
QUANTILE_NAMES = ["p1_ns", "p5_ns", "p25_ns", "p50_ns", "p75_ns", "p95_ns", "p99_ns"]
# percentile_approx's accuracy: a quantile's rank is off by at most count / ACCURACY (exact below that count)
ACCURACY = 10_000
PIPELINE_DDL = ("hop int, from_channel string, to_channel string, count long, remote_count long, "
                "unbounded_count long, min_ns double, " + ", ".join(f"{n} double" for n in QUANTILE_NAMES)
                + ", max_ns double, mean_ns double, err_p50_ns double, err_p99_ns double, err_max_ns double, "
                  "share_of_p99 double")


def channel_order(app, channels) -> list:
    """The channels ordered by the median t_ns of their records (a tuple passes the trace points in order)."""
    medians = app.log_frame(channels, "records", ["channel", "t_ns", "unbounded"]).where(~F.col("unbounded")).groupBy(
        "channel").agg(F.percentile_approx("t_ns", 0.5, ACCURACY).alias("median")).collect()
    order = {r["channel"]: r["median"] for r in medians}
    return sorted(channels, key=lambda c: (order.get(c) is None, order.get(c), c))


def hop_statistics(app, from_channel: str, to_channel: str):
    """One row of box-plot statistics over the bounded latencies between two channels (joined on the columns it
    needs only)."""
    latencies = latency_pairs(app, from_channel, to_channel, columns=()).select(
        F.col("duration_ns").alias("latency_ns"), "err_ns", "unbounded",
        (F.col("start_domain_id") != F.col("end_domain_id")).alias("remote"))
    return latencies.agg(
        F.sum((~F.col("unbounded")).cast("long")).alias("count"),
        F.sum((F.col("remote") & ~F.col("unbounded")).cast("long")).alias("remote_count"),
        F.sum(F.col("unbounded").cast("long")).alias("unbounded_count"),
        F.min(F.when(~F.col("unbounded"), F.col("latency_ns"))).alias("min_ns"),
        F.percentile_approx(F.when(~F.col("unbounded"), F.col("latency_ns")), QUANTILES, ACCURACY).alias("q"),
        F.max(F.when(~F.col("unbounded"), F.col("latency_ns"))).alias("max_ns"),
        F.mean(F.when(~F.col("unbounded"), F.col("latency_ns"))).alias("mean_ns"),
        F.percentile_approx(F.when(~F.col("unbounded"), F.col("err_ns")), [0.5, 0.99], ACCURACY).alias("e"),
        F.max(F.when(~F.col("unbounded"), F.col("err_ns"))).alias("err_max_ns")).first()


def pipeline(app, channels=None):
    """Rows hop = 0, 1, ... for consecutive trace points and hop = -1 for first -> last (end to end); see
    PIPELINE_DDL. None: every record channel except the task channels, ordered by median time."""
    if channels is None:
        channels = channel_order(app, [c for c in app.catalog.channels("records") if c not in TASK_CHANNELS])
    channels = list(channels)
    if len(channels) < 2:
        raise ValueError(f"a pipeline needs at least two trace points, got {channels}")
    hops = [(i, a, b) for i, (a, b) in enumerate(zip(channels, channels[1:]))]
    if len(channels) > 2:
        hops.append((-1, channels[0], channels[-1]))
    rows = []
    for hop, a, b in hops:
        s = hop_statistics(app, a, b)
        q = s["q"] or [None] * len(QUANTILES)
        e = s["e"] or [None, None]
        rows.append({"hop": hop, "from_channel": a, "to_channel": b, "count": s["count"] or 0,
                     "remote_count": s["remote_count"] or 0, "unbounded_count": s["unbounded_count"] or 0,
                     "min_ns": s["min_ns"], **dict(zip(QUANTILE_NAMES, q)), "max_ns": s["max_ns"],
                     "mean_ns": s["mean_ns"], "err_p50_ns": e[0], "err_p99_ns": e[1], "err_max_ns": s["err_max_ns"]})
    if len(channels) == 2:  # end to end is the one hop
        rows.append({**rows[0], "hop": -1})
    total = rows[-1]["p99_ns"]
    for row in rows:
        row["share_of_p99"] = row["p99_ns"] / total if total and row["p99_ns"] is not None else None
    return app.spark.createDataFrame(rows, PIPELINE_DDL)
