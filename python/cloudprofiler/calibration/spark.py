"""TSC values and durations of a Spark application's logs in the driver's reference domain, with error bounds.

The plugin writes into the application folder (its tables: cloudprofiler.tables):
- "calibration": every probe of every round, one row each: the pair (`domain_a`, `domain_b`; a is the
  reference for pairs with the driver), `direction` ("a->b": a sent the probe, "b->a": b did), `round`, the hosts
  and the (send, remote, recv) TSCs;
- "tsc_domains": every process with a responder, its domain, role and the TSC check that put it there.
Executor files carry their `tsc.domain`; files of Python workers get theirs through the task that opened them
("tasks": task attempt -> executor; "tsc_domains": executor -> domain).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import tables as plugin_tables
from ..logs import log_files, log_metadata, read_log
from .translate import PATH, Calibration, Probes, durations, path_names, to_reference


def _table(app_folder: "str | Path", id: str) -> "pa.Table | None":
    """The application's table `id` (cloudprofiler.tables), or None without it (an Arrow IPC file, or a stream of
    earlier versions)."""
    path = Path(app_folder) / plugin_tables.file(id)
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


def calibrations_from_probes(table: "pa.Table | None", method: str = "minpair"
                             ) -> tuple[str, dict[tuple[str, str], Calibration]]:
    """(reference domain, calibrations[(X, Y)] relating Y to X) from the calibration probes, for every
    pair with at least two rounds, in both orientations, from the probes of both directions."""
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


def load_calibrations(app_folder: "str | Path",
                      method: str = "minpair") -> tuple[str, dict[tuple[str, str], Calibration]]:
    """calibrations_from_probes of the application folder's calibration probes ("", {} without them)."""
    return calibrations_from_probes(_table(app_folder, "calibration"), method)


def load_domains(app_folder: "str | Path") -> pa.Table:
    """Every process with a probe responder: domain, boot_id, role (reference, representative, member), host,
    executor_id, pid, ports and the check that put it in its domain."""
    table = _table(app_folder, "tsc_domains")
    if table is None:
        raise FileNotFoundError(f"{app_folder} has no {plugin_tables.file('tsc_domains')}: the application ran without "
                                "calibration")
    return table


def _clock(boot_id, simulation) -> tuple:
    """Whose TSC a process reads, comparable: its boot id and its simulation (a dict, JSON text or None) as JSON with
    sorted keys; text that is no JSON (a damaged file's) stays as it is, which no process's clock matches."""
    if isinstance(simulation, str):
        try:
            simulation = json.loads(simulation)
        except ValueError:
            return boot_id, "unreadable: " + simulation
    return boot_id, json.dumps(simulation, sort_keys=True)


class DomainResolver:
    """The TSC domain of a log file, from its metadata (`log_metadata`), in this order:
    0. where it holds values another process stamped (the generator's emission TSCs: source_rows' clock keys), the
       domain of the processes that read that TSC (the same boot id and TSC simulation), where they are all of one
       domain: an unchecked claim, as the stamping process answers no probes; else None;
    1. its own `tsc.domain` (task channels of executors);
    2. the domain of its process (boot id and pid): a responder in the TSC domains, or another file of the same
       process that carries `tsc.domain` (the executor's `cp_trace` channels beside its task channels);
    3. the domain of the executor that ran the task named in its `spark.task_attempt_id` (Python workers);
    4. without calibration (no TSC domains), its boot id: one machine, one TSC, unchecked.
    Else None: a file that nothing places stays unrelated to every other domain.
    `executor_of_task`: task attempt id -> executor id, from the task table, for the tasks of Python workers."""

    def __init__(self, domains: "pa.Table | None", executor_of_task: dict, metas):
        self.calibrated = domains is not None
        self.task = executor_of_task
        self.process: dict[tuple, str] = {}  # (boot id, pid) -> domain
        self.process_executor: dict[tuple, str] = {}  # (boot id, pid) -> executor id
        self.executor: dict[str, str] = {}
        rows = [] if domains is None else domains.to_pylist()
        for row in rows:
            self.process[(row["boot_id"], row["pid"])] = row["domain"]
            self.process_executor[(row["boot_id"], row["pid"])] = row["executor_id"]
            self.executor.setdefault(row["executor_id"], row["domain"])
        metas = list(metas)
        for meta in metas:
            process, executor = (meta.get("boot_id"), meta.get("pid")), meta.get("spark.executor_id")
            if executor is not None:
                self.process_executor.setdefault(process, executor)
            if meta.get("tsc.domain"):
                self.process.setdefault(process, meta["tsc.domain"])
                if executor is not None:
                    self.executor.setdefault(executor, meta["tsc.domain"])
        keys = plugin_tables.channel("source_rows").keys
        self.claim_keys = keys["clock_boot_id"], keys["clock_simulation"]
        self.clocks: dict[tuple, set] = {}  # _clock -> the domains of the processes that read it
        readers = [(row["boot_id"], row.get("tsc_simulation"), row["domain"]) for row in rows
                   if row.get("tsc_simulation") is not None]  # before the column: the files' metadata says it
        readers += [(m.get("boot_id"), m.get("tsc.simulation"), self._own(m)) for m in metas
                    if m.get(self.claim_keys[0]) is None]
        for boot, simulation, domain in readers:
            if domain is not None:
                self.clocks.setdefault(_clock(boot, simulation), set()).add(domain)

    def executor_of(self, meta: dict) -> "str | None":
        """The executor that wrote the file (its task channels, or another file of its process) or ran the task of
        its Python worker."""
        if meta.get("spark.executor_id") is not None:
            return meta["spark.executor_id"]
        task = meta.get("spark.task_attempt_id")
        if task is not None:
            return self.task.get(int(task))
        return self.process_executor.get((meta.get("boot_id"), meta.get("pid")))

    def of(self, meta: dict) -> "str | None":
        boot = meta.get(self.claim_keys[0])
        if boot is not None:
            domains = self.clocks.get(_clock(boot, meta.get(self.claim_keys[1])), set())
            return next(iter(domains)) if len(domains) == 1 else None
        return self._own(meta)

    def _own(self, meta: dict) -> "str | None":
        """The domain of the process that wrote the file (steps 1-4)."""
        if meta.get("tsc.domain"):
            return meta["tsc.domain"]
        domain = self.process.get((meta.get("boot_id"), meta.get("pid")))
        if domain is None and meta.get("spark.task_attempt_id") is not None:
            domain = self.executor.get(self.executor_of(meta))
        if domain is None and not self.calibrated:
            domain = meta.get("boot_id")
        return domain


def _records(app_folder: Path, channel: str, log_folder: "str | Path | None"):
    """(table of tuple_id, tsc, domain, simulation) of every file of `channel`."""
    files = [(path, log_metadata(path)) for path in log_files(log_folder or app_folder)]
    tasks = _table(app_folder, "tasks")
    executor_of_task = {} if tasks is None else dict(zip(tasks.column("task_attempt_id").to_pylist(),
                                                         tasks.column("executor_id").to_pylist()))
    domains = DomainResolver(_table(app_folder, "tsc_domains"), executor_of_task, (m for _, m in files))
    tables = []
    for path, meta in files:
        if meta.get("channel.name") != channel:
            continue
        table = read_log(path).replace_schema_metadata(None).select(["tuple_id", "tsc"])
        domain = domains.of(meta)
        if domain is None:
            raise ValueError(f"{path}: no tsc.domain in its metadata and no process or executor of a known domain "
                             "wrote it")
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
        # no calibration at all: a plain boot id is taken as the driver's domain
        known = to_reference(d, tsc[rows], d if not reference and "#" not in d else reference, calibrations)
        if known is not None:
            est[rows], err[rows], flag[rows] = known
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
    path, flag = np.full(n, PATH["unbounded"], dtype=np.int8), np.ones(n, dtype=bool)
    s_dom, e_dom = pairs.column("start_domain").to_numpy(False), pairs.column("end_domain").to_numpy(False)
    s_tsc, e_tsc = (pairs.column(c).to_numpy().astype(np.int64) for c in ("start_tsc", "end_tsc"))
    for sd, ed, rows in domain_pairs(s_dom, e_dom):
        d = durations(sd, s_tsc[rows], ed, e_tsc[rows], reference or sd, calibrations)
        value[rows], error[rows], path[rows], flag[rows] = d.value, d.error, d.path, d.extrapolated
    return pairs.append_column("duration", pa.array(value)).append_column("error", pa.array(error)).append_column(
        "path", pa.array(path_names(path), pa.string())).append_column("extrapolated", pa.array(flag))


def domain_pairs(start_domain: np.ndarray, end_domain: np.ndarray, present: "np.ndarray | None" = None):
    """(start, end, rows) for each pair of domains (names or numbers) met among the rows `present` (every row by
    default), `rows` the mask of that pair's rows: the pairs found by hashing in Arrow, not a Python tuple per row."""
    present = np.ones(len(start_domain), dtype=bool) if present is None else present
    met = pa.table({"start": start_domain[present], "end": end_domain[present]})
    met = met.group_by(["start", "end"]).aggregate([])
    for start, end in zip(met.column("start").to_pylist(), met.column("end").to_pylist()):
        yield start, end, present & (start_domain == start) & (end_domain == end)
