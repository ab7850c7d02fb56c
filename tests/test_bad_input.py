"""Bad input gives a clear error naming the value, or a counted no-op; never a crash."""
import numpy as np
import pytest

import cloudprofiler as cp
from conftest import run_python


def test_unknown_handler_names_the_value(log_dir):
    with pytest.raises(cp.InvalidArgumentError, match="unknown handler 'fastest'"):
        cp.Channel("c", "fastest")
    with pytest.raises(cp.InvalidArgumentError, match="unknown handler 99"):
        cp.Channel("c", 99)


@pytest.mark.parametrize(
    "handler,params,message",
    [
        ("xoy", (5, 3), "xoy x=5 is out of range"),
        ("xoy", (0, 0), "xoy y=0 is out of range"),
        ("downsample", (0,), "downsample n=0 is out of range"),
        ("spc", (10,), "spc period_ns=10 is out of range"),
        ("buffered", (1,), "takes 0 parameter"),
        ("xoy", (1,), "takes 2 parameter"),
    ],
)
def test_parameters_out_of_range_name_the_value(log_dir, handler, params, message):
    with pytest.raises(cp.InvalidArgumentError, match=message):
        cp.Channel("bad", handler, params)
    with pytest.raises(cp.InvalidArgumentError, match=message):  # the same check, with no channel opened
        cp.Handler.parse(handler).check(params)


def test_the_handler_check_passes_what_a_channel_opens_with():
    for handler, params in [("buffered", ()), ("downsample", (1,)), ("xoy", (0, 1)), ("spc", (1000,))]:
        cp.Handler.parse(handler).check(params)


def test_parameterize_out_of_range_keeps_the_channel_working(log_dir):
    with cp.Channel("param", "downsample", (2,)) as ch:
        with pytest.raises(cp.InvalidArgumentError, match="n=-1"):
            ch.parameterize(0, -1)
        with pytest.raises(cp.InvalidArgumentError, match="index 3"):
            ch.parameterize(3, 1)
        ch.log_many(np.arange(10))
    assert cp.read_log(ch.path).column("tuple_id").to_pylist() == [0, 2, 4, 6, 8]


def test_double_close_raises_and_log_after_close_is_counted(log_dir):
    ch = cp.Channel("closed", "buffered")
    ch.log(1)
    ch.close()
    with pytest.raises(cp.ClosedError, match="already closed"):
        ch.close()
    ch.log(2)
    ch.log_many(np.arange(5))
    assert ch.stats.after_close == 6
    with pytest.raises(cp.ClosedError):
        ch.flush()
    assert cp.read_log(ch.path).column("tuple_id").to_pylist() == [1]


def test_non_integer_ids_are_refused(log_dir):
    with cp.Channel("types", "buffered") as ch:
        with pytest.raises(cp.InvalidArgumentError, match="dtype float64"):
            ch.log_many(np.array([1.5, 2.5]))

    with cp.Channel("one-by-one", "buffered") as ch:
        for bad, error, message in [
            ("7", TypeError, "must be an integer, got '7'"),
            (1.5, TypeError, "got 1.5"),
            (None, TypeError, "got None"),
            (2**63, OverflowError, "9223372036854775808 is outside the int64 range"),
            (-(2**63) - 1, OverflowError, "-9223372036854775809 is outside"),
        ]:
            with pytest.raises(error, match=message):
                ch.log(bad)
        ch.log(2**63 - 1)
        ch.log(-(2**63))
        ch.log(np.int64(5))
    assert cp.read_log(ch.path).column("tuple_id").to_pylist() == [2**63 - 1, -(2**63), 5]


def test_starting_twice_says_where_it_logs(log_dir):
    with pytest.raises(cp.CloudProfilerError, match="already started"):
        cp.start(str(log_dir))


def test_unwritable_folder_names_the_path(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run_python(
        """
        import cloudprofiler as cp
        try:
            cp.Channel("x", "buffered")
        except cp.CloudProfilerError as exc:
            print(type(exc).__name__, exc)
        """,
        env={"CLOUDPROFILER_LOG_DIR": str(blocker / "logs")},
    )
    assert result.returncode == 0, result.stderr
    assert "LogFolderNotFoundError" in result.stdout and str(blocker / "logs") in result.stdout


def test_bad_option_values_name_the_option(tmp_path):
    result = run_python(
        f"""
        import cloudprofiler as cp
        for kwargs in ({{"compression": "lz5"}}, {{"block_records": 3}}, {{"full_policy": "wait"}},
                       {{"tsc_read": "fenced"}}):
            try:
                cp.start({str(tmp_path)!r}, **kwargs)
            except (ValueError, cp.CloudProfilerError) as exc:
                print(exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "compression='lz5'" in result.stdout
    assert "block_records=3 is out of range" in result.stdout
    assert "full_policy='wait'" in result.stdout
    assert "tsc_read='fenced' is not one of ordered, unordered" in result.stdout


def test_malformed_simulation_variable_is_reported_not_fatal(tmp_path):
    result = run_python(
        "import cloudprofiler as cp; print(cp.tsc() > 0)",
        env={"CLOUDPROFILER_SIMULATE_TSC": "offset=banana"},
    )
    assert result.returncode == 0 and result.stdout.strip() == "True"
    assert "CLOUDPROFILER_SIMULATE_TSC=offset=banana" in result.stderr


def test_simulated_offset_below_zero_is_refused_instead_of_wrapping():
    behind = -(cp.tsc() + 10**15)  # a host booted later than this one by more than this one's uptime
    result = run_python(
        "import cloudprofiler as cp; print(cp.tsc() < 2**63)",
        env={"CLOUDPROFILER_SIMULATE_TSC": f"offset={behind},skew_ppm=0"},
    )
    assert result.returncode == 0 and result.stdout.strip() == "True"
    assert f"offset={behind} would put the TSC below zero" in result.stderr


# ---- bad input at the command line's edges: refused before anything starts ----------------------------------------
# (arguments, what the message must name). Paths in braces are made by `edges`. Each case exits 2 with one message
# naming the value, no traceback, and starts no JVM: a Spark JVM takes several seconds of CPU to start, the command
# well under one (CPU time, unlike the wall clock, does not grow with the load of a shared machine).
EDGE_CASES = [
    (["spark-conf", "--channel", "x=downsampel:64"], "channel.x.handler=downsampel"),
    (["spark-conf", "--channel", "x=downsample:0"], "channel.x.params=0"),
    (["spark-conf", "--channel", "x=buffered:7"], "channel.x.params=7"),
    (["spark-conf", "--channel", "x=mpc:-1"], "channel.x.params=-1"),
    (["spark-conf", "--channel", "x=xoy:5,2"], "'x=xoy:5,2'"),  # one syntax: parameters separated by ':'
    (["spark-conf", "--channel", "x=xoy:5:2"], "channel.x.params=5,2"),
    (["spark-conf", "--compression", "lz4"], "spark.cloudprofiler.compression=lz4"),
    (["spark-conf", "--channel-blocks", "-3"], "spark.cloudprofiler.channelBlocks=-3"),
    (["spark-conf", "--task-enabled", "yes"], "spark.cloudprofiler.task.enabled=yes"),
    (["spark-conf", "--roll-bytes", "1000"], "spark.cloudprofiler.roll.bytes=1000"),
    (["spark-conf", "--task-handler", "spc"], "handler spc takes 1 parameter"),
    (["spark-conf", "--rules", "x=bogus"], "'x=bogus'"),
    (["spark-conf", "--rules", "a=null;x=xoy:5:2"], "'x=xoy:5:2'"),
    (["spark-conf", "--rules-file", "{bad_json}"], "rules.file={bad_json} is invalid: rule at line 1 'a=xoy:5:2'"),
    (["spark-conf", "--rules-file", "{toml}"], "rules.file={toml} is invalid: rules file {toml}: cannot be read as"),
    (["config", "set", "--app", "{app}", "x=bogus"], "'x=bogus'"),
    (["config", "set", "--app", "{app}", "--timeout", "-1", "x=null"], "--timeout -1"),
    (["config", "get", "--app", "{app}", "--timeout", "0"], "--timeout 0"),
    (["config", "set", "--app", "{other}", "x=null"], "{other} is no application folder"),
    (["config", "set", "--app", "{logs}", "x=null"], "application folders (app-1)"),
    (["config", "get", "--app", "{file}"], "{file} is no application folder (<logDir>/<app id>): it is a file"),
    (["report", "{missing}", "--master", "local[1]"], "{missing} is not the log folder of an application (it does not"),
    (["report", "{file}"], "{file} is not the log folder of an application (it is a file"),
    (["report", "{app}", "--conf", "spark.hadoop.fs.s3a.endpoint"], "'spark.hadoop.fs.s3a.endpoint' is not KEY=VALUE"),
    (["generate", "--rate", "inf"], "got inf"),
    (["generate", "--rate", "1e30"], "got 1e+30"),
    (["generate", "--port", "99999"], "got 99999"),
    (["bench", "accuracy", "--gap", "-1"], "--gap=-1"),
    (["bench", "accuracy", "--gap", "nan"], "--gap=nan"),
    (["bench", "accuracy", "--runs", "0"], "--runs=0"),
]
NO_JVM_CPU_S = 2.0


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges")
    (root / "app" / "host").mkdir(parents=True)
    (root / "app" / "spark-tasks.arrows").write_bytes(b"")
    (root / "logs" / "app-1").mkdir(parents=True)
    (root / "logs" / "app-1" / "spark-tasks.arrows").write_bytes(b"")
    (root / "other").mkdir()
    (root / "other" / "notes.txt").write_text("not a log")
    (root / "a-file").write_text("not a folder")
    (root / "bad.json").write_text('{"rules": [{"pattern": "a", "handler": "xoy", "params": [5, 2]}]}')
    (root / "rules.toml").write_text('[[rules]]\npattern = "a"\nhandler = "null"\n')  # the driver reads JSON
    return {"app": root / "app", "logs": root / "logs", "other": root / "other", "file": root / "a-file",
            "missing": root / "missing", "bad_json": root / "bad.json", "toml": root / "rules.toml"}


@pytest.mark.parametrize("argv, named", EDGE_CASES, ids=[" ".join(argv) for argv, _ in EDGE_CASES])
def test_a_bad_value_is_refused_at_once_naming_it(edges, argv, named):
    import resource
    import subprocess
    import sys
    import time

    argv = [arg.format(**edges) for arg in argv]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", *argv], capture_output=True, text=True,
                          timeout=120)
    wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert named.format(**edges) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "Py4J" not in done.stderr
    assert cpu < NO_JVM_CPU_S, f"{cpu:.1f} s of CPU ({wall:.1f} s): a JVM started"


# ---- the analysis's arguments: refused before any Spark job, with one line naming them ----------------------------
@pytest.fixture(scope="module")
def small_app(tmp_path_factory):
    """An application folder of two record channels and a counter channel (written without Spark), and a file cut
    short beside them."""
    folder = tmp_path_factory.mktemp("small-app")
    made = run_python(
        """
        import numpy as np
        import cloudprofiler as cp
        for name, handler, params in (("ysb.source", "buffered", ()), ("ysb.sink", "buffered", ()),
                                      ("ysb.rate", "spc", (1000000,))):
            with cp.Channel(name, handler, params) as ch:
                ch.log_many(np.arange(1000))
        """,
        env={"CLOUDPROFILER_LOG_DIR": str(folder)},
    )
    assert made.returncode == 0, made.stderr
    (folder / "cut.arrows").write_bytes(next(folder.glob("ysb.sink.*.arrows")).read_bytes()[:600])
    return folder


ANALYSIS_CASES = [
    (lambda app: app.tasks(job_id="x"), "tasks(job_id='x'): job_id takes an integer"),
    (lambda app: app.tasks(job_id=[1, "a"]), "tasks(job_id=[1, 'a'])"),
    (lambda app: app.stages(job_group=5), "stages(job_group=5): job_group takes a string"),
    (lambda app: app.tasks(jobid=3), "no filter 'jobid'; the filters are job_id, job_group, job_tag"),
    (lambda app: app.stages(ratio=-1), "stages(ratio=-1)"),
    (lambda app: app.stragglers(ratio=float("nan")), "stragglers(ratio=nan)"),
    (lambda app: app.counters("ysb.source"), "'ysb.source' is a record channel, read by records()"),
    (lambda app: app.records("ysb.rate"), "'ysb.rate' is a counter channel, read by counters()"),
]


def test_the_analysis_refuses_bad_arguments_before_any_spark_job(small_app):
    from cloudprofiler.analysis import open_application

    app = open_application(small_app)
    tracker = app.spark.sparkContext.statusTracker()
    for i, (call, message) in enumerate(ANALYSIS_CASES):
        app.spark.sparkContext.setJobGroup(f"edge-{i}", message)
        with pytest.raises(cp.CloudProfilerError) as refused:  # InvalidArgumentError, UnknownChannelError
            call(app)
        assert message in str(refused.value) and "\n" not in str(refused.value)
        assert list(tracker.getJobIdsForGroup(f"edge-{i}")) == [], f"{message}: a Spark job ran"
    assert app.stages(ratio=2, job_id=[1, 2]).count() == 0  # good filters still plan


def test_open_application_says_a_path_is_missing_or_a_file_before_a_session_starts(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    result = run_python(
        f"""
        from pyspark import SparkContext
        from cloudprofiler.analysis import NotAnApplicationError, open_application
        for path in ({str(tmp_path / "missing")!r}, {str(tmp_path / "a-file")!r}):
            try:
                open_application(path)
            except NotAnApplicationError as exc:
                print(exc)
        print("no JVM" if SparkContext._jvm is None else "a JVM started")
        """
    )
    assert result.stdout.splitlines()[:1] == [
        f"{tmp_path / 'missing'} is not the log folder of an application (it does not exist); expected "
        "<logDir>/<application id> as spark.cloudprofiler.logDir collects it"], result.stderr[-2000:]
    assert f"{tmp_path / 'a-file'} is not the log folder of an application (it is a file, not a folder)" in \
        result.stdout
    assert result.stdout.splitlines()[-1] == "no JVM"


def test_the_report_s_file_warnings_are_its_findings_not_raw_warnings(small_app, tmp_path):
    import re
    import subprocess
    import sys

    from cloudprofiler.analysis.report.data import SECTIONS

    done = subprocess.run([sys.executable, "-m", "cloudprofiler.cli", "report", str(small_app), "-o",
                           str(tmp_path / "report.html")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "UserWarning" not in done.stderr and "catalog.py" not in done.stderr, done.stderr[-3000:]
    # in the findings, which the terminal summary wraps at its width: where depends on the folder's path
    assert "cut.arrows could not be read" in " ".join(done.stdout.split())
    # progress, a line as the folder is opened and as each section is gathered, the seconds since the start
    said = re.findall(r"^cloudprofiler report: \[ *([\d.]+) s\] (.*)$", done.stderr, re.MULTILINE)
    assert said[0][1].startswith("the application opened: ") and said[0][1].endswith(" records"), done.stderr
    assert sorted(line for _, line in said[1:]) == sorted(f"the {name} section gathered" for name, _ in SECTIONS)
    assert [float(s) for s, _ in said] == sorted(float(s) for s, _ in said)


def test_a_build_with_an_old_setuptools_stops_with_one_line_naming_the_version_it_needs(tmp_path):
    """`pip install --no-build-isolation .` in a fresh venv (Python 3.11's bundles setuptools 65, which cannot read
    project.license as an SPDX string) stops with one line, not a page of setuptools' validation."""
    import subprocess
    import sys
    from pathlib import Path

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = str(venv / "bin" / "python")
    version = subprocess.run([python, "-c", "import setuptools; print(setuptools.__version__)"], capture_output=True,
                             text=True, timeout=60).stdout.strip()
    if not version or int(version.split(".")[0]) >= 77:  # a Python that bundles none, or a newer one
        subprocess.run([python, "-m", "pip", "install", "-q", "setuptools==65.5.0"], check=True, timeout=300)
        version = "65.5.0"
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", str(root)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert f"cloudprofiler: building needs setuptools >= 77 (this environment has {version})" in output, output
    assert "configuration error" not in output and "project.license" not in output
