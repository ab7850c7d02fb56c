"""The embedded Spark session: what the analysis runs on when the caller brings none."""
from __future__ import annotations

import os
import sys

_session = None
# The profiler's JVM classes (plugin, SQL extensions) share this prefix. PySpark's builders share one set of options
# per process, so a session built after a profiled application's would be profiled too: not the analysis's own.
PROFILER_CLASSES = "io.cloudprofiler."


def _driver_memory() -> str:
    """A quarter of the machine's memory, from 1 to 8 GiB: each task holds a log file three to four times over
    (read, as a Spark row, as an Arrow buffer) while it decodes it."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{max(1, min(8, total // 4 >> 30))}g"


# Below this size of log files an analysis is mostly shuffles of the driver's tables (tasks, operators, batches: a
# few thousand rows), whose every partition costs: Spark's 200 made the demo's report sections 1.4 to 2.8 times as
# long as 4 did. Above it, Spark's default, which adaptive execution coalesces to the data.
SMALL_FILES_BYTES = 1 << 30
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PARTITION_BYTES = 64 << 20  # adaptive execution's advisory partition size


def shuffle_partitions(files_bytes: "int | None") -> "int | None":
    """spark.sql.shuffle.partitions for an analysis of `files_bytes` of log files: two per core, or one per
    PARTITION_BYTES where that is more, below SMALL_FILES_BYTES; None (Spark's default) above it or unknown."""
    if files_bytes is None or files_bytes >= SMALL_FILES_BYTES:
        return None
    return max(2 * (os.cpu_count() or 1), -(-files_bytes // PARTITION_BYTES))


# The job tag of an analysis made in the application it reads (a session's settings reach its queries' jobs as local
# properties, Spark's job tags among them): the task table leaves its jobs out (Application.task_table), so that a
# report made during the run is not part of the next one
ANALYSIS_JOB_TAG = "cloudprofiler-analysis"
# and its scheduler pool, where the application schedules its jobs FAIR (spark.scheduler.mode): its jobs then share
# the executors with the application's (a streaming query's batches), where under FIFO each waits for the jobs before it
ANALYSIS_POOL = "cloudprofiler-analysis"
# the plugin's switches that a session's queries carry to their tasks, off for such an analysis: its tasks, operators
# and Python functions are no part of the user's profile
UNPROFILED = {"spark.cloudprofiler.task.enabled": "false", "spark.cloudprofiler.operators": "false",
              "spark.cloudprofiler.udfs": "false", "spark.job.tags": ANALYSIS_JOB_TAG,
              "spark.scheduler.pool": ANALYSIS_POOL}


def sibling_session(spark, files_bytes: "int | None"):
    """A new session of `spark`'s application (the same SparkContext, a SQL configuration of its own) for an analysis
    made while it runs: the user's session keeps its settings, the analysis's shuffles take
    `shuffle_partitions(files_bytes)` partitions (the application's own, Spark's 200 by default, are its workload's:
    a report's small shuffles of a few thousand rows took them all), and its queries are not profiled and their jobs
    are tagged (UNPROFILED)."""
    session = spark.newSession()
    partitions = shuffle_partitions(files_bytes)
    if partitions is not None:
        session.conf.set(SHUFFLE_PARTITIONS, str(partitions))
    for key, value in UNPROFILED.items():
        session.conf.set(key, value)
    return session


def _without_profiler(key: str) -> str:
    """The class list `key` (spark.plugins, spark.sql.extensions) as this process's builders hold it, without the
    profiler's classes."""
    from pyspark.sql import SparkSession

    held = getattr(SparkSession.Builder, "_options", {}).get(key) or ""
    return ",".join(c.strip() for c in held.split(",") if c.strip() and not c.strip().startswith(PROFILER_CLASSES))


# PySpark's own daemon and worker, which run the Python workers where spark.python.daemon.module and
# spark.python.worker.module are not set
PYSPARK_MODULES = ("pyspark.daemon", "pyspark.worker")


def _python_modules() -> "dict[str, str]":
    """spark.python.daemon.module and spark.python.worker.module for the analysis's session: PySpark's own where the
    session would otherwise find the UDF timing's (a profiled session's `udfs`), whose workers would time the
    analysis's own functions and write their records beside the profiled application's folder; else nothing set. A
    session finds the first session's settings of this process in its JVM's system properties (PySpark starts the JVM
    with them), or in the builders' shared options (PySpark 3.5)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from ..plugin_jar import udf_modules

    try:
        ours = udf_modules()
    except FileNotFoundError:  # no jar built: no helper set the modules either
        return {}
    held = [getattr(SparkSession.Builder, "_options", {}).get(key) for key in ours]
    if SparkContext._jvm is not None:
        held += [SparkContext._jvm.java.lang.System.getProperty(key) for key in ours]
    return dict(zip(ours, PYSPARK_MODULES)) if set(ours.values()) & set(held) else {}


def _with_plugin_jar(given: "str | None" = None) -> str:
    """spark.jars as given, else as this process's builders hold it, else as spark-defaults.conf says (the session's
    setting replaces that file's), with the plugin jar (unless there already), whose reader reads the log files in
    the JVM; as it is where the jar is not built (the analysis then reads them in Python)."""
    from ..plugin_jar import PLUGIN_JAR, jar_path

    held = [j.strip() for j in _given("spark.jars", given).split(",") if j.strip()]
    try:
        jar = jar_path()
    except FileNotFoundError:
        return ",".join(held)
    plugin = PLUGIN_JAR.split("{")[0]
    return ",".join(held if any(os.path.basename(j).startswith(plugin) for j in held) else [*held, jar])


JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def _given(key: str, value: "str | None") -> str:
    """`key` as the caller gives it, else as this process's builders hold it, else as spark-defaults.conf says: what
    a setting of the session's own would replace."""
    from pyspark.sql import SparkSession

    from ..plugin_jar import spark_defaults

    if value is None:
        value = getattr(SparkSession.Builder, "_options", {}).get(key) or spark_defaults().get(key)
    return value or ""


def local_session(conf: "dict[str, str] | None" = None, files_bytes: "int | None" = None):
    """A local Spark session on every core (local[*]), Spark's UI off and its logging quiet, started on first use and
    reused (a stopped one is replaced), without the profiler's plugin and UDF timing but with its jar (its reader of log
    files). Python workers run this interpreter, which has cloudprofiler. `conf`: Spark settings of the session it
    starts, as spark-submit's `--conf` (an object store's spark.hadoop.* keys, spark.jars.packages; its spark.jars get
    the plugin jar too), over spark-defaults.conf of SPARK_CONF_DIR. Where a session is already active in this process,
    Spark hands that one out and its settings stay as they are. Where this starts the process's JVM, it starts it as
    jvm_start says for an analysis of `files_bytes` of log files (None: unknown), and its shuffles have
    `shuffle_partitions(files_bytes)` partitions unless `conf`, the builders or spark-defaults.conf set them."""
    global _session
    from pyspark.sql import SparkSession

    jsc = _session.sparkContext._jsc if _session is not None else None  # None once the session was stopped
    if jsc is not None and not jsc.sc().isStopped():
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = dict(conf or {})
    builder = (SparkSession.builder.master("local[*]").appName("cloudprofiler-analysis")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.plugins", _without_profiler("spark.plugins"))
               .config("spark.sql.extensions", _without_profiler("spark.sql.extensions"))
               .config("spark.jars", _with_plugin_jar(conf.pop("spark.jars", None)))
               .config("spark.driver.memory", _driver_memory())
               # a log file travels whole through the JVM into Python: an Arrow batch of file contents holds a
               # few files, not a whole partition of them (Spark >= 4.0; earlier ones ignore the key)
               .config("spark.sql.execution.arrow.maxBytesPerBatch", str(64 << 20)))
    given = conf.pop(JAVA_OPTIONS, None)
    partitions = shuffle_partitions(files_bytes)
    if partitions is not None and not _given(SHUFFLE_PARTITIONS, conf.get(SHUFFLE_PARTITIONS)):  # a setting wins
        builder = builder.config(SHUFFLE_PARTITIONS, str(partitions))
    for key, value in {**_python_modules(), **conf}.items():
        builder = builder.config(key, value)
    _session = start(builder, files_bytes, given)
    _session.sparkContext.setLogLevel("ERROR")
    return _session


def start(builder, files_bytes: "int | None", java_options: "str | None" = None):
    """builder.getOrCreate(), where that starts the process's JVM started as jvm_start says for an analysis of
    `files_bytes` of log files: its options before `java_options` (the driver's, as the caller gives them, else as
    an earlier builder or spark-defaults.conf does), which win."""
    from . import jvm_start

    ours, part = jvm_start.options(files_bytes)
    if ours:
        builder = builder.config(JAVA_OPTIONS, " ".join([*ours, _given(JAVA_OPTIONS, java_options)]).strip())
    elif java_options is not None:
        builder = builder.config(JAVA_OPTIONS, java_options)
    spark = builder.getOrCreate()
    jvm_start.started(part, spark)
    return spark
