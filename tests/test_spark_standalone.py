"""The plugin on a real standalone cluster: a master and two workers, each its own JVM, started here (once for the
suite: conftest's `standalone`)."""
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pytest
from prometheus_client.parser import text_string_to_metric_families

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.calibration.spark import calibrations_from_probes, load_domains, records_in_reference
from cloudprofiler.harness.standalone import small_executors, wait_for_collection, wait_for_executors
from cloudprofiler import tables
from conftest import assert_collected_as_it_died, assert_tables_as_declared

OFFSET, SKEW_PPM = 4 * 3600 * 2_000_000_000, 29.0


def test_executors_in_other_jvms_log_every_task_and_their_logs_arrive(standalone, tmp_path):
    master, base = standalone
    log_dir = tmp_path / "logs"
    spark = (
        small_executors(cps.builder(log_dir=str(log_dir), local_dir=str(base / "executor-local")).master(master), 2)
        .config("spark.ui.enabled", "false")
        # executors as a TSC domain of their own (4 h ahead, 29 ppm fast); no timed rounds within the test, so
        # the anchors come from the round when the domain appears and the rounds after each job
        .config("spark.executorEnv.CLOUDPROFILER_SIMULATE_TSC", f"offset={OFFSET},skew_ppm={SKEW_PPM}")
        .config("spark.cloudprofiler.calibration.interval", "3600")
        .config("spark.cloudprofiler.collect.intervalSeconds", "600")  # collected on request only, then at the end
        .getOrCreate()
    )
    try:
        wait_for_executors(spark, 2)  # so that both get tasks
        spark.sparkContext.parallelize(range(100), 8).count()  # the executors join the calibration
        first_job_tasks = 8
        total = spark.sparkContext.parallelize(range(100_000), 8).map(lambda x: (x % 10, x)).reduceByKey(
            lambda a, b: a + b).count()
        traced = cps.trace(spark.range(0, 20_000, numPartitions=4), "py-standalone", "id").count()
        app_id = spark.sparkContext.applicationId
        # while it runs: both executors collect every record logged until now, and the driver publishes its tables
        assert cps.collect_now(spark) == (2, 2)
        running = log_dir / app_id
        assert cp.read_log_dir(running, channel="py-standalone").num_rows == 20_000
        with open(running / "spark-tasks.arrows", "rb") as f:
            published = sorted(ipc.open_file(f).read_all().column("task_attempt_id").to_pylist())
        ended = cp.read_log_dir(running, channel="spark.task.end").column("tuple_id").to_pylist()
        assert sorted(ended) == published and len(published) >= 28
    finally:
        spark.stop()  # at once: the round after the last job is all that anchors its records
    assert total == 10
    app = log_dir / app_id
    wait_for_collection(base / "executor-local", app_id)
    executors = {cp.log_metadata(p)["spark.executor_id"] for p in app.rglob("spark.task.end.*.arrows")}
    assert executors == {"0", "1"}
    # the driver's tables, calibration's with executors in a TSC domain of their own, as the plugin declares them
    assert_tables_as_declared(app, {"tasks", "calibration", "tsc_domains", "rules_changes"})

    with open(app / "spark-tasks.arrows", "rb") as f:
        attempts = set(ipc.open_file(f).read_all().column("task_attempt_id").to_pylist())
    start = cp.read_log_dir(app, channel="spark.task.start").column("tuple_id").to_pylist()
    end = cp.read_log_dir(app, channel="spark.task.end").column("tuple_id").to_pylist()
    assert sorted(start) == sorted(end) == sorted(attempts)
    pids = {cp.log_metadata(p)["pid"] for p in app.rglob("spark.task.*.arrows")}
    assert os.getpid() not in pids and len(pids) == 2  # written by the two executor JVMs
    # the executors' Python workers handed their records to their executor, which wrote them into its folder, and
    # it was collected with the executor's logs
    assert traced == 20_000
    python = cp.read_log_dir(app, channel="py-standalone")
    assert np.array_equal(np.sort(python.column("tuple_id").to_numpy()), np.arange(20_000))
    executor_folders = {p.parent for p in app.rglob("spark.task.start.*.arrows")}
    python_files = {Path(f) for f in python.column("file").to_pylist()}
    assert {f.parent for f in python_files} <= executor_folders
    python_metas = [cp.log_metadata(f) for f in python_files]
    assert {m["pid"] for m in python_metas} <= pids  # written by the executors, logged by other processes
    assert not pids & {int(m["handoff.pid"]) for m in python_metas}
    # every executor record, translated into the driver's TSC domain, holds the truth inside its bound
    records = records_in_reference(app, "spark.task.start")
    truth = (records.column("tsc").to_numpy().astype(np.float64) - OFFSET) / (1 + SKEW_PPM * 1e-6)
    est, err = records.column("tsc_ref").to_numpy(), records.column("tsc_err").to_numpy()
    assert np.all(np.abs(est - truth) <= err + 1)
    assert np.median(err) < cp.tsc_frequency().hz * 1e-3  # under a millisecond on loopback
    # every record after the first job lies between two anchors, the last job's too
    later = records.filter(pc.greater_equal(records.column("tuple_id"), first_job_tasks))
    assert later.num_rows >= 8 and not any(later.column("extrapolated").to_pylist())
    # whole runs (every probe) from the driver: one after the first job (before the second ends), and one per
    # executor after the last task ended, while the executors were up
    with open(app / "calibration.arrows", "rb") as f:
        probes = ipc.open_file(f).read_all()
    ends = records_in_reference(app, "spark.task.end")
    first_job_end = pc.max(ends.filter(pc.less(ends.column("tuple_id"), first_job_tasks)).column("tsc_ref")).as_py()
    last_end = pc.max(ends.column("tsc_ref")).as_py()

    def whole_runs_between(low: float, high: float) -> int:
        sent = probes.column("send_tsc")
        runs = probes.filter(pc.and_(pc.equal(probes.column("direction"), "a->b"),
                                     pc.and_(pc.greater(sent, low), pc.less(sent, high))))
        return sum(r["counts"] == 100 for r in pc.value_counts(runs.column("round")).to_pylist())

    assert whole_runs_between(first_job_end, last_end) >= 1  # the round after the first job
    assert whole_runs_between(last_end, float("inf")) >= 2  # each executor's last run
    # both executors claim the driver's boot id; the TSC check puts them, with one simulated TSC, in one domain
    executors = [d for d in load_domains(app).to_pylist() if d["role"] != "reference"]
    assert len(executors) == 2 and len({d["domain"] for d in executors}) == 1
    assert {d["role"] for d in executors} == {"representative", "member"}
    # one founded the domain, the other joined it; which one represents it at the end depends on who answered
    # the last round (a representative that stops answering during shutdown hands over to the next member)
    checks = sorted(d["check"] for d in executors)
    domain = executors[0]["domain"]
    assert all("differs from" in c for c in checks)
    assert checks[0].endswith("founds a domain") ^ checks[1].endswith("founds a domain")
    assert sum(f"agrees with {domain}" in c for c in checks) == 1


def test_executors_load_a_library_shipped_with_files_when_the_jar_has_none(standalone, jar_without_library, tmp_path):
    master, base = standalone
    jar, library = jar_without_library
    log_dir = tmp_path / "logs"
    spark = (
        cps.builder(log_dir=str(log_dir), local_dir=str(base / "executor-local-files"), calibration_enabled=False)
        .master(master)
        .config("spark.jars", str(jar))
        .config("spark.files", str(library))
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    try:
        assert spark.sparkContext.parallelize(range(1000), 4).sum() == 499500
        app_id = spark.sparkContext.applicationId
    finally:
        spark.stop()
    wait_for_collection(base / "executor-local-files", app_id)
    assert cp.read_log_dir(log_dir / app_id, channel="spark.task.end").num_rows == 4
    # each executor names where its library came from: its own copy of the --files library
    stderr = "".join(p.read_text(errors="replace") for p in base.rglob(f"{app_id}/*/stderr"))
    sources = re.findall(r"executor \d+ loaded libcloudprofiler_jni from SparkFiles (\S+)", stderr)
    assert len(sources) == 2 and all(s.endswith("/libcloudprofiler_jni.so") for s in sources), stderr[-3000:]
    assert "disabled on executor" not in stderr


# The start of a driver script: two executors in a simulated TSC domain, both calibrated against the driver.
TWO_CALIBRATED_EXECUTORS = r"""
import os, signal, sys, time
import pyarrow.ipc as ipc
import cloudprofiler.spark as cps
from cloudprofiler.harness.standalone import small_executors, wait_for_executors

master, log_dir, local_dir, simulation = sys.argv[1:5]
builder = cps.builder(log_dir=log_dir, local_dir=local_dir, collect_interval_seconds=1).master(master)
spark = (small_executors(builder, 2)
         .config("spark.ui.enabled", str("ui" in sys.argv[5:]).lower()).config("spark.ui.port", "0")
         .config("spark.executorEnv.CLOUDPROFILER_SIMULATE_TSC", simulation).getOrCreate())
sc = spark.sparkContext
status = lambda: sc._jsc.sc().getExecutorMemoryStatus().size()
deadline = time.monotonic() + 120
wait_for_executors(spark, 2)
domains = os.path.join(log_dir, sc.applicationId, "tsc-domains.arrows")
while time.monotonic() < deadline:  # until both executors have joined the calibration
    sc.parallelize(range(16), 16).map(lambda x: time.sleep(0.05) or x).count()
    if os.path.exists(domains) and ipc.open_file(open(domains, "rb")).read_all().num_rows == 3:
        break
"""

LOSES_AN_EXECUTOR = TWO_CALIBRATED_EXECUTORS + r"""
rows = ipc.open_file(open(domains, "rb")).read_all().to_pylist()
victim = next(r for r in rows if r["role"] != "reference")
os.kill(victim["pid"], signal.SIGKILL)
while status() > 2 and time.monotonic() < deadline:  # Spark notices the executor is gone
    time.sleep(0.2)
sc.parallelize(range(4), 4).count()  # the round after this job finds the lost executor gone
representative = lambda: next(r["executor_id"] for r in ipc.open_file(open(domains, "rb")).read_all().to_pylist()
                              if r["role"] == "representative")
while representative() == victim["executor_id"] and time.monotonic() < deadline:
    time.sleep(0.2)
print("killed", victim["executor_id"], "representative", representative(), flush=True)
spark.stop()
"""


def test_a_lost_executor_hands_its_domain_on_and_is_not_waited_for_at_stop(standalone, tmp_path):
    master, base = standalone
    log_dir = tmp_path / "logs"
    run = subprocess.run(
        [sys.executable, "-c", LOSES_AN_EXECUTOR, master, str(log_dir), str(base / "executor-local-lost"),
         f"offset={OFFSET},skew_ppm={SKEW_PPM}"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    killed = run.stdout.split()[1]
    assert killed.isdigit()
    assert "no last calibration run from executors" not in run.stderr  # the lost one was not waited for
    assert "the last calibration run of executor" not in run.stderr  # the others' runs worked
    assert run.stdout.split()[3] != killed  # the round after the next job handed the domain on


TRACED_ON_THE_CLUSTER = TWO_CALIBRATED_EXECUTORS + r"""
import json, urllib.parse, urllib.request
rows = sys.argv[6]
spark.conf.set("spark.sql.shuffle.partitions", "2")
# ids the driver itself traces: the optimizer evaluates a projection of VALUES as it plans, in the driver's JVM
values = ", ".join(f"({i})" for i in range(0, int(rows), 8))
spark.sql(f"select sum(t) from (select cp_trace('d', id) as t from values {values} as v(id))").collect()
spark.sql(f"select sum(x) from (select cp_trace('b', x) as x from (select cp_trace('a', id) as x "
          f"from range(0, {rows}, 1, 4)) distribute by x % 2)").collect()
app = os.path.join(log_dir, sc.applicationId)
ui = f"http://127.0.0.1:{urllib.parse.urlparse(sc.uiWebUrl).port}/cloudprofiler"
get = lambda page: urllib.request.urlopen(ui + page, timeout=30).read().decode()
hops = lambda: {(h["from_channel"], h["to_channel"]) for h in json.loads(get("/json/"))["hops"]}
while not {("d", "a"), ("a", "b")} <= hops() and time.monotonic() < deadline + 60:  # the next intervals' samples
    time.sleep(0.5)
for _ in range(10):  # the tab's JSON and metrics of one moment: no round ended between them
    before, metrics, tab = get("/json/"), get("/metrics/prometheus"), get("/json/")
    if json.loads(before)["calibration"] == json.loads(tab)["calibration"]:
        break
print("tab", json.dumps(json.loads(tab)))
print("metrics", json.dumps(metrics))
spark.stop()
deadline = time.monotonic() + 60  # executors copy their logs as their workers stop them
while sum(f.startswith("b.") for _, _, fs in os.walk(app) for f in fs) < 2 and time.monotonic() < deadline:
    time.sleep(0.5)
print("app", app)
"""


def _assert_the_tab_has_the_calibration_of_the_analysis(tab, metrics, app):
    """The live tab's pair of TSC domains (the driver's and the executors'): its latest round's MinRTT each way as
    the analysis has that round's, its bound as the analysis's anchor of that round from the rounds up to it (the
    analysis of the whole application also has the rounds after it, which narrow the rate), and the same figures on
    the Prometheus page."""
    [pair] = tab["calibration"]
    assert pair["rounds"] >= 2 and pair["failures"] == 0
    calibration = app.calibration().toPandas()
    rows = calibration[(calibration["domain_a"] == pair["domain_a"]) & (calibration["domain_b"] == pair["domain_b"])
                       & (calibration["round"] == pair["round"])].set_index("direction")
    # in each prober's TSC frequency: the executors' as their domain's representative measured it, the analysis's
    # as the files of its domain say (within 1 ppm of each other)
    assert rows.loc["a->b", "min_rtt_ns"] == pytest.approx(pair["min_rtt_a_b_s"] * 1e9, rel=1e-9)
    assert rows.loc["b->a", "min_rtt_ns"] == pytest.approx(pair["min_rtt_b_a_s"] * 1e9, rel=1e-6)
    probes = app.probes
    up_to = probes.filter(pc.less_equal(probes.column("round"), pair["round"]))
    _, calibrations = calibrations_from_probes(up_to)
    bound_ns = calibrations[(pair["domain_a"], pair["domain_b"])].err[-1] / app.timebase.hz_of(pair["domain_a"]) * 1e9
    print("bound: tab", pair["bound_s"] * 1e9, "ns, analysis up to its round", bound_ns, "ns, of all rounds",
          rows.loc["a->b", "bound_ns"])
    assert pair["bound_s"] * 1e9 == pytest.approx(bound_ns, rel=1e-9)
    assert pair["best_bound_s"] <= pair["bound_s"]
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    for name, field in (("bound", "bound_s"), ("best_bound", "best_bound_s"), ("min_rtt_a_to_b", "min_rtt_a_b_s"),
                        ("rounds", "rounds")):
        [sample] = families[f"cloudprofiler_calibration_{name}" + ("" if name == "rounds" else "_seconds")].samples
        assert sample.labels == {k: pair[k] for k in ("domain_a", "domain_b", "host_a", "host_b")}
        assert sample.value == pytest.approx(pair[field], rel=1e-12), name


def _numbers(app) -> dict:
    tasks = app.tasks().select("task_attempt_id", "duration_ns", "err_ns", "path").orderBy("task_attempt_id")
    hop = app.pipeline(["a", "b"]).where("hop = 0").first()
    return {"tasks": [tuple(r) for r in tasks.collect()], "hop": (hop["count"], hop["p50_ns"], hop["p99_ns"],
                                                                    hop["err_max_ns"]),
            "calibration": [tuple(r) for r in app.calibration().collect()], "summary": app.summary()}


def test_the_analysis_finds_the_truth_in_its_bounds_and_the_same_numbers_on_the_cluster_as_locally(standalone,
                                                                                                  tmp_path):
    """Executors in a simulated TSC domain, calibrated against the driver: every translated value holds its truth
    inside its bound; the analysis run on the standalone cluster gives the numbers it gives in local mode."""
    from pyspark.sql import SparkSession

    from cloudprofiler.analysis import local_session, open_application

    master, base = standalone
    rows = 4000  # below percentile_approx's accuracy: exact quantiles, whatever the partitioning
    run = subprocess.run(
        [sys.executable, "-c", TRACED_ON_THE_CLUSTER, master, str(tmp_path / "logs"), str(base / "executor-local-an"),
         f"offset={OFFSET},skew_ppm={SKEW_PPM}", "ui", str(rows)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    folder = run.stdout.split("app ")[1].split()[0]
    printed = dict(line.split(" ", 1) for line in run.stdout.splitlines() if line.startswith(("tab ", "metrics ")))

    local = open_application(folder)
    tb = local.timebase
    summary = local.summary()
    assert summary["calibrated"] and len(summary["domains"]) == 2 and summary["executors"] == 2
    records = local.records("a").toPandas()
    assert len(records) == rows and set(records["executor_id"]) == {"0", "1"}  # cp_trace files placed by process
    physical = (records["tsc"].to_numpy().astype(np.float64) - OFFSET) / (1 + SKEW_PPM * 1e-6)
    truth = (physical - tb.start_tick) / tb.hz * 1e9
    assert not records["unbounded"].any() and np.all(np.abs(records["t_ns"] - truth) <= records["err_ns"] + 1)
    tasks = local.tasks().where("executor_id != 'driver'").toPandas()
    assert set(tasks["path"]) == {"scenario1"} and np.isfinite(tasks["err_ns"]).all()
    calibration = local.calibration().toPandas()
    assert len(calibration) > 0 and (calibration["bound_ns"].dropna() < 1e6).all()
    assert (calibration["min_rtt_ns"] > 0).all()
    _assert_the_tab_has_the_calibration_of_the_analysis(json.loads(printed["tab"]), json.loads(printed["metrics"]),
                                                        local)
    # the driver's own trace point: its records in the application's folder, in the reference domain (exact), and
    # on the tab its hop to the executors' first point, across the machines' clocks within its bound
    traced = local.records("d").toPandas()
    assert sorted(traced["tuple_id"]) == list(range(0, rows, 8)) and set(traced["executor_id"]) == {"driver"}
    assert (traced["err_ns"] == 0).all() and not traced["unbounded"].any()
    assert {p.parent.name.endswith("-driver") for p in Path(folder).rglob("d.*.arrows")} == {True}
    [hop] = [h for h in json.loads(printed["tab"])["hops"] if (h["from_channel"], h["to_channel"]) == ("d", "a")]
    assert hop["count"] > 0 and hop["remote_count"] == hop["count"] and hop["unbounded_count"] == 0
    assert hop["min_s"] > -hop["bound_max_s"] and hop["bound_max_s"] < 1e-3
    in_local_mode = _numbers(local)
    local_session().stop()

    spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
             .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    try:
        on_the_cluster = _numbers(open_application(folder, spark))
    finally:
        spark.stop()
    assert on_the_cluster == in_local_mode


def test_a_streaming_query_s_records_are_timed_from_their_emission_across_the_two_clocks(standalone, tmp_path):
    """The generator's emitters run here, beside the driver, and stamp their buckets with this machine's TSC; the
    executors read a simulated TSC of their own (4 h ahead, 29 ppm fast). What the emitters say of their clock places
    the emission on the driver's, so a sampled record's latency from its emission to each operator crosses the two
    clocks: the analysis gives it with the calibration's bound, and the bound holds the truth (the simulation
    undone); from its delivery (on the executors' own clock) it needs no calibration."""
    from cloudprofiler.analysis import open_application
    from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
    from cloudprofiler.harness.maxtput import free_port_base
    from cloudprofiler.harness.trial import stop_query

    master, base = standalone
    log_dir, local_dir = tmp_path / "logs", base / "executor-local-stream"
    spark = (small_executors(cps.builder(log_dir=str(log_dir), local_dir=str(local_dir)).master(master), 2)
             .config("spark.ui.enabled", "false")
             .config("spark.executorEnv.CLOUDPROFILER_SIMULATE_TSC", f"offset={OFFSET},skew_ppm={SKEW_PPM}")
             .getOrCreate())
    try:
        wait_for_executors(spark, 2)
        spark.conf.set("spark.cloudprofiler.operators", "true")
        generator = Generator(GeneratorConfig(rate=10_000, duration_s=3, emitters=2, transport="serve",
                                              port=free_port_base(2), timeout_s=60)).start()
        query = (cps.read_generator(spark, generator.endpoints, timeout=30).where("id % 3 != 0").select("id")
                 .writeStream.format("noop").trigger(processingTime="1 second")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        results = generator.join(120)
        stop_query(spark, query)
        app_id = spark.sparkContext.applicationId
    finally:
        spark.stop()
    assert [r.error for r in results] == [None, None]
    wait_for_collection(local_dir, app_id)
    app = open_application(str(log_dir / app_id))
    latency = app.source_latency().toPandas()
    emitted, delivered = (latency[latency["source"] == source] for source in ("emitted", "delivered"))
    assert len(emitted) == len(delivered) > 0 and (emitted["rows"].to_numpy() == delivered["rows"].to_numpy()).all()
    # from delivery both ends are on the executors' clock: bounded by its frequency's uncertainty alone; from
    # emission across the two clocks, by the calibration
    assert (delivered["err_max_ns"] < 1e3).all() and (emitted["err_max_ns"] < 1e6).all()
    assert (emitted["err_max_ns"].to_numpy() > delivered["err_max_ns"].to_numpy()).all()
    # the truth: each record's emission (this machine's TSC) to its record at the operator (the simulation undone)
    hz = app.timebase.hz
    emission = app.records(tables.channel("source_rows").prefix + "emitted").toPandas().set_index("tuple_id")["tsc"]
    for row in emitted[emitted["operator"] != "sink"].itertuples():
        at = app.records(tables.channel("operator_rows").prefix + str(int(row.probe_id))).toPandas()
        physical = (at["tsc"].to_numpy().astype(np.float64) - OFFSET) / (1 + SKEW_PPM * 1e-6)
        truth = (physical - emission.loc[at["tuple_id"]].to_numpy()) / hz * 1e9
        assert len(truth) == row.rows, row
        assert abs(row.min_ns - truth.min()) <= row.err_max_ns + 1e3 and \
            abs(row.max_ns - truth.max()) <= row.err_max_ns + 1e3, (row, truth.min(), truth.max())


KILLS_AN_EXECUTOR_MID_JOB = r"""
import os, shutil, signal, sys, threading, time, warnings
from pathlib import Path
import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.harness.standalone import small_executors, wait_for_executors

master, log_dir, local_dir, snapshot = sys.argv[1:5]
builder = cps.builder(log_dir=log_dir, local_dir=local_dir, collect_interval_seconds=1, calibration_enabled=False)
spark = small_executors(builder.master(master), 2).config("spark.ui.port", "0").getOrCreate()
sc = spark.sparkContext
deadline = time.monotonic() + 180
wait_for_executors(spark, 2, 180)
app, names = os.path.join(log_dir, sc.applicationId), os.path.join(local_dir, "executors")
warnings.simplefilter("ignore")  # files read while they grow
ended = lambda: [p for p in Path(app).rglob("spark.task.end.*.arrows") if cp.read_log(p).num_rows]
job = threading.Thread(target=lambda: sc.parallelize(range(600), 12).map(lambda x: time.sleep(0.02) or x).sum())
job.start()
while len(ended()) < 2 and time.monotonic() < deadline:  # both executors' first tasks collected
    time.sleep(0.2)
pid = next(n for n in os.listdir(names) if n.isdigit())
folder = open(os.path.join(names, pid)).read().strip()
inbox = open(os.path.join(names, pid + ".inbox")).read().strip()  # its Python workers' shared memory
os.kill(int(pid), signal.SIGKILL)
shutil.copytree(folder, snapshot)  # its files as they were when it died
job.join()
lost = os.path.join(app, os.path.basename(folder), "process-lost.arrows")
while not os.path.exists(lost) and time.monotonic() < deadline:  # the worker's next executor collects them
    sc.parallelize(range(4), 4).count()
    time.sleep(0.5)
while os.path.exists(inbox) and time.monotonic() < deadline:  # removed with the collection
    time.sleep(0.1)
import json, urllib.request
tab = {}
while time.monotonic() < deadline:  # the tab lists it with the scheduler's reason, and its files' collection
    with urllib.request.urlopen(sc.uiWebUrl + "/cloudprofiler/json/", timeout=30) as reply:
        tab = json.loads(reply.read())
    if tab["executors_removed"] and tab["lost_collected"]:
        break
    time.sleep(0.2)
print("app", app, "killed", os.path.basename(folder), "pid", pid, "inbox_left", os.path.exists(inbox), flush=True)
print("tab", json.dumps(tab), flush=True)
spark.stop()
"""


def test_the_files_of_a_killed_executor_reach_the_log_dir_and_read_as_cut(standalone, tmp_path):
    from cloudprofiler.analysis import local_session, open_application

    master, base = standalone
    local_dir, snapshot = base / "executor-local-killed", tmp_path / "as-it-died"
    run = subprocess.run(
        [sys.executable, "-c", KILLS_AN_EXECUTOR_MID_JOB, master, str(tmp_path / "logs"), str(local_dir),
         str(snapshot)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    app, killed = Path(run.stdout.split("app ")[1].split()[0]), run.stdout.split("killed ")[1].split()[0]
    assert run.stdout.split("inbox_left ")[1].split()[0] == "False"  # no shared memory left behind
    tab = json.loads(run.stdout.split("\ntab ", 1)[1].splitlines()[0])
    removed = tab["executors_removed"]  # on the tab, with Spark's reason
    assert [r["executor_id"] for r in removed] == [killed.rsplit("-", 1)[1]] and removed[0]["reason"], removed
    died = sorted(snapshot.glob("spark.task.*.arrows"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(died) == 2 and cp.read_log(died[0]).num_rows > 0
    for p in died:  # every record it had written reached logDir
        assert_collected_as_it_died(app / killed / p.name, p)
    assert_tables_as_declared(app, {"tasks", "process_lost"})  # the marker beside the killed executor's files
    import polars

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = sum(cp.read_log(p).num_rows for p in died)
    assert len(polars.scan_ipc(str(app / killed / "spark.task.*.arrows")).collect()) == rows  # every reader
    assert not list(local_dir.rglob("*.arrows"))  # every executor's local copies removed once collected
    health = open_application(app).health()
    cut = {r["subject"].rsplit("/", 1)[-1] for r in health.where("kind = 'cut_file'").collect()}
    local_session().stop()
    assert cut == {p.name for p in died}
    # the tab says which executor collected them and how many were cut, as the analysis finds them; a finding too
    [lost] = tab["lost_collected"]
    pid = run.stdout.split(" pid ")[1].split()[0]
    assert (lost["pid"], lost["folder"], lost["cut_files"]) == (int(pid), killed, len(cut)), lost
    assert lost["collected_by"] not in ("driver", removed[0]["executor_id"]) and lost["files"] >= len(cut)
    assert any(f["text"].startswith(f"The files of lost process {pid} ({killed}) were collected by executor")
               for f in tab["findings"]), tab["findings"]
