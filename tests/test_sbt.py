"""build.sbt builds the same jars as jvm-plugin/build.sh, one per Scala binary version (`sbt +package`: 2.13 against
Spark 4, 2.12 against Spark 3.5), with an sbt whose launcher and artifacts come from Maven Central only.

The sbt launcher (org.scala-sbt:sbt-launch, checked against its .sha1), sbt's boot folder, the coursier cache and
a working copy of the build (so that sbt's compiled build definition and zinc's analysis survive a fresh clone)
live under $CLOUDPROFILER_SBT_CACHE (default ~/.cache/cloudprofiler-sbt): the first run downloads about 450 MB,
later runs need no network.
"""
import hashlib
import os
import shutil
import subprocess
import urllib.request
import zipfile
from pathlib import Path

import pytest

import cloudprofiler.spark as cps
from cloudprofiler.harness.bench.spark import BENCH_JAR
from cloudprofiler.spark.jar import PLUGIN_JAR

ROOT = Path(__file__).resolve().parent.parent
CENTRAL = "https://repo1.maven.org/maven2"
CACHE = Path(os.environ.get("CLOUDPROFILER_SBT_CACHE", Path.home() / ".cache" / "cloudprofiler-sbt"))
# What sbt needs of the source tree; everything else stays out of its working copy.
BUILD_FILES = ["build.sbt", "VERSION", "project/build.properties", "jvm-plugin/build-jni.sh", "jvm-plugin/src",
               "native/include", "native/src", "native/bench", "native/Makefile"]


def _sbt_version() -> str:
    for line in (ROOT / "project" / "build.properties").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "sbt.version":
            return value.strip()
    raise AssertionError("project/build.properties names no sbt.version")


def _launcher(version: str) -> Path:
    """The sbt launcher jar from Maven Central, downloaded once and checked against Central's SHA-1."""
    jar = CACHE / f"sbt-launch-{version}.jar"
    if jar.exists():
        return jar
    url = f"{CENTRAL}/org/scala-sbt/sbt-launch/{version}/sbt-launch-{version}.jar"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as r:
            expected = r.read().decode().split()[0]
    except OSError as e:
        pytest.skip(f"the sbt launcher is not cached and Maven Central is unreachable ({url}: {e})")
    assert hashlib.sha1(data).hexdigest() == expected, f"{url}: SHA-1 differs from Central's {expected}"
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = jar.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(jar)
    return jar


def _working_copy() -> Path:
    """The build's files copied into the cache, sources replaced on every run, sbt's target folders kept."""
    work = CACHE / "work"
    for name in BUILD_FILES:
        source, target = ROOT / name, work / name
        if target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    return work


def _entries(jar: Path) -> dict[str, bytes]:
    """Class files, the declarations Python reads and the JNI library of a jar, by name (the library's debug info
    names its build folder, so only its presence is compared; test_the_sbt_jar_loads_its_jni_library runs it)."""
    with zipfile.ZipFile(jar) as z:
        return {n: z.read(n) for n in z.namelist() if n.endswith((".class", ".json", ".so"))}


SCALA_VERSIONS = ["2.13", "2.12"]


@pytest.fixture(scope="module")
def sbt_jars() -> dict[str, Path]:
    launcher = _launcher(_sbt_version())
    work = _working_copy()
    (CACHE / "repositories").write_text("[repositories]\n  local\n  maven-central\n")  # Maven Central only
    command = ["java", "-Xmx1g", f"-Dsbt.boot.directory={CACHE / 'boot'}", f"-Dsbt.global.base={CACHE / 'global'}",
               f"-Dsbt.ivy.home={CACHE / 'ivy2'}", f"-Dsbt.repository.config={CACHE / 'repositories'}",
               "-Dsbt.override.build.repos=true", "-Dsbt.server.forcestart=false", "-Dsbt.color=false",
               "-Dsbt.supershell=false", "-jar", str(launcher), "+package"]
    env = {**os.environ, "COURSIER_CACHE": str(CACHE / "coursier")}
    result = subprocess.run(command, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    version = (ROOT / "VERSION").read_text().strip()
    jars = {v: work / "target" / f"scala-{v}" / f"cloudprofiler-plugin_{v}-{version}.jar" for v in SCALA_VERSIONS}
    assert all(jar.exists() for jar in jars.values()), result.stdout[-2000:]
    return jars


@pytest.mark.parametrize("scala", SCALA_VERSIONS)
def test_sbt_package_builds_the_same_classes_and_jni_library_as_build_sh(sbt_jars, scala):
    name = PLUGIN_JAR.format(scala=scala)
    built = ROOT / "jvm-plugin" / "build" / name  # build.sh's, newer than the package's copy
    ours, theirs = _entries(sbt_jars[scala]), _entries(built if built.exists() else Path(cps.jar_path(name)))
    assert "io/cloudprofiler/native/linux-x86_64/libcloudprofiler_jni.so" in ours
    assert "io/cloudprofiler/spark/sql/SingleChildExpression.class" in ours  # the Scala version's shim
    assert {"io/cloudprofiler/spark/options.json", "io/cloudprofiler/spark/tables.json"} <= set(ours)
    assert sorted(ours) == sorted(theirs)
    # same javac flags: same bytes; the same declarations
    assert [n for n in ours if n.endswith((".class", ".json")) and ours[n] != theirs[n]] == []


def test_the_sbt_jar_loads_its_jni_library(sbt_jars):
    # the benchmark's classes, the sbt jar's plugin and library
    classpath = f"{sbt_jars['2.13']}:{cps.jar_path(BENCH_JAR)}"
    result = subprocess.run(["java", "-cp", classpath, "io.cloudprofiler.JniBenchmark", "1000"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"handler": "buffered"' in result.stdout
