"""Records per period over time, per channel: counted from the records of record channels, summed from the
counts of counter channels (spc, mpc)."""
from __future__ import annotations

from pyspark.sql import functions as F

from .reader import local_frame
from .source_rows import source_channels, sources


def throughput(app, channel=None, period_ms: float = 1000):
    """channel, period_start_t_ns, records: one row per channel and period of `period_ms` on the application's
    time axis (periods numbered from the reference start; values without a bounded time are left out). Unless
    named, the source rows' channels whose records carry a wall-clock time of another's (an event's, a window's
    end: when that happened, not when the record was logged) are left out: replayed events hours old would place
    them hours before the application."""
    if period_ms <= 0:
        raise ValueError(f"period_ms={period_ms}: expected a positive number")
    period_ns = float(period_ms) * 1e6
    names = None if channel is None else [channel] if isinstance(channel, str) else list(channel)
    known = app.catalog.channels()
    app.check_channels(names or [], known)
    if names is None:
        elsewhen = {channel for kind, channel in source_channels(app).items() if not sources()[kind]}
        known = [c for c in known if c not in elsewhen]
    frames = []
    for kind, weight in (("records", F.lit(1)), ("counters", F.col("count"))):
        wanted = [c for c in (names or known) if c in app.catalog.channels(kind)]
        if wanted:
            columns = ["channel", "t_ns", "unbounded"] + (["count"] if kind == "counters" else [])
            frame = app.log_frame(wanted, kind, columns).where(~F.col("unbounded"))
            frames.append(frame.select("channel", F.floor(F.col("t_ns") / period_ns).alias("period"),
                                       weight.cast("long").alias("n")))
    if not frames:
        return local_frame(app.spark, [], "channel string, period_start_t_ns double, records long")
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.groupBy("channel", "period").agg(F.sum("n").alias("records")).select(
        "channel", (F.col("period") * period_ns).alias("period_start_t_ns"), "records").orderBy(
        "channel", "period_start_t_ns")
