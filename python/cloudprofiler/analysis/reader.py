"""An application folder read through Spark, so that any URI Spark reads (a local path, hdfs://, s3a://, ...) works
with the application's own settings (its spark.hadoop.* keys), on Spark 3.5 and 4.x alike.

Files are listed and described by the plugin jar's JVM_CATALOG in the executors' JVMs (every `*.arrows` below the
folder, hidden `.<name>.tmp` copies left out as Spark leaves out every name starting with "." or "_"). Log files are
read by the jar's reader (JVM_SOURCE) there: a file per task, its Arrow batches handed to Spark as columnar batches
with the per-file and time columns made there (the same values as Timebase.translate's), only the columns a query
uses. Where the session cannot load the jar, both are done in Python workers by `mapInArrow` over Spark's
`binaryFile` source (path, length, content; numpy over a whole batch, never a Python row), as the driver tables
always are; a file read that way must stay under 2 GiB (Spark's limit for a binary value)."""
from __future__ import annotations

import functools
import json
import os
import warnings

import pyarrow as pa

from .. import tables as plugin_tables
from .catalog import FILE_ROW, describe_files
from .logfile import read_log_bytes

RECORD_SCHEMA = pa.schema([
    ("channel", pa.string()), ("handler", pa.string()), ("host", pa.string()), ("executor_id", pa.string()),
    ("pid", pa.int64()), ("domain", pa.string()), ("task_attempt_id", pa.int64()), ("file", pa.string()),
    ("tuple_id", pa.int64()), ("tsc", pa.int64()), ("t_ns", pa.float64()), ("err_ns", pa.float64()),
    ("extrapolated", pa.bool_()), ("unbounded", pa.bool_())])
COUNTER_SCHEMA = pa.schema([
    ("channel", pa.string()), ("handler", pa.string()), ("host", pa.string()), ("executor_id", pa.string()),
    ("pid", pa.int64()), ("domain", pa.string()), ("file", pa.string()), ("period_start_tsc", pa.int64()),
    ("count", pa.int64()), ("t_ns", pa.float64()), ("err_ns", pa.float64()), ("extrapolated", pa.bool_()),
    ("unbounded", pa.bool_())])
# Columns for the analyses' own joins, never in records(): the domain and the channel as small numbers (the index
# in Timebase.domains, in log_frame's `channel_ids`), cheaper to shuffle and sort than their names.
INTERNAL_FIELDS = [pa.field("domain_id", pa.int32()), pa.field("channel_id", pa.int32())]
# the plugin's reader of log files (jvm-plugin/src/main/java/io/cloudprofiler/spark/analysis)
JVM_SOURCE = "io.cloudprofiler.spark.analysis.LogFiles"
JVM_CATALOG = "io.cloudprofiler.spark.analysis.FileDescriptions"  # catalog.py's FILE_ROW, described in the JVM
TIME_FIELDS = ("t_ns", "err_ns", "extrapolated", "unbounded")
# Spark's task metrics in the task table (the plugin's TaskDetails.METRICS), int64, null where Spark gave none
TASK_METRICS = (
    "executor_run_time_ms", "executor_cpu_time_ns", "executor_deserialize_time_ms", "executor_deserialize_cpu_time_ns",
    "result_serialization_time_ms", "jvm_gc_time_ms", "scheduler_delay_ms", "getting_result_time_ms",
    "result_size_bytes", "peak_execution_memory_bytes", "input_bytes", "input_records", "output_bytes",
    "output_records", "shuffle_local_blocks", "shuffle_remote_blocks", "shuffle_local_bytes", "shuffle_remote_bytes",
    "shuffle_remote_bytes_to_disk", "shuffle_fetch_wait_ms", "shuffle_read_records", "shuffle_write_bytes",
    "shuffle_write_records", "shuffle_write_time_ns", "memory_spilled_bytes", "disk_spilled_bytes", "python_boot_ms",
    "python_init_ms", "python_total_ms", "python_processing_ms")


def spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def binary_files(spark, paths):
    """Spark's binaryFile rows (path, modificationTime, length, content) of a folder (recursively, *.arrows) or
    of a list of files."""
    reader = spark.read.format("binaryFile")
    if isinstance(paths, str):
        return reader.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.arrows").load(paths)
    return reader.load(list(paths))


def catalog_rows(spark, path: str) -> list:
    """One FILE_ROW per file below `path`, collected (a row per file, not per record): described in the JVM by the
    plugin's JVM_CATALOG where the session reads log files there (the files' bytes stay in the executors), else in
    Python workers over binaryFile."""
    if jvm_reader(spark):
        frame = spark.read.format(JVM_CATALOG).option("path", path).load().select(*FILE_ROW.names)
    else:
        frame = binary_files(spark, path).select("path", "content").mapInArrow(describe_files,
                                                                                spark_schema(FILE_ROW))
    return [row.asDict() for row in frame.collect()]


def table_frame(spark, id: str, file: "str | None"):
    """The application's table `id` (cloudprofiler.tables) as a DataFrame of its declared columns (empty where the
    folder has none). The driver's tables are small (a row per task attempt, per operator probe and attempt, ...):
    on Spark 4 the table is read on the driver and handed to Spark as Arrow batches, which starts no Python worker
    (on a cold session that start is seconds of a report); Spark 3.5, whose createDataFrame takes no Arrow table,
    decodes it in a Python worker."""
    schema = plugin_tables.table(id).schema
    if file is None:
        return local_frame(spark, [], spark_schema(schema))
    if _spark4(spark):
        return spark.createDataFrame(read_table(spark, id, file), schema=spark_schema(schema))
    decode = functools.partial(_decode_table, schema=schema)
    return binary_files(spark, [file]).select("path", "content").mapInArrow(decode, spark_schema(schema))


def _spark4(spark) -> bool:
    """Whether `spark` builds a DataFrame from an Arrow table (Spark >= 4.0)."""
    return int(spark.version.split(".")[0]) >= 4


def local_frame(spark, rows: list, schema):
    """A DataFrame of the analysis's own rows (tuples in the schema's order, or dicts by column name; `schema` a DDL
    string or a StructType). Spark's createDataFrame of a Python list decodes the list in a Python worker, whose start
    alone costs a cold session about a second; on Spark 4 the rows go to the JVM as an Arrow table instead. (A Spark
    Connect session's client sends a list as Arrow itself.)"""
    if not _spark4(spark) or getattr(spark, "_jvm", None) is None:
        return spark.createDataFrame(rows, schema)
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    struct = _parse_datatype_string(schema) if isinstance(schema, str) else schema
    names = struct.names
    dicts = [r if isinstance(r, dict) else dict(zip(names, r)) for r in rows]
    return spark.createDataFrame(pa.Table.from_pylist(dicts, to_arrow_schema(struct)), schema=struct)


def local_path(path: str) -> "str | None":
    """`path` on this machine's file system (no scheme, or file:), None for a URI of another file system."""
    from urllib.parse import urlparse

    parsed = urlparse(path)
    if parsed.scheme not in ("", "file"):
        return None
    return os.path.expanduser(parsed.path if parsed.scheme else path)


def read_table(spark, id: str, file: "str | None") -> "pa.Table | None":
    """A small table of the application (calibration probes, TSC domains) on the driver: read from the file itself
    where it is on the disk of this process, the session's driver (through Spark, a job each, 50-100 ms of a report
    apiece), else through Spark's file systems (an object store's; a Spark Connect server's disk)."""
    if file is None:
        return None
    local = local_path(file) if getattr(spark, "_jvm", None) is not None else None
    if local is not None and os.path.isfile(local):
        with open(local, "rb") as stream:
            content = stream.read()
    else:
        content = binary_files(spark, [file]).select("content").first()["content"]
    return cast_table(read_log_bytes(file, content).table(), plugin_tables.table(id).schema)


def cast_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table's columns of `schema`, cast to its types (null where the table lacks one); its metadata kept. A file
    an older plugin wrote may differ in width, and lack the columns added since, which come out null."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema.with_metadata(table.schema.metadata))


def _decode_table(batches, schema):
    for batch in batches:
        for i in range(batch.num_rows):
            path, content = batch.column("path")[i].as_py(), batch.column("content")[i].as_buffer()
            yield from cast_table(read_log_bytes(path, content).table(), schema).to_batches()


def _constant(value, type_, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type_), n)


def translated_batches(log, attributes: dict, timebase, schema: pa.Schema):
    """The batches of one decoded log file with its per-file columns and every TSC value on the application's
    time axis (t_ns, err_ns, extrapolated, unbounded); `schema` (RECORD_SCHEMA or COUNTER_SCHEMA, or a subset of
    its columns) says which columns come out."""
    for batch in log.batches:
        first, second = log.columns(batch)
        n = batch.num_rows
        if log.kind == "records":
            values = {"tuple_id": first, "tsc": second}
            if attributes["channel"] in ("spark.task.start", "spark.task.end"):  # the tuple id is the attempt's
                values["task_attempt_id"] = first
            tsc = second
        else:
            values = {"period_start_tsc": first, "count": second}
            tsc = first
        if any(name in schema.names for name in TIME_FIELDS):
            translated = timebase.translate(attributes["domain"], tsc.to_numpy())
            values.update(zip(TIME_FIELDS, (pa.array(column) for column in translated)))
        attributes = {**attributes, "domain_id": timebase.domain_id(attributes["domain"])}
        columns = [values[f.name] if f.name in values else _constant(attributes.get(f.name), f.type, n)
                   for f in schema]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _decode_logs(batches, attributes, timebase, schema):
    for batch in batches:
        for i in range(batch.num_rows):
            path, content = batch.column("path")[i].as_py(), batch.column("content")[i].as_buffer()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the driver has warned about a cut file when it listed it
                log = read_log_bytes(path, content)
            yield from translated_batches(log, attributes[path], timebase, schema)


def log_frame(spark, files: list, timebase, schema: pa.Schema, channel_ids: "dict | None" = None):
    """The records (or counters) of `files` (catalog.LogInfo) as a DataFrame of `schema`'s columns; `channel_ids`
    (channel name -> number) gives the channel_id column. Read in the JVM where the plugin jar is on the session's
    class path (the embedded session puts it there), else in Python workers (a Spark Connect session, a session
    started without the jar, a source tree whose jar is not built)."""
    if not files:
        return local_frame(spark, [], spark_schema(schema))
    read = jvm_log_frame if jvm_reader(spark) else python_log_frame
    return read(spark, files, timebase, schema, channel_ids)


def python_log_frame(spark, files: list, timebase, schema: pa.Schema, channel_ids: "dict | None" = None):
    """log_frame's DataFrame, decoded and translated in Python workers (mapInArrow over binaryFile)."""
    attributes = {f.file: {**f.attributes(), "channel_id": (channel_ids or {}).get(f.channel)} for f in files}
    decode = functools.partial(_decode_logs, attributes=attributes, timebase=timebase, schema=schema)
    return binary_files(spark, attributes).select("path", "content").mapInArrow(decode, spark_schema(schema))


def jvm_reader(spark) -> bool:
    """Whether `spark` reads log files in its JVMs (JVM_SOURCE, in the plugin jar on its class path): not a Spark
    Connect session, whose server is out of reach, nor one started without the jar."""
    jvm = getattr(spark, "_jvm", None)
    return jvm is not None and bool(jvm.org.apache.spark.util.Utils.classIsLoadable(JVM_SOURCE))


def jvm_log_frame(spark, files: list, timebase, schema: pa.Schema, channel_ids: "dict | None" = None):
    """log_frame's DataFrame, read by the plugin's reader in the executors' JVMs: the files packed into partitions
    by their records, as Spark packs small files; their Arrow batches handed to Spark as columnar batches, the
    per-file columns and the time columns made there from the plan (the files' attributes and
    `Timebase.jvm_axis`)."""
    plan = {**timebase.jvm_axis(), "files": [
        {**f.attributes(), "path": f.file, "kind": f.kind, "rows": f.rows,
         "channel_id": (channel_ids or {}).get(f.channel), "domain_id": timebase.domain_id(f.domain)}
        for f in files]}
    return spark.read.format(JVM_SOURCE).schema(spark_schema(schema)).option("plan", json.dumps(plan)).load()


def kind_schema(kind: str, columns=None) -> pa.Schema:
    """RECORD_SCHEMA or COUNTER_SCHEMA for `kind` ("records", "counters"), projected on `columns` (None: all)."""
    schema = RECORD_SCHEMA if kind == "records" else COUNTER_SCHEMA
    return schema if columns is None else project(schema, columns)


def project(schema: pa.Schema, names) -> pa.Schema:
    """The fields of `schema` (and INTERNAL_FIELDS) named in `names`, in schema order."""
    return pa.schema([f for f in list(schema) + INTERNAL_FIELDS if f.name in set(names)])

