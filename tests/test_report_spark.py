"""End to end: a real Spark job with the plugin and three cp_trace points around two shuffles, then
`cps.report(spark)` after the run (its embedded Spark, in the application's process); the page passes the browser
check and shows the numbers the Application computes. `cloudprofiler report <folder>`, the same report from a
process of its own, runs in test_bad_input (a folder with a cut file) and test_object_store (s3a://)."""
import os
import re
import shutil
from pathlib import Path

import pytest

import browser
from conftest import run_python

SCREENSHOT = "CLOUDPROFILER_REPORT_SCREENSHOT"  # where to save the page's screenshot, when set
SLOW_PARTITION = 5

# The application, in its own process: a Spark driver loads the plugin only from a JVM started with its jar, and
# other test modules may have started this process's JVM without it. Three trace points across two shuffles, a
# stage with a slow partition and a failed first attempt, then a second pipeline on other ids; after stop(),
# cps.report writes the page.
APPLICATION = r"""
import sys
import time

import cloudprofiler.spark as cps

log_dir, local_dir, page, slow, running = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]


def slow_or_failing(rows):
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
        raise RuntimeError("failing the first attempt on purpose")
    if ctx.partitionId() == slow:
        time.sleep(1.0)
    yield from rows


spark = (cps.builder(log_dir=log_dir, local_dir=local_dir, collect_interval_seconds=600)
         .master("local[2,2]")  # a task may fail once
         .config("spark.ui.enabled", "false").getOrCreate())
traced = (spark.range(0, 60_000, 1, 4).selectExpr("cp_trace('source', id) as id").repartition(4)
          .selectExpr("cp_trace('shuffled', id) as id").repartition(3)
          .selectExpr("cp_trace('sink', id) as id").selectExpr("sum(id)").first()[0])
assert traced == sum(range(60_000))
assert spark.sparkContext.parallelize(range(800), 8).mapPartitions(slow_or_failing).count() == 800
other = spark.range(100_000, 101_000, 1, 2).selectExpr("cp_trace('other.a', id) as id").repartition(2)
assert other.selectExpr("cp_trace('other.b', id) as id").selectExpr("count(id)").first()[0] == 1000
print("app", spark.sparkContext.applicationId)
tracker = spark.sparkContext.statusTracker()
spark.conf.set("spark.sql.adaptive.enabled", "false")  # the user's: each shuffle of theirs takes 200 partitions
# a streaming query beside the report, idle after its first batch
idle = (spark.readStream.format("rate").load().writeStream.format("noop").trigger(processingTime="1 hour").start())
while not idle.recentProgress:
    time.sleep(0.1)
before = set(tracker.getJobIdsForGroup(None))
print("running", cps.report(spark, output=running))
idle.stop()
stages = [s for j in set(tracker.getJobIdsForGroup(None)) - before for s in tracker.getJobInfo(j).stageIds]
print("report's stages", len(stages), "most tasks", max(tracker.getStageInfo(s).numTasks for s in stages),
      "first", min(stages))
print("session's shuffle partitions", spark.conf.get("spark.sql.shuffle.partitions"),
      spark.conf.get("spark.sql.adaptive.enabled"))
spark.stop()
print("cps.report", cps.report(spark, output=page))
"""


@pytest.fixture(scope="module")
def app_folder(tmp_path_factory):
    """The application's log folder, the page cps.report wrote after the run, and what it printed on stdout and
    stderr."""
    log_dir, local_dir = tmp_path_factory.mktemp("report-logs"), tmp_path_factory.mktemp("report-local")
    cps_page = tmp_path_factory.mktemp("cps") / "cps.html"
    running = cps_page.parent / "running.html"
    run = run_python(f"import sys; sys.argv = ['app', {str(log_dir)!r}, {str(local_dir)!r}, {str(cps_page)!r}, "
                     f"'{SLOW_PARTITION}', {str(running)!r}]\n" + APPLICATION, timeout=600)
    assert run.returncode == 0 and "app " in run.stdout, run.stderr[-3000:]
    assert f"cps.report {cps_page}" in run.stdout and f"running {running}" in run.stdout
    return log_dir / run.stdout.split("app ")[1].split()[0], cps_page, run.stdout, run.stderr


@pytest.fixture(scope="module")
def page(app_folder):
    return app_folder[1]


def test_the_command_writes_a_page_that_passes_the_browser_check(page, tmp_path):
    if browser.CHROMIUM is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    loaded = browser.load(page, tmp_path / "profile")
    assert loaded.console_errors == [] and loaded.failed_requests == []
    assert loaded.requests == [page.resolve().as_uri()]
    if os.environ.get(SCREENSHOT):
        Path(os.environ[SCREENSHOT]).write_bytes(loaded.screenshot)
    drawn = {f["key"]: f["marks"] for f in loaded.figures}
    assert {"timeline", "stages", "pipeline", "densities", "throughput"} <= set(drawn)
    assert all(marks > 0 for marks in drawn.values()), drawn


def test_a_stage_p99_and_the_hop_median_are_the_applications(page, app_folder):
    from cloudprofiler.analysis import open_application

    app = open_application(str(app_folder[0]))
    stages = app.stages().toPandas()
    html = page.read_text()
    tasks = app.tasks().toPandas()
    for stage in stages.itertuples():
        row = re.search(rf'<tr><td data-value="{float(stage.stage_id)!r}">{stage.stage_id}(?: \(attempt \d+\))?</td>'
                        r"(.*?)</tr>", html)
        cells = re.findall(r'<td(?: data-value="([^"]*)")?>([^<]*)</td>', row.group(1))
        p99_value, p99_text = cells[5]  # job, tasks, failed, p50, p90, p99
        assert float(p99_value) == pytest.approx(stage.p99_ns, rel=1e-12)
        durations = tasks[(tasks["stage_id"] == stage.stage_id) & (tasks["status"] == "SUCCESS")]
        assert durations["duration_ns"].min() <= float(p99_value) <= durations["duration_ns"].max()
    hop = app.pipeline(["source", "shuffled", "sink"]).toPandas().query("hop == 1").iloc[0]
    assert re.search(rf'<tr><td data-value="1.0">shuffled -&gt; sink</td><td data-value="{float(hop["count"])!r}">'
                     rf'[^<]*</td><td[^>]*>[^<]*</td><td data-value="{float(hop.p50_ns)!r}">', html)


def test_the_findings_name_the_worst_straggler_and_the_failed_attempt(page, app_folder):
    from cloudprofiler.analysis import open_application

    stragglers = open_application(str(app_folder[0])).stragglers().toPandas()
    assert SLOW_PARTITION in set(stragglers["partition"])  # the sleeping partition, among others a busy machine adds
    findings = re.findall(r'<li class="\w+" data-kind="(\w+)">([^<]*)</li>', page.read_text())
    named = [text for kind, text in findings if kind == "straggler" and not re.match(r"\d+ more stages? ha", text)]
    assert named
    for text in named:  # each names the worst straggler of its stage
        stage = int(re.match(r"stage (\d+)", text).group(1))
        worst = stragglers[stragglers["stage_id"] == stage].iloc[0]
        assert text.startswith(f"stage {stage}: partition {worst.partition} took {worst.ratio:.1f}x the median")
        assert f"the driver, host {worst.host})" in text
    [failed] = [text for kind, text in findings if kind == "failure"]
    assert re.fullmatch(rf"1 task attempt failed; the first: stage \d+, partition 1 on the driver, host "
                        rf"{re.escape(stragglers.host.iloc[0])}: RuntimeError: failing the first attempt on purpose; "
                        r"1 attempt retried a partition", failed), failed


def test_cps_report_after_the_run(app_folder):
    folder, cps_page = app_folder[:2]
    html = cps_page.read_text()
    assert f"<h1>Cloudprofiler report: {folder.name}</h1>" in html
    assert html.count('<figure class="plot"') >= 5
    # the analysis's own session, built after the profiled one in the same process, is not profiled
    assert [p.name for p in folder.parent.iterdir() if p.is_dir()] == [folder.name]


def test_cps_report_during_the_run_holds_every_record_logged_until_then(app_folder):
    """With no collection during the run (every 10 minutes), the report made before stop() has its executor collect
    its logs and the driver publish its tables first: its pipeline pairs every traced tuple, as the page after the
    run does, and it names the failed attempt."""
    running = (app_folder[1].parent / "running.html").read_text()

    def pipeline(page: str) -> list:
        table = page.split('<table class="pipeline">')[1].split("</table>")[0]
        return re.findall(r'<tr><td data-value="-?\d+.0">([^<]*)</td><td data-value="([\d.]+)">', table)

    assert pipeline(running) == pipeline(app_folder[1].read_text()) and len(pipeline(running)) == 4
    assert re.search(r'<li class="\w+" data-kind="failure">1 task attempt failed', running)


def test_cps_report_during_the_run_leaves_the_session_s_settings_and_takes_few_partitions(app_folder):
    """The analysis runs in a session of its own: the user's session keeps its settings (Spark's 200 shuffle
    partitions, adaptive execution off), and no stage of the report's jobs takes them (its small shuffles take two
    per core)."""
    said = app_folder[2]
    assert "session's shuffle partitions 200 false" in said
    stages, most = map(int, re.search(r"report's stages (\d+) most tasks (\d+)", said).groups())
    assert stages > 10 and most < 200, said


def test_a_report_made_beside_a_streaming_query_under_fifo_says_its_jobs_wait_for_the_batches(app_folder):
    """The application schedules FIFO (Spark's default) and runs an idle streaming query beside the report made
    during the run: one line says that each of the report's jobs waits for the batch job before it, and what FAIR
    would do (the report after the run, with no query running, says nothing)."""
    lines = [line for line in app_folder[3].splitlines() if "streaming query runs beside this report" in line]
    assert len(lines) == 1 and "FIFO" in lines[0] and "spark.scheduler.mode=FAIR" in lines[0], lines


def test_the_jobs_of_a_report_made_during_the_run_are_no_part_of_the_application_s_analysis(app_folder):
    """The report's jobs ran in the application, tagged: the analysis after the run leaves them out (the task table
    ends with the application's own stages), and their tasks logged no records."""
    from cloudprofiler.analysis import open_application

    first = int(re.search(r"report's stages \d+ most tasks \d+ first (\d+)", app_folder[2]).group(1))
    app = open_application(str(app_folder[0]))
    tasks = app.tasks().toPandas()
    assert tasks["stage_id"].max() < first and len(tasks) > 20, tasks["stage_id"].max()
    assert (tasks["duration_ns"].notna() & ~tasks["unbounded"]).all()  # each with its start and end records


def test_the_figures_drawn_as_their_sections_arrive_are_those_drawn_after_the_gather(app_folder, tmp_path):
    """report() draws each figure in a thread as soon as the sections it draws are in (plots.PLOTS): the same page
    as the figures drawn once every section is in, but for the moment it was made."""
    from cloudprofiler.analysis import open_application
    from cloudprofiler.analysis.report import render, report
    from cloudprofiler.analysis.report.data import gather

    app = open_application(str(app_folder[0]))
    early = report(app, tmp_path / "early.html", quiet=True).read_text()
    late = render(gather(app), tmp_path / "late.html", quiet=True).read_text()

    def timeless(page: str) -> str:
        return re.sub(r"(made \d{4}-\d\d-\d\d \d\d:\d\d UTC|<dc:date>[^<]*</dc:date>)", "", page)

    assert early.count("<svg") >= 5 and timeless(early) == timeless(late)


def test_a_folder_that_is_no_application_is_named(app_folder, tmp_path, capsys):
    from cloudprofiler import cli

    assert cli.main(["report", str(tmp_path), "-o", str(tmp_path / "none.html")]) == 2  # bad input: exit 2
    said = capsys.readouterr().err
    assert said.startswith("cloudprofiler report: ") and str(tmp_path) in said
    assert not (tmp_path / "none.html").exists()


def test_trace_points_on_other_ids_are_a_pipeline_of_their_own(page):
    table = page.read_text().split('<table class="pipeline">')[1].split("</table>")[0]
    rows = re.findall(r'<tr><td data-value="(-?\d+).0">([^<]*)</td><td data-value="([\d.]+)">', table)
    assert [(hop, name, float(tuples)) for hop, name, tuples in rows] == [
        ("-1", "end to end: source -&gt; sink", 60_000), ("0", "source -&gt; shuffled", 60_000),
        ("1", "shuffled -&gt; sink", 60_000), ("0", "other.a -&gt; other.b", 1000)]


# Two trace channels whose one id repeats 5,000 times on each: 25 M pairings, past what one worker pairs
REPEATED = r"""
import sys
import cloudprofiler as cp

cp.start(sys.argv[1])
with cp.Channel("repeated.a") as a, cp.Channel("repeated.b") as b:
    for _ in range(5000):
        a.log(7)
        b.log(7)
"""


def test_a_section_that_fails_is_named_and_the_others_are_shown(app_folder, tmp_path, capsys):
    from cloudprofiler import cli

    folder = Path(shutil.copytree(app_folder[0], tmp_path / app_folder[0].name))
    logged = run_python(f"import sys; sys.argv = ['log', {str(tmp_path / 'repeated')!r}]\n" + REPEATED)
    assert logged.returncode == 0, logged.stderr
    for file in (tmp_path / "repeated").rglob("*.arrows"):
        shutil.copy(file, folder / file.name)
    out = tmp_path / "report.html"
    # the command in this process, on the analysis session that the tests above started
    capsys.readouterr()
    assert cli.main(["report", str(folder), "-o", str(out)]) == 0
    run = capsys.readouterr()
    assert run.out.startswith("Findings\n") and run.out.rstrip().endswith(f"report: {out}")
    said = [line for line in run.err.splitlines() if line.startswith("cloudprofiler report: ")]
    left_out = [line for line in said if "left out" in line]  # the others: its progress
    assert len(left_out) == 1 and "the pipeline section is left out: hop repeated.a -> repeated.b" in left_out[0]
    assert "id 7" in left_out[0]
    assert any(line.endswith("] the stages section gathered") for line in said), said
    assert not any(line.endswith("] the pipeline section gathered") for line in said), said
    findings = run.out.split("\n\n")[0]
    assert "the report's pipeline section is left out" in findings
    html = out.read_text()
    assert '<table class="stages">' in html and "the report&#x27;s pipeline section is left out" in html
