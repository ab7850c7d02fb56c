"""The generator source on the Spark of this interpreter, run by tests/test_spark35.py in the pyspark 3.5 environment:
`python spark_version_source.py <endpoint> <tuples>` reads a serve-mode emitter (started by the test) until it has
`tuples` rows and stdin has a line (the test writes one when the generator ended: the emitter's last commit comes
with the batch after the last data), then prints one JSON line: the pyspark version, rows and distinct ids read."""
import json
import sys
import time

import pyspark
from pyspark.sql import SparkSession

import cloudprofiler.spark as cps


def main(endpoint: str, tuples: int) -> dict:
    spark = (cps.configure(SparkSession.builder.master("local[2]").appName("spark-version-source")
                           .config("spark.ui.enabled", "false"), calibration_enabled=False).getOrCreate())
    events = cps.read_generator(spark, [endpoint], timeout=30)
    query = events.select("id").writeStream.format("memory").queryName("events").start()
    deadline = time.monotonic() + 120
    while sum(p["numInputRows"] for p in query.recentProgress) < tuples and time.monotonic() < deadline:
        time.sleep(0.2)
    sys.stdin.readline()
    while query.status["isTriggerActive"]:
        time.sleep(0.05)
    query.stop()
    seen = spark.sql("select count(*) as rows, count(distinct id) as ids from events").first()
    spark.stop()
    return {"pyspark": pyspark.__version__, "rows": seen["rows"], "ids": seen["ids"]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
