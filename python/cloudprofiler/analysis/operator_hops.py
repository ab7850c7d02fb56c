"""The latency of sampled rows from SQL operator to operator, along the chains of operators that keep a row's
identity within a pipeline (a filter, a projection, the streamed side of a hash join) and from a Python UDF's input
to its output (docs/operators.md).

Each probe of a chain logs the same sampled rows (XoY on a row id that its chain's first probe gives) into a channel
of its own, `spark.operator.<probe id>`, whose metadata names the probe (`operator.probe`) and the chain's first
probe (`operator.first_probe`). A hop joins a probe to the probe of the operator that consumes its rows
(`parent_probe_id` in the nodes table) where both logged rows of the same chain; every hop of the application is
counted in one pass by hops.hop_sketches, as the trace points' hops are."""
from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import functions as F

from .. import tables
from . import hops as hops_module
from .operators import operator_tasks
from .reader import local_frame

QUANTILES = (0.5, 0.9, 0.99)
HOPS_DDL = ("sql_execution_id long, from_probe_id long, from_operator string, to_probe_id long, to_operator string, "
            "rows long, min_ns double, p50_ns double, p90_ns double, p99_ns double, max_ns double, mean_ns double")


def channel_prefix() -> str:
    """The start of every row channel's name, as the plugin declares it (OperatorRows.CHANNEL_PREFIX)."""
    return tables.channel("operator_rows").prefix


def row_prefixes() -> tuple:
    """The starts of the names of the plugin's sampled-row channels, the operators', the sources' (source_rows) and
    their shuffle partitions' (shuffled_rows, whose ids pack an ordinal and a partition): they lie along chains of
    their own, not along the trace points'."""
    return channel_prefix(), tables.channel("source_rows").prefix, tables.channel("shuffled_rows").prefix


def _row_files(app):
    """(file, probe id, its chain's first probe) of every file of a probe's sampled rows; a file whose metadata is
    not the plugin's for its rows (another process's channel of that name) is left out."""
    declared = tables.channel("operator_rows")
    for f in app.catalog.logs:
        if f.kind != "records" or not f.channel.startswith(declared.prefix) or f.meta.get("spark.event") != \
                declared.event:
            continue
        try:
            probe, first = int(f.meta.get(declared.keys["probe"])), int(f.meta.get(declared.keys["first_probe"]))
        except (TypeError, ValueError):
            continue
        if f.channel == declared.prefix + str(probe):
            yield f, probe, first


def row_channels(app) -> dict:
    """probe id -> (its channel, the first probe of its chain), for every probe that logged sampled rows."""
    return {probe: (f.channel, first) for f, probe, first in _row_files(app)}


class Sourced(NamedTuple):
    """A probe of a chain that starts at a source logging its rows: its channel, its chain's first probe, and whether
    the chain's rows have event times only (a chain past an exchange above a watermark, whose rows are new ones,
    another task's, logged at their event time and at no other source TSC)."""
    channel: str
    first: int
    events_only: bool


def sourced_probes(app) -> dict:
    """probe id -> Sourced, for every probe of a chain that starts at a source logging its rows (its first probe's
    metadata says so: source_rows)."""
    keys = tables.channel("operator_rows").keys
    files = list(_row_files(app))
    starts = {probe: f.meta.get(keys["events_only"]) == "true" for f, probe, _ in files
              if f.meta.get(keys["source"]) == "true"}
    return {probe: Sourced(f.channel, first, starts[first]) for f, probe, first in files if first in starts}


def operator_hops(app, **scope):
    """One row per SQL execution and hop between consecutive probes of a chain (HOPS_DDL): the operators at both
    ends (a probe's time is when the row leaves its operator, so a hop is the time of the operator `to_operator`
    names, for that row, with the probe's own log call), the sampled rows paired, and their latency: min, p50, p90,
    p99, max, mean in ns (the quantiles within hops.sketch's relative accuracy). `scope` as tasks(): the probes that
    ran in the attempts in scope. Empty where no probe logged rows (spark.cloudprofiler.operators off, or its
    rows.x 0)."""
    logged = row_channels(app)
    if not logged:
        return local_frame(app.spark, [], HOPS_DDL)
    probes = list(logged)
    nodes = {r["probe_id"]: r for r in app.operator_nodes().where(F.col("probe_id").isin(probes))
             .dropDuplicates(["probe_id"]).select("probe_id", "parent_probe_id", "operator").collect()}
    queries = {r["probe_id"]: r["sql_execution_id"] for r in operator_tasks(app, **scope)
               .where(F.col("probe_id").isin(probes)).groupBy("probe_id")
               .agg(F.min("sql_execution_id").alias("sql_execution_id")).collect()}
    plan = {p: (n["parent_probe_id"], n["operator"], queries.get(p)) for p, n in nodes.items()}
    return local_frame(app.spark, hop_rows(app, plan, logged), HOPS_DDL)


def hop_rows(app, plan: dict, logged: "dict | None" = None) -> list[dict]:
    """operator_hops()'s rows (HOPS_DDL's columns) of the probes of `plan` (probe id -> (its consumer's probe id,
    its operator, its SQL execution id or None where it ran in no attempt in scope)), for a caller that already has
    them (the report, from operators()); `logged`: row_channels(app), read here if not given."""
    logged = row_channels(app) if logged is None else logged
    pairs = []
    for probe, (_, first) in sorted(logged.items()):
        parent = plan[probe][0] if probe in plan else None
        # the probe above a Python UDF logs the ids the probe below it numbers, which may also continue a chain
        if plan.get(probe, (None, None, None))[2] is not None and parent in plan and parent in logged \
                and logged[parent][1] in (first, probe):
            pairs.append((probe, parent))
    if not pairs:
        return []
    channels = sorted({logged[p][0] for pair in pairs for p in pair})
    position = {c: i for i, c in enumerate(channels)}
    hops = [(i, position[logged[a][0]], position[logged[b][0]]) for i, (a, b) in enumerate(pairs)]
    sketches = hops_module.hop_sketches(app, channels, hops)
    rows = []
    for i, (a, b) in enumerate(pairs):
        s = sketches.hop_statistics(i, QUANTILES)
        rows.append({"sql_execution_id": plan[a][2], "from_probe_id": a, "from_operator": plan[a][1],
                     "to_probe_id": b, "to_operator": plan[b][1], "rows": s["count"], "min_ns": s["min_ns"],
                     "p50_ns": s["q"][0], "p90_ns": s["q"][1], "p99_ns": s["q"][2], "max_ns": s["max_ns"],
                     "mean_ns": s["mean_ns"]})
    return rows
