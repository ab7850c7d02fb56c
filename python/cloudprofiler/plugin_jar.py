"""The plugin jar: where it is (shipped in the package, or built in the source tree), for the Spark at hand, and the
option table it carries (declared once, in the plugin's Config.java, and written into the jar when it is built); and
that Spark's spark-defaults.conf, whose settings a session started here adds to."""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import zipfile
from pathlib import Path

PLUGIN_JAR = "cloudprofiler-plugin_{scala}.jar"  # one per Scala binary version: 2.12 (Spark 3.5), 2.13 (Spark 4)


def spark_scala_version() -> str | None:
    """The Scala binary version ("2.12", "2.13") of the Spark that pyspark would run: $SPARK_HOME's, else the
    installed pyspark's (found without importing it); None when there is neither."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        home = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
    for library in sorted(Path(home, "jars").glob("scala-library-*.jar")) if home else ():
        match = re.fullmatch(r"scala-library-(\d+\.\d+)\..*\.jar", library.name)
        if match:
            return match.group(1)
    return None


def jar_path(name: str | None = None) -> str:
    """A jar shipped in this package (or built in the source tree): the plugin's for the Scala version of the Spark
    at hand (`spark_scala_version`; 2.13, Spark 4's, when there is none), unless another is named."""
    name = name or PLUGIN_JAR.format(scala=spark_scala_version() or "2.13")
    here = Path(__file__).resolve().parent
    for candidate in (here / "_lib" / name, here.parent.parent / "jvm-plugin" / "build" / name):
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(f"{name} is not built: run `make build`")


@functools.cache
def jar_json(resource: str):
    """A JSON resource the build writes into the plugin jar from the plugin's own declarations (the options, the
    tables), so that Python reads them instead of repeating them."""
    with zipfile.ZipFile(jar_path()) as jar:
        return json.loads(jar.read(resource))


OPTION_TABLE = "io/cloudprofiler/spark/options.json"


def option_table() -> dict:
    """{"options": [{"key", "default", "expected", "min", "max", "doc"}, ...], "tmp", "channel_handler",
    "channel_params", "executor_folders"}: see Config.json()."""
    return jar_json(OPTION_TABLE)


def udf_modules() -> dict:
    """PySpark's daemon and worker module settings (in that order) whose workers time their UDFs' batches: the
    daemon's workers, and the workers the JVM starts one by one where the daemon is off (spark.python.use.daemon)."""
    table = option_table()
    daemon_key, worker_key = table["python_module_keys"]
    return {daemon_key: table["udf_daemon_module"], worker_key: table["udf_worker_module"]}


def spark_defaults() -> dict:
    """spark-defaults.conf of SPARK_CONF_DIR, or of SPARK_HOME (pyspark's own) conf/: key value, key=value or
    key: value a line."""
    folder = os.environ.get("SPARK_CONF_DIR")
    if not folder:
        from pyspark.find_spark_home import _find_spark_home

        folder = os.path.join(_find_spark_home(), "conf")
    path = Path(folder) / "spark-defaults.conf"
    entries = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        line = line.strip()
        match = re.match(r"([^\s=:]+)\s*[=:\s]\s*(.*)", line)
        if match and not line.startswith(("#", "!")):
            entries[match[1]] = match[2].strip()
    return entries
