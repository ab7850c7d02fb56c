"""Where the demo runs and its Spark sessions: the profiled application (the plugin on, calibration on) and, once it
has stopped, a plain one for the analysis."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..harness.standalone import wait_for_executors

EXECUTORS = 2
EXECUTORS_TIMEOUT_S = 120
LOCAL_SIMULATION = (4.0, 29.0)  # the local executors' TSC: hours ahead of the driver's, ppm fast
# the driver's log4j: Spark's errors and the plugin's warnings, so that the demo's own lines are what one reads
LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
logger.cloudprofiler.name = io.cloudprofiler
logger.cloudprofiler.level = warn
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@dataclass
class Placement:
    """Where the demo's application runs, and notes on it: what is simulated (the demo says so)."""
    master: str
    driver_host: str  # the address executors reach the driver (and the generator) at
    analysis_master: str
    executor_env: dict = field(default_factory=dict)  # spark.executorEnv.*
    notes: list[str] = field(default_factory=list)


def simulated_tsc(hours: float, skew_ppm: float) -> tuple[dict, str]:
    """The environment under which a process reads a TSC `hours` ahead of (behind, if negative) this machine's and
    `skew_ppm` faster, and its description. An offset is never further back than the machine's uptime allows: a TSC
    cannot go below zero."""
    import cloudprofiler as cp

    offset = max(int(hours * 3600 * cp.tsc_frequency().hz), -(cp.tsc() // 2))
    env = {"CLOUDPROFILER_SIMULATE_TSC": f"offset={offset},skew_ppm={skew_ppm:g}"}
    return env, f"{offset / cp.tsc_frequency().hz / 3600:+.1f} h and {skew_ppm:+g} ppm"


def local() -> Placement:
    """Spark's local cluster mode: the driver here, two executor JVMs that it starts on this machine."""
    env, what = simulated_tsc(*LOCAL_SIMULATION)
    return Placement(f"local-cluster[{EXECUTORS},1,1024]", "127.0.0.1", "local[2]", env, [
        f"simulated TSC domain: the executors read a TSC {what} from the driver's (CLOUDPROFILER_SIMULATE_TSC), "
        f"so that calibration has a second domain to measure on one machine"])


def _common(builder, master: str, app_name: str, driver_host: str):
    os.environ["SPARK_LOCAL_IP"] = driver_host  # the driver's JVM binds there (started by this process)
    return (builder.master(master).appName(app_name).config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.host", driver_host).config("spark.driver.bindAddress", driver_host)
            .config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
            .config("spark.cores.max", str(EXECUTORS)))


def profiled_builder(log_dir: str, placement: Placement):
    """The builder of the demo application with the plugin (task records, cp_trace, calibration every few seconds
    besides the rounds after each job) on `placement`; writes the driver's log4j configuration into `log_dir`."""
    import cloudprofiler.spark as cps

    log4j = Path(log_dir) / "log4j2.properties"
    log4j.write_text(LOG4J)
    builder = _common(cps.builder(log_dir=log_dir, calibration_enabled=True, calibration_interval=5),
                      placement.master, "cloudprofiler demo", placement.driver_host)
    builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
    for key, value in placement.executor_env.items():
        builder = builder.config(f"spark.executorEnv.{key}", value)
    return builder


def profiled(log_dir: str, placement: Placement):
    """The demo application (`profiled_builder`), once every executor has registered."""
    spark = profiled_builder(log_dir, placement).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    wait_for_executors(spark, EXECUTORS, EXECUTORS_TIMEOUT_S)
    return spark


def stop(spark, timeout_s: float = 60) -> None:
    """Stops the application and waits for its executors (processes of this machine) to exit: they close and
    collect their logs as they stop."""
    app_id = spark.sparkContext.applicationId
    spark.stop()
    deadline = time.monotonic() + timeout_s
    while _executor_pids(app_id):
        if time.monotonic() > deadline:
            raise TimeoutError(f"executors {_executor_pids(app_id)} of {app_id} still run {timeout_s:g} s after the "
                               f"application stopped: their logs may be incomplete")
        time.sleep(0.2)


def _executor_pids(app_id: str) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    command = f.read().split(b"\0")
            except OSError:  # gone meanwhile
                continue
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in command and app_id.encode() in command:
                pids.append(int(entry.name))
    return pids


def analysis(placement: Placement):
    """A session for the analysis, without the plugin: Spark keeps the first application's configuration of this
    process as defaults, which would otherwise profile the analysis too."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.config("spark.plugins", "").config("spark.sql.extensions", "")
    spark = _common(builder, placement.analysis_master, "cloudprofiler demo analysis", placement.driver_host)
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
