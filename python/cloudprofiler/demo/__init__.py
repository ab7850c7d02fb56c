"""`cloudprofiler demo`: the whole product in about two minutes. A Spark application with the plugin on (task
records, trace points, calibration) runs a streaming phase (the generator feeding the YSB pipeline, a trace point
at every operator) and a batch phase (a shuffle with one skewed stage); then its logs are analysed on Spark and the
report is written. `--cluster` runs it on a standalone master and two workers started here.

Each phase prints its progress with the time since the demo began; a phase that fails is reported in one line and
the demo goes on to the report with what it has. `cloudprofiler demo handlers` is the quick one without Spark: every
handler from several threads.
"""
from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from .. import tables
from . import handlers

FULL = {"seconds": 15.0, "rate": 50_000.0, "rows": 1_000_000}
QUICK = {"seconds": 5.0, "rate": 20_000.0, "rows": 300_000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-dir", help="the application's log folder goes in here (default: a new temporary folder)")
    parser.add_argument("-o", "--output", help="the report's HTML file (default: <log-dir>/report.html)")
    parser.add_argument("--seconds", type=float, help=f"streaming phase duration (default {FULL['seconds']:g}; "
                                                      f"--quick {QUICK['seconds']:g})")
    parser.add_argument("--rate", type=float, help=f"events per second the generator emits (default "
                                                   f"{FULL['rate']:,.0f}; --quick {QUICK['rate']:,.0f})")
    parser.add_argument("--rows", type=int, help=f"rows of the batch job (default {FULL['rows']:,}; "
                                                 f"--quick {QUICK['rows']:,})")
    parser.add_argument("--quick", action="store_true", help="reduced sizes (the test suite runs this)")
    parser.add_argument("--cluster", action="store_true",
                        help="run on a standalone master and two workers started here (network namespaces as root)")
    parts = parser.add_subparsers(metavar="part")
    quick = parts.add_parser("handlers", help="log through every handler from threads (no Spark, seconds)",
                             description=handlers.__doc__)
    quick.set_defaults(_module=handlers.__name__)
    handlers.add_arguments(quick)


def _sizes(args) -> dict:
    sizes = {**(QUICK if args.quick else FULL)}
    sizes.update({k: getattr(args, k) for k in sizes if getattr(args, k) is not None})
    if not sizes["seconds"] > 0 or not sizes["rate"] > 0 or sizes["rows"] < 1:
        raise SystemExit(f"--seconds={sizes['seconds']:g} and --rate={sizes['rate']:g} must be positive and "
                         f"--rows={sizes['rows']} at least 1")
    return sizes


def run(args) -> int:
    from . import batch, cluster, report, session, streaming
    from .progress import Progress

    sizes = _sizes(args)
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="cloudprofiler-demo-")).resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    output = Path(args.output or log_dir / "report.html").resolve()
    progress = Progress(log_dir / "demo-errors.txt")
    progress.say(f"cloudprofiler demo: logs in {log_dir}")
    placement, app_folder = None, None
    with contextlib.ExitStack() as stack:
        if args.cluster:
            with progress.phase("cluster", "a standalone master and two workers"):
                placement = stack.enter_context(cluster.started(log_dir / "cluster"))
        placement = placement or session.local()
        for note in placement.notes:
            progress.detail(note)
        spark = None
        with progress.phase("session", f"Spark on {placement.master}, the plugin on (task records, trace points, "
                                       f"calibration)"):
            spark = session.profiled(str(log_dir), placement)
            app_folder = Path(tables.app_folder(str(log_dir), spark.sparkContext.applicationId))
        if spark is not None:
            with progress.phase("streaming", f"the generator feeds the YSB pipeline with {sizes['rate']:,.0f} "
                                             f"events/s for {sizes['seconds']:g} s"):
                streaming.run(spark, progress, sizes["seconds"], sizes["rate"], placement.driver_host)
            with progress.phase("batch", "a job with a shuffle and one skewed stage"):
                batch.run(spark, progress, sizes["rows"])
            with progress.phase("stop", "the application stops: executors close and collect their logs"):
                session.stop(spark)
                progress.detail(f"{sum(1 for _ in app_folder.rglob('*.arrows'))} log files in {app_folder}")
        if app_folder is not None:
            with progress.phase("report", "the logs as Spark tables, analysed; the report"):
                report.run(app_folder, output, placement)
    failed = f"; failed: {', '.join(progress.failed)}" if progress.failed else ""
    progress.say(f"demo finished{failed}")
    return 1 if progress.failed else 0
