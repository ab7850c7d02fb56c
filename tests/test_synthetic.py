"""The synthetic application folder: the plugin's layout and tables, log files written by the native library in
simulated TSC domains, and a truth that every reported duration must hold inside its bound."""
import argparse
import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import cloudprofiler as cp
from cloudprofiler.calibration.spark import durations_in_reference
from cloudprofiler.harness.bench.analysis import Phase, judge, scale, shortfalls, sizes
from cloudprofiler.harness.synthetic import HostClock, Straggler, SyntheticSpec, make_application
from conftest import assert_same_sketches, assert_tables_as_declared

SPEC = SyntheticSpec(records=200_000, hosts=2, executors_per_host=2, jobs=3, partitions=8,
                     straggler=Straggler(job=1, partition=5, delay_ms=100.0))
CHANNELS = [p.channel for p in SPEC.pipeline]


def _table(path: Path) -> pa.Table:
    return cp.read_log(path)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_application(tmp_path_factory.mktemp("synthetic"), SPEC)


@pytest.fixture(scope="module")
def truth(made) -> pa.Table:
    return _table(made.truth_path)


def _true_ticks(truth: pa.Table, channel: str, ids: np.ndarray) -> np.ndarray:
    rows = truth.filter(pc.equal(truth.column("channel"), channel))
    order = np.argsort(rows.column("tuple_id").to_numpy())
    sorted_ids = rows.column("tuple_id").to_numpy()[order]
    at = np.searchsorted(sorted_ids, ids)
    assert np.array_equal(sorted_ids[at], ids), f"ids missing from the truth of {channel}"
    return rows.column("ref_tsc").to_numpy()[order][at]


def test_the_folder_has_the_plugins_layout_tables_and_metadata(made):
    app = made.path
    assert made.truth_path.parent == app.parent  # the truth is outside the application folder
    tasks, domains, probes = (_table(app / n) for n in ("spark-tasks.arrows", "tsc-domains.arrows",
                                                        "calibration.arrows"))
    assert_tables_as_declared(app, {"tasks", "tsc_domains", "calibration"})  # as the plugin declares them
    assert tasks.schema.field("job_id").type == pa.int32() and tasks.schema.field("launch_time_ms").type == pa.int64()
    assert probes.schema.field("round").type == pa.int32() and probes.schema.field("send_tsc").type == pa.int64()
    reference = probes.schema.metadata[b"reference.domain"].decode()
    assert domains.schema.metadata[b"reference.domain"].decode() == reference
    assert tasks.num_rows == made.tasks == 2 * SPEC.jobs * SPEC.partitions
    driver = cp.log_metadata(tasks)  # the driver's clock at application start, as CloudProfilerDriverPlugin writes it
    assert driver["tsc.domain"] == reference and float(driver["tsc.hz"]) > 1e8
    assert json.loads(driver["application.start.clock"])["tsc"] > 0

    domain_of = dict(zip(domains.column("executor_id").to_pylist(), domains.column("domain").to_pylist()))
    pid_of = dict(zip(domains.column("executor_id").to_pylist(), domains.column("pid").to_pylist()))
    folders = sorted(p.name for p in app.iterdir() if p.is_dir())
    assert folders == [f"worker-{h}-{e}" for h, e in ((1, 0), (1, 1), (2, 2), (2, 3))]
    for folder in folders:
        host, executor = folder.rsplit("-", 1)
        files = sorted((app / folder).glob("*.arrows"))
        assert {f.name.split(f".{host}.")[0] for f in files} == {*CHANNELS, "spark.task.start", "spark.task.end",
                                                                   SPEC.counter}
        for f in files:
            meta = cp.log_metadata(f)
            name = re.fullmatch(r"(.+)\.(worker-\d)\.(\d+)\.(\d+)\.arrows", f.name)
            assert (meta["channel.name"], meta["host"], meta["pid"]) == (name[1], host, int(name[3])) == (
                name[1], name[2], pid_of[executor])
            assert meta["closed"] and meta["records.dropped"] == 0 and meta["boot_id"] == reference
            assert meta["tsc.simulation"] is not None
            if meta["channel.name"].startswith("spark.task."):  # the executor's identity and TSC domain
                assert (meta["spark.executor_id"], meta["spark.host"], meta["tsc.domain"], meta["spark.app_id"]) == (
                    executor, host, domain_of[executor], made.app_id)
            else:  # cp_trace's channels name only their event: their process gives their domain
                assert meta["spark.event"] == "sql_trace" and "tsc.domain" not in meta
    # every host its own TSC domain, both executors of a host in it, the driver's machine the reference
    assert len({domain_of[e] for e in ("0", "1", "2", "3")}) == 2 and domain_of["0"] == domain_of["1"] != reference


def test_every_tuple_passes_every_trace_point_once_and_every_task_is_logged(made):
    app = made.path
    tuples = SPEC.records // len(CHANNELS)
    for channel in CHANNELS:
        ids = cp.read_log_dir(app, channel).column("tuple_id").to_numpy()
        assert np.array_equal(np.sort(ids), np.arange(tuples)), channel
    tasks = _table(app / "spark-tasks.arrows")
    for channel in ("spark.task.start", "spark.task.end"):
        logged = cp.read_log_dir(app, channel)
        assert sorted(logged.column("tuple_id").to_pylist()) == tasks.column("task_attempt_id").to_pylist()
    counted = cp.read_log_dir(app, SPEC.counter, kind="counters").column("count").to_numpy().sum()
    assert counted == tuples


@pytest.mark.parametrize("start, end", [("source", "parse"), ("parse", "join"), ("join", "sink"),
                                        ("source", "sink"), ("spark.task.start", "spark.task.end")])
def test_every_true_duration_lies_inside_its_reported_bound(made, truth, start, end):
    d = durations_in_reference(made.path, start, end)
    ids = d.column("tuple_id").to_numpy()
    true = (_true_ticks(truth, end, ids) - _true_ticks(truth, start, ids)).astype(np.float64)
    value, error = d.column("duration").to_numpy(), d.column("error").to_numpy()
    assert d.num_rows == (made.tasks if start.startswith("spark.") else SPEC.records // len(CHANNELS))
    assert np.isfinite(error).all() and not np.any(d.column("extrapolated").to_numpy(False))
    assert np.all(np.abs(value - true) <= error)
    if (start, end) == ("parse", "join"):  # the shuffle: half the tuples change hosts
        cross = d.column("start_domain").to_numpy(False) != d.column("end_domain").to_numpy(False)
        assert 0.3 < cross.mean() < 0.7 and set(d.filter(pa.array(cross)).column("path").to_pylist()) <= {
            "scenario3", "baseline"}


def test_the_straggler_takes_its_delay_longer_than_its_stage(made, truth):
    tasks = _table(made.path / "spark-tasks.arrows")
    row = tasks.filter(pc.equal(tasks.column("task_attempt_id"), made.straggler_task)).to_pylist()[0]
    assert (row["job_id"], row["partition"]) == (SPEC.straggler.job, SPEC.straggler.partition)
    stage = tasks.filter(pc.equal(tasks.column("stage_id"), row["stage_id"])).column("task_attempt_id").to_numpy()
    took = _true_ticks(truth, "spark.task.end", stage) - _true_ticks(truth, "spark.task.start", stage)
    # its delay (sleeps never return early) on top of its own work, which varies from task to task
    others = np.median(took[stage != made.straggler_task])
    delay = SPEC.straggler.delay_ms * 1e-3 * float(cp.log_metadata(tasks)["tsc.hz"])
    assert took[stage == made.straggler_task][0] > 0.5 * others + delay


def test_host_clock_is_the_librarys_simulation_and_inverts_it():
    rng = np.random.default_rng(3)
    machine = rng.integers(10**9, 10**17, 2000, dtype=np.int64)
    for clock in (HostClock(3 * 10**13, 31.0), HostClock(-10**12, -44.0), HostClock(7, 999.5)):
        ppt = round(clock.skew_ppm * 10**6)
        exact = [t + clock.offset + (t * ppt) // 10**12 for t in machine.tolist()]  # Python ints: no overflow
        assert clock.tsc(machine).tolist() == exact
        back = clock.machine(clock.tsc(machine))
        assert np.all((back <= machine) & (back >= machine - 1))


@pytest.mark.parametrize("spec, named", [
    (SyntheticSpec(records=10), "records=10"),
    (SyntheticSpec(hosts=0), "hosts=0"),
    (SyntheticSpec(straggler=Straggler(job=9)), "job=9"),
])
def test_a_bad_spec_is_refused_naming_the_value(tmp_path, spec, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        make_application(tmp_path, spec)
    assert not any(tmp_path.iterdir())


def test_the_analysis_bench_judges_records_per_second_heap_and_its_goals():
    phases = [Phase("make the folder", 4.0), Phase("open the application", 6.0, reads_records=False),
              Phase("report", 40.0, heap_bytes=768 * 2**20),
              Phase("tasks", 2.5, error="Py4JJavaError: java.lang.OutOfMemoryError: Java heap space"),
              Phase("calibration", 0.5, reads_records=False)]
    rows = judge(phases, records=100_000_000)
    assert [r["records_per_s"] for r in rows] == [25_000_000, None, 2_500_000, None, None]
    assert [r["heap_mib"] for r in rows] == [None, None, 768, None, None]
    assert [r["goal"] for r in rows] == [None, "< 5 s: missed", "< 45 s: met", None, None]
    assert rows[3]["error"].endswith("Java heap space")
    assert judge([Phase("report", 181.0)], 1, goals={"report": 180})[0]["goal"] == "< 180 s: missed"
    assert judge([Phase("report", 3.0, error="ValueError: x")], 100_000_000)[0]["goal"] == "< 45 s: failed"
    # the seconds goals are set for 100 M records: a 10 M or 1 B folder has none
    assert judge([Phase("report", 300.0)], 1_000_000_000)[0]["goal"] is None


def test_the_analysis_bench_reads_sizes_and_refuses_a_bad_one_naming_it():
    assert sizes("100M, 10m,1B,100_000_000") == [10_000_000, 100_000_000, 1_000_000_000]
    assert sizes("2.5k") == [2500]
    for bad in ("10X", "", "0", "-1M", "M"):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(repr(bad))):
            sizes(f"10M,{bad}")


def _run(records, open_s, report_s, heap_mib, executors_mib=None):
    phases = [Phase("open the application", open_s, heap_mib * 2**20), Phase("report", report_s, heap_mib * 2**20)]
    return {"records": records, "executors_heap_peak_mib": executors_mib,
            "phases": [dataclasses.asdict(p) for p in phases]}


def test_the_analysis_bench_judges_a_series_of_sizes_run_by_run():
    done = [{"records": 10_000_000, "runs": [_run(10_000_000, 2.0, 5.0, 300, 900)]},
            {"records": 100_000_000, "runs": [_run(100_000_000, 4.0, 40.0, 500, 1500),
                                              _run(100_000_000, 6.0, 30.0, 700, 1600),
                                              _run(100_000_000, 4.5, 44.0, 600, 1400)]},
            {"records": 1_000_000_000, "runs": [_run(1_000_000_000, 20.0, 600.0, 1100, 1700)]}]
    rows = scale(done)
    assert [r["records_per_s"] for r in rows] == [2_000_000, 2_500_000, 1_000_000_000 / 600]
    assert rows[1]["report_s"] == [40.0, 30.0, 44.0] and rows[1]["report_median"] == 40.0
    assert rows[1]["report_goal"] == "< 45 s: met in 3 of 3" and rows[1]["open_goal"] == "< 5 s: met in 2 of 3"
    assert rows[0]["report_goal"] is None and rows[2]["open_goal"] is None  # goals are set for 100 M
    assert [r["driver_heap_mib"] for r in rows] == [300, 700, 1100]
    assert [r["executors_heap_mib"] for r in rows] == [900, 1600, 1700]
    assert [r["heap_goal"] for r in rows] == ["<= 1,024 MiB: met"] * 2 + ["<= 1,024 MiB: missed"]
    assert rows[0]["linear"] is None
    assert rows[1]["linear"] == "1.25x the records/s of 10,000,000: linear"
    assert rows[2]["linear"] == "0.67x the records/s of 100,000,000: slower than linear"
    assert shortfalls(rows[0]) == []
    assert shortfalls(rows[1]) == ["open < 5 s: met in 2 of 3"]
    assert shortfalls(rows[2]) == ["driver heap <= 1,024 MiB: missed",
                                   "0.67x the records/s of 100,000,000: slower than linear"]
    # in local mode the executors share the driver's heap: no heap goal is judged
    local = scale([{"records": 10_000_000, "runs": [_run(10_000_000, 2.0, 5.0, 1500)]}])
    assert local[0]["executors_heap_mib"] is None and local[0]["heap_goal"] is None


@pytest.fixture(scope="module")
def analysed(made):
    from cloudprofiler.analysis import open_application

    return open_application(str(made.path))


def _ns(ticks: np.ndarray, analysed) -> np.ndarray:
    """True reference ticks in ns, at the reference frequency the analysis uses (the driver's tsc.hz)."""
    return ticks.astype(np.float64) * 1e9 / analysed.summary()["tsc_hz"]


def test_every_true_latency_across_the_shuffle_lies_inside_the_bound_the_analysis_reports(made, truth, analysed):
    start, end = "parse", "join"
    rows = analysed.latency(start, end).select("tuple_id", "latency_ns", "err_ns", "remote", "unbounded").toPandas()
    ids = rows["tuple_id"].to_numpy()
    true = _ns(_true_ticks(truth, end, ids) - _true_ticks(truth, start, ids), analysed)
    assert len(rows) == SPEC.records // len(CHANNELS) and not rows["unbounded"].any()
    assert 0.3 < rows["remote"].mean() < 0.7  # the shuffle sends half the tuples to the other host
    assert np.all(np.abs(rows["latency_ns"].to_numpy() - true) <= rows["err_ns"].to_numpy())


def test_every_true_task_duration_lies_inside_its_bound_and_the_straggler_is_named(made, truth, analysed):
    tasks = analysed.tasks().select("task_attempt_id", "duration_ns", "err_ns", "unbounded").toPandas()
    ids = tasks["task_attempt_id"].to_numpy()
    true = _ns(_true_ticks(truth, "spark.task.end", ids) - _true_ticks(truth, "spark.task.start", ids), analysed)
    assert len(tasks) == made.tasks and not tasks["unbounded"].any()
    assert np.all(np.abs(tasks["duration_ns"].to_numpy() - true) <= tasks["err_ns"].to_numpy())
    worst = analysed.stragglers().first()
    assert worst["task_attempt_id"] == made.straggler_task and worst["partition"] == SPEC.straggler.partition


def test_the_pipelines_one_pass_counts_what_the_join_of_a_hop_gives(analysed):
    rows = analysed.latency("parse", "join").select("latency_ns", "err_ns", "remote").toPandas()
    hop = analysed.pipeline(["parse", "join"]).where("hop = 0").first()
    assert (hop["count"], hop["remote_count"], hop["unbounded_count"]) == (len(rows), rows["remote"].sum(), 0)
    assert (hop["min_ns"], hop["max_ns"], hop["err_max_ns"]) == (
        rows["latency_ns"].min(), rows["latency_ns"].max(), rows["err_ns"].max())
    assert hop["mean_ns"] == pytest.approx(rows["latency_ns"].mean(), rel=1e-9)


def test_health_counts_the_values_outside_the_calibrated_span_as_a_pass_over_them_does(made, tmp_path):
    import shutil

    from cloudprofiler.analysis import open_application
    from pyspark.sql import functions as F

    copy = tmp_path / made.path.name
    shutil.copytree(made.path, copy)
    probes = _table(copy / "calibration.arrows")
    early = probes.filter(pc.less_equal(probes.column("round"), 2))
    with pa.ipc.new_file(copy / "calibration.arrows", probes.schema) as writer:  # rounds after the first job lost
        writer.write_table(early)
    app = open_application(str(copy))
    health = app.health().where("kind = 'extrapolated'").toPandas().set_index("subject")["count"].to_dict()
    counted = {}
    for frame in (app.records(), app.counters()):
        for r in frame.groupBy("channel").agg(F.sum(F.col("extrapolated").cast("long")).alias("n")).collect():
            if r["n"]:
                counted[r["channel"]] = r["n"]
    assert counted and health == counted


def test_a_phase_that_stalls_is_cancelled_and_reported_and_the_next_one_runs(analysed, monkeypatch):
    from cloudprofiler.harness.bench import analysis as bench

    monkeypatch.setattr(bench, "PHASE_TIMEOUT_S", 3.0)
    phases = []
    endless = analysed.spark.range(10**11).selectExpr("sum(id % 7)")  # a minute or more, if not cancelled
    bench._timed(phases, "stalls", endless.collect, spark=analysed.spark)
    assert bench._timed(phases, "next", lambda: analysed.spark.range(10).count(), spark=analysed.spark) == 10
    assert phases[0].error == "cancelled after 3 s" and phases[0].seconds < 30
    assert phases[1].error is None


def test_the_jvm_counts_every_hop_as_the_python_workers_do(analysed):
    """Every ordered pair of the trace points across two simulated hosts (each path of the bounds: scenarios 1-3
    and the baseline), counted in the JVM and in Python workers alike."""
    from cloudprofiler.analysis import hops

    assert_same_sketches(analysed, CHANNELS, hops.ordered_pairs(CHANNELS))



def test_the_jvm_takes_every_duration_as_the_python_workers_do(analysed):
    """The durations of a join of records (every pair of two trace points across the hosts, and every task), in the
    JVM and in Python workers: the same rows, value for value."""
    from pyspark.sql import functions as F

    from cloudprofiler.analysis.joins import merge_join, with_durations

    def ends(start: str, end: str) -> list:
        return [analysed.log_frame(channel, "records", ["tuple_id", "tsc", "domain_id"]).select(
            "tuple_id", F.col("tsc").alias(f"{side}_tsc"), F.col("domain_id").alias(f"{side}_domain_id"))
            for channel, side in ((start, "start"), (end, "end"))]

    for joined, what in ((merge_join(*ends("source", "sink"), "tuple_id"), "trace points"),
                         (merge_join(*ends("spark.task.start", "spark.task.end"), "tuple_id", "full_outer"), "tasks")):
        jvm, python = (with_durations(joined, analysed.timebase, in_jvm=in_jvm).toPandas()
                       .sort_values(["tuple_id", "start_tsc"], ignore_index=True) for in_jvm in (True, False))
        assert len(jvm) > 0 and set(jvm["path"]) - {"unbounded"}, what
        pd.testing.assert_frame_equal(jvm, python, check_exact=True)
