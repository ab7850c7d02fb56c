"""Every example in examples/ runs as its README says, with small sizes, and prints what it promises.

The examples run at the same time (each its own process and Spark application), so that the module costs about
as long as its slowest example. examples/generator_spark.py runs in test_spark_source.py, alone: its emitters
wait only so long for Spark to read them."""
import subprocess
import sys
from pathlib import Path

import pytest

import cloudprofiler as cp

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {  # name -> arguments after the interpreter (or bash) and the log folder's place among them
    "spark_submit.sh": ["{logs}"],
    "pyspark_helper.py": ["{logs}", "20000"],
    "sql_trace.py": ["{logs}", "100000"],
    "python_trace.py": ["{logs}", "100000"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> (completed process, log folder), every example started at once."""
    started = {}
    for name, args in EXAMPLES.items():
        logs = tmp_path_factory.mktemp(name.split(".")[0])
        program = ["bash"] if name.endswith(".sh") else [sys.executable]
        command = program + [str(Path("examples") / name)] + [a.format(logs=logs) for a in args]
        started[name] = (subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True), logs)
    out = {}
    for name, (process, logs) in started.items():
        stdout, stderr = process.communicate(timeout=600)
        out[name] = (subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), logs)
    return out


def _ok(runs, name) -> tuple[str, Path]:
    result, logs = runs[name]
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout, logs


def test_spark_submit_logs_every_task_of_an_unchanged_job(runs):
    stdout, logs = _ok(runs, "spark_submit.sh")
    assert "Row(key=0, count=100000)" in stdout and f"logs in {logs}" in stdout
    (app,) = [d for d in logs.iterdir() if d.is_dir()]
    assert (app / "spark-tasks.arrows").exists()
    attempts = set(cp.read_log(app / "spark-tasks.arrows").column("task_attempt_id").to_pylist())
    for channel in ("spark.task.start", "spark.task.end"):  # every attempt Spark ran, each once
        ids = cp.read_log_dir(app, channel=channel).column("tuple_id").to_pylist()
        assert len(attempts) >= 8 and sorted(ids) == sorted(attempts), channel


def test_pyspark_helper_prints_each_task_with_its_tsc_duration(runs):
    stdout, _ = _ok(runs, "pyspark_helper.py")
    lines = stdout.splitlines()
    rows = [line.split() for line in lines if "SUCCESS" in line]
    assert "tsc_duration_us" in lines[0] and len(rows) == 9, stdout  # 8 partial sums, then the final one
    assert all(float(row[-1]) > 0 for row in rows), stdout  # each with its duration from the zstd-compressed logs


def test_sql_trace_counts_the_records_of_each_trace_point(runs):
    stdout, _ = _ok(runs, "sql_trace.py")
    assert "source 100000 records" in stdout and "after-filter 50000 records" in stdout
    assert "sampled 1563 records" in stdout  # the multiples of 64 (all even)


def test_python_trace_counts_the_records_of_both_channels(runs):
    stdout, _ = _ok(runs, "python_trace.py")
    assert "python-source 100000 records" in stdout and "inside-udf 100000 records" in stdout

