"""Logs of a running application: collected and published every interval, complete batches only; the files of a
killed application collected by the next one on the host; local copies removed once collected, no .crc files."""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pyarrow.ipc as ipc
import pytest

import cloudprofiler as cp
import cloudprofiler.spark as cps
from cloudprofiler.analysis import open_application
from cloudprofiler.harness.bench.spark_logs import run_problems
from conftest import assert_collected_as_it_died, run_python
from neighbour import as_neighbour, neighbour

INTERVAL_S = 1

RUNS_UNTIL_KILLED = r"""
import sys, threading, time
import cloudprofiler.spark as cps

log_dir, local_dir = sys.argv[1:3]
spark = (cps.builder(log_dir=log_dir, local_dir=local_dir, collect_interval_seconds=1, calibration_enabled=False)
         .master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
sc = spark.sparkContext
sc.parallelize(range(8), 8).count()
slow = threading.Thread(target=lambda: sc.parallelize(range(400), 4).map(lambda x: time.sleep(0.05) or x).count())
slow.start()
print(sc.applicationId, sc._jvm.java.lang.ProcessHandle.current().pid(), flush=True)
slow.join()
"""


def _task_folder(app: Path) -> "Path | None":
    return next((p.parent for p in app.rglob("spark.task.end.*.arrows")), None)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """An application SIGKILLed in the middle of a job, after its first collections: (log dir, local dir, its id,
    a copy of its local folder taken as it died)."""
    log_dir, local_dir = tmp_path_factory.mktemp("live-logs"), tmp_path_factory.mktemp("live-local")
    proc = subprocess.Popen([sys.executable, "-c", RUNS_UNTIL_KILLED, str(log_dir), str(local_dir)],
                            stdout=subprocess.PIPE, text=True)
    try:
        app_id, jvm = proc.stdout.readline().split()
        deadline = time.monotonic() + 60
        while _task_folder(log_dir / app_id) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2 * INTERVAL_S)  # mid-job, after a collection or two
        os.kill(int(jvm), signal.SIGKILL)
        snapshot = tmp_path_factory.mktemp("as-it-died")
        shutil.copytree(local_dir / app_id, snapshot, dirs_exist_ok=True)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30  # gone, not a zombie waiting for its new parent to reap it: the next
    while Path(f"/proc/{jvm}").exists() and time.monotonic() < deadline:  # application looks once, at its start
        time.sleep(0.1)
    return log_dir, local_dir, app_id, snapshot


@pytest.fixture(scope="module")
def session(killed):
    """A running application on the same host (the same localDir) as the killed one, collecting every second."""
    log_dir, local_dir, _, _ = killed
    spark = (cps.builder(log_dir=str(log_dir), local_dir=str(local_dir), collect_interval_seconds=INTERVAL_S)
             .master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
    yield spark, log_dir, local_dir
    spark.stop()


def _attempts(table_file: Path) -> list:
    with open(table_file, "rb") as f:
        return sorted(ipc.open_file(f).read_all().column("task_attempt_id").to_pylist())


def test_a_running_application_shows_its_tasks_in_the_log_dir_within_the_interval(session):
    spark, log_dir, _ = session
    app = log_dir / spark.sparkContext.applicationId
    spark.sparkContext.parallelize(range(100), 6).count()
    ended = time.monotonic()
    seen, table = [], app / "spark-tasks.arrows"
    while time.monotonic() < ended + 10 * INTERVAL_S:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if _task_folder(app) is not None and table.exists():
                seen = [sorted(cp.read_log_dir(app, channel=c).column("tuple_id").to_pylist())
                        for c in ("spark.task.start", "spark.task.end")]
                # each file is collected as it is at its turn: the end channel may show a flush the start
                if min(map(len, seen)) >= 6 and len(_attempts(table)) >= 6:  # channel's copy missed by a moment
                    break
        time.sleep(0.1)
    waited = time.monotonic() - ended
    assert len(seen) == 2 and seen[0] == seen[1] == _attempts(table), seen
    assert waited < 3 * INTERVAL_S + 1, waited  # a collection, and the library's flush of partial blocks (1 s)
    assert not [w for w in caught if getattr(w.message, "cut", False)]  # complete batches only, never a part
    files = open_application(app, spark).files()
    assert files.where("cut").count() == 0 and files.where("not closed").count() == 2  # the two task channels
    analysed = {r.task_attempt_id for r in open_application(app, spark).tasks().select("task_attempt_id").collect()}
    assert set(seen[1]) <= analysed  # with the tasks of the analysis's own jobs on this session
    print(f"the job's 6 tasks were in the log folder {waited:.1f} s after it ended")


def test_the_files_of_a_killed_application_are_collected_by_the_next_one_and_read_as_cut(session, killed):
    spark, log_dir, local_dir = session
    _, _, app_id, snapshot = killed
    app = log_dir / app_id
    deadline = time.monotonic() + 30
    # the collector copies the folder, writes the marker, then removes the local copy
    while (not list(app.rglob("process-lost.arrows")) or (local_dir / app_id).exists()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(app.rglob("process-lost.arrows")) and not (local_dir / app_id).exists()  # collected, then removed
    died = sorted(p for p in snapshot.rglob("*.arrows") if not p.parent.name.startswith("driver-spool-"))
    assert [p.name for p in died] == sorted(p.name for p in _task_folder(app).glob("spark.task.*.arrows"))
    for p in died:  # every record it had written, as it was on disk when it died
        assert_collected_as_it_died(_task_folder(app) / p.name, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cp.read_log_dir(app, channel="spark.task.start").num_rows > 8  # the first job and part of the next
        health = open_application(app, spark).health()
    cut = {r["subject"].rsplit("/", 1)[-1] for r in health.where("kind = 'cut_file'").collect()}
    assert cut == {p.name for p in died}


def test_a_killed_driver_spools_in_its_application_folder_and_the_next_one_removes_the_spool(session, killed):
    """The driver's task table grows in a spool in the application's local folder (0700, the file 0600), not in
    /tmp; the next application on the host removes what a killed driver left there."""
    _, local_dir, app_id, snapshot = killed
    spools = list(snapshot.glob("driver-spool-*/cloudprofiler-spark-tasks*.arrows"))
    assert spools, sorted(p.relative_to(snapshot) for p in snapshot.rglob("*"))
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in spools)
    assert all(stat.S_IMODE(p.parent.stat().st_mode) == 0o700 for p in spools)
    deadline = time.monotonic() + 30
    while (local_dir / app_id).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (local_dir / app_id).exists(), sorted((local_dir / app_id).rglob("*"))


def test_stop_collects_everything_removes_the_local_copies_and_writes_no_crc_files(session):
    spark, log_dir, local_dir = session
    app_id = spark.sparkContext.applicationId
    spark.stop()
    assert not (local_dir / app_id).exists()
    assert [p.name for p in (log_dir / app_id).rglob("*.arrows")]
    assert not list(log_dir.rglob("*.crc"))
    for p in (log_dir / app_id).rglob("spark.task.*.arrows"):
        assert cp.log_metadata(p)["closed"]


def test_files_that_cannot_be_copied_stay_local_and_one_line_says_so(tmp_path):
    run = run_python(f"""
        import os, shutil
        import cloudprofiler.spark as cps
        spark = (cps.builder(log_dir={str(tmp_path / "logs")!r}, local_dir={str(tmp_path / "local")!r},
                             calibration_enabled=False).master("local[1]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        spark.sparkContext.parallelize(range(4), 2).count()
        app = os.path.join({str(tmp_path / "logs")!r}, spark.sparkContext.applicationId)
        os.makedirs(app, exist_ok=True)
        for name in os.listdir({str(tmp_path / "local")!r} + "/" + spark.sparkContext.applicationId):
            shutil.rmtree(os.path.join(app, name), ignore_errors=True)
            open(os.path.join(app, name), "w").close()  # a file where the executor's folder should be
        spark.stop()
    """)
    assert run.returncode == 0, run.stderr[-3000:]
    kept = list((tmp_path / "local").rglob("spark.task.*.arrows"))
    assert len(kept) == 2
    lines = [line for line in run.stderr.splitlines() if "cloudprofiler: kept" in line]
    assert len(lines) == 1 and "spark.task.start" in lines[0] and "could not copy them to" in lines[0], lines


def test_files_are_copied_whole_to_a_log_folder_on_another_file_system(tmp_path):
    """The executor's folder on tmpfs, the log folder on disk: every record of every task reaches the log folder,
    and the local folder is removed."""
    local = Path(tempfile.mkdtemp(prefix="cp-test-local-", dir="/dev/shm"))
    logs = tmp_path / "logs"
    try:
        assert os.stat(local).st_dev != os.stat(tmp_path).st_dev
        run = run_python(f"""
            import cloudprofiler.spark as cps
            spark = (cps.builder(log_dir={str(logs)!r}, local_dir={str(local)!r}).master("local[2]")
                     .config("spark.ui.enabled", "false").getOrCreate())
            spark.sparkContext.parallelize(range(8), 8).count()
            spark.stop()
        """)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run_problems(logs, plugin=True) == []  # every task attempt's two records, the TSC domains
        assert not list(local.rglob("*.arrows"))
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _dead_pid() -> int:
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid += 1
    return pid


def test_names_a_neighbour_planted_in_a_shared_local_dir_are_never_followed(tmp_path):
    """Another user of the host who made `<localDir>/executors` first (0777) names a killed executor there: its
    `<pid>.inbox` names a folder of the Spark user's, its `<pid>` a folder whose `x.arrows` links to a file only the
    Spark user can read. The next executor deletes nothing and copies nothing: it follows no name it does not own
    (one line says so), and logs its own tasks all the same."""
    user = neighbour()
    shared = Path(tempfile.mkdtemp(prefix="cp-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)  # like /tmp
        local, names, planted, loot = shared / "local", shared / "local" / "executors", shared / "planted", \
            shared / "loot"
        victim = tmp_path / "victim"
        victim.mkdir()
        (victim / "keep.txt").write_text("the Spark user's")
        secret = tmp_path / "secret.arrows"
        secret.write_text("only the Spark user reads this")
        secret.chmod(0o600)
        pid = _dead_pid()
        made = as_neighbour(["sh", "-c", f"""set -e; umask 0
            mkdir -p {names} {planted} {loot}; chmod 0777 {local} {names} {loot}
            printf %s {loot} > {planted}/collect-target; ln -s {secret} {planted}/x.arrows
            printf %s {planted} > {names}/{pid}; printf %s {victim} > {names}/{pid}.inbox"""])
        assert made.returncode == 0, made.stderr
        run = run_python(f"""
            import cloudprofiler.spark as cps
            spark = (cps.builder(log_dir={str(tmp_path / "logs")!r}, local_dir={str(local)!r},
                                 calibration_enabled=False).master("local[1]").config("spark.ui.enabled", "false")
                     .getOrCreate())
            print("sum", spark.sparkContext.parallelize(range(100), 2).sum())
            import time; time.sleep(1)  # the collection of lost executors runs in the background
            spark.stop()
        """, timeout=300)
        assert "sum 4950" in run.stdout, run.stderr[-3000:]
        assert (victim / "keep.txt").read_text() == "the Spark user's"
        assert not list(loot.iterdir()) and (planted / "x.arrows").is_symlink()
        assert not [p for p in (tmp_path / "logs").rglob("*") if p.is_file() and "Spark user" in p.read_text("latin-1")]
        assert (names / str(pid)).exists() and (names / f"{pid}.inbox").exists()
        assert f"collects no lost executor's logs on this host: {names} belongs to another user (uid {user.pw_uid})" \
            in run.stderr, run.stderr[-3000:]
        assert len(list((tmp_path / "logs").rglob("spark.task.start.*.arrows"))) == 1  # its own tasks, collected
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_python_workers_follow_no_name_a_neighbour_planted():
    """A Python worker finds its executor's folder and inbox through the names in `<localDir>/executors`: names in a
    folder another user made, or another user's names, are not followed (the worker logs to files of its own)."""
    from cloudprofiler.spark import worker

    neighbour()
    shared = Path(tempfile.mkdtemp(prefix="cp-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        names = shared / "local" / "executors"
        parent = os.getppid()  # where a worker looks first: its parent, the executor
        made = as_neighbour(["sh", "-c", f"""set -e; umask 0; mkdir -p {names}
            printf /tmp/neighbours-folder > {names}/{parent}
            printf /dev/shm/neighbours-inbox > {names}/{parent}.inbox"""])
        assert made.returncode == 0, made.stderr
        assert worker.executor_folder(str(shared / "local")) is None
        assert worker.executor_inbox(str(shared / "local")) is None
        shutil.rmtree(shared / "local")  # a names folder of this user's, a name of the neighbour's in it
        names.mkdir(parents=True, mode=0o700)
        (names / str(parent)).write_text("/tmp/own-folder")
        assert worker.executor_folder(str(shared / "local")) == "/tmp/own-folder"
        os.chown(names / str(parent), neighbour().pw_uid, neighbour().pw_gid)
        assert worker.executor_folder(str(shared / "local")) is None
    finally:
        shutil.rmtree(shared, ignore_errors=True)
