"""One application's log folder as Spark DataFrames (see the README's "Analysis" for every column)."""
from __future__ import annotations

from ..calibration.spark import calibrations_from_probes
from ..errors import NotAnApplicationError, UnknownChannelError
from . import reader
from .catalog import TASK_CHANNELS, Catalog
from .timebase import Timebase

CALIBRATION_METHOD = "minpair"  # never wider than MinRTT/2, usually narrower (calibration.translate)


class Application:
    """The logs of one application: `<logDir>/<application id>`, any URI Spark reads.

    Opening lists and describes every file (one Spark job; a row per file comes back to the driver), reads the
    small driver tables (calibration probes, TSC domains) and builds the time axis (`timebase`). Every method
    returns a Spark DataFrame planned lazily; only aggregates ever reach the driver."""

    def __init__(self, path: str, spark):
        self.spark = spark
        self.path = str(path).rstrip("/") or str(path)
        self.catalog = self._catalog()
        tables = self.catalog.tables
        probes = reader.read_table(spark, "calibration.arrows", tables.get("calibration.arrows", (None,))[0])
        self._domains = reader.read_table(spark, "tsc-domains.arrows", tables.get("tsc-domains.arrows", (None,))[0])
        self.catalog.place(self._domains, self._executors_of(self.catalog.python_worker_tasks()))
        reference, calibrations = calibrations_from_probes(probes, CALIBRATION_METHOD)
        self.probes = probes
        self.timebase = Timebase.of(self.catalog, calibrations, reference)
        ids = {f.meta.get("spark.app_id") for f in self.catalog.logs} - {None}
        self.app_id = ids.pop() if len(ids) == 1 else self.path.rsplit("/", 1)[-1]

    def _catalog(self) -> Catalog:
        try:
            rows = reader.catalog_rows(self.spark, self.path)
        except Exception as exc:  # noqa: BLE001 -- Spark's own error types differ between versions
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                raise NotAnApplicationError(self.path, "it does not exist") from None
            raise
        if not rows:
            raise NotAnApplicationError(self.path, "it holds no .arrows files")
        catalog = Catalog.of_rows(rows)
        name = self.path.rsplit("/", 1)[-1]
        nested = sorted({file.rsplit("/", 2)[-2] for file, _ in catalog.tables.values()} - {name})
        if nested:
            raise NotAnApplicationError(self.path, f"it holds application folders ({', '.join(nested)}): open "
                                                   f"{self.path}/{nested[0]}")
        apps = sorted({f.meta.get("spark.app_id") for f in catalog.logs} - {None})
        if len(apps) > 1:
            raise NotAnApplicationError(self.path, f"it holds the logs of several applications ({', '.join(apps)})")
        if not catalog.logs and not catalog.tables:
            raise NotAnApplicationError(self.path, "none of its .arrows files is a cloudprofiler log or table")
        return catalog

    def _executors_of(self, tasks: list) -> dict:
        """task attempt id -> executor id, for the few tasks whose Python workers wrote files."""
        if not tasks:
            return {}
        from pyspark.sql import functions as F

        frame = self.task_table().where(F.col("task_attempt_id").isin(tasks)).select("task_attempt_id", "executor_id")
        return {r["task_attempt_id"]: r["executor_id"] for r in frame.collect()}

    def _table_file(self, name: str):
        return self.catalog.tables.get(name, (None,))[0]

    def _channels(self, channel, kind: str) -> list:
        """The channels asked for (None: every channel of `kind`), each checked."""
        known = self.catalog.channels(kind)
        wanted = known if channel is None else [channel] if isinstance(channel, str) else list(channel)
        for name in wanted:
            if name not in known:
                raise UnknownChannelError(name, known)
        return wanted

    def _frame(self, channel, kind: str, columns=None):
        schema = reader.RECORD_SCHEMA if kind == "records" else reader.COUNTER_SCHEMA
        if columns is not None:
            schema = reader.project(schema, columns)
        files = self.catalog.files_of(self._channels(channel, kind), kind)
        return reader.log_frame(self.spark, files, self.timebase, schema)

    # -- tables of the folder ----------------------------------------------------------------------------------

    def records(self, channel=None):
        """One row per record of the record channels named (a name, a list; None: all)."""
        return self._frame(channel, "records")

    def counters(self, channel=None):
        """One row per period of the counter channels (spc, mpc) named (None: all)."""
        return self._frame(channel, "counters")

    def channels(self):
        """One row per channel: handler, kind, files, records (rows read), hosts."""
        rows = {}
        for f in self.catalog.logs:
            row = rows.setdefault(f.channel, {"channel": f.channel, "handler": f.meta.get("handler", ""),
                                              "kind": f.kind, "files": 0, "records": 0, "hosts": set()})
            row["files"] += 1
            row["records"] += f.rows
            row["hosts"].add(f.meta.get("host", ""))
        data = [{**r, "hosts": len(r["hosts"])} for _, r in sorted(rows.items())]
        return self.spark.createDataFrame(data, "channel string, handler string, kind string, files long, "
                                                "records long, hosts long")

    def files(self):
        """One row per log file: where it comes from, its domain, whether it closed or was cut, what it holds."""
        data = [{**{k: v for k, v in f.attributes().items() if k != "file"}, "file": f.file, "kind": f.kind,
                 "closed": f.closed, "cut": f.cut, "batches": f.batches, "rows": f.rows,
                 "records_logged": f.meta.get("records.logged"), "records_dropped": f.meta.get("records.dropped"),
                 "tsc_hz": f.meta.get("tsc.hz"), "tsc_invariant": f.meta.get("tsc.invariant")}
                for f in self.catalog.logs]
        return self.spark.createDataFrame(data, FILES_DDL)

    def task_table(self):
        """spark-tasks.arrows as the driver wrote it (written at application end: empty while it runs)."""
        return reader.table_frame(self.spark, "spark-tasks.arrows", self._table_file("spark-tasks.arrows"))

    def calibration_probes(self):
        """calibration.arrows: every probe of every round (empty without calibration)."""
        return reader.table_frame(self.spark, "calibration.arrows", self._table_file("calibration.arrows"))

    def domains(self):
        """tsc-domains.arrows: every process with a probe responder and its TSC domain."""
        return reader.table_frame(self.spark, "tsc-domains.arrows", self._table_file("tsc-domains.arrows"))

    def __repr__(self) -> str:
        return f"Application({self.path!r}, {len(self.catalog.logs)} log files)"


FILES_DDL = ("file string, channel string, handler string, host string, executor_id string, pid long, "
             "domain string, task_attempt_id long, kind string, closed boolean, cut boolean, batches long, rows long, "
             "records_logged long, records_dropped long, tsc_hz double, tsc_invariant boolean")
TASK_CHANNEL_NAMES = TASK_CHANNELS
