"""A plain PySpark job with no profiler code: run it through examples/spark_submit.sh."""
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("cloudprofiler-example").getOrCreate()
df = spark.range(0, 1_000_000, numPartitions=8)
print(df.groupBy((df.id % 10).alias("key")).count().orderBy("key").collect())
spark.stop()
