"""The `cloudprofiler` command: one subcommand per module, imported only when it runs.

Each command module exposes `add_arguments(parser)` and `run(args) -> int`. Modules import their heavy
dependencies (pyspark, pyzmq) inside `run`, so `cloudprofiler --help` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, one-line help)
COMMANDS = {
    "demo": ("cloudprofiler.demo", "the whole product in two minutes: Spark jobs profiled, analysed, reported"),
    "spark-conf": ("cloudprofiler.spark.conf_cli", "print the --jars/--conf flags that enable the Spark plugin"),
    "calibrate": ("cloudprofiler.calibration.cli", "MinRTT rounds from this host to probe responders elsewhere"),
    "generate": ("cloudprofiler.harness.generator.cli", "emit tuples at a fixed rate over ZeroMQ"),
    "maxtput": ("cloudprofiler.harness.maxtput_cli", "maximum sustainable throughput search"),
    "report": ("cloudprofiler.analysis.report.cli", "findings, summary and plots of one application's logs (HTML)"),
    "config": ("cloudprofiler.spark.config_cli", "show or change the rules of a running application's trace channels"),
    "repair": ("cloudprofiler.repair_cli", "make log files of killed processes whole Arrow IPC files for any reader"),
}

# bench target -> (module, one-line help)
BENCHES = {
    "handlers": ("cloudprofiler.harness.bench.handlers", "ns per call of every handler from C and Python"),
    "spark": ("cloudprofiler.harness.bench.spark", "JNI cost and the overhead of the plugin on Spark jobs"),
    "accuracy": ("cloudprofiler.harness.bench.accuracy", "error bounds of cross-node duration translation"),
    "ingest": ("cloudprofiler.harness.bench.ingest", "generator and Spark ingest maximum sustainable rates"),
    "analysis": ("cloudprofiler.harness.bench.analysis", "the report and the analyses on 100 M synthetic records"),
    "operators": ("cloudprofiler.harness.bench.operators", "time added to the 22 TPC-H queries by operator timing"),
    "udfs": ("cloudprofiler.harness.bench.udfs", "time added to Python UDF jobs by timing their batches"),
    "live": ("cloudprofiler.harness.bench.live", "CPU of the Spark UI tab and metrics, and how soon tasks show"),
}


def _add(subparsers, name: str, module: str, help_text: str) -> None:
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(_module=module)
    importlib.import_module(module).add_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cloudprofiler", description="TSC profiling for Apache Spark")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, (module, help_text) in COMMANDS.items():
        _add(sub, name, module, help_text)
    bench = sub.add_parser("bench", help="benchmarks that print a table (--json for machine-readable output)")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="target")
    for name, (module, help_text) in BENCHES.items():
        _add(bench_sub, name, module, help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(importlib.import_module(args._module).run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
