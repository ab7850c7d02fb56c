import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

import cloudprofiler.spark as cps


RESOURCE = "io/cloudprofiler/native/linux-x86_64/libcloudprofiler_jni.so"
# Set by .ci/run, where root, ip, chromium, clang-format and the package registries are all at hand: a test that
# would skip (and hide the results it stands for: cross-host bounds, the report in a browser) fails instead.
REQUIRE_ALL = os.environ.get("CLOUDPROFILER_TESTS_REQUIRE_ALL") == "1"
# The JVMs the tests start live seconds to minutes on small data, where C2's compiler threads cost more CPU than its
# faster code saves: with C1 alone a local session's start, first query and stop took 19 CPU seconds instead of 33.
# What the code does is the same; users' applications, `make demo` and the benchmarks run with the JVM's defaults.
# C1 alone reserves 48 MB for compiled code, which a long session of many queries fills (the JVM then stops
# compiling and fails method handles): the default tiered JVM's 240 MB.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def _quick_jvms() -> None:
    """Every JVM that Spark starts for the tests compiles with `TEST_JVM_OPTIONS`: drivers and executors through a
    spark-defaults.conf of the tests' own (spark.*.defaultJavaOptions: a test's extraJavaOptions still apply), the
    standalone daemons and spark-submit's launcher through Spark's variables. Subprocesses inherit them. A
    SPARK_CONF_DIR set by the developer is left as it is."""
    import atexit
    import shutil
    import tempfile

    if "SPARK_CONF_DIR" in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="cloudprofiler-tests-spark-conf-")
    atexit.register(shutil.rmtree, folder, True)
    with open(os.path.join(folder, "spark-defaults.conf"), "w") as f:
        f.write(f"spark.driver.defaultJavaOptions {TEST_JVM_OPTIONS}\n"
                f"spark.executor.defaultJavaOptions {TEST_JVM_OPTIONS}\n")
    os.environ["SPARK_CONF_DIR"] = folder
    for variable in ("SPARK_DAEMON_JAVA_OPTS", "SPARK_LAUNCHER_OPTS"):
        os.environ[variable] = f"{os.environ.get(variable, '')} {TEST_JVM_OPTIONS}".strip()


_quick_jvms()
# Each test process has a Spark conf folder of its own, which is on the driver's class path: no JVM of one could use
# a class archive of another's, and each analysis session would write one as it exits (10 s and 170 MB). The test
# of the archive (test_jvm_start.py) turns it on for its own sessions.
os.environ["CLOUDPROFILER_CLASS_ARCHIVE"] = "off"


@pytest.fixture(scope="session", autouse=True)
def spark_jvm_with_the_plugin_jar():
    """PySpark starts one JVM per process and the first session's jars are its classpath for good: the plugin jar
    goes on it before any test module's session (an analysis session without the plugin, say) starts it, so that
    later modules' sessions with the plugin find its classes."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized(conf=SparkConf().set("spark.jars", cps.jar_path()))


@pytest.fixture(scope="module", autouse=True)
def no_spark_session_outlives_its_module():
    """A session left running (the analysis's embedded one, say) would be handed out by the next module's
    getOrCreate() with that module's settings ignored: each module's sessions stop with it."""
    yield
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkSession._instantiatedSession is not None:
        SparkSession._instantiatedSession.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome, report.longrepr = "failed", f"skipped where CI expects it to run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module that skips as it is collected (`pytest.importorskip` at its top) skips all its tests at once, before
    the hook above sees any of them: under the same flag it fails instead."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome, report.longrepr = "failed", f"skipped where CI expects it to run: {reason}"


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory):
    """The library of the test process logs here (it starts once per process)."""
    import cloudprofiler as cp

    folder = tmp_path_factory.mktemp("logs")
    cp.start(str(folder))
    return folder


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    """(master URL, its folder): a standalone master and two workers of one core each on loopback, each a JVM of its
    own, started once for every module that runs applications on such a cluster (starting one costs three JVMs).
    Each application stops before its test ends, so that the next finds both workers' cores free."""
    from cloudprofiler.harness.hosts import Hosts
    from cloudprofiler.harness.standalone import standalone_cluster

    base = tmp_path_factory.mktemp("standalone")
    with Hosts(2, namespaces=False) as hosts, standalone_cluster(hosts, base) as master:
        yield master, base


TPCH_SCALE = 0.01  # the tests' TPC-H: 60,175 lineitems, a few seconds to generate


@pytest.fixture(scope="session")
def tpch_root(tmp_path_factory):
    """A folder whose `sf0.01` holds TPC-H at scale factor `TPCH_SCALE`, generated once per test run (the layout
    of `harness.tpch.generate`, which the bench's --data takes)."""
    from cloudprofiler.harness import tpch

    root = tmp_path_factory.mktemp("tpch")
    tpch.generate(root, TPCH_SCALE)
    return root


def run_python(code: str, *, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a Python snippet in a fresh process (for options that are fixed once per process)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="session")
def jar_without_library(tmp_path_factory):
    """The plugin jar minus its JNI library, and that library as a separate file."""
    folder = tmp_path_factory.mktemp("loader")
    stripped, library = folder / "plugin-without-jni.jar", folder / "libcloudprofiler_jni.so"
    with zipfile.ZipFile(cps.jar_path()) as src, zipfile.ZipFile(stripped, "w") as dst:
        for item in src.infolist():
            if item.filename == RESOURCE:
                library.write_bytes(src.read(item))
            else:
                dst.writestr(item, src.read(item))
    return stripped, library


def assert_collected_as_it_died(collected, as_it_died) -> None:
    """A killed process's log file as its collector wrote it into logDir (`collected`) holds what the file held on
    disk when the process died (`as_it_died`): the same bytes when it died between batches, its last flush's footer
    in place; else its complete batches byte for byte, then a footer that says it was cut (CompleteBatches.cutEnd)."""
    import warnings

    import pyarrow.ipc as ipc

    import cloudprofiler as cp

    got, had = collected.read_bytes(), as_it_died.read_bytes()
    if had.endswith(b"ARROW1"):
        assert got == had, collected
        return
    # its bytes up to the end of its last complete batch, then end marker (8), footer, its length (4), magic (6)
    complete = len(got) - 18 - int.from_bytes(got[-10:-6], "little")
    meta = cp.log_metadata(collected)
    assert got[:complete] == had[:complete] and meta["closed"] is False, collected
    assert meta["cut.bytes"] == len(had) - complete, collected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ipc.open_file(got).read_all().num_rows == cp.read_log(as_it_died).num_rows, collected


def assert_tables_as_declared(app, expected: set) -> None:
    """Every table of the plugin's that a real application wrote into its folder `app` (and its executors' folders)
    lies where the plugin declares it and has exactly the columns and Arrow types it declares (cloudprofiler.tables,
    read from the jar), which are those the analysis reads: a writer and a reader can no longer disagree unseen;
    `expected`: the ids of the tables that must be among them."""
    from pathlib import Path

    import pyarrow as pa

    from cloudprofiler import tables

    found = set()
    for path in Path(app).rglob("*.arrows"):
        table = tables.of_file(path.name)
        if table is None:
            continue
        found.add(table.id)
        assert (path.parent == Path(app)) == (table.folder == tables.APPLICATION), path
        with pa.OSFile(str(path)) as f:
            written = pa.ipc.open_file(f).schema
        assert [(x.name, x.type) for x in written] == [(x.name, x.type) for x in table.schema], path
    assert expected <= found, f"{app} lacks {sorted(expected - found)}"


def assert_same_sketches(app, channels: list, hops: list) -> None:
    """The hops of `channels` counted by the plugin's HopSketches in the JVM and by the Python workers give the same
    sketch rows, bucket for bucket (the durations are the same doubles), the sums up to their order of addition."""
    import pandas as pd

    from cloudprofiler.analysis.hops import hop_sketches

    keys = ["hop", "remote", "measure", "key"]
    jvm, python = (hop_sketches(app, channels, hops, in_jvm=in_jvm).rows.sort_values(keys, ignore_index=True)
                   for in_jvm in (True, False))
    exact = keys + ["count", "unbounded", "exact", "min_ns", "max_ns", "err_max_ns"]
    assert len(jvm) >= 3 * len(hops) and (jvm["count"] + jvm["unbounded"].fillna(0)).sum() > 0
    pd.testing.assert_frame_equal(jvm[exact], python[exact], check_dtype=False, check_exact=True)
    pd.testing.assert_series_equal(jvm["sum_ns"], python["sum_ns"], check_exact=False, rtol=1e-12)


def plan_nodes(node):
    """Every node of an executed plan, adaptive execution's final plan and its stages' plans included."""
    yield node
    if node.nodeName() == "AdaptiveSparkPlan":
        yield from plan_nodes(node.executedPlan())
        return
    if node.nodeName().endswith("QueryStage"):
        yield from plan_nodes(node.plan())
        return
    seq = node.children()
    for i in range(seq.size()):
        yield from plan_nodes(seq.apply(i))


def metric(node, name):
    """A SQL metric of a plan node, None where it has none."""
    found = node.metrics().get(name)
    return found.get().value() if found.isDefined() else None
