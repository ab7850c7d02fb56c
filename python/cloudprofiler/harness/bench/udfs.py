"""`cloudprofiler bench udfs`: what timing Python UDF batches (`spark.cloudprofiler.udfs`) adds, first in its worst
case, a worker alone (`in_worker`: PySpark's own serializers over batches of 100 pickled rows of one number through a
function that adds 1, the cheapest a row gets), then to a pickled Python UDF job, a pandas UDF job and a mapInArrow
job in a local-mode session started with the timing (its workers run in the daemon that times them; the session's
setting, which each query's tasks read, turns it off and on between runs, so both sides run in the same workers).

Each case runs off and on in rounds, alternately (off then on, then on then off: drift over the run and the order
within a round hit both sides alike); every round's ratio on / off - 1 is printed, and the goal (at most 2% added)
is judged on their median by `judge_rounds`. Each side is timed by CPU seconds, which a loaded host's other
processes do not advance, the wall clock given beside: in a worker its thread's, in the jobs the session's JVM's and
its Python workers' (on a quiet 2-core VM jobs of 10 M rows differ by 5-20% from one run to the next in wall time).
The per-task costs (opening and closing the task's hand-off channel) are measured apart: they are not a batch's."""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

from .cpu import tree_cpu_s

UDFS_KEY = "spark.cloudprofiler.udfs"
GOAL_ADDED = 0.02
CONFIDENCE = 0.95  # of the interval around the rounds' median that the verdict reads


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of each job, in 4 partitions")
    parser.add_argument("--repeat", type=int, default=6, help="rounds of each job (a run per side, alternating)")
    parser.add_argument("--warmups", type=int, default=1, help="untimed runs of each job per side before them")
    parser.add_argument("--worker-rounds", type=int, default=201, help="rounds in a worker alone (a run per side)")
    parser.add_argument("--worker-batches", type=int, default=1000, help="batches of 100 rows per run there")
    parser.add_argument("--worker-only", action="store_true", help="only the worker alone: no Spark session")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> "tuple[float, float] | None":
    """The distribution-free interval around the median of `values` that holds the population's median with at
    least `confidence`: the k-th smallest and the k-th largest value, k the largest rank whose binomial tail
    (Binomial(n, 1/2) below k) is at most (1 - confidence) / 2. None for too few values (5 or fewer at 95%)."""
    n, tail, k = len(values), 0, 0
    while k < n and tail + math.comb(n, k) / 2 ** n <= (1 - confidence) / 2:
        tail += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def judge_rounds(off: list[float], on: list[float], goal: float = GOAL_ADDED) -> dict:
    """The verdict on the added time from rounds of one run per side (the i-th of each side run one after the
    other): each round's ratio on / off - 1 (`ratios`, in order), their median (`added`), quartiles, extremes, and
    the median's interval at CONFIDENCE (`median_interval`). "met" when the interval lies within the goal, "not met"
    when it lies above it, else (or with too few rounds for an interval) "not measurable"."""
    if not off or len(off) != len(on):
        raise ValueError(f"expected as many runs off as on, at least one, got {len(off)} and {len(on)}")
    ratios = [b / a - 1 for a, b in zip(off, on)]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    interval = median_interval(ratios)
    if interval is None:
        verdict = "not measurable"
    elif interval[1] <= goal:
        verdict = "met"
    elif interval[0] > goal:
        verdict = "not met"
    else:
        verdict = "not measurable"
    return {"ratios": ratios, "added": statistics.median(ratios), "added_p25": quartiles[0],
            "added_p75": quartiles[2], "added_min": min(ratios), "added_max": max(ratios),
            "interval_low": None if interval is None else interval[0],
            "interval_high": None if interval is None else interval[1], "confidence": CONFIDENCE, "goal": goal,
            "verdict": verdict}


def _rounds(run, rounds: int) -> dict[bool, list]:
    """`run(on)` for `rounds` rounds, off then on in even rounds and on then off in odd ones: side -> results."""
    results: dict[bool, list] = {False: [], True: []}
    for i in range(rounds):
        for on in ((False, True) if i % 2 == 0 else (True, False)):
            results[on].append(run(on))
    return results


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


def measure(spark, rows: int, repeat: int, warmups: int) -> list[dict]:
    """Per job: its runs' wall seconds and CPU seconds (the session's JVM and its Python workers: `tree_cpu_s`) per
    side, whether every run gave the same result, and `judge_rounds` on the CPU seconds, with the wall clock's
    median added beside (`wall_added`)."""
    jvm = spark.sparkContext._jvm.ProcessHandle.current().pid()  # local mode: the executor and its workers too
    out = []
    for name, job in jobs(spark, rows).items():
        results = set()

        def run(on: bool) -> tuple[float, float]:
            spark.conf.set(UDFS_KEY, "true" if on else "false")
            began, cpu = time.perf_counter(), tree_cpu_s(jvm)
            results.add(job())
            return time.perf_counter() - began, tree_cpu_s(jvm) - cpu

        _rounds(run, warmups)
        runs = _rounds(run, repeat)
        wall = {side: [w for w, _ in r] for side, r in runs.items()}
        cpu = {side: [c for _, c in r] for side, r in runs.items()}
        row = {"job": name, "rows": rows, "seconds_off": wall[False], "seconds_on": wall[True], "cpu_off": cpu[False],
               "cpu_on": cpu[True], "same_result": len(results) == 1,
               "wall_added": judge_rounds(wall[False], wall[True])["added"], **judge_rounds(cpu[False], cpu[True])}
        out.append(row)
        print(f"{name}: CPU added {row['added']:+.2%} (median of {repeat} rounds), wall clock {row['wall_added']:+.2%}",
              file=sys.stderr, flush=True)
    return out


class _KeptOpen:
    """A task's hand-off channel whose close the bench makes after its run's clock stops: a task's cost, measured
    apart, not a batch's."""

    def __init__(self, handoff):
        self.log = handoff.log

    def close(self) -> None:
        pass


def in_worker(rounds: int, batches: int) -> dict:
    """The timing's cost in a worker alone, its worst case: PySpark's own serializers read and write `batches`
    batches of 100 pickled rows of one number through a function that adds 1 (the cheapest a row gets), in this
    process, untimed and timed (each timed run a task, into a hand-off channel of its own, taken by this process's
    inbox as an executor takes its workers'), in `_rounds`. Returns each run's CPU seconds (this thread's) and wall
    seconds per side, `judge_rounds` on the CPU seconds, the CPU time added per batch (the sides' medians), the
    records a timed run logged, and the per-task costs: the median ms to open and to close its channel."""
    import cloudprofiler as cp

    folder = tempfile.mkdtemp(prefix="cloudprofiler-bench-udfs-")
    try:
        return _in_worker(folder, rounds, batches)
    finally:
        cp.stop()  # the inbox and the library's threads, then their files go
        shutil.rmtree(folder, ignore_errors=True)


def _in_worker(folder: str, rounds: int, batches: int) -> dict:
    import io

    import cloudprofiler as cp
    from pyspark.serializers import BatchedSerializer, CPickleSerializer

    from ...handoff import Handoff, inbox_start
    from ...spark.udf_timing import Task

    cp.start(os.path.join(folder, "logs"))
    inbox = os.path.join(folder, "inbox")
    inbox_start(inbox)
    payload = io.BytesIO()
    BatchedSerializer(CPickleSerializer(), 100).dump_stream(([i] for i in range(batches * 100)), payload)
    opened_ms, closed_ms, records = [], [], set()

    def run(timed: bool) -> tuple[float, float]:
        serializer = BatchedSerializer(CPickleSerializer(), 100)

        def func(split_index, rows):
            return (row[0] + 1 for row in rows)

        handoff = None
        if timed:
            began = time.perf_counter()
            handoff = Handoff(inbox, "bench-udfs")
            opened_ms.append((time.perf_counter() - began) * 1e3)
            func, _, serializer, _ = Task(100, 0, _KeptOpen(handoff)).wrap(func, None, serializer, serializer)
        stream = io.BufferedReader(io.BytesIO(payload.getvalue()))
        cpu, wall = time.thread_time(), time.perf_counter()
        serializer.dump_stream(func(0, serializer.load_stream(stream)), io.BytesIO())
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        if handoff is not None:
            records.add(handoff.stats.logged)
            began = time.perf_counter()
            handoff.close()
            closed_ms.append((time.perf_counter() - began) * 1e3)
        return cpu, wall

    run(False), run(True)  # warm-up: the first run of each side imports and allocates
    opened_ms.clear(), closed_ms.clear()
    seconds = _rounds(run, rounds)
    cpu = {side: [c for c, _ in runs] for side, runs in seconds.items()}
    return {"job": f"in a worker: {batches} batches of 100 pickled rows, +1 each", "rounds": rounds,
            "batches": batches, "cpu_off": cpu[False], "cpu_on": cpu[True],
            "wall_off": [w for _, w in seconds[False]], "wall_on": [w for _, w in seconds[True]],
            **judge_rounds(cpu[False], cpu[True]),
            "us_per_batch": (statistics.median(cpu[True]) - statistics.median(cpu[False])) / batches * 1e6,
            "records_per_task": sorted(records), "open_ms": statistics.median(opened_ms),
            "close_ms": statistics.median(closed_ms)}


def _ratios(row: dict) -> str:
    """Every round's ratio, in order, ten to a line."""
    cells = [f"{r:+.1%}" for r in row["ratios"]]
    return "\n".join("    " + " ".join(c.rjust(7) for c in cells[i:i + 10]) for i in range(0, len(cells), 10))


def run(args) -> int:
    from ...console import print_table

    rows = []
    if not args.worker_only:
        import cloudprofiler.spark as cps

        folder = tempfile.mkdtemp(prefix="cloudprofiler-bench-udfs-")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (cps.builder(log_dir=os.path.join(folder, "logs"), local_dir=os.path.join(folder, "local"),
                             calibration_enabled=False, udfs=True)
                 .master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        try:
            rows = measure(spark, args.rows, args.repeat, args.warmups)
        finally:
            spark.stop()
            shutil.rmtree(folder, ignore_errors=True)
    worker = in_worker(args.worker_rounds, args.worker_batches)
    if args.json:
        print(json.dumps({"jobs": rows, "in_worker": worker}, indent=2))
        return 0 if all(r["same_result"] for r in rows) else 1
    load = os.getloadavg()[0]
    columns = [("added", "added (median)", ".2%"), ("interval_low", "95% low", ".2%"),
               ("interval_high", "95% high", ".2%"), ("added_p25", "p25", ".1%"), ("added_p75", "p75", ".1%"),
               ("added_min", "min", ".1%"), ("added_max", "max", ".1%"), ("verdict", "goal 2%", "")]
    print(f"Load average at the end: {load:.1f}. In a worker alone, each side on its thread's CPU clock; every "
          "round's on / off - 1:")
    print(_ratios(worker))
    print_table([worker], [("job", "case", ""), ("rounds", "rounds", "d"), *columns,
                           ("us_per_batch", "us per batch", ".2f")])
    print(f"Per task, apart: opening its hand-off channel {worker['open_ms']:.2f} ms, closing it "
          f"{worker['close_ms']:.2f} ms (medians); records per timed task: {worker['records_per_task']}")
    if rows:
        print()
        for r in rows:
            print(f"{r['job']}, every round's on / off - 1 (CPU of the JVM and its Python workers):")
            print(_ratios(r))
        table = [{**r, "median_off": statistics.median(r["seconds_off"]),
                  "median_on": statistics.median(r["seconds_on"]), "cpu_median_off": statistics.median(r["cpu_off"])}
                 for r in rows]
        print_table(table, [("job", "job", ""), ("median_off", "wall off (s)", ".3f"),
                            ("median_on", "wall on (s)", ".3f"), ("wall_added", "wall added", "+.1%"),
                            ("cpu_median_off", "CPU off (s)", ".2f"), *columns, ("same_result", "same result", "")])
    return 0 if all(r["same_result"] for r in rows) else 1
