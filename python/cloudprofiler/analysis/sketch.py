"""Log-bucketed sketches of durations: counts per bucket that add up across partitions, from which quantiles and
histograms are read within a known relative error.

A value v is counted in bucket key(v) = sign(v) * (ceil(log_gamma(|v| / MIN_NS)) + 1) with
gamma = (1 + a) / (1 - a), a = RELATIVE_ACCURACY; the bucket's value MIN_NS * 2 gamma^(|k| - 1) / (gamma + 1) lies
within a (relative) of every value in the bucket, so a quantile read from the counts is within a of the value at
its rank. Values under MIN_NS in magnitude share bucket 0 (value 0).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

RELATIVE_ACCURACY = 0.005
MIN_NS = 0.001  # 1 ps: only a true zero (a duration within one TSC domain, read twice) falls below
_GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
LOG_GAMMA = np.log(_GAMMA)


def keys(values: np.ndarray) -> np.ndarray:
    """The bucket of each value (int32)."""
    magnitude = np.abs(values)
    small = ~(magnitude >= MIN_NS)
    k = np.ceil(np.log(np.where(small, MIN_NS, magnitude) / MIN_NS) / LOG_GAMMA) + 1  # + 1: bucket 0 is zero
    return np.where(small, 0, np.sign(values) * k).astype(np.int32)


def values(bucket_keys) -> np.ndarray:
    """The value each bucket stands for."""
    k = np.asarray(bucket_keys, dtype=np.float64)
    magnitude = MIN_NS * 2 * _GAMMA ** (np.abs(k) - 1) / (_GAMMA + 1)
    return np.where(k == 0, 0.0, np.sign(k) * magnitude)


def count_keys(values_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bucket keys, counts) of `values_`, one entry per bucket met, in key order. Counted by position from the
    lowest key (keys span a few thousand at most: +-log_gamma(seconds / MIN_NS)), not by sorting the values."""
    k = keys(values_)
    if len(k) == 0:
        return k, np.zeros(0, dtype=np.int64)
    low = int(k.min())
    counts = np.bincount(k - low)
    met = np.flatnonzero(counts)
    return (met + low).astype(np.int32), counts[met]


def quantiles(buckets: pd.DataFrame, qs, low: "float | None" = None, high: "float | None" = None) -> list:
    """Quantiles of the values counted in `buckets` (columns key, count; a key may repeat): per q, the value of
    the bucket holding the value of rank ceil(q * n) (numpy's inverted_cdf); None for no values.

    `low` and `high`, where given, are the exact minimum and maximum of the values counted: a bucket's value can lie
    up to RELATIVE_ACCURACY beyond them (a p99 of 3.17 s beside a maximum of 3.16 s), and the value at any rank lies
    within them, so each quantile is clipped to them (which only brings it closer to the value at its rank)."""
    # numpy rather than a pandas groupby: a report asks this of hundreds of small hops, where pandas' fixed cost
    # per call was most of the time
    order = np.argsort(buckets["key"].to_numpy(), kind="stable")
    key, count = buckets["key"].to_numpy()[order], buckets["count"].to_numpy()[order]
    total = int(count.sum())
    if total == 0:
        return [None] * len(qs)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])  # each key's first row, the keys sorted
    cumulative = np.cumsum(np.add.reduceat(count, starts))
    ranks = np.maximum(np.ceil(np.asarray(qs, dtype=float) * total), 1)
    positions = np.searchsorted(cumulative, ranks, side="left")
    found = values(key[starts][positions])
    found = np.maximum(found, low) if low is not None else found
    found = np.minimum(found, high) if high is not None else found
    return [float(v) for v in found]


def log_bins(low: float, high: float, bins: int) -> tuple[float, float]:
    """(first edge, log step) of `bins` log-spaced bins over [low, high] of latencies: edge k is
    first * exp(k * step); the range starts at 1 ns at least and is never empty."""
    low = max(low, 1.0)
    high = max(high, low * (1 + 1e-9))
    return low, math.log(high / low) / bins


def bucket_bins(low: float, high: float, bins: int) -> np.ndarray:
    """The edges of at most `bins` bins over [low, high] of latencies (from 1 ns at least), equally wide on a log
    scale, each a run of whole buckets: every bucket falls in one bin (`rebin`), so a bin's count is exact. Bins
    narrower than a bucket would get a bucket's count or none, by where its value falls: a comb of spikes for
    durations in a narrow band."""
    first, last = (int(k) for k in keys(np.array([max(low, 1.0), max(high, low, 1.0)])))
    per_bin = -(-(last - first + 1) // bins)
    count = -(-(last - first + 1) // per_bin)
    # bucket k holds the values in (MIN_NS gamma^(k - 2), MIN_NS gamma^(k - 1)]
    return MIN_NS * _GAMMA ** (first - 2 + per_bin * np.arange(count + 1, dtype=np.float64))


def rebin(buckets: pd.DataFrame, edges: np.ndarray) -> np.ndarray:
    """Counts of `buckets` (key, count) in the histogram bins between consecutive `edges` (a bucket falls in the bin
    that holds its value; below the first edge: the first bin, above the last: the last)."""
    index = np.clip(np.searchsorted(edges, values(buckets["key"].to_numpy()), side="right") - 1, 0, len(edges) - 2)
    return np.bincount(index, weights=buckets["count"].to_numpy(dtype=float), minlength=len(edges) - 1).astype(np.int64)
