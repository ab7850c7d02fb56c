"""NativeLoader's order in a real local-mode application: configured path, the jar's resource, SparkFiles (a
library shipped with --files), System.loadLibrary; when all fail, one log line gives every step's reason and
the job runs on."""
import getpass
import shutil
import tempfile
from pathlib import Path

import cloudprofiler.spark as cps
from conftest import RESOURCE, run_python
from neighbour import as_neighbour, neighbour


def _job(jar: Path, log_dir: Path, then: str = "", **conf) -> str:
    """A one-job application with the plugin and a `cp_trace` query; prints the sums and where the library came
    from, runs the statement `then` and stops."""
    settings = "".join(f".config({k!r}, {v!r})" for k, v in {"spark.jars": str(jar), **conf}.items())
    return f"""
        from pathlib import Path
        import cloudprofiler.spark as cps
        spark = (cps.builder(log_dir={str(log_dir)!r}).master("local[1]").config("spark.ui.enabled", "false")
                 {settings}.getOrCreate())
        print("sum", spark.sparkContext.parallelize(range(100), 2).sum())
        print("traced", spark.sql("select sum(t) from (select cp_trace('c', id) as t from range(100))").first()[0])
        print("source", spark._jvm.io.cloudprofiler.NativeLoader.source())
        {then}
        spark.stop()
        """


def test_a_library_shipped_with_files_loads_through_sparkfiles(jar_without_library, tmp_path):
    jar, library = jar_without_library
    result = run_python(_job(jar, tmp_path, **{"spark.files": str(library)}), timeout=300)
    assert "sum 4950" in result.stdout, result.stderr[-3000:]
    assert "source SparkFiles " in result.stdout and "/libcloudprofiler_jni.so" in result.stdout, result.stdout
    assert "disabled on executor" not in result.stderr
    assert list(tmp_path.rglob("spark.task.start.*.arrows"))


def test_the_configured_path_loads_after_a_first_call_without_one_failed(jar_without_library, tmp_path):
    """The driver's plugin loads the library with spark.cloudprofiler.native.path, even when something in its JVM
    asked for the library before (and failed: this jar carries none)."""
    jar, library = jar_without_library
    settings = {"spark.jars": str(jar), "spark.cloudprofiler.native.path": str(library), "spark.ui.enabled": "false"}
    result = run_python(f"""
        from pyspark import SparkConf, SparkContext
        import cloudprofiler.spark as cps
        SparkContext._ensure_initialized(conf=SparkConf().setAll({list(settings.items())!r}))
        print("first", SparkContext._jvm.io.cloudprofiler.NativeLoader.load(None))
        builder = cps.builder(log_dir={str(tmp_path)!r}).master("local[1]")
        for key, value in {settings!r}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        print("source", spark._jvm.io.cloudprofiler.NativeLoader.source())
        print("sum", spark.sparkContext.parallelize(range(100), 2).sum())
        spark.stop()
        """, timeout=300)
    assert "sum 4950" in result.stdout, result.stderr[-3000:]
    assert "first cannot load libcloudprofiler_jni (configured path: not set; jar resource: this jar has no" \
        in result.stdout, result.stdout
    assert f"source configured path {library}" in result.stdout, result.stdout
    assert list(tmp_path.rglob("spark.task.start.*.arrows"))


def test_when_every_step_fails_one_line_names_each_reason_and_the_job_runs(jar_without_library, tmp_path):
    jar, _ = jar_without_library
    missing = tmp_path / "missing.so"
    result = run_python(_job(jar, tmp_path, **{"spark.cloudprofiler.native.path": str(missing)}), timeout=300)
    assert "sum 4950" in result.stdout, result.stderr[-3000:]
    assert "traced 4950" in result.stdout, result.stderr[-3000:]  # cp_trace logs nothing without the library, and runs
    lines = [line for line in result.stderr.splitlines() if "cloudprofiler: disabled on executor driver" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    line = lines[0]
    for reason in (f"configured path: Can't load library: {missing}", f"jar resource: this jar has no /{RESOURCE}",
                   "SparkFiles: ", "libcloudprofiler_jni.so does not exist (not shipped with --files)",
                   "System.loadLibrary: no cloudprofiler_jni in java.library.path"):
        assert reason in line, line
    assert not list(tmp_path.rglob("spark.task.*.arrows"))
    assert "cloudprofiler: the driver checks no handler parameters" in result.stderr  # and says why: the same line
    assert result.stderr.count(f"configured path: Can't load library: {missing}") == 2


def test_the_library_is_never_extracted_into_a_folder_another_user_made(tmp_path):
    """A neighbour who creates the old predictable folder (`<java.io.tmpdir>/cloudprofiler-<user>`, mode 0777) first
    could swap the library between its copy and its load: the plugin extracts into a fresh folder of its own
    instead. It removes the file and the folder once loaded, so that an executor killed later (whose exit hooks
    never run) leaves no copy in the temporary folder."""
    user = neighbour()
    temporary = Path(tempfile.mkdtemp(prefix="cp-jvm-tmp-", dir="/tmp"))  # shared like /tmp: 1777
    try:
        temporary.chmod(0o1777)
        planted = temporary / f"cloudprofiler-{getpass.getuser()}"
        made = as_neighbour(["sh", "-c", f"mkdir {planted} && chmod 0777 {planted}"])
        assert made.returncode == 0, made.stderr
        listing = (f"print('left', sorted(p.name for p in Path({str(temporary)!r}).glob('cloudprofiler-jni-*')), "
                   f"sorted(p.name for p in Path({str(temporary)!r}).rglob('libcloudprofiler*')))")
        result = run_python(_job(Path(cps.jar_path()), tmp_path / "logs", listing,
                                 **{"spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={temporary}"}), timeout=300)
        assert "sum 4950" in result.stdout, result.stderr[-3000:]
        source = next(line for line in result.stdout.splitlines() if line.startswith("source "))
        assert source.startswith(f"source jar resource {temporary}/cloudprofiler-jni-"), source
        assert f"{planted}/" not in source, source
        assert "left [] []" in result.stdout, result.stdout  # its own folder and the library removed once loaded
        assert planted.stat().st_uid == user.pw_uid and not list(planted.iterdir())
        assert list((tmp_path / "logs").rglob("spark.task.start.*.arrows"))
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
