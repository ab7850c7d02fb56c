"""`cloudprofiler bench spark`: JNI cost per handler, what the plugin adds to a one-job application start to stop,
and the overhead of the plugin and trace points on Spark jobs, each measured against the same job without them in
the same run (alternating, the fastest runs)."""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("--jni-iterations", type=int, default=20_000_000, help="JNI log calls per handler")
    parser.add_argument("--tasks", type=int, default=20_000, help="short tasks in the per-task overhead job")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows through the trace points")
    parser.add_argument("--repeats", type=int, default=5,
                        help="alternating runs per case (the fastest of each side reported)")
    parser.add_argument("--app-runs", type=int, default=10,
                        help="spark-submit runs of the one-job application with and without the plugin, alternating")
    parser.add_argument("--quick", action="store_true", help="small sizes: a check that everything runs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


BENCH_JAR = "cloudprofiler-bench.jar"  # the JNI benchmark, built beside the plugin jar (jvm-plugin/src/bench)


def jni_rows(iterations: int) -> list[dict]:
    from ...spark import jar_path

    classpath = f"{jar_path()}:{jar_path(BENCH_JAR)}"
    out = subprocess.run(["java", "-cp", classpath, "io.cloudprofiler.JniBenchmark", str(iterations)],
                         check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


ONE_JOB_APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(1000).count()
spark.stop()
"""


def submit(script: str, conf: dict[str, str], folder: "str | Path", master: str = "local[2]") -> tuple[float, float]:
    """`spark-submit` of the Python `script` (written into `folder`) with `conf`, a fresh JVM as a user's application
    starts and stops: the seconds to its exit, and the CPU seconds (user and system) of its processes, which other
    work on a loaded machine inflates less than the wall time."""
    import pyspark

    home = Path(pyspark.__file__).parent
    path = Path(folder) / "app.py"
    path.write_text(script)
    flags = ["--master", master, "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false"]
    for key, value in conf.items():
        flags += ["--conf", f"{key}={value}"]
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run([str(home / "bin" / "spark-submit"), *flags, str(path)], env=env, capture_output=True,
                         text=True, timeout=600)
    seconds, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise RuntimeError(f"spark-submit {path} failed ({out.returncode}): {out.stderr[-2000:]}")
    return seconds, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def application_overhead(runs: int, log_dir: str) -> dict:
    """A one-job application (`spark.range(1000).count()`, local[2]) by spark-submit, with and without the plugin
    (calibration on, the defaults), alternating: what a short application pays, start to stop."""
    from ... import spark as cps

    conf = cps.spark_conf(log_dir=log_dir, local_dir=os.path.join(log_dir, "local"))
    runs_of = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="cp-bench-app-") as folder:
        for _ in range(runs):
            for plugin in (False, True):
                runs_of[plugin].append(submit(ONE_JOB_APP, conf if plugin else {}, folder))
    (off, cpu_off), (on, cpu_on) = (list(zip(*runs_of[side])) for side in (False, True))
    median = statistics.median
    return {"case": f"one-job application by spark-submit, local[2], {runs} runs each",
            "median_without": median(off), "median_with": median(on), "added_median": median(on) - median(off),
            "fastest_without": min(off), "fastest_with": min(on), "added_fastest": min(on) - min(off),
            "cpu_median_without": median(cpu_off), "cpu_median_with": median(cpu_on),
            "cpu_added_median": median(cpu_on) - median(cpu_off)}


def _session(plugin: bool, log_dir: str):
    from pyspark.sql import SparkSession

    from ... import spark as cps

    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if plugin:
        builder = cps.configure(builder, log_dir=log_dir)
    return builder.getOrCreate()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


_TASK_JOB = """
import sys, time
from cloudprofiler.harness.bench.spark import _session
spark = _session({plugin}, {log_dir!r})
spark.range(0, 100, 1, 100).selectExpr("sum(id)").collect()  # warm-up
t0 = time.perf_counter()
spark.range(0, {tasks}, 1, {tasks}).selectExpr("sum(id)").collect()
print("seconds", time.perf_counter() - t0)
spark.stop()
"""


def task_overhead(tasks: int, repeats: int, log_dir: str) -> dict:
    """The same job of `tasks` one-row JVM tasks with and without the plugin, each run its own application and JVM
    (a JVM loads plugin classes only at start)."""
    times = {False: [], True: []}
    for _ in range(repeats):
        for plugin in (False, True):
            code = _TASK_JOB.format(plugin=plugin, log_dir=log_dir, tasks=tasks)
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
            times[plugin].append(float(out.stdout.split("seconds")[-1]))
    return _compared(f"plugin loaded or not, {tasks} tasks, a JVM per run", times[False], times[True], tasks, "task")


def _alternating(name: str, plain, traced, repeats: int, count: int, unit: str) -> dict:
    """`plain` and `traced` run alternately, after two warm-up rounds (the JIT compiles a query's generated code
    over its first runs)."""
    for _ in range(2):
        plain(), traced()
    off, on = [], []
    for _ in range(repeats):
        off.append(_timed(plain))
        on.append(_timed(traced))
    return _compared(name, off, on, count, unit)


def _compared(name: str, off: list[float], on: list[float], count: int, unit: str) -> dict:
    """The fastest run of each side (on a shared machine other work only ever adds time), the wall time added per
    row or task (`count` of them per run) as `added_ns_per_<unit>`, and how far apart the runs without are,
    (max - min) / min: an overhead inside that spread is not resolved by this run."""
    a, b = min(off), min(on)
    return {"case": name, "seconds_without": a, "seconds_with": b, "overhead_ratio": b / a - 1,
            f"added_ns_per_{unit}": (b - a) * 1e9 / count,
            "noise_ratio": (max(off) - a) / a if len(off) > 1 else None}


def task_switch_overhead(spark, tasks: int, repeats: int) -> dict:
    """The same job with task logging switched off and on per job (the local property), in one application: the
    cost of the records alone, without the noise of comparing two JVMs."""
    sc = spark.sparkContext

    def job(enabled: str):
        def run():
            sc.setLocalProperty("spark.cloudprofiler.task.enabled", enabled)
            spark.range(0, tasks, 1, tasks).selectExpr("sum(id)").collect()
        return run

    out = _alternating(f"per-task logging switched on per job, {tasks} tasks", job("false"), job("true"), repeats,
                       tasks, "task")
    sc.setLocalProperty("spark.cloudprofiler.task.enabled", None)
    return out


def trace_overheads(spark, rows: int, repeats: int) -> list[dict]:
    """SQL and Python trace points against the same query without them, alternating in one application; the
    YSB query is the streaming benchmark's own pipeline (`cloudprofiler.harness.pipelines.ysb`) run as a batch."""
    from ... import spark as cps
    from ..pipelines import ysb, ysb_events

    plain_sql = f"select sum(id) from range(0, {rows}, 1, 4)"
    traced_sql = f"select sum(t) from (select cp_trace('bench-sql', id) as t from range(0, {rows}, 1, 4))"
    sampled_sql = f"select sum(t) from (select cp_trace('bench-xoy', id, 1, 1024) as t from range(0, {rows}, 1, 4))"
    # a plan that does some work per row: a hash aggregation over 1000 keys, every row traced before it
    grouped = ("select k, count(*), sum(v) from (select t % 1000 as k, t * 3 as v from "
               f"(select {{}} as t from range(0, {rows}, 1, 4))) group by k")
    plain_grouped, traced_grouped = grouped.format("id"), grouped.format("cp_trace('bench-agg', id)")
    df = spark.range(0, rows, numPartitions=4)
    events = ysb_events(spark, rows)
    cases = {
        "sql trace point, every row": (lambda: spark.sql(plain_sql).collect(),
                                       lambda: spark.sql(traced_sql).collect()),
        "sql trace point, 1 row in 1024 (xoy)": (lambda: spark.sql(plain_sql).collect(),
                                                 lambda: spark.sql(sampled_sql).collect()),
        "sql trace point before a group-by": (lambda: spark.sql(plain_grouped).collect(),
                                              lambda: spark.sql(traced_grouped).collect()),
        "ysb query, trace points after filter, join and window": (lambda: ysb(events).collect(),
                                                                  lambda: ysb(events, trace=True).collect()),
        "ysb query, the same points on 1 id in 1024 (xoy)": (lambda: ysb(events).collect(),
                                                             lambda: ysb(events, trace=(1, 1024)).collect()),
        "python trace point": (lambda: df.mapInArrow(lambda batches: batches, df.schema).count(),
                               lambda: cps.trace(df, "bench-py", "id").count()),
    }
    return [_alternating(f"{name}, {rows} rows", plain, traced, repeats, rows, "row")
            for name, (plain, traced) in cases.items()]


def run(args) -> int:
    if args.quick:
        args.jni_iterations, args.tasks, args.rows, args.repeats, args.app_runs = 1_000_000, 500, 200_000, 1, 1
    rows = jni_rows(args.jni_iterations)
    with tempfile.TemporaryDirectory(prefix="cp-bench-spark-") as log_dir:
        application = application_overhead(args.app_runs, log_dir)
        overheads = [task_overhead(args.tasks, args.repeats, log_dir)]
        spark = _session(True, log_dir)
        overheads.append(task_switch_overhead(spark, args.tasks, args.repeats))
        overheads += trace_overheads(spark, args.rows, args.repeats)
        spark.stop()
    if args.json:
        print(json.dumps(rows + [application] + overheads, indent=1))
        return 0
    from ...console import print_table

    print_table(rows, [("handler", "handler", ""), ("caller", "caller", ""), ("tsc_read", "tsc read", ""),
                       ("ns_per_call", "ns/call", ".2f"),
                       ("mrec_per_s", "M rec/s", ".2f")])
    print()
    print_table([application], [("case", "case", ""), ("median_without", "median without (s)", ".2f"),
                                ("median_with", "median with (s)", ".2f"), ("added_median", "added (s)", "+.2f"),
                                ("fastest_without", "fastest without (s)", ".2f"),
                                ("fastest_with", "fastest with (s)", ".2f"), ("added_fastest", "added (s)", "+.2f"),
                                ("cpu_added_median", "CPU added (s)", "+.2f")])
    print()
    print_table(overheads, [("case", "case", ""), ("seconds_without", "without (s)", ".3f"),
                            ("seconds_with", "with (s)", ".3f"), ("overhead_ratio", "overhead", "+.1%"),
                            ("added_ns_per_row", "ns/row added", ".1f"),
                            ("added_ns_per_task", "ns/task added", ".0f"), ("noise_ratio", "noise", ".1%")])
    return 0
