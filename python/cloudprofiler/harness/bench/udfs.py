"""`cloudprofiler bench udfs`: what timing every Python UDF batch (`spark.cloudprofiler.udfs`) adds to a pickled
Python UDF job, a pandas UDF job and a mapInArrow job.

One local-mode session started with the timing (its workers run in the daemon that times them); the session's
setting, which each query's tasks read, turns it off and on between runs, so both sides run in the same workers.
Per job, after warm-up runs of each side, runs off and on alternate (drift over the run hits both sides); the
median added time is judged against the goal (operators.judge: the spread of the runs off is the machine's floor):
at most 2% added. Then the worst case in a worker alone, without Spark (`in_worker`): what a machine too busy to
time whole jobs still measures."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from .operators import judge

UDFS_KEY = "spark.cloudprofiler.udfs"
GOAL_ADDED = 0.02


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of each job, in 4 partitions")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each job per side, alternating")
    parser.add_argument("--warmups", type=int, default=1, help="untimed runs of each job per side before them")
    parser.add_argument("--worker-rounds", type=int, default=41, help="rounds of each side in a worker alone")
    parser.add_argument("--worker-batches", type=int, default=2000, help="batches of 100 rows per round there")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")


def jobs(spark, rows: int) -> dict:
    """name -> a function that runs the job and returns its one number (the same on both sides)."""
    import pandas as pd
    from pyspark.sql import functions as F

    plus_one = F.udf(lambda v: v + 1, "long", useArrow=False)

    def pandas_plus_one(v):
        return v + 1

    # the type hints that make it a scalar pandas UDF, as objects (this module's annotations are text)
    pandas_plus_one.__annotations__ = {"v": pd.Series, "return": pd.Series}
    pandas_plus_one = F.pandas_udf(pandas_plus_one, "long")

    def arrow_batches(batches):
        yield from batches

    ids = spark.range(0, rows, 1, 4)

    def total(frame, column):
        return lambda: frame.agg(F.sum(column)).first()[0]

    return {"Python UDF (pickled, BatchEvalPython)": total(ids.select(plus_one("id").alias("y")), "y"),
            "pandas UDF (ArrowEvalPython)": total(ids.select(pandas_plus_one("id").alias("y")), "y"),
            "mapInArrow": total(ids.mapInArrow(arrow_batches, "id long"), "id")}


def _timed(spark, job, on: bool) -> tuple[float, object]:
    spark.conf.set(UDFS_KEY, "true" if on else "false")
    began = time.perf_counter()
    result = job()
    return time.perf_counter() - began, result


def measure(spark, rows: int, repeat: int, warmups: int) -> list[dict]:
    out = []
    for name, job in jobs(spark, rows).items():
        for _ in range(warmups):
            for on in (False, True):
                _timed(spark, job, on)
        seconds, results = {False: [], True: []}, set()
        for _ in range(repeat):
            for on in (False, True):
                took, result = _timed(spark, job, on)
                seconds[on].append(took)
                results.add(result)
        verdict = judge(seconds[False], seconds[True], GOAL_ADDED)
        out.append({"job": name, "rows": rows, "seconds_off": seconds[False], "seconds_on": seconds[True],
                    "same_result": len(results) == 1, **verdict})
    return out


def in_worker(rounds: int, batches: int) -> dict:
    """The timing's cost in a worker alone, its worst case: PySpark's own serializers read and write batches of 100
    pickled rows of one number through a function that adds 1 (the cheapest a row gets), in this process, untimed
    and timed alternately (each timed round into a hand-off channel of its own, taken by this process's inbox as an
    executor takes its workers'). Returns the seconds of each side's rounds, the median of the rounds' ratios less 1
    (`added`) with the spread of the ratios, and the time added per batch."""
    import io
    import statistics

    import cloudprofiler as cp
    from pyspark.serializers import BatchedSerializer, CPickleSerializer

    from ...handoff import Handoff, inbox_start
    from ...spark.udf_timing import Task

    folder = tempfile.mkdtemp(prefix="cloudprofiler-bench-udfs-")
    cp.start(os.path.join(folder, "logs"))
    inbox_start(os.path.join(folder, "inbox"))
    payload = io.BytesIO()
    BatchedSerializer(CPickleSerializer(), 100).dump_stream(([i] for i in range(batches * 100)), payload)

    def once(timed: bool) -> float:
        serializer = BatchedSerializer(CPickleSerializer(), 100)

        def func(split_index, rows):
            return (row[0] + 1 for row in rows)

        if timed:
            func, _, serializer, _ = Task(100, 0, Handoff(os.path.join(folder, "inbox"), "bench-udfs")).wrap(
                func, None, serializer, serializer)
        stream = io.BufferedReader(io.BytesIO(payload.getvalue()))
        began = time.perf_counter()
        serializer.dump_stream(func(0, serializer.load_stream(stream)), io.BytesIO())
        return time.perf_counter() - began

    seconds = {False: [], True: []}
    for _ in range(rounds):
        for timed in (False, True):
            seconds[timed].append(once(timed))
    ratios = [on / off - 1 for off, on in zip(seconds[False], seconds[True])]
    added = statistics.median(ratios)
    return {"job": f"in a worker: {batches} batches of 100 pickled rows, +1 each", "rounds": rounds,
            "seconds_off": seconds[False], "seconds_on": seconds[True], "added": added,
            "added_p25": statistics.quantiles(ratios, n=4)[0], "added_p75": statistics.quantiles(ratios, n=4)[2],
            "us_per_batch": (statistics.median(seconds[True]) - statistics.median(seconds[False])) / batches * 1e6}


def run(args) -> int:
    import cloudprofiler.spark as cps
    from ...console import print_table

    folder = tempfile.mkdtemp(prefix="cloudprofiler-bench-udfs-")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (cps.builder(log_dir=os.path.join(folder, "logs"), local_dir=os.path.join(folder, "local"),
                         calibration_enabled=False, udfs=True)
             .master("local[2]").config("spark.ui.enabled", "false").getOrCreate())
    try:
        rows = measure(spark, args.rows, args.repeat, args.warmups)
    finally:
        spark.stop()
    worker = in_worker(args.worker_rounds, args.worker_batches)
    if args.json:
        print(json.dumps({"jobs": rows, "in_worker": worker}, indent=2))
    else:
        print_table([worker], [("job", "case", ""), ("rounds", "rounds", "d"), ("added", "added (median)", ".1%"),
                               ("added_p25", "p25", ".1%"), ("added_p75", "p75", ".1%"),
                               ("us_per_batch", "us per batch", ".2f")])
        print()
        table = [{**r, "median_off": sorted(r["seconds_off"])[len(r["seconds_off"]) // 2],
                  "median_on": sorted(r["seconds_on"])[len(r["seconds_on"]) // 2]} for r in rows]
        print_table(table, [("job", "job", ""), ("median_off", "median off (s)", ".3f"),
                            ("median_on", "median on (s)", ".3f"), ("added", "added", ".1%"),
                            ("added_min", "min", ".1%"), ("added_max", "max", ".1%"),
                            ("floor", "floor (spread off)", ".1%"), ("verdict", "goal 2%", ""),
                            ("same_result", "same result", "")])
    return 0 if all(r["same_result"] for r in rows) else 1
