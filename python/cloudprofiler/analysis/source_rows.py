"""The latency of a streaming query's sampled records from its source to each operator they pass, per micro-batch
and over the query's life (docs/operators.md, "From the source").

A source that logs its rows (the generator source, with operator timing's row sample on) logs each sampled row
under the id the operator probe above its scan gives it, at the TSC it handed the row's batch to Spark
(`spark.source.delivered`) and, where its producer stamped it on the same host's clock, at the row's emission
(`spark.source.emitted`). Every probe of the chain that starts there (`operator.first_probe` names a probe whose
metadata says `operator.source`) logs the same rows; a record's latency to an operator is the time from its source
record to its record there, counted with its bound by the same one-pass sketches as every hop (hops.hop_sketches).
A micro-batch plans its probes anew, so each batch's operators are its own probes, placed as batch_operators()
places them.

From the event time, whatever the source: below a watermark, the chain's top probe logs each sampled row's event
time (`spark.source.event_time`, at the TSC its executor read when its wall clock read that time) and its chain's
first probe counts as a source's, so the same pass times those rows from their event time. The wall clock of what
stamped the event and the executor's are not calibrated: such a latency has no bound (err_max_ns null). Above the
watermark, where a chain's top still outputs the event-time column and nothing below it in its stage logs the rows,
that top logs their event times too: past a shuffle (new rows, another task's ids; its first probe says the chain is
of event times only, `operator.events_only`), or where the watermark's child generates no code (a deduplication: the
chain then starts at the watermark).

Past an aggregation, from the window's end: in a stage that saves a windowed aggregation's state, the highest operator
that outputs the window logs each sampled result's window end (`spark.source.window_end`, a wall-clock time as an event
time is; not for a window that has not ended, whose result is partial) and its chain's first probe counts as a
source's, so the same pass times the results from their window's end to that operator and to the sink: the latency
of a windowed result, as the Yahoo streaming benchmark measures it (the sink's write less the window's end).

Past an aggregation whose state the batch's last stage saves, to its key's task: the top of the source's chain logs each
sampled row's shuffle partition (`spark.shuffle.partitions`, the ordinal above the partition, at the TSC of the row's
own record there), and the record is timed to the end of that partition's task in the batch's last stage, which saved
its key's state: the operator STATE_SAVE at its place in the plan (_saved_records). A row a sliding window makes several
of (one a window that holds its time) logs a partition for each, and is timed to the last of their tasks' ends.

To the sink: a record that reached the top of its source's chain (the last operator that keeps its identity; each
side of a join has its own; not a chain of event times only, whose rows have no delivery or emission) is in its
batch's output once the batch's last task has ended (its TSC record, spark.task.end), past any exchange or
aggregation above it; the sink commits the batch on the driver next. Each record paired at the chain's top gets a
record of that end (same tuple id, the end's TSC and clock domain), so the hop to it is counted, with its bound
where the source and the last task ran on different hosts, by the same pass. It is the operator SINK at position 0,
before the plan's first."""
from __future__ import annotations

import functools

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .. import tables
from . import hops as hops_module, reader
from .catalog import TASK_CHANNELS
from .operator_hops import sourced_probes
from .streaming import BATCH, attempts_by_batch, batch_operators
from .tasks import task_records

QUANTILES = (0.5, 0.9, 0.99)
# the kind of source TSC of a windowed aggregation's results: their window's end (of `sources()`, the plugin's)
WINDOW_END = "window_end"
SINK, SINK_POSITION = "sink", 0  # the batch's output (its last task's end), placed before the plan's operators
STATE_SAVE = "StateStoreSave"  # the end of the operator's name that saves an aggregation's state (Spark's, by version)
SOURCE_DDL = ("query_id string, run_id string, batch_id long, source string, position int, probe_id long, "
              "operator string, rows long, min_ns double, p50_ns double, p90_ns double, p99_ns double, "
              "max_ns double, mean_ns double, err_max_ns double")
LIFETIME_DDL = ("query_id string, run_id string, source string, position int, operator string, batches long, "
                "rows long, min_ns double, p50_ns double, p90_ns double, p99_ns double, max_ns double, mean_ns double, "
                "err_max_ns double")
# batches()' latency columns: a batch's records from the source TSC and to the operator source_reach() tells them by
REACH_COLUMNS = ("latency_source string, latency_to string, latency_rows long, latency_p50_ns double, "
                 "latency_p99_ns double, latency_max_ns double, latency_err_max_ns double")


def sources() -> dict:
    """The kinds of source TSC, in the order the latency from the source is told by, each with whether its latency is
    bounded (the plugin's declaration): the emission's TSC where the producer stated its clock, else the event time
    (read off a wall clock no calibration bounds), else the delivery to Spark."""
    return tables.channel("source_rows").kinds


def source_moments() -> dict:
    """Each kind of source TSC's moment, in the words a latency is counted from ("emission"): the plugin's."""
    return tables.channel("source_rows").kinds_from


def source_channels(app) -> dict:
    """The source rows' channels by the TSC their records carry (of `sources()`). A file whose metadata is
    not the plugin's for them (another process's channel of that name) is left out."""
    declared = tables.channel("source_rows")
    found = {}
    for f in app.catalog.logs:
        kind = f.meta.get(declared.keys["tsc"])
        if f.kind == "records" and f.meta.get("spark.event") == declared.event and kind in sources() \
                and f.channel == declared.prefix + kind:
            found[kind] = f.channel
    return dict(sorted(found.items()))


def _last_task_ends(app, streaming_query_id) -> dict:
    """Per batch (a tuple of BATCH) the TSC record of its last task's end: (tsc, domain_id), the latest on the axis."""
    ends = task_records(app, TASK_CHANNELS[1], "end")
    latest = (attempts_by_batch(app, streaming_query_id).join(ends, "task_attempt_id").groupBy(*BATCH)
              .agg(F.max_by(F.struct("end_tsc", "end_domain_id"), "end_t_ns").alias("end")).collect())
    return {tuple(r[k] for k in BATCH): (r["end"]["end_tsc"], r["end"]["end_domain_id"]) for r in latest if r["end"]}


def _reached(app, streaming_query_id, top_ids: dict):
    """The records of the sources' chains' tops (`top_ids`: channel -> its number), each with its top's number
    (top_id), process, TSC, ordinal (its id's low 32 bits) and batch: what the sink's and the saved state's records
    are made from."""
    schema = reader.project(reader.RECORD_SCHEMA, ("tuple_id", "channel_id", "pid", "tsc"))
    return (reader.log_frame(app.spark, app.catalog.files_of(list(top_ids), "records"), app.timebase, schema, top_ids)
            .select("tuple_id", F.col("channel_id").alias("top_id"), "pid", "tsc",
                    F.col("tuple_id").bitwiseAND(F.lit(0xFFFFFFFF)).alias("ordinal"),
                    F.shiftright("tuple_id", 32).alias("task_attempt_id"))
            .join(attempts_by_batch(app, streaming_query_id), "task_attempt_id"))


def _sink_records(app, streaming_query_id, tops: dict, top_ids: dict, reached, first_position: int) -> tuple:
    """(batches, records): the batches of `tops` (batch -> the channels of its chains' tops, numbered by `top_ids`)
    whose last task's end is known, and a trace point's records for each, its channel_id first_position + its index
    in `batches`: one per record of each of the batch's tops (`reached`), at that end."""
    ends = _last_task_ends(app, streaming_query_id)
    batches = [batch for batch in tops if batch in ends]
    if not batches:
        return [], None
    rows = [(*batch, top_ids[top], first_position + n, *ends[batch]) for n, batch in enumerate(batches)
            for top in tops[batch]]
    sinks = reader.local_frame(app.spark, rows, "query_id string, run_id string, batch_id long, top_id int, "
                                                "channel_id int, tsc long, domain_id int")
    records = reached.drop("tsc").join(F.broadcast(sinks), [*BATCH, "top_id"]).select(*hops_module.COLUMNS)
    return batches, records


def shuffled_files(app) -> dict:
    """The files of the sampled rows' shuffle partitions (`spark.shuffle.partitions`), by the bits of their ids that
    hold the partition (their metadata's: the row's ordinal is the 32 bits above them); a file whose metadata is not
    the plugin's for them is left out."""
    declared = tables.channel("shuffled_rows")
    by_bits = {}
    for f in app.catalog.files_of([declared.prefix], "records"):
        bits = f.meta.get(declared.keys["partition_bits"])
        if f.meta.get("spark.event") == declared.event and str(bits).isdigit() and 0 < int(bits) <= 31:
            by_bits.setdefault(int(bits), []).append(f)
    return by_bits


def _saved_records(app, streaming_query_id, saving: dict, reached, first_position: int) -> tuple:
    """(batches, records): the batches of `saving` (batch -> the placed probe of the operator that saves its
    aggregation's state), and a record for each sampled row of their chains' tops (`reached`) whose shuffle partition
    was logged (channel_id first_position + its batch's index in `batches`) at the end of the task of that partition
    in the batch's last stage: the task that saved the state of the row's key."""
    logged = shuffled_files(app)
    batches = sorted(saving)
    if not logged or not batches:
        return [], None
    schema = reader.project(reader.RECORD_SCHEMA, ("tuple_id", "pid", "tsc"))
    # each file states how its ids are packed (the plugin's ShuffledRows)
    partitions = functools.reduce(DataFrame.unionByName, [
        reader.log_frame(app.spark, files, app.timebase, schema)
        .select("pid", "tsc", F.shiftrightunsigned("tuple_id", bits).bitwiseAND(F.lit(0xFFFFFFFF)).alias("ordinal"),
                F.col("tuple_id").bitwiseAND(F.lit((1 << bits) - 1)).alias("partition"))
        for bits, files in logged.items()])
    rows = reached.join(partitions, ["pid", "tsc", "ordinal"]).select("tuple_id", *BATCH, "partition")
    # the batch's last stage (where its state is saved): each partition's first successful attempt's end
    succeeded = app.task_table().where(F.col("status") == "SUCCESS").select("task_attempt_id", "stage_id", "partition")
    attempts = (attempts_by_batch(app, streaming_query_id).join(succeeded, "task_attempt_id")
                .withColumn("last", F.max("stage_id").over(Window.partitionBy(*BATCH)))
                .where(F.col("stage_id") == F.col("last")))
    ends = (attempts.join(task_records(app, TASK_CHANNELS[1], "end"), "task_attempt_id")
            .dropDuplicates([*BATCH, "partition"])
            .select(*BATCH, "partition", F.struct(F.col("end_tsc").alias("tsc"), F.col("end_domain_id")
                                                  .alias("domain_id")).alias("end"), "end_t_ns"))
    targets = reader.local_frame(app.spark, [(*batch, first_position + n) for n, batch in enumerate(batches)],
                                 "query_id string, run_id string, batch_id long, channel_id int")
    # a row a sliding window made several of has a partition for each: its values are all saved at the last end
    records = (rows.join(ends, [*BATCH, "partition"]).groupBy("tuple_id", *BATCH)
               .agg(F.max_by("end", "end_t_ns").alias("end")).join(F.broadcast(targets), BATCH)
               .select("tuple_id", "channel_id", "end.tsc", "end.domain_id").select(*hops_module.COLUMNS))
    return batches, records


def _sketches(app, streaming_query_id):
    """(placed, HopSketches): a dict per (batch, source, operator or SINK) with its hop's number, and the hops'
    sketches; (None, None) where no source logged rows or no probe of their chains ran in a batch in scope."""
    sources, probes = source_channels(app), sourced_probes(app)
    if not sources or not probes:
        return None, None
    # of the batches that ended (Spark posted their progress): a batch that runs as a report is made has tasks yet to
    # end, its last one and those that save its keys' state among them
    placed = (batch_operators(app, streaming_query_id)
              .where(F.col("probe_id").isin(list(probes)) | F.col("operator").endswith(STATE_SAVE))
              .join(app.streaming_progress().select(*BATCH), BATCH, "left_semi")
              .select(*BATCH, "position", "probe_id", "operator").collect())
    # the operator that saves an aggregation's state, per batch: timed apart (_saved_records)
    saving = {tuple(r[k] for k in BATCH): r.asDict() for r in placed if r["probe_id"] not in probes}
    placed = [r for r in placed if r["probe_id"] in probes]
    if not placed:
        return None, None
    # (batch, first probe) -> (position, channel) of the top of each of its sources' chains (both sides of a join
    # each have theirs): the first of its probes in the plan's order; not a chain past an exchange, whose rows are
    # others, their source records their event times only
    tops = {}
    for row in placed:
        probe = probes[row["probe_id"]]
        if not probe.events_only:
            chain, top = (tuple(row[k] for k in BATCH), probe.first), (row["position"], probe.channel)
            tops[chain] = min(tops.get(chain, top), top)
    batch_tops = {}
    for (batch, _), (_, channel) in sorted(tops.items()):
        batch_tops.setdefault(batch, []).append(channel)
    channels = list(sources.values()) + sorted({probes[r["probe_id"]].channel for r in placed})
    top_ids = {channel: i for i, channel in enumerate(sorted({c for b in batch_tops for c in batch_tops[b]}))}
    reached = _reached(app, streaming_query_id, top_ids)
    sunk, sink_records = _sink_records(app, streaming_query_id, batch_tops, top_ids, reached, len(channels))
    saved, saved_records = _saved_records(app, streaming_query_id, {b: saving[b] for b in saving if b in batch_tops},
                                          reached, len(channels) + len(sunk))
    index = {c: i for i, c in enumerate(channels)}
    targets = [(row.asDict(), index[probes[row["probe_id"]].channel]) for row in placed]
    targets += [({**dict(zip(BATCH, batch)), "position": SINK_POSITION, "probe_id": None, "operator": SINK},
                 len(channels) + n) for n, batch in enumerate(sunk)]
    targets += [(saving[batch], len(channels) + len(sunk) + n) for n, batch in enumerate(saved)]
    rows, hops = [], []
    for target, position in targets:
        for source, channel in sources.items():
            hops.append((len(hops), index[channel], position))
            rows.append({**target, "source": source, "hop": hops[-1][0]})
    names = (channels + [f"{SINK} of batch {'/'.join(map(str, batch))}" for batch in sunk]
             + [f"{STATE_SAVE} of batch {'/'.join(map(str, batch))}" for batch in saved])
    extra = [records for records in (sink_records, saved_records) if records is not None]
    return rows, hops_module.hop_sketches(app, names, hops,
                                          extra=functools.reduce(DataFrame.unionByName, extra) if extra else None)


def _statistics(sketches, hop: int, source: str) -> dict:
    s = sketches.hop_statistics(hop, QUANTILES)
    return {"rows": s["count"], "min_ns": s["min_ns"], "p50_ns": s["q"][0], "p90_ns": s["q"][1],
            "p99_ns": s["q"][2], "max_ns": s["max_ns"], "mean_ns": s["mean_ns"],
            "err_max_ns": s["err_max_ns"] if sources()[source] else None}


def latency_rows(app, streaming_query_id=None) -> tuple[list, list]:
    """(source_latency()'s rows, source_latency_lifetime()'s rows) as dicts, from one pass over the records."""
    placed, sketches = _sketches(app, streaming_query_id)
    if placed is None:
        return [], []
    per_batch = [{**{k: p[k] for k in (*BATCH, "source", "position", "probe_id", "operator")},
                  **_statistics(sketches, p["hop"], p["source"])} for p in placed]
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
                         **_statistics(merged_sketches, group, last["source"])})
    return [r for r in per_batch if r["rows"]], [r for r in lifetime if r["rows"]]


def source_latency(app, streaming_query_id=None):
    """One row per streaming query run, micro-batch, source TSC ("delivered": as the source handed the record's batch to
    Spark; "emitted": as its producer emitted it; "event_time": its event time, below a watermark; "window_end": a
    windowed aggregation's result, from its window's end) and operator of the chain the source's rows start, the sink,
    and past a stateful aggregation's shuffle its StateStoreSave (the end of the task that saved the record's key's
    state) (SOURCE_DDL): the records paired and their latency from the source to the operator (a probe's time is when
    the record leaves its operator), min, p50, p90, p99, max, mean in ns, and the largest error bound (0 on one host's
    clock; null from the event time: wall clocks). Of the batches that ended only (their progress posted: a report made
    while a batch runs leaves it out). Empty where no source logged rows (operator timing or its rows' sample off, or
    neither our source nor a watermark)."""
    return reader.local_frame(app.spark, latency_rows(app, streaming_query_id)[0], SOURCE_DDL)


def source_latency_lifetime(app, streaming_query_id=None):
    """source_latency() over each query run's whole life: one row per run, source TSC and operator (by its place in
    the plan), its batches with paired records, and the latency of all their records (LIFETIME_DDL): the batches'
    sketches added up, so the quantiles are those of every record, not of the batches' quantiles."""
    return reader.local_frame(app.spark, latency_rows(app, streaming_query_id)[1], LIFETIME_DDL)


def source_reach(lifetime: pd.DataFrame, query_id: str, run_id: "str | None" = None, kind: "str | None" = None):
    """The row of source_latency_lifetime() (of the query's run `run_id`, None: any) that a query's latency from its
    source is told by: from the records' emission where the source knows it on the operators' clock, else from their
    event time, else from their delivery to Spark, else from their window's end (`sources()`; the same for every run
    of the query; `kind`: that one); to the sink (at position 0) where the batches' last tasks' ends were known, else
    to the operator they reach last (the chain's top: the first in the plan's order from the root); None where its
    source logged no rows (of `kind`)."""
    mine = lifetime[lifetime["query_id"] == query_id] if not lifetime.empty else lifetime
    if mine.empty:
        return None
    kind = kind or next(k for k in sources() if (mine["source"] == k).any())
    mine = mine[mine["source"] == kind]
    if run_id is not None:
        mine = mine[mine["run_id"] == run_id]
    return mine.sort_values("position").iloc[0] if not mine.empty else None


def reach_batches(per_batch: pd.DataFrame, reached) -> pd.DataFrame:
    """source_latency()'s rows of `reached`'s (a source_reach() row) query run, source TSC and operator, a row
    per batch."""
    if per_batch.empty:
        return per_batch.assign(p99_ns=pd.Series(dtype=float), batch_id=pd.Series(dtype=int))
    return per_batch[(per_batch["query_id"] == reached["query_id"]) & (per_batch["run_id"] == reached["run_id"]) &
                     (per_batch["source"] == reached["source"]) & (per_batch["position"] == reached["position"])]


def with_latency(app, batches, streaming_query_id=None, latency: bool = True):
    """streaming.batches()' frame `batches` with REACH_COLUMNS: per batch, its sampled records' latency from the
    source to the sink (or the operator they reach last), as source_reach() chooses per query run (null where its source
    logged none, or where `latency` is False: the pass over the records is then left out)."""
    per_batch, lifetime = latency_rows(app, streaming_query_id) if latency else ([], [])
    per_batch, lifetime = pd.DataFrame(per_batch), pd.DataFrame(lifetime)
    rows = []
    if not lifetime.empty:
        for (query_id, run_id), _ in lifetime.groupby(["query_id", "run_id"]):
            reached = source_reach(lifetime, query_id, run_id)
            if reached is None:
                continue
            rows += [(query_id, run_id, int(r.batch_id), r.source, r.operator, int(r.rows), r.p50_ns, r.p99_ns,
                      r.max_ns, r.err_max_ns) for r in reach_batches(per_batch, reached).itertuples()]
    latencies = reader.local_frame(app.spark, rows, "query_id string, run_id string, batch_id long, " + REACH_COLUMNS)
    if not rows:  # nothing to join: the columns, null, in the batches' own order
        return batches.select("*", *[F.lit(None).cast(f.dataType).alias(f.name) for f in latencies.schema.fields[3:]])
    return (batches.join(F.broadcast(latencies), BATCH, "left").select(*batches.columns, *latencies.columns[3:])
            .orderBy("query_id", "trigger_start_ms", "batch_id"))
