"""The latency of a streaming query's sampled records from its source to each operator they pass, per micro-batch
and over the query's life (docs/operators.md, "From the source").

A source that logs its rows (the generator source, with operator timing's row sample on) logs each sampled row
under the id the operator probe above its scan gives it, at the TSC it handed the row's batch to Spark
(`spark.source.delivered`) and, where its producer stamped it on the same host's clock, at the row's emission
(`spark.source.emitted`). Every probe of the chain that starts there (`operator.first_probe` names a probe whose
metadata says `operator.source`) logs the same rows; a record's latency to an operator is the time from its source
record to its record there, counted with its bound by the same one-pass sketches as every hop (hops.hop_sketches).
A micro-batch plans its probes anew, so each batch's operators are its own probes, placed as batch_operators()
places them."""
from __future__ import annotations

import pandas as pd
from pyspark.sql import functions as F

from .. import tables
from . import hops as hops_module
from .operator_hops import sourced_probes
from .streaming import BATCH, batch_operators

QUANTILES = (0.5, 0.9, 0.99)
SOURCE_DDL = ("query_id string, run_id string, batch_id long, source string, position int, probe_id long, "
              "operator string, rows long, min_ns double, p50_ns double, p90_ns double, p99_ns double, "
              "max_ns double, mean_ns double, err_max_ns double")
LIFETIME_DDL = ("query_id string, run_id string, source string, position int, operator string, batches long, "
                "rows long, min_ns double, p50_ns double, p90_ns double, p99_ns double, max_ns double, mean_ns double, "
                "err_max_ns double")


def source_channels(app) -> dict:
    """The source rows' channels by the TSC their records carry: "delivered", "emitted". A file whose metadata is
    not the plugin's for them (another process's channel of that name) is left out."""
    declared = tables.channel("source_rows")
    found = {}
    for f in app.catalog.logs:
        kind = f.meta.get(declared.keys["tsc"])
        if f.kind == "records" and f.meta.get("spark.event") == declared.event and kind \
                and f.channel == declared.prefix + kind:
            found[kind] = f.channel
    return dict(sorted(found.items()))


def _sketches(app, streaming_query_id):
    """(placed, HopSketches): a dict per (batch, source, operator) with its hop's number, and the hops' sketches;
    (None, None) where no source logged rows or no probe of their chains ran in a batch in scope."""
    sources, probes = source_channels(app), sourced_probes(app)
    if not sources or not probes:
        return None, None
    placed = (batch_operators(app, streaming_query_id).where(F.col("probe_id").isin(list(probes)))
              .select(*BATCH, "position", "probe_id", "operator").collect())
    if not placed:
        return None, None
    channels = list(sources.values()) + sorted({probes[r["probe_id"]] for r in placed})
    index = {c: i for i, c in enumerate(channels)}
    rows, hops = [], []
    for row in placed:
        for source, channel in sources.items():
            hops.append((len(hops), index[channel], index[probes[row["probe_id"]]]))
            rows.append({**row.asDict(), "source": source, "hop": hops[-1][0]})
    return rows, hops_module.hop_sketches(app, channels, hops)


def _statistics(sketches, hop: int) -> dict:
    s = sketches.hop_statistics(hop, QUANTILES)
    return {"rows": s["count"], "min_ns": s["min_ns"], "p50_ns": s["q"][0], "p90_ns": s["q"][1],
            "p99_ns": s["q"][2], "max_ns": s["max_ns"], "mean_ns": s["mean_ns"], "err_max_ns": s["err_max_ns"]}


def latency_rows(app, streaming_query_id=None) -> tuple[list, list]:
    """(source_latency()'s rows, source_latency_lifetime()'s rows) as dicts, from one pass over the records."""
    placed, sketches = _sketches(app, streaming_query_id)
    if placed is None:
        return [], []
    per_batch = [{**{k: p[k] for k in (*BATCH, "source", "position", "probe_id", "operator")},
                  **_statistics(sketches, p["hop"])} for p in placed]
    frame = pd.DataFrame(placed)
    frame["group"] = frame.groupby(["query_id", "run_id", "source", "position"], dropna=False).ngroup()
    paired = {p["hop"]: r["rows"] for p, r in zip(placed, per_batch)}
    merged_sketches = sketches.combined(dict(zip(frame["hop"], frame["group"])))
    lifetime = []
    for group, part in frame.groupby("group"):
        last = part.sort_values("batch_id").iloc[-1]
        lifetime.append({"query_id": last["query_id"], "run_id": last["run_id"], "source": last["source"],
                         "position": int(last["position"]), "operator": last["operator"],
                         "batches": sum(1 for hop in part["hop"] if paired[hop]),
                         **_statistics(merged_sketches, group)})
    return [r for r in per_batch if r["rows"]], [r for r in lifetime if r["rows"]]


def source_latency(app, streaming_query_id=None):
    """One row per streaming query run, micro-batch, source TSC ("delivered": as the source handed the record's
    batch to Spark; "emitted": as its producer emitted it) and operator of the chain the source's rows start
    (SOURCE_DDL): the records paired and their latency from the source to the operator (a probe's time is when the
    record leaves its operator), min, p50, p90, p99, max, mean in ns, and the largest error bound (0 on one host's
    clock). Empty where no source logged rows (operator timing or its rows' sample off, or another source)."""
    return app.spark.createDataFrame(latency_rows(app, streaming_query_id)[0], SOURCE_DDL)


def source_latency_lifetime(app, streaming_query_id=None):
    """source_latency() over each query run's whole life: one row per run, source TSC and operator (by its place in
    the plan), its batches with paired records, and the latency of all their records (LIFETIME_DDL): the batches'
    sketches added up, so the quantiles are those of every record, not of the batches' quantiles."""
    return app.spark.createDataFrame(latency_rows(app, streaming_query_id)[1], LIFETIME_DDL)
