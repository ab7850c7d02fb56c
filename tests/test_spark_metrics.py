"""The plugin's figures reach Spark's metrics system and Prometheus. The executor plugin's counters: a CSV sink,
reporting while the application runs, shows every record the task and trace channels logged (a Python worker's,
handed to its executor, included) and the bytes they wrote. The driver's: its Cloudprofiler metrics page, parsed by
Prometheus' own client, has each stage's task durations as the task table has them and each executor's counters as
it last sent them, per channel too (records per second over each interval, as the tab's JSON polled while it ran
shows them); Spark's PrometheusServlet carries the driver's totals. The log folder is a file:// URI, written
with the Hadoop settings the application gives (spark.hadoop.*)."""
import csv
import json
import math
import sys
import subprocess

import pandas as pd
import pyarrow.ipc as ipc
import pytest
from prometheus_client.parser import text_string_to_metric_families

import cloudprofiler as cp

JOB = r"""
import glob, json, os, sys, threading, time, urllib.parse, urllib.request
import cloudprofiler.spark as cps

log_dir, metrics_dir = sys.argv[1:]
spark = (cps.builder(log_dir=log_dir).master("local[2]").config("spark.ui.port", "0")
         .config("spark.metrics.conf.*.sink.prometheusServlet.class", "org.apache.spark.metrics.sink.PrometheusServlet")
         .config("spark.metrics.conf.*.sink.prometheusServlet.path", "/metrics/prometheus")
         .config("spark.metrics.conf.*.sink.csv.class", "org.apache.spark.metrics.sink.CsvSink")
         .config("spark.metrics.conf.*.sink.csv.period", "1")
         .config("spark.metrics.conf.*.sink.csv.unit", "seconds")
         .config("spark.metrics.conf.*.sink.csv.directory", metrics_dir)
         .config("spark.cloudprofiler.collect.intervalSeconds", "1").getOrCreate())  # flushed every second
ui = f"http://127.0.0.1:{urllib.parse.urlparse(spark.sparkContext.uiWebUrl).port}"
polled, polling = [], threading.Event()


def poll():  # the tab's channels every 0.2 s, and when
    while not polling.wait(0.2):
        with urllib.request.urlopen(ui + "/cloudprofiler/json/", timeout=30) as reply:
            tab = json.loads(reply.read())
            polled.append([time.monotonic(), tab["channels"], tab["hops"]])


poller = threading.Thread(target=poll)
poller.start()
spark.sparkContext.parallelize(range(60), 6).count()
spark.sql("select sum(t) from (select cp_trace('metered', id) as t from range(0, 1000, 1, 2))").collect()
cps.trace(spark.range(0, 500, numPartitions=2), "metered.python", "id").count()
spark.sql("select sum(t) from (select cp_trace('hop.b', cp_trace('hop.a', id)) as t "
          "from range(10000000, 10000200, 1, 2))").collect()
print(spark.sparkContext.applicationId, flush=True)
time.sleep(3.5)  # a flush, then two reports of the sink; the executor has sent its counters
polling.set()
poller.join()
json.dump(polled, open(os.path.join(metrics_dir, "channels.json"), "w"))
for page, name in (("/cloudprofiler/metrics/prometheus", "cloudprofiler.prom"), ("/metrics/prometheus/", "spark.prom"),
                   ("/cloudprofiler/json/", "tab.json")):
    with urllib.request.urlopen(ui + page, timeout=30) as reply:
        assert name.endswith(".json") or reply.headers["Content-Type"].startswith("text/plain"), reply.headers
        open(os.path.join(metrics_dir, name), "wb").write(reply.read())
spark.stop()
"""


def _last_value(path) -> int:
    with open(path) as f:
        return int(float(list(csv.DictReader(f))[-1]["value"]))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The job's log folder, its metrics folder (the CSV sink's files, the two pages scraped) and application id."""
    tmp_path = tmp_path_factory.mktemp("metrics")
    log_dir, metrics_dir = tmp_path / "logs", tmp_path / "metrics"
    metrics_dir.mkdir()
    run = subprocess.run([sys.executable, "-c", JOB, log_dir.as_uri(), str(metrics_dir)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return log_dir, metrics_dir, run.stdout.split()[0]


def _task_attempts(log_dir, app) -> pd.DataFrame:
    with open(log_dir / app / "spark-tasks.arrows", "rb") as f:
        return ipc.open_file(f).read_all().to_pandas()


def test_records_logged_dropped_and_bytes_written_reach_the_metrics_sink(job):
    log_dir, metrics_dir, app = job
    # in local mode the executor's plugin starts before the application has an id: its names lack the prefix
    suffix = "plugin.io.cloudprofiler.spark.CloudProfilerPlugin.{}.csv"
    metric = {m: [p for p in metrics_dir.iterdir() if p.name.endswith(suffix.format(m))]
              for m in ("recordsLogged", "recordsDropped", "bytesWritten")}
    assert all(len(paths) == 1 for paths in metric.values()), sorted(p.name for p in metrics_dir.iterdir())
    attempts = len(_task_attempts(log_dir, app))
    assert attempts >= 6 + 2
    # logDir given as a file:// URI: the executor's logs were collected into it (on the local disk, with java.nio)
    assert cp.read_log_dir(log_dir / app, channel="spark.task.end").num_rows == attempts
    published = [p for p in (log_dir / app).rglob("*.arrows")]
    assert len(published) >= 3 and all(p.stat().st_mode & 0o777 == 0o600 for p in published), \
        {p.name: oct(p.stat().st_mode & 0o777) for p in published}  # this user's only: Hadoop's umask gave 0644
    assert cp.read_log_dir(log_dir / app, channel="metered.python").num_rows == 500
    # a start and an end for each task, and the trace points' records
    assert _last_value(metric["recordsLogged"][0]) == 2 * attempts + 1000 + 500 + 400
    assert _last_value(metric["recordsDropped"][0]) == 0
    # every record logged is 16 bytes (id, TSC) in the executor's files; what the sink last saw was written into
    # the files collected from the executor's folder, which may have grown after it (the footer at close)
    executor_files = [p for p in published if p.parent != log_dir / app]
    written = _last_value(metric["bytesWritten"][0])
    assert (2 * attempts + 1000 + 500 + 400) * 16 <= written <= sum(p.stat().st_size for p in executor_files), \
        (written, {p.name: p.stat().st_size for p in executor_files})


def test_the_driver_serves_each_stage_and_executor_to_prometheus_as_the_tables_have_them(job):
    log_dir, metrics_dir, app = job
    families = {f.name: f for f in text_string_to_metric_families((metrics_dir / "cloudprofiler.prom").read_text())}

    def value(family: str, name: str, **labels) -> float:
        [found] = [s.value for s in families[family].samples if s.name == name and labels.items() <= s.labels.items()]
        return found

    tasks = _task_attempts(log_dir, app).assign(s=lambda t: (t["finish_time_ms"] - t["launch_time_ms"]) / 1000)
    stages = tasks.groupby(["stage_id", "stage_attempt"])
    assert len(stages) >= 3
    duration = "cloudprofiler_stage_task_duration_seconds"
    for (stage, attempt), group in stages:
        ok = sorted(group[group["status"] == "SUCCESS"]["s"])
        at = {"stage_id": str(stage), "stage_attempt": str(attempt)}
        for q in (0.5, 0.9, 0.99):  # the inverted CDF, as the analysis's
            assert value(duration, duration, quantile=str(q), **at) == ok[math.ceil(q * len(ok)) - 1], (at, q)
        assert value(duration, duration + "_count", **at) == len(ok)
        assert value(duration[:-8] + "_max_seconds", duration[:-8] + "_max_seconds", **at) == ok[-1]
        # counted in whole milliseconds, as the plugin counts them (27 ms is not over 1.5 x 18 ms; 0.027 s is)
        ms = sorted(group[group["status"] == "SUCCESS"].eval("finish_time_ms - launch_time_ms"))
        median = ms[math.ceil(len(ms) / 2) - 1]
        assert value("cloudprofiler_stage_stragglers", "cloudprofiler_stage_stragglers", **at) == sum(
            d > 1.5 * median for d in ms)
    # the executor sent its counters after its last record: every record is counted, as in the files
    logged = value("cloudprofiler_executor_records_logged", "cloudprofiler_executor_records_logged_total",
                   executor_id="driver")
    assert logged == 2 * len(tasks) + 1000 + 500 + 400
    assert value("cloudprofiler_executor_records_dropped", "cloudprofiler_executor_records_dropped_total",
                 executor_id="driver") == 0
    # Spark's own PrometheusServlet: the driver's totals, under the plugin's source
    spark = {s.name: s.value for f in text_string_to_metric_families((metrics_dir / "spark.prom").read_text())
             for s in f.samples if "_CloudProfilerPlugin_" in s.name}
    total = {name.split("_CloudProfilerPlugin_")[1]: v for name, v in spark.items() if "_driver_" in name}
    assert total["executorsRecordsLogged_Value"] == logged, spark
    assert total["executorsRecordsDropped_Value"] == 0
    assert total["stragglers_Value"] == sum(
        s.value for s in families["cloudprofiler_stage_stragglers"].samples)


def test_each_channels_records_per_second_and_totals_are_what_its_files_hold(job):
    """The tab's channel rows, polled while the application ran: between two polls under a second apart (the
    executor's messages are a second apart at least: one arrived between them), records per second x the interval's
    length is what the channel's total grew by (0 before its first record); its last total is the records its files
    hold. The Prometheus page, scraped after the application went idle, has the totals and a rate of 0."""
    log_dir, metrics_dir, app = job
    polled = json.loads((metrics_dir / "channels.json").read_text())
    assert all(row["executor_id"] == "driver" for _, rows, _ in polled for row in rows)  # local mode's one executor
    in_files = {"metered": 1000, "metered.python": 500, "spark.task.end": len(_task_attempts(log_dir, app))}
    for channel, records in in_files.items():
        assert cp.read_log_dir(log_dir / app, channel=channel).num_rows == records
        checked = 0
        for (t0, before, _), (t1, after, _) in zip(polled, polled[1:]):
            now = {r["channel"]: r for r in after}
            if t1 - t0 > 0.5 or channel not in now or {r["interval"] for r in before} == {now[channel]["interval"]}:
                continue
            grew = now[channel]["records_logged"] - {r["channel"]: r["records_logged"] for r in before}.get(channel, 0)
            assert now[channel]["records_per_second"] * now[channel]["interval_s"] == pytest.approx(grew), \
                (channel, before, now[channel])
            checked += grew > 0
        assert checked >= 1, (channel, polled)
        [last] = [r for r in polled[-1][1] if r["channel"] == channel]
        assert (last["records_logged"], last["records_dropped"], last["records_per_second"]) == (records, 0, 0)
    families = {f.name: f for f in text_string_to_metric_families((metrics_dir / "cloudprofiler.prom").read_text())}
    for channel, records in in_files.items():
        at = {"executor_id": "driver", "channel": channel}
        [logged] = [s.value for s in families["cloudprofiler_channel_records_logged"].samples if s.labels == at]
        [rate] = [s.value for s in families["cloudprofiler_channel_records_per_second"].samples if s.labels == at]
        assert (logged, rate) == (records, 0), channel
    assert families["cloudprofiler_channels_left_out"].samples[0].value == 0


def test_the_tab_and_prometheus_give_each_hop_s_latency_as_the_analysis_of_the_files(job):
    """The hops between trace points on the tab, from the records the executor sampled: hop.a -> hop.b (200 ids a
    channel, all sampled) has the count, median, p99 and max of the analysis's pipeline over every record of the
    files (the same log buckets: within one bucket), within one TSC domain (bound 0); metered -> metered.python
    (1,000 and 500 records, which share ids 0-499) is sampled at the level the tab states: it pairs the ids whose
    level reaches it. The Prometheus page has the same figures."""
    from cloudprofiler.analysis import local_session, open_application
    from cloudprofiler.analysis.sketch import RELATIVE_ACCURACY

    log_dir, metrics_dir, app = job
    tab = json.loads((metrics_dir / "tab.json").read_text())
    hops = {(h["from_channel"], h["to_channel"]): h for h in tab["hops"]}
    assert set(hops) == {("hop.a", "hop.b"), ("metered", "metered.python")}, tab["hops"]
    assert tab["hop_samples"]["evicted"] == tab["hop_samples"]["left_out"] == 0
    hop = hops[("hop.a", "hop.b")]
    analysis = open_application(log_dir / app)
    try:
        [row] = [r.asDict() for r in analysis.pipeline(["hop.a", "hop.b"]).where("hop = 0").collect()]
    finally:
        local_session().stop()
    assert (hop["count"], hop["sampled_one_in"], hop["remote_count"], hop["bound_max_s"]) == (200, 1, 0, 0)
    assert hop["max_s"] * 1e9 == pytest.approx(row["max_ns"], rel=1e-9)
    assert hop["min_s"] * 1e9 == pytest.approx(row["min_ns"], rel=1e-9)
    for q in ("p50", "p99"):
        assert hop[f"{q}_s"] * 1e9 == pytest.approx(row[f"{q}_ns"], rel=2 * RELATIVE_ACCURACY), q
    metered = hops[("metered", "metered.python")]
    level = int(math.log2(metered["sampled_one_in"]))
    assert level >= 1  # 1,000 records in an interval: over the 256 a channel keeps
    assert metered["count"] >= sum(cp.sample_level(i) >= level for i in range(500)) > 0
    assert metered["count"] <= sum(cp.sample_level(i) >= level - 1 for i in range(500))
    assert metered["p50_s"] > 0.01  # a job later
    families = {f.name: f for f in text_string_to_metric_families((metrics_dir / "cloudprofiler.prom").read_text())}
    at = {"from_channel": "hop.a", "to_channel": "hop.b"}
    # while it ran, a poll saw the hop's records in the last interval: its quantiles are those since the start once
    # every pair is in one interval
    polled = json.loads((metrics_dir / "channels.json").read_text())
    windows = [h for _, _, hops_then in polled for h in hops_then if h["from_channel"] == "hop.a"]
    assert any(h["last_count"] > 0 for h in windows), windows
    for h in windows:
        assert h["last_count"] <= h["count"] <= 200
        if h["last_count"] == 200:
            assert (h["last_p50_s"], h["last_p99_s"], h["last_max_s"]) == (hop["p50_s"], hop["p99_s"], hop["max_s"])
    # quantiles and max over the last collection interval (a second, none in it by then: NaN), count and sum since
    # the start
    summary = {s.labels.get("quantile", s.name): s.value for s in families["cloudprofiler_hop_latency_seconds"].samples
               if {k: v for k, v in s.labels.items() if k != "quantile"} == at}
    assert hop["last_count"] == 0 and hop["window_s"] == 1
    assert all(math.isnan(summary[q]) for q in ("0.5", "0.9", "0.99")), summary
    assert summary["cloudprofiler_hop_latency_seconds_count"] == 200
    assert summary["cloudprofiler_hop_latency_seconds_sum"] == pytest.approx(hop["mean_s"] * 200, rel=1e-12)
    assert [s.value for s in families["cloudprofiler_hop_latency_max_seconds"].samples if s.labels == at] == []
    [bound] = [s.value for s in families["cloudprofiler_hop_bound_max_seconds"].samples if s.labels == at]
    assert bound == 0
