"""A Spark standalone cluster started here: the master in the hub of `Hosts`, one worker in each worker host, each a
JVM of its own from the installed pyspark, their logs in a folder.

    with Hosts(2, namespaces=False) as hosts, standalone_cluster(hosts, folder) as master:
        spark = SparkSession.builder.master(master)...
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from pathlib import Path

from .hosts import Hosts

START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def wait_for(path: Path, pattern: str, count: int, timeout: float) -> None:
    """Until `pattern` (a regular expression) occurs `count` times in the file at `path`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(re.findall(pattern, path.read_text(errors="replace"))) >= count:
            return
        time.sleep(0.3)
    text = path.read_text(errors="replace")[-3000:] if path.exists() else "(no file)"
    raise TimeoutError(f"{path} did not show {count} x {pattern!r} within {timeout} s:\n{text}")


def wait_for_collection(local_dir: "str | Path", app_id: str, timeout: float = 120) -> None:
    """Until every executor of `app_id` has copied its log files into logDir: each does so as it stops, which a
    worker runs after the application ends, and removes its local folder (`local_dir`/`app_id`/...) once every file
    reached logDir. A file logDir already holds while the executor runs may not be its last version yet."""
    folder = Path(local_dir) / app_id
    deadline = time.monotonic() + timeout
    while left := list(folder.rglob("*.arrows")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"executors did not collect {[str(p) for p in left]} within {timeout:g} s")
        time.sleep(0.3)


def small_executors_conf(count: int) -> dict[str, str]:
    """`count` executors of one core and 512 MiB each, the driver on loopback: what the clusters of
    `standalone_cluster` on this machine hold."""
    return {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": str(count),
            "spark.driver.host": "127.0.0.1"}


def small_executors(builder, count: int):
    """`builder` asking for small_executors_conf(count)."""
    for key, value in small_executors_conf(count).items():
        builder = builder.config(key, value)
    return builder


def wait_for_executors(spark, count: int, timeout: float = START_TIMEOUT_S) -> None:
    """Until `count` executors have registered with the application's driver."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # the driver's block manager counts too
    deadline = time.monotonic() + timeout
    while status().size() < count + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} executors did not register with {spark.sparkContext.master} within "
                               f"{timeout:g} s")
        time.sleep(0.2)


@contextlib.contextmanager
def standalone_cluster(hosts: Hosts, folder: Path, worker_env: "list[dict] | None" = None, cores: int = 1,
                       memory: str = "1g"):
    """Starts a master in the hub and a worker in each worker host (with `worker_env[i]` added to worker i's
    environment, which its executors inherit); yields the master's URL once every worker has registered; kills
    them all at the end. Logs: `folder`/master.log and worker<i>.log; work folders `folder`/worker<i>."""
    folder = Path(folder)
    env = {**os.environ, "SPARK_NO_DAEMONIZE": "1"}
    env.pop("CLOUDPROFILER_SIMULATE_TSC", None)  # only the workers given one are a domain of their own
    # in a namespace of its own each JVM has its ports to itself; on loopback they share them
    port = 7077 if hosts.namespaces else free_port()
    ui_port = (lambda: 8080) if hosts.namespaces else free_port
    master = f"spark://{hosts.hub_ip}:{port}"
    procs = []
    try:
        master_log = folder / "master.log"
        procs.append(subprocess.Popen(
            [*hosts.prefix(hosts.hub), spark_class(), "org.apache.spark.deploy.master.Master", "--host", hosts.hub_ip,
             "--port", str(port), "--webui-port", str(ui_port())],
            stdout=master_log.open("w"), stderr=subprocess.STDOUT, env={**env, "SPARK_LOCAL_IP": hosts.hub_ip}))
        wait_for(master_log, r"I have been elected leader", 1, START_TIMEOUT_S)
        for i, (ns, address) in enumerate(zip(hosts.workers, hosts.worker_ips)):
            work = folder / f"worker{i}"
            work.mkdir(parents=True, exist_ok=True)
            extra = (worker_env or [{}] * len(hosts.workers))[i]
            procs.append(subprocess.Popen(
                [*hosts.prefix(ns), spark_class(), "org.apache.spark.deploy.worker.Worker", master,
                 "--host", address, "--cores", str(cores), "--memory", memory, "--webui-port", str(ui_port()),
                 "--work-dir", str(work)],
                stdout=(folder / f"worker{i}.log").open("w"), stderr=subprocess.STDOUT,
                env={**env, "SPARK_LOCAL_IP": address, **extra}))
        wait_for(master_log, r"Registering worker", len(hosts.workers), START_TIMEOUT_S)
        yield master
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)
