"""The PySpark helper: one call sets the jar, the plugin and the options; then read the task records back."""
import sys

import pyarrow.ipc as ipc

import cloudprofiler as cp
import cloudprofiler.spark as cps

log_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/cloudprofiler-helper"
spark = cps.builder(log_dir=log_dir, compression="zstd").master("local[2]").getOrCreate()
spark.range(0, 1_000_000, numPartitions=8).selectExpr("sum(id)").collect()
app = f"{log_dir}/{spark.sparkContext.applicationId}"
spark.stop()

start = cp.read_log_dir(app, channel="spark.task.start").to_pandas().set_index("tuple_id")
end = cp.read_log_dir(app, channel="spark.task.end").to_pandas().set_index("tuple_id")
hz = cp.log_metadata(cp.log_files(app)[0])["tsc.hz"]
with open(f"{app}/spark-tasks.arrows", "rb") as f:
    tasks = ipc.open_stream(f).read_all().to_pandas().set_index("task_attempt_id")
tasks["tsc_duration_us"] = (end.tsc.astype("int64") - start.tsc.astype("int64")) / hz * 1e6
print(tasks[["stage_id", "partition", "executor_id", "status", "tsc_duration_us"]])
