"""The wheel, built as a user builds it (`pip wheel --no-build-isolation` from a copy of the sources, nothing built
yet), carries the native library, the compiled extensions and the Spark plugin jar with its JNI library; installed
on its own, the package logs through its library and finds its jar."""
import io
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from conftest import RESOURCE

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_the_library_the_extensions_and_the_plugin_jar(tmp_path):
    src, dist, site = tmp_path / "src", tmp_path / "dist", tmp_path / "site"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                            str(dist), str(src)], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("cloudprofiler-*.whl")

    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        # the jar for this environment's pyspark (Spark 4: Scala 2.13)
        jar = zipfile.ZipFile(io.BytesIO(whl.read("cloudprofiler/_lib/cloudprofiler-plugin_2.13.jar"))).namelist()
        whl.extractall(site)
    assert {"cloudprofiler/_lib/libcloudprofiler.so", "cloudprofiler/_log_call.abi3.so",
            "cloudprofiler/_udf_timing.abi3.so", "cloudprofiler/_lib/cloudprofiler-bench.jar",
            "cloudprofiler_udfs/__main__.py", "cloudprofiler_udfs/worker.py"} <= names
    # the TPC-H queries of cloudprofiler.harness.tpch, package data
    assert {f"cloudprofiler/harness/tpch_queries/q{n:02d}.sql" for n in range(1, 23)} <= names
    assert any(n.startswith("cloudprofiler/_native") and n.endswith(".so") for n in names)
    assert {RESOURCE, "io/cloudprofiler/spark/CloudProfilerPlugin.class",
            "io/cloudprofiler/CloudProfiler.class"} <= set(jar)

    # the unpacked wheel first on the path, the test environment's packages after it, without their .pth files (the
    # source tree's editable install is one of them)
    code = f"""
import sys
sys.path[:0] = [{str(site)!r}, {sysconfig.get_paths()["purelib"]!r}]
import cloudprofiler as cp, cloudprofiler.spark as cps
assert cp.__file__.startswith({str(site)!r}), cp.__file__
assert cps.jar_path().startswith({str(site)!r}), cps.jar_path()
assert cps.options()["log_dir"] == "spark.cloudprofiler.logDir"  # the option table, read from the jar
cp.start({str(tmp_path / "logs")!r})
with cp.Channel("from-the-wheel", handler="buffered") as ch:
    for i in range(1000):
        ch.log(i)
cp.stop()
print(cp.read_log_dir({str(tmp_path / "logs")!r}, channel="from-the-wheel").num_rows)
"""
    run = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["1000"]
