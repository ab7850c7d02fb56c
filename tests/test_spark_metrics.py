"""The executor plugin's counters reach Spark's metrics system: a CSV sink, reporting while the application runs,
shows every record the task and trace channels logged (a Python worker's, handed to its executor, included) and the
bytes they wrote. The log folder is a file:// URI, written with the Hadoop settings the application gives
(spark.hadoop.*)."""
import csv
import sys
import subprocess

import pyarrow.ipc as ipc

import cloudprofiler as cp

JOB = r"""
import glob, os, sys, time
import cloudprofiler.spark as cps

log_dir, metrics_dir = sys.argv[1:]
spark = (cps.builder(log_dir=log_dir).master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.metrics.conf.*.sink.csv.class", "org.apache.spark.metrics.sink.CsvSink")
         .config("spark.metrics.conf.*.sink.csv.period", "1")
         .config("spark.metrics.conf.*.sink.csv.unit", "seconds")
         .config("spark.metrics.conf.*.sink.csv.directory", metrics_dir)
         .config("spark.hadoop.fs.permissions.umask-mode", "077")  # Hadoop's own setting: files only for the owner
         # no cached file system, which Spark made first with its settings: the plugin's own must carry the umask,
         # as they must for a store (s3a://, hdfs://) that the plugin is the first to write in this JVM
         .config("spark.hadoop.fs.file.impl.disable.cache", "true")
         .config("spark.cloudprofiler.collect.intervalSeconds", "1").getOrCreate())  # flushed every second
spark.sparkContext.parallelize(range(60), 6).count()
spark.sql("select sum(t) from (select cp_trace('metered', id) as t from range(0, 1000, 1, 2))").collect()
cps.trace(spark.range(0, 500, numPartitions=2), "metered.python", "id").count()
print(spark.sparkContext.applicationId, flush=True)
time.sleep(3.5)  # a flush, then two reports of the sink
spark.stop()
"""


def _last_value(path) -> int:
    with open(path) as f:
        return int(float(list(csv.DictReader(f))[-1]["value"]))


def test_records_logged_dropped_and_bytes_written_reach_the_metrics_sink(tmp_path):
    log_dir, metrics_dir = tmp_path / "logs", tmp_path / "metrics"
    metrics_dir.mkdir()
    run = subprocess.run([sys.executable, "-c", JOB, log_dir.as_uri(), str(metrics_dir)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    app = run.stdout.split()[0]
    # in local mode the executor's plugin starts before the application has an id: its names lack the prefix
    suffix = "plugin.io.cloudprofiler.spark.CloudProfilerPlugin.{}.csv"
    metric = {m: [p for p in metrics_dir.iterdir() if p.name.endswith(suffix.format(m))]
              for m in ("recordsLogged", "recordsDropped", "bytesWritten")}
    assert all(len(paths) == 1 for paths in metric.values()), sorted(p.name for p in metrics_dir.iterdir())
    with open(log_dir / app / "spark-tasks.arrows", "rb") as f:
        attempts = ipc.open_file(f).read_all().num_rows
    assert attempts >= 6 + 2
    # logDir given as a file:// URI: the executor's logs were collected into it through Hadoop's file system
    assert cp.read_log_dir(log_dir / app, channel="spark.task.end").num_rows == attempts
    published = [p for p in (log_dir / app).rglob("*.arrows")]
    assert len(published) >= 3 and all(p.stat().st_mode & 0o777 == 0o600 for p in published), \
        {p.name: oct(p.stat().st_mode & 0o777) for p in published}  # Hadoop's default umask would give 0644
    assert cp.read_log_dir(log_dir / app, channel="metered.python").num_rows == 500
    # a start and an end for each task, and the trace points' records
    assert _last_value(metric["recordsLogged"][0]) == 2 * attempts + 1000 + 500
    assert _last_value(metric["recordsDropped"][0]) == 0
    # every record logged is 16 bytes (id, TSC) in the executor's files; what the sink last saw was written into
    # the files collected from the executor's folder, which may have grown after it (the footer at close)
    executor_files = [p for p in published if p.parent != log_dir / app]
    written = _last_value(metric["bytesWritten"][0])
    assert (2 * attempts + 1000 + 500) * 16 <= written <= sum(p.stat().st_size for p in executor_files), \
        (written, {p.name: p.stat().st_size for p in executor_files})
