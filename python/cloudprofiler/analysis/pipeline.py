"""Per-operator latency along an ordered list of trace points: the box-plot statistics of each hop, its bounds,
and its share of the end-to-end tail (the paper's Fig. 17)."""
from __future__ import annotations

import numpy as np

from .catalog import TASK_CHANNELS
from .hops import PairSketches, hop_sketches, hops_of
from .operator_hops import row_prefixes
from .reader import local_frame

QUANTILES = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]
QUANTILE_NAMES = ["p1_ns", "p5_ns", "p25_ns", "p50_ns", "p75_ns", "p95_ns", "p99_ns"]
PIPELINE_DDL = ("hop int, from_channel string, to_channel string, count long, remote_count long, "
                "unbounded_count long, min_ns double, " + ", ".join(f"{n} double" for n in QUANTILE_NAMES)
                + ", max_ns double, mean_ns double, err_p50_ns double, err_p99_ns double, err_max_ns double, "
                  "share_of_p99 double")
# Past this many records of the trace points, their order is checked on a sample before the pass over every record:
# measured 2026-12-06 on a 2-core VM, at 300 M records the pipeline took 137 s where the median times ordered two
# points wrong (a pass of the chain, then one of every ordered pair) and 66 s with the sample's pass first (about
# 10 s of it); on the demo's 3.2 M records the sample's pass costs more than the pass it saves (2.1 s against 1.7)
ORDER_SAMPLE_RECORDS = 20_000_000
ORDER_SAMPLE = 1024  # one tuple id in this many: a few thousand tuples at least, past ORDER_SAMPLE_RECORDS


def channel_order(app, channels) -> list:
    """The channels ordered by their median time (a tuple passes the trace points in order), read from the catalog
    without a pass over the records: a channel's median is the median of its files' median times, weighted by
    their rows; a channel with no bounded time comes last."""
    medians = {}
    for channel in channels:
        files = [f for f in app.catalog.files_of([channel], "records") if f.median_tsc is not None]
        times = [(app.timebase.translate(f.domain, [round(f.median_tsc)]), f.rows) for f in files]
        kept = sorted((t[0][0], rows) for t, rows in times if not t[3][0])
        if kept:
            cumulative = np.cumsum([rows for _, rows in kept])
            medians[channel] = kept[int(np.searchsorted(cumulative, cumulative[-1] / 2))][0]
    return sorted(channels, key=lambda c: (c not in medians, medians.get(c), c))


def pipeline_rows(sketches) -> list[dict]:
    """PIPELINE_DDL rows of a HopSketches."""
    channels = sketches.channels
    rows = []
    for hop, a, b in hops_of(channels):
        s = sketches.hop_statistics(hop, QUANTILES)
        e = s["e"]
        rows.append({"hop": hop, "from_channel": channels[a], "to_channel": channels[b], "count": s["count"],
                     "remote_count": s["remote_count"], "unbounded_count": s["unbounded_count"],
                     "min_ns": s["min_ns"], **dict(zip(QUANTILE_NAMES, s["q"])), "max_ns": s["max_ns"],
                     "mean_ns": s["mean_ns"], "err_p50_ns": e[0], "err_p99_ns": e[1], "err_max_ns": s["err_max_ns"]})
    if len(channels) == 2:  # end to end is the one hop
        rows.append({**rows[0], "hop": -1})
    total = rows[-1]["p99_ns"]
    for row in rows:
        row["share_of_p99"] = row["p99_ns"] / total if total and row["p99_ns"] is not None else None
    return rows


def ordered_sketches(app, channels):
    """The HopSketches of `channels` chained in the order their tuples pass them, and the PairSketches of the same
    channels (counted only when asked for: cutting the chain into pipelines reads it). `channel_order` places the
    trace points by their channels' median times, which puts two points in the wrong order where they log different
    shares of the same tuples (a filter between them) or a tuple takes microseconds from one to the next (their files'
    medians, of slightly different records, then lie in either order). A hop whose median latency is negative runs
    backwards: where one does, every ordered pair is counted in one more pass and the channels are reordered from it
    (`ordered_chain`); else the chain's one pass is all. Past ORDER_SAMPLE_RECORDS the order is first checked on
    the tuples of one id in ORDER_SAMPLE (every ordered pair of them, reordered the same way), in a pass that reads
    every record but pairs almost none: a second pass over every record would cost more."""
    order = channel_order(app, channels)
    pairs = PairSketches(app, channels)
    if sum(f.rows for f in app.catalog.files_of(channels, "records")) > ORDER_SAMPLE_RECORDS:
        order = ordered_chain(PairSketches(app, channels, sample=ORDER_SAMPLE), order).channels
    sketches = hop_sketches(app, order)
    if _backwards(sketches, order) is None:
        return sketches, pairs
    return ordered_chain(pairs, order), pairs


def ordered_chain(pairs, order: list):
    """The HopSketches of `order` with its trace points reordered as their tuples pass them: where a hop runs
    backwards its two channels swap places, until no hop does (read from every ordered pair's sketches: no pass over
    the records per swap)."""
    order = list(order)
    for _ in range(len(order) ** 2):  # more than the swaps that sorting them can need
        sketches = pairs.chain(order)
        backwards = _backwards(sketches, order)
        if backwards is None:
            break
        order[backwards], order[backwards + 1] = order[backwards + 1], order[backwards]
    return sketches


def _backwards(sketches, order: list) -> "int | None":
    """The position of the first channel of `order` whose hop to the next runs backwards, or None."""
    return next((a for hop, a, _ in hops_of(order) if hop >= 0 and _runs_backwards(sketches, hop)), None)


def _runs_backwards(sketches, hop: int) -> bool:
    statistics = sketches.hop_statistics(hop, [0.5])
    return statistics["count"] > 0 and statistics["q"][0] is not None and statistics["q"][0] < 0


def pipeline_sketches(app, channels=None):
    """The HopSketches of the pipeline (None: every record channel but the task channels, in the order their
    tuples pass them: `ordered_sketches`)."""
    ordered = channels is None
    if ordered:
        rows = row_prefixes()
        channels = [c for c in app.catalog.channels("records") if c not in TASK_CHANNELS and not c.startswith(rows)]
    channels = list(channels)
    if len(channels) < 2:
        raise ValueError(f"a pipeline needs at least two trace points, got {channels}")
    app.check_channels(channels, app.catalog.channels("records"))
    return ordered_sketches(app, channels)[0] if ordered else hop_sketches(app, channels)


def pipeline(app, channels=None):
    """Rows hop = 0, 1, ... for consecutive trace points and hop = -1 for first -> last (end to end); see
    PIPELINE_DDL. None: every record channel except the task channels, in the order their tuples pass them."""
    return local_frame(app.spark, pipeline_rows(pipeline_sketches(app, channels)), PIPELINE_DDL)
