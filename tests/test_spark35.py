"""Spark 3.5 (Scala 2.12): the package picks the plugin jar built for it, and per-task logs, `cp_trace`, the Python
trace point, operator timing and the analysis work there; with the jar built for Spark 4 (Scala 2.13) instead, the
parts that fail to link step aside with one log line each and the job still runs to its result.

Runs in the pyspark 3.5 environment that `make build` keeps in build/pyspark-3.5 (tests/spark_version_job.py, one
local[2] session and the analysis per run)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / "build" / "pyspark-3.5" / "bin" / "python"
JOB = Path(__file__).resolve().parent / "spark_version_job.py"
SOURCE_JOB = JOB.with_name("spark_version_source.py")
ROWS = 2000  # spark_version_job.ROWS


def run_job(log_dir: Path, *jar: str) -> tuple[dict, str]:
    if not PYTHON.exists():
        pytest.skip(f"no pyspark 3.5 environment at {PYTHON.parent.parent}: `make build` creates it")
    result = subprocess.run([str(PYTHON), str(JOB), str(log_dir), *jar], capture_output=True, text=True, timeout=600,
                            cwd=log_dir)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def serve_generator(rate: int, seconds: int) -> tuple:
    """(process, endpoint): `cloudprofiler generate` in serve mode on a free port, from this interpreter's package
    (the 3.5 environment has no pyzmq); its JSON totals come on its stdout as it ends."""
    from cloudprofiler.harness.maxtput import free_port_base

    port = free_port_base(1)
    generator = subprocess.Popen([str(Path(sys.executable).parent / "cloudprofiler"), "generate", "--serve", "--json",
                                  "--rate", str(rate), "--duration", str(seconds), "--port", str(port), "--timeout",
                                  "120"], stdout=subprocess.PIPE, text=True)
    return generator, f"tcp://127.0.0.1:{port}"


def test_on_spark_3_5_tasks_trace_points_and_the_analysis_work(tmp_path):
    seen, _ = run_job(tmp_path)
    assert seen["pyspark"].startswith("3.5."), seen
    assert Path(seen["jar"]).name == "cloudprofiler-plugin_2.12.jar"
    assert seen["sum"] == ROWS * (ROWS - 1) // 2
    # per-task records on the executor, Spark's task table on the driver, joined by the analysis
    assert seen["tasks"] >= 4 and seen["tasks_with_duration"] == seen["tasks"], seen
    assert seen["records"]["spark.task.start"] == seen["records"]["spark.task.end"] == seen["tasks"], seen
    # collected on request while it ran: every task until then; the analysis session's 2 tasks, listed in the driver's
    # table, logged no records and are left out
    assert seen["collected"] == [1, 1] and seen["published_tasks"] == seen["tasks"], seen
    # the application schedules FAIR: the analysis session's job ran in its pool, the application's in the default
    assert seen["pools"] == ["cloudprofiler-analysis", "default"], seen
    assert seen["table_tasks"] == seen["tasks"] + 2, seen
    assert seen["records"]["sql.ids"] == seen["records"]["python.ids"] == ROWS, seen
    assert seen["latency"]["count"] == ROWS and seen["latency"]["p50_ns"] > 0, seen
    # operator timing: the same rows, and the filter's rows counted in its probe
    assert seen["operators_same_rows"] and seen["filter_rows"] == ROWS // 4, seen
    # its sampled rows: each task's row 0 (of 500; 1 in 1,024), ids 0, 500, 1000 and 1500, all kept by the filter,
    # paired from the range to the filter
    assert seen["filter_ordinals"] == [0] * 4, seen
    [hop] = [h for h in seen["operator_hops"] if h[:2] == ["Range", "Filter"]]
    assert hop[2] == 4 and 0 <= hop[3] <= hop[4], seen["operator_hops"]


def test_with_the_spark_4_jar_on_spark_3_5_the_failing_parts_step_aside_and_the_job_runs(tmp_path):
    wrong = str(ROOT / "python" / "cloudprofiler" / "_lib" / "cloudprofiler-plugin_2.13.jar")
    seen, log = run_job(tmp_path, wrong)
    assert seen["jar"] == wrong
    assert seen["sum"] == ROWS * (ROWS - 1) // 2  # cp_trace returned the ids, untraced
    assert seen["operators_same_rows"], seen
    disabled = [line for line in log.splitlines() if "is disabled, the application runs on without it" in line]
    assert any("the task table" in line and "NoSuchMethodError" in line for line in disabled), log[-4000:]
    assert any("the SQL function cp_trace" in line and "NoSuchMethodError" in line for line in disabled), log[-4000:]
    assert all("cloudprofiler-plugin_2.12.jar" in line for line in disabled), disabled
    assert len(disabled) == len({line.split(" is disabled")[0] for line in disabled})  # one line per part


def test_spark_conf_picks_the_jar_of_the_spark_at_hand():
    if not PYTHON.exists():
        pytest.skip(f"no pyspark 3.5 environment at {PYTHON.parent.parent}: `make build` creates it")
    spark35_home = subprocess.run([str(PYTHON), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                                  capture_output=True, text=True, check=True).stdout.strip()
    environment = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    flags = {}
    for case, command, env in [
        ("pyspark 3.5", [str(PYTHON.parent / "cloudprofiler"), "spark-conf"], environment),
        ("pyspark 4", [str(Path(sys.executable).parent / "cloudprofiler"), "spark-conf"], environment),
        ("pyspark 4, SPARK_HOME of 3.5", [str(Path(sys.executable).parent / "cloudprofiler"), "spark-conf"],
         {**environment, "SPARK_HOME": spark35_home}),
    ]:
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        (jars,) = [line for line in result.stdout.splitlines() if line.strip().startswith("--jars")]
        flags[case] = Path(jars.split()[1]).name
    assert flags == {"pyspark 3.5": "cloudprofiler-plugin_2.12.jar", "pyspark 4": "cloudprofiler-plugin_2.13.jar",
                     "pyspark 4, SPARK_HOME of 3.5": "cloudprofiler-plugin_2.12.jar"}


def test_on_spark_3_5_the_generator_source_delivers_every_tuple_once(tmp_path):
    if not PYTHON.exists():
        pytest.skip(f"no pyspark 3.5 environment at {PYTHON.parent.parent}: `make build` creates it")
    generator, endpoint = serve_generator(20_000, 2)
    log = tmp_path / "reader.log"  # a file, not a pipe: Spark's log would fill a pipe nobody reads meanwhile
    with log.open("w") as stderr:
        reader = subprocess.Popen([str(PYTHON), str(SOURCE_JOB), endpoint, "40000"], cwd=tmp_path,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            totals = json.loads(generator.communicate(timeout=300)[0].split("\n", 1)[1])
            out, _ = reader.communicate("the generator ended\n", timeout=120)
        finally:
            generator.kill()
            reader.kill()
    assert reader.returncode == 0, log.read_text()[-4000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["pyspark"].startswith("3.5."), seen
    assert totals[0]["error"] is None and totals[0]["emitted_tuples"] == 40_000, totals
    assert seen["rows"] == seen["ids"] == 40_000, seen
    # every sampled record (each task's rows 0, 1024, ...) timed from its delivery and its emission to the scan, and
    # to the sink
    assert seen["scanned"] == 40_000
    assert seen["paired"] == {"delivered": seen["sampled"], "emitted": seen["sampled"], "event_time": seen["sampled"]}
    assert seen["sunk"] == seen["paired"] and seen["event_vs_emitted_ns"] < 1e6
    # past the shuffle each task's rows 0, 1024, ... are new ones, timed from their event time only, at the shuffle's
    # read and the projection after it
    assert seen["past_read"] == seen["rows"], seen
    assert seen["past_shuffle"] == {"event_time Exchange": seen["past_sampled"],
                                    "event_time Project": seen["past_sampled"]}, seen


CONNECT_JOB = JOB.with_name("spark_version_connect.py")
CONNECT_JAR = ROOT / "build" / "spark-connect_2.12-3.5.7.jar"  # the Makefile's CONNECT35_JAR


def test_on_spark_3_5_a_connect_session_s_udfs_operators_and_streaming_batches_are_timed(tmp_path):
    """A Connect server of Spark 3.5 with the plugin (tests/spark_version_connect.py): a remote session's Python UDFs
    timed per batch by the server's workers, its query's operators, its streaming query's micro-batches and a count
    per key's records to the task that saved their key's state, with no change to the session's code."""
    if not PYTHON.exists() or not CONNECT_JAR.exists():
        pytest.skip(f"no pyspark 3.5 environment or Connect server jar in {CONNECT_JAR.parent}: `make test` fetches it")
    generator, endpoint = serve_generator(10_000, 1)
    log = tmp_path / "client.log"  # a file, not a pipe: Spark's log would fill a pipe nobody reads meanwhile
    try:
        with log.open("w") as stderr:
            client = subprocess.run([str(PYTHON), str(CONNECT_JOB), str(tmp_path), str(CONNECT_JAR), endpoint],
                                    stdout=subprocess.PIPE, stderr=stderr, text=True,
                                    timeout=600, cwd=tmp_path,
                                    env={k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")})
        totals = json.loads(generator.communicate(timeout=120)[0].split("\n", 1)[1])
    finally:
        generator.kill()
    assert client.returncode == 0, log.read_text()[-4000:]
    seen = json.loads(client.stdout.strip().splitlines()[-1])
    assert seen["pyspark"].startswith("3.5."), seen
    assert seen["sums"] == [sum(range(2000)) + 2000, sum(range(2000)) + 4000, 41152], seen
    # the UDFs: each of the 2 tasks read its 1,000 rows in 2 Arrow batches and slept 0.1 s in each, in its function
    # part; the pickled UDF's batches are PySpark's 100 rows; every task's parts sum to its worker's time
    udfs = seen["udfs"]
    napping, plus_two = ([u for u in udfs if u["udf"] == name] for name in ("napping", "plus_two"))
    assert len(napping) == len(plus_two) == 2 and len(udfs) == 4, udfs
    assert {u["kind"] for u in napping} == {"pandas UDF"} and {u["kind"] for u in plus_two} == {"Python UDF"}
    assert [u["batches"] for u in napping] == [2, 2] and [u["batches"] for u in plus_two] == [10, 10], udfs
    assert all(u["rows"] == u["out_rows"] == 1000 and u["complete"] and not u["failed"] for u in udfs), udfs
    assert all(0.2 <= u["function_s"] < 1.2 for u in napping), napping
    from cloudprofiler.udf_records import PARTS

    for u in udfs:
        assert sum(u[f"{part}_s"] for part in PARTS) == pytest.approx(u["worker_s"], abs=1e-6), u
    # the filtered count's operators: the range counted every row, the filter and its projection those kept
    assert {k: seen["filter_rows"][k] for k in ("Range", "Filter")} == {"Range": 123456, "Filter": 41152}, seen
    # the streaming query: every emitted tuple read once, over batches whose operators were timed; its sampled
    # records timed from the source (the emitter on this host: from emission and delivery too) to the scan and sink
    assert totals[0]["error"] is None and totals[0]["emitted_tuples"] == 10_000, totals
    assert seen["streamed"] == [10_000, 10_000] and seen["batch_rows"] == 10_000, seen
    assert seen["batch_tasks"] > 0 and seen["timed_batches"] > 0, seen
    # the count per key: each batch's sampled row (its file's first) timed to the task that saved its key's state,
    # past the shuffle, before the sink or with it
    counted = pd.DataFrame(seen["counted"])
    saved, sink = (counted[counted["operator"] == op].set_index("batch_id") for op in ("StateStoreSave", "sink"))
    assert sorted(saved.index) == sorted(sink.index) == [0, 1] and (saved["rows"] == 1).all(), counted
    assert (saved["max_ns"] <= sink["max_ns"]).all(), counted
    assert seen["sampled"] > 0 and seen["latency"] == {
        f"{source} {operator}": seen["sampled"] for source in ("delivered", "emitted", "event_time")
        for operator in ("ColumnarToRow", "Project", "sink")}, seen
