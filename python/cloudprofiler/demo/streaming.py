"""Streaming phase: the generator feeds the YSB pipeline on Spark for a bounded time, with a trace point at every
operator: the source (the plugin's generator source, as it delivers each bucket), after the filter, after the join with
the campaigns, and at the windowed counts. Its operators are timed too (spark.cloudprofiler.operators, for this query
only), so that 1 event in 1,024 is timed from its emission to each operator and to the sink with no trace point."""
from __future__ import annotations

import threading
import time

import numpy as np

CHANNELS = ("ysb.source", "ysb.filter", "ysb.join", "ysb.window")
OPERATORS = "spark.cloudprofiler.operators"
EMITTERS = 2
PROGRESS_EVERY_S = 5.0
STOP_WAIT_S = 30
RUNNING = ("Processing new data", "No new data but cleaning up state")  # Spark's status while a batch runs
GENERATOR_TIMEOUT_S = 180  # an emitter waits this long for Spark to take a bucket (the first: the query's start)


def run(spark, progress, seconds: float, rate: float, host: str) -> None:
    import cloudprofiler.spark as cps
    from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
    from cloudprofiler.harness.maxtput import free_port_base
    from cloudprofiler.harness.pipelines import ysb

    generator = Generator(GeneratorConfig(rate=rate, duration_s=seconds, emitters=EMITTERS, transport="serve",
                                          timeout_s=GENERATOR_TIMEOUT_S, host=host,
                                          port=free_port_base(EMITTERS))).start()
    try:
        events = cps.read_generator(spark, generator.endpoints, traceChannel=CHANNELS[0])
        spark.sparkContext.setJobDescription("demo streaming: YSB")
        spark.conf.set(OPERATORS, "true")  # the query keeps the session's settings as it starts
        try:
            query = ysb(events, trace=True).writeStream.format("noop").outputMode("update").start()
        finally:
            spark.conf.unset(OPERATORS)
    except Exception:
        generator.kill()
        raise
    try:
        results = _wait(generator, query, progress)
    finally:
        _stop_between_batches(query)
    _report(results, seconds, progress)


def _wait(generator, query, progress) -> list:
    """The emitters' results, once Spark has committed every tuple they emitted; progress every few seconds."""
    outcome: dict = {}

    def join() -> None:
        try:
            outcome["results"] = generator.join()
        except Exception as exc:  # noqa: BLE001 -- handed to the waiting thread
            outcome["error"] = exc

    joiner = threading.Thread(target=join, name="demo-generator-join", daemon=True)
    joiner.start()
    progress.detail("the query starts: Spark plans it and starts the Python workers that read the emitters")
    rows_by_batch: dict = {}  # Spark keeps only the last 100 progress reports
    said = (0, 0)
    while joiner.is_alive():
        joiner.join(PROGRESS_EVERY_S)
        if not query.isActive:
            generator.kill()
            raise RuntimeError(f"the streaming query stopped: {query.exception()}")
        rows_by_batch.update((p["batchId"], p["numInputRows"]) for p in query.recentProgress)
        now = (len(rows_by_batch), sum(rows_by_batch.values()))
        if joiner.is_alive() and now != said:
            progress.detail(f"{now[0]} micro-batches, {now[1]:,} events read so far")
            said = now
    if "error" in outcome:
        raise outcome["error"]
    return outcome["results"]


def _stop_between_batches(query) -> None:
    """Stops the query once no micro-batch runs: the last one reads the emitters' end pills, and stopping the
    query then would cancel its tasks (killed attempts in the task table). The trigger after it waits for offsets
    from emitters that are gone, and is stopped there."""
    deadline = time.monotonic() + STOP_WAIT_S
    while query.isActive and query.status["message"] in RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def _report(results: list, seconds: float, progress) -> None:
    errors = [f"emitter {r.emitter}: {r.error}" for r in results if r.error]
    if errors:
        raise RuntimeError("; ".join(errors))
    emitted = sum(r.emitted_tuples for r in results)
    committed = sum(r.committed_tuples for r in results)
    dropped = sum(r.dropped_tuples for r in results)
    latency_ms = np.array([lat for r in results for _, lat, _ in r.latency_samples] or [np.nan]) / 1e6
    progress.detail(f"{emitted:,} events emitted in {seconds:g} s by {len(results)} emitters "
                    f"({emitted / seconds:,.0f}/s), {committed:,} committed by Spark, {dropped:,} dropped; commit "
                    f"latency p50 {np.percentile(latency_ms, 50):,.0f} ms, p99 {np.percentile(latency_ms, 99):,.0f} ms")
    progress.detail(f"trace channels: {', '.join(CHANNELS)}; operators timed, 1 event in 1,024 from its emission to "
                    "the sink")
