"""`cloudprofiler bench spark`'s streaming case: what operator timing adds to each micro-batch of a streaming query.
With `spark.cloudprofiler.operators` on, every batch plans its probes anew, its operators are timed and its sampled
rows are logged from the generator source to each operator (docs/operators.md). The same query (the generator
source, a filter, an aggregation into the noop sink, a batch a second) runs with the setting off and on in turn, in
pairs whose order alternates, in one application with the plugin (its own: the trace cases' check counts every
channel of theirs). A run's figure is the median time of its batches (Spark's `triggerExecution`) past its first,
which starts the state store and compiles the batch's code."""
from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from ... import tables
from ...logs import read_log
from .spark_logs import channel_files

TIMING_KEY = "spark.cloudprofiler.operators"
RATE, SECONDS = 100_000, 6  # tuples per second from two emitters on this host, seconds per run
SHUFFLE_PARTITIONS = "4"  # the aggregation's: Spark's 200 would make each batch 200 tasks of state store work


def _run(spark, timed: bool, rate: int, seconds: float, checkpoint: Path) -> dict:
    """One run of the query: its run id, its batches' times in ms past the first and its input rows."""
    from pyspark.sql import functions as F

    from ...spark import read_generator
    from ..generator.emitter import Generator, GeneratorConfig
    from ..maxtput import free_port_base
    from ..trial import stop_query

    spark.conf.set(TIMING_KEY, str(timed).lower())
    generator = Generator(GeneratorConfig(rate=rate, duration_s=seconds, emitters=2, transport="serve",
                                          port=free_port_base(2), timeout_s=30)).start()
    counts = (read_generator(spark, generator.endpoints, timeout=10).where("id % 3 != 0")
              .groupBy((F.col("id") % 100).alias("k")).count())
    query = (counts.writeStream.outputMode("update").format("noop").trigger(processingTime="1 second")
             .option("checkpointLocation", str(checkpoint)).start())
    failed = [r.error for r in generator.join(120) if r.error]
    error = stop_query(spark, query)
    if failed or error:
        raise RuntimeError(f"bench spark: the streaming query's run failed: {(failed + [error])[0]}")
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return {"run_id": str(query.runId), "batch_ms": [p["durationMs"]["triggerExecution"] for p in batches[1:]],
            "rows": sum(p["numInputRows"] for p in batches)}


def compare(spark, repeats: int, warmups: int, rate: int = RATE, seconds: float = SECONDS) -> dict:
    """In `spark`, an application with the plugin, which it stops: `warmups` pairs, then `repeats` pairs of runs
    with operator timing off and on (off first in even pairs). The case's name, each side's run figures in seconds
    (`off`, `on`), each run's batch times in ms (`runs`) and what the runs logged otherwise than they must."""
    from ... import spark as cps

    spark.conf.set("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
    spark.sparkContext.setLogLevel("WARN")  # Spark logs each batch's progress at INFO, dozens of lines each
    runs: dict = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="cp-bench-stream-") as folder:
        for n in range(warmups + repeats):
            for timed in (False, True) if n % 2 == 0 else (True, False):
                run = _run(spark, timed, rate, seconds, Path(folder) / f"checkpoint-{n}-{timed}")
                if n >= warmups:
                    runs[timed].append(run)
    spark.stop()
    every = [*runs[False], *runs[True]]
    if any(not run["batch_ms"] for run in every):
        raise RuntimeError(f"bench spark: a streaming run of {seconds} s had no batch past its first")
    off, on = ([statistics.median(r["batch_ms"]) / 1e3 for r in runs[side]] for side in (False, True))
    name = (f"streaming query, generator source at {rate:,} tuples/s, a filter and an aggregation, 1 s trigger: "
            f"per micro-batch, operator timing off against on")
    return {"name": name, "off": off, "on": on, "runs": {side: [r["batch_ms"] for r in runs[side]] for side in runs},
            "log_problems": source_problems(Path(cps.log_folder(spark)), {r["run_id"] for r in runs[True]},
                                            {r["run_id"] for r in runs[False]})}


def source_problems(app: Path, timed: set, untimed: set) -> list[str]:
    """The source's records (`spark.source.delivered`) of an application folder against its task table: every run in
    `timed` logged some, none of `untimed` did (a record's id holds its task attempt in its high half)."""
    channel = tables.channel("source_rows").prefix + "delivered"
    table = read_log(app / tables.file("tasks")).select(["task_attempt_id", "streaming_run_id"]).to_pylist()
    run_of = {r["task_attempt_id"]: r["streaming_run_id"] for r in table}
    logged: dict = {}
    for path in channel_files(app).get(channel, []):
        for tuple_id in read_log(path).column("tuple_id").to_pylist():
            run = run_of.get(tuple_id >> 32)
            logged[run] = logged.get(run, 0) + 1
    problems = [f"{app}: the run {run} with operator timing off logged {logged[run]} {channel} records"
                for run in sorted(untimed & set(logged))]
    problems += [f"{app}: the run {run} with operator timing on logged no {channel} record"
                 for run in sorted(timed - set(logged))]
    return problems
