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


RULES_FROM_JAVA = """
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.CloudProfilerException;
import io.cloudprofiler.NativeLoader;

public class RulesFromJava {
  public static void main(String[] args) {
    NativeLoader.load(null);
    CloudProfiler.start(args[0], 0, 0, 0, 0, 0, -1);
    CloudProfiler.setRules("jvm.*=downsample:2\\n*=null");
    System.out.println("rules " + CloudProfiler.rules().replace("\\n", "|"));
    try {
      CloudProfiler.setRules("jvm.*=xoy:9:3");
    } catch (CloudProfilerException e) {
      System.out.println("refused " + e.getMessage());
    }
    long channel = CloudProfiler.openByRules("jvm.trace", new String[] {"origin"}, new String[] {"java"});
    System.out.println("handler " + CloudProfiler.channelHandler(channel));
    for (long i = 0; i < 10; i++) CloudProfiler.log(channel, i);
    CloudProfiler.setRules("jvm.*=buffered");
    System.out.println("handler " + CloudProfiler.channelHandler(channel));
    for (long i = 10; i < 20; i++) CloudProfiler.log(channel, i);
    CloudProfiler.close(channel);
    System.out.println("logged " + CloudProfiler.stats(channel)[0]);
  }
}
"""


def test_rules_through_jni(tmp_path):
    """setRules / rules / openByRules: a bad rule throws naming it, and a channel switches on new rules."""
    import cloudprofiler as cp

    source = tmp_path / "RulesFromJava.java"
    source.write_text(RULES_FROM_JAVA)
    logs = tmp_path / "logs"
    result = subprocess.run(
        ["java", "-Xcheck:jni", "-cp", cps.jar_path(), str(source), str(logs)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr and "FATAL" not in result.stderr, result.stderr
    assert result.stdout.splitlines() == [
        "rules jvm.*=downsample:2|*=null|",
        "refused rule at line 1 'jvm.*=xoy:9:3': xoy x=9 is out of range: expected 0 <= x <= y (y=3)",
        f"handler {int(cp.Handler.DOWNSAMPLE)}",
        f"handler {int(cp.Handler.BUFFERED)}",
        "logged 20",
    ]
    tables = sorted((cp.read_log(p) for p in cp.log_files(logs)), key=lambda t: cp.log_metadata(t)["rules.segment"])
    assert [cp.log_metadata(t)["handler"] for t in tables] == ["downsample", "buffered"]
    assert [t["tuple_id"].to_pylist() for t in tables] == [[0, 2, 4, 6, 8], list(range(10, 20))]
    assert all(cp.log_metadata(t)["origin"] == "java" for t in tables)
