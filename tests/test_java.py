"""The plugin's JVM functions (the calibration schedule: pairs, retries and job-end spacing; probe runs in bursts and
retaken when delayed; the TSC domain check, options, rules files, messages, the probe control, the task records),
tested in Java:
jvm-plugin/src/test compiled with javac against the plugin jar and Spark's jars, and run."""
import os
import re
import subprocess
from pathlib import Path

import pyspark

import cloudprofiler.spark as cps

ROOT = Path(__file__).resolve().parent.parent


def test_the_jvm_side_s_unit_tests_pass(tmp_path):
    classpath = os.pathsep.join([cps.jar_path(), str(Path(pyspark.__file__).parent / "jars" / "*")])
    sources = [str(p) for p in (ROOT / "jvm-plugin" / "src" / "test" / "java").rglob("*.java")]
    # -classfile: Arrow's classes name annotations whose jar Spark does not ship
    build = subprocess.run(["javac", "--release", "17", "-Xlint:all,-processing,-path,-classfile", "-Werror", "-cp",
                            classpath, "-d", str(tmp_path)] + sources, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    # Arrow's memory (the log file tests) reaches into java.nio, as in Spark's JVMs
    run = subprocess.run(["java", "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp",
                          os.pathsep.join([str(tmp_path), classpath]), "io.cloudprofiler.spark.JvmTests"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    written = sum(source.count("public static void test") for source in map(Path.read_text, map(Path, sources)))
    assert run.stdout.count("ok test") == written > 0, run.stdout


def test_probe_runs_are_taken_as_the_python_prober_takes_its_rounds():
    from cloudprofiler.calibration import probe

    source = (ROOT / "jvm-plugin/src/main/java/io/cloudprofiler/spark/calibration/ProbeRuns.java").read_text()
    java = {name: float(value.replace("_", "")) for name, value in
            re.findall(r"static final (?:int|long|double) (\w+) = ([\d_.]+);", source)}
    assert java == {"BURSTS": probe.BURSTS, "BURST_GAP_NANOS": round(probe.BURST_GAP_S * 1e9),
                    "RETRY_FACTOR": probe.RETRY_FACTOR, "RETRIES": probe.RETRIES,
                    "SLEEPING_BURST": probe.SLEEPING_BURST}
