"""TSC values and durations of a Spark application's logs in the driver's reference domain, with error bounds.

The plugin writes into the application folder:
- `calibration.arrows`: every probe of every round, one row each: the pair (`domain_a`, `domain_b`; a is the
  reference for pairs with the driver), `direction` ("a->b": a sent the probe, "b->a": b did), `round`, the hosts
  and the (send, remote, recv) TSCs;
- `tsc-domains.arrows`: every process with a responder, its domain, role and the TSC check that put it there.
Executor files carry their `tsc.domain`; files of Python workers get theirs through the task that opened them
(`spark-tasks.arrows`: task attempt -> executor; `tsc-domains.arrows`: executor -> domain).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..logs import log_files, log_metadata, read_log
from .translate import Calibration, Probes, durations


def _table(path: Path) -> "pa.Table | None":
    """A table of the driver's, or None without it (an Arrow IPC file, or a stream of earlier versions)."""
    return read_log(path) if path.exists() else None


def _rounds(rows: pa.Table, initiator: str) -> list[Probes]:
    """The rounds of one pair's probes, oriented so that probes sent by `initiator` ("a->b" or "b->a") come from
    the reference side."""
    out = []
    for number in sorted(set(rows.column("round").to_pylist())):
        r = rows.filter(pc.equal(rows.column("round"), number))
        out.append(Probes.of(r.column("send_tsc").to_numpy(), r.column("remote_tsc").to_numpy(),
                             r.column("recv_tsc").to_numpy(), r.column("direction").to_numpy(False) == initiator))
    return out


def load_calibrations(app_folder: "str | Path", method: str = "minpair") -> tuple[str, dict[tuple[str, str], Calibration]]:
    """(reference domain, calibrations[(X, Y)] relating Y to X), for every pair with at least two rounds, in both
    orientations, from the probes of both directions."""
    table = _table(Path(app_folder) / "calibration.arrows")
    if table is None:
        return "", {}
    reference = (table.schema.metadata or {}).get(b"reference.domain", b"").decode()
    out = {}
    pairs = table.group_by(["domain_a", "domain_b"]).aggregate([]).to_pylist()
    for pair in pairs:
        a, b = pair["domain_a"], pair["domain_b"]
        rows = table.filter(pc.and_(pc.equal(table.column("domain_a"), a), pc.equal(table.column("domain_b"), b)))
        if len(set(rows.column("round").to_pylist())) >= 2:
            out[(a, b)] = Calibration.from_rounds(_rounds(rows, "a->b"), method)
            out[(b, a)] = Calibration.from_rounds(_rounds(rows, "b->a"), method)
    return reference, out


def load_domains(app_folder: "str | Path") -> pa.Table:
    """Every process with a probe responder: domain, boot_id, role (reference, representative, member), host,
    executor_id, pid, ports and the check that put it in its domain."""
    table = _table(Path(app_folder) / "tsc-domains.arrows")
    if table is None:
        raise FileNotFoundError(f"{app_folder} has no tsc-domains.arrows: the application ran without calibration")
    return table


class _Domains:
    """The TSC domain of a log file: its own `tsc.domain`, else the domain of the executor that ran the task
    named in its `spark.task_attempt_id`."""

    def __init__(self, app_folder: Path):
        self.executor: dict[str, str] = {}
        self.task: dict[int, str] = {}
        domains = _table(app_folder / "tsc-domains.arrows")
        if domains is not None:
            self.executor = dict(zip(domains.column("executor_id").to_pylist(), domains.column("domain").to_pylist()))
        tasks = _table(app_folder / "spark-tasks.arrows")
        if tasks is not None:
            self.task = dict(zip(tasks.column("task_attempt_id").to_pylist(), tasks.column("executor_id").to_pylist()))

    def of(self, path: Path, meta: dict) -> str:
        if meta.get("tsc.domain"):
            return meta["tsc.domain"]
        executor = self.task.get(int(meta.get("spark.task_attempt_id", -1)))
        if executor in self.executor:
            return self.executor[executor]
        raise ValueError(f"{path}: no tsc.domain in its metadata and no executor of a known domain ran its task")


def _records(app_folder: Path, channel: str, log_folder: "str | Path | None"):
    """(table of tuple_id, tsc, domain, simulation) of every file of `channel`."""
    domains = _Domains(app_folder)
    tables = []
    for path in log_files(log_folder or app_folder):
        meta = log_metadata(path)
        if meta.get("channel.name") != channel:
            continue
        table = read_log(path).replace_schema_metadata(None).select(["tuple_id", "tsc"])
        domain = domains.of(path, meta)
        tables.append(table.append_column("domain", pa.array([domain] * table.num_rows, pa.string())))
    if not tables:
        raise FileNotFoundError(f"no log files of channel {channel!r} in {log_folder or app_folder}")
    return pa.concat_tables(tables)


def records_in_reference(app_folder: "str | Path", channel: str, method: str = "minpair",
                         log_folder: "str | Path | None" = None) -> pa.Table:
    """Every record of `channel` (its files in `log_folder`, default the application folder), with columns
    domain, tsc_ref, tsc_err (reference ticks) and extrapolated added. A value of a domain without a calibration to
    the reference is unbounded: tsc_ref NaN, tsc_err inf, extrapolated true. Without any calibration (switched
    off), records under a plain boot id are taken as the driver's ticks; those of a process that refused or failed
    its check (`<boot id>#unchecked-<executor>`, `#uncalibrated`) stay unbounded."""
    app_folder = Path(app_folder)
    reference, calibrations = load_calibrations(app_folder, method)
    table = _records(app_folder, channel, log_folder)
    tsc = table.column("tsc").to_numpy().astype(np.int64)
    domain = table.column("domain").to_numpy(False)
    est, err, flag = np.full(tsc.size, np.nan), np.full(tsc.size, np.inf), np.ones(tsc.size, dtype=bool)
    for d in set(domain):
        rows = domain == d
        if d == reference or (not reference and "#" not in d):  # no calibration at all: the driver's domain
            est[rows], err[rows], flag[rows] = tsc[rows], 0.0, False
        elif (reference, d) in calibrations:
            est[rows], err[rows], flag[rows] = calibrations[(reference, d)].translate(tsc[rows])
    return (table.append_column("tsc_ref", pa.array(est)).append_column("tsc_err", pa.array(err))
            .append_column("extrapolated", pa.array(flag)))


def durations_in_reference(app_folder: "str | Path", start_channel: str, end_channel: str, method: str = "minpair",
                           log_folder: "str | Path | None" = None) -> pa.Table:
    """The duration of every tuple id logged on both channels (start on one, end on the other), in reference
    ticks by the best path (see translate.durations): columns tuple_id, start_domain, end_domain, start_tsc,
    end_tsc, duration, error, path, extrapolated."""
    app_folder = Path(app_folder)
    reference, calibrations = load_calibrations(app_folder, method)
    start = _records(app_folder, start_channel, log_folder).rename_columns(["tuple_id", "start_tsc", "start_domain"])
    end = _records(app_folder, end_channel, log_folder).rename_columns(["tuple_id", "end_tsc", "end_domain"])
    pairs = start.join(end, "tuple_id", join_type="inner").combine_chunks()
    n = pairs.num_rows
    value, error = np.full(n, np.nan), np.full(n, np.inf)
    path, flag = np.full(n, "unbounded", dtype=object), np.ones(n, dtype=bool)
    s_dom, e_dom = pairs.column("start_domain").to_numpy(False), pairs.column("end_domain").to_numpy(False)
    s_tsc, e_tsc = (pairs.column(c).to_numpy().astype(np.int64) for c in ("start_tsc", "end_tsc"))
    for sd, ed in set(zip(s_dom, e_dom)):
        rows = (s_dom == sd) & (e_dom == ed)
        d = durations(sd, s_tsc[rows], ed, e_tsc[rows], reference or sd, calibrations)
        value[rows], error[rows], path[rows], flag[rows] = d.value, d.error, d.method, d.extrapolated
    return pairs.append_column("duration", pa.array(value)).append_column("error", pa.array(error)).append_column(
        "path", pa.array(path, pa.string())).append_column("extrapolated", pa.array(flag))
