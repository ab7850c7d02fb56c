"""The JNI binding under the JVM's own JNI checks."""
import json
import subprocess

import cloudprofiler.spark as cps
from cloudprofiler.harness.bench.spark import BENCH_JAR


def test_every_handler_through_jni_passes_xcheck_jni():
    result = subprocess.run(
        ["java", "-Xcheck:jni", "-cp", f"{cps.jar_path()}:{cps.jar_path(BENCH_JAR)}", "io.cloudprofiler.JniBenchmark",
         "20000"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr and "FATAL" not in result.stderr, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(r["handler"], r["tsc_read"]) for r in rows] == [
        (h, "ordered") for h in ("null", "spc", "mpc", "buffered", "xoy", "downsample", "firstlast")
    ] + [("buffered", "unordered")]
    assert all(r["ns_per_call"] > 0 for r in rows)
