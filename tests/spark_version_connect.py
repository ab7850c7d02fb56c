"""Spark Connect on the Spark of this interpreter, run by tests/test_spark35.py in the pyspark 3.5 environment: `python
spark_version_connect.py <folder> <Connect server jar> <endpoint>` starts a Connect server (local[2]) with the
plugin, as `cloudprofiler spark-conf` says, its Python UDFs timed (`udfs`); a remote session then runs, with no
change for the profiler but its session's operator setting, a pandas UDF that sleeps SLEEP_S per Arrow batch and a
pickled Python UDF, a filtered count, a count per key of JSON files kept in state, and a streaming query over the
generator source (a serve-mode emitter of EMITTED tuples, started by the test) until it has read them all. Prints one
JSON line: the pyspark version, the results, udfs() per UDF and task, the filter query's operators' rows, and the
streaming query's batches and its sampled records' latency from the source."""
import json
import os
import socket
import subprocess
import sys
import time

import pandas as pd
import pyspark
from pyspark.sql import functions as F
from pyspark.sql.connect.session import SparkSession as RemoteSession

import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application

ROWS, BATCH_ROWS, SLEEP_S = 2000, 500, 0.1  # 2 tasks of 2 Arrow batches each
FILTERED = 123_456  # the filtered count's range: a third of it kept
EMITTED = 10_000  # the streaming query's tuples
COUNTED_FILES = 2  # the counting query's input files (and batches)
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(folder: str, connect_jar: str, port: int) -> subprocess.Popen:
    conf = cps.spark_conf(log_dir=f"{folder}/logs", calibration_enabled=False, collect_interval_seconds=1, udfs=True)
    command = [os.path.join(pyspark.__path__[0], "bin", "spark-submit"), "--class", SERVER_CLASS,
               "--master", "local[2]", "--jars", f"{conf.pop('spark.jars')},{connect_jar}",
               *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
               "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false"]
    log = f"{folder}/server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    deadline = time.monotonic() + 240
    while "Spark Connect server started" not in open(log).read():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(open(log).read()[-3000:])
        time.sleep(0.5)
    return server


def counted(session, folder: str) -> str:
    """A count per key of COUNTED_FILES JSON files of 200 rows (key i % 10, event times a minute old), a file a batch,
    through a watermark, its state saved past the shuffle (update mode): each batch's sampled row (its file's first,
    key 0) timed to its partition's task. Returns the query's id."""
    source = f"{folder}/counted-in"
    os.makedirs(source)
    for n in range(COUNTED_FILES):
        old_ms = int(time.time() * 1000) - 60_000
        with open(f"{source}/part-{n}.json", "w") as out:
            out.write("".join(f'{{"k": {i % 10}, "t": {old_ms + i}}}\n' for i in range(200)))
        os.utime(f"{source}/part-{n}.json", (time.time() - 100 + n,) * 2)  # the source reads the oldest first
    counts = (session.readStream.schema("k long, t long").option("maxFilesPerTrigger", 1).json(source)
              .select("k", F.timestamp_millis("t").alias("t")).withWatermark("t", "1 hour").groupBy("k").count())
    query = (counts.writeStream.queryName("counted").outputMode("update").format("noop").trigger(availableNow=True)
             .option("checkpointLocation", f"{folder}/counted-checkpoint").start())
    query.awaitTermination(120)
    return query.id


def run(session, endpoint: str, folder: str) -> dict:
    @F.pandas_udf("long")
    def napping(ids: pd.Series) -> pd.Series:
        time.sleep(SLEEP_S)
        return ids + 1

    @F.udf("long")  # pickled rows: Spark 3.5's default
    def plus_two(i):
        return i + 2

    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    session.conf.set("spark.cloudprofiler.operators", "true")
    ids = session.range(0, ROWS, 1, 2)
    sums = [ids.select(napping("id").alias("y")).agg(F.sum("y")).first()[0],
            ids.select(plus_two("id").alias("y")).agg(F.sum("y")).first()[0],
            session.sql(f"select count(*) from range(0, {FILTERED}, 1, 2) where id % 3 = 0").first()[0]]
    query = (cps.read_generator(session, [endpoint], timeout=30).select("id", "event_time")
             .withWatermark("event_time", "1 hour").select("id")
             .writeStream.format("memory").queryName("generated").start())
    deadline = time.monotonic() + 120
    # (Spark 3.5's progress over Connect counts input rows per source only)
    while (sum(s["numInputRows"] for p in query.recentProgress for s in p["sources"]) < EMITTED
           and time.monotonic() < deadline):
        time.sleep(0.2)
    while query.status["isTriggerActive"]:
        time.sleep(0.05)
    query.stop()
    seen = session.sql("select count(*) as rows, count(distinct id) as ids from generated").first()
    return {"sums": sums, "session": session.session_id, "query_id": query.id,
            "streamed": [seen["rows"], seen["ids"]], "counted_id": counted(session, folder)}


def analyse(app, ran: dict) -> dict:
    udfs = app.udfs(connect_session_id=ran["session"]).toPandas()
    operators = app.operators().toPandas()
    filtered = operators[operators["description"].str.contains(str(FILTERED), regex=False)]
    [execution] = set(filtered["sql_execution_id"])
    mine = operators[operators["sql_execution_id"] == execution]
    batches = app.batches(ran["query_id"]).toPandas()
    latency = app.source_latency(ran["query_id"]).toPandas()
    # each task's rows 0, 1024, ... are sampled: those the probe above the scan counted
    probes = app.operator_tasks(streaming_query_id=ran["query_id"]).toPandas()
    scan = probes[probes["probe_id"].isin(latency.loc[latency["operator"] == "ColumnarToRow", "probe_id"])]
    return {"udfs": udfs[["udf", "kind", "batches", "rows", "out_rows", "function_s", "worker_s", "complete",
                          "failed", *[c for c in udfs.columns if c.endswith("_s") and c not in ("function_s",
                                                                                                   "worker_s")]]]
            .to_dict("records"),
            "filter_rows": {op: int(part["rows"].sum()) for op, part in mine.groupby("operator")},
            "batch_rows": int(batches["num_input_rows"].sum()),
            "batch_tasks": int(batches["tasks"].sum()), "timed_batches": int(batches["top_operator"].notna().sum()),
            "sampled": int(sum(-(-int(r) // 1024) for r in scan["rows"])),
            "latency": {f"{source} {operator}": int(part["rows"].sum())
                        for (source, operator), part in latency.groupby(["source", "operator"])},
            "counted": app.source_latency(ran["counted_id"]).toPandas()[["batch_id", "operator", "rows", "max_ns"]]
            .to_dict("records")}


def main(folder: str, connect_jar: str, endpoint: str) -> None:
    port = _free_port()
    server = start_server(folder, connect_jar, port)
    # Spark 3.5's functions and UDFs are Connect's in a process whose mode says Connect (as `pyspark --remote` sets
    # it); the analysis after it starts a classic session, which that mode would make a remote one
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    try:
        session = RemoteSession.builder.remote(f"sc://localhost:{port}").create()
        ran = run(session, endpoint, folder)
        session.stop()
    finally:
        del os.environ["SPARK_CONNECT_MODE_ENABLED"]
        server.terminate()  # the driver's shutdown hook writes its tables' last rows
        server.wait(120)
    [app] = [p for p in os.listdir(f"{folder}/logs") if p.startswith("local-")]
    seen = analyse(open_application(f"{folder}/logs/{app}"), ran)
    print(json.dumps({"pyspark": pyspark.__version__, **ran, **seen}, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:4])
