"""Every hop of a pipeline of trace points in one pass over its records: latency quantiles, bounds and histograms.

Joining each pair of channels on tuple id reads and shuffles a channel once per hop it takes part in, and every
quantile or histogram is one more job over the joined rows: at 100 M records that took tens of minutes on two
cores. Here the pipeline's records are read once and shuffled once by tuple id. Each partition sorts its rows,
pairs every tuple's records hop by hop (an inner join per hop: a tuple logged twice on a channel is paired twice, as
a join would), computes the durations with their bounds and counts them in log-bucketed sketches (sketch.py); Spark
adds the sketches up, and the driver receives a few thousand rows whatever the number of records. The partitions
are counted in the executors' JVMs by the plugin's HopSketches where the session reads log files there (no record
goes to a Python worker: at 100 M records that took two thirds of the pass), else in Python workers (numpy,
joins.durations_of), with the same counts. Quantiles are within sketch.RELATIVE_ACCURACY of the value at their rank
and never outside the exact minimum and maximum; counts, minimum, maximum, mean and the largest bound are exact.
"""
from __future__ import annotations

import functools
import itertools
import json
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from . import reader, sketch
from .joins import durations_of
from .timebase import ieee_bits

LATENCY, ERROR, TOTALS = 0, 1, 2  # what a sketch row counts: a latency bucket, a bound's bucket, a hop's totals
SKETCH_SCHEMA = pa.schema([
    ("hop", pa.int32()), ("remote", pa.bool_()), ("measure", pa.int8()), ("key", pa.int32()), ("count", pa.int64()),
    ("unbounded", pa.int64()), ("exact", pa.int64()), ("min_ns", pa.float64()), ("max_ns", pa.float64()),
    ("sum_ns", pa.float64()), ("err_max_ns", pa.float64())])
# A partition's records are sorted in one Python worker: about this many rows each (at most MAX_PARTITIONS, so the
# shuffle writes one file per partition without sorting)
ROWS_PER_PARTITION = 2_000_000
MAX_PARTITIONS = 200
MAX_PAIRS_PER_PARTITION = 10 * ROWS_PER_PARTITION  # what one Python worker pairs in memory
COLUMNS = ("tuple_id", "tsc", "domain_id", "channel_id")  # channel_id: the position along the pipeline
# how a sketch row's counts add up across partitions or hops (per hop, remote, measure, key)
SUMMED = {"count": "sum", "unbounded": "sum", "exact": "sum", "min_ns": "min", "max_ns": "max", "sum_ns": "sum",
          "err_max_ns": "max"}


def ordered_pairs(channels: list) -> list[tuple[int, int, int]]:
    """(number, from position, to position): every ordered pair of distinct trace points, as hops of one pass. A pair
    whose channels share no tuple id costs a search of sorted ids in each partition, and nothing after it."""
    return [(n, a, b) for n, (a, b) in enumerate(itertools.permutations(range(len(channels)), 2))]


def hops_of(channels: list) -> list[tuple[int, int, int]]:
    """(hop, from position, to position): consecutive trace points, then -1 for first -> last (with three or more)."""
    hops = [(i, i, i + 1) for i in range(len(channels) - 1)]
    return hops + [(-1, 0, len(channels) - 1)] if len(channels) > 2 else hops


def pairs(left: np.ndarray, right: np.ndarray, max_pairs: "int | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with left[i] == right[j], for sorted id arrays: every pairing of a repeated id. More than
    `max_pairs` pairings is a ValueError naming the id repeated most."""
    low, high = np.searchsorted(left, right, "left"), np.searchsorted(left, right, "right")
    counts = high - low
    if max_pairs is not None and counts.sum() > max_pairs:
        worst = int(np.argmax(counts))
        raise ValueError(f"{int(counts.sum()):,} pairings of {len(left):,} and {len(right):,} records (each record of "
                         f"tuple id {right[worst]} pairs with {int(counts[worst]):,})")
    j = np.repeat(np.arange(len(right)), counts)
    offsets = np.arange(len(j)) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(low, counts) + offsets, j


def _hop_rows(hop: int, value, error, unbounded, remote) -> list[dict]:
    """The sketch rows of one hop's durations in one partition."""
    rows = []
    for is_remote in (False, True):
        side = remote == is_remote
        if not side.any():
            continue
        bounded = side & ~unbounded
        latency, bound = value[bounded], error[bounded]
        rows.append({"hop": hop, "remote": is_remote, "measure": TOTALS, "key": 0, "count": int(bounded.sum()),
                     "unbounded": int((side & unbounded).sum()), "exact": int((bound == 0).sum()),
                     "min_ns": float(latency.min()) if len(latency) else None,
                     "max_ns": float(latency.max()) if len(latency) else None, "sum_ns": float(latency.sum()),
                     "err_max_ns": float(bound.max()) if len(bound) else None})
        for measure, values in ((LATENCY, latency), (ERROR, bound)):
            for key, count in zip(*sketch.count_keys(values)):
                rows.append({"hop": hop, "remote": is_remote, "measure": measure, "key": int(key), "count": int(count)})
    return rows


def _sketch_partition(batches, timebase, hops, channels: list):
    """mapInArrow over one tuple-id partition of the records of the trace points `channels`: its sketch rows."""
    table = pa.Table.from_batches(list(batches), schema=reader.project(reader.RECORD_SCHEMA, COLUMNS))
    if table.num_rows == 0:
        return
    position = table.column("channel_id").to_numpy()
    tuple_id, tsc = table.column("tuple_id").to_numpy(), table.column("tsc").to_numpy()
    domain = table.column("domain_id").to_numpy()
    order = np.lexsort((tuple_id, position))
    position, tuple_id, tsc, domain = position[order], tuple_id[order], tsc[order], domain[order]
    bounds = np.searchsorted(position, np.arange(len(channels) + 1))
    rows, matched = [], {}  # (a, b) -> the pairings of a's and b's records; b -> a reads them the other way round
    for hop, a, b in hops:
        first, second = slice(bounds[a], bounds[a + 1]), slice(bounds[b], bounds[b + 1])
        if (b, a) in matched:  # taken once: the other direction was the pairing's last use
            j, i = matched.pop((b, a))
        else:
            try:
                i, j = matched[a, b] = pairs(tuple_id[first], tuple_id[second], MAX_PAIRS_PER_PARTITION)
            except ValueError as exc:
                raise ValueError(f"hop {channels[a]} -> {channels[b]}: {exc}; ids that repeat this often name no "
                                 "tuple each, so the hop has no latency") from None
        start_domain, end_domain = domain[first][i], domain[second][j]
        value, error, _, _, unbounded = durations_of(timebase, start_domain, tsc[first][i], end_domain,
                                                     tsc[second][j])
        rows += _hop_rows(hop, value, error, unbounded, start_domain != end_domain)
    yield pa.RecordBatch.from_pylist(rows, schema=SKETCH_SCHEMA)


def python_sketch_rows(records, partitions: int, timebase, hops: list, channels: list):
    """SKETCH_SCHEMA rows of `records` (COLUMNS) in `partitions` partitions by tuple id, counted in Python workers
    (_sketch_partition)."""
    compute = functools.partial(_sketch_partition, timebase=timebase, hops=hops, channels=channels)
    return records.repartition(partitions, "tuple_id").mapInArrow(compute, reader.spark_schema(SKETCH_SCHEMA))


def jvm_sketch_rows(records, partitions: int, timebase, hops: list, channels: list):
    """python_sketch_rows' rows, counted in the executors' JVMs by the plugin's HopSketches (its note says how):
    the same counts per bucket (the durations are the same doubles), sums up to their order of addition. A hop past
    MAX_PAIRS_PER_PARTITION pairings fails as there (hop_sketches makes it the same ValueError)."""
    from pyspark.sql import DataFrame

    spark = records.sparkSession
    plan = {"durations": timebase.jvm_durations(), "hops": [list(h) for h in hops], "channels": channels,
            "max_pairs": MAX_PAIRS_PER_PARTITION, "min_ns": ieee_bits(sketch.MIN_NS),
            "log_gamma": ieee_bits(sketch.LOG_GAMMA)}
    rows = spark._jvm.io.cloudprofiler.spark.analysis.HopSketches.sketch(records._jdf.queryExecution().toRdd(),
                                                                         partitions, json.dumps(plan))
    schema = spark._jsparkSession.parseDataType(reader.spark_schema(SKETCH_SCHEMA).json())
    return DataFrame(spark._jsparkSession.createDataFrame(rows, schema), spark)


@dataclass
class HopSketches:
    """The sketches of every hop of `channels` (hops_of), added up: a row per (hop, remote, measure, key)."""

    channels: list
    rows: pd.DataFrame

    @functools.cached_property
    def _parts(self) -> dict:
        """The rows of each (hop, measure), split once: a report asks for hundreds of hops' statistics (a streaming
        query's latency from its source: one hop per batch and operator), each a lookup here, not a pass over all."""
        return {key: part for key, part in self.rows.groupby(["hop", "measure"], sort=False)}

    def _of(self, hop: int, measure: int, remote: "bool | None" = None) -> pd.DataFrame:
        rows = self._parts.get((hop, measure), self.rows.iloc[0:0])
        return rows if remote is None else rows[rows["remote"] == remote]

    def hop_statistics(self, hop: int, qs) -> dict:
        """count, remote_count, unbounded_count, min_ns, q (the quantiles qs of bounded latencies), max_ns, mean_ns,
        e (bound p50, p99), err_max_ns."""
        totals = self._of(hop, TOTALS)
        counts = totals["count"].to_numpy()
        count = int(counts.sum())
        low, high = _or_none(totals["min_ns"].min()), _or_none(totals["max_ns"].max())
        err_max = _or_none(totals["err_max_ns"].max())
        return {"count": count, "remote_count": int(counts[totals["remote"].to_numpy(dtype=bool)].sum()),
                "unbounded_count": int(totals["unbounded"].to_numpy().sum()),
                "min_ns": low, "q": sketch.quantiles(self._of(hop, LATENCY), qs, low, high), "max_ns": high,
                "mean_ns": float(totals["sum_ns"].to_numpy().sum() / count) if count else None,
                "e": sketch.quantiles(self._of(hop, ERROR), [0.5, 0.99], 0.0, err_max), "err_max_ns": err_max}

    def combined(self, group_of: dict) -> "HopSketches":
        """The sketches of groups of these hops (hop -> its group's number, which becomes the group's hop), each
        group's counts added up as hop_sketches adds up the partitions'."""
        rows = self.rows.assign(hop=self.rows["hop"].map(group_of))
        summed = rows.groupby(["hop", "remote", "measure", "key"], as_index=False).agg(
            **{column: (column, how) for column, how in SUMMED.items()})
        return HopSketches(self.channels, summed)

    def bounds(self, hop: int) -> pd.DataFrame:
        """Per remote/local: count (every pairing, bounded or not), exact (bound 0), unbounded, err_p50_ns,
        err_max_ns (of the finite bounds)."""
        rows = []
        for remote, totals in self._of(hop, TOTALS).groupby("remote"):
            err_max = _or_none(totals["err_max_ns"].max())
            rows.append({"remote": bool(remote), "count": int(totals["count"].sum() + totals["unbounded"].sum()),
                         "exact": int(totals["exact"].sum()), "unbounded": int(totals["unbounded"].sum()),
                         "err_p50_ns": sketch.quantiles(self._of(hop, ERROR, remote), [0.5], 0.0, err_max)[0],
                         "err_max_ns": err_max})
        return pd.DataFrame(rows, columns=["remote", "count", "exact", "unbounded", "err_p50_ns", "err_max_ns"])

    def errors(self, hop: int, bins_per_decade: int) -> pd.DataFrame:
        """The distribution of the finite, non-zero bounds per remote/local in fixed log bins (lo_ns, hi_ns, count)."""
        frames = []
        for remote, buckets in self._of(hop, ERROR).groupby("remote"):
            buckets = buckets[buckets["key"] != 0]
            index = np.floor(np.log10(sketch.values(buckets["key"].to_numpy())) * bins_per_decade)
            counts = buckets.groupby(index)["count"].sum()
            frames.append(pd.DataFrame({"remote": bool(remote), "lo_ns": 10.0 ** (counts.index / bins_per_decade),
                                        "hi_ns": 10.0 ** ((counts.index + 1) / bins_per_decade),
                                        "count": counts.to_numpy(np.int64)}))
        if not frames:
            return pd.DataFrame(columns=["remote", "lo_ns", "hi_ns", "count"])
        return pd.concat(frames, ignore_index=True).sort_values(["remote", "lo_ns"], ignore_index=True)

    def histogram(self, hop: int, bins: int) -> pd.DataFrame:
        """Counts of bounded latencies in at most `bins` log-spaced bins over [min, max] (at least 1 ns), each a run
        of whole buckets (sketch.bucket_bins: exact counts), per remote/local: remote, bin, lo_ns, hi_ns, count
        (non-empty bins only; latencies under 1 ns in the first)."""
        totals = self._of(hop, TOTALS)
        low, high = totals["min_ns"].min(), totals["max_ns"].max()
        if pd.isna(low):
            return pd.DataFrame(columns=["remote", "bin", "lo_ns", "hi_ns", "count"])
        edges = sketch.bucket_bins(low, high, bins)
        frames = []
        for remote, buckets in self._of(hop, LATENCY).groupby("remote"):
            counts = sketch.rebin(buckets, edges)
            kept = np.flatnonzero(counts)
            frames.append(pd.DataFrame({"remote": bool(remote), "bin": kept, "lo_ns": edges[kept],
                                        "hi_ns": edges[kept + 1], "count": counts[kept]}))
        return pd.concat(frames, ignore_index=True).sort_values(["remote", "bin"], ignore_index=True)


class PairSketches:
    """The sketches of every ordered pair of `channels` (ordered_pairs), counted in one Spark job when first asked
    for, from which the hops of any order of any of them are read without another pass over the records (`chain`).
    Counting every pair costs about three times a chain's pairing (four trace points: 12 pairs against 4 hops): it is
    worth it where a chain would be counted again (its trace points reordered, or cut into pipelines)."""

    def __init__(self, app, channels: list, sample: int = 1):
        self.app, self.channels, self.sample, self._rows = app, list(channels), sample, None

    @property
    def rows(self) -> pd.DataFrame:
        if self._rows is None:
            self._rows = hop_sketches(self.app, self.channels, ordered_pairs(self.channels), sample=self.sample).rows
        return self._rows

    def chain(self, channels: list) -> HopSketches:
        """The HopSketches of `channels` (some of these channels, in pipeline order): their hops' rows, renumbered."""
        number = {(self.channels[a], self.channels[b]): n for n, a, b in ordered_pairs(self.channels)}
        rows = [self.rows[self.rows["hop"] == number[channels[a], channels[b]]].assign(hop=hop)
                for hop, a, b in hops_of(channels)]
        return HopSketches(list(channels), pd.concat(rows, ignore_index=True) if rows else self.rows.iloc[0:0])


def _or_none(value):
    return None if pd.isna(value) else float(value)


def hop_sketches(app, channels: list, hops: "list | None" = None, in_jvm: "bool | None" = None,
                 extra=None, sample: int = 1) -> HopSketches:
    """The sketches of every hop of `channels` (trace points in pipeline order), in one Spark job; `hops`: (hop,
    from position, to position) in `channels` instead of hops_of(channels) (the hops of several pipelines). Counted
    in the executors' JVMs where the session reads log files there (jvm_sketch_rows), else in Python workers
    (python_sketch_rows); `in_jvm` chooses. `extra`: records of trace points that no log file holds (a DataFrame of
    COLUMNS, channel_id the position of their name in `channels`), paired with the files' records. `sample`: one
    tuple id in `sample` (by a hash of the id, so every record of a tuple kept is kept) is paired, the others are
    dropped as they are read."""
    from pyspark.sql import functions as F

    files = app.catalog.files_of(channels, "records")
    schema = reader.project(reader.RECORD_SCHEMA, COLUMNS)
    frame = reader.log_frame(app.spark, files, app.timebase, schema, {c: i for i, c in enumerate(channels)})
    partitions = max(1, min(MAX_PARTITIONS, math.ceil(sum(f.rows for f in files) / ROWS_PER_PARTITION)))
    in_jvm = bool(files) and reader.jvm_reader(app.spark) if in_jvm is None else in_jvm
    count = jvm_sketch_rows if in_jvm else python_sketch_rows
    records = frame.select(*COLUMNS)
    if sample > 1:
        records = records.where(F.pmod(F.xxhash64("tuple_id"), F.lit(sample)) == 0)
        partitions = max(1, partitions // sample)
    if extra is not None:
        types = reader.spark_schema(schema)
        records = records.unionByName(extra.select(*(F.col(c).cast(types[c].dataType) for c in COLUMNS)))
    sketched = count(records, partitions, app.timebase, hops or hops_of(channels), list(channels))
    summed = sketched.groupBy("hop", "remote", "measure", "key").agg(
        *(getattr(F, how)(column).alias(column) for column, how in SUMMED.items()))
    try:
        rows = summed.toPandas()
    except Exception as exc:  # the JVM's refusal of a hop, as the Python workers' ValueError
        refused = re.search(r"IllegalArgumentException: (hop .*? has no latency)", str(exc))
        if refused is None:
            raise
        raise ValueError(refused.group(1)) from None
    return HopSketches(list(channels), rows)
