"""The profiler never takes the application down, in any of its threads: on local-cluster (executors in JVMs of their
own, where Spark's uncaught-exception handler exits the JVM for whatever a thread lets through) a LinkageError is
injected into every thread of the plugin, the SQL rules functions and the Python trace point at once
(`-Dcloudprofiler.test.fail=<names>`, CLOUDPROFILER_TEST_FAIL for Python workers): the jobs complete with their
results, no executor is lost, and each part says once that it is disabled."""
import re
from pathlib import Path

from conftest import run_python

EXECUTOR_THREADS = ["cloudprofiler-collect-lost", "cloudprofiler-probe-control-worker", "cloudprofiler-rules",
                    "cloudprofiler-collect"]
DRIVER_THREADS = ["cloudprofiler-publish", "cloudprofiler-rule-requests"]
SQL_FUNCTIONS = ["cp_set_rules", "cp_rules"]


def test_a_linkage_error_in_any_thread_leaves_the_executors_and_the_jobs_running(tmp_path):
    executor_fail = ",".join(EXECUTOR_THREADS + SQL_FUNCTIONS)
    driver_fail = ",".join(DRIVER_THREADS + SQL_FUNCTIONS)
    result = run_python(f"""
        import time
        import cloudprofiler.spark as cps
        from pyspark.find_spark_home import _find_spark_home
        from cloudprofiler.harness.standalone import wait_for_executors
        spark = (cps.builder(log_dir={str(tmp_path / "logs")!r}, local_dir={str(tmp_path / "local")!r},
                             collect_interval_seconds=1)
                 .master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
                 .config("spark.executor.extraJavaOptions", "-Dcloudprofiler.test.fail={executor_fail}")
                 .config("spark.driver.extraJavaOptions", "-Dcloudprofiler.test.fail={driver_fail}")
                 # executors as a TSC domain of their own, which the driver's rounds reach through their probe control
                 .config("spark.executorEnv.CLOUDPROFILER_SIMULATE_TSC", "offset=28800000000000")
                 .config("spark.executorEnv.CLOUDPROFILER_TEST_FAIL", "python-trace").getOrCreate())
        sc = spark.sparkContext
        wait_for_executors(spark, 2)
        print("sum", sc.parallelize(range(1000), 4).sum(), flush=True)
        rows = spark.range(0, 4, 1, 2).selectExpr("cp_set_rules('x.*=null') AS s", "cp_rules() AS r").collect()
        print("set", sorted({{r.s.split(':')[0] for r in rows}}), flush=True)
        print("get", sorted({{r.r.split(':')[0] for r in rows}}), flush=True)
        print("traced", cps.trace(spark.range(0, 1000, 1, 2), "guarded", "id").count(), flush=True)
        time.sleep(2.5)  # the timers' next runs (collection every 1 s, rules every 0.4 s)
        print("sum", sc.parallelize(range(1000), 4).sum(), flush=True)
        print("executors", sc._jsc.sc().getExecutorIds().mkString(","), flush=True)
        print("app", sc.applicationId, "home", _find_spark_home(), flush=True)
        spark.stop()
        """, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.count("sum 499500") == 2, out + result.stderr[-3000:]
    assert "set ['rules not set, the rules in force stay']" in out and "get ['rules unknown']" in out, out
    assert "traced 1000" in out, out
    assert sorted(re.search(r"executors (\S+)", out).group(1).split(",")) == ["0", "1"], out  # none lost, none new
    app, home = re.search(r"app (\S+) home (\S+)", out).groups()
    executors = "".join(p.read_text(errors="replace") for p in Path(home, "work", app).glob("*/stderr"))
    assert "ExecutorLostFailure" not in result.stderr and "Lost executor" not in result.stderr
    for part in ["the thread cloudprofiler-collect-lost", "the probe control", "the rules' follower of executor",
                 "the periodic collection of executor"]:
        assert f"cloudprofiler: {part}" in executors and "is disabled" in executors, (part, executors[-5000:])
    for part in ["the publishing of the task and rules tables", "the rule requests of the command line"]:
        assert f"cloudprofiler: {part} is disabled" in result.stderr, (part, result.stderr[-5000:])
    # the trace point counted what it could not log, once per task
    assert len(re.findall(r"trace point 'guarded' of task \d+ could not log \d+ rows", executors)) == 2, executors
    # each part said it once: a pool's workers and a timer's runs do not repeat it
    assert executors.count("cloudprofiler: the probe control is disabled") <= 2
    assert executors.count("the periodic collection of executor 0 is disabled") == 1
