"""The embedded Spark session: what the analysis runs on when the caller brings none."""
from __future__ import annotations

import os
import sys

_session = None


def local_session():
    """A local Spark session on every core (local[*]), Spark's UI off and its logging quiet, started on first use
    and reused (a stopped one is replaced). Python workers run this interpreter, which has cloudprofiler."""
    global _session
    from pyspark.sql import SparkSession

    if _session is not None and not _session.sparkContext._jsc.sc().isStopped():
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _session = (SparkSession.builder.master("local[*]").appName("cloudprofiler-analysis")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate())
    _session.sparkContext.setLogLevel("ERROR")
    return _session
