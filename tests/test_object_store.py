"""logDir on an object store: `s3a://` on a real S3-compatible server (moto's server mode, started here) through
Hadoop's s3a file system, its jars from Maven Central (`tests/s3a-pom.xml`, copied once into
$CLOUDPROFILER_S3A_CACHE, default ~/.cache/cloudprofiler-s3a). One application on local-cluster (two executors in
JVMs of their own) is watched from outside as it runs: its executors' logs and the driver's task table reach the
bucket while it runs, one executor is killed with SIGKILL and the next one collects its files, the stop publishes
everything whole; a reader polling the bucket all along never finds a part of a file or a file gone. Then the report
and the analysis read the application straight from s3a://, with the settings a Spark user gives them
(SPARK_CONF_DIR's spark-defaults.conf and `cloudprofiler report --conf`)."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import cloudprofiler as cp
from cloudprofiler.harness.standalone import free_port
from conftest import assert_collected_as_it_died

CACHE = Path(os.environ.get("CLOUDPROFILER_S3A_CACHE", Path.home() / ".cache" / "cloudprofiler-s3a"))
POM = Path(__file__).with_name("s3a-pom.xml")
BUCKET, PREFIX, REGION = "cluster-logs", "spark/cloudprofiler", "us-east-1"
# moto takes any key pair; s3a is given one as a user gives theirs
ACCESS_KEY, SECRET_KEY = "test-access-key", "test-secret-key"


def _pyspark_hadoop_version() -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return next(re.fullmatch(r"hadoop-client-api-(.+)\.jar", p.name)[1] for p in jars.glob("hadoop-client-api-*"))


def s3a_jars() -> list[str]:
    """hadoop-aws and the AWS SDK modules it loads, for pyspark's Hadoop: copied from Maven Central by mvn once per
    version of the pom (its own local repository in the cache), then taken from the cache."""
    pom_version = re.search(r"<hadoop.version>(.+)</hadoop.version>", POM.read_text())[1]
    assert pom_version == _pyspark_hadoop_version(), (
        f"pyspark's Hadoop is {_pyspark_hadoop_version()}, {POM.name} fetches hadoop-aws {pom_version}: set its "
        "hadoop.version and awssdk.version (hadoop-project's aws-java-sdk-v2.version) to pyspark's")
    jars = CACHE / f"jars-{hashlib.sha256(POM.read_bytes()).hexdigest()[:16]}"
    if not jars.is_dir():
        mvn = shutil.which("mvn")
        if mvn is None:
            pytest.skip("Maven (mvn) is not installed: it fetches hadoop-aws and the AWS SDK for the s3a test")
        partial = CACHE / f"{jars.name}.part"
        shutil.rmtree(partial, ignore_errors=True)
        result = subprocess.run(
            [mvn, "-q", "-B", "-f", str(POM), f"-Dmaven.repo.local={CACHE / 'm2'}", "dependency:copy-dependencies",
             f"-DoutputDirectory={partial}"], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            output = (result.stdout + result.stderr)[-2000:]
            pytest.skip(f"mvn could not fetch the s3a jars from Maven Central: {output}")
        partial.rename(jars)
    return sorted(str(p) for p in jars.glob("*.jar"))


def hadoop_settings(endpoint: str, credentials: bool = True) -> dict:
    """The application's s3a settings for the test's server: its endpoint and region (an S3-compatible server of
    one's own; AWS's S3 needs neither), path-style requests (bucket names are no host names on 127.0.0.1), and the
    key pair."""
    settings = {"spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.endpoint.region": REGION,
                "spark.hadoop.fs.s3a.path.style.access": "true"}
    if credentials:
        settings |= {"spark.hadoop.fs.s3a.access.key": ACCESS_KEY, "spark.hadoop.fs.s3a.secret.key": SECRET_KEY}
    return settings


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(endpoint, boto3 client, jars): moto's S3 server on loopback with the bucket made, for this module."""
    pytest.importorskip("moto.server", reason="moto[server] (the test extra) serves S3 for the s3a test")
    boto3 = pytest.importorskip("boto3")
    jars = s3a_jars()
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # not listening yet
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"moto's server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield endpoint, client, jars
    finally:
        process.terminate()
        process.wait(10)


def _is_whole(data: bytes) -> bool:
    """A log file or table ends where a record batch or the file ends: whole, or a running file's complete
    batches, never a part of a batch."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cp.read_log(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError):
        return False
    return not any(getattr(w.message, "cut", False) for w in caught)


class BucketReader(threading.Thread):
    """Reads every object under the prefix, again and again, as the analysis of a running application would: a
    log file listed once must stay (nothing deletes them), read whole each time; hidden names are noted."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client, self.stop = client, threading.Event()
        self.rounds, self.reads, self.versions = 0, 0, {}  # versions: key -> the ETags read
        self.gone, self.part, self.hidden, self.keys = [], [], set(), set()

    def run(self):
        while not self.stop.is_set():
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX + "/")
            listed = {o["Key"] for page in pages for o in page.get("Contents", [])}
            self.keys |= listed
            self.hidden |= {k.rsplit("/", 1)[-1] for k in listed if k.rsplit("/", 1)[-1].startswith(".")}
            files = {k for k in listed if k.endswith(".arrows") and not k.rsplit("/", 1)[-1].startswith(".")}
            self.gone += sorted(set(self.versions) - files)
            for key in sorted(files):
                try:
                    got = self.client.get_object(Bucket=BUCKET, Key=key)
                except self.client.exceptions.NoSuchKey:
                    self.gone.append(key)
                    continue
                data = got["Body"].read()
                self.versions.setdefault(key, set()).add(got["ETag"])
                self.reads += 1
                if not _is_whole(data):
                    self.part.append((key, len(data)))
            self.rounds += 1
            self.stop.wait(0.1)


APPLICATION = r"""
import json, os, shutil, signal, sys, threading, time, warnings
import boto3
import cloudprofiler as cp
import cloudprofiler.spark as cps
from pyspark.sql import SparkSession
from cloudprofiler.harness.standalone import wait_for_collection, wait_for_executors

endpoint, bucket, log_dir, local_dir, snapshot, jars, settings = sys.argv[1:8]
builder = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
           .config("spark.executor.memory", "512m").config("spark.jars", jars))
for key, value in json.loads(settings).items():
    builder = builder.config(key, value)
spark = cps.configure(builder, log_dir=log_dir, local_dir=local_dir, collect_interval_seconds=1,
                      calibration_enabled=False).getOrCreate()
sc = spark.sparkContext
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="-", aws_secret_access_key="-",
                  region_name="us-east-1")
app = log_dir.split("/", 3)[3] + "/" + sc.applicationId
deadline = time.monotonic() + 150
warnings.simplefilter("ignore")  # running files read without their end

def rows(key):
    try:
        return cp.read_log(s3.get_object(Bucket=bucket, Key=key)["Body"].read()).num_rows
    except s3.exceptions.NoSuchKey:
        return 0

def ended():  # the executors whose task ends reached the bucket
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=app + "/").get("Contents", [])]
    return {k.split("/")[-2] for k in keys if "/spark.task.end." in k and rows(k)}

wait_for_executors(spark, 2)
while len(ended()) < 2 and time.monotonic() < deadline:  # both executors' task ends, while the application runs
    sc.parallelize(range(4), 4).map(lambda x: time.sleep(0.1) or x).count()
    time.sleep(0.3)
live = {"executors": sorted(ended()), "tasks": rows(app + "/spark-tasks.arrows")}
release = os.path.join(local_dir, "release")

def held(x):  # a task that runs until the executor is killed
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    return x

def job():
    sc.setJobGroup("held", "tasks that run while an executor is killed")
    sc.parallelize(range(4), 4).map(held).count()

thread = threading.Thread(target=job)
thread.start()
running = lambda: sum(sc.statusTracker().getStageInfo(s).numActiveTasks for s in sc.statusTracker().getActiveStageIds())
while running() < 2 and time.monotonic() < deadline:  # a task on each executor
    time.sleep(0.1)
names = os.path.join(local_dir, "executors")
pid = next(n for n in os.listdir(names) if n.isdigit())
folder = open(os.path.join(names, pid)).read().strip()
os.kill(int(pid), signal.SIGKILL)
shutil.copytree(folder, snapshot)  # its files as they were when it died
open(release, "w").close()
thread.join()
lost = app + "/" + os.path.basename(folder) + "/process-lost.arrows"
while not rows(lost) and time.monotonic() < deadline:  # the next executor collects them as it starts
    sc.parallelize(range(4), 4).count()
    time.sleep(0.5)
live["tasks_before_stop"] = rows(app + "/spark-tasks.arrows")
app_id = sc.applicationId
spark.stop()
wait_for_collection(local_dir, app_id, 60)  # every executor copied its files as it stopped
print("result", json.dumps({"app": app, "killed": os.path.basename(folder), "live": live}), flush=True)
"""

ANALYSIS = r"""
import json, sys, warnings
from cloudprofiler.cli import main
from cloudprofiler.analysis import open_application

folder, html, access, secret = sys.argv[1:5]
code = main(["report", folder, "-o", html, "--conf", f"spark.hadoop.fs.s3a.access.key={access}",
             "--conf", f"spark.hadoop.fs.s3a.secret.key={secret}"])
warnings.simplefilter("ignore")
app = open_application(folder)  # the report's session, with its s3a settings
files = app.files().collect()
executors = [r["executor_id"] for r in app.tasks().select("executor_id").collect()]
print("result", json.dumps({
    "code": code, "files": sorted(f["file"].rsplit("/", 2)[-2] + "/" + f["file"].rsplit("/", 1)[-1] for f in files),
    "cut": sorted(f["file"].rsplit("/", 1)[-1] for f in files if f["cut"]),
    "tasks": len(executors), "task_executors": sorted(set(executors)),
}), flush=True)
"""


def _result(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-5000:]
    return json.loads(run.stdout.split("result ", 1)[1].splitlines()[0])


@pytest.fixture(scope="module")
def run(server, tmp_path_factory):
    """The application, watched by a BucketReader from its start to its end, and its folder as the bucket holds it
    then (downloaded into `mirror`)."""
    endpoint, client, jars = server
    base = tmp_path_factory.mktemp("object-store")
    reader = BucketReader(client)
    reader.start()
    started = time.monotonic()
    try:
        application = subprocess.run(
            [sys.executable, "-c", APPLICATION, endpoint, BUCKET, f"s3a://{BUCKET}/{PREFIX}", str(base / "local"),
             str(base / "as-it-died"), ",".join(jars), json.dumps(hadoop_settings(endpoint))],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    finally:
        reader.stop.set()
        reader.join(30)
    result = _result(application) | {"seconds": time.monotonic() - started}
    mirror = base / "mirror"
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=result["app"] + "/"):
        for o in page.get("Contents", []):
            if not o["Key"].endswith("/"):
                target = mirror / o["Key"]
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(BUCKET, o["Key"], str(target))
    return result | {"reader": reader, "base": base, "folder": mirror / result["app"]}


def test_executors_logs_and_the_task_table_reach_the_bucket_while_the_application_runs(run):
    live = run["live"]
    assert len(live["executors"]) == 2, live  # both executors' task ends
    assert 0 < live["tasks"] < live["tasks_before_stop"], live  # the task table, published again as tasks ended


def test_a_reader_of_the_bucket_never_finds_a_part_of_a_file_nor_a_file_gone(run):
    reader = run["reader"]
    assert reader.rounds > 20 and reader.reads > 100, (reader.rounds, reader.reads)
    assert reader.part == [] and reader.gone == []
    # files replaced while it read: it found each version whole, then the next one
    assert sum(len(v) > 1 for v in reader.versions.values()) >= 3, reader.versions
    # s3a writes in place (an object appears as its upload completes): no temporary objects, no copies; the only
    # hidden name is the driver's check at start that it can write there
    assert all(name.startswith(".cloudprofiler-write-check-") for name in reader.hidden), reader.hidden
    # nothing outside the application's folder (the driver's tables wait for its id) but logDir's folder marker
    # and that check
    outside = {k for k in reader.keys if not k.startswith((run["app"] + "/", f"{PREFIX}/.cloudprofiler-write-check-"))}
    assert outside <= {PREFIX + "/"}, outside


def test_the_stop_publishes_every_task_and_every_executors_files_whole(run):
    folder = run["folder"]
    tasks = cp.read_log(folder / "spark-tasks.arrows").to_pylist()
    assert len(tasks) >= run["live"]["tasks_before_stop"]
    held = [t for t in tasks if t["job_group"] == "held"]
    assert {t["partition"] for t in held if t["status"] == "SUCCESS"} == set(range(4)), held
    killed_id = run["killed"].rsplit("-", 1)[1]
    assert any(t["executor_id"] == killed_id and t["status"] != "SUCCESS" for t in held), held
    survivors = [f for f in folder.glob("*/spark.task.*.arrows") if f.parent.name != run["killed"]]
    assert len({f.parent for f in survivors}) >= 2, survivors  # the other executor and the killed one's successor
    for f in survivors:  # copied whole at their executor's stop: the footer, closed
        assert cp.log_metadata(f)["closed"] is True, f
        with pa.OSFile(str(f)) as source:
            assert pa.ipc.open_file(source).num_record_batches > 0, f


def test_a_killed_executors_files_reach_the_bucket_as_it_died(run):
    died = sorted((run["base"] / "as-it-died").glob("spark.task.*.arrows"))
    assert len(died) == 2, died
    killed = run["folder"] / run["killed"]
    for p in died:  # every record it had written, readable by every reader
        assert_collected_as_it_died(killed / p.name, p)
    assert (killed / "process-lost.arrows").exists()


def test_the_report_and_the_analysis_read_the_application_straight_from_s3a(run, server, tmp_path):
    """spark-defaults.conf (SPARK_CONF_DIR) gives the analysis's session the s3a jars (on the driver's class path:
    the embedded session runs its tasks there) and the endpoint, as a cluster's Spark has them; `cloudprofiler
    report --conf` adds the user's key pair."""
    endpoint, _, jars = server
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    defaults = Path(os.environ.get("SPARK_CONF_DIR", "/nonexistent"), "spark-defaults.conf")
    lines = [defaults.read_text()] if defaults.is_file() else []  # the tests' JVM options (conftest)
    lines += [f"spark.driver.extraClassPath {':'.join(jars)}"]
    lines += [f"{k} {v}" for k, v in hadoop_settings(endpoint, False).items()]
    (conf_dir / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
    html = tmp_path / "report.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"SPARK_CONF_DIR": str(conf_dir)}
    analysis = subprocess.run(
        [sys.executable, "-c", ANALYSIS, f"s3a://{BUCKET}/{run['app']}", str(html), ACCESS_KEY, SECRET_KEY],
        capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    result = _result(analysis)
    assert result["code"] == 0 and html.stat().st_size > 0
    assert run["app"].rsplit("/", 1)[1] in html.read_text()
    in_bucket = sorted(f"{p.parent.name}/{p.name}" for p in run["folder"].glob("*/*.arrows")
                       if p.name != "process-lost.arrows")
    assert result["files"] == in_bucket  # every executor's log file, read from s3a://
    # the killed executor's files that it died inside a batch of, read up to their last complete one
    died = (run["base"] / "as-it-died").glob("spark.task.*.arrows")
    assert result["cut"] == sorted(p.name for p in died if not p.read_bytes().endswith(b"ARROW1"))
    tasks = cp.read_log(run["folder"] / "spark-tasks.arrows")
    assert result["tasks"] == tasks.num_rows
    assert run["killed"].rsplit("-", 1)[1] in result["task_executors"]
