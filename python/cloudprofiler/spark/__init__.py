"""Spark helpers: enable the plugin through configuration only, and trace ids from Python workers.

    from pyspark.sql import SparkSession
    import cloudprofiler.spark as cps
    spark = cps.configure(SparkSession.builder, log_dir="/tmp/logs").getOrCreate()
"""
from __future__ import annotations

import os
import re
import shlex
import sys
import warnings
from urllib.parse import urlparse

from ..plugin_jar import spark_defaults, udf_modules
from ..tables import app_folder
from ..rules import rules_text
from .checks import check_conf
from .connect import is_connect
from .jar import channel_key, default, jar_path, options
from .live_rules import rules, set_rules  # noqa: F401 -- the rules of a running application's trace channels
from .worker import LOCAL_DIR_ENV, start_in_executor_folder, worker_channel  # noqa: F401 -- for UDFs

PLUGIN_CLASS = "io.cloudprofiler.spark.CloudProfilerPlugin"
EXTENSIONS_CLASS = "io.cloudprofiler.spark.CloudProfilerExtensions"  # the SQL function cp_trace('channel', id)
# comma-separated lists that the user and other tools (Delta Lake's extension, another plugin's jar) set too
LIST_KEYS = ("spark.jars", "spark.plugins", "spark.sql.extensions")
# what a Spark Connect client may set for its own session: the task switch (a SQL execution's session settings
# reach its tasks as local properties, which the executor plugin reads)
SESSION_KEYS = ("spark.cloudprofiler.task.enabled",)


class ServerPluginWarning(UserWarning):
    """A Spark Connect session: the plugin runs in the server, which must have been started with it."""


def _value(key: str, value) -> str:
    if key == "rules":  # as set_rules takes them: a text, a list of rules, or a JSON or TOML file's path
        return rules_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(int(v)) for v in value)
    return str(value)


def channel_conf(channels) -> dict[str, str]:
    """`spark.cloudprofiler.channel.<name>.handler` / `.params` for trace channels, given as
    {name: handler} or {name: (handler, param, ...)}, e.g. {"after-join": ("downsample", 64), "sink": "null"}."""
    conf = {}
    for name, spec in dict(channels).items():
        handler, *params = (spec,) if isinstance(spec, str) else tuple(spec)
        if not isinstance(name, str) or not name or not isinstance(handler, str):
            raise ValueError(f"channels: expected a channel name and a handler name, got {name!r}: {spec!r}")
        if len(params) == 1 and isinstance(params[0], (list, tuple)):
            params = list(params[0])
        conf[channel_key(name, "handler")] = handler
        if params:
            conf[channel_key(name, "params")] = _value("params", params)
    return conf


def jar_uri(master: "str | None" = None) -> str:
    """The plugin's jar as `spark.jars` names it for an application on `master`: `local:<path>` where every executor
    runs on this machine (`local`, `local[N]`, `local-cluster[...]`), so that executors read it in place instead of
    fetching it from the driver (0.1 s of a short application's start); else its path, which Spark ships."""
    return f"local:{jar_path()}" if local_master(master) else jar_path()


def local_master(master: "str | None") -> bool:
    """Whether every executor of an application on `master` runs on this machine (local, local[N], local-cluster)."""
    return master is not None and re.fullmatch(r"local(\[.*\])?|local-cluster\[.*\]", master.strip()) is not None


def spark_conf(channels=None, master: "str | None" = None, **values) -> dict[str, str]:
    """The Spark configuration that enables the plugin with these options (the plugin's options with Python names:
    log_dir for spark.cloudprofiler.logDir, see `options()`) and the trace channels' handlers (`channels`, see
    `channel_conf`), for an application on `master` (see `jar_uri`; None: any). Every value is checked as the driver
    checks it at start (`checks.check_conf`): a bad one raises InvalidArgumentError naming the key and the value."""
    keys = options()
    unknown = sorted(set(values) - set(keys))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}: expected {', '.join(keys)}, channels or master")
    conf = {"spark.jars": jar_uri(master), "spark.plugins": PLUGIN_CLASS, "spark.sql.extensions": EXTENSIONS_CLASS}
    for name, value in values.items():
        if value is not None:
            conf[keys[name]] = _value(name, value)
    conf.update(channel_conf(channels or {}))
    if values.get("local_dir"):  # Python workers find their executor's folder through it (worker.py)
        conf["spark.executorEnv." + LOCAL_DIR_ENV] = str(values["local_dir"])
    if values.get("roll_bytes") is not None:  # Python workers' libraries read it as they start
        conf["spark.executorEnv.CLOUDPROFILER_ROLL_BYTES"] = str(values["roll_bytes"])
    if values.get("log_dir") and "://" not in str(values["log_dir"]):  # where workers write without an executor
        conf["spark.executorEnv.CLOUDPROFILER_LOG_DIR"] = str(values["log_dir"])
    if values.get("udfs") is not None and _value("udfs", values["udfs"]).strip() == "true":
        # PySpark's daemon whose workers time their UDFs' batches, and its worker that does where workers start
        # without the daemon (spark.python.use.daemon=false)
        conf.update(udf_modules())
    check_conf(conf)
    return conf


def _leave_python_modules(builder, conf: dict, master: "str | None") -> None:
    """Leave PySpark's daemon and worker modules to an application (or another tool) that set either; and where the
    workers run on this machine (a local master), leave PySpark's to workers whose Python (PYSPARK_PYTHON) cannot
    import ours, which would fail every Python task. The Python UDFs are then not timed, and a warning says why."""
    ours = udf_modules()
    if not ours.keys() <= conf.keys():
        return
    why = None
    for key in ours:
        value = set_before(builder, key)
        if value is not None and value != ours[key]:
            why = f"{key}={value} is the application's: it is left as it is"
            break
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    if why is None and local_master(master) and os.path.realpath(python) != os.path.realpath(sys.executable):
        import subprocess

        modules = ", ".join(ours.values())
        found = subprocess.run([python, "-c", f"import {modules}, cloudprofiler.spark.udf_timing"],
                               capture_output=True)
        if found.returncode != 0:
            why = f"the workers' Python ({python}, PYSPARK_PYTHON) cannot import {modules} and cloudprofiler"
    if why is not None:
        for key in ours:
            del conf[key]
        needs = ", ".join(f"{key}={module}" for key, module in ours.items())
        warnings.warn(f"cloudprofiler: {why}, so the Python UDFs are not timed (udfs=True needs {needs})",
                      stacklevel=3)


def submit_flags(conf: dict) -> str:
    """spark-submit's flags for `conf` (spark_conf's), one a line."""
    conf = dict(conf)
    flags = [f"--jars {shlex.quote(conf.pop('spark.jars'))}"]
    flags += [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items()]
    return " \\\n  ".join(flags)


def configure(builder, channels=None, **values):
    """Set the jar, the plugin, the options and the trace channels' handlers on a SparkSession builder; returns
    the builder. `spark.jars`, `spark.plugins` and `spark.sql.extensions` keep what is set already (on the builder,
    in the running JVM's configuration or in spark-defaults.conf): ours are appended.

    Python workers run this interpreter (so they can import cloudprofiler) unless PYSPARK_PYTHON says otherwise.

    A Spark Connect session (`builder.remote("sc://...")`, or SPARK_REMOTE) runs its tasks in the server, whose
    plugins, jars and options are fixed when it starts: this says once (ServerPluginWarning) which flags the server
    needs, and sets only what a session may (the task switch, `task_enabled`).

    Every value, and every spark.cloudprofiler.* option the builder has already, is checked as the driver checks
    it at start: a bad one raises InvalidArgumentError naming the key and the value before the JVM starts.
    """
    remote = remote_url(builder)
    conf = spark_conf(channels, None if remote else set_before(builder, "spark.master"), **values)
    # with what the builder has set already: the options the driver will read together
    check_conf({**{k: v for k, v in getattr(builder, "_options", {}).items() if k.startswith("spark.cloudprofiler.")},
                **conf})
    if remote:
        warnings.warn(f"cloudprofiler: {remote} is a Spark Connect server; the plugin runs there only if the server "
                      f"was started with these flags (`cloudprofiler spark-conf` prints them):\n  "
                      f"{submit_flags(conf)}\nThe logs collect in the server's logDir/<application id>; this session's "
                      "tasks are tasks(connect_session_id=spark.session_id)", ServerPluginWarning, stacklevel=2)
        for key in SESSION_KEYS:
            if key in conf:
                builder = builder.config(key, conf[key])
        return builder
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable  # PySpark reads the worker interpreter from here
    _leave_python_modules(builder, conf, set_before(builder, "spark.master"))
    for key in LIST_KEYS:
        conf[key] = appended(set_before(builder, key), conf[key])
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder


def remote_url(builder) -> "str | None":
    """The Spark Connect server a builder connects to (`remote(url)`, else SPARK_REMOTE), None for a session of
    this process (classic, or a Connect server it starts itself: `remote("local")`)."""
    url = getattr(builder, "_options", {}).get("spark.remote") or os.environ.get("SPARK_REMOTE")
    return url if url and not url.startswith("local") else None


def appended(before: "str | None", ours: str) -> str:
    """The comma-separated list `before` with the items of `ours` it lacks appended; a jar counts as there when
    `before` names its file in any form (a path, file: or local:)."""
    items = [item.strip() for item in (before or "").split(",") if item.strip()]
    there = {urlparse(item).path or item for item in items}
    return ",".join(items + [item for item in ours.split(",") if (urlparse(item).path or item) not in there])


def set_before(builder, key: str) -> "str | None":
    """What the session would get for `key` without us: the builder's value, else the running JVM's configuration
    (spark-submit's flags, spark-defaults.conf), else, before a JVM starts, spark-defaults.conf."""
    value = getattr(builder, "_options", {}).get(key)
    if value is not None:
        return str(value)
    from pyspark import SparkConf, SparkContext

    if SparkContext._jvm is not None:
        return SparkConf().get(key, None)
    return spark_defaults().get(key)


def builder(channels=None, **values):
    """A SparkSession builder with the plugin enabled."""
    from pyspark.sql import SparkSession

    return configure(SparkSession.builder, channels, **values)


def trace(df, channel: str, id_col: str, handler: "str | None" = None, params=()):
    """Pass `df` through unchanged, logging the ids of `id_col` to `channel` in each Python worker: an Arrow batch
    passes whole, and its records take the one TSC at which it reached the trace point (`log_batch`).

    The handler is `handler` if given, else the one configured for the channel (`channels=` of `builder`, i.e.
    `spark.cloudprofiler.channel.<name>.handler` / `.params`), else the one the rules of the executor choose
    (`rules=`, `set_rules`; buffered where none matches)."""
    from .python_trace import trace_dataframe

    return trace_dataframe(df, channel, id_col, handler, params)


def log_folder(spark) -> str:
    """`<logDir>/<application id>`: where this session's application collects its logs. For a Spark Connect
    session, the server's folder (on the server's file system, or a shared one)."""
    key = options()["log_dir"]
    if is_connect(spark):
        conf = {k: spark.conf.get(k, None) for k in (key, "spark.app.id")}
    else:
        conf = spark.sparkContext._conf  # readable after stop(), unlike spark.conf and applicationId
    log_dir = conf.get(key, None) or default(key)
    return app_folder(log_dir, conf.get("spark.app.id"))


COLLECT_WAIT_S = 10.0  # how long a report made during the run waits for the executors to collect their logs


def collect_now(spark, timeout_s: float = COLLECT_WAIT_S) -> tuple:
    """Has every running executor of this session's application collect its logs now, up to their last record, and
    the driver publish its tables, waiting at most `timeout_s` for the executors: so that the application's folder
    holds everything logged until now, not only what the last collection interval copied. Returns (collected,
    running): the executors that collected and those it waited for; (0, 0) where no driver plugin runs."""
    plugin = spark.sparkContext._jvm.io.cloudprofiler.spark.driver.CloudProfilerDriverPlugin
    try:
        done = plugin.collectNow(int(timeout_s * 1000))
    except TypeError:  # py4j's JavaPackage: the plugin's jar is not on the driver's class path
        return 0, 0
    return (0, 0) if done is None else (int(done[0]), int(done[1]))


def report(spark, output=None):
    """The report of this session's application (`cloudprofiler.analysis.report.report`), during or after the run:
    its folder is `log_folder(spark)`. During the run the executors first collect their logs up to now
    (`collect_now`; one line on stderr counts those that did not within COLLECT_WAIT_S), and the analysis runs in
    this application, in a session of its own (analysis.session.sibling_session); after `spark.stop()`, or for a
    Spark Connect session (the server's folder must be readable here, as its last collection left it:
    `collect_interval_seconds`), it runs on an embedded local session. Returns the HTML file's path, which Jupyter
    and VS Code show inline as the page itself (analysis.report.notebook). Where the session ran Spark's own UDF
    profiler (spark.sql.pyspark.udf.profiler=perf, Spark 4), its figures, which live in this session only, are
    shown beside the UDFs' (udf_profiles)."""
    from ..analysis.report import report as write_report
    from .udf_profiles import function_seconds

    running = not is_connect(spark) and spark.sparkContext._jsc is not None
    folder, analysis = log_folder(spark), None
    if running:
        from ..analysis.reader import local_path
        from ..analysis.jvm_start import folder_bytes
        from ..analysis.session import sibling_session

        collected, asked = collect_now(spark)
        if collected < asked:
            print(f"cloudprofiler: {asked - collected} of {asked} executors did not collect their logs within "
                  f"{COLLECT_WAIT_S:g} s: the report holds their records up to their last collection",
                  file=sys.stderr)
        _say_the_streams_ahead(spark)
        analysis = sibling_session(spark, folder_bytes(local_path(folder)))
    return write_report(folder, output, analysis, udf_profiles=function_seconds(spark))


def _say_the_streams_ahead(spark) -> None:
    """One line on stderr where streaming queries run beside a report made during the run under Spark's FIFO
    scheduler: each of the report's jobs waits for the batch job before it; under FAIR the report's jobs take a pool
    of their own (ANALYSIS_POOL)."""
    from ..analysis.session import ANALYSIS_POOL

    active = len(spark.streams.active)
    if active and spark.sparkContext.getConf().get("spark.scheduler.mode", "FIFO").upper() == "FIFO":
        print(f"cloudprofiler: {active} streaming quer{'y runs' if active == 1 else 'ies run'} beside this report: "
              "under Spark's FIFO scheduler each of its jobs waits for the batch job before it (with "
              f"spark.scheduler.mode=FAIR its jobs take a pool of their own, {ANALYSIS_POOL})", file=sys.stderr)


def live(spark, interval_s=None):
    """Show a compact summary of this session's application in the notebook, refreshed every `interval_s` seconds
    (default: the collection interval, within 0.5-5 s) while cells run: the stages running, the task attempts
    finished and failed, the median and slowest task and the stragglers of the stages with the most task time, the
    log files collected. Returns the LiveSummary (`.stop()`); it stops by itself when the session stops. Outside a
    notebook it warns and shows nothing. See cloudprofiler.spark.live_summary."""
    from .live_summary import live as show

    return show(spark, log_folder(spark), interval_s)


def __getattr__(name: str):
    # `cps.read_generator` is the benchmark harness's streaming source; the harness builds on this wing, so
    # the name is resolved only when asked for and this module never imports the harness.
    if name == "read_generator":
        import importlib

        return importlib.import_module("cloudprofiler.harness.spark_source").read_generator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
