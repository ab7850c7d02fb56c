"""The benchmark pipelines on Spark Structured Streaming, each from a stream of generator tuples to a sink.

- ingest: the source alone, straight into the sink.
- ysb: the Yahoo streaming benchmark: keep views, project, join with the campaign table (ad -> campaign),
  count per campaign in 10 s tumbling event-time windows.
- aggregation: Karimov's Query 1 on purchases: average price per geo in 8 s windows sliding by 4 s.
- join: Karimov's Query 2 on purchases: two streams (from disjoint sets of emitters, like the paper's S2 and
  S3) joined on geo, price and the 1 s window they fall in, keeping the larger price (the price in the key
  keeps the join's output proportional to its input, as the paper lowered the join's selectivity).

Windowed outputs carry the latest event time of their window (Karimov's latency of stateful operators).
With `trace=True` the source logs every id as it delivers it (channel `<pipeline>.source`), the JVM trace
function `cp_trace` (the plugin's SQL extension must be on) logs every id after each per-tuple operator, and
the window outputs at the sink under a synthetic id (window start in seconds << 20 | key), so per-operator
latency comes out of the same run. `trace=(x, y)` samples the per-tuple points the paper's XoY way: they log
only the ids with id mod y < x, the same ids at every point; window outputs, few, are all logged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple, Union

from pyspark.sql import DataFrame, functions as F

from cloudprofiler.harness.generator.workloads import YSB_ADS, YSB_CAMPAIGNS, YSB_EVENT_TYPES

WATERMARK = "2 seconds"


Trace = Union[bool, Tuple[int, int]]  # True: every id; (x, y): the XoY sample


def _trace(df: DataFrame, trace: Trace, channel: str, id_expr: str = "id", column: str = "id") -> DataFrame:
    """Log `id_expr` per row at this point (or the XoY sample of `trace=(x, y)`). The traced value must reach the
    sink (Spark prunes unused columns, nondeterministic or not), so it replaces a column the rest of the
    pipeline consumes."""
    if not trace:
        return df
    sample = "" if trace is True else ", {}, {}".format(*trace)
    return df.withColumn(column, F.expr(f"cp_trace('{channel}', {id_expr}{sample})"))


def _sink_trace(df: DataFrame, trace: Trace, channel: str, key: str) -> DataFrame:
    return _trace(df, bool(trace), channel, f"(unix_seconds(window.start) << 20) | {key}", "trace_id")


def ysb(events: DataFrame, trace: Trace = False) -> DataFrame:
    spark = events.sparkSession
    campaigns = spark.range(YSB_ADS).select(F.col("id").cast("int").alias("ad_id"),
                                            (F.col("id") / (YSB_ADS // YSB_CAMPAIGNS)).cast("int").alias("campaign_id"))
    views = events.where(F.col("event_type") == YSB_EVENT_TYPES.index("view"))
    views = _trace(views.select("id", "ad_id", "event_time"), trace, "ysb.filter")
    joined = _trace(views.join(F.broadcast(campaigns), "ad_id"), trace, "ysb.join")
    counts = (joined.withWatermark("event_time", WATERMARK)
              .groupBy(F.window("event_time", "10 seconds"), "campaign_id")
              .agg(F.count("id").alias("events"), F.max("event_time").alias("latest_event_time")))
    return _sink_trace(counts, trace, "ysb.window", "campaign_id")


def ysb_events(spark, rows: int, partitions: int = 4, per_second: int = 100_000) -> DataFrame:
    """`rows` YSB events as a batch DataFrame, for `ysb` without a generator: ids in order, ads spread over all
    of them, a third of the events views, `per_second` events per second of event time from the epoch."""
    return spark.range(0, rows, 1, partitions).select(
        "id", (F.col("id") * 7919 % YSB_ADS).cast("int").alias("ad_id"),
        (F.col("id") % len(YSB_EVENT_TYPES)).cast("tinyint").alias("event_type"),
        F.timestamp_seconds(F.col("id") / per_second).alias("event_time"))


def aggregation(purchases: DataFrame, trace: Trace = False) -> DataFrame:
    averages = (purchases.withWatermark("event_time", WATERMARK)
                .groupBy(F.window("event_time", "8 seconds", "4 seconds"), "geo")
                .agg(F.avg("price").alias("avg_price"), F.max("event_time").alias("latest_event_time")))
    return _sink_trace(averages, trace, "aggregation.window", "geo")


def join(left: DataFrame, right: DataFrame, trace: Trace = False) -> DataFrame:
    def keyed(df, name):
        df = _trace(df, trace, f"join.{name}").select(
            "id", "geo", "price", "event_time", F.window("event_time", "1 second").alias("w"))
        return df.withWatermark("event_time", WATERMARK).alias(name)

    joined = keyed(left, "l").join(keyed(right, "r"), F.expr(
        "l.geo = r.geo AND l.price = r.price AND l.w = r.w "
        "AND r.event_time BETWEEN l.event_time - interval 1 second AND l.event_time + interval 1 second"))
    out = joined.select(F.col("l.id").alias("id"), F.col("r.id").alias("right_id"), F.col("l.geo").alias("geo"),
                        F.greatest("l.price", "r.price").alias("max_price"),
                        F.greatest("l.event_time", "r.event_time").alias("latest_event_time"))
    return _trace(out, trace, "join.output")


def ingest(events: DataFrame, trace: Trace = False) -> DataFrame:
    """The source alone: what ingestion costs, with nothing downstream."""
    return events


@dataclass(frozen=True)
class Pipeline:
    build: Callable  # (*streams, trace=False | True | (x, y)) -> DataFrame
    workload: str  # what its streams carry
    output_mode: str  # of its sink
    streams: int = 1  # input streams, each from its own emitters


PIPELINES = {"ingest": Pipeline(ingest, "ysb", "append"),
             "ysb": Pipeline(ysb, "ysb", "update"),
             "aggregation": Pipeline(aggregation, "purchases", "update"),
             "join": Pipeline(join, "purchases", "append", streams=2)}


def pipeline(name: str) -> Pipeline:
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; expected one of {', '.join(PIPELINES)}")
    return PIPELINES[name]
