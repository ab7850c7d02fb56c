"""Built-in workloads and key distributions; every bucket is one Arrow record batch made before the run.

A workload is a function `(n, rng, distribution) -> dict[str, numpy array]` of fixed-width columns. Tuple ids
and event times are not part of the payload: the emitter stamps each bucket with its first tuple id and its
emission time, so a preloaded bucket can be sent many times (see wire.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa

DISTRIBUTIONS = ("uniform", "normal", "zipf")
ZIPF_EXPONENT = 1.2  # zipf: key k of n has the share (k + 1)^-1.2 / H(n, 1.2), so 23% of 1000 ads go to ad 0

# YSB: 1000 ads in 100 campaigns; string fields travel as small integer codes (dictionaries in the schema metadata).
YSB_ADS = 1000
YSB_CAMPAIGNS = 100
YSB_AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
YSB_EVENT_TYPES = ("view", "click", "purchase")
KARIMOV_GEOS = 100

Workload = Callable[[int, np.random.Generator, str], dict]


def draw_keys(n: int, cardinality: int, rng: np.random.Generator, distribution: str) -> np.ndarray:
    """n keys in [0, cardinality) following the named distribution."""
    if distribution == "uniform":
        return rng.integers(0, cardinality, n, dtype=np.int64)
    if distribution == "normal":
        keys = np.rint(rng.normal(cardinality / 2, cardinality / 8, n)).astype(np.int64)
        return np.clip(keys, 0, cardinality - 1)
    if distribution == "zipf":  # Zipf's law bounded to the keys, not numpy's unbounded zipf folded onto them
        weights = np.arange(1, cardinality + 1, dtype=np.float64) ** -ZIPF_EXPONENT
        return rng.choice(cardinality, n, p=weights / weights.sum())
    raise ValueError(f"unknown key distribution {distribution!r}; expected one of {', '.join(DISTRIBUTIONS)}")


def ysb(n: int, rng: np.random.Generator, distribution: str) -> dict:
    return {
        "user_id": rng.integers(0, 1 << 62, n, dtype=np.int64),
        "page_id": rng.integers(0, 1 << 62, n, dtype=np.int64),
        "ad_id": draw_keys(n, YSB_ADS, rng, distribution).astype(np.int32),
        "ad_type": rng.integers(0, len(YSB_AD_TYPES), n, dtype=np.int8),
        "event_type": rng.integers(0, len(YSB_EVENT_TYPES), n, dtype=np.int8),
        "ip": rng.integers(0, 1 << 32, n, dtype=np.uint32),
    }


def purchases(n: int, rng: np.random.Generator, distribution: str) -> dict:
    return {
        "price": rng.integers(1, 1000, n, dtype=np.int32),
        "geo": draw_keys(n, KARIMOV_GEOS, rng, distribution).astype(np.int32),
    }


WORKLOADS: dict[str, Workload] = {"ysb": ysb, "purchases": purchases}


def register_workload(name: str, workload: Workload) -> None:
    """Add a user schema: `workload(n, rng, distribution)` returns equal-length fixed-width numpy columns."""
    WORKLOADS[name] = workload


def ysb_campaign_of_ad(ad_id: np.ndarray) -> np.ndarray:
    """The campaign table of YSB: ad i belongs to campaign i // 10."""
    return ad_id // (YSB_ADS // YSB_CAMPAIGNS)


def make_buckets(workload: str, bucket_tuples: int, count: int, seed: int, distribution: str) -> list[pa.RecordBatch]:
    """Preload `count` buckets of `bucket_tuples` tuples each (all generation happens here, before the run)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; expected one of {', '.join(sorted(WORKLOADS))}")
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown key distribution {distribution!r}; expected one of {', '.join(DISTRIBUTIONS)}")
    if bucket_tuples < 1:
        raise ValueError(f"bucket size must be >= 1 tuple, got {bucket_tuples}")
    rng = np.random.default_rng(seed)
    buckets = []
    for _ in range(count):
        columns = WORKLOADS[workload](bucket_tuples, rng, distribution)
        buckets.append(pa.RecordBatch.from_pydict(columns))
    return buckets
