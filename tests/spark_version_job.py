"""A small profiled application and its analysis, run by tests/test_spark35.py in the pyspark 3.5 environment:
`python spark_version_job.py <log dir> [plugin jar]`. Prints one JSON line of what it saw.

One local[2] session runs a job of 4 tasks whose ids pass a SQL trace point (`cp_trace`) and a Python one
(`cps.trace`), and a query runs with its operators untimed and timed (spark.cloudprofiler.operators); its executor
collects on request, and a session for an analysis in the application runs a job; after it stops, the analysis
reads the application's folder. With a plugin jar named, that jar is used instead of the one the
helper picks (a jar built for the other Scala: the job must run all the same)."""
import json
import sys

import pyarrow.ipc as ipc
import pyspark
from pyspark.sql import SparkSession

import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application
from cloudprofiler.analysis.session import sibling_session

ROWS = 2000


def pq_table(path: str) -> list:
    with ipc.open_file(path) as reader:
        return reader.read_all().to_pylist()


def main(log_dir: str, jar: "str | None") -> dict:
    builder = cps.configure(SparkSession.builder.master("local[2]").appName("spark-version-job")
                            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                            .config("spark.scheduler.mode", "FAIR"), log_dir=log_dir, calibration_enabled=False)
    if jar:
        builder = builder.config("spark.jars", jar)
    spark = builder.getOrCreate()
    used_jar = spark.conf.get("spark.jars")
    app_id = spark.sparkContext.applicationId
    traced = spark.sql(f"select cp_trace('sql.ids', id) as id from range(0, {ROWS}, 1, 4)")
    ids = cps.trace(traced, "python.ids", "id").agg({"id": "sum"}).collect()[0][0]
    query = f"select id % 5 k, count(*) c from range(0, {ROWS}, 1, 4) where id % 4 = 0 group by 1 order by 1"
    plain = [tuple(r) for r in spark.sql(query).collect()]
    spark.conf.set("spark.cloudprofiler.operators", "true")
    timed = [tuple(r) for r in spark.sql(query).collect()]
    # while it runs: its executor collects now and the driver publishes its task table (none with the other Scala's
    # jar: its task table steps aside); a job of an analysis's own session (2 tasks), which the analysis leaves out
    collected = list(cps.collect_now(spark))
    published = None if jar else len(pq_table(f"{log_dir}/{app_id}/spark-tasks.arrows"))
    sibling_session(spark, None).range(0, 100, 1, 2).collect()
    # scheduled FAIR, the analysis's job ran in a pool of its own, made as it was first asked for
    pools = spark.sparkContext._jsc.sc().getAllPools()
    pools = sorted(pools.apply(i).name() for i in range(pools.size()))
    spark.stop()
    result = {"pyspark": pyspark.__version__, "jar": used_jar, "sum": ids, "app_id": app_id,
              "operators_same_rows": plain == timed, "collected": collected, "published_tasks": published,
              "pools": pools}
    if jar:
        return result
    nodes = pq_table(f"{log_dir}/{app_id}/spark-operator-nodes.arrows")
    filters = {n["probe_id"] for n in nodes if n["operator"] == "Filter"}
    result["filter_rows"] = sum(r["rows"] for r in pq_table(f"{log_dir}/{app_id}/spark-operators.arrows")
                                if r["probe_id"] in filters)
    app = open_application(f"{log_dir}/{app_id}")
    tasks = app.tasks()
    result["tasks"] = tasks.count()
    result["table_tasks"] = len(pq_table(f"{log_dir}/{app_id}/spark-tasks.arrows"))
    result["tasks_with_duration"] = tasks.where("duration_ns > 0").count()
    result["records"] = {r["channel"]: r["records"] for r in app.channels().collect()}
    hop = app.pipeline(["sql.ids", "python.ids"]).where("hop = 0").collect()[0]
    result["latency"] = {"count": hop["count"], "p50_ns": hop["p50_ns"]}
    # the timed query's sampled rows (1 of 1,024 by default), from operator to operator, and the ordinals in their
    # task that the filter's probe logged
    result["operator_hops"] = [[r["from_operator"], r["to_operator"], r["rows"], r["min_ns"], r["max_ns"]]
                               for r in app.operator_hops().collect()]
    result["filter_ordinals"] = sorted(r["tuple_id"] & 0xFFFFFFFF for probe in filters
                                       for r in app.records(f"spark.operator.{probe}").collect())
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)))
