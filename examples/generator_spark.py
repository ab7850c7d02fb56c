"""The generator feeding the YSB pipeline on Spark, with trace points: rate, exactly-once counts and the
latency of each operator out of one run.

    .venv/bin/python examples/generator_spark.py [rate tuples/s] [seconds] [log folder]
"""
import sys
import tempfile

import numpy as np

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
from cloudprofiler.harness.maxtput import free_port_base
from cloudprofiler.harness.pipelines import ysb

rate = float(sys.argv[1]) if len(sys.argv) > 1 else 100_000
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10
log_dir = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="cloudprofiler-generator-spark-")

spark = (cps.builder(log_dir=log_dir).master("local[2]").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
generator = Generator(GeneratorConfig(rate=rate, duration_s=seconds, emitters=2, transport="serve", timeout_s=60,
                                      port=free_port_base(2))).start()
events = cps.read_generator(spark, generator.endpoints, traceChannel="ysb.source")
query = ysb(events, trace=True).writeStream.format("memory").queryName("ysb").outputMode("update").start()
results = generator.join()  # the emitters end once Spark has committed every tuple they emitted
query.stop()

for r in results:
    latency_ms = np.array([lat for _, lat, _ in r.latency_samples] or [np.nan]) / 1e6
    print(f"emitter {r.emitter}: emitted {r.emitted_tuples:,}, committed {r.committed_tuples:,}, dropped "
          f"{r.dropped_tuples:,}, {r.achieved_tps:,.0f} tuples/s, commit latency p50 "
          f"{np.percentile(latency_ms, 50):,.0f} ms, p99 {np.percentile(latency_ms, 99):,.0f} ms")
spark.sql("select campaign_id, sum(events) as events from ysb group by campaign_id order by events desc limit 3").show()
spark.stop()

hz = cp.tsc_frequency().hz
source = cp.read_log_dir(log_dir, channel="ysb.source").to_pandas().drop_duplicates("tuple_id")
for channel in ("ysb.filter", "ysb.join"):
    later = cp.read_log_dir(log_dir, channel=channel).to_pandas().drop_duplicates("tuple_id")
    pairs = later.merge(source, on="tuple_id", suffixes=("", "_source"))
    us = (pairs["tsc"].astype("int64") - pairs["tsc_source"].astype("int64")) / hz * 1e6
    print(f"source -> {channel}: {len(pairs):,} tuples, p50 {np.percentile(us, 50):,.0f} us, "
          f"p99 {np.percentile(us, 99):,.0f} us")
