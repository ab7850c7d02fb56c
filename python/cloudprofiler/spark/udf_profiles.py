"""Spark 4's own Python UDF profiler (`spark.sql.pyspark.udf.profiler=perf`) beside the product's UDF timing: its
results live in the session's Python driver only (never in the event log or the log folder), so `cps.report(spark)`
takes them from the session and the report's Python UDFs section shows them beside the workers' parts."""
from __future__ import annotations

import pstats
import tempfile
from pathlib import Path

PROFILER_KEY = "spark.sql.pyspark.udf.profiler"


def function_seconds(spark) -> dict[str, float]:
    """Per function name: the cumulative seconds Spark's perf profiler measured in it, summed over the UDFs it
    profiled in this session (cProfile's time in the function and what it called, on the workers); empty where the
    session has no profile (Spark < 4, the profiler off or nothing profiled yet)."""
    profile = getattr(spark, "profile", None)
    if profile is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="cloudprofiler-udf-profiles-") as folder:
        try:
            profile.dump(folder, type="perf")  # the public way out: a pstats file per UDF
        except Exception:  # a session whose profiles cannot be dumped (Connect without them): none to show
            return {}
        seconds: dict[str, float] = {}
        for path in Path(folder).glob("*.pstats"):
            # per function, the largest cumulative time: a function called by itself or from several places is
            # counted once, by its outermost calls
            per_udf: dict[str, float] = {}
            for (_, _, name), (_, _, _, cumulative, _) in pstats.Stats(str(path)).stats.items():
                per_udf[name] = max(per_udf.get(name, 0.0), cumulative)
            for name, value in per_udf.items():
                seconds[name] = seconds.get(name, 0.0) + value
    return seconds
