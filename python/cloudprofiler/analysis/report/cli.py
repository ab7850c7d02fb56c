"""`cloudprofiler report <app folder>`: the findings and summary in the terminal, the whole report as one HTML file.

    cloudprofiler report /tmp/cloudprofiler-logs/app-20261122-0001 -o report.html
    cloudprofiler report hdfs:///logs/app-20261122-0001 --master yarn
"""
from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("folder", help="the application's log folder: <logDir>/<application id> (any Hadoop URI)")
    parser.add_argument("-o", "--output", default=None,
                        help="the HTML file (default: ./cloudprofiler-report-<application id>.html)")
    parser.add_argument("--master", default=None,
                        help="run the analysis on this Spark master (default: an embedded local session)")


def run(args) -> int:
    import sys
    import warnings

    from ...errors import NotAnApplicationError
    from ..application import check_local_folder

    try:
        check_local_folder(args.folder)  # before a Spark session starts
        spark = None
        if args.master:
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.master(args.master).appName("cloudprofiler report").getOrCreate()
        from . import report

        with warnings.catch_warnings():  # the catalog's warnings about files are findings of the report
            warnings.filterwarnings("ignore", category=UserWarning, module=r"cloudprofiler\.analysis\.catalog")
            report(args.folder, args.output, spark)
    except NotAnApplicationError as exc:
        print(f"cloudprofiler report: {exc}", file=sys.stderr)
        return 2
    return 0
