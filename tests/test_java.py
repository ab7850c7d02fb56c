"""The plugin's JVM functions (the calibration schedule: pairs, retries and job-end spacing; probe runs in bursts and
retaken when delayed; the TSC domain check, options, rules files, messages, the probe control, the task records),
tested in Java:
jvm-plugin/src/test compiled with javac against the plugin jar and Spark's jars, and run."""
import os
import re
import subprocess
from pathlib import Path

import pyspark
import pytest

import cloudprofiler.spark as cps

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [str(p) for p in (ROOT / "jvm-plugin" / "src" / "test" / "java").rglob("*.java")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> str:
    """jvm-plugin/src/test compiled against the plugin jar and Spark's jars: the class path to run them."""
    classes = tmp_path_factory.mktemp("classes")
    classpath = os.pathsep.join([cps.jar_path(), str(Path(pyspark.__file__).parent / "jars" / "*")])
    # -classfile: Arrow's classes name annotations whose jar Spark does not ship
    build = subprocess.run(["javac", "--release", "17", "-Xlint:all,-processing,-path,-classfile", "-Werror", "-cp",
                            classpath, "-d", str(classes)] + SOURCES, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    return os.pathsep.join([str(classes), classpath])


def test_the_jvm_side_s_unit_tests_pass(compiled):
    # Arrow's memory (the log file tests) reaches into java.nio, as in Spark's JVMs
    run = subprocess.run(["java", "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp", compiled,
                          "io.cloudprofiler.spark.JvmTests"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    written = sum(source.count("public static void test") for source in map(Path.read_text, map(Path, SOURCES)))
    assert run.stdout.count("ok test") == written > 0, run.stdout


def test_the_library_s_stop_loads_no_sql_class_where_no_task_used_one(compiled):
    """An executor whose tasks opened no SQL channel (no cp_trace, operators off) forgets none at its stop: loading
    the classes that cache them would load Catalyst's and initialize its types on the application's way out (40-90
    ms of CPU an executor on 2 cores). The JVM below forgets the SQL side's channels and does nothing else."""
    run = subprocess.run(["java", "-Xlog:class+load=info:stdout", "-cp", compiled,
                          "io.cloudprofiler.spark.sql.ForgetOnly"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    loaded = re.findall(r"\] (\S+) source:", run.stdout)
    assert "io.cloudprofiler.spark.sql.ChannelCaches" in loaded, run.stdout[-3000:]
    sql = [name for name in loaded if name.startswith(("org.apache.spark", "io.cloudprofiler.spark.sql."))]
    assert sql == ["io.cloudprofiler.spark.sql.ForgetOnly", "io.cloudprofiler.spark.sql.ChannelCaches"], sql


def test_probe_runs_are_taken_as_the_python_prober_takes_its_rounds():
    from cloudprofiler.calibration import probe

    source = (ROOT / "jvm-plugin/src/main/java/io/cloudprofiler/spark/calibration/ProbeRuns.java").read_text()
    java = {name: float(value.replace("_", "")) for name, value in
            re.findall(r"static final (?:int|long|double) (\w+) = ([\d_.]+);", source)}
    assert java == {"BURSTS": probe.BURSTS, "BURST_GAP_NANOS": round(probe.BURST_GAP_S * 1e9),
                    "RETRY_FACTOR": probe.RETRY_FACTOR, "RETRIES": probe.RETRIES,
                    "SLEEPING_BURST": probe.SLEEPING_BURST}
