"""Rolling in Spark: a trace channel (JVM and Python worker) that logs a few MB while the application runs rolls into
several segments in logDir; read back through the analysis, every record is there exactly once, health() says
nothing of cuts, and what each collection copies stays bounded by about the roll size."""
import threading
import time
from pathlib import Path

import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application

ROLL = 256 << 10
BATCH = 1 << 20  # the library's block (65,536 records of 16 bytes): a segment ends with the batch that passes ROLL
IDS = 120_000  # per job
JOBS = 4
PACE_S = 0.05  # between the Python channel's Arrow batches (10,000 rows): a block fills in about 0.2 s


def _snapshot(folder: Path) -> dict:
    out = {}
    for p in folder.rglob("*.arrows"):
        try:
            st = p.stat()
            out[p.name] = (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:  # renamed into place meanwhile
            pass
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Jobs of a SQL and a Python trace channel, one after the other while the collector copies every second; every
    version of every file in logDir as the collections left it (size), then the folder after stop()."""
    log_dir = tmp_path_factory.mktemp("roll-logs")
    spark = (cps.builder(log_dir=str(log_dir), local_dir=str(tmp_path_factory.mktemp("roll-local")),
                         roll_bytes=ROLL, collect_interval_seconds=1, calibration_enabled=False)
             .master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
    app = log_dir / spark.sparkContext.applicationId
    copies, done = {}, threading.Event()  # file -> sizes of the versions seen

    def paced(batches):  # defined here: the Python workers cannot import this test's module
        for batch in batches:
            time.sleep(PACE_S)
            yield batch

    def watch():
        seen = {}
        while not done.is_set():
            for name, version in _snapshot(app).items():
                if seen.get(name) != version:
                    seen[name] = version
                    copies.setdefault(name, []).append(version[0])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for job in range(JOBS):
            spark.sql(f"select sum(t) from (select cp_trace('sqlroll', id) as t from range({job * IDS}, "
                      f"{(job + 1) * IDS}, 1, 2))").collect()
            # one task: several blocks of the worker's hand-off (32,768 records), the first of which passes ROLL.
            # A block's segment is chosen as the executor takes it, and the roll comes once a write passed ROLL:
            # blocks the executor took before it (a worker faster than the executor's writes, as on a loaded
            # host) share the segment. Paced batches let the executor write each block before the next fills.
            cps.trace(spark.range(job * IDS, (job + 1) * IDS, numPartitions=1).mapInArrow(paced, "id long"),
                      "pyroll", "id").count()
            time.sleep(0.5)
        time.sleep(2)  # a last collection while the application runs
    finally:
        done.set()
        watcher.join()
    analysis = open_application(app, spark)
    counts = {c: analysis.records(c).groupBy("tuple_id").count() for c in ("sqlroll", "pyroll")}
    read = {c: (df.count(), df.where("count != 1").count()) for c, df in counts.items()}
    health = [r.asDict() for r in analysis.health().collect()]
    spark.stop()
    return dict(app=app, copies=copies, read=read, health=health)


@pytest.mark.parametrize("channel", ["sqlroll", "pyroll"])
def test_a_channel_rolls_into_several_closed_segments(run, channel):
    files = sorted(p for p in run["app"].rglob(f"{channel}.*.arrows"))
    assert len(files) >= 3, files
    channels = {}  # a Python worker opens a channel per task
    for m in map(cp.log_metadata, files):
        channels.setdefault((m["pid"], m.get("spark.task_attempt_id")), []).append(m)
    assert max(map(len, channels.values())) >= 2
    for metas in channels.values():
        metas.sort(key=lambda m: m["channel.number"])
        assert [m["switch.reason"] for m in metas] == ["open"] + ["roll"] * (len(metas) - 1)
        assert all(m["closed"] for m in metas)
        for m in metas:
            assert m["records.written"] + m["records.dropped"] == m["records.logged"]
    assert max(p.stat().st_size for p in files) <= ROLL + BATCH + 64 << 10  # the batch that passed ROLL ends it


@pytest.mark.parametrize("channel", ["sqlroll", "pyroll"])
def test_every_record_is_read_back_exactly_once_and_no_roll_is_a_cut(run, channel):
    assert run["read"][channel] == (JOBS * IDS, 0)
    assert not [r for r in run["health"] if r["kind"] in ("cut_file", "drops", "unreadable")], run["health"]


def test_each_collection_copies_a_bounded_amount_and_a_closed_segment_once(run):
    copies = {name: sizes for name, sizes in run["copies"].items() if name.startswith(("sqlroll.", "pyroll."))}
    assert copies
    for name, sizes in copies.items():
        assert max(sizes) <= ROLL + BATCH + 64 << 10, (name, sizes)  # never a whole growing file
        if cp.log_metadata(next(run["app"].rglob(name)))["closed"]:
            assert sizes.count(sizes[-1]) == 1, (name, sizes)  # closed (the largest version): copied once
