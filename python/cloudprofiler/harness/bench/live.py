"""`cloudprofiler bench live`: what the Cloudprofiler tab, its Prometheus page and the executors' counters
(`spark.cloudprofiler.ui.enabled`) cost, and how soon a task shows on the tab.

Applications alternate with the setting off and on (a fresh JVM each, local[2], the plugin otherwise at its
defaults); each runs a warm-up job, then a job of `--tasks` tasks of `--rows` rows each through `--channels` trace
points (cp_trace; JVM only: no Python worker), whose CPU time (user and system, of the JVM that runs the driver and
the executor) is the measure: `added` is the medians' ratio less 1, judged against the goal (operators.judge: the
spread of the runs off is the machine's floor). With the tab on, the tab's own work as the plugin measures it
(`tab_work` of its JSON before and after the job, each time once the executor's next message has come: the
driver's listener, messages and figures; the executor's messages and the samples' scan of its records; the first
messages' one-time cost falls before the job) is the direct measure: the executor's as
a share of its tasks' CPU (direct_shares), which `direct_verdict` judges against the same goal in every run. Then,
not counted in those: `--jobs` jobs whose tasks the tab must show (the delay from a job's result to the tab's JSON
holding all its tasks, polled every 5 ms), and the tab's two pages (their size and the time to serve them). The
executors' message is sized as Spark's RPC sends it (Java serialization)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from .operators import judge

GOAL_ADDED = 0.01

APP = r"""
import io, json, os, sys, time, urllib.parse, urllib.request
import cloudprofiler.spark as cps
from cloudprofiler.harness.bench.cpu import process_cpu_s, stat_cpu_s

folder, ui, tasks, jobs = sys.argv[1], sys.argv[2] == "true", int(sys.argv[3]), int(sys.argv[4])
rows, channels, interval = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
options = {"collect_interval_seconds": int(interval)} if interval else {}  # else the default's
spark = (cps.builder(log_dir=os.path.join(folder, "logs"), local_dir=os.path.join(folder, "local"), ui_enabled=ui,
                     **options)
         .master("local[2]").config("spark.ui.port", "0").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
sc = spark.sparkContext
pid = sc._jvm.java.lang.ProcessHandle.current().pid()


def task_cpu() -> float:  # CPU seconds of the JVM's task threads ("Executor task launch worker"s)
    total = 0.0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{thread}/comm") as f:
                if f.read().startswith("Executor task"):
                    total += stat_cpu_s(f"/proc/{pid}/task/{thread}/stat")
        except OSError:  # ended meanwhile
            pass
    return total




def job(n):
    traced = [f"cp_trace('bench.c{c}', id) as c{c}" for c in range(channels)] or ["id"]
    spark.range(0, n * rows, 1, n).selectExpr(*traced).write.format("noop").mode("overwrite").save()


base = f"http://127.0.0.1:{urllib.parse.urlparse(sc.uiWebUrl).port}"
interval_s = int(spark.conf.get("spark.cloudprofiler.collect.intervalSeconds", "15"))


def get(path):
    t0 = time.perf_counter()
    with urllib.request.urlopen(base + path, timeout=30) as reply:
        body = reply.read()
    return body, time.perf_counter() - t0


def tab_work():  # after the executor's next message (one a collection interval): its work so far
    time.sleep(interval_s + 2)
    return json.loads(get("/cloudprofiler/json/")[0])["tab_work"]


def less(after, before):
    return {k: less(v, before[k]) if isinstance(v, dict) else v - before[k] for k, v in after.items()}


warm_up = min(tasks, 2000)
job(warm_up)  # the JIT, the task and trace channels
work_before = tab_work() if ui else None  # the first messages' one-time cost (classes loaded, code compiled) aside
began_cpu, began_tasks, began = process_cpu_s(pid), task_cpu(), time.perf_counter()
job(tasks)
out = {"cpu_s": process_cpu_s(pid) - began_cpu, "task_cpu_s": task_cpu() - began_tasks,
       "wall_s": time.perf_counter() - began}
if ui:
    out["tab_work"] = less(tab_work(), work_before)  # the job's

    def stages():
        return {s["stage_id"]: s["tasks"] for s in json.loads(get("/cloudprofiler/json/")[0])["stages"]}

    delays, per_job = [], max(1, tasks // 10)
    for _ in range(jobs):
        before = max(stages())
        spark.range(0, per_job, 1, per_job).count()  # two stages: per_job tasks, then one
        ended = time.perf_counter()
        while sorted(n for stage, n in stages().items() if stage > before) != [1, per_job]:
            assert time.perf_counter() - ended < 60, f"the tab did not show the job's tasks in 60 s: {stages()}"
            time.sleep(0.005)
        delays.append(time.perf_counter() - ended)
    out["delays_s"] = delays
    for name, path in (("json", "/cloudprofiler/json/"), ("metrics", "/cloudprofiler/metrics/prometheus")):
        served = [get(path) for _ in range(20)]
        out[name + "_bytes"] = len(served[-1][0])
        out[name + "_s"] = sorted(s for _, s in served)[10]
    jvm = sc._jvm  # an executor's message with its counters and no channel (each channel adds about 90 bytes)
    wire = jvm.io.cloudprofiler.spark.Messages.toWire(jvm.io.cloudprofiler.spark.Messages.Counters(
        "123", 10**9, 10**6, 10**12, 1, 15.0, jvm.java.util.Collections.emptyList(), 0, 10**9, 10**9, 10**9))
    out["message_bytes"] = len(jvm.org.apache.spark.util.Utils.serialize(wire))
spark.stop()
print("RESULT " + json.dumps(out))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks of the measured job")
    parser.add_argument("--rows", type=int, default=100, help="rows of each task")
    parser.add_argument("--channels", type=int, default=20, help="trace points each row passes (cp_trace)")
    parser.add_argument("--runs", type=int, default=3, help="applications per side, alternating")
    parser.add_argument("--jobs", type=int, default=10, help="jobs whose tasks the tab must show (tab on)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")


def application(ui: bool, tasks: int, jobs: int, rows: int, channels: int, interval_s: "int | None" = None) -> dict:
    """One application's figures (see APP), in a Python process and JVM of its own; `interval_s`: the collection
    interval (the plugin's default unless given)."""
    with tempfile.TemporaryDirectory(prefix="cloudprofiler-bench-live-") as folder:
        run = subprocess.run([sys.executable, "-c", APP, folder, "true" if ui else "false", str(tasks), str(jobs),
                              str(rows), str(channels), str(interval_s or "")],
                             capture_output=True, text=True, timeout=900,
                             env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if run.returncode or not lines:
        raise RuntimeError(f"the application (tab {'on' if ui else 'off'}) failed: {run.stderr[-2000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def direct_shares(run: dict) -> dict:
    """The tab's own work in one run with it on (its `tab_work`, `cpu_s`, `task_cpu_s`, `wall_s`): the driver's parts
    and the executor's in seconds; the executor's as a share of its tasks' CPU (an executor spends more than its
    tasks do: the share is at most that), the driver's of the JVM's, and both of one core over the job."""
    work = run["tab_work"]
    driver, executor = work["driver_s"], work["executors_s"]
    executor_s, driver_s = sum(executor.values()), sum(driver.values())
    return {**{f"{part}_s": seconds for part, seconds in driver.items()}, "executor_s": executor_s,
            "scan_s": executor["scan"], "scanned": work["executors_scanned_records"],
            "executor_of_cpu": executor_s / run["task_cpu_s"], "driver_of_cpu": driver_s / run["cpu_s"],
            "of_core": (driver_s + executor_s) / run["wall_s"]}


def measure(tasks: int, runs: int, jobs: int, rows: int = 100, channels: int = 20) -> dict:
    sides = {False: [], True: []}
    for _ in range(runs):
        for ui in (False, True):
            sides[ui].append(application(ui, tasks, jobs, rows, channels))
            print(f"tab {'on ' if ui else 'off'}: {sides[ui][-1]['cpu_s']:.2f} CPU s", file=sys.stderr)
    cpu_off, cpu_on = [r["cpu_s"] for r in sides[False]], [r["cpu_s"] for r in sides[True]]
    delays = [d for r in sides[True] for d in r["delays_s"]]
    last = sides[True][-1]
    direct = [direct_shares(r) for r in sides[True]]
    worst = max(d["executor_of_cpu"] for d in direct)
    return {"tasks": tasks, "rows": rows, "channels": channels, "cpu_off": cpu_off, "cpu_on": cpu_on,
            **judge(cpu_off, cpu_on, GOAL_ADDED), "direct": direct,
            "direct_verdict": "met" if worst < GOAL_ADDED else "not met",
            "delay_median_s": statistics.median(delays), "delay_max_s": max(delays), "delays": len(delays),
            **{k: last[k] for k in ("json_bytes", "json_s", "metrics_bytes", "metrics_s", "message_bytes")}}


def run(args) -> int:
    from ...console import print_table

    if args.tasks < 10 or args.runs < 1 or args.jobs < 1 or args.rows < 1 or args.channels < 0:
        raise SystemExit(f"--tasks={args.tasks} must be at least 10, --runs={args.runs}, --jobs={args.jobs} and "
                         f"--rows={args.rows} at least 1, --channels={args.channels} at least 0")
    result = measure(args.tasks, args.runs, args.jobs, args.rows, args.channels)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    runs = " ".join(f"{off:.2f}/{on:.2f}" for off, on in zip(result["cpu_off"], result["cpu_on"]))
    print(f"CPU seconds of a {result['tasks']:,}-task job ({result['rows']} rows a task, {result['channels']} trace "
          f"points), each run off/on: {runs}")
    print_table([result], [("added", "CPU added (median)", "+.1%"), ("added_min", "min", "+.1%"),
                           ("added_max", "max", "+.1%"), ("floor", "floor (spread off)", ".1%"),
                           ("verdict", f"goal {GOAL_ADDED:.0%}", "")])
    print("\nThe tab's own work, as the plugin measures it, each run with the tab on:")
    print_table(result["direct"], [("executor_s", "executor (s)", ".4f"), ("scan_s", "of it the scan (s)", ".4f"),
                                   ("scanned", "records scanned", ",d"),
                                   ("executor_of_cpu", "of its tasks' CPU", ".2%"),
                                   ("listeners_s", "driver: listener (s)", ".4f"),
                                   ("messages_s", "messages (s)", ".4f"),
                                   ("figures_s", "figures (s)", ".4f"), ("driver_of_cpu", "of the JVM's CPU", ".2%"),
                                   ("of_core", "both, of one core", ".2%")])
    print(f"goal: the executor's under {GOAL_ADDED:.0%} of its CPU in every run: {result['direct_verdict']}")
    print()
    print_table([result], [("delays", "jobs", "d"), ("delay_median_s", "job's result to tab, median (s)", ".3f"),
                           ("delay_max_s", "max (s)", ".3f"), ("json_bytes", "JSON bytes", ",d"),
                           ("json_s", "served in (s)", ".4f"), ("metrics_bytes", "Prometheus bytes", ",d"),
                           ("metrics_s", "served in (s)", ".4f"), ("message_bytes", "executor message bytes", "d")])
    return 0
