"""Builds libcloudprofiler with make and the Spark plugin jar with javac (against the jars of the pyspark that the
building Python imports, for its Scala version), places them, the plugin jars built before for other Scala versions
(`make build` builds the Scala 2.12 one against pyspark 3.5) and the benchmark driver in the package's _lib/ folder,
then compiles the cffi extension against the library."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import setuptools

# pyproject.toml's [build-system] requires, which a build without isolation takes from the environment as it is:
# one line naming what is missing, instead of setuptools' page about project.license (an SPDX string: setuptools 77)
SETUPTOOLS_NEEDED = 77
_missing = []
if int(setuptools.__version__.split(".")[0]) < SETUPTOOLS_NEEDED:
    _missing.append(f"setuptools >= {SETUPTOOLS_NEEDED} (this environment has {setuptools.__version__})")
if importlib.util.find_spec("cffi") is None:
    _missing.append("cffi")
if _missing:
    sys.exit(f"cloudprofiler: building needs {' and '.join(_missing)}: run `pip install 'setuptools>="
             f"{SETUPTOOLS_NEEDED}' cffi` first, then `pip install --no-build-isolation .`")

from setuptools import Extension, setup  # noqa: E402 -- after the check of its version
from setuptools.command.build_ext import build_ext  # noqa: E402

ROOT = Path(__file__).resolve().parent
LIB = ROOT / "python" / "cloudprofiler" / "_lib"
JARS = ROOT / "jvm-plugin" / "build"
ARTIFACTS = [
    ROOT / "native" / "build" / "libcloudprofiler.so",
    ROOT / "native" / "build" / "cp_bench",
    ROOT / "native" / "build" / "cp_ret_end",
    JARS / "cloudprofiler-bench.jar",
]


def _install(source: Path, target: Path) -> None:
    """Copy aside, then rename: processes that have the old library or jar mapped keep reading the old file."""
    aside = target.with_name(target.name + ".tmp")
    shutil.copy2(source, aside)
    os.replace(aside, target)


def _build_jar() -> None:
    """jvm-plugin/build.sh, unless the jar is newer than every source; without javac or pyspark the wheel has no jar
    and says so (an isolated build sees no pyspark: build with --no-build-isolation)."""
    spec = importlib.util.find_spec("pyspark")
    libraries = sorted(Path(spec.submodule_search_locations[0], "jars").glob("scala-library-*.jar")) if spec else []
    scala = ".".join(libraries[0].name.removeprefix("scala-library-").split(".")[:2]) if libraries else "none"
    jar = JARS / f"cloudprofiler-plugin_{scala}.jar"
    sources = [p for folder in ("jvm-plugin/src", "native/src", "native/include") for p in (ROOT / folder).rglob("*")]
    if jar.exists() and all(p.stat().st_mtime <= jar.stat().st_mtime for p in sources):
        return
    missing = [name for name, found in (("javac", shutil.which("javac")),
                                        ("pyspark", spec)) if not found]
    if missing:
        print(f"cloudprofiler: building without the Spark plugin jar: {' and '.join(missing)} not found "
              f"(pyspark must be importable by {sys.executable}: pip install --no-build-isolation)", file=sys.stderr)
        return
    subprocess.run(["bash", str(ROOT / "jvm-plugin" / "build.sh")], check=True,
                   env={**os.environ, "PYTHON": sys.executable})


class BuildNativeFirst(build_ext):
    def run(self):
        subprocess.run(["make", "-C", str(ROOT / "native"), "--no-print-directory"], check=True)
        _build_jar()
        LIB.mkdir(exist_ok=True)
        for artifact in ARTIFACTS + sorted(JARS.glob("cloudprofiler-plugin_*.jar")):
            if artifact.exists():
                _install(artifact, LIB / artifact.name)
        super().run()
        if not self.inplace:  # the wheel's copy of the package gets _lib/ too
            target = Path(self.build_lib) / "cloudprofiler" / "_lib"
            target.mkdir(parents=True, exist_ok=True)
            for item in LIB.iterdir():
                _install(item, target / item.name)


# Channel.log's per-record call: a plain C extension, because cffi releases the GIL around every call.
LOG_CALL = Extension(
    "cloudprofiler._log_call",
    ["python/cloudprofiler/_log_call.c"],
    include_dirs=["native/include"],
    library_dirs=[str(LIB)],
    libraries=["cloudprofiler"],
    extra_link_args=["-Wl,-rpath,$ORIGIN/_lib"],
    py_limited_api=True,
)

# What the Python UDF timing does per batch, in C: no batch then runs Python of ours (see _udf_timing.c).
UDF_TIMING = Extension("cloudprofiler._udf_timing", ["python/cloudprofiler/_udf_timing.c"], libraries=["m"],
                       py_limited_api=True)

setup(
    cffi_modules=["python/cloudprofiler/_build_native.py:ffibuilder"],
    ext_modules=[LOG_CALL, UDF_TIMING],
    cmdclass={"build_ext": BuildNativeFirst},
)
