"""The plugin jar: where it is, and the option table it carries (declared once, in the plugin's Config.java, and
written into the jar when it is built)."""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import pwd
import re
import tempfile
import zipfile
from pathlib import Path

PLUGIN_JAR = "cloudprofiler-plugin_{scala}.jar"  # one per Scala binary version: 2.12 (Spark 3.5), 2.13 (Spark 4)
OPTION_TABLE = "io/cloudprofiler/spark/options.json"


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
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_lib" / name, here.parent.parent / "jvm-plugin" / "build" / name):
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(f"{name} is not built: run `make build`")


@functools.cache
def option_table() -> dict:
    """{"options": [{"key", "default", "expected", "min", "max", "doc"}, ...], "tmp", "channel_handler",
    "channel_params", "executor_folders"}: see Config.json()."""
    with zipfile.ZipFile(jar_path()) as jar:
        return json.loads(jar.read(OPTION_TABLE))


def python_name(key: str) -> str:
    """spark.cloudprofiler.collect.intervalSeconds -> collect_interval_seconds."""
    leaf = key.removeprefix("spark.cloudprofiler.").replace(".", "_")
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", leaf).lower()


def options() -> dict[str, str]:
    """Python-friendly option names -> spark.cloudprofiler.* keys."""
    return {python_name(o["key"]): o["key"] for o in option_table()["options"]}


def default(key: str) -> str:
    """The plugin's default of an option, with this process's temporary folder where it says <tmp> and its user's
    name where it says <user> (the JVM's user.name: the name of the process's real user id)."""
    (value,) = [o["default"] for o in option_table()["options"] if o["key"] == key]
    table = option_table()
    return value.replace(table["tmp"], tempfile.gettempdir()).replace(table["user"], pwd.getpwuid(os.getuid()).pw_name)


def channel_key(channel: str, what: str) -> str:
    """The key of a trace channel's "handler" or "params"."""
    return option_table()["channel_" + what].replace("<name>", channel)
