"""Trace points from Python workers: cloudprofiler.spark.trace in a DataFrame, and a Channel inside a UDF."""
import numpy as np
import pandas as pd

import cloudprofiler as cp
import cloudprofiler.spark as cps

log_dir = "/tmp/cloudprofiler-python-trace"
spark = cps.builder(log_dir=log_dir).master("local[2]").getOrCreate()
df = cps.trace(spark.range(0, 1_000_000, numPartitions=4), "python-source", "id")


def square(batches):
    with cp.Channel("inside-udf", "buffered") as ch:  # any channel API works inside UDFs
        for batch in batches:
            ch.log_many(batch["id"].to_numpy())
            yield pd.DataFrame({"id": batch["id"], "sq": np.square(batch["id"])})


print(df.mapInPandas(square, "id long, sq long").count())
spark.stop()
for channel in ("python-source", "inside-udf"):
    print(channel, cp.read_log_dir(log_dir, channel=channel, recursive=False).num_rows, "records")
