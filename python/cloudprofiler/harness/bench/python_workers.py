"""The Python trace point's two paths side by side, with 2 and with 8 Python workers (local[n]: a worker per task
slot): records handed over into the executor's buffers (`spark.cloudprofiler.python.handoff`, the default) or
written by each worker's own library. Per path: the wall time of a traced query against the same query without the
trace point, and what a worker carries after it (threads, resident memory, peak memory)."""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from .spark_logs import record_problems

HANDOFF_KEY = "spark.cloudprofiler.python.handoff"
REUSE_KEY = "spark.python.worker.reuse"  # Spark's: false starts a Python worker for every task
FRESH_WAVES = 4  # with fresh workers, the tasks a slot runs in each run: each starts a worker
PATHS = {True: "executor's buffers (hand-off)", False: "worker's own library and files"}


def _worker_state(batches):
    """Yields this Python worker's pid, threads and memory (VmRSS, VmHWM in KiB) once per task."""
    import pyarrow as pa

    for _ in batches:
        pass
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    yield pa.RecordBatch.from_pydict({
        "pid": [os.getpid()], "threads": [len(os.listdir("/proc/self/task"))],
        "rss_kib": [int(status["VmRSS"].split()[0])], "hwm_kib": [int(status["VmHWM"].split()[0])]})


def worker_states(spark, workers: int) -> dict:
    """The median threads and memory of the Python workers a `workers`-task job runs in."""
    schema = "pid long, threads long, rss_kib long, hwm_kib long"
    rows = spark.range(0, workers, 1, workers).mapInArrow(_worker_state, schema).collect()
    median = statistics.median
    return {"worker_processes": len({r.pid for r in rows}), "threads": median(r.threads for r in rows),
            "rss_mib": median(r.rss_kib for r in rows) / 1024, "peak_mib": median(r.hwm_kib for r in rows) / 1024}


def compare(spark, workers: int, rows: int, repeats: int, warmups: int, fresh: bool = False) -> list[dict]:
    """In `spark`, an application of local[workers] with the plugin, which it stops: first the hand-off path alone
    (so that its workers' state is measured before any of them started a library of its own), then rounds of the
    query without a trace point (the machine's floor) and the two paths, paired: the hand-off first in even rounds,
    the workers' own files first in odd ones, so that neither path always follows the other. Each path's fastest
    and median, every run (`runs_s`), and the hand-off's paired differences (`paired_s`: its run minus the files'
    run of the same round), their median and range; the floor's runs beside them (`floor_s`). `fresh`: the
    session starts a worker for every task (REUSE_KEY false) and the query runs FRESH_WAVES tasks a slot, so that
    each run pays each path's start in 4 workers a slot; a worker's state is then not measured (the one that ran a
    path's task is gone)."""
    from ... import spark as cps

    df = spark.range(0, rows, numPartitions=workers * (FRESH_WAVES if fresh else 1))

    def plain():
        df.mapInArrow(lambda batches: batches, df.schema).count()

    def traced(handoff: bool):
        def run():
            spark.conf.set(HANDOFF_KEY, str(handoff).lower())
            cps.trace(df, f"bench-py-{'handoff' if handoff else 'files'}", "id").count()
        return run

    times: dict = {None: [], True: [], False: []}
    for _ in range(warmups):
        plain(), traced(True)()
    state = {True: {} if fresh else worker_states(spark, workers)}
    traced(False)()
    for round_ in range(repeats):
        for side in (None, True, False) if round_ % 2 == 0 else (None, False, True):
            fn = plain if side is None else traced(side)
            t0 = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - t0)
    state[False] = {} if fresh else worker_states(spark, workers)
    spark.stop()
    runs = {True: warmups + repeats, False: 1 + repeats}
    problems = record_problems(Path(cps.log_folder(spark)),
                               {f"bench-py-{name}": (runs[side] * rows,) * 2
                                for side, name in ((True, "handoff"), (False, "files"))})
    base = statistics.median(times[None])
    paired = [h - f for h, f in zip(times[True], times[False])]
    return [{"workers": workers, "fresh": fresh, "path": PATHS[side], "median_s": statistics.median(times[side]),
             "fastest_s": min(times[side]), "spread": (max(times[side]) - min(times[side])) / min(times[side]),
             "added_median_s": statistics.median(times[side]) - base, **state[side], "runs_s": times[side],
             "floor_s": times[None], "paired_s": paired, "paired_median_s": statistics.median(paired),
             "paired_min_s": min(paired), "paired_max_s": max(paired),
             "log_problems": [p for c, p in problems.items() if c.endswith("handoff" if side else "files")]}
            for side in (True, False)]


def print_runs(rows: list[dict]) -> None:
    """Every run of the comparison, paired by round, and the hand-off's paired difference (negative: faster)."""
    for row in rows:
        if not row["path"].startswith("executor's"):
            continue
        (files,) = [r for r in rows if r["workers"] == row["workers"] and r is not row]
        print(f"{row['workers']} workers, every round (s): floor / hand-off / own files / hand-off minus own files")
        for i, (floor, h, f) in enumerate(zip(row["floor_s"], row["runs_s"], files["runs_s"])):
            print(f"  {i + 1:2d}  {floor:.3f}  {h:.3f}  {f:.3f}  {h - f:+.3f}")
        print(f"  paired difference: median {row['paired_median_s']:+.3f} s, from {row['paired_min_s']:+.3f} to "
              f"{row['paired_max_s']:+.3f} s; floor median {statistics.median(row['floor_s']):.3f} s")
