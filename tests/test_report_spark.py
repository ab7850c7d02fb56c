"""End to end: a real Spark job with the plugin and two cp_trace points around a shuffle, then
`cloudprofiler report <folder>` (its own process, its embedded Spark) and `cps.report(spark)` after the run; the
page passes the browser check and shows the numbers the Application computes."""
import re
import subprocess
import sys

import pytest

import browser
import cloudprofiler.spark as cps


@pytest.fixture(scope="module")
def app_folder(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("report-logs")
    spark = (cps.builder(log_dir=str(log_dir), local_dir=str(tmp_path_factory.mktemp("report-local")))
             .master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
    traced = (spark.range(0, 40_000, 1, 4).selectExpr("cp_trace('source', id) as id").repartition(3)
              .selectExpr("cp_trace('sink', id) as id").selectExpr("sum(id)").first()[0])
    assert traced == sum(range(40_000))
    spark.range(0, 1000, 1, 8).selectExpr("sum(id)").collect()  # a second job: eight one-batch tasks
    folder = log_dir / spark.sparkContext.applicationId
    spark.stop()
    cps_page = cps.report(spark, output=tmp_path_factory.mktemp("cps") / "cps.html")
    return folder, cps_page


@pytest.fixture(scope="module")
def page(app_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    run = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", "report", str(app_folder[0]), "-o", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("Findings\n") and run.stdout.rstrip().endswith(f"report: {out}")
    return out


def test_the_command_writes_a_page_that_passes_the_browser_check(page, tmp_path):
    if browser.CHROMIUM is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    loaded = browser.load(page, tmp_path / "profile")
    assert loaded.console_errors == [] and loaded.failed_requests == []
    assert loaded.requests == [page.resolve().as_uri()]
    drawn = {f["key"]: f["marks"] for f in loaded.figures}
    assert {"timeline", "stages", "pipeline", "densities", "throughput"} <= set(drawn)
    assert all(marks > 0 for marks in drawn.values()), drawn


def test_a_stage_p99_and_the_hop_median_are_the_applications(page, app_folder):
    from cloudprofiler.analysis import open_application

    app = open_application(str(app_folder[0]))
    stages = app.stages().toPandas()
    html = page.read_text()
    for stage in stages.itertuples():
        row = re.search(rf'<tr><td data-value="{float(stage.stage_id)!r}">{stage.stage_id}(?: \(attempt \d+\))?</td>'
                        r"(.*?)</tr>", html)
        cells = re.findall(r'<td(?: data-value="([^"]*)")?>([^<]*)</td>', row.group(1))
        p99_value, p99_text = cells[5]  # job, tasks, failed, p50, p90, p99
        assert float(p99_value) == pytest.approx(stage.p99_ns, rel=1e-12)
        durations = app.tasks().where(f"stage_id = {stage.stage_id} and status = 'SUCCESS'").toPandas()
        assert durations["duration_ns"].min() <= float(p99_value) <= durations["duration_ns"].max()
    hop = app.pipeline(["source", "sink"]).toPandas().query("hop == 0").iloc[0]
    assert re.search(rf'<td data-value="{float(hop.p50_ns)!r}">', html)
    assert "source -&gt; sink" in html


def test_cps_report_after_the_run(app_folder):
    folder, cps_page = app_folder
    html = cps_page.read_text()
    assert f"Cloudprofiler report: {folder.name}" in html
    assert html.count('<figure class="plot"') >= 4
