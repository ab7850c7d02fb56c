"""What an application folder holds, one row per file: its kind, its channel's metadata, how far it reads, and
(on the driver) the TSC domain, executor and task each log file belongs to.

`describe_files` runs where the bytes are (a Spark task, or the data source's planning); `Catalog` gathers the
rows on the driver. Both are small: a row per file, never per record."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from .. import tables as plugin_tables
from ..calibration.spark import DomainResolver
from ..logs import log_metadata, unpadded
from .logfile import kind_of, read_log_bytes

TASK_CHANNELS = ("spark.task.start", "spark.task.end")
# the tables (cloudprofiler.tables ids) that place the log files on the time axis
PLACING_TABLES = ("tasks", "calibration", "tsc_domains")
# beside the collected files of a process that was killed (the plugin's LogCollector.LOST_MARKER)
LOST_MARKER = "process_lost"

# One row per file, as `describe_files` yields them; `schema` is the file's Arrow schema, serialized, with metadata.
FILE_ROW = pa.schema([("file", pa.string()), ("schema", pa.binary()), ("ended", pa.bool_()), ("cut", pa.bool_()),
                      ("batches", pa.int64()), ("rows", pa.int64()), ("min_tsc", pa.int64()),
                      ("max_tsc", pa.int64()), ("median_tsc", pa.float64()), ("error", pa.string())])


def describe_file(path: str, content) -> dict:
    """The catalog row of one file; a file whose schema cannot be read is described by its error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the driver warns once, naming the file (Catalog)
            log = read_log_bytes(path, content)
    except (pa.ArrowInvalid, OSError) as exc:
        return {"file": path, "schema": None, "ended": False, "cut": True, "batches": 0, "rows": 0,
                "min_tsc": None, "max_tsc": None, "median_tsc": None, "error": str(exc)}
    low = high = median = None
    if log.kind != "table" and log.rows:
        tsc = pa.chunked_array([log.columns(b)[1 if log.kind == "records" else 0] for b in log.batches])
        low, high = (v.as_py() for v in pc.min_max(tsc).values())
        median = pc.approximate_median(tsc).as_py()
    return {"file": path, "schema": log.schema.serialize().to_pybytes(), "ended": log.ended, "cut": log.cut,
            "batches": len(log.batches), "rows": log.rows, "min_tsc": low, "max_tsc": high,
            "median_tsc": median, "error": None}


def describe_files(batches):
    """mapInArrow over binaryFile rows (path, content): one FILE_ROW per file."""
    for batch in batches:
        paths, contents = batch.column("path"), batch.column("content")
        rows = [describe_file(paths[i].as_py(), contents[i].as_buffer()) for i in range(batch.num_rows)]
        yield pa.RecordBatch.from_pylist(rows, schema=FILE_ROW)


@dataclass
class LogInfo:
    """A log file of records or counters, with what the driver learned about it."""

    file: str
    kind: str
    meta: dict
    ended: bool
    cut: bool
    batches: int
    rows: int
    min_tsc: "int | None"
    max_tsc: "int | None"
    median_tsc: "float | None"  # of the file's records (approximate): where its channel lies in time
    domain: "str | None" = None  # None: nothing places it (its values stay unbounded)
    executor_id: "str | None" = None
    task_attempt_id: "int | None" = None

    @property
    def channel(self) -> str:
        return self.meta.get("channel.name", "")

    @property
    def closed(self) -> bool:
        return bool(self.meta.get("closed", False))

    def attributes(self) -> dict:
        """The per-file columns of every record row."""
        return {"channel": self.channel, "handler": self.meta.get("handler", ""), "host": self.meta.get("host", ""),
                "executor_id": self.executor_id, "pid": self.meta.get("pid"), "domain": self.domain,
                "task_attempt_id": self.task_attempt_id, "file": self.file}


@dataclass
class Catalog:
    """The log files (`logs`), the application's tables found (`tables`: cloudprofiler.tables id -> (path,
    schema)) and files that could not be read at all (`unreadable`: path -> error)."""

    logs: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)
    unreadable: dict = field(default_factory=dict)

    @classmethod
    def of_rows(cls, rows) -> "Catalog":
        catalog, lost = cls(), set()
        for row in sorted(rows, key=lambda r: r["file"]):
            if row["error"] is not None:
                catalog.unreadable[row["file"]] = row["error"]
                warnings.warn(f"{row['file']}: unreadable, left out ({row['error']})")
                continue
            schema = unpadded(pa.ipc.read_schema(pa.py_buffer(row["schema"])))
            folder, name = row["file"].rstrip("/").rsplit("/", 1)
            kind = kind_of(schema)
            if kind == "table":
                table = plugin_tables.of_file(name)
                if table is not None and table.id == LOST_MARKER:
                    lost.add(folder)
                elif table is not None and table.folder == plugin_tables.APPLICATION:
                    catalog.tables[table.id] = (row["file"], schema)
                continue
            if row["cut"]:
                warnings.warn(f"{row['file']}: ends with an incomplete batch; read its {row['batches']} complete ones")
            catalog.logs.append(LogInfo(row["file"], kind, log_metadata(schema), row["ended"], row["cut"],
                                        row["batches"], row["rows"], row["min_tsc"], row["max_tsc"], row["median_tsc"]))
        for f in catalog.logs:  # a killed process's open files end where it stopped, between batches or not
            if not f.closed and not f.cut and f.file.rsplit("/", 1)[0] in lost:
                f.cut = True
                warnings.warn(f"{f.file}: its process was killed; read its {f.batches} complete batches")
        return catalog

    def table_metadata(self, id: str) -> dict:
        """The schema metadata of the application's table `id` ({} where the folder has none)."""
        return log_metadata(self.tables[id][1]) if id in self.tables else {}

    def python_worker_tasks(self) -> list:
        """Task attempt ids named by files of Python workers (their executor comes from the task table)."""
        return sorted({int(f.meta["spark.task_attempt_id"]) for f in self.logs if "spark.task_attempt_id" in f.meta})

    def place(self, domains: "pa.Table | None", executor_of_task: dict) -> None:
        """Sets every log file's domain, executor and task (see DomainResolver)."""
        resolver = DomainResolver(domains, executor_of_task, [f.meta for f in self.logs])
        for f in self.logs:
            f.domain, f.executor_id = resolver.of(f.meta), resolver.executor_of(f.meta)
            task = f.meta.get("spark.task_attempt_id")
            f.task_attempt_id = None if task is None else int(task)

    def channels(self, kind: "str | None" = None) -> list:
        return sorted({f.channel for f in self.logs if kind is None or f.kind == kind})

    def files_of(self, channels, kind: str) -> list:
        return [f for f in self.logs if f.kind == kind and f.channel in channels]
