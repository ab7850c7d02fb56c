"""The report's tables (summary, stages, stragglers, pipeline, health), as text cells with their raw values beside,
for the HTML page and the terminal alike."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from . import format as fmt
from . import queries as queries_module
from .data import ReportData, hops_shown
from .stragglers import causes


@dataclass
class Cell:
    text: str
    value: "float | None" = None  # the number behind the text (the page carries it as data-value)
    bar: "float | None" = None  # a share (0 to 1) the page draws as a bar before the text


@dataclass
class Table:
    key: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)


def _started(start_unix_ms) -> str:
    if start_unix_ms is None:
        return "-"
    return dt.datetime.fromtimestamp(start_unix_ms / 1e3, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _listed(values, shown: int = 6) -> str:
    values = [str(v) for v in values or []]
    return ", ".join(values[:shown]) + (f" (+{len(values) - shown})" if len(values) > shown else "")


def summary(data: ReportData) -> Table:
    s = data.summary
    hz = s.get("tsc_hz")
    rows = [
        ("application", s.get("app_id"), None), ("folder", s.get("path"), None),
        ("started", _started(s.get("start_unix_ms")), s.get("start_unix_ms")),
        ("time span", fmt.duration(s.get("span_ns")), s.get("span_ns")),
        ("hosts", f"{len(s.get('hosts') or [])}: {_listed(s.get('hosts'))}", len(s.get("hosts") or [])),
        ("executors", fmt.count(s.get("executors")), s.get("executors")),
        ("TSC domains", f"{len(s.get('domains') or [])}: {_listed(s.get('domains'), 3)}",
         len(s.get("domains") or [])),
        ("reference domain", s.get("reference_domain"), None),
        ("TSC frequency", f"{hz / 1e9:.6f} GHz" if hz else "-", hz),
        ("calibrated", "yes" if s.get("calibrated") else "no", None),
        ("channels", fmt.count(s.get("channels")), s.get("channels")),
        ("records", fmt.count(s.get("records")), s.get("records")),
        ("dropped", fmt.count(s.get("dropped")), s.get("dropped")),
        ("files", f"{fmt.count(s.get('files'))} ({fmt.count(s.get('cut_files'))} cut short)", s.get("files")),
        ("task attempts", fmt.count(data.tasks_total), data.tasks_total),
        ("stages", fmt.count(len(data.stages)), len(data.stages)),
    ]
    return Table("summary", ["", ""], [[Cell(name), Cell(str(text if text is not None else "-"), value)]
                                       for name, text, value in rows])


def _ns(value) -> Cell:
    return Cell(fmt.duration(value), fmt.number(value))


def _bound(value) -> Cell:
    return Cell("exact", 0.0) if value == 0 else _ns(value)


def _n(value) -> Cell:
    return Cell(fmt.count(value), fmt.number(value))


def _bytes(value) -> Cell:
    return Cell("-" if fmt.number(value) is None else fmt.size(value), fmt.number(value))


def _share(part, whole) -> Cell:
    share = part / whole if whole and part == part and whole == whole else None
    return Cell(fmt.percent(share), share)


def stages(data: ReportData) -> Table:
    """A row per stage attempt: its durations, and Spark's metrics summed over its attempts that say where its time
    went (records read from input and shuffle, shuffle written, spilled to disk, GC's share of run time)."""
    table = Table("stages", ["stage", "job", "tasks", "failed", "p50", "p90", "p99", "max", "skew (max/p50)",
                             "stragglers", "gap before", "records read", "shuffle written", "spilled", "GC"])
    if data.stages.empty:
        return table
    for r in data.stages.sort_values(["stage_id", "stage_attempt"]).itertuples():
        table.rows.append([Cell(fmt.stage(r.stage_id, r.stage_attempt).removeprefix("stage "), float(r.stage_id)),
                           _n(r.job_id), _n(r.tasks), _n(r.failed), _ns(r.p50_ns), _ns(r.p90_ns), _ns(r.p99_ns),
                           _ns(r.max_ns), Cell("-" if r.skew != r.skew else f"{r.skew:.1f}x", r.skew),
                           _n(r.stragglers), _ns(r.gap_before_ns), _n(r.input_records + r.shuffle_read_records),
                           _bytes(r.shuffle_write_bytes), _bytes(r.disk_spilled_bytes),
                           _share(r.jvm_gc_time_ms, r.executor_run_time_ms)])
    return table


def stragglers(data: ReportData) -> Table:
    """Every straggler kept (the slowest first, at most data.STRAGGLERS_KEPT), each with where its time went."""
    table = Table("stragglers", ["stage", "partition", "executor", "duration", "x median", "where its time went"])
    for r in data.stragglers.itertuples():
        table.rows.append([Cell(fmt.stage(r.stage_id, r.stage_attempt).removeprefix("stage "), float(r.stage_id)),
                           _n(r.partition), Cell(fmt.executor(r.executor_id, r.host)), _ns(r.duration_ns),
                           Cell(f"{r.ratio:.1f}x", r.ratio), Cell("; ".join(causes(r)) or "-")])
    return table


def pipeline(data: ReportData) -> Table:
    table = Table("pipeline", ["hop", "tuples", "cross-host", "p50", "p99", "max", "bound p50", "bound p99",
                               "share of p99"])
    if data.pipeline.empty:
        return table
    for r in hops_shown(data.pipeline).itertuples():
        name = ("end to end: " if r.hop == -1 else "") + fmt.hop(r.from_channel, r.to_channel)
        table.rows.append([Cell(name, float(r.hop)), _n(r.count), _n(r.remote_count), _ns(r.p50_ns), _ns(r.p99_ns),
                           _ns(r.max_ns), _bound(r.err_p50_ns), _bound(r.err_p99_ns),
                           Cell(fmt.percent(r.share_of_p99), fmt.number(r.share_of_p99))])
    return table


def health(data: ReportData) -> Table:
    table = Table("health", ["severity", "kind", "subject", "count", "message"])
    if data.health.empty:
        return table
    order = {"error": 0, "warning": 1, "info": 2}
    rows = data.health.assign(o=data.health["severity"].map(order).fillna(3)).sort_values(["o", "kind"])
    for r in rows.itertuples():
        table.rows.append([Cell(r.severity), Cell(r.kind), Cell(str(r.subject)), _n(r.count), Cell(str(r.message))])
    return table


def _seconds(value, error=None) -> Cell:
    text = fmt.duration(value * 1e9)
    if error is not None and error == error and error > 0:
        text += f" \u00b1 {fmt.duration(error * 1e9)}"
    return Cell(text, fmt.number(value))


def query_table(rows, hops) -> Table:
    """One query's operators as a tree (the first column indents each probe under its consumer), each with the
    latency of the sampled rows that reach it from the operator below (`hops`: the query's operator_hops() rows)."""
    table = Table("operators", ["operator", "probe", "stage", "tasks", "rows", "own time", "share of query",
                                "with children", "skew", "row latency", "slowest"])
    for node, depth in queries_module.walk(queries_module.forest(rows)):
        r = node.row
        prefix = "  " * (depth - 1) + ("\u2514\u2500 " if not node.via_shuffle else "\u2514\u2550 ") if depth else ""
        share = None if r.share != r.share else float(r.share)
        table.rows.append([
            Cell(prefix + str(r.operator)), Cell(str(int(r.probe_id)), float(r.probe_id)),
            Cell("-" if r.stage_id != r.stage_id else str(int(r.stage_id))), _n(r.tasks), _n(r.rows),
            _seconds(r.exclusive_s, r.exclusive_err_s), Cell(fmt.percent(share), share, bar=share),
            _seconds(r.inclusive_s, r.inclusive_err_s),
            Cell("-" if r.skew != r.skew or r.tasks < 2 else f"{r.skew:.1f}x", None if r.skew != r.skew else r.skew),
            _row_latency(hops[hops["to_probe_id"] == r.probe_id] if not hops.empty else hops),
            Cell(queries_module.slowest_partition(r))])
    return table


def _row_latency(hops) -> Cell:
    return Cell(queries_module.row_latency(hops), fmt.number(hops["p50_ns"].max()) if not hops.empty else None)


def queries(data: ReportData) -> list:
    """(title, the query's task time, Table) per query shown, the most task time first."""
    if data.queries.empty:
        return []
    out = []
    for query in data.queries[data.queries["shown"]].itertuples():
        rows = data.operators[data.operators["sql_execution_id"] == query.sql_execution_id]
        hops = (data.operator_hops[data.operator_hops["sql_execution_id"] == query.sql_execution_id]
                if not data.operator_hops.empty else data.operator_hops)
        out.append((queries_module.query_title(query), float(query.query_task_s), query_table(rows, hops)))
    return out
