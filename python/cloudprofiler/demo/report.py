"""Report phase: the application's logs opened as Spark tables and analysed; the report prints its findings and
summary and writes the HTML page."""
from __future__ import annotations

from pathlib import Path


def run(app_folder: Path, output: Path, placement) -> None:
    from cloudprofiler.analysis import open_application
    from cloudprofiler.analysis.report import report

    from .session import analysis

    app = open_application(str(app_folder), analysis(placement))
    report(app, output)
