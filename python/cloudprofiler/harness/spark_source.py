"""`spark.readStream.format("cloudprofiler-generator")`: the generator's serve-mode emitters as a Spark streaming
source, read in the executors' JVMs by the plugin jar (io.cloudprofiler.harness.source.GeneratorSource).

    from cloudprofiler.harness.spark_source import read_generator
    df = read_generator(spark, ["tcp://10.0.0.5:5555", "tcp://10.0.0.5:5556"], columns="id,ad_id,event_time")

One Spark partition per emitter and micro-batch: the offsets of a batch are a range of buckets per emitter, its
task fetches that range and hands each bucket to Spark as a columnar batch, in place (no Python worker, no row
conversion), and Spark's commit frees it in the emitter. A batch that is replayed (task retry, restart from a
checkpoint) fetches the same buckets, so every tuple is delivered exactly once while the emitter still retains
it; a range that is gone fails the query with a message naming the emitter and the offsets, never silently.

Options: endpoints (required, comma-separated), timeout (seconds per request, default 30), maxTuplesPerTrigger
(admission control, default unlimited), traceChannel (log every id with the TSC at which the source delivered
it, through the executor's library), columns (comma-separated: the only columns handed to Spark, in that order,
default all).
"""
from __future__ import annotations

SOURCE_NAME = "cloudprofiler-generator"


def read_generator(spark, endpoints, **options):
    """A streaming DataFrame of the generator's serve-mode emitters. `endpoints`: a list of tcp://host:port;
    options as documented above. The session needs the plugin jar on its class path (`cps.builder()` adds it)."""
    reader = spark.readStream.format(SOURCE_NAME).option("endpoints", ",".join(endpoints))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    try:
        return reader.load()
    except Exception as exc:
        if "DATA_SOURCE_NOT_FOUND" in str(exc) or "Failed to find the data source" in str(exc):
            raise RuntimeError(f"the {SOURCE_NAME} source is in the cloudprofiler plugin jar, which this session "
                               "does not have: build the session with cloudprofiler.spark.builder(), or add the "
                               "jar (cloudprofiler conf) to spark.jars") from None
        raise
