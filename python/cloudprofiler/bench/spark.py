"""`cloudprofiler bench spark`: JNI cost per handler, and the overhead of the plugin and trace points on Spark
jobs, each measured against the same job without them in the same run (alternating, medians)."""
from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time


def add_arguments(parser) -> None:
    parser.add_argument("--jni-iterations", type=int, default=20_000_000, help="JNI log calls per handler")
    parser.add_argument("--tasks", type=int, default=20_000, help="short tasks in the per-task overhead job")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows through the trace points")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per case (medians reported)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a check that everything runs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def jni_rows(iterations: int) -> list[dict]:
    from ..spark import jar_path

    out = subprocess.run(["java", "-cp", jar_path(), "io.cloudprofiler.JniBenchmark", str(iterations)],
                         check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _session(plugin: bool, log_dir: str):
    from pyspark.sql import SparkSession

    from .. import spark as cps

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
from cloudprofiler.bench.spark import _session
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
    import sys

    times = {False: [], True: []}
    for _ in range(repeats):
        for plugin in (False, True):
            code = _TASK_JOB.format(plugin=plugin, log_dir=log_dir, tasks=tasks)
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
            times[plugin].append(float(out.stdout.split("seconds")[-1]))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    return {"case": f"per-task logging, {tasks} tasks", "seconds_without": off, "seconds_with": on,
            "overhead_ratio": on / off - 1}


def trace_overheads(rows: int, repeats: int, log_dir: str) -> list[dict]:
    """SQL and Python trace points against the same query without them, alternating in one application."""
    from .. import spark as cps

    spark = _session(True, log_dir)
    plain_sql = f"select sum(id) from range(0, {rows}, 1, 4)"
    traced_sql = f"select sum(t) from (select cp_trace('bench-sql', id) as t from range(0, {rows}, 1, 4))"
    sampled_sql = f"select sum(t) from (select cp_trace('bench-xoy', id, 1, 1024) as t from range(0, {rows}, 1, 4))"
    # a plan that does some work per row: a hash aggregation over 1000 keys, every row traced before it
    grouped = "select k, count(*), sum(v) from (select {id} % 1000 as k, {id} * 3 as v from range(0, %d, 1, 4)) group by k"
    plain_grouped, traced_grouped = grouped.format(id="id") % rows, grouped.format(id="cp_trace('bench-agg', id)") % rows
    df = spark.range(0, rows, numPartitions=4)
    cases = {
        "sql": (lambda: spark.sql(plain_sql).collect(), lambda: spark.sql(traced_sql).collect()),
        "sql 1-of-1024 (xoy)": (lambda: spark.sql(plain_sql).collect(), lambda: spark.sql(sampled_sql).collect()),
        "sql before a group-by": (lambda: spark.sql(plain_grouped).collect(),
                                  lambda: spark.sql(traced_grouped).collect()),
        "python": (lambda: df.mapInArrow(lambda batches: batches, df.schema).count(),
                   lambda: cps.trace(df, "bench-py", "id").count()),
    }
    out = []
    for name, (plain, traced) in cases.items():
        plain(), traced()  # warm-up
        off, on = [], []
        for _ in range(repeats):
            off.append(_timed(plain))
            on.append(_timed(traced))
        a, b = statistics.median(off), statistics.median(on)
        out.append({"case": f"{name} trace point, {rows} rows", "seconds_without": a, "seconds_with": b,
                    "overhead_ratio": b / a - 1, "added_ns_per_row": (b - a) * 1e9 / rows})
    spark.stop()
    return out


def run(args) -> int:
    if args.quick:
        args.jni_iterations, args.tasks, args.rows, args.repeats = 1_000_000, 500, 200_000, 1
    rows = jni_rows(args.jni_iterations)
    with tempfile.TemporaryDirectory(prefix="cp-bench-spark-") as log_dir:
        overheads = [task_overhead(args.tasks, args.repeats, log_dir)]
        overheads += trace_overheads(args.rows, args.repeats, log_dir)
    if args.json:
        print(json.dumps(rows + overheads, indent=1))
        return 0
    from .table import print_table

    print_table(rows, [("handler", "handler", ""), ("caller", "caller", ""), ("tsc_read", "tsc read", ""),
                       ("ns_per_call", "ns/call", ".2f"),
                       ("mrec_per_s", "M rec/s", ".2f")])
    print()
    print_table(overheads, [("case", "case", ""), ("seconds_without", "without (s)", ".3f"),
                            ("seconds_with", "with (s)", ".3f"), ("overhead_ratio", "overhead", "+.1%"),
                            ("added_ns_per_row", "ns/row added", ".1f")])
    return 0
