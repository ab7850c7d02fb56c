"""Spark Connect: a real Connect server (the one pyspark ships) started with the plugin, two client sessions
configured with the helper. The helper says once what the server needs and sets nothing a session cannot; each
session's tasks are told apart in the task table, and a session's task switch reaches its tasks. cps.set_rules and
cps.rules work on a remote session (through the SQL functions cp_set_rules and cp_rules), a bad rule refused
naming it; a remote session reads the generator source, which the server's plugin jar carries; its Python UDFs' batches
are timed by the server's workers."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings

import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler import tables

pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect] (the [test] extra has it)")
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _served(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return reply.read()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Connect server in local mode with the plugin, as `cloudprofiler spark-conf` says to start it."""
    import pyspark

    log_dir = tmp_path_factory.mktemp("connect-logs")
    port, ui_port = _free_port(), _free_port()
    conf = cps.spark_conf(log_dir=str(log_dir), calibration_enabled=False, collect_interval_seconds=1, udfs=True)
    command = [os.path.join(pyspark.__path__[0], "bin", "spark-submit"), "--class", SERVER_CLASS,
               "--master", "local[2]", "--jars", conf.pop("spark.jars"),
               *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
               "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", f"spark.ui.port={ui_port}"]
    log = tmp_path_factory.mktemp("connect-server") / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        deadline = time.monotonic() + 240
        while "Spark Connect server started" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield {"url": f"sc://localhost:{port}", "ui": f"http://127.0.0.1:{ui_port}", "process": process,
               "log_dir": log_dir, "log": log}
    finally:  # a server that did not start in time is not left running either
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def remote_rules(server):
    """What cps.set_rules and cps.rules do on a remote session (before `sessions` stops the server)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    session = RemoteSession.builder.remote(server["url"]).create()
    said = {"start": cps.rules(session), "version": cps.set_rules(session, "connect.*=downsample:4;*=buffered")}
    with pytest.raises(cp.InvalidArgumentError) as refused:
        cps.set_rules(session, "connect.*=xoy:9:2")
    traced = session.sql("select sum(t) from (select cp_trace('connect.r', id) as t from range(10))").first()[0]
    said.update(refused=str(refused.value), after=cps.rules(session), traced=traced)
    said["session"] = session.session_id
    session.stop()
    return said


def test_rules_change_from_a_remote_session(remote_rules):
    assert remote_rules["start"] == []
    assert remote_rules["version"] == 1
    assert remote_rules["refused"].startswith("rules refused, the rules in force stay: rule at line 1 "
                                              "'connect.*=xoy:9:2': xoy x=9 is out of range")
    assert remote_rules["after"] == ["connect.*=downsample:4", "*=buffered"]
    assert remote_rules["traced"] == sum(range(10))


@pytest.fixture(scope="module")
def remote_operators(server):
    """A remote session's query with its operators timed (the setting is the Connect session's own SQL
    configuration), and what the server's driver wrote of its probes."""
    import pyarrow.ipc as ipc
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    session = RemoteSession.builder.remote(server["url"]).create()
    session.conf.set("spark.cloudprofiler.operators", "true")
    kept = session.sql("select count(*) from range(0, 123456, 1, 2) where id % 3 = 0").first()[0]
    session.stop()
    (app,) = [p for p in server["log_dir"].iterdir() if p.is_dir() and p.name.startswith("local-")]
    deadline = time.monotonic() + 60
    while True:  # published every second while the server runs
        try:
            nodes, values = (ipc.open_file(app / name).read_all().to_pylist()
                             for name in ("spark-operator-nodes.arrows", "spark-operators.arrows"))
        except OSError:
            nodes, values = [], []
        scan = [n for n in nodes if n["operator"] == "Range" and "123456" in n["description"]]
        rows = {}
        for v in values:
            rows[v["probe_id"]] = rows.get(v["probe_id"], 0) + v["rows"]
        if scan and rows.get(scan[0]["probe_id"]) == 123456 and rows.get(scan[0]["parent_probe_id"]) == kept:
            return {"kept": kept, "session": session.session_id}
        assert time.monotonic() < deadline, (scan, rows)
        time.sleep(0.5)


def test_a_remote_session_times_its_query_s_operators(remote_operators):
    # the range's probe counted every row and the filter's (the range's consumer) the rows it kept
    assert remote_operators["kept"] == 41152


@pytest.fixture(scope="module")
def scoped_rules(server):
    """Two sessions: the rules one sets through SQL are its own; the other, and the application, keep theirs."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    setter = RemoteSession.builder.remote(server["url"]).create()
    other = RemoteSession.builder.remote(server["url"]).create()
    said = {"version": cps.set_rules(setter, "scoped.*=downsample:8"), "setter": cps.rules(setter),
            "other": cps.rules(other)}
    trace = "select sum(t) from (select cp_trace('{}', id) as t from range(0, 1000, 1, 2))"
    said["traced"] = (setter.sql(trace.format("scoped.setter")).first()[0],
                      other.sql(trace.format("scoped.other")).first()[0])
    # the application-wide entry point, reached through SQL's reflect(), is the driver's only
    said["reflect"] = other.sql("select reflect('io.cloudprofiler.spark.rules.RuleChanges', 'setRules', '*=null')"
                                ).first()[0]
    said["other_after"] = cps.rules(other)
    said["sessions"], said["setter_session"] = {setter.session_id, other.session_id}, setter.session_id
    setter.stop()
    other.stop()
    return said


def test_rules_set_through_sql_are_the_sessions_own(scoped_rules):
    assert scoped_rules["version"] == 1
    assert scoped_rules["setter"] == ["scoped.*=downsample:8"]
    assert scoped_rules["other"] == scoped_rules["other_after"] == []  # the application's rules, unchanged
    assert scoped_rules["traced"] == (sum(range(1000)), sum(range(1000)))
    assert scoped_rules["reflect"].startswith("rules not set: the application's rules are set on the driver")


@pytest.fixture(scope="module")
def remote_source(server):
    """A remote session's streaming query over the generator source (in the server's plugin jar), its operators
    timed (the session's own setting)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
    from cloudprofiler.harness.maxtput import free_port_base

    session = RemoteSession.builder.remote(server["url"]).create()
    session.conf.set("spark.cloudprofiler.operators", "true")
    generator = Generator(GeneratorConfig(rate=10_000, duration_s=1, emitters=1, transport="serve",
                                          port=free_port_base(1), timeout_s=60)).start()
    query = (cps.read_generator(session, generator.endpoints, timeout=30).select("id", "event_time")
             .withWatermark("event_time", "1 hour").select("id")
             .writeStream.format("memory").queryName("generated").start())
    (result,) = generator.join(120)
    while query.status["isTriggerActive"]:
        time.sleep(0.05)
    query.stop()
    seen = session.sql("select count(*) as rows, count(distinct id) as ids from generated").first()
    session.stop()
    return {"error": result.error, "emitted": result.emitted_tuples, "rows": seen["rows"], "ids": seen["ids"],
            "session": session.session_id, "query_id": query.id}


def test_a_remote_session_reads_the_generator_source_every_tuple_once(remote_source):
    assert remote_source["error"] is None
    assert remote_source["rows"] == remote_source["ids"] == remote_source["emitted"] == 10_000


UDF_SLEEP_S, UDF_ROWS, UDF_BATCH_ROWS = 0.1, 2000, 500  # 2 tasks of 1,000 rows: 2 Arrow batches each


@pytest.fixture(scope="module")
def remote_udfs(server):
    """A remote session's pandas UDF that sleeps UDF_SLEEP_S per Arrow batch and its pickled Python UDF, run by the
    server's Python workers (started with the timing's daemon, the server's `udfs` option)."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    session = RemoteSession.builder.remote(server["url"]).create()
    with pytest.MonkeyPatch.context() as patch:
        # PySpark makes Connect's UDFs in a process whose mode says Connect (as `pyspark --remote` sets it); classic
        # ones would want a JVM of this process
        patch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")

        @F.pandas_udf("long")
        def napping(ids: pd.Series) -> pd.Series:
            time.sleep(UDF_SLEEP_S)
            return ids + 1

        @F.udf("long", useArrow=False)  # pickled rows (Connect makes UDFs Arrow ones by default)
        def plus_two(i):
            return i + 2

        session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(UDF_BATCH_ROWS))
        ids = session.range(0, UDF_ROWS, 1, 2)
        sums = (ids.select(napping("id").alias("y")).agg(F.sum("y")).first()[0],
                ids.select(plus_two("id").alias("y")).agg(F.sum("y")).first()[0])
    session.stop()
    return {"sums": sums, "session": session.session_id}


@pytest.fixture(scope="module")
def sessions(server, remote_rules, remote_source, scoped_rules, remote_operators, remote_udfs):
    """Two sessions' ids and what the helper said; the server stopped afterwards (its task table written)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        traced = cps.configure(RemoteSession.builder.remote(server["url"]), log_dir="/not/on/the/server").create()
        quiet = cps.configure(RemoteSession.builder.remote(server["url"]), task_enabled=False).create()
        assert traced.sql("select sum(t) from (select cp_trace('c', id) as t from range(0, 1000, 1, 2))").first()[0] \
            == sum(range(1000))
        assert quiet.range(0, 1000, 1, 3).repartition(2).selectExpr("sum(id)").first()[0] == sum(range(1000))
        app_id = traced.conf.get("spark.app.id")
        log_dir = traced.conf.get("spark.cloudprofiler.logDir")
        folder = cps.log_folder(quiet)
        deadline = time.monotonic() + 60  # the task table of the jobs so far, published within an interval
        while not (server["log_dir"] / app_id / "spark-tasks.arrows").exists():
            assert time.monotonic() < deadline, server["log"].read_text()[-5000:]
            time.sleep(0.5)
        page = cps.report(traced, output=server["log_dir"].parent / "connect-report.html")
        tab = {path: _served(server["ui"] + "/cloudprofiler/" + path) for path in ("", "report")}
        ids = traced.session_id, quiet.session_id
        traced.stop()
        quiet.stop()
    server["process"].send_signal(signal.SIGTERM)  # as stop-connect-server.sh does: the plugin writes its table
    assert server["process"].wait(timeout=120) is not None
    assert (server["log_dir"] / app_id / "spark-tasks.arrows").exists(), server["log"].read_text()[-5000:]
    return {"ids": ids, "other_sessions": {remote_rules["session"], remote_source["session"],
                                           remote_operators["session"], remote_udfs["session"],
                                           *scoped_rules["sessions"]},
            "said": [str(w.message) for w in said], "categories": [w.category for w in said],
            "app": server["log_dir"] / app_id, "log_dir": log_dir, "folder": folder, "page": page, "tab": tab}


def test_the_helper_says_once_what_the_server_needs(sessions, server):
    said = [text for text, category in zip(sessions["said"], sessions["categories"])
            if category is cps.ServerPluginWarning]
    assert len(said) == 2  # once per configure call, each naming the server and the flags
    assert said[0].startswith(f"cloudprofiler: {server['url']} is a Spark Connect server")
    assert f"--conf spark.plugins={cps.PLUGIN_CLASS}" in said[0] and f"--jars {cps.jar_path()}" in said[0]
    assert not [text for text in sessions["said"] if "modify" in text.lower()], sessions["said"]
    assert sessions["log_dir"] == str(server["log_dir"])  # the server's, not the client's "/not/on/the/server"
    assert sessions["folder"] == str(sessions["app"])


def test_cps_report_of_a_running_connect_application(sessions):
    """cps.report on a Connect session while the server runs: the server's folder so far, analysed here."""
    html = sessions["page"].read_text()
    assert f"<h1>Cloudprofiler report: {sessions['app'].name}</h1>" in html
    stages = html.split('<table class="stages">')[1].split("</table>")[0]
    assert stages.count("<tr>") >= 3  # the header and the jobs' stages so far
    assert "report_section" not in html


def test_the_servers_tab_offers_the_report_made_on_the_client(sessions):
    """The report cps.report wrote on the client is the server UI's download, byte for byte: the tab links to it."""
    assert sessions["tab"]["report"] == sessions["page"].read_bytes()
    link = re.search(r'<a id="cloudprofiler-report" href="report" download="([^"]+)">download</a> \(made '
                     r'[\d-]+ [\d:]+ UTC, [\d.]+ MB', sessions["tab"][""].decode())
    assert link and link[1] == f"cloudprofiler-report-{sessions['app'].name}.html"
    copy = sessions["app"] / tables.files()["report"]
    assert copy.stat().st_mode & 0o777 == 0o600


def test_a_remote_sessions_rules_reach_its_trace_channel(sessions):
    """The rules session's `cp_trace('connect.r', ...)` ran under the rule it set: downsample:4."""
    from cloudprofiler.analysis import open_application

    files = open_application(str(sessions["app"])).files().toPandas()
    traced = files[files["channel"] == "connect.r"]
    assert set(traced["handler"]) == {"downsample"}, files[["channel", "handler"]]


def test_each_sessions_trace_channels_follow_its_own_rules(sessions):
    """The session that set `scoped.*=downsample:8` traced under it; the other under the application's rules."""
    from cloudprofiler.analysis import open_application

    files = open_application(str(sessions["app"])).files().toPandas()
    handlers = {c: set(files[files["channel"] == c]["handler"]) for c in ("scoped.setter", "scoped.other")}
    assert handlers == {"scoped.setter": {"downsample"}, "scoped.other": {"buffered"}}, handlers


def test_a_remote_streaming_query_is_split_per_micro_batch_and_operator(sessions, remote_source):
    """The Connect session's streaming query, as the server's driver saw it: every batch with its rows (all the
    emitted tuples, over the batches), tasks and its operators' time, with no change to the query."""
    from cloudprofiler.analysis import open_application

    app = open_application(str(sessions["app"]))
    batches = app.batches(remote_source["query_id"]).toPandas()
    assert set(batches["query_name"]) == {"generated"} and batches["num_input_rows"].sum() == remote_source["rows"]
    ran = batches[batches["num_input_rows"] > 0]
    assert len(ran) >= 1 and (ran["tasks"] > 0).all() and ran["top_operator"].notna().all(), batches
    tasks = app.tasks(streaming_query_id=remote_source["query_id"]).toPandas()
    assert set(tasks["connect_session_id"]) == {remote_source["session"]}
    # every batch that read rows ran tasks (a batch may also run tasks over no new rows, and the query's stop may
    # cut one short before Spark posts its progress: tasks of batches without a progress row)
    assert set(ran["batch_id"]) <= set(tasks["streaming_batch_id"]), (batches, tasks["streaming_batch_id"])
    # its sampled records timed from the source (the emitter on this host: from emission too) to the sink: each task's
    # rows 0, 1024, ... paired above the scan, and all of them at the end of their batch's last task
    latency = app.source_latency(remote_source["query_id"]).toPandas()
    assert set(latency["source"]) == {"delivered", "emitted", "event_time"}, latency  # the watermark's: event time
    scan = latency[latency["operator"] == "ColumnarToRow"]
    probes = app.operator_tasks(streaming_query_id=remote_source["query_id"]).toPandas()
    sampled = probes[probes["probe_id"].isin(scan["probe_id"])]["rows"].apply(lambda r: -(-r // 1024)).sum()
    sink = latency[latency["operator"] == "sink"]
    for source in ("delivered", "emitted", "event_time"):
        assert scan.loc[scan["source"] == source, "rows"].sum() == sampled > 0
        assert sink.loc[sink["source"] == source, "rows"].sum() == sampled
    on_tsc = sink[sink["source"] != "event_time"]
    assert (sink["min_ns"] > 0).all() and (on_tsc["err_max_ns"] == 0).all()  # one host: exact


def test_a_remote_session_s_sampled_rows_are_timed_from_operator_to_operator(sessions, remote_operators):
    """The remote session's timed query logged its sampled rows (1 of 1,024 by default: the rows whose ordinal in
    their task is a multiple of 1,024) at the range and at the filter: operator_hops() pairs those the filter kept."""
    from cloudprofiler.analysis import open_application

    app = open_application(str(sessions["app"]))
    hops = app.operator_hops(connect_session_id=remote_operators["session"]).toPandas()
    [hop] = hops[(hops["from_operator"] == "Range") & (hops["to_operator"] == "Filter")].itertuples()
    per_task = 123456 // 2  # range(0, 123456, 1, 2): two tasks of 61,728 rows
    kept = [task * per_task + ordinal for task in range(2) for ordinal in range(0, per_task, 1024)
            if (task * per_task + ordinal) % 3 == 0]
    assert hop.rows == len(kept) > 0 and 0 <= hop.min_ns <= hop.p50_ns <= hop.max_ns, hops
    ordinals = app.records(f"spark.operator.{hop.to_probe_id}").toPandas()["tuple_id"] & 0xFFFFFFFF
    assert len(ordinals) == len(kept) and (ordinals % 1024 == 0).all()


def test_rules_set_through_sql_are_recorded_with_their_session(sessions, remote_rules, scoped_rules):
    """rules-changes.arrows holds each rules change a Connect session made through SQL beside the application's
    (whose session is null), naming the session, with that session's version; a refused one is not there."""
    import pyarrow.ipc as ipc

    rows = ipc.open_file(sessions["app"] / "rules-changes.arrows").read_all().to_pylist()
    assert [(r["session"], r["version"]) for r in rows if r["session"] is None] == [(None, 0)]
    assert {(r["session"], r["version"], r["rules"]) for r in rows if r["session"]} == {
        (remote_rules["session"], 1, "connect.*=downsample:4\n*=buffered"),
        (scoped_rules["setter_session"], 1, "scoped.*=downsample:8")}
    assert all(r["tsc"] > 0 and r["realtime_ns"] > 0 for r in rows)


def test_each_sessions_tasks_are_told_apart(sessions):
    from cloudprofiler.analysis import open_application

    app = open_application(str(sessions["app"]))
    tasks = app.tasks().toPandas()
    traced, quiet = sessions["ids"]
    assert set(tasks["connect_session_id"]) == {traced, quiet, *sessions["other_sessions"]}
    for session in (traced, quiet):
        mine = app.tasks(connect_session_id=session).toPandas()
        assert len(mine) == (tasks["connect_session_id"] == session).sum() > 0
        assert mine["connect_operation_id"].notna().all() and mine["job_description"].str.startswith(
            "Spark Connect").all()
    # the quiet session switched task logging off for its tasks: none of them has a TSC record
    for channel in ("spark.task.start", "spark.task.end"):  # both records of every traced attempt reach logDir
        logged = set(app.records(channel).toPandas()["tuple_id"])
        assert set(tasks[tasks["connect_session_id"] == quiet]["task_attempt_id"]).isdisjoint(logged), channel
        assert set(tasks[tasks["connect_session_id"] == traced]["task_attempt_id"]) <= logged, channel


def test_a_remote_session_s_python_udfs_are_timed_per_batch(sessions, remote_udfs):
    """Known answers: each task's pandas UDF read its 1,000 rows in 2 Arrow batches and slept UDF_SLEEP_S in each, in
    its function part; the pickled UDF's batches are PySpark's 100 rows; every task's parts sum to its worker's time."""
    from cloudprofiler.analysis import open_application
    from cloudprofiler.udf_records import PARTS

    assert remote_udfs["sums"] == (sum(range(UDF_ROWS)) + UDF_ROWS, sum(range(UDF_ROWS)) + 2 * UDF_ROWS)
    rows = open_application(str(sessions["app"])).udfs(connect_session_id=remote_udfs["session"]).toPandas()
    per_task = UDF_ROWS // 2
    napping, plus_two = rows[rows["udf"] == "napping"], rows[rows["udf"] == "plus_two"]
    assert len(napping) == len(plus_two) == 2 and len(rows) == 4, rows
    assert set(napping["kind"]) == {"pandas UDF"} and set(plus_two["kind"]) == {"Python UDF"}, rows
    assert (napping["batches"] == per_task // UDF_BATCH_ROWS).all() and (rows["rows"] == per_task).all(), rows
    assert (plus_two["batches"] == per_task // 100).all() and (rows["out_rows"] == per_task).all(), rows
    slept = UDF_SLEEP_S * per_task // UDF_BATCH_ROWS
    assert ((napping["function_s"] >= slept) & (napping["function_s"] < slept + 1.0)).all(), napping
    parts = rows[[f"{part}_s" for part in PARTS]]
    assert rows["complete"].all() and not rows["failed"].any(), rows
    assert parts.sum(axis=1).to_numpy() == pytest.approx(rows["worker_s"].to_numpy(), abs=1e-6)
