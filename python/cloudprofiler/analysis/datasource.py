"""`spark.read.format("cloudprofiler-logs").load("<logDir>/<application id>")`: the records of an application as a
batch data source (Spark >= 4.0, whose Python Data Source API this is; `register(spark)` makes the name known,
`open_application` does it for its session). Rows and columns are those of `Application.records()`; options:
`channel` (a name, or several separated by commas; default every record channel).

Files are read by pyarrow's file systems, not Spark's: local paths and file://, and the URIs pyarrow opens itself
(s3://, gs://, abfs://, hdfs:// with libhdfs), with pyarrow's credentials rather than the application's
spark.hadoop.* settings. `open_application` reads through Spark and takes every URI Spark reads.

Planning reads each file's schema (its metadata) and the small driver tables; each partition then reads one file
whole and translates its batches as `Application.records()` does."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .. import tables as plugin_tables
from ..calibration.spark import calibrations_from_probes
from ..logs import log_schema
from .catalog import PLACING_TABLES, Catalog
from .logfile import read_log_bytes
from .reader import RECORD_SCHEMA, cast_table, translated_batches
from .timebase import Timebase

NAME = "cloudprofiler-logs"


def register(spark) -> bool:
    """Makes format("cloudprofiler-logs") known to `spark`; False where Spark has no Python data sources (< 4.0)."""
    if not hasattr(spark, "dataSource"):
        return False
    spark.dataSource.register(LogsDataSource)
    return True


class _Folder:
    """An application folder on a pyarrow file system; file names as Spark spells them (file:/... for local)."""

    def __init__(self, uri: str):
        self.fs, self.root = pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), uri)
        self.root = self.root.rstrip("/")
        local = isinstance(self.fs, pafs.LocalFileSystem)
        self.prefix = "file:" if local else uri[: uri.index("://") + 3] if "://" in uri else ""

    def files(self) -> list:
        selector = pafs.FileSelector(self.root, recursive=True)
        return sorted(i.path for i in self.fs.get_file_info(selector)
                      if i.type == pafs.FileType.File and i.base_name.endswith(".arrows")
                      and not any(p.startswith((".", "_")) for p in i.path[len(self.root):].split("/")))

    def schema(self, path: str) -> pa.Schema:
        with self.fs.open_input_file(path) as f:
            return log_schema(f, path)

    def read(self, path: str) -> bytes:
        with self.fs.open_input_file(path) as f:
            return f.readall()


class _FilePartition(InputPartition):
    def __init__(self, path: str, attributes: dict):
        super().__init__(path)
        self.path, self.attributes = path, attributes


class LogsReader(DataSourceReader):
    def __init__(self, uri: str, channels: "list | None"):
        self.uri = uri
        folder = _Folder(uri)
        rows, tables = [], {}
        for path in folder.files():
            declared = plugin_tables.of_file(path.rsplit("/", 1)[-1])
            if declared is not None and declared.id in PLACING_TABLES:
                table = read_log_bytes(path, folder.read(path)).table()
                tables[declared.id] = cast_table(table, declared.schema)
            rows.append({"file": folder.prefix + path, "schema": folder.schema(path).serialize().to_pybytes(),
                         "ended": False, "cut": False, "batches": 0, "rows": 0, "min_tsc": None, "max_tsc": None,
                         "median_tsc": None, "error": None})
        catalog = Catalog.of_rows(rows)
        tasks = tables.get("tasks")
        named = set(catalog.python_worker_tasks())
        executor_of_task = {} if tasks is None else {
            t: e for t, e in zip(tasks.column("task_attempt_id").to_pylist(), tasks.column("executor_id").to_pylist())
            if t in named}
        catalog.place(tables.get("tsc_domains"), executor_of_task)
        reference, calibrations = calibrations_from_probes(tables.get("calibration"))
        self.timebase = Timebase.of(catalog, calibrations, reference)
        wanted = set(channels or catalog.channels("records"))
        self.files = [(f.file, f.attributes()) for f in catalog.files_of(wanted, "records")]

    def partitions(self):
        return [_FilePartition(path, attributes) for path, attributes in self.files]

    def read(self, partition):
        folder = _Folder(self.uri)
        path = partition.path[len(folder.prefix):]
        log = read_log_bytes(partition.path, folder.read(path))
        yield from translated_batches(log, partition.attributes, self.timebase, RECORD_SCHEMA)


class LogsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self):
        return ", ".join(f"{f.name} {_DDL[f.type]}" for f in RECORD_SCHEMA)

    def reader(self, schema):
        if "path" not in self.options:
            raise ValueError(f'format("{NAME}") needs a path: .load("<logDir>/<application id>")')
        channels = [c.strip() for c in self.options.get("channel", "").split(",") if c.strip()]
        return LogsReader(self.options["path"], channels or None)


_DDL = {pa.string(): "string", pa.int64(): "bigint", pa.float64(): "double", pa.bool_(): "boolean"}
