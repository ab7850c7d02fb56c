"""Report phase: the application's logs opened as Spark tables, the report written, its findings and summary
printed."""
from __future__ import annotations

from pathlib import Path


def run(app_folder: Path, output: Path, placement, progress) -> None:
    from cloudprofiler.analysis import open_application
    from cloudprofiler.analysis.report import report

    from .session import analysis

    app = open_application(str(app_folder), analysis(placement))
    summary = app.summary()
    progress.detail(f"application {summary['app_id']}: {summary['records']:,} records in {summary['files']:,} files "
                    f"of {summary['channels']} channels, {summary['executors']} executors on "
                    f"{len(summary['hosts'])} hosts, {len(summary['domains'])} TSC domains, "
                    f"{summary['dropped']:,} records dropped, calibrated: {summary['calibrated']}")
    report(app, str(output))
    progress.detail(f"report: {output}")
