"""Trace points with no Python in the data path: the SQL function cp_trace('channel', id) logs every row,
cp_trace('channel', id, x, y) the ids with id mod y < x (the same ids at every trace point). A trace point's
value must reach the result: Spark prunes a column nobody reads, trace point or not.

    .venv/bin/python examples/sql_trace.py [log folder] [rows]
"""
import sys

import cloudprofiler as cp
import cloudprofiler.spark as cps

log_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/cloudprofiler-sql-trace"
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
spark = cps.builder(log_dir=log_dir).master("local[2]").config("spark.ui.showConsoleProgress", "false").getOrCreate()
spark.range(0, rows, numPartitions=4).createOrReplaceTempView("events")
spark.sql("""
    select k, count(*), max(id) from (
        select cp_trace('after-filter', id) as id, cp_trace('sampled', id, 1, 64) % 7 as k from (
            select cp_trace('source', id) as id from events) where id % 2 = 0)
    group by k""").collect()
app = f"{log_dir}/{spark.sparkContext.applicationId}"
spark.stop()
for channel in ("source", "after-filter", "sampled"):
    print(channel, cp.read_log_dir(app, channel=channel).num_rows, "records")
