"""`cloudprofiler bench analysis`: the report and the analyses on an application of 100 M records, or on a series of
sizes (10 M, 100 M, 1 B) to show how the cost grows.

Makes the application folder (cloudprofiler.harness.synthetic: hosts as simulated TSC domains, executors, trace
points across a shuffle, calibration tables), then times, on a Spark session whose driver heap is bounded
(spark.driver.memory, default 2g: collecting the records to the driver would fail), the report and each analysis,
every phase from a cold cache. Per phase: seconds, records of the folder per second (for the phases that read
them), and the peak of the driver JVM's old generation in the phase; per run, the executors' heap at its peak where
they run in JVMs of their own (a local-cluster or standalone master; in local mode they share the driver's). Each run
of a folder runs in a process of its own, so each starts its JVM cold.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPORT, OPEN = "report", "open the application"
GOALS_S = {OPEN: 5.0, REPORT: 45.0}  # at GOAL_RECORDS on a 2-core machine
GOAL_RECORDS = 100_000_000
HEAP_GOAL_MIB = 1024  # the driver's old generation at its peak, at any size: the records never pass through it
LINEAR_WITHIN = 0.25  # a size's report, in records/s, within this of the next smaller size's: the cost is linear
PHASE_TIMEOUT_S = 900.0
UNITS = {"k": 10**3, "m": 10**6, "b": 10**9}


def sizes(text: str) -> list[int]:
    """'10M,100M,1B' -> [10_000_000, 100_000_000, 1_000_000_000], ascending, each once (argparse type)."""
    found = set()
    for part in text.split(","):
        word = part.strip().lower().replace("_", "")
        unit = UNITS.get(word[-1:], 1)
        try:
            number = float(word[:-1] if word[-1:] in UNITS else word)
        except ValueError:
            number = 0.0
        if not number > 0 or number * unit < 1:
            raise argparse.ArgumentTypeError(f"--records {text!r}: {part.strip()!r} is not a count of records "
                                             "(a number, with K, M or B: 10M,100M,1B)")
        found.add(int(number * unit))
    return sorted(found)


def _runs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--runs {text!r}: a number of runs, at least 1")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=sizes, default=[GOAL_RECORDS],
                        help="trace-point records, or several sizes for a series (K, M, B: 10M,100M,1B; each "
                        "size's folder is made, measured and removed before the next; default 100M)")
    parser.add_argument("--runs", type=_runs, default=1, help="runs of each folder, each in a process of its own "
                        "(default 1): the table shows every run and the spread")
    parser.add_argument("--report-only", action="store_true",
                        help="time opening and the report only, not each analysis after it")
    parser.add_argument("--hosts", type=int, default=2, help="simulated hosts (default 2)")
    parser.add_argument("--executors-per-host", type=int, default=2, help="executors per host (default 2)")
    parser.add_argument("--jobs", type=int, default=10, help="jobs, each a map and a reduce stage (default 10)")
    parser.add_argument("--partitions", type=int, default=16, help="tasks per stage (default 16)")
    parser.add_argument("--master", default="local[2]", help="Spark master of the analysis (default local[2]; "
                        "local-cluster[2,1,4096] runs the executors in JVMs of their own, to see their heap apart)")
    parser.add_argument("--driver-memory", default="2g", help="the analysis driver's heap (default 2g)")
    parser.add_argument("--executor-memory", default="2g", help="each executor's heap where they run in JVMs of their "
                        "own (default 2g)")
    parser.add_argument("--app", help="analyse this application folder instead of making one")
    parser.add_argument("--out", help="make the folders and the reports here and keep them (default: a temporary "
                        "folder, removed)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    parser.add_argument("--one-run", help=argparse.SUPPRESS)  # a run in a process of its own, its result to this file


@dataclass
class Phase:
    name: str
    seconds: float
    heap_bytes: "int | None" = None  # the driver JVM's old generation at its peak during the phase
    error: "str | None" = None  # the phase failed with this
    reads_records: bool = True  # records/s means something for it


def judge(phases: list[Phase], records: int, goals: "dict[str, float] | None" = None) -> list[dict]:
    """One row per phase: seconds, records per second (the folder's records over the phase's time), the old
    generation's peak in MiB, and for a phase with a goal in seconds (GOALS_S, set for a folder of GOAL_RECORDS:
    within 10% of it) whether it met it ("met", "missed" or "failed")."""
    if goals is None:
        goals = GOALS_S if abs(records - GOAL_RECORDS) <= GOAL_RECORDS // 10 else {}
    rows = []
    for p in phases:
        row = {"phase": p.name, "seconds": p.seconds,
               "records_per_s": records / p.seconds if p.reads_records and p.error is None and p.seconds > 0 else None,
               "heap_mib": None if p.heap_bytes is None else p.heap_bytes / 2**20, "goal": None, "error": p.error}
        if p.name in goals:
            verdict = "failed" if p.error else "met" if p.seconds < goals[p.name] else "missed"
            row["goal"] = f"< {goals[p.name]:.0f} s: {verdict}"
        rows.append(row)
    return rows


class _Heap:
    """The driver JVM's old generation (what survives collections: where records collected to the driver would
    pile up): its peak is reset before a phase and read after it."""

    def __init__(self, spark):
        factory = spark._jvm.java.lang.management.ManagementFactory
        heap = [p for p in factory.getMemoryPoolMXBeans() if p.getType().name() == "HEAP"]
        self.pools = [p for p in heap if "Old" in p.getName() or "Tenured" in p.getName()] or heap
        self.max_bytes = spark._jvm.java.lang.Runtime.getRuntime().maxMemory()

    def reset(self) -> None:
        for pool in self.pools:
            pool.resetPeakUsage()

    def peak(self) -> int:
        return sum(pool.getPeakUsage().getUsed() for pool in self.pools)


def _timed(phases: list[Phase], name: str, work, heap: "_Heap | None" = None, spark=None, reads_records=True):
    """Runs `work` as a phase from a cold cache, appends its Phase; returns what it returned (None if it failed)."""
    if spark is not None:
        spark.catalog.clearCache()
    if heap is not None:
        heap.reset()
    began, result, error = time.monotonic(), None, None
    # a phase that stalls (seen once: a Python worker's socket to its JVM stuck in TCP retransmission) is cancelled
    # and reported, and the next phases still run
    timer = None if spark is None else threading.Timer(PHASE_TIMEOUT_S, spark.sparkContext.cancelAllJobs)
    if timer is not None:
        timer.start()
    try:
        result = work()
    except Exception as exc:  # a failed phase is a result: the next ones still run
        first_line = (str(exc).strip().splitlines() or [""])[0]
        error = f"{type(exc).__name__}: {first_line}"[:300]
        if timer is not None and not timer.is_alive():
            error = f"cancelled after {PHASE_TIMEOUT_S:.0f} s"
    finally:
        if timer is not None:
            timer.cancel()
    phases.append(Phase(name, time.monotonic() - began, heap.peak() if heap is not None else None, error,
                        reads_records))
    print(f"  {name}: {phases[-1].seconds:.1f} s" + (f" ({error})" if error else ""), file=sys.stderr, flush=True)
    return result


def _records(app: Path) -> int:
    """Records of the folder's record and counter files, from their metadata."""
    from cloudprofiler.logs import log_files, log_metadata

    return sum(log_metadata(f).get("records.written", 0) for f in log_files(app)
               if f.parent != app)  # the driver's tables are not records


def _session(master: str, driver_memory: str, app_path: Path, executor_memory: str = "2g"):
    from pyspark.sql import SparkSession

    from ...analysis.jvm_start import folder_bytes
    from ...analysis.session import start
    from ...plugin_jar import jar_path

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers need this interpreter's cloudprofiler
    # the plugin jar's reader reads the log files, and the JVM starts as the analysis's own session's does
    return start(SparkSession.builder.master(master).appName("cloudprofiler-bench-analysis")
                 .config("spark.driver.memory", driver_memory).config("spark.executor.memory", executor_memory)
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").config("spark.jars", jar_path()),
                 folder_bytes(str(app_path)))


def _executors_heap(spark) -> "int | None":
    """The largest heap an executor held over the run (Spark's executor metrics, JVMHeapMemory, which each executor
    sends with its heartbeats and task ends), where the executors run in JVMs of their own; None in local mode,
    where they share the driver's."""
    sc = spark.sparkContext
    if not sc.master.startswith(("local-cluster", "spark://", "yarn", "k8s://")):
        return None
    executors = sc._jsc.sc().statusStore().executorList(True).iterator()
    peak = None
    while executors.hasNext():
        executor = executors.next()
        metrics = executor.peakMemoryMetrics()
        if executor.id() != "driver" and metrics.isDefined():
            peak = max(peak or 0, metrics.get().getMetricValue("JVMHeapMemory"))
    return peak


def _report(app, output: str) -> None:
    from cloudprofiler.analysis.report import report

    report(app, output, quiet=True)  # the bench prints its table, not the report's findings


def _analyses(app, first: str, last: str) -> list[tuple[str, object, bool]]:
    """(phase, work, reads the records): aggregates are collected (they are small), per-tuple frames computed in
    full (noop sink)."""
    def every_row(df):
        df.write.format("noop").mode("overwrite").save()

    return [("summary", app.summary, False), ("tasks", lambda: app.tasks().collect(), True),
            ("stages", lambda: app.stages().collect(), True),
            (f"latency {first} -> {last}", lambda: every_row(app.latency(first, last)), True),
            ("pipeline", lambda: app.pipeline().collect(), True),
            ("throughput", lambda: app.throughput().collect(), True),
            ("calibration", lambda: app.calibration().collect(), False),
            ("health", lambda: app.health().collect(), True)]


def measure(app_path: Path, report_path: Path, args: argparse.Namespace) -> dict:
    """One run on the folder `app_path`, in this process: its phases (as dicts of Phase) and what it ran on."""
    from cloudprofiler.analysis import open_application
    from cloudprofiler.harness.synthetic import PIPELINE

    phases: list[Phase] = []
    about = {"app": str(app_path), "records": _records(app_path), "report": str(report_path), "phases": phases}
    try:
        spark = _timed(phases, "start Spark", lambda: _session(args.master, args.driver_memory, app_path,
                                                               args.executor_memory), reads_records=False)
        if spark is None:
            return about
        try:
            heap = _Heap(spark)
            about.update(master=args.master, driver_heap_max_mib=heap.max_bytes / 2**20)
            app = _timed(phases, OPEN, lambda: open_application(str(app_path), spark), heap, spark)
            if app is None:
                return about
            _timed(phases, REPORT, lambda: _report(app, str(report_path)), heap, spark)
            if not args.report_only:
                first, last = PIPELINE[0].channel, PIPELINE[-1].channel
                for name, analysis, reads in _analyses(open_application(str(app_path), spark), first, last):
                    _timed(phases, name, analysis, heap, spark, reads)
            executors = _executors_heap(spark)
            about["executors_heap_peak_mib"] = None if executors is None else executors / 2**20
        finally:
            spark.stop()
        return about
    finally:
        about["python_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        about["phases"] = [asdict(p) for p in phases]


def _one_run(app_path: Path, report_path: Path, args: argparse.Namespace) -> dict:
    """measure() in a process of its own (its JVM starts cold, and its memory is its own), which says how it goes as
    it runs."""
    import subprocess

    result = report_path.parent / "run.json"
    argv = [sys.executable, "-m", "cloudprofiler.cli", "bench", "analysis", "--one-run", str(result), "--app",
            str(app_path), "--out", str(report_path.parent), "--master", args.master,
            "--driver-memory", args.driver_memory, "--executor-memory", args.executor_memory]
    done = subprocess.run(argv + (["--report-only"] if args.report_only else []), check=False)
    try:
        return json.loads(result.read_text())
    except (OSError, ValueError):
        return {"app": str(app_path), "phases": [asdict(Phase("run", 0.0, error=f"exit {done.returncode}, "
                                                                          "no result"))]}


def _made(keep: Path, records: int, args: argparse.Namespace) -> "tuple[Path | None, Phase]":
    from cloudprofiler.harness.synthetic import SyntheticSpec, make_application

    spec = SyntheticSpec(records=records, hosts=args.hosts, executors_per_host=args.executors_per_host,
                         jobs=args.jobs, partitions=args.partitions, truth=False)
    phases: list[Phase] = []
    made = _timed(phases, "make the folder", lambda: make_application(keep, spec))
    return (None if made is None else made.path), phases[0]


def series(args: argparse.Namespace) -> list[dict]:
    """Every size (or the folder given) with its runs: {"records", "made" (a Phase dict, or None), "runs"}."""
    work = Path(tempfile.mkdtemp(prefix="cloudprofiler-bench-analysis-"))
    keep = Path(args.out) if args.out else work
    done = []
    try:
        for size in [None] if args.app else args.records:
            folder = keep if size is None else keep / f"records-{size}"
            app_path, made = (Path(args.app), None) if size is None else _made(folder, size, args)
            entry = {"records": size, "made": None if made is None else asdict(made), "runs": []}
            done.append(entry)
            if app_path is None:
                continue
            for run in range(args.runs):
                out = folder / f"run-{run + 1}"
                out.mkdir(mode=0o700, parents=True, exist_ok=True)
                result = _one_run(app_path, out / "report.html", args)
                entry["records"] = result.get("records", size)
                entry["runs"].append(result)
            if size is not None and not args.out:
                shutil.rmtree(folder, ignore_errors=True)  # a billion records take 15 GB: one size at a time
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return done


def scale(done: list[dict]) -> list[dict]:
    """One row per size: its runs' seconds to open and report, the report's records/s (by the median), the driver's
    old generation at its peak over the runs' phases and the executors' heap, the seconds goals met in how many runs
    (at GOAL_RECORDS), the driver's heap goal where the executors ran apart, and against the next smaller size
    whether the cost grew linearly (records/s within LINEAR_WITHIN)."""
    rows = []
    for entry in done:
        records, runs = entry["records"] or 0, entry["runs"]
        phases = [{p["name"]: Phase(**p) for p in run["phases"]} for run in runs]
        row = {"records": records, "runs": len(runs)}
        for name, key in ((OPEN, "open"), (REPORT, "report")):
            seconds = [p[name].seconds for p in phases if name in p and p[name].error is None]
            row[f"{key}_s"] = seconds  # every run's: their spread is the list's
            row[f"{key}_median"] = statistics.median(seconds) if seconds else None
            goals = judge([p[name] for p in phases if name in p], records)
            row[f"{key}_goal"] = _goal_count([g["goal"] for g in goals], len(runs))
        report = row["report_median"]
        row["records_per_s"] = records / report if report else None
        heaps = [p.heap_bytes for run in phases for p in run.values() if p.heap_bytes is not None]
        row["driver_heap_mib"] = max(heaps) / 2**20 if heaps else None
        executors = [r.get("executors_heap_peak_mib") for r in runs]
        row["executors_heap_mib"] = max(executors) if executors and None not in executors else None
        row["heap_goal"] = (None if row["executors_heap_mib"] is None or row["driver_heap_mib"] is None else
                            f"<= {HEAP_GOAL_MIB:,} MiB: "
                            f"{'met' if row['driver_heap_mib'] <= HEAP_GOAL_MIB else 'missed'}")
        row["linear"] = _linear(rows[-1] if rows else None, row)
        rows.append(row)
    return rows


def _goal_count(verdicts: list, runs: int) -> "str | None":
    """'< 45 s: met in 2 of 3' from each run's verdict (None where the size has no goal)."""
    verdicts = [v for v in verdicts if v]
    if not verdicts:
        return None
    met = sum(v.endswith(": met") for v in verdicts)
    return f"{verdicts[0].split(':')[0]}: met in {met} of {runs}"


def shortfalls(row: dict) -> list[str]:
    """What a size of scale() did not meet: a seconds goal in some run, the driver's heap, the linear cost."""
    short = [f"{key} {text}" for key, text in (("report", row["report_goal"]), ("open", row["open_goal"]))
             if text and not text.endswith(f"met in {row['runs']} of {row['runs']}")]
    if row["heap_goal"] and not row["heap_goal"].endswith(": met"):
        short.append(f"driver heap {row['heap_goal']}")
    if row["linear"] and not row["linear"].endswith(": linear"):
        short.append(row["linear"])
    return short


def _linear(smaller: "dict | None", row: dict) -> "str | None":
    """Against the next smaller size: the records/s ratio, and "linear" where within LINEAR_WITHIN (or faster)."""
    if smaller is None or not smaller["records_per_s"] or not row["records_per_s"]:
        return None
    ratio = row["records_per_s"] / smaller["records_per_s"]
    verdict = "linear" if ratio >= 1 - LINEAR_WITHIN else "slower than linear"
    return f"{ratio:.2f}x the records/s of {smaller['records']:,}: {verdict}"


def _print_run(run: dict, made: "dict | None") -> None:
    from cloudprofiler.console import print_table

    phases = ([Phase(**made)] if made else []) + [Phase(**p) for p in run["phases"]]
    executors = run.get("executors_heap_peak_mib")
    print(f"{run.get('app', '-')}: {run.get('records', 0):,} records; Spark {run.get('master', '-')}, driver heap "
          f"at most {run.get('driver_heap_max_mib', 0):,.0f} MiB; "
          + ("the executors share the driver's JVM" if executors is None
             else f"the executors' heap at its peak {executors:,.0f} MiB")
          + f"; Python peak RSS {run.get('python_peak_rss_mib', 0):,.0f} MiB")
    print_table(judge(phases, run.get("records", 0)),
                [("phase", "phase", "s"), ("seconds", "seconds", ".1f"), ("records_per_s", "records/s", ",.0f"),
                 ("heap_mib", "driver old gen peak (MiB)", ",.0f"), ("goal", "goal", "s"), ("error", "error", "s")])


def _seconds(row: dict, key: str) -> str:
    seconds = row[f"{key}_s"]
    each = ", ".join(f"{s:.1f}" for s in seconds)
    return each or "-" if len(seconds) < 2 else f"{each} (median {row[f'{key}_median']:.1f})"


def run(args: argparse.Namespace) -> int:
    from cloudprofiler.console import print_table
    from cloudprofiler.private_files import replace_privately

    if args.one_run:
        result = json.dumps(measure(Path(args.app), Path(args.out) / "report.html", args)).encode()
        replace_privately(args.one_run, lambda out: out.write(result))  # this user's only, as the run's folder
        return 0
    done = series(args)
    rows = scale(done)
    if args.json:
        print(json.dumps({"sizes": done, "scale": rows}, indent=1))
    else:
        for entry in done:
            if not entry["runs"]:  # its folder could not be made
                print(f"{entry['records']:,} records: {(entry['made'] or {}).get('error')}\n")
            for number, run_ in enumerate(entry["runs"]):
                _print_run(run_, None if number else entry["made"])  # the folder is made once for its runs
                print()
        print_table([{**r, "open": _seconds(r, "open"), "report": _seconds(r, "report")} for r in rows],
                    [("records", "records", ",d"), ("open", "open (s)", "s"), ("report", "report (s)", "s"),
                     ("records_per_s", "report records/s", ",.0f"), ("driver_heap_mib", "driver old gen (MiB)", ",.0f"),
                     ("executors_heap_mib", "executors' heap (MiB)", ",.0f"), ("report_goal", "report goal", "s"),
                     ("open_goal", "open goal", "s"), ("heap_goal", "driver heap goal", "s"),
                     ("linear", "against the size below", "s")])
    failed = any(p.get("error") for entry in done for r in entry["runs"] for p in r["phases"])
    return 1 if failed or any(map(shortfalls, rows)) or not all(entry["runs"] for entry in done) else 0
