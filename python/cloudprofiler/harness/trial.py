"""One step of the maximum sustainable throughput search on Spark: a pipeline run at one rate, then judged.

`generator_trial` feeds the pipeline from the generator through the cloudprofiler source: every figure of
the step comes from the emitters (emitted, dropped, committed, commit latency, retained queue).
`rate_source_trial` feeds the same pipeline from Spark's built-in `rate` source (YSB columns derived from
its counter) for comparison; there the figures come from the query's progress reports (`progress_step`).
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace

from pyspark.sql import functions as F

from cloudprofiler.harness.generator.emitter import Generator
from cloudprofiler.harness.maxtput import MIN_ACHIEVED_FRACTION, Step, free_port_base, serve_step
from cloudprofiler.harness.generator.workloads import YSB_ADS, YSB_AD_TYPES, YSB_EVENT_TYPES

from .spark_source import read_generator
from .pipelines import pipeline

DRAIN_S = 10.0  # after the period, the pipeline gets this long to catch up; longer means it fell behind
# Planning and compiling a query's first micro-batch takes seconds (over 10 on a busy machine): a step's period
# starts when that batch is done, or after this long
FIRST_BATCH_WAIT_S = 60.0
# A micro-batch's latency is a sawtooth of about its duration, so a short step fits a slope with that much
# jitter: allow 5% of backlog growth (a step 5% above the capacity still shows as unsustainable in its slope).
MAX_LATENCY_GROWTH = 50.0


def benchmark_session(master: str = "local[2]", log_dir: str | None = None):
    """A quiet Spark session with the plugin on (trace points need its SQL function) and as many shuffle
    partitions as local cores, so a step measures the pipeline rather than scheduling."""
    from ..spark import builder

    cores = master[len("local["):-1] if master.startswith("local[") else "2"
    spark = (builder(log_dir=log_dir).master(master).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", cores if cores.isdigit() else "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_noop_query(df, output_mode: str, checkpoint: str):
    return (df.writeStream.format("noop").outputMode(output_mode).option("checkpointLocation", checkpoint)
            .start())


def stop_query(spark, query, idle_wait_s: float = 5.0, end_wait_s: float = 30.0) -> str | None:
    """Stop between batches when possible; the query's error, if any. A saturated query is never between batches:
    the batch cut short is cancelled with Spark's log quiet (it logs the cancelled write and its tasks' failures
    as errors with their stacks, none of them the user's), and its tasks are waited for, so that none still
    writes to the checkpoint when the caller removes it."""
    deadline = time.monotonic() + idle_wait_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    error = query.exception()
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
    level = log4j.getLevel().toString()
    spark.sparkContext.setLogLevel("OFF")
    try:
        query.stop()
        deadline = time.monotonic() + end_wait_s
        while _running_tasks(spark, str(query.runId)) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        spark.sparkContext.setLogLevel(level)
    return None if error is None else f"the streaming query failed: {_last_line(str(error))}"


def _running_tasks(spark, job_group: str) -> int:
    """Tasks of the group's jobs still running: a cancelled job ends at once, its killed tasks later."""
    tracker = spark.sparkContext.statusTracker()  # a query's batches run as jobs of the group of its run id
    jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(job_group)]
    stages = [tracker.getStageInfo(stage) for job in jobs if job is not None for stage in job.stageIds]
    return sum(stage.numActiveTasks for stage in stages if stage is not None)


def generator_trial(spark, name, template, duration_s: float, warmup_s: float, trace: bool = False):
    """`name`: a pipeline of `pipelines.PIPELINES`, or a `pipelines.Pipeline` of your own. A pipeline of k
    streams reads emitters i, i + k, i + 2k, ... as its i-th stream (each emitter serves one reader)."""
    spec = pipeline(name) if isinstance(name, str) else name
    emitters = max(template.emitters, spec.streams)

    def trial(rate: float) -> Step:
        config = replace(template, workload=spec.workload, rate=rate, duration_s=duration_s, transport="serve",
                         emitters=emitters, drain_s=DRAIN_S, port=free_port_base(emitters))
        generator = Generator(config).start()
        checkpoint = tempfile.mkdtemp(prefix="cloudprofiler-trial-")
        label = name if isinstance(name, str) else "pipeline"
        options = {"timeout": config.timeout_s, **({"traceChannel": f"{label}.source"} if trace else {})}
        streams = [read_generator(spark, generator.endpoints[i::spec.streams], **options)
                   for i in range(spec.streams)]
        try:
            query = start_noop_query(spec.build(*streams, trace=trace), spec.output_mode, checkpoint)
        except Exception as exc:  # e.g. the source could not reach an emitter: this step failed, not the search
            generator.kill()
            shutil.rmtree(checkpoint, ignore_errors=True)
            return Step(rate, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, f"the query did not start: {_last_line(str(exc))}",
                        MAX_LATENCY_GROWTH)
        try:
            results = generator.join(duration_s + DRAIN_S + 4 * config.timeout_s + 30)
        finally:
            error = stop_query(spark, query)
            shutil.rmtree(checkpoint, ignore_errors=True)
        return serve_step(rate, results, warmup_s, config.effective_bucket_tuples(), error, MAX_LATENCY_GROWTH)

    return trial


def rate_source_events(spark, rate: float, partitions: int):
    """YSB-shaped events from Spark's `rate` source: every column derived from its counter."""
    raw = (spark.readStream.format("rate").option("rowsPerSecond", int(rate))
           .option("numPartitions", partitions).load())
    v = F.col("value")
    return raw.select(
        (v * 7919).alias("user_id"), (v * 104729).alias("page_id"), (v % YSB_ADS).cast("int").alias("ad_id"),
        (v % len(YSB_AD_TYPES)).cast("byte").alias("ad_type"),
        (v % len(YSB_EVENT_TYPES)).cast("byte").alias("event_type"),
        (v % (1 << 32)).alias("ip"), v.alias("id"), F.col("timestamp").alias("event_time"),
        F.lit(0).cast("long").alias("emit_tsc"))


def rate_source_trial(spark, name: str, duration_s: float, warmup_s: float, partitions: int = 2,
                      trace: bool = False):
    spec = pipeline(name)
    if spec.workload != "ysb":
        raise ValueError(f"the rate source comparison feeds YSB-shaped events only, not pipeline {name!r}")

    def trial(rate: float) -> Step:
        checkpoint = tempfile.mkdtemp(prefix="cloudprofiler-trial-")
        events = rate_source_events(spark, rate, partitions)
        query = start_noop_query(spec.build(events, trace=trace), spec.output_mode, checkpoint)
        try:
            deadline = time.monotonic() + FIRST_BATCH_WAIT_S
            while not query.recentProgress and query.isActive and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(duration_s)
        finally:
            error = stop_query(spark, query)
            shutil.rmtree(checkpoint, ignore_errors=True)
        return progress_step(rate, query.recentProgress, warmup_s, error)

    return trial


def progress_step(rate: float, progress: list, warmup_s: float, error: str | None) -> Step:
    """Judge a step from the query's progress reports: a batch's latency is its end minus the oldest event
    time it held (the watermark column's `eventTime.min`), so a backlog shows as latency growing."""
    import numpy as np
    from datetime import datetime

    def seconds(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    batches = [p for p in progress if p["numInputRows"] > 0 and p.get("eventTime", {}).get("min")]
    received = sum(p["numInputRows"] for p in batches)
    if len(batches) < 3:
        return Step(rate, received, received, 0, 0.0, 0.0, 0.0, 0.0, 0.0, error or "fewer than 3 batches ran",
                    MAX_LATENCY_GROWTH)
    ends = np.array([seconds(p["timestamp"]) + p["durationMs"].get("triggerExecution", 0) / 1000 for p in batches])
    latency_ms = (ends - np.array([seconds(p["eventTime"]["min"]) for p in batches])) * 1000
    rows = np.array([p["numInputRows"] for p in batches], dtype=float)
    t = ends - ends[0]
    keep = t >= warmup_s if (t >= warmup_s).sum() > 2 else np.ones(len(t), dtype=bool)
    t, latency_ms, rows = t[keep], latency_ms[keep], rows[keep]
    p50, p99 = (float(v) for v in np.percentile(latency_ms, [50, 99]))
    slope = float(np.polyfit(t, latency_ms, 1)[0])
    achieved = float(rows[1:].sum() / (t[-1] - t[0])) if t[-1] > t[0] else 0.0
    # A source hands out rows in whole batches (the rate source in whole seconds), so the rows counted over the
    # window are off by up to its largest batch: the rate reached is held to within that resolution.
    resolution = float(rows.max() / rows[1:].sum()) if rows[1:].sum() > 0 else 1.0
    return Step(rate, received, received, 0, achieved, 0.0, p50, p99, slope, error, MAX_LATENCY_GROWTH,
                min(MIN_ACHIEVED_FRACTION, 1.0 - resolution))


def _last_line(message: str) -> str:
    """A Python worker's exception ends with its message; a JVM one starts with it."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and "Traceback" in lines[0]:
        return next((line for line in reversed(lines) if not line.startswith("at ")), lines[0])
    return lines[0] if lines else message
