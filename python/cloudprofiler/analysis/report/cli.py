"""`cloudprofiler report <app folder>`: the findings and summary in the terminal, the whole report as one HTML file.

    cloudprofiler report /tmp/cloudprofiler-logs/app-20261122-0001 -o report.html
    cloudprofiler report hdfs:///logs/app-20261122-0001 --master yarn
    cloudprofiler report s3a://my-bucket/logs/app-20261122-0001 \
        --conf spark.jars.packages=org.apache.hadoop:hadoop-aws:3.5.0 --conf spark.hadoop.fs.s3a.endpoint=...
"""
from __future__ import annotations

import argparse


def add_arguments(parser) -> None:
    parser.add_argument("folder", help="the application's log folder: <logDir>/<application id> (any Hadoop URI)")
    parser.add_argument("-o", "--output", default=None,
                        help="the HTML file (default: ./cloudprofiler-report-<application id>.html)")
    parser.add_argument("--master", default=None,
                        help="run the analysis on this Spark master (default: an embedded local session)")
    parser.add_argument("--conf", action="append", type=_setting, default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the analysis's session, as spark-submit's (repeatable): an object "
                             "store's spark.hadoop.* keys, spark.jars.packages for its file system's jars")


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def run(args) -> int:
    import sys
    import time
    import warnings

    from ...errors import NotAnApplicationError
    from ..application import check_local_folder
    from ..reader import local_path

    began = time.monotonic()
    try:
        check_local_folder(args.folder)  # before a Spark session starts
        if args.master:
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master(args.master).appName("cloudprofiler report")
            for key, value in args.conf:
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
        else:
            from ..jvm_start import folder_bytes
            from ..session import local_session

            spark = local_session(dict(args.conf), folder_bytes(local_path(args.folder)))
        from . import report

        with warnings.catch_warnings():  # the catalog's warnings about files are findings of the report
            warnings.filterwarnings("ignore", category=UserWarning, module=r"cloudprofiler\.analysis\.catalog")
            report(args.folder, args.output, spark, progress=lambda line: print(
                f"cloudprofiler report: [{time.monotonic() - began:5.1f} s] {line}", file=sys.stderr, flush=True))
    except NotAnApplicationError as exc:
        print(f"cloudprofiler report: {exc}", file=sys.stderr)
        return 2
    return 0
