"""Trace points from Python workers: cloudprofiler.spark.trace in a DataFrame, and a Channel inside a UDF.

    .venv/bin/python examples/python_trace.py [log folder] [rows]

Python workers log into their executor's buffers (or, where the executor has no inbox, into its folder), which the
executor collects with its own logs into <log folder>/<application id>/<host>-<executor id>/.
"""
import sys
import tempfile

import numpy as np
import pandas as pd

import cloudprofiler as cp
import cloudprofiler.spark as cps

log_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="cloudprofiler-python-trace-")
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
spark = cps.builder(log_dir=log_dir).master("local[2]").config("spark.ui.showConsoleProgress", "false").getOrCreate()
df = cps.trace(spark.range(0, rows, numPartitions=4), "python-source", "id")


def square(batches):
    with cps.worker_channel("inside-udf") as ch:  # into the executor's buffers, whose files it collects
        for batch in batches:
            ch.log_many(batch["id"].to_numpy())
            yield pd.DataFrame({"id": batch["id"], "sq": np.square(batch["id"])})


print(df.mapInPandas(square, "id long, sq long").count())
app = spark.sparkContext.applicationId
spark.stop()
for channel in ("python-source", "inside-udf"):
    print(channel, cp.read_log_dir(f"{log_dir}/{app}", channel=channel).num_rows, "records")
