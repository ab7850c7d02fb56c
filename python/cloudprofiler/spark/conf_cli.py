"""`cloudprofiler spark-conf`: the spark-submit flags that enable the plugin."""
from __future__ import annotations

import shlex

from . import OPTIONS, spark_conf


def add_arguments(parser) -> None:
    for name, key in OPTIONS.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, default=None, help=f"sets {key}")


def run(args) -> int:
    conf = spark_conf(**{name: getattr(args, name) for name in OPTIONS})
    flags = [f"--jars {shlex.quote(conf.pop('spark.jars'))}"]
    flags += [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items()]
    print(" \\\n  ".join(flags))
    return 0
