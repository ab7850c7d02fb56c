"""`cloudprofiler bench spark`: JNI cost per handler, what the plugin adds to a one-job application start to stop,
and the overhead of the plugin and trace points on Spark jobs, each measured against the same job without them in
the same run (alternating, the fastest runs). Every case checks what its runs logged (`spark_logs`): nothing without
the plugin, task logging or trace point, every task and traced row with them; a case that logged otherwise fails
the bench."""
from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ... import tables
from ..standalone import small_executors_conf
from . import python_workers, streaming
from .spark_logs import record_problems, run_problems, task_problems


def add_arguments(parser) -> None:
    parser.add_argument("--jni-iterations", type=int, default=20_000_000, help="JNI log calls per handler")
    parser.add_argument("--tasks", type=int, default=20_000, help="short tasks in the per-task overhead job")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows through the trace points")
    parser.add_argument("--repeats", type=int, default=5,
                        help="alternating runs per case (the fastest of each side reported)")
    # 20: each side's times fall in two groups 0.4-0.5 s apart (application_summary); in blocks of 10 runs the
    # added median ranged from 0.14 to 0.64 s
    parser.add_argument("--app-runs", type=int, default=20,
                        help="spark-submit runs of the one-job application with and without the plugin, alternating")
    parser.add_argument("--app-masters", type=app_masters, default=list(APP_MASTERS),
                        help="masters of the one-job application, comma-separated, of " + ", ".join(APP_MASTERS)
                             + " (a master and two workers started here); default all")
    parser.add_argument("--workers", type=lambda text: [int(w) for w in text.split(",")], default=[2, 8],
                        help="Python workers (local[n]) of the python trace paths' comparison, comma-separated")
    parser.add_argument("--warmups", type=int, default=2,
                        help="rounds of each side before the timed ones of a case in one application (the JIT "
                             "compiles a query's generated code over its first runs); at least 1")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and one warm-up round: a check that everything runs and logs as it must")
    parser.add_argument("--fresh-workers", action="store_true",
                        help="the python trace paths' comparison with a Python worker started for every task "
                             "(spark.python.worker.reuse=false, 4 tasks a slot each run): what each path pays as a "
                             "worker starts, where reused workers show what it pays per record")
    parser.add_argument("--python-workers-only", action="store_true",
                        help="run only the comparison of the python trace point's two paths (--workers, --rows, "
                             "--repeats, --warmups)")
    parser.add_argument("--streaming-only", action="store_true",
                        help="only the streaming query's per-batch cost of operator timing")
    parser.add_argument("--app-only", action="store_true",
                        help="run only the one-job application's comparison (--app-runs, --app-masters)")
    parser.add_argument("--log-dir", help="keep every run's logs in this folder, one folder per case and run, to "
                                          "read what a run logged (default: a temporary folder, removed at the end)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


SIDES = {False: "without", True: "with"}
BENCH_JAR = "cloudprofiler-bench.jar"  # the JNI benchmark, built beside the plugin jar (jvm-plugin/src/bench)


def jni_rows(iterations: int) -> list[dict]:
    from ...spark import jar_path

    classpath = f"{jar_path()}:{jar_path(BENCH_JAR)}"
    out = subprocess.run(["java", "-cp", classpath, "io.cloudprofiler.JniBenchmark", str(iterations)],
                         check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


MASTER = "local[2]"  # the bench's applications, unless a case names another
STANDALONE = "standalone"
# the one-job application's masters: every executor a JVM of its own on the two cluster masters, each extracting the
# library, joining a TSC domain and collecting its files
APP_MASTERS = (MASTER, "local-cluster[2,1,1024]", STANDALONE)


def app_masters(text: str) -> list[str]:
    """--app-masters, checked: a comma-separated list of APP_MASTERS (a master's own brackets hold commas)."""
    masters = [m.strip() for m in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text) if m.strip()]
    unknown = [m for m in masters if m not in APP_MASTERS]
    if unknown or not masters:
        import argparse

        raise argparse.ArgumentTypeError(f"{text!r}: expected some of {', '.join(APP_MASTERS)}, comma-separated")
    return masters

ONE_JOB_APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(1000).count()
spark.stop()
"""


def submit(script: str, conf: dict[str, str], folder: "str | Path", master: str = MASTER) -> tuple[float, float]:
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


def plugin_conf(plugin: bool, log_dir: "str | Path", master: str = MASTER) -> dict[str, str]:
    """The plugin's configuration for an application on `master` with `log_dir` as its logDir (the defaults
    otherwise, calibration on); without the plugin the same options without the jar, the plugin and the SQL
    extension, so that a plugin loaded all the same (by spark-defaults.conf, say) logs where `run_problems` looks."""
    from ... import spark as cps

    conf = cps.spark_conf(master=master, log_dir=str(log_dir), local_dir=os.path.join(log_dir, "local"))
    return conf if plugin else {key: value for key, value in conf.items() if key not in cps.LIST_KEYS}


def application_overhead(runs: int, log_dir: str, master: str = MASTER) -> dict:
    """A one-job application (`spark.range(1000).count()`) on `master` (of APP_MASTERS) by spark-submit, with and
    without the plugin (calibration on, the defaults), alternating: what a short application pays, start to stop.
    Each run logs into a folder of its own, checked after it (on the standalone cluster once its executors, which
    the workers stop after the application ends, have collected their files)."""
    runs_of, problems = {False: [], True: []}, []
    tag = "" if master == MASTER else re.sub(r"[^a-z0-9]+", "-", master).strip("-") + "-"
    with tempfile.TemporaryDirectory(prefix="cp-bench-app-") as folder, _cluster(master, Path(folder)) as url:
        extra = small_executors_conf(2) if master == STANDALONE else {}
        for i in range(runs):
            for plugin in (False, True):
                logs = Path(log_dir) / f"application-{tag}{i}-{SIDES[plugin]}"
                runs_of[plugin].append(submit(ONE_JOB_APP, {**plugin_conf(plugin, logs, url), **extra}, folder, url))
                if plugin and master == STANDALONE:
                    _await_collection(logs)
                problems += run_problems(logs, plugin)
    (off, cpu_off), (on, cpu_on) = (list(zip(*runs_of[side])) for side in (False, True))
    return {"case": f"one-job application by spark-submit, {master}, {runs} runs each", "master": master,
            **application_summary(off, on, cpu_off, cpu_on), "log_problems": problems}


@contextlib.contextmanager
def _cluster(master: str, folder: Path):
    """`master` itself, or for STANDALONE the URL of a master and two workers started here for the runs."""
    if master != STANDALONE:
        yield master
        return
    from ..hosts import Hosts
    from ..standalone import standalone_cluster

    with Hosts(2, namespaces=False) as hosts, standalone_cluster(hosts, folder) as url:
        yield url


def _await_collection(logs: Path) -> None:
    """Until the standalone executors of the application that logged into `logs` have collected their files."""
    from ..standalone import wait_for_collection

    for app in {p.parent.name for p in logs.rglob(tables.file("tasks"))}:
        wait_for_collection(logs / "local", app)


APPLICATION_GOAL_S = 0.3  # what the plugin may add to a one-job application, start to stop, on any master


def application_summary(off: list[float], on: list[float], cpu_off: list[float], cpu_on: list[float]) -> dict:
    """The figures of alternating runs without (`off`) and with (`on`) the plugin: wall and CPU seconds, the i-th
    of each side run one after the other.

    Each side's times fall in two groups 0.4-0.5 s apart: PySpark's stop waits for its accumulator server's next
    poll (every 0.5 s), and where that falls differs from run to run on either side. The medians of the two sides
    can then come from different groups; the median of the paired differences (each run with the plugin less the
    run without it just before) cannot, and is reported beside them. The goal (under APPLICATION_GOAL_S added) is
    met only where both say so: the paired median alone once hid +0.40 s between the sides' medians."""
    median = statistics.median
    paired, added = median([b - a for a, b in zip(off, on)]), median(on) - median(off)
    return {"median_without": median(off), "median_with": median(on), "added_median": added,
            "fastest_without": min(off), "fastest_with": min(on), "added_fastest": min(on) - min(off),
            "slowest_without": max(off), "slowest_with": max(on),
            "added_paired_median": paired,
            "goal": "met" if max(paired, added) < APPLICATION_GOAL_S else "not met",
            "runs_without": list(off), "runs_with": list(on),
            "cpu_median_without": median(cpu_off), "cpu_median_with": median(cpu_on),
            "cpu_added_median": median(cpu_on) - median(cpu_off)}


def _session(plugin: bool, log_dir: str, master: str = MASTER, conf: "dict[str, str] | None" = None):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers need this interpreter's cloudprofiler
    builder = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in {**plugin_conf(plugin, log_dir, master), **(conf or {})}.items():
        builder = builder.config(key, value)
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
    (a JVM loads plugin classes only at start) and its own log folder, checked after it."""
    times, problems = {False: [], True: []}, []
    for i in range(repeats):
        for plugin in (False, True):
            logs = Path(log_dir) / f"tasks-{i}-{SIDES[plugin]}"
            code = _TASK_JOB.format(plugin=plugin, log_dir=str(logs), tasks=tasks)
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
            times[plugin].append(float(out.stdout.split("seconds")[-1]))
            problems += run_problems(logs, plugin)
    row = _compared(f"plugin loaded or not, {tasks} tasks, a JVM per run", times[False], times[True], tasks, "task")
    return {**row, "log_problems": problems}


def _alternating(name: str, plain, traced, repeats: int, warmups: int, count: int, unit: str) -> dict:
    """`plain` and `traced` run alternately, after `warmups` rounds of both (the JIT compiles a query's generated
    code over its first runs)."""
    for _ in range(warmups):
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


TASK_SWITCH_GROUPS = {False: "cloudprofiler-bench-task-logging-off", True: "cloudprofiler-bench-task-logging-on"}


def task_switch_overhead(spark, tasks: int, repeats: int, warmups: int) -> dict:
    """The same job with task logging switched off and on per job (the local property), in one application: the
    cost of the records alone, without the noise of comparing two JVMs. Each side's jobs run in a job group of
    their own (`TASK_SWITCH_GROUPS`), so that the task table tells which tasks must have records."""
    sc = spark.sparkContext

    def job(enabled: bool):
        def run():
            sc.setLocalProperty("spark.cloudprofiler.task.enabled", str(enabled).lower())
            sc.setLocalProperty("spark.jobGroup.id", TASK_SWITCH_GROUPS[enabled])
            spark.range(0, tasks, 1, tasks).selectExpr("sum(id)").collect()
        return run

    out = _alternating(f"per-task logging switched on per job, {tasks} tasks", job(False), job(True), repeats,
                       warmups, tasks, "task")
    for key in ("spark.cloudprofiler.task.enabled", "spark.jobGroup.id"):
        sc.setLocalProperty(key, None)
    return out


def trace_overheads(spark, rows: int, repeats: int, warmups: int) -> list[dict]:
    """SQL and Python trace points against the same query without them, alternating in one application; the
    YSB query is the streaming benchmark's own pipeline (`cloudprofiler.harness.pipelines.ysb`) run as a batch.
    Each row names, as `channels`, the (least, most) records one traced run logs per channel."""
    from pyspark.sql import functions as F

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
    # what a traced run logs: every row, or the ids below `rows` that 1 in 1024 keeps (id % 1024 < 1); on YSB
    # every view passes the filter and the join (every ad has a campaign), and each window is logged
    every, sampled = (rows, rows), (-(-rows // 1024),) * 2
    views, windows = ysb(events).agg(F.sum("events"), F.count("*")).first()
    ysb_windows = {"ysb.window": (windows, windows)}
    cases = {
        "sql trace point, every row": (lambda: spark.sql(plain_sql).collect(),
                                       lambda: spark.sql(traced_sql).collect(), {"bench-sql": every}),
        "sql trace point, 1 row in 1024 (xoy)": (lambda: spark.sql(plain_sql).collect(),
                                                 lambda: spark.sql(sampled_sql).collect(), {"bench-xoy": sampled}),
        "sql trace point before a group-by": (lambda: spark.sql(plain_grouped).collect(),
                                              lambda: spark.sql(traced_grouped).collect(), {"bench-agg": every}),
        "ysb query, trace points after filter, join and window": (
            lambda: ysb(events).collect(), lambda: ysb(events, trace=True).collect(),
            {"ysb.filter": (views, views), "ysb.join": (views, views), **ysb_windows}),
        "ysb query, the same points on 1 id in 1024 (xoy)": (
            lambda: ysb(events).collect(), lambda: ysb(events, trace=(1, 1024)).collect(),
            {"ysb.filter": (0, sampled[1]), "ysb.join": (0, sampled[1]), **ysb_windows}),
        "python trace point": (lambda: df.mapInArrow(lambda batches: batches, df.schema).count(),
                               lambda: cps.trace(df, "bench-py", "id").count(), {"bench-py": every}),
    }
    return [{**_alternating(f"{name}, {rows} rows", plain, traced, repeats, warmups, rows, "row"), "channels": channels}
            for name, (plain, traced, channels) in cases.items()]


def check_session_logs(app: Path, task_switch: dict, traces: list[dict], runs: int) -> None:
    """Sets `log_problems` of the cases run in one application (its folder `app`): the task switch's jobs with
    task logging off have no task record and those with it on all of theirs; the trace channels hold what the
    `runs` traced runs of each case log (a query without trace points adding a record to them is found)."""
    task_switch["log_problems"] = task_problems(app, {TASK_SWITCH_GROUPS[on]: on for on in (False, True)})
    expected: dict[str, tuple[int, int]] = {}
    for row in traces:
        for channel, (least, most) in row["channels"].items():
            before = expected.get(channel, (0, 0))
            expected[channel] = (before[0] + runs * least, before[1] + runs * most)
    problems = record_problems(app, expected)
    unnamed = [problem for channel, problem in problems.items() if channel not in expected]
    for row in traces:
        row["log_problems"] = [problems[c] for c in row["channels"] if c in problems] + unnamed


def run(args) -> int:
    if args.quick:
        args.jni_iterations, args.tasks, args.rows, args.repeats, args.app_runs, args.warmups = (
            1_000_000, 100, 50_000, 1, 1, 1)
    if args.warmups < 1:  # the Python workers' state is measured after the warm-up rounds started them
        raise SystemExit(f"--warmups {args.warmups}: expected at least 1")
    if args.python_workers_only:
        return python_workers_only(args)
    if args.app_only:
        return applications_only(args)
    if args.streaming_only:
        return streaming_only(args)
    rows = jni_rows(args.jni_iterations)
    from ... import spark as cps

    with tempfile.TemporaryDirectory(prefix="cp-bench-spark-") as scratch:
        log_dir = _log_folder(args, scratch)
        applications = [application_overhead(args.app_runs, log_dir, master) for master in args.app_masters]
        overheads = [task_overhead(args.tasks, args.repeats, log_dir)]
        spark = _session(True, os.path.join(log_dir, "session"))
        task_switch = task_switch_overhead(spark, args.tasks, args.repeats, args.warmups)
        traces = trace_overheads(spark, args.rows, args.repeats, args.warmups)
        spark.stop()
        check_session_logs(Path(cps.log_folder(spark)), task_switch, traces, args.warmups + args.repeats)
        overheads += [task_switch, *traces, streaming_row(args, log_dir)]
        workers = python_workers_rows(args, log_dir)
    problems = _say_log_problems([*applications, *overheads, *workers])
    if args.json:
        print(json.dumps(rows + applications + overheads + workers, indent=1))
        return 1 if problems else 0
    from ...console import print_table

    print_table(rows, [("handler", "handler", ""), ("caller", "caller", ""), ("tsc_read", "tsc read", ""),
                       ("ns_per_call", "ns/call", ".2f"),
                       ("mrec_per_s", "M rec/s", ".2f")])
    print()
    print_applications(applications)
    print()
    print_overheads(overheads)
    print()
    print_python_workers(args, workers)
    return 1 if problems else 0


def _log_folder(args, scratch: str) -> str:
    """Where the runs log: --log-dir, else the temporary `scratch` (Spark's logDir: an absolute path)."""
    log_dir = os.path.abspath(args.log_dir) if args.log_dir else scratch
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    return log_dir


def _say_log_problems(rows: list[dict]) -> list[str]:
    """Each row's `logs` column from its log_problems, every problem said on stderr; the problems."""
    problems = [p for row in rows for p in row["log_problems"]]
    for row in rows:
        row["logs"] = f"{len(row['log_problems'])} wrong" if row["log_problems"] else "as expected"
    for problem in problems:
        print(f"bench spark: logged otherwise than it must: {problem}", file=sys.stderr)
    return problems


def streaming_row(args, log_dir: str) -> dict:
    """The streaming case (bench/streaming.py) in an application of its own, as a row of the overheads' table."""
    rate, seconds = (20_000, 3) if args.quick else (streaming.RATE, streaming.SECONDS)
    case = streaming.compare(_session(True, os.path.join(log_dir, "streaming")), args.repeats, args.warmups, rate,
                             seconds)
    return {**_compared(case["name"], case["off"], case["on"], 1, "batch"), "runs_ms": case["runs"],
            "log_problems": case["log_problems"]}


def print_overheads(overheads: list[dict]) -> None:
    """The cases measured against the same job without the plugin or the setting, then the streaming case's runs."""
    from ...console import print_table

    print_table(overheads, [("case", "case", ""), ("seconds_without", "without (s)", ".3f"),
                            ("seconds_with", "with (s)", ".3f"), ("overhead_ratio", "overhead", "+.1%"),
                            ("added_ns_per_row", "ns/row added", ".1f"),
                            ("added_ns_per_task", "ns/task added", ".0f"),
                            ("added_ns_per_batch", "ns/batch added", ",.0f"), ("noise_ratio", "noise", ".1%"),
                            ("logs", "logs", "")])
    print_streaming_runs(overheads[-1])


def print_streaming_runs(row: dict) -> None:
    """Every run's batch times of the streaming case, in the order the pairs ran, and each side's median run."""
    medians = {}
    for timed in (False, True):
        runs = row["runs_ms"][timed]
        medians[timed] = statistics.median(statistics.median(batches) for batches in runs)
        print(f"streaming query, operator timing {'on' if timed else 'off'}, each run's batches (ms): "
              + "; ".join(" ".join(f"{ms:.0f}" for ms in batches) for batches in runs)
              + f"; median run {medians[timed]:.0f} ms")
    print(f"streaming query: the median runs {medians[True] - medians[False]:+.0f} ms a batch apart "
          f"({medians[True] / medians[False] - 1:+.1%})")


def streaming_only(args) -> int:
    with tempfile.TemporaryDirectory(prefix="cp-bench-spark-") as scratch:
        row = streaming_row(args, _log_folder(args, scratch))
    problems = _say_log_problems([row])
    if args.json:
        print(json.dumps(row, indent=1))
    else:
        print_overheads([row])
    return 1 if problems else 0


def python_workers_rows(args, log_dir: str) -> list[dict]:
    conf = {python_workers.REUSE_KEY: "false"} if args.fresh_workers else {}
    return [row for n in args.workers for row in python_workers.compare(
        _session(True, os.path.join(log_dir, f"workers-{n}"), f"local[{n}]", conf), n, args.rows, args.repeats,
        args.warmups, args.fresh_workers)]


def python_workers_only(args) -> int:
    with tempfile.TemporaryDirectory(prefix="cp-bench-spark-") as scratch:
        workers = python_workers_rows(args, _log_folder(args, scratch))
    problems = _say_log_problems(workers)
    if args.json:
        print(json.dumps(workers, indent=1))
    else:
        print_python_workers(args, workers)
    return 1 if problems else 0


def print_python_workers(args, workers: list[dict]) -> None:
    from ...console import print_table

    started = (f", a worker started for each of its {python_workers.FRESH_WAVES} tasks a slot"
               if args.fresh_workers else "")
    print(f"python trace point, {args.rows} rows{started}, the two paths of its records:")
    print_table(workers, [("workers", "workers", "d"), ("path", "records go through", ""),
                          ("median_s", "median (s)", ".3f"), ("fastest_s", "fastest (s)", ".3f"),
                          ("spread", "spread", ".0%"), ("added_median_s", "added to the query (s)", "+.3f"),
                          ("threads", "threads/worker", ".0f"), ("rss_mib", "RSS/worker (MiB)", ".0f"),
                          ("peak_mib", "peak/worker (MiB)", ".0f"), ("logs", "logs", "")])
    python_workers.print_runs(workers)


def applications_only(args) -> int:
    """--app-only: the one-job application on each of --app-masters."""
    with tempfile.TemporaryDirectory(prefix="cp-bench-spark-") as scratch:
        log_dir = _log_folder(args, scratch)
        applications = [application_overhead(args.app_runs, log_dir, master) for master in args.app_masters]
    problems = _say_log_problems(applications)
    if args.json:
        print(json.dumps(applications, indent=1))
    else:
        print_applications(applications)
    return 1 if problems else 0


def print_applications(applications: list[dict]) -> None:
    from ...console import print_table

    print_table(applications, [("case", "case", ""), ("median_without", "median without (s)", ".2f"),
                                ("median_with", "median with (s)", ".2f"), ("added_median", "added (s)", "+.2f"),
                                ("fastest_without", "fastest without (s)", ".2f"),
                                ("fastest_with", "fastest with (s)", ".2f"), ("added_fastest", "added (s)", "+.2f"),
                                ("slowest_without", "slowest without (s)", ".2f"),
                                ("slowest_with", "slowest with (s)", ".2f"),
                                ("added_paired_median", "added, paired median (s)", "+.2f"),
                                ("cpu_added_median", "CPU added (s)", "+.2f"),
                                ("goal", f"goal: < {APPLICATION_GOAL_S:g} s added", ""), ("logs", "logs", "")])
    for application in applications:
        print(f"{application['master']}, every run's seconds, in order: without "
              f"{' '.join(f'{t:.2f}' for t in application['runs_without'])}; with "
              f"{' '.join(f'{t:.2f}' for t in application['runs_with'])}")
