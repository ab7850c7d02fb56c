"""The plugin jar and its option table (plugin_jar), as the session helper names them: the options' Python names,
defaults and the folders they give."""
from __future__ import annotations

import os
import pwd
import re
import tempfile

from ..plugin_jar import PLUGIN_JAR as PLUGIN_JAR
from ..plugin_jar import jar_path as jar_path
from ..plugin_jar import option_table as option_table
from ..plugin_jar import spark_scala_version as spark_scala_version


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
