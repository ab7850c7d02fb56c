"""Rules switching a running streaming query in local mode and on a real standalone cluster (a master and two
workers, each executor a JVM of its own with its own Python workers): the query's SQL and Python trace channels go
from buffered to null, back to buffered, then to downsample:4 with cps.set_rules. In every executor and Python
worker, records under a rule stop within a second of the next change and records resume in the first batch after
it, judged from the files' TSCs against the change record in rules-changes.arrows; every call the query made is
counted in some file."""
import threading
import time

import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.harness.standalone import small_executors, wait_for_collection, wait_for_executors

CHANNELS = ("strm", "pystrm")
PHASES = ["null", "buffered", "downsample:4"]  # after "buffered" at start
PHASE_SECONDS = 3.0
SWITCH_SECONDS = 1.0


def rules_of(handler: str) -> str:
    return ";".join(f"{channel}={handler}" for channel in CHANNELS)


# local mode: one executor, in the driver's JVM; the standalone cluster: two, each a JVM of its own
@pytest.fixture(scope="module", params=["local[2]", "standalone"])
def run(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("streaming-rules")
    log_dir = base / "logs"
    executors = 2 if request.param == "standalone" else 1
    master = request.param
    if master == "standalone":
        master = request.getfixturevalue("standalone")[0]  # conftest's, shared with other modules
    builder = cps.builder(log_dir=str(log_dir), local_dir=str(base / "executor-local"), rules=rules_of("buffered"))
    spark = (small_executors(builder.master(master), 2).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    try:
        if executors > 1:
            wait_for_executors(spark, executors)
        deadline = time.monotonic() + 120
        counted, tracing, untraced = [], threading.Event(), threading.Event()
        tracing.set()

        def each_batch(batch, _):  # while the test traces: when each batch ran, the rows it traced
            if tracing.is_set():  # one job: the SQL trace point, then the Python one, on every row
                began = cp.tsc()
                traced = cps.trace(batch.selectExpr("cp_trace('strm', value) as value"), "pystrm", "value")
                counted.append((began, traced.selectExpr("count(value)").first()[0], cp.tsc()))
            else:  # batches run one after the other: none traces any more
                untraced.set()

        query = (spark.readStream.format("rate").option("rowsPerSecond", 2000).option("numPartitions", 2).load()
                 .writeStream.foreachBatch(each_batch).trigger(processingTime="100 milliseconds").start())
        while len(counted) < 3 and query.isActive and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(PHASE_SECONDS)
        for handler in PHASES:
            cps.set_rules(spark, rules_of(handler))
            time.sleep(PHASE_SECONDS)
        tracing.clear()
        assert untraced.wait(60), "the query ran no batch after tracing stopped"
        query.stop()
        app_id = spark.sparkContext.applicationId
    finally:
        spark.stop()
    app = log_dir / app_id
    wait_for_collection(base / "executor-local", app_id)
    with ipc.open_file(app / "rules-changes.arrows") as reader:
        changes = reader.read_all()
    files = {channel: [(cp.log_metadata(t), t, p) for p in cp.log_files(app) if p.name.startswith(f"{channel}.")
                       for t in [cp.read_log(p)]] for channel in CHANNELS}
    return dict(changes=changes.to_pylist(), batches=counted, files=files, executors=executors)


def test_the_changes_are_recorded_with_the_drivers_tsc(run):
    assert [c["version"] for c in run["changes"]] == [0, 1, 2, 3]
    assert [c["rules"] for c in run["changes"]] == [rules_of(h).replace(";", "\n") for h in ["buffered", *PHASES]]
    tscs = [c["tsc"] for c in run["changes"]]
    assert tscs == sorted(tscs) and all(b - a >= PHASE_SECONDS * cp.tsc_frequency().hz * 0.9
                                        for a, b in zip(tscs[1:], tscs[2:]))


@pytest.mark.parametrize("channel", CHANNELS)
def test_records_stop_and_resume_within_a_second_of_each_change_in_every_process(run, channel):
    hz = cp.tsc_frequency().hz
    changes = [c["tsc"] for c in run["changes"]] + [float("inf")]
    rules = [f"{channel}={h}" for h in ["buffered", *PHASES]]
    segments = run["files"][channel]
    # the JVM channel lives in each executor; the Python one in each worker, a channel per task
    processes = {meta["pid"] for meta, _, _ in segments}
    executors = {path.parent for _, _, path in segments}
    assert len(executors) == run["executors"] and len(processes) >= run["executors"]
    first_after = [float("inf")] * len(rules)

    def phase_of(meta):  # the change whose rule it took: the last one with that rule before the segment began
        began = (meta["switch.in"] or meta["open.clock"])["tsc"]  # switch.in is null for a channel's first file
        return max(k for k, rule in enumerate(rules) if rule == meta["rules.rule"] and changes[k] <= began)

    for meta, table, path in segments:
        phase = phase_of(meta)
        tscs = table["tsc"].to_pylist()
        if tscs:  # under a rule only once it was set, and no longer than a second after the next change
            assert changes[phase] <= min(tscs) and max(tscs) <= changes[phase + 1] + SWITCH_SECONDS * hz, path
            first_after[phase] = min(first_after[phase], min(tscs))
        handler = meta["rules.rule"].split("=")[1]
        assert meta["closed"], path
        if handler == "null":
            assert tscs == [], path  # records stopped
        elif handler == "buffered":
            assert len(tscs) == meta["records.logged"], path  # every call kept
        else:
            assert len(tscs) <= meta["records.logged"] // 4 + 2, path
    for executor in executors:  # each executor logged again after the change back to buffered, and to downsample
        logged = {phase_of(meta) for meta, table, path in segments if path.parent == executor and table.num_rows}
        assert {2, 3} <= logged, executor
    # records resumed in the first batch that began once every process had switched
    for phase in (2, 3):
        began, _, ended = next(b for b in run["batches"] if b[0] >= changes[phase] + SWITCH_SECONDS * hz)
        assert changes[phase] <= first_after[phase] <= ended, (phase, first_after, changes, began, ended)


@pytest.mark.parametrize("channel", CHANNELS)
def test_every_call_of_the_query_is_counted_in_some_file(run, channel):
    rows = [count for _, count, _ in run["batches"]]
    assert len(rows) > len(PHASES) and sum(rows) > 0
    assert sum(meta["records.logged"] for meta, _, _ in run["files"][channel]) == sum(rows)
