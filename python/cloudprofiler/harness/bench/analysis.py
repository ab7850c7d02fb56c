"""`cloudprofiler bench analysis`: the report and the analyses on an application of 100 M records.

Makes the application folder (cloudprofiler.harness.synthetic: hosts as simulated TSC domains, executors, trace
points across a shuffle, calibration tables), then times, on an embedded local Spark session whose driver heap is
bounded (spark.driver.memory, default 2g: collecting the records to the driver would fail), the report and each
analysis, every phase from a cold cache. Per phase: seconds, records of the folder per second (for the phases that
read them), and the peak of the driver JVM's old generation in the phase.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPORT, OPEN = "report", "open the application"
GOALS_S = {OPEN: 5.0, REPORT: 45.0}  # at 100 M records on a 2-core machine
PHASE_TIMEOUT_S = 900.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=100_000_000, help="trace-point records (default 100 M)")
    parser.add_argument("--hosts", type=int, default=2, help="simulated hosts (default 2)")
    parser.add_argument("--executors-per-host", type=int, default=2, help="executors per host (default 2)")
    parser.add_argument("--jobs", type=int, default=10, help="jobs, each a map and a reduce stage (default 10)")
    parser.add_argument("--partitions", type=int, default=16, help="tasks per stage (default 16)")
    parser.add_argument("--master", default="local[2]", help="Spark master of the analysis (default local[2])")
    parser.add_argument("--driver-memory", default="2g", help="the analysis driver's heap (default 2g)")
    parser.add_argument("--app", help="analyse this application folder instead of making one")
    parser.add_argument("--out", help="make the folder and the report here and keep them (default: a temporary "
                        "folder, removed)")
    parser.add_argument("--json", action="store_true", help="print the phases as JSON")


@dataclass
class Phase:
    name: str
    seconds: float
    heap_bytes: "int | None" = None  # the driver JVM's old generation at its peak during the phase
    error: "str | None" = None  # the phase failed with this
    reads_records: bool = True  # records/s means something for it


def judge(phases: list[Phase], records: int, goals: "dict[str, float] | None" = None) -> list[dict]:
    """One row per phase: seconds, records per second (the folder's records over the phase's time), the old
    generation's peak in MiB, and for a phase with a goal in seconds (GOALS_S) whether it met it ("met", "missed"
    or "failed")."""
    goals = GOALS_S if goals is None else goals
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


def _session(master: str, driver_memory: str, app_path: Path):
    from pyspark.sql import SparkSession

    from ...analysis.jvm_start import folder_bytes
    from ...analysis.session import start
    from ...plugin_jar import jar_path

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers need this interpreter's cloudprofiler
    # the plugin jar's reader reads the log files, and the JVM starts as the analysis's own session's does
    return start(SparkSession.builder.master(master).appName("cloudprofiler-bench-analysis")
                 .config("spark.driver.memory", driver_memory).config("spark.ui.enabled", "false")
                 .config("spark.jars", jar_path()), folder_bytes(str(app_path)))


def _report(app, output: str) -> None:
    from cloudprofiler.analysis.report import report

    report(app, output)


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


def measure(args: argparse.Namespace) -> tuple[list[Phase], int, dict]:
    from cloudprofiler.harness.synthetic import PIPELINE, SyntheticSpec, make_application

    phases: list[Phase] = []
    work = Path(tempfile.mkdtemp(prefix="cloudprofiler-bench-analysis-"))
    keep = Path(args.out) if args.out else work
    about = {"report": str(keep / "report.html")}
    try:
        app_path = Path(args.app) if args.app else None
        if app_path is None:
            spec = SyntheticSpec(records=args.records, hosts=args.hosts, executors_per_host=args.executors_per_host,
                                 jobs=args.jobs, partitions=args.partitions, truth=False)
            made = _timed(phases, "make the folder", lambda: make_application(keep, spec))
            if made is None:
                return phases, 0, about
            app_path = made.path
        records = _records(app_path)
        about.update(app=str(app_path), records=records)
        from cloudprofiler.analysis import open_application

        spark = _timed(phases, "start Spark", lambda: _session(args.master, args.driver_memory, app_path),
                       reads_records=False)
        if spark is None:
            return phases, records, about
        try:
            heap = _Heap(spark)
            about.update(master=args.master, driver_heap_max_mib=heap.max_bytes / 2**20)
            app = _timed(phases, OPEN, lambda: open_application(str(app_path), spark), heap, spark)
            if app is None:
                return phases, records, about
            _timed(phases, REPORT, lambda: _report(app, about["report"]), heap, spark)
            first, last = PIPELINE[0].channel, PIPELINE[-1].channel
            for name, analysis, reads in _analyses(open_application(str(app_path), spark), first, last):
                _timed(phases, name, analysis, heap, spark, reads)
        finally:
            spark.stop()
        return phases, records, about
    finally:
        about["python_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from cloudprofiler.console import print_table

    phases, records, about = measure(args)
    rows = judge(phases, records)
    report_met = any(r["phase"] == REPORT and r["goal"].endswith("met") for r in rows)
    if args.json:
        print(json.dumps({**about, "phases": rows, "raw": [asdict(p) for p in phases]}, indent=1))
        return 0 if report_met else 1
    print(f"{about.get('app', '-')}: {records:,} records; Spark {about.get('master', '-')}, driver heap at most "
          f"{about.get('driver_heap_max_mib', 0):,.0f} MiB; Python peak RSS {about['python_peak_rss_mib']:,.0f} MiB")
    print_table(rows, [("phase", "phase", "s"), ("seconds", "seconds", ".1f"),
                       ("records_per_s", "records/s", ",.0f"), ("heap_mib", "driver old gen peak (MiB)", ",.0f"),
                       ("goal", "goal", "s"), ("error", "error", "s")])
    return 0 if report_met else 1
