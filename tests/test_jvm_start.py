"""The embedded analysis session's JVM (cloudprofiler.analysis.jvm_start), in sessions of processes of their own with
a home folder of the test's: the first writes its classes' archive as its JVM exits, the next start checks it and
the JVM maps it (its class loading log says the classes came from it) and the caller's options come after its
own; a cut archive is never used; a folder others may enter gets none; the quick compiler and few shuffle partitions
only for a small folder, a partitions setting of spark-defaults.conf kept."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyspark import SparkContext

from cloudprofiler.analysis import jvm_start, session

SESSION = textwrap.dedent("""
    import json, sys
    from cloudprofiler.analysis.session import local_session
    conf = {"spark.driver.extraJavaOptions": sys.argv[2]} if len(sys.argv) > 2 else None
    spark = local_session(conf, files_bytes=json.loads(sys.argv[1]))
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    print("arguments", json.dumps(list(bean.getInputArguments())), flush=True)
    print("partitions", spark.conf.get("spark.sql.shuffle.partitions"), flush=True)
""")


def session_arguments(home: Path, files_bytes, options: str = "", archive: str = "on") -> list:
    """The driver JVM's arguments of a local_session started in a process with `home` (`session_output`)."""
    return session_output(home, files_bytes, options, archive)["arguments"]


def session_output(home: Path, files_bytes, options: str = "", archive: str = "on") -> dict:
    """The driver JVM's arguments and the shuffles' partitions of a local_session started in a process with `home`;
    returns once that JVM has exited (it goes on after its Python process, writing its archive), so that an archive
    it writes is whole."""
    conf = home / "spark-conf"  # an empty conf folder: the JVM archives no class where one on its path holds files
    conf.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), jvm_start.SWITCH: archive, "SPARK_CONF_DIR": str(conf)}
    args = [sys.executable, "-c", SESSION, json.dumps(files_bytes), *([options] if options else [])]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines()
                if line.startswith(("arguments ", "partitions ")))
    arguments = json.loads(said["arguments"])
    part = option(arguments, "ArchiveClassesAtExit")
    if part:
        pid = Path(part).with_suffix(".jvm").read_text().split("\n")[0]
        deadline = time.monotonic() + 180
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.2)
    return {"arguments": arguments, "partitions": int(said["partitions"])}


def folder_of(home: Path) -> Path:
    return home / ".cache" / "cloudprofiler" / "jvm"


def option(arguments: list, name: str) -> "str | None":
    found = [a.split("=", 1)[1] for a in arguments if a.startswith(f"-XX:{name}=")]
    return found[-1] if found else None


def test_the_first_session_leaves_an_archive_that_the_next_maps_and_a_cut_one_is_never_used(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    output = session_output(home, 10_000)
    first = output["arguments"]
    assert output["partitions"] == 2 * os.cpu_count()  # a small folder's analysis: few shuffle partitions
    part = Path(option(first, "ArchiveClassesAtExit"))
    assert part.parent == folder_of(home) and part.stat().st_size > 10 << 20
    assert (folder_of(home).stat().st_mode & 0o777) == 0o700
    assert "-XX:TieredStopAtLevel=1" in first and option(first, "SharedArchiveFile") is None
    sidecar = part.with_suffix(".jvm").read_text().split("\n")
    saved = tmp_path / "saved.part"
    shutil.copyfile(part, saved)

    log = tmp_path / "classes.log"
    given = f"-Xlog:class+load=info:file={log}"
    second = session_arguments(home, 10_000, given)
    archive = Path(option(second, "SharedArchiveFile"))
    assert second.index(given) > second.index(f"-XX:SharedArchiveFile={archive}")  # the caller's come last: they win
    assert archive.parent == folder_of(home) and archive.name.endswith(".jsa")
    assert (archive.stat().st_mode & 0o777) == 0o400 and not part.exists() and not part.with_suffix(".jvm").exists()
    assert option(second, "ArchiveClassesAtExit") is None
    loaded = [line for line in log.read_text().splitlines() if "org.apache.spark.SparkContext " in line]
    assert loaded and "shared objects file (top)" in loaded[0], loaded

    # a part cut short (its writer killed while it wrote) is checked in a JVM of its own, which it crashes, and goes
    archive.unlink()
    cut = folder_of(home) / f"{archive.stem}-cut.part"
    cut.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    cut.with_suffix(".jvm").write_text(f"{2 ** 22 + 7}\n{sidecar[1]}\n{sidecar[2]}\n")
    third = session_arguments(home, 10_000)
    assert option(third, "SharedArchiveFile") is None and not cut.exists() and not archive.exists()
    assert option(third, "ArchiveClassesAtExit")  # it writes a new one instead


def test_no_archive_where_others_may_enter_its_folder_or_it_is_a_link_or_off(tmp_path):
    home = tmp_path / "home"
    folder_of(home).mkdir(parents=True, mode=0o755)
    os.chmod(folder_of(home), 0o755)
    assert option(session_arguments(home, None), "ArchiveClassesAtExit") is None
    folder_of(home).rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder_of(home).symlink_to(elsewhere)
    assert option(session_arguments(home, None), "ArchiveClassesAtExit") is None
    assert list(elsewhere.iterdir()) == []
    folder_of(home).unlink()
    output = session_output(home, None, archive="off")
    arguments = output["arguments"]
    assert output["partitions"] == 200  # Spark's default where the folder's size is unknown
    assert option(arguments, "ArchiveClassesAtExit") is None and option(arguments, "SharedArchiveFile") is None


@pytest.mark.parametrize("files_bytes, quick", [(10_000, True), (jvm_start.QUICK_COMPILER_BYTES, False),
                                                (None, False)])
def test_the_quick_compiler_only_for_a_small_folder(files_bytes, quick, monkeypatch):
    monkeypatch.setattr(SparkContext, "_gateway", None)  # as in a process whose JVM the session starts
    monkeypatch.setenv(jvm_start.SWITCH, "off")
    options, part = jvm_start.options(files_bytes)
    assert part is None and options == (jvm_start.QUICK_COMPILER if quick else [])


def test_no_archive_where_sparks_conf_folder_holds_files(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    monkeypatch.setenv(jvm_start.SWITCH, "on")
    monkeypatch.setattr(SparkContext, "_gateway", None)
    assert jvm_start.options(10_000) == (jvm_start.QUICK_COMPILER, None)
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("files_bytes, partitions", [
    (None, None), (0, 2 * os.cpu_count()), (200 << 20, max(4, 2 * os.cpu_count())),
    (session.SMALL_FILES_BYTES - 1, max(16, 2 * os.cpu_count())), (session.SMALL_FILES_BYTES, None)])
def test_the_shuffles_of_a_small_folder_s_analysis_have_few_partitions(files_bytes, partitions):
    assert session.shuffle_partitions(files_bytes) == partitions


def test_none_where_the_processs_jvm_runs_already():
    assert SparkContext._gateway is not None  # the tests' session fixture started it
    assert jvm_start.options(10_000) == ([], None)


def test_java_options_of_spark_defaults_stay_beside_its_own(tmp_path):
    home = tmp_path / "home"
    (home / "spark-conf").mkdir(parents=True)
    (home / "spark-conf" / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -Dcloudprofiler.kept=yes\nspark.sql.shuffle.partitions 7\n")
    output = session_output(home, 10_000)
    arguments = output["arguments"]
    assert output["partitions"] == 7  # the user's setting, not the one for a small folder
    assert "-Dcloudprofiler.kept=yes" in arguments and "-XX:TieredStopAtLevel=1" in arguments
    assert arguments.index("-Dcloudprofiler.kept=yes") > arguments.index("-XX:TieredStopAtLevel=1")
