"""`spark.readStream.format("cloudprofiler-generator")`: the generator's serve-mode emitters as a Spark streaming
source.

    from cloudprofiler.harness.spark_source import register_source
    register_source(spark)
    df = (spark.readStream.format("cloudprofiler-generator")
          .option("endpoints", "tcp://10.0.0.5:5555,tcp://10.0.0.5:5556").load())

One Spark partition per emitter and micro-batch: the offsets of a batch are a range of buckets per emitter, its
task fetches that range as Arrow record batches (never Python rows), and Spark's commit frees it in the
emitter. A batch that is replayed (task retry, restart from a checkpoint) fetches the same buckets, so every
tuple is delivered exactly once while the emitter still retains it; a range that is gone fails the query
with a message naming the emitter and the offsets, never silently.

Options: endpoints (required, comma-separated), timeout (seconds per request, default 30), batchTuples (rows
per Arrow batch, default 65536), maxTuplesPerTrigger (admission control, default unlimited), traceChannel
(log every id with the TSC at which the source delivered it, through a native channel in the Python worker),
columns (comma-separated: the only columns handed to Spark, in that order, default all; the emitters still send
every column, but Spark converts only these from Arrow, as a columnar file source reads only the columns a query
uses).
"""
from __future__ import annotations

import contextlib

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

SOURCE_NAME = "cloudprofiler-generator"


def _positive(options, key: str, default, kind=float):
    raw = options.get(key, default)
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or not value > 0:
        raise ValueError(f"cloudprofiler source: option {key}={raw!r} must be a positive number")
    return value


class SourceOptions:
    def __init__(self, options):
        raw = options.get("endpoints", "")
        self.endpoints = [e.strip() for e in raw.split(",") if e.strip()]
        if not self.endpoints:
            raise ValueError("cloudprofiler source: option endpoints is required (comma-separated tcp://host:port "
                             f"of the generator's serve-mode emitters), got {raw!r}")
        self.timeout_s = _positive(options, "timeout", 30)
        self.batch_tuples = _positive(options, "batchTuples", 1 << 16, int)
        limit = options.get("maxTuplesPerTrigger")
        self.max_tuples = None if limit is None else _positive(options, "maxTuplesPerTrigger", limit, int)
        self.trace_channel = options.get("traceChannel") or None
        self.columns = [c.strip() for c in options.get("columns", "").split(",") if c.strip()] or None

    def selected(self, schema):
        """`schema` (Arrow) cut to the `columns` option."""
        if self.columns is None:
            return schema
        bad = [c for i, c in enumerate(self.columns) if c not in schema.names or c in self.columns[:i]]
        if bad:
            raise ValueError(f"cloudprofiler source: option columns names {', '.join(map(repr, bad))}: expected "
                             f"distinct columns of {', '.join(schema.names)}")
        return pa.schema([schema.field(c) for c in self.columns])


class EmitterRange(InputPartition):
    """Offsets [start, end) of one emitter."""

    def __init__(self, endpoint: str, start: int, end: int):
        super().__init__(endpoint)
        self.endpoint, self.start, self.end = endpoint, start, end


class CloudProfilerSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema

        from cloudprofiler.harness.generator.fetch import EmitterClient, output_schema

        opts = SourceOptions(self.options)
        with EmitterClient(opts.endpoints[0], opts.timeout_s) as client:
            return from_arrow_schema(opts.selected(output_schema(client.payload_schema)))

    def streamReader(self, schema) -> "CloudProfilerStreamReader":
        return CloudProfilerStreamReader(SourceOptions(self.options))


class CloudProfilerStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions):
        self.options = options
        self._clients: dict = {}

    def _client(self, endpoint: str):
        from cloudprofiler.harness.generator.fetch import EmitterClient

        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = EmitterClient(endpoint, self.options.timeout_s)
        return client

    def initialOffset(self) -> dict:
        return {endpoint: 0 for endpoint in self.options.endpoints}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        # Spark 4.0 and 4.1 call latestOffset() without arguments (no admission control there).
        latest = {e: self._client(e).latest() for e in self.options.endpoints}
        end = {e: state["latest"] for e, state in latest.items()}
        max_tuples = getattr(limit, "maxRows", None) if start is not None else None
        if max_tuples is not None:  # share the budget evenly, in whole buckets, at least one bucket each
            for e, state in latest.items():
                budget = max(1, max_tuples // len(latest) // max(1, state["bucket_tuples"]))
                end[e] = min(end[e], start.get(e, 0) + budget)
        return end

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadMaxRows(self.options.max_tuples) if self.options.max_tuples else ReadAllAvailable()

    def partitions(self, start: dict, end: dict) -> list:
        return [EmitterRange(e, int(start.get(e, 0)), int(end[e]))
                for e in self.options.endpoints if int(end[e]) > int(start.get(e, 0))]

    def read(self, partition: EmitterRange):
        from cloudprofiler.harness.generator.fetch import ID_COLUMN, EmitterClient

        channel = None
        if self.options.trace_channel:
            from ..spark.python_trace import task_channel
            channel = task_channel(self.options.trace_channel)
        with channel or contextlib.nullcontext(), EmitterClient(partition.endpoint, self.options.timeout_s) as client:
            for batch in client.batches(partition.start, partition.end, self.options.batch_tuples):
                if channel is not None:
                    channel.log_many(batch.column(ID_COLUMN))
                yield batch if self.options.columns is None else batch.select(self.options.columns)

    def commit(self, end: dict) -> None:
        for e, offset in end.items():
            self._client(e).commit(int(offset))

    def stop(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def register_source(spark) -> None:
    """Make `format("cloudprofiler-generator")` available in this session."""
    spark.dataSource.register(CloudProfilerSource)


def read_generator(spark, endpoints, **options):
    """A streaming DataFrame of the generator's serve-mode emitters (`format("cloudprofiler-generator")`, registered
    on first use). `endpoints`: a list of tcp://host:port; options as documented above."""
    register_source(spark)
    reader = spark.readStream.format(SOURCE_NAME).option("endpoints", ",".join(endpoints))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()
