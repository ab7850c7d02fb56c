"""What may make the numbers incomplete or loose, in plain words: lost records, cut or open files, domains without
calibration, values outside the calibrated span; and the application's summary."""
from __future__ import annotations

from collections import Counter

from pyspark.sql import functions as F

from .. import tables
from . import reader

HEALTH_DDL = "kind string, severity string, subject string, count long, message string"


def _row(kind, severity, subject, count, message):
    return {"kind": kind, "severity": severity, "subject": subject, "count": int(count), "message": message}


def _file_rows(app) -> list:
    rows = [_row("unreadable", "error", path, 1, f"{path} could not be read and is left out: {error}")
            for path, error in sorted(app.catalog.unreadable.items())]
    for f in app.catalog.logs:
        if f.cut:
            rows.append(_row("cut_file", "warning", f.file, 1, (
                f"{f.file} was cut short (its process was killed while writing it): read up to its last complete "
                f"batch, {f.rows} records in {f.batches} batches")))
        if f.domain is None:
            rows.append(_row("unplaced", "warning", f.file, f.rows, (
                f"{f.file}: no TSC domain (no tsc.domain, no process or executor of a known domain): its "
                f"{f.rows} values are unbounded")))
        if f.meta.get("tsc.invariant") is False:
            rows.append(_row("non_invariant", "warning", f.file, f.rows, (
                f"{f.file} was written on a CPU without an invariant TSC: its rate may change, and only forced "
                "calibration relates it to other hosts")))
    dropped, still_open = Counter(), Counter()
    for f in app.catalog.logs:
        dropped[f.channel] += f.meta.get("records.dropped") or 0
        still_open[f.channel] += not f.closed and not f.cut
    rows += [_row("open_file", "info", channel, n, f"{n} files of channel {channel} were not closed (the application "
                  "still runs, or the process ended without closing them, as Python workers do): read up to their "
                  "last flush") for channel, n in sorted(still_open.items()) if n]
    rows += [_row("drops", "warning", channel, n, f"channel {channel} dropped {n} records (its buffers were full "
                  "and its policy is drop)") for channel, n in sorted(dropped.items()) if n]
    for f in app.catalog.logs:
        if f.meta.get("handoff.rejected_blocks"):
            rows.append(_row("malformed_handoff", "warning", f.file, f.meta["handoff.rejected_blocks"], (
                f"channel {f.channel}: the Python worker pid {f.meta.get('handoff.pid')} wrote "
                f"{f.meta['handoff.rejected_blocks']} malformed blocks into its hand-off to the executor, which "
                "dropped them (their records count in records.dropped) and took the rest")))
        if f.meta.get("handoff.rejected_files"):
            rows.append(_row("unsealed_handoff", "warning", f.file, f.meta["handoff.rejected_files"], (
                f"channel {f.channel}: the Python worker pid {f.meta.get('handoff.pid')} handed the executor shared "
                "memory not sealed against shrinking, which a shrink could make kill the executor; the executor "
                "refused it, and its records are lost")))
    return rows


def _calibration_rows(app) -> list:
    tb = app.timebase
    domains = sorted({f.domain for f in app.catalog.logs if f.domain})
    others = [d for d in domains if d != tb.reference]
    unrelated = [d for d in others if (tb.reference, d) not in tb.calibrations]
    rows = []
    if app.probes is None:
        if others:
            rows.append(_row("no_calibration", "warning", app.path, len(others), (
                f"no {tables.file('calibration')}: the application ran without calibration "
                f"(spark.cloudprofiler.calibration.enabled=false) or it never completed two rounds; "
                f"{len(domains)} TSC domains: durations within one host use its own TSC, durations across "
                f"hosts are unbounded")))
        else:
            rows.append(_row("no_calibration", "info", app.path, 0, (
                f"no {tables.file('calibration')}: every file is in one TSC domain, so nothing needed "
                "calibrating")))
    for d in unrelated:
        hosts = sorted({f.meta.get("host", "") for f in app.catalog.logs if f.domain == d})
        rows.append(_row("uncalibrated", "warning", d, sum(f.rows for f in app.catalog.logs if f.domain == d), (
            f"TSC domain {d} (host {', '.join(hosts)}) has no calibration with the reference {tb.reference}: its "
            "values have no place on the time axis, durations across it are unbounded")))
    if app._table_file("tasks") is None:
        rows.append(_row("no_task_table", "info", app.path, 0, (
            f"no {tables.file('tasks')} (the driver publishes it every collect interval and at application end): "
            "tasks have no Spark columns")))
    return rows


def _value_counts(app) -> dict:
    """channel -> [values, extrapolated, unbounded]. A domain is bounded or not as a whole, and its calibrated span
    is one interval of its ticks, so a file whose first and last values lie inside it has no value outside: only the
    files that reach beyond it are read, to count theirs."""
    counts, beyond = {}, []
    for f in app.catalog.logs:
        n = counts.setdefault(f.channel, [0, 0, 0])
        n[0] += f.rows
        if not f.rows:
            continue
        _, _, extrapolated, unbounded = app.timebase.translate(f.domain, [f.min_tsc, f.max_tsc])
        if unbounded.all():
            n[2] += f.rows
        elif extrapolated.any():
            beyond.append(f)
    for kind in ("records", "counters"):
        files = [f for f in beyond if f.kind == kind]
        if files:
            schema = reader.kind_schema(kind, ["channel", "extrapolated"])
            for r in reader.log_frame(app.spark, files, app.timebase, schema).groupBy("channel").agg(
                    F.sum(F.col("extrapolated").cast("long")).alias("extrapolated")).collect():
                counts[r["channel"]][1] += r["extrapolated"]
    return counts


def _value_rows(app) -> list:
    """Values outside the calibrated span or without any bound, per channel."""
    rows = []
    for channel, (n, extrapolated, unbounded) in sorted(_value_counts(app).items()):
        if extrapolated:
            rows.append(_row("extrapolated", "warning", channel, extrapolated, (
                f"{extrapolated} of {n} values of channel {channel} lie outside the span between two calibration "
                "rounds: their bounds grow with the distance")))
        if unbounded:
            rows.append(_row("unbounded", "warning", channel, unbounded, (
                f"{unbounded} of {n} values of channel {channel} are in a TSC domain no calibration relates to the "
                "reference: t_ns NaN, err_ns inf")))
    return rows


def health(app):
    rows = _file_rows(app) + _calibration_rows(app) + _value_rows(app)
    return reader.local_frame(app.spark, rows, HEALTH_DDL)


def summary(app) -> dict:
    """Small facts about the application, from the catalog (no pass over the records)."""
    tb = app.timebase
    logs = app.catalog.logs
    ends = [tb.translate(f.domain, [f.max_tsc])[0][0] for f in logs if f.max_tsc is not None]
    ends = [e for e in ends if e == e]
    # the driver is the executor in local mode; on a cluster its own files (trace points it evaluated) are no
    # executor's
    processes = {f.executor_id for f in logs if f.executor_id is not None}
    return {"app_id": app.app_id, "path": app.path, "hosts": sorted({f.meta.get("host", "") for f in logs}),
            "executors": len(processes - {"driver"} or processes),
            "domains": sorted({f.domain for f in logs if f.domain} | ({tb.reference} - {""})),
            "channels": len(app.catalog.channels()),
            "records": sum(f.rows for f in logs), "dropped": sum(f.meta.get("records.dropped") or 0 for f in logs),
            "files": len(logs), "cut_files": sum(f.cut for f in logs), "start_unix_ms": tb.start_unix_ms,
            "span_ns": float(max(ends)) if ends else 0.0, "reference_domain": tb.reference,
            "reference_source": tb.reference_source, "tsc_hz": tb.hz, "calibrated": bool(tb.calibrations)}
