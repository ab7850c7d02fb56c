"""Trace points with no Python in the data path: the SQL function cp_trace('channel', id) logs every row."""
import cloudprofiler as cp
import cloudprofiler.spark as cps

log_dir = "/tmp/cloudprofiler-sql-trace"
spark = cps.builder(log_dir=log_dir).master("local[2]").getOrCreate()
spark.range(0, 1_000_000, numPartitions=4).createOrReplaceTempView("events")
spark.sql("""
    select k, count(*) from (
        select cp_trace('after-filter', id) as id, id % 7 as k from (
            select cp_trace('source', id) as id from events) where id % 2 = 0)
    group by k""").collect()
app = f"{log_dir}/{spark.sparkContext.applicationId}"
spark.stop()
for channel in ("source", "after-filter"):
    print(channel, cp.read_log_dir(app, channel=channel).num_rows, "records")
