"""One application's log folder as Spark DataFrames (see the README's "Analysis" for every column)."""
from __future__ import annotations

import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import functions as F

from ..calibration.spark import calibrations_from_probes
from ..errors import NotAnApplicationError, UnknownChannelError
from . import calibration as calibration_module
from . import health as health_module
from . import latency as latency_module
from . import operator_hops as operator_hops_module
from . import operators as operators_module
from . import pipeline as pipeline_module
from . import reader
from .reader import local_path
from . import source_rows as source_rows_module
from . import stages as stages_module
from . import streaming as streaming_module
from . import tasks as tasks_module
from . import throughput as throughput_module
from . import udfs as udfs_module
from .catalog import TASK_CHANNELS, Catalog
from .session import ANALYSIS_JOB_TAG
from .timebase import Timebase

KIND_WORDS = {"records": "record", "counters": "counter"}  # a log file's kind, as a channel's
CALIBRATION_METHOD = "minpair"  # never wider than MinRTT/2, usually narrower (calibration.translate)
CACHED_TASKS = 200_000  # task attempts per partition of the kept tasks()


class Application:
    """The logs of one application: `<logDir>/<application id>`, any URI Spark reads.

    Opening lists and describes every file (one Spark job; a row per file comes back to the driver), reads the
    small driver tables (calibration probes, TSC domains) and builds the time axis (`timebase`). Every method
    returns a Spark DataFrame planned lazily; only aggregates ever reach the driver.

    Attributes: spark, path, app_id, catalog (the files), timebase (the time axis), probes (the calibration probes
    as a pyarrow Table, or None).

    The task table and every task attempt (tasks()) are read once, on first use, and kept in the session's cache
    (memory, spilling to disk): every analysis starts from them, and each would otherwise decode the table and join
    the task records again. `release()` gives that memory back.

    The tables are the plugin's (cloudprofiler.tables: their files and columns as the plugin declares them)."""

    def __init__(self, path: str, spark):
        check_local_folder(str(path))
        self.spark = spark
        self.path = str(path).rstrip("/") or str(path)
        # format("cloudprofiler-logs") for the caller: Spark's registration takes about a second of JVM work that
        # the opening's own jobs run beside
        one = ThreadPoolExecutor(1, thread_name_prefix="cloudprofiler-register")
        registered = one.submit(_register_data_source, spark)
        one.shutdown(wait=False)  # its thread ends with the registration
        self._kept = {}  # name -> a persisted DataFrame (keep)
        self._keeping = {}  # name -> the lock of its first make(): the report's sections ask from several threads
        self._keeping_lock = threading.Lock()
        self.catalog = self._catalog()
        self.probes = reader.read_table(spark, "calibration", self._table_file("calibration"))
        domains = reader.read_table(spark, "tsc_domains", self._table_file("tsc_domains"))
        self.catalog.place(domains, self._executors_of(self.catalog.python_worker_tasks()))
        reference, calibrations = calibrations_from_probes(self.probes, CALIBRATION_METHOD)
        self.timebase = Timebase.of(self.catalog, calibrations, reference)
        registered.result()  # its failure, as if it ran here
        ids = {f.meta.get("spark.app_id") for f in self.catalog.logs} - {None}
        self.app_id = ids.pop() if len(ids) == 1 else self.path.rsplit("/", 1)[-1]

    def _catalog(self) -> Catalog:
        try:
            rows = reader.catalog_rows(self.spark, self.path)
        except Exception as exc:  # noqa: BLE001 -- Spark's own error types differ between versions
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                raise NotAnApplicationError(self.path, "it does not exist") from None
            looped = re.search(r"(\S+: folders nested more than .*)", str(exc))  # FileDescriptions.MAX_DEPTH
            if looped:
                raise NotAnApplicationError(self.path, looped.group(1)) from None
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

    def _table_file(self, id: str):
        return self.catalog.tables.get(id, (None,))[0]

    def _table(self, id: str):
        return reader.table_frame(self.spark, id, self._table_file(id))

    @staticmethod
    def check_channels(names, known) -> None:
        for name in names:
            if name not in known:
                raise UnknownChannelError(name, known)

    def log_frame(self, channel, kind: str, columns=None, required: bool = True):
        """The records or counters (`kind`) of the channels named (a name, a list; None: all of that kind), with
        `columns` of RECORD_SCHEMA / COUNTER_SCHEMA (None: all). A channel the folder lacks is an error, or, with
        required=False, gives no rows."""
        known = self.catalog.channels(kind)
        wanted = known if channel is None else [channel] if isinstance(channel, str) else list(channel)
        if required:
            other = "counters" if kind == "records" else "records"
            for name in wanted:
                if name not in known and name in self.catalog.channels(other):
                    raise UnknownChannelError(name, known, KIND_WORDS[kind], f": {name!r} is a {KIND_WORDS[other]} "
                                                                             f"channel, read by {other}()")
            self.check_channels(wanted, known)
        schema = reader.kind_schema(kind, columns)
        return reader.log_frame(self.spark, self.catalog.files_of(wanted, kind), self.timebase, schema)

    # -- tables of the folder ----------------------------------------------------------------------------------

    def records(self, channel=None):
        """One row per record of the record channels named (a name, a list; None: all)."""
        return self.log_frame(channel, "records")

    def counters(self, channel=None):
        """One row per period of the counter channels (spc, mpc) named (None: all)."""
        return self.log_frame(channel, "counters")

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
        return reader.local_frame(self.spark, data, "channel string, handler string, kind string, files long, "
                                                    "records long, hosts long")

    def files(self):
        """One row per log file: where it comes from, its domain, whether it closed or was cut, what it holds."""
        data = [{**{k: v for k, v in f.attributes().items() if k != "file"}, "file": f.file, "kind": f.kind,
                 "closed": f.closed, "cut": f.cut, "ended": f.ended, "batches": f.batches, "rows": f.rows,
                 "records_logged": f.meta.get("records.logged"), "records_dropped": f.meta.get("records.dropped"),
                 "tsc_hz": f.meta.get("tsc.hz"), "tsc_invariant": f.meta.get("tsc.invariant")}
                for f in self.catalog.logs]
        return reader.local_frame(self.spark, data, FILES_DDL)

    def keep(self, name: str, make):
        """The DataFrame `make()` built once and persisted (memory, then disk), for every later call (the analyses'
        frames that several of them read: the task table, the attempts, the streaming batches' operators)."""
        with self._keeping_lock:
            lock = self._keeping.setdefault(name, threading.Lock())
        with lock:
            if name not in self._kept:
                self._kept[name] = make().persist()
            return self._kept[name]

    def release(self) -> None:
        """Drop what the analyses keep in the session's cache (keep: the task table, the attempts, ...); the next call
        that needs them reads them again."""
        for frame in self._kept.values():
            frame.unpersist()
        self._kept.clear()

    def task_table(self):
        """Every task attempt, as the driver wrote it (published every collect interval and at application end), but
        those of an analysis made in the application while it ran (its jobs tagged ANALYSIS_JOB_TAG)."""
        tags = F.split(F.coalesce(F.col("job_tags"), F.lit("")), ",")
        return self.keep("task_table", lambda: self._table("tasks").where(~F.array_contains(tags, ANALYSIS_JOB_TAG)))

    def calibration_probes(self):
        """Every calibration probe of every round (empty without calibration)."""
        return self._table("calibration")

    def domains(self):
        """Every process with a probe responder and its TSC domain."""
        return self._table("tsc_domains")

    def operator_nodes(self):
        """A row per operator probe placed in a plan (empty where operator timing was off:
        spark.cloudprofiler.operators)."""
        return self._table("operator_nodes")

    def operator_values(self):
        """A row per operator probe and task attempt (rows, ticks, their standard error)."""
        return self._table("operators")

    def streaming_progress(self):
        """A row per micro-batch of every streaming query, its progress as Spark posted it when the batch ended
        (empty for an application without streaming queries)."""
        return self._table("streaming_batches")

    @property
    def operators_timed(self) -> bool:
        """Whether the folder holds the operator tables (the application ran with spark.cloudprofiler.operators)."""
        return "operators" in self.catalog.tables

    @property
    def udfs_timed(self) -> bool:
        """Whether Python workers timed UDF batches here (the application ran with spark.cloudprofiler.udfs)."""
        return udfs_module.CHANNEL in self.catalog.channels("records")

    # -- analyses ----------------------------------------------------------------------------------------------

    def tasks(self, **scope):
        """One row per task attempt: Spark's view and metrics beside the TSC duration and its bound
        (tasks.TASK_COLUMNS); `scope` keeps some jobs' only: job_id, job_group, job_tag, sql_execution_id,
        connect_session_id, connect_operation_id, streaming_query_id, streaming_batch_id (tasks.in_scope). A filter
        of another name or type raises InvalidArgumentError naming it (tasks.check_scope)."""
        tasks_module.check_scope("tasks", scope)
        return tasks_module.in_scope(self.keep("tasks", self._all_tasks), **scope)

    def _all_tasks(self):
        """tasks() of every attempt, in partitions of about CACHED_TASKS attempts: the joins' shuffle left 200,
        which Spark may not coalesce once the frame is cached (and each later query would run 200 tasks)."""
        attempts = sum(f.rows for f in self.catalog.files_of(TASK_CHANNELS[1:], "records"))
        return tasks_module.tasks(self).repartition(max(1, -(-attempts // CACHED_TASKS)))

    def stages(self, ratio: float = stages_module.STRAGGLER_RATIO, **scope):
        """One row per stage attempt: duration percentiles, skew, stragglers, gaps (stages.stages). `ratio`: a
        number >= 1 (stages.check_ratio)."""
        stages_module.check_ratio("stages", ratio)
        tasks_module.check_scope("stages", scope)
        return stages_module.stages(self.tasks(**scope), ratio)

    def stragglers(self, ratio: float = stages_module.STRAGGLER_RATIO, **scope):
        """Successful attempts over `ratio` x their stage's median, the slowest first, with the metrics that say
        where their time went and, where operators or UDFs were timed, the operator and UDF parts of it
        (stages.stragglers)."""
        stages_module.check_ratio("stragglers", ratio)
        tasks_module.check_scope("stragglers", scope)
        return stages_module.stragglers(
            self.tasks(**scope), ratio, self.operator_tasks(**scope) if self.operators_timed else None,
            self.udfs(**scope) if self.udfs_timed else None)

    def operators(self, **scope):
        """One row per SQL execution and operator probe: rows, inclusive and exclusive seconds with their standard
        errors, share of the query's task time, skew and the slowest task (operators.operators); `scope` as tasks().
        Empty where the application did not time its operators (spark.cloudprofiler.operators=true)."""
        tasks_module.check_scope("operators", scope)
        return operators_module.operators(self, **scope)

    def operator_tasks(self, **scope):
        """One row per operator probe and task attempt, with the exclusive time (operators.operator_tasks)."""
        tasks_module.check_scope("operator_tasks", scope)
        return operators_module.operator_tasks(self, **scope)

    def operator_hops(self, **scope):
        """One row per SQL execution and hop between consecutive operators that keep a row's identity: the latency
        of the sampled rows from one to the next (operator_hops.operator_hops); `scope` as tasks()."""
        tasks_module.check_scope("operator_hops", scope)
        return operator_hops_module.operator_hops(self, **scope)

    def udfs(self, **scope):
        """One row per Python UDF evaluation and task attempt: its batches, rows and the parts of its worker's time
        (udfs.udfs); `scope` as tasks(). Empty where the workers did not time their UDFs (spark.cloudprofiler.udfs)."""
        tasks_module.check_scope("udfs", scope)
        return udfs_module.udfs(self, **scope)

    def batches(self, streaming_query_id=None, latency: bool = True):
        """One row per micro-batch of the streaming queries (an id or a list of them; None: all): Spark's progress
        of the batch beside its jobs, tasks and, where operators were timed, the operator that took longest
        (streaming.batches), and where its source logged its rows their latency from the source to the sink
        (source_rows.with_latency; latency=False leaves those columns null and skips the pass over the records)."""
        tasks_module.check_scope("batches", {"streaming_query_id": streaming_query_id})
        if not isinstance(latency, bool):
            raise TypeError(f"batches(latency={latency!r}): latency is True or False")
        frame = streaming_module.batches(self, streaming_query_id)
        return source_rows_module.with_latency(self, frame, streaming_query_id, latency)

    def batch_operators(self, streaming_query_id=None):
        """One row per micro-batch and operator probe of the streaming queries: the operator's place in the plan,
        rows, inclusive and exclusive seconds, share of the batch's task time (streaming.batch_operators)."""
        tasks_module.check_scope("batch_operators", {"streaming_query_id": streaming_query_id})
        return streaming_module.batch_operators(self, streaming_query_id)

    def source_latency(self, streaming_query_id=None):
        """One row per micro-batch, source TSC and operator of the streaming queries: the latency of the source's
        sampled records to the operator, with its bound (source_rows.source_latency)."""
        tasks_module.check_scope("source_latency", {"streaming_query_id": streaming_query_id})
        return source_rows_module.source_latency(self, streaming_query_id)

    def source_latency_lifetime(self, streaming_query_id=None):
        """source_latency() over each streaming query run's life, per source TSC and operator
        (source_rows.source_latency_lifetime)."""
        tasks_module.check_scope("source_latency_lifetime", {"streaming_query_id": streaming_query_id})
        return source_rows_module.source_latency_lifetime(self, streaming_query_id)

    def latency(self, from_channel: str, to_channel: str):
        """Per tuple id on both channels: the latency from the first to the second, with its bound and path."""
        return latency_module.latency(self, from_channel, to_channel)

    def pipeline(self, channels=None):
        """Per hop along the trace points (None: every record channel but the task channels, ordered by median
        time): box-plot statistics of latency and bound, and the hop's share of the end-to-end p99 (hop -1)."""
        return pipeline_module.pipeline(self, channels)

    def hop_sketches(self, channels=None):
        """Every hop of pipeline(channels) counted in one pass, on the driver (hops.HopSketches): what pipeline()
        reads, with each hop's bounds and latency histogram."""
        return pipeline_module.pipeline_sketches(self, channels)

    def latency_histogram(self, from_channel: str, to_channel: str, bins: int = 60):
        """Counts of latencies in log-spaced bins, local and remote apart."""
        return latency_module.latency_histogram(self.latency(from_channel, to_channel), bins)

    def throughput(self, channel=None, period_ms: float = 1000):
        """Records per period of `period_ms` over time, per channel (record and counter channels)."""
        return throughput_module.throughput(self, channel, period_ms)

    def calibration(self):
        """Per pair of domains, direction and round: probes, MinRTT and the anchor's bound in ns, and when."""
        rows = calibration_module.calibration_rows(self.probes, self.timebase)
        return reader.local_frame(self.spark, rows, calibration_module.CALIBRATION_DDL)

    def health(self):
        """What may make the numbers incomplete or loose: kind, severity, subject, count, message."""
        return health_module.health(self)

    def summary(self) -> dict:
        """Small facts (a plain dict): hosts, domains, records, drops, files, start, span, reference, calibrated."""
        return health_module.summary(self)

    def __repr__(self) -> str:
        return f"Application({self.path!r}, {len(self.catalog.logs)} log files)"


def check_local_folder(path: str) -> None:
    """A path of this machine's file system (no scheme, or file:) must be a folder: NotAnApplicationError says what
    it is otherwise, before any Spark job (a URI of another file system is left to Spark)."""
    local = local_path(path)
    if local is None:
        return
    if not os.path.exists(local):
        raise NotAnApplicationError(path, "it does not exist")
    if not os.path.isdir(local):
        raise NotAnApplicationError(path, "it is a file, not a folder")


def _register_data_source(spark) -> None:
    """format("cloudprofiler-logs") in this session, where Spark has Python data sources (>= 4.0)."""
    try:
        from . import datasource
    except ImportError:  # Spark 3.5: no pyspark.sql.datasource
        return
    datasource.register(spark)


FILES_DDL = ("file string, channel string, handler string, host string, executor_id string, pid long, "
             "domain string, task_attempt_id long, kind string, closed boolean, cut boolean, ended boolean, "
             "batches long, rows long, records_logged long, records_dropped long, tsc_hz double, tsc_invariant boolean")
