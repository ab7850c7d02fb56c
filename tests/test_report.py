"""The report from ReportData built by hand (tests/report_sample.py): the findings say what the numbers say, the
terminal summary prints them, and the HTML page loads offline in headless chromium with every figure drawn."""
import dataclasses
import math
import re

import numpy as np
import pandas as pd
import pytest

import browser
import report_sample
from cloudprofiler.analysis.report import render
from cloudprofiler.analysis.report.findings import SEVERITIES, findings

chromium = pytest.mark.skipif(browser.CHROMIUM is None, reason="chromium is not installed (make deps installs it)")


def _texts(data, kind):
    return [f.text for f in findings(data) if f.kind == kind]


def test_the_straggler_is_named_with_its_ratio_partition_executor_and_host():
    s = report_sample.STRAGGLER
    first = _texts(report_sample.sample(), "straggler")[0]
    assert first.startswith(f"stage {s['stage_id']}: partition {s['partition']} took {s['ratio']}x the median")
    assert f"executor {s['executor_id']}, host {s['host']}" in first


def test_the_straggler_says_why_when_sparks_metrics_show_it():
    """The reasons come from the straggler's metrics: records beside the median, GC, fetch wait, spills."""
    data = report_sample.sample()
    stragglers = data.stragglers.copy()
    worst = stragglers["ratio"].idxmax()
    assert _texts(data, "straggler")[0].split("; ")[1].endswith(")")  # no metrics (an older task table): no reason
    metrics = {"spark_duration_ms": 2000.0, "jvm_gc_time_ms": 500.0, "shuffle_fetch_wait_ms": 300.0,
               "scheduler_delay_ms": 100.0, "memory_spilled_bytes": 3 * 2**30, "disk_spilled_bytes": 160 * 2**20,
               "records_read": 700_000.0, "median_records_read": 100_000.0}
    for column, value in metrics.items():
        stragglers[column] = float("nan")
        stragglers.loc[worst, column] = value
    text = _texts(dataclasses.replace(data, stragglers=stragglers), "straggler")[0]
    assert ("): it read 7.0x the median records (700,000 against 100,000), GC 25% of its time (500 ms), waiting for "
            "shuffle blocks 15% of its time (300 ms), it spilled 160 MiB to disk (3 GiB in memory)") in text
    stragglers.loc[worst, ["jvm_gc_time_ms", "records_read", "disk_spilled_bytes"]] = [20.0, 120_000.0, 0.0]
    text = _texts(dataclasses.replace(data, stragglers=stragglers), "straggler")[0]
    assert "): waiting for shuffle blocks 15% of its time (300 ms)" in text
    assert "GC" not in text and "median records" not in text and "spilled" not in text


def test_the_hop_with_the_largest_share_of_the_p99_is_named():
    assert _texts(report_sample.sample(), "hop") == [
        "join -> sink adds 71% of the end-to-end p99 (8.1 ms of 11.4 ms, source -> sink)"]


def test_the_hop_between_operators_that_holds_a_querys_row_latency_is_named():
    def hop(source, target, p50_ns, rows=400):
        return {"sql_execution_id": 4, "from_probe_id": source[1], "from_operator": source[0], "to_probe_id": target[1],
                "to_operator": target[0], "rows": rows, "min_ns": p50_ns / 2, "p50_ns": p50_ns, "p90_ns": p50_ns * 1.5,
                "p99_ns": p50_ns * 2, "max_ns": p50_ns * 3, "mean_ns": p50_ns}

    scan, udf, project = ("Range", 1), ("BatchEvalPython", 2), ("Project", 3)
    # 40,000 rows through the UDF in a query of 100 s of task time
    # (their shares unknown: the operator's own finding says nothing)
    queries = pd.DataFrame([{"sql_execution_id": 4, "query_task_s": 100.0, "shown": True}])
    operators = pd.DataFrame([{"sql_execution_id": 4, "probe_id": probe, "rows": 40_000, "share": math.nan}
                              for probe in (1, 2, 3)])
    data = dataclasses.replace(report_sample.sample(), queries=queries, operators=operators, operator_hops=pd.DataFrame(
        [hop(scan, udf, 90e6), hop(udf, project, 300.0)]))
    assert _texts(data, "row_hop") == [
        "query (SQL execution 4): its sampled rows spend 100% of their time between operators from Range (probe 1) "
        "to the Python UDF (BatchEvalPython, probe 2): p50 90 ms, p99 180 ms (400 rows), against 300 ns in the "
        "medians of the query's 1 other hop"]
    # a sample of under 100 rows shows its max, not a p99 that would only be the max by another name
    few = pd.DataFrame([hop(scan, udf, 90e6, rows=2), hop(udf, project, 300.0)])
    few = dataclasses.replace(data, operator_hops=few)
    assert "p50 90 ms, max 270 ms (2 rows), against" in _texts(few, "row_hop")[0]
    # no line where the hops share the time, nor for a hop of nanoseconds however large its share
    for hops in ([hop(scan, udf, 90e6), hop(udf, project, 60e6)], [hop(scan, udf, 9e3), hop(udf, project, 300.0)]):
        assert _texts(dataclasses.replace(data, operator_hops=pd.DataFrame(hops)), "row_hop") == []
    # nor for a hop whose rows' time is a small part of the query's: 5 rows (a broadcast's build side) at 90 ms are
    # 0.45 s of 100 s; 1,200 rows are 108 s, the line again
    hops = pd.DataFrame([hop(scan, udf, 90e6), hop(udf, project, 300.0)])
    for rows, lines in ((5, 0), (1_200, 1)):
        few_rows = dataclasses.replace(data, operators=operators.assign(rows=rows), operator_hops=hops)
        assert len(_texts(few_rows, "row_hop")) == lines


def test_the_cross_host_bound_says_which_durations_are_uncertain():
    [text] = _texts(report_sample.sample(), "bound")
    assert text.startswith("cross-host bounds are 13 us (median over 80,000 durations between hosts, largest 21 us): "
                           "durations under 130 us are uncertain by more than 10%")


def test_findings_follow_the_numbers():
    """Change the numbers and the findings change with them: nothing is canned."""
    data = report_sample.sample()
    pipeline = data.pipeline.copy()
    pipeline.loc[pipeline["hop"] == 0, ["p99_ns", "share_of_p99"]] = [9.5e6, 9.5 / 11.4]
    pipeline.loc[pipeline["hop"] == 1, ["p99_ns", "share_of_p99"]] = [2.0e6, 2.0 / 11.4]
    stragglers = data.stragglers.copy()
    worst = stragglers["ratio"].idxmax()
    stragglers.loc[worst, ["ratio", "duration_ns", "partition"]] = [4.25, 425e6, 3]
    bounds = data.hop_bounds.copy()
    bounds.loc[bounds["remote"], ["err_p50_ns", "err_max_ns"]] = [48e3, 60e3]
    bounds.loc[bounds["remote"] & (bounds["hop"] == 1), "unbounded"] = 4_000
    changed = dataclasses.replace(data, pipeline=pipeline, stragglers=stragglers, hop_bounds=bounds)
    assert _texts(changed, "hop")[0].startswith("source -> join adds 83% of the end-to-end p99 (9.5 ms of 11.4 ms")
    assert _texts(changed, "straggler")[0].startswith("stage 1: partition 3 took 4.2x the median (425 ms against")
    assert _texts(changed, "bound")[0].startswith("cross-host bounds are 48 us (median over 76,000 durations")
    assert "durations under 480 us are uncertain" in _texts(changed, "bound")[0]
    assert _texts(changed, "unbounded") == [
        "4,000 of 120,000 traced durations (3.3%) have no error bound: no calibration relates their hosts' clocks, "
        "so they are shown without one"]


def test_lost_records_and_cut_files_come_first():
    found = findings(report_sample.with_problems())
    first = {f.kind: f.text for f in found[:2]}
    assert first["drops"].startswith(
        "2,500 records were dropped (0.21% of those logged; full buffers) in channel sink: counts")
    assert "worker-b-2/sink-41.arrows" in first["cut_file"]
    ranks = [SEVERITIES.index(f.severity) for f in found]
    assert ranks == sorted(ranks)


def test_the_failed_attempt_is_described():
    [text] = _texts(report_sample.sample(), "failure")
    assert text == ("1 task attempt failed; the first: stage 2, partition 5 on executor 4, host worker-b: "
                    "ExceptionFailure(RuntimeError: lost a shuffle block); 1 attempt retried a partition")


def test_nothing_to_report_says_so():
    found = findings(report_sample.quiet())
    assert [f.text for f in found] == ["Nothing stands out: 1 stage, 8 task attempts, no failed attempt, no notable "
                                       "straggler, no record lost, no dominant hop"]


def test_terminal_summary(tmp_path, capsys):
    out = render(report_sample.sample(), tmp_path / "r.html")
    printed = capsys.readouterr().out
    assert printed.startswith("Findings\n !")
    assert "join -> sink adds 71% of the end-to-end p99" in printed
    assert re.search(r"application +app-20261123101500-0001", printed)
    assert re.search(r"end to end: source -> sink +60,000 +40,000 +2.2 ms +11.4 ms", printed)
    # every straggler a paragraph (its words are too long for a table's column), the slowest first
    assert "\nStragglers\n - stage 1, partition 7 on executor 2, host worker-b: 1.18 s, 11.8x the median\n" in printed
    assert printed.rstrip().endswith(f"report: {out}")


def test_a_pipeline_whose_hops_paired_nothing_yet_shows_no_share(tmp_path):
    """A running application's report may find trace channels whose files hold no tuple both share yet: the hops
    have no p99, so no share of it (None, as pipeline_rows gives it); the table shows "-", and no finding names a
    hop (the report once failed whole on it)."""
    data = report_sample.sample()
    pipeline = data.pipeline.copy().astype({"share_of_p99": object})
    pipeline["share_of_p99"] = None
    pipeline.loc[pipeline["hop"] >= 0, ["count", "p50_ns", "p99_ns", "max_ns"]] = [0, None, None, None]
    unpaired = dataclasses.replace(data, pipeline=pipeline)
    assert _texts(unpaired, "hop") == []
    page = render(unpaired, tmp_path / "unpaired.html", quiet=True).read_text()
    table = page.split('<table class="pipeline">')[1].split("</table>")[0]
    assert table.count("<td>-</td>") >= len(pipeline), table


def test_sections_without_data_say_so_in_one_line(tmp_path):
    page = render(report_sample.quiet(), tmp_path / "quiet.html", quiet=True).read_text()
    notes = dict(re.findall(r'<section id="(\w+)"><h2>[^<]*</h2><p class="note">([^<]*)</p>(?!<p class="caption">)',
                            page))
    assert notes == {
        "pipeline": "No trace channels (cp_trace in SQL, cps.trace in Python): no pipeline to measure.",
        "densities": "No trace channels (cp_trace in SQL, cps.trace in Python): no pipeline to measure.",
        "calibration": "One TSC domain (laptop-boot): every duration is measured on one clock, nothing to calibrate.",
        "health": "No problem found in the logs.",
        "queries": "Operator timing was off: run with spark.cloudprofiler.operators=true (or spark.conf.set(&quot;"
                   "spark.cloudprofiler.operators&quot;, &quot;true&quot;) before the queries) to time every SQL "
                   "operator.",
    }
    assert page.count('<figure class="plot"') == 3  # timeline, stages, throughput
    streaming_only = dataclasses.replace(report_sample.quiet(), operators_timed=True, streaming_executions_timed=40)
    page = render(streaming_only, tmp_path / "streaming.html", quiet=True).read_text()
    assert ('<section id="queries"><h2>Queries</h2><p class="note">Operators were timed in 40 micro-batches of '
            'streaming queries only, which the Streaming section shows per batch (app.batch_operators()): no other '
            'SQL execution has timed operators.</p>') in page


@chromium
def test_the_page_loads_offline_with_every_figure_drawn(tmp_path):
    page = render(report_sample.sample(), tmp_path / "report.html", quiet=True)
    loaded = browser.load(page, tmp_path / "profile")
    assert loaded.console_errors == []
    assert loaded.requests == [page.resolve().as_uri()]
    assert loaded.failed_requests == []
    assert [f["key"] for f in loaded.figures] == ["timeline", "stages", "pipeline", "densities", "throughput",
                                                  "calibration"]
    for figure in loaded.figures:
        assert figure["marks"] >= 3 and figure["width"] > 800 and figure["height"] > 150, figure
    assert loaded.sections == ["findings", "summary", "timeline", "stages", "queries", "pipeline", "densities",
                               "throughput", "calibration", "health"]
    assert loaded.text.index("join -> sink adds 71%") < loaded.text.index("application\tapp-20261123101500-0001")
    _assert_not_blank(loaded.screenshot)


@chromium
def test_a_sampled_timeline_still_draws_and_says_so(tmp_path):
    data = report_sample.sample()
    many = data.tasks.sample(n=6_000, replace=True, random_state=1).reset_index(drop=True)
    many["start_t_ns"] += np.random.default_rng(2).uniform(0, 2e9, len(many))
    many["end_t_ns"] = many["start_t_ns"] + many["duration_ns"]
    page = render(dataclasses.replace(data, tasks=many, tasks_total=50_000), tmp_path / "many.html", quiet=True)
    assert "6,000 of 50,000 attempts drawn" in page.read_text()
    loaded = browser.load(page, tmp_path / "profile")
    assert loaded.console_errors == [] and loaded.failed_requests == []
    timeline = next(f for f in loaded.figures if f["key"] == "timeline")
    assert timeline["marks"] >= 1  # the bars, rasterized into an image inside the SVG


@chromium
def test_the_browser_check_sees_errors_requests_and_empty_figures(tmp_path):
    """The check above can fail: a script error, a fetched image and a figure with axes only are each seen."""
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots()
    from cloudprofiler.analysis.report.plots import _render

    page = tmp_path / "bad.html"
    page.write_text(f'<html><body><script>undefinedFunction()</script><img src="http://example.invalid/x.png">'
                    f'<figure class="plot" data-plot="empty">{_render(fig, "empty")}</figure></body></html>')
    loaded = browser.load(page, tmp_path / "profile")
    assert loaded.console_errors
    assert "http://example.invalid/x.png" in loaded.requests and loaded.failed_requests
    assert [f["marks"] for f in loaded.figures] == [0]


def _assert_not_blank(png: bytes) -> None:
    import io

    import matplotlib.image

    pixels = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert len(png) > 50_000 and pixels.shape[0] >= 1000
    assert pixels[..., :3].std() > 0.05  # text and figures, not one colour


def test_other_health_warnings_become_findings_in_their_own_words():
    data = report_sample.sample()
    data.health = pd.DataFrame([
        {"kind": "uncalibrated", "severity": "warning", "subject": "c-boot#1", "count": 1200,
         "message": "TSC domain c-boot#1 has no calibration: its 1200 records are unbounded"},
        {"kind": "uncalibrated", "severity": "warning", "subject": "d-boot#1", "count": 10, "message": "d"},
        {"kind": "open_file", "severity": "info", "subject": "x.arrows", "count": 1, "message": "x.arrows is open"}])
    assert _texts(data, "uncalibrated") == [
        "TSC domain c-boot#1 has no calibration: its 1200 records are unbounded (and 1 more like it)"]
    assert _texts(data, "open_file") == []


def test_figures_use_no_math_text(monkeypatch):
    """matplotlib's default log-axis labels are math text, drawn with math fonts that a stale font cache may lack
    (then every report warns about each missing font): the report's own labels need none."""
    import matplotlib.mathtext

    from cloudprofiler.analysis.report.plots import all_plots

    def refuse(self, text, *args, **kwargs):
        raise AssertionError(f"math text drawn: {text!r}")

    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", refuse)
    for data in (report_sample.sample(), report_sample.with_problems()):
        busiest = data.throughput["channel"] == data.throughput["channel"].iloc[0]
        assert not busiest.all()
        data.throughput.loc[busiest, "records"] *= 1000  # channels far apart: a log-scale throughput axis
        assert [plot.key for plot in all_plots(data) if plot.svg] == [
            "timeline", "stages", "pipeline", "densities", "throughput", "calibration"]
