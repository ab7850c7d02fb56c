"""Rules in Spark, in local mode and with two executor processes (local-cluster): a cp_trace channel of running jobs
switched from buffered to null, back, and to downsample:4 with cps.set_rules in every executor, and the channels of a
Python trace point with it; bad rules refused on the driver while the old ones stay; every accepted change in
rules-changes.arrows."""
import re
import threading
import time

import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps

PHASES = ["sqlr=null;pyr=null", "sqlr=buffered;pyr=buffered", "sqlr=downsample:4;pyr=downsample:4"]
PHASE_SECONDS = 3.0
SWITCH_SECONDS = 1.0  # records stop and resume within this of a change
# Python workers: the executor learns the change, writes its rules file, the workers' library reads it
PYTHON_SWITCH_SECONDS = 1.0


# local mode shares the driver's library with its executor; local-cluster runs two executor processes, each of which
# must learn the change from the driver
@pytest.fixture(scope="module", params=["local[2]", "local-cluster[2,1,1024]"])
def run(request, tmp_path_factory):
    """SQL and Python trace jobs run back to back, each in a thread, while the rules change; logs read after stop()."""
    log_dir = tmp_path_factory.mktemp("spark-logs")
    spark = (
        cps.builder(log_dir=str(log_dir), local_dir=str(tmp_path_factory.mktemp("spark-local")),
                    rules="other=null;sqlr=buffered")
        .master(request.param)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    stop = threading.Event()
    jobs = []

    def sql_loop():
        while not stop.is_set():
            jobs.append(spark.sql("select sum(t) from (select cp_trace('sqlr', id) as t from range(0, 2000, 1, 2))")
                        .collect()[0][0])

    def python_loop():  # a loop of its own: its jobs take longer, and must not leave gaps in the SQL one
        while not stop.is_set():
            cps.trace(spark.range(0, 2000, numPartitions=2), "pyr", "id").count()

    workers = [threading.Thread(target=sql_loop), threading.Thread(target=python_loop)]
    for worker in workers:
        worker.start()
    try:
        while not jobs and workers[0].is_alive():  # the first job opens the channel (and compiles the query)
            time.sleep(0.05)
        time.sleep(PHASE_SECONDS)
        started = cps.rules(spark)
        changes, refused = [], []
        for rule in PHASES:
            before = cp.tsc()
            version = cps.set_rules(spark, rule)
            changes.append((rule, version, before, cp.tsc()))
            if rule == PHASES[0]:
                for bad in ("sqlr=nosuch", "sqlr=buffered;sqlr=xoy:1"):
                    with pytest.raises(cp.InvalidArgumentError) as error:
                        cps.set_rules(spark, bad)
                    refused.append((str(error.value), cps.rules(spark)))
                # the SQL functions, in a task (an executor's, which asks its driver, on local-cluster)
                sql = spark.sql("select cp_set_rules('sqlr=nosuch'), cp_rules() from range(1)").first()
            time.sleep(PHASE_SECONDS)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
        folder = cps.log_folder(spark)
        spark.stop()
    files = [p for p in cp.log_files(folder) if p.name.startswith("sqlr.")]
    processes = {}  # each executor process switches its own series of files
    for table in map(cp.read_log, files):
        processes.setdefault(cp.log_metadata(table)["pid"], []).append((cp.log_metadata(table), table))
    segments = [sorted(series, key=lambda mt: mt[0]["rules.segment"]) for series in processes.values()]
    python = [cp.log_metadata(cp.read_log(p)) for p in cp.log_files(folder) if p.name.startswith("pyr.")]
    return dict(folder=folder, started=started, changes=changes, refused=refused, sql=sql, segments=segments,
                jobs=jobs, python=python)


def test_the_rules_at_start_come_from_the_option(run):
    assert run["started"] == ["other=null", "sqlr=buffered"]
    assert run["jobs"] and all(total == sum(range(2000)) for total in run["jobs"])  # traced ids unchanged


def test_bad_rules_are_refused_naming_them_and_the_old_ones_stay(run):
    (first, rules_after_first), (second, rules_after_second) = run["refused"]
    assert "line 1 'sqlr=nosuch': unknown handler 'nosuch'" in first
    assert re.search(r"line 2 'sqlr=xoy:1'.*takes 2 parameter", second)
    assert rules_after_first == rules_after_second == ["sqlr=null", "pyr=null"]


def test_sql_functions_set_and_read_the_rules_from_a_task(run):
    refusal, rules = run["sql"]
    (first, rules_after_first), _ = run["refused"]
    assert refusal == first  # the driver's refusal, as a result: the rules in force stay
    assert rules.splitlines() == rules_after_first


def test_each_change_switches_the_running_channel_within_a_second(run, request):
    executors = 2 if request.node.callspec.params["run"].startswith("local-cluster") else 1
    assert len(run["segments"]) == executors
    for segments in run["segments"]:
        _switched_within_a_second(run, segments)


def _switched_within_a_second(run, segments):
    hz = cp.tsc_frequency().hz
    assert [meta["rules.rule"] for meta, _ in segments] == ["sqlr=buffered", *(p.split(";")[0] for p in PHASES)]
    for number, (meta, table) in enumerate(segments):
        assert meta["closed"] and meta["records.logged"] > 0  # jobs ran in every phase
        tscs = table["tsc"].to_pylist()
        if number:
            _, version, before, after = run["changes"][number - 1]
            assert version == number
            assert before <= meta["switch.in"]["tsc"] <= after + SWITCH_SECONDS * hz  # the switch followed the call
            assert all(t >= meta["switch.in"]["tsc"] for t in tscs)  # nothing of the handler before
        if number < len(segments) - 1:
            _, _, before, after = run["changes"][number]
            assert meta["switch.out"]["tsc"] <= after + SWITCH_SECONDS * hz
        handler = meta["rules.rule"].split("=")[1]
        if handler == "null":
            assert tscs == []  # records stopped
        elif handler == "buffered":
            assert len(tscs) == meta["records.logged"] > 0  # and resumed, every one kept
            if number:
                assert min(tscs) - meta["switch.in"]["tsc"] <= SWITCH_SECONDS * hz
        else:
            assert 0 < len(tscs) <= meta["records.logged"] // 4 + 2


def test_every_accepted_change_is_recorded_in_the_application_folder(run):
    with ipc.open_file(f"{run['folder']}/rules-changes.arrows") as reader:
        table = reader.read_all()
    assert table["version"].to_pylist() == [0, 1, 2, 3]
    assert table["rules"].to_pylist() == ["other=null\nsqlr=buffered", *(p.replace(";", "\n") for p in PHASES)]
    times = table["realtime_ns"].to_pylist()
    assert times == sorted(times) and times[-1] - times[0] >= (len(PHASES) - 1) * PHASE_SECONDS * 1e9


def test_python_trace_points_follow_the_executors_rules(run):
    """Each task's channel takes the rule in force in its worker as it opens: that of the last change once the
    executor and the worker's library have learnt it."""
    hz = cp.tsc_frequency().hz
    starts = [before for _, _, before, _ in run["changes"]]
    seen = set()
    for meta in run["python"]:
        opened = meta["open.clock"]["tsc"]
        phase = sum(start <= opened for start in starts)  # 0: before the first change
        if phase and opened - starts[phase - 1] > PYTHON_SWITCH_SECONDS * hz:
            assert meta["rules.rule"] == PHASES[phase - 1].split(";")[1]
            seen.add(phase)
        elif not phase:
            assert meta["rules.rule"] == "*=buffered"  # no rule for pyr at start
    assert seen == {1, 2, 3}
