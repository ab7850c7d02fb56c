"""The PySpark helper: one call sets the jar, the plugin and the options; then read the task records back.

    .venv/bin/python examples/pyspark_helper.py [log folder] [rows]
"""
import sys

import pyarrow.ipc as ipc

import cloudprofiler as cp
import cloudprofiler.spark as cps

log_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/cloudprofiler-helper"
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
spark = cps.builder(log_dir=log_dir, compression="zstd").master("local[2]").getOrCreate()
spark.range(0, rows, numPartitions=8).selectExpr("sum(id)").collect()
app = f"{log_dir}/{spark.sparkContext.applicationId}"
spark.stop()

start = cp.read_log_dir(app, channel="spark.task.start").to_pandas().set_index("tuple_id")
end = cp.read_log_dir(app, channel="spark.task.end").to_pandas().set_index("tuple_id")
hz = cp.log_metadata(next(p for p in cp.log_files(app) if p.name.startswith("spark.task.start.")))["tsc.hz"]
with open(f"{app}/spark-tasks.arrows", "rb") as f:
    tasks = ipc.open_file(f).read_all().to_pandas().set_index("task_attempt_id")
tasks["tsc_duration_us"] = (end.tsc.astype("int64") - start.tsc.astype("int64")) / hz * 1e6
print(tasks[["stage_id", "partition", "executor_id", "status", "tsc_duration_us"]])
