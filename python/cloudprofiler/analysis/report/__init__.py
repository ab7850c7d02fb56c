"""The report on one application: findings in plain words, a terminal summary and a self-contained HTML page.

    from cloudprofiler.analysis.report import report
    report("/tmp/logs/app-20261122-0001")          # writes ./cloudprofiler-report-<app id>.html

Two steps: `gather` asks the Application for aggregates (ReportData, small pandas frames); findings, plots and
the page are computed from ReportData alone. matplotlib (the `report` extra) is needed from the plots on.
"""
from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_NAME = "cloudprofiler-report-{app_id}.html"


def default_output(app_id: str) -> Path:
    """`<cwd>/cloudprofiler-report-<app id>.html`: the log folder may be remote or read-only, and is left as is."""
    return Path.cwd() / DEFAULT_NAME.format(app_id=app_id)


def render(data, output, quiet: bool = False, app_folder: "str | None" = None, plots=None) -> Path:
    """Write the HTML page of `data` to `output` and print the terminal summary (unless quiet); returns the page's
    path, which a notebook shows inline (notebook.ReportPage). `app_folder`: the application's folder, where a copy
    goes for the Spark UI's Cloudprofiler tab to offer (tab_copy), if it is this user's own on this machine.
    `plots`: the figures, drawn already (early_plots.DrawnAsGathered); else they are drawn here."""
    from . import html, tables
    from .findings import findings
    from .notebook import ReportPage
    from .plots import all_plots
    from .tab_copy import place
    from .terminal import print_summary

    found = findings(data)
    named = {"summary": tables.summary(data), "stages": tables.stages(data), "stragglers": tables.stragglers(data),
             "pipeline": tables.pipeline(data), "health": tables.health(data), "queries": tables.queries(data)}
    output = ReportPage(output)
    output.write_text(html.page(data, found, plots if plots is not None else all_plots(data), named),
                      encoding="utf-8")
    copy = None
    try:
        copy = place(app_folder, output) if app_folder is not None else None
    except OSError as exc:  # the report itself is written: only the tab's download is missing
        print(f"the Spark UI's Cloudprofiler tab does not offer this report: {exc}", file=sys.stderr)
    if not quiet:
        print_summary(found, named, data)
        if copy is not None:
            print(f"\nThe Spark UI's Cloudprofiler tab offers it for download ({copy}).")
        print(f"\nreport: {output}")
    return output


def report(app_or_path, output=None, spark=None, quiet: bool = False, udf_profiles=None, progress=None) -> Path:
    """Analyse an application (an Application, or its log folder: local path or Hadoop-compatible URI) and write
    its report; returns the HTML file's path (default: see `default_output`), which Jupyter and VS Code show inline
    as the page itself. A copy goes into the application's folder where it is this user's own on this machine, for
    the Spark UI's Cloudprofiler tab to offer (tab_copy). `udf_profiles`: Spark's UDF profiler's seconds per
    function name, shown beside the UDFs' (cloudprofiler.spark.udf_profiles). `progress`: called with a line as the
    application is opened and as each section is gathered (the command line prints them: a big folder takes
    minutes)."""
    from .. import open_application
    from .data import gather, started
    from .early_plots import DrawnAsGathered
    from .udfs import beside_spark_profiler

    opened = isinstance(app_or_path, (str, Path))
    app = open_application(str(app_or_path), spark) if opened else app_or_path
    if opened and progress is not None:
        records = sum(f.rows or 0 for f in app.catalog.logs)
        progress(f"the application opened: {len(app.catalog.logs):,} log files, {records:,} records")
    try:
        data = started(app)
        figures = DrawnAsGathered(data)
        gather(app, progress, data, figures.gathered)
    finally:
        if opened:  # an Application the caller brings keeps what it cached, for the caller's next analyses
            app.release()
    beside_spark_profiler(data, udf_profiles or {})
    return render(data, output or default_output(app.app_id), quiet, app.path, figures.plots())


def __getattr__(name: str):
    # `gather` and `ReportData` (the first step) load pandas: resolved when asked for, so that the command line's
    # parser, which imports this package for its `report` command, stays quick
    if name in ("gather", "ReportData"):
        from . import data

        return getattr(data, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
