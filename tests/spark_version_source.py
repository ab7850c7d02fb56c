"""The generator source on the Spark of this interpreter, run by tests/test_spark35.py in the pyspark 3.5 environment:
`python spark_version_source.py <endpoint> <tuples>` reads a serve-mode emitter (started by the test) until it has
`tuples` rows and stdin has a line (the test writes one when the generator ended: the emitter's last commit comes
with the batch after the last data), then prints one JSON line: the pyspark version, rows and distinct ids read, and,
operator timing being on, the sampled records paired from the source (source_latency) at the scan and at the sink
against the rows the probe above the scan counted per task, and past the query's shuffle (its rows new ones, timed
from their event time only) against the rows the shuffle's read counted per task."""
import json
import os
import sys
import time

import pyspark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import cloudprofiler.spark as cps


def main(endpoint: str, tuples: int) -> dict:
    spark = (cps.configure(SparkSession.builder.master("local[2]").appName("spark-version-source")
                           .config("spark.ui.enabled", "false"), calibration_enabled=False,
                           log_dir=os.path.abspath("logs")).getOrCreate())
    spark.conf.set("spark.cloudprofiler.operators", "true")
    events = cps.read_generator(spark, [endpoint], timeout=30)
    # a watermark on the emission's wall clock: the rows are timed from their event time too; then a shuffle, past
    # which a projection keeps the event time
    timed = (events.select("id", "event_time").withWatermark("event_time", "1 hour").repartition(2)
             .select("id", (F.col("id") % 7).alias("bucket"), "event_time"))
    query = timed.writeStream.format("memory").queryName("events").start()
    deadline = time.monotonic() + 120
    while sum(p["numInputRows"] for p in query.recentProgress) < tuples and time.monotonic() < deadline:
        time.sleep(0.2)
    sys.stdin.readline()
    while query.status["isTriggerActive"]:
        time.sleep(0.05)
    query.stop()
    seen = spark.sql("select count(*) as rows, count(distinct id) as ids from events").first()
    app_id = spark.sparkContext.applicationId
    spark.stop()
    from cloudprofiler.analysis import open_application

    app = open_application(os.path.join("logs", app_id))
    from cloudprofiler.analysis.operator_hops import sourced_probes

    latency = app.source_latency().toPandas()
    scan, sink = latency[latency["operator"] == "ColumnarToRow"], latency[latency["operator"] == "sink"]
    tasks = app.operator_tasks().toPandas()
    counted = tasks[tasks["probe_id"].isin(scan["probe_id"])]
    # past the shuffle: the chain marked as of event times only, from the shuffle's read (Exchange) up
    events_only = {probe for probe, sourced in sourced_probes(app).items() if sourced.events_only}
    past = latency[latency["probe_id"].isin(events_only)]
    read = tasks[tasks["probe_id"].isin(past.loc[past["operator"] == "Exchange", "probe_id"])]
    return {"pyspark": pyspark.__version__, "rows": seen["rows"], "ids": seen["ids"],
            "paired": {source: int(part["rows"].sum()) for source, part in scan.groupby("source")},
            "sunk": {source: int(part["rows"].sum()) for source, part in sink.groupby("source")},
            # from the event time as from the emission, but for how the emitter read its two clocks
            "event_vs_emitted_ns": float(max(abs(sink.loc[sink["source"] == "event_time", c].to_numpy()
                                                 - sink.loc[sink["source"] == "emitted", c].to_numpy()).max()
                                             for c in ("min_ns", "max_ns"))),
            "sampled": int(sum(-(-int(r) // 1024) for r in counted["rows"])), "scanned": int(counted["rows"].sum()),
            "past_shuffle": {f"{source} {operator}": int(part["rows"].sum())
                             for (source, operator), part in past.groupby(["source", "operator"])},
            "past_sampled": int(sum(-(-int(r) // 1024) for r in read["rows"])), "past_read": int(read["rows"].sum())}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
