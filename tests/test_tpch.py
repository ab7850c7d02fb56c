"""TPC-H from the real generator (tpchgen-cli) at a small scale factor: the eight tables in the specification's
proportions, a complete folder reused and an incomplete one replaced, and the 22 queries run on Spark (one session
for the module) with the results the specification's queries have at that scale, and the same results with every
operator timed (spark.cloudprofiler.operators)."""
import datetime
import os
import re
import time

import pyarrow.parquet as pq
import pytest

import cloudprofiler.spark as cps
from cloudprofiler.harness import tpch
from conftest import TPCH_SCALE, metric, plan_nodes


def test_the_generator_writes_the_eight_tables_in_the_specification_s_proportions(tpch_root):
    folder = tpch.scale_folder(tpch_root, TPCH_SCALE)
    assert folder.name == "sf0.01" and (folder / tpch.MARKER).is_file()
    rows = {t: pq.ParquetFile(folder / f"{t}.parquet").metadata.num_rows for t in tpch.TABLES}
    assert rows["region"] == 5 and rows["nation"] == 25
    for table in ("supplier", "customer", "part", "partsupp", "orders"):  # exactly SF x their count at SF 1
        assert rows[table] == round(tpch.ROWS_AT_SCALE_1[table] * TPCH_SCALE), rows
    # 1 to 7 lines per order, 4 on average: about 6,000,000 x SF
    assert rows["lineitem"] == pytest.approx(tpch.ROWS_AT_SCALE_1["lineitem"] * TPCH_SCALE, rel=0.02), rows


def test_a_complete_folder_is_reused_and_an_incomplete_one_replaced(tmp_path):
    folder = tpch.generate(tmp_path, 0.001)
    assert folder == tmp_path / "sf0.001" and sorted(p.name for p in tmp_path.iterdir()) == ["sf0.001"]
    marker = (folder / tpch.MARKER).stat().st_mtime_ns
    assert tpch.generate(tmp_path, 0.001) == folder and (folder / tpch.MARKER).stat().st_mtime_ns == marker
    (folder / tpch.MARKER).unlink()  # as a folder left by hand or by another tool: not whole
    (folder / "orders.parquet").write_bytes(b"cut short")
    time.sleep(0.01)
    assert tpch.generate(tmp_path, 0.001) == folder
    assert (folder / tpch.MARKER).is_file() and pq.ParquetFile(folder / "orders.parquet").metadata.num_rows == 1500
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sf0.001"]  # no temporary folder left beside it


def test_unknown_queries_and_scales_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no TPC-H query 'q23'"):
        tpch.query("q23")
    with pytest.raises(ValueError, match="must be > 0"):
        tpch.generate(tmp_path, 0)


@pytest.fixture(scope="module")
def spark(tpch_root, tmp_path_factory):
    session = (cps.builder(log_dir=str(tmp_path_factory.mktemp("tpch-logs"))).master("local[2]")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               # a pipeline whose generated code (with operator probes) fails to compile fails the query
               .config("spark.sql.codegen.fallback", "false").getOrCreate())
    tpch.register(session, tpch.scale_folder(tpch_root, TPCH_SCALE))
    yield session
    session.stop()


def test_the_22_queries_run_and_return_what_the_specification_s_queries_return_at_this_scale(spark):
    """At scale factor 0.01 every query returns rows. Q17's one row holds a null: no part of brand 23 in a MED BOX
    has a line under a fifth of its average quantity at this scale, and the sum over no rows is null. Q1 groups the
    lines shipped by 1998-09-02 into the specification's four (returnflag, linestatus) pairs."""
    results = {name: spark.sql(tpch.query(name)).collect() for name in tpch.QUERIES}
    assert {name: len(rows) for name, rows in results.items() if not rows} == {}
    assert [tuple(row) for row in results["q17"]] == [(None,)]
    assert all(v is not None for name, rows in results.items() if name != "q17" for row in rows for v in row), \
        {name: rows[:2] for name, rows in results.items()}
    q1 = results["q01"]
    assert [(r.l_returnflag, r.l_linestatus) for r in q1] == [("A", "F"), ("N", "F"), ("N", "O"), ("R", "F")]
    shipped = spark.table("lineitem").where(f"l_shipdate <= date '{datetime.date(1998, 9, 2)}'").count()
    assert sum(r.count_order for r in q1) == shipped
    # the row-count clauses: Q10 keeps its first 20 of more, Q3 its first 10
    assert len(results["q10"]) == 20 and len(results["q03"]) == 10
    assert os.path.basename(tpch.generator_program()) == "tpchgen-cli"
    spark.conf.set("spark.cloudprofiler.operators", "true")
    try:
        frames = {name: spark.sql(tpch.query(name)) for name in tpch.QUERIES}
        timed = {name: frame.collect() for name, frame in frames.items()}
        plan = frames["q05"]._jdf.queryExecution().executedPlan().toString()  # adaptive: the final plan, once run
    finally:
        spark.conf.unset("spark.cloudprofiler.operators")
    assert {name for name in results if timed[name] != results[name]} == set()
    assert "CloudprofilerProbe" in plan
    # within a pipeline an operator's time with its children holds its child's, task by task, so summed too
    pairs = [(name, *pair) for name, frame in frames.items()
             for pair in _nested_probes(frame._jdf.queryExecution().executedPlan())]
    assert len(pairs) > 100
    assert [(name, parent.toString()[:80], metric(parent, "cpTicks"), metric(child, "cpTicks"))
            for name, parent, child in pairs if metric(parent, "cpTicks") < metric(child, "cpTicks")] == []


def _nested_probes(plan):
    """(probe, the nearest probe below it in the same whole-stage-codegen pipeline) for every such pair."""
    def below(node, above):
        if node.nodeName() == "InputAdapter":  # the pipeline's input: another pipeline's, or none
            return
        if node.nodeName() == "CloudprofilerProbe":
            if above is not None:
                yield above, node
            above = node
        for i in range(node.children().size()):
            yield from below(node.children().apply(i), above)

    for node in plan_nodes(plan):
        if node.nodeName().startswith("WholeStageCodegen"):
            yield from below(node.children().apply(0), None)


def test_each_probe_has_one_counter_in_its_pipeline_and_the_counter_runs(spark):
    # the plans the bench's scale gets (sort-merge joins; adaptive execution off so that explain shows the plan that
    # runs): Spark generates q13's sort aggregate's consume code twice and keeps one copy, and each copy used to make
    # a counter of the probes in it; the one whose code never ran published its pipeline's whole span as its probe's
    # time (the merge join's 1.7 times its task's run time at scale 1)
    import contextlib
    import io

    settings = {"spark.cloudprofiler.operators": "true", "spark.sql.adaptive.enabled": "false",
                "spark.sql.autoBroadcastJoinThreshold": "-1"}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        made_in = re.compile(r"(cloudprofilerprobe_cpProbe_\d+) = new io\.cloudprofiler\.spark\.sql\.ProbeCounters\(")
        never_run, counters = {}, 0
        for name in tpch.QUERIES:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                spark.sql(tpch.query(name)).explain("codegen")
            for pipeline in out.getvalue().split("== Subtree")[1:]:
                made = made_in.findall(pipeline)
                counters += len(made)
                never_run[name] = never_run.get(name, 0) + sum(f"{c}.arrives()" not in pipeline for c in made)
    finally:
        for key in settings:
            spark.conf.unset(key)
    assert counters > 100 and {name: n for name, n in never_run.items() if n} == {}


def _scans_under_probes(plan) -> list:
    """(the ColumnarToRow probe's time and its standard error in ns, Spark's own scan time of the file scan under it in
    ms) per scan."""
    found = []
    for node in plan_nodes(plan):
        if node.nodeName() != "CloudprofilerProbe" or node.child().nodeName() != "ColumnarToRow":
            continue
        scan = node.child().child()
        scan = scan.child() if scan.nodeName() == "InputAdapter" else scan
        if scan.getClass().getSimpleName() == "FileSourceScanExec":
            ticks, time_ns = metric(node, "cpTicks"), metric(node, "cpTime")
            error = metric(node, "cpTicksError") * time_ns / ticks if ticks else 0
            found.append((time_ns, error, metric(scan, "scanTime")))
    return found


def test_a_scan_s_probe_holds_each_batch_spark_s_own_scan_time_counts(spark, tmp_path):
    """The probe above a ColumnarToRow times the scan's batches as they come, each exactly. A batch is decoded as its
    first row is asked for: one gap in 4,096 at every probe of the pipeline, which a sample of gaps (1 in 256) mostly
    missed, and counted 256 times where it hit. Spark's own scan time times the same batches inside that, in whole
    milliseconds a call: each scan's probe holds it, and holds little more than it where decoding is most of the
    work (gzip'd strings: a few milliseconds a batch of 4,096 rows, against tens of nanoseconds a row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    random = np.random.default_rng(7)
    for part in range(2):
        text = [random.bytes(150).hex() for _ in range(60_000)]
        pq.write_table(pa.table({"s": text}), tmp_path / f"part-{part}.parquet", compression="gzip",
                       row_group_size=20_000)
    settings = {"spark.cloudprofiler.operators": "true", "spark.sql.adaptive.enabled": "false"}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        frame = spark.read.parquet(str(tmp_path)).selectExpr("sum(length(s))")
        frame.collect()
        scans = _scans_under_probes(frame._jdf.queryExecution().executedPlan())
    finally:
        for key in settings:
            spark.conf.unset(key)
    assert len(scans) == 1, scans
    [(probe_ns, error_ns, spark_ms)] = scans
    assert spark_ms > 20 and probe_ns >= spark_ms * 1e6, scans
    assert probe_ns <= 1.5 * spark_ms * 1e6 + 3 * error_ns, scans


def test_the_bench_prints_each_run_s_time_and_cpu_for_both_sides_and_judges_both_totals(tpch_root):
    # the real command on the suite's small data: figures of every run, the JVM's CPU beside the time
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", "bench", "operators", "--scale", str(TPCH_SCALE),
                          "--data", str(tpch_root), "--queries", "q06,q14", "--repeat", "2", "--warmups", "0",
                          "--driver-memory", "1g", "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout)
    assert [q["query"] for q in figures["queries"]] == ["q06", "q14"]
    for q in figures["queries"]:
        assert q["results_equal"] is True and q["rows"] > 0 and len(q["off_s"]) == len(q["on_cpu_s"]) == 2
        # the JVM works at least a little for each run, and at most as long as its two cores could in the run
        for side in ("off", "on"):
            assert all(0 < cpu <= 2 * took + 0.05 for cpu, took in zip(q[f"{side}_cpu_s"], q[f"{side}_s"])), q
    for total in (figures["total"], figures["total_cpu"]):
        assert total["verdict"] in ("met", "not met", "not measurable") and len(total["added_runs"]) == 2
    # every timed task's operators against its run time: a share of it, never over it beyond their error
    agreement = figures["coverage"]
    assert agreement["tasks"] > 0 and agreement["verdict"] == "agree", agreement
    assert 0 <= agreement["share_min"] <= agreement["share_p50"] <= agreement["share_max"], agreement
    # the total of a run is its queries' sum
    assert figures["total"]["off_s"] == pytest.approx([sum(q["off_s"][i] for q in figures["queries"]) for i in (0, 1)])
