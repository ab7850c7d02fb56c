"""A pandas UDF sleeping a known time per batch, a pickled Python UDF, mapInArrow, a Python UDTF (pickled: Spark 3.5's
default), an RDD's map, and an applyInPandas, a pandas aggregate UDF, the same over a window, a cogrouped
applyInPandas and on Spark 4 applyInArrow, grouped and cogrouped, sleeping a known time per group with their batches
timed (spark.cloudprofiler.udfs), and udfs() of the application, in whichever pyspark runs this script (test_udfs
runs it on Spark 3.5, without PySpark's daemon on both, and with Spark 4's pipelined reader). Prints udfs() summed
per kind as JSON on its last line. Arguments: the folder of its logs, then "no-daemon" where the JVM starts its
Python workers without the daemon. The workers read SPARK_PIPELINED_UDF from this process's environment (local mode)."""
import json
import sys
import time

import pandas as pd
from pyspark.sql import Window
from pyspark.sql import functions as F

import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application

ROWS, BATCH_ROWS, SLEEP_S = 2000, 500, 0.1  # 2 tasks of 2 Arrow batches each
GROUPS = 4  # the grouped UDFs' groups: of BATCH_ROWS rows each, in 2 shuffle partitions


def sleepy(v: pd.Series) -> pd.Series:
    time.sleep(SLEEP_S)
    return v


def per_group(frame: pd.DataFrame) -> pd.DataFrame:
    time.sleep(SLEEP_S)
    return frame[["id"]]


def both(left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:
    time.sleep(SLEEP_S)
    return pd.concat([left[["id"]], right[["id"]]])


def per_table(table):
    time.sleep(SLEEP_S)
    return table.select(["id"])


def both_tables(left, right):
    import pyarrow as pa

    time.sleep(SLEEP_S)
    return pa.concat_tables([left.select(["id"]), right.select(["id"])])


def slow_mean(v: pd.Series) -> float:
    time.sleep(SLEEP_S)
    return v.mean()


def arrow_batches(batches):
    yield from batches


class Tens:
    """A UDTF: each id's next 10 ids."""

    def eval(self, start: int):
        for n in range(start, start + 10):
            yield (n,)


def main(folder: str, daemon: bool) -> None:
    spark = (cps.builder(log_dir=f"{folder}/logs", local_dir=f"{folder}/local", calibration_enabled=False, udfs=True)
             .master("local[2]").config("spark.ui.enabled", "false").config("spark.python.use.daemon", str(daemon))
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    ids = spark.range(0, ROWS, 1, 2)
    sums = [ids.select(F.pandas_udf(sleepy, "long")("id").alias("y")).agg(F.sum("y")).first()[0],
            ids.select(F.udf(lambda v: v + 1, "long", useArrow=False)("id").alias("y")).agg(F.sum("y")).first()[0],
            ids.mapInArrow(arrow_batches, "id long").agg(F.sum("id")).first()[0]]
    spark.udtf.register("tens", F.udtf(Tens, returnType="n long"))
    sums.append(spark.sql("select sum(t.n) from range(0, 4, 1, 2) r, lateral tens(r.id) t").first()[0])
    sums.append(spark.sparkContext.parallelize(list(range(ROWS)), 2).map(lambda v: v + 1).sum())
    groups = ids.withColumn("g", F.col("id") % GROUPS).groupBy("g")
    sums.append(groups.applyInPandas(per_group, "id long").agg(F.sum("id")).first()[0])
    sums.append(groups.agg(F.pandas_udf(slow_mean, "double")("id").alias("m")).agg(F.sum("m")).first()[0])
    by_group = Window.partitionBy("g")
    sums.append(ids.withColumn("g", F.col("id") % GROUPS).select(F.pandas_udf(slow_mean, "double")("id").over(by_group)
                                                                 .alias("m")).agg(F.sum("m")).first()[0])
    others = spark.range(0, ROWS // 2, 1, 2).withColumn("g", F.col("id") % GROUPS).groupBy("g")
    sums.append(groups.cogroup(others).applyInPandas(both, "id long").agg(F.sum("id")).first()[0])
    if hasattr(groups, "applyInArrow"):  # Spark 4: the same grouped and cogrouped maps over Arrow tables
        sums.append(groups.applyInArrow(per_table, "id long").agg(F.sum("id")).first()[0])
        sums.append(groups.cogroup(others).applyInArrow(both_tables, "id long").agg(F.sum("id")).first()[0])
    app_id = spark.sparkContext.applicationId
    spark.stop()
    app = open_application(f"{folder}/logs/{app_id}")
    per_kind = (app.udfs().groupBy("kind").agg(F.count(F.lit(1)).alias("tasks"), F.sum("batches").alias("batches"),
                                                F.sum("rows").alias("rows"), F.sum("out_rows").alias("out_rows"),
                                                F.min("function_s").alias("min_function_s"),
                                                F.sum("function_s").alias("function_s"),
                                                F.max("function_s").alias("max_function_s"),
                                                F.min(F.col("complete").cast("int")).alias("complete"),
                                                F.sum(F.col("wait_s") + F.col("transfer_s")).alias("waited_s"),
                                                F.sum("read_s").alias("read_s")).collect())
    import pyspark

    print(json.dumps({"pyspark": pyspark.__version__, "sums": sums,
                      "kinds": {r["kind"]: {k: r[k] for k in r.asDict() if k != "kind"} for r in per_kind}}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] != ["no-daemon"])
