"""`cloudprofiler bench operators`: what timing every SQL physical operator (`spark.cloudprofiler.operators`) adds
to the 22 TPC-H queries, on data of the real generator (`harness.tpch`).

One local-mode session with the plugin; for each query, after a warm-up run of each side, runs with operator timing
off and on come in pairs whose order alternates (off, on, on, off, off, on, ...: a drift over the runs favours
neither side, wholly so with an even --repeat). The setting is read from the session's SQL configuration per query,
so one session serves both sides. Per query: every run's seconds, the median added time and whether the two sides
returned the same rows; then the total over the queries per run, judged against the goal (`judge`): at most 3% added
at the default setting. Last, the operators' figures against a truth the product did not compute (`coverage`): for
every task whose operators were timed, the sum of their exclusive times against the task's run time as Spark
measured it (executor run time), which it can exceed only by its error."""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

from .cpu import process_cpu_s

OPERATORS_KEY = "spark.cloudprofiler.operators"
GOAL_ADDED = 0.03  # total added time at the default setting, at most
SIDES = {False: "off", True: "on"}
# the sides of the i-th pair of runs, in order: off first, then on first, and so on (ABBA), so that a drift over the
# runs (the JIT and the caches settling, which made a query's later runs faster) favours neither side; run off then
# on every time, it counted that drift as the probes' gain (the off runs' totals fell 5% a pair on 2026-12-01)
PAIR_ORDER = ((False, True), (True, False))
ERRORS_ALLOWED = 3  # a task's operators may exceed its run time by this many standard errors of their sum...
RUN_TIME_RESOLUTION_S = 1e-3  # ...and by the run time's resolution: Spark gives it in whole milliseconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (1: about 1 GB of data)")
    parser.add_argument("--repeat", type=int, default=4,
                        help="timed runs of each query per side, in pairs whose order alternates (even: drift cancels)")
    parser.add_argument("--warmups", type=int, default=1, help="untimed runs of each query per side before them")
    parser.add_argument("--queries", type=lambda text: text.split(","), default=None,
                        help="the queries to run, comma-separated (q01,q06; default all 22)")
    parser.add_argument("--data", default=None,
                        help="folder of the generated data, a subfolder per scale factor, reused when complete "
                             "(default ~/.cache/cloudprofiler/tpch)")
    parser.add_argument("--master", default=None, help="the session's master (default local[<cores>])")
    parser.add_argument("--driver-memory", default="4g", help="the local session's heap (its executor's too)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")


def judge(off_totals: list[float], on_totals: list[float], goal: float = GOAL_ADDED) -> dict:
    """The verdict on the added time from the totals over all queries of each run, off and on (the i-th of each
    side run one after the other). `added` is the medians' ratio less 1, `added_runs` each run's. The machine's
    floor is the spread of the runs off between themselves, (max - min) / min: a difference this large comes from
    the machine alone. "met" when the added time plus the floor is within the goal, "not met" when the added time
    less the floor is above it, else (or with one run per side, whose floor is unknown) "not measurable"."""
    if not off_totals or len(off_totals) != len(on_totals):
        raise ValueError(f"expected as many runs off as on, at least one, got {len(off_totals)} and {len(on_totals)}")
    added = statistics.median(on_totals) / statistics.median(off_totals) - 1
    runs = [on / off - 1 for off, on in zip(off_totals, on_totals)]
    floor = (max(off_totals) - min(off_totals)) / min(off_totals) if len(off_totals) > 1 else None
    if floor is None:
        verdict = "not measurable"
    elif added - floor > goal:
        verdict = "not met"
    elif added + floor <= goal:
        verdict = "met"
    else:
        verdict = "not measurable"
    return {"added": added, "added_runs": runs, "added_min": min(runs), "added_max": max(runs), "floor": floor,
            "goal": goal, "verdict": verdict}


def coverage(shares: list[float], excess_errors: list[float]) -> dict:
    """The distribution of each timed task's operator time as a share of its run time (`shares`), and the tasks
    whose operators exceed the run time by more than ERRORS_ALLOWED standard errors (`excess_errors`: the excess
    over the run time in standard errors of the operators' sum, <= 0 for a task within it)."""
    if not shares:
        return {"tasks": 0, "verdict": "no timed task"}
    ordered = sorted(shares)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    over = sum(1 for e in excess_errors if e > ERRORS_ALLOWED)
    return {"tasks": len(shares), "share_min": ordered[0], "share_p5": at(0.05), "share_p50": at(0.5),
            "share_p95": at(0.95), "share_max": ordered[-1], "over_run_time": over,
            "verdict": "agree" if over == 0 else f"{over} task(s) over their run time"}


def task_shares(app) -> tuple[list[float], list[float]]:
    """Per task attempt with timed operators: their exclusive seconds summed over its run time (Spark's executor
    run time), and by how many standard errors of that sum it exceeds the run time."""
    from pyspark.sql import functions as F

    per_task = (app.operator_tasks().groupBy("task_attempt_id")
                .agg(F.sum("exclusive_s").alias("operators_s"), F.sqrt(F.sum(F.col("exclusive_err_s") ** 2))
                     .alias("err_s"))
                .join(app.tasks().select("task_attempt_id", "executor_run_time_ms"), "task_attempt_id")
                .where(F.col("executor_run_time_ms") > 0).collect())
    shares, excess = [], []
    for r in per_task:
        over = r["operators_s"] - r["executor_run_time_ms"] / 1e3 - RUN_TIME_RESOLUTION_S
        shares.append(r["operators_s"] / (r["executor_run_time_ms"] / 1e3))
        excess.append(over / r["err_s"] if r["err_s"] else (math.inf if over > 0 else 0.0))
    return shares, excess


def _sort_key(row) -> tuple:
    return tuple((value is not None, value) if value is not None else (False, 0) for value in row)


def same_results(a: list, b: list, rel_tol: float = 1e-9) -> bool:
    """Two results of a query hold the same rows in any order. Rows are compared as sorted lists; a double is
    compared with a relative tolerance, as a sum of doubles differs in its last bits with the order in which the
    partial sums meet. On tpchgen-cli's data no query has one: its prices, quantities, discounts and balances are
    decimal(15, 2), so every sum and average of the 22 queries is a decimal, equal in any order, and compared
    exactly like every other value."""
    if len(a) != len(b):
        return False
    for row_a, row_b in zip(sorted(map(tuple, a), key=_sort_key), sorted(map(tuple, b), key=_sort_key)):
        if len(row_a) != len(row_b):
            return False
        for x, y in zip(row_a, row_b):
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=rel_tol):
                    return False
            elif x != y:
                return False
    return True


def query_runs(spark, text: str, repeat: int, warmups: int, jvm_pid: int) -> dict:
    """`text` run with operator timing off and on in pairs (`PAIR_ORDER`), `warmups` untimed rounds first: every timed
    run's seconds and the local JVM's CPU seconds meanwhile per side, the median added time and CPU, and whether every
    run returned the rows of the first run off."""
    results: dict[bool, list] = {False: [], True: []}
    seconds: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}

    def run(on: bool) -> tuple[float, float, list]:
        spark.conf.set(OPERATORS_KEY, str(on).lower())
        t0, c0 = time.perf_counter(), process_cpu_s(jvm_pid)
        rows = spark.sql(text).collect()
        return time.perf_counter() - t0, process_cpu_s(jvm_pid) - c0, rows

    for _ in range(warmups):
        run(False), run(True)
    for i in range(repeat):
        for on in PAIR_ORDER[i % 2]:
            took, used, rows = run(on)
            seconds[on].append(took)
            cpu[on].append(used)
            results[on].append(rows)
    spark.conf.unset(OPERATORS_KEY)
    first = results[False][0]
    equal = all(same_results(first, rows) for side in (False, True) for rows in results[side])
    return {"off_s": seconds[False], "on_s": seconds[True], "off_cpu_s": cpu[False], "on_cpu_s": cpu[True],
            "rows": len(first), "added": statistics.median(seconds[True]) / statistics.median(seconds[False]) - 1,
            "added_cpu": statistics.median(cpu[True]) / max(statistics.median(cpu[False]), 1e-9) - 1,
            "results_equal": equal}


def _session(master: str, driver_memory: str, log_dir: str):
    from ...spark import builder

    spark = (builder(log_dir=log_dir).master(master).config("spark.driver.memory", driver_memory)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(args: argparse.Namespace) -> int:
    from .. import tpch

    if args.repeat < 1 or args.warmups < 0 or args.scale <= 0:
        print(f"cloudprofiler bench operators: expected --repeat >= 1, --warmups >= 0 and --scale > 0, got "
              f"{args.repeat}, {args.warmups} and {args.scale:g}", file=sys.stderr)
        return 2
    names = args.queries or list(tpch.QUERIES)
    unknown = [name for name in names if name not in tpch.QUERIES]
    if unknown:
        print(f"cloudprofiler bench operators: no TPC-H query {', '.join(unknown)}: expected q01 to q22",
              file=sys.stderr)
        return 2
    progress = sys.stderr if args.json else sys.stdout
    root = args.data or tpch.DEFAULT_ROOT
    if not (tpch.scale_folder(root, args.scale) / tpch.MARKER).is_file():
        print(f"generating TPC-H at scale factor {args.scale:g} into {tpch.scale_folder(root, args.scale)}",
              file=progress, flush=True)
    folder = tpch.generate(root, args.scale)
    master = args.master or f"local[{os.cpu_count() or 2}]"
    with tempfile.TemporaryDirectory(prefix="cp-bench-operators-") as log_dir:
        spark = _session(master, args.driver_memory, log_dir)
        try:
            tpch.register(spark, folder)
            jvm_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()  # local mode: the executor's too
            rows = []
            for name in names:
                row = {"query": name, **query_runs(spark, tpch.query(name), args.repeat, args.warmups, jvm_pid)}
                rows.append(row)
                print(f"  {name}: off {_seconds(row['off_s'])} s, on {_seconds(row['on_s'])} s, "
                      f"{row['added']:+.1%} ({row['added_cpu']:+.1%} CPU), "
                      f"results {'equal' if row['results_equal'] else 'DIFFER'}", file=progress, flush=True)
            app_id = spark.sparkContext.applicationId
        finally:
            spark.stop()
        from ... import tables
        from ...analysis import open_application

        print("comparing each timed task's operator time with its run time", file=progress, flush=True)
        agreement = coverage(*task_shares(open_application(tables.app_folder(log_dir, app_id))))
    total = _total(rows, "off_s", "on_s", args.repeat)
    cpu = _total(rows, "off_cpu_s", "on_cpu_s", args.repeat)
    differ = [r["query"] for r in rows if not r["results_equal"]]
    if args.json:
        print(json.dumps({"scale": args.scale, "master": master, "repeat": args.repeat, "queries": rows,
                          "total": total, "total_cpu": cpu, "coverage": agreement}, indent=1))
        return 1 if differ else 0
    _print(rows, total, cpu, args, master)
    _print_coverage(agreement)
    for name in differ:
        print(f"bench operators: {name} returned other rows with operator timing on than off", file=sys.stderr)
    return 1 if differ else 0


def _total(rows: list[dict], off: str, on: str, repeat: int) -> dict:
    """The sums over all queries of each run's `off` and `on` figures, judged."""
    off_totals = [sum(r[off][i] for r in rows) for i in range(repeat)]
    on_totals = [sum(r[on][i] for r in rows) for i in range(repeat)]
    return {off: off_totals, on: on_totals, **judge(off_totals, on_totals)}


def _seconds(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def _percent(values: list[float]) -> str:
    return " ".join(f"{v:+.1%}" for v in values)


def _print(rows: list[dict], total: dict, cpu: dict, args: argparse.Namespace, master: str) -> None:
    from ...console import print_table

    print()
    print(f"TPC-H scale factor {args.scale:g}, {master}, {OPERATORS_KEY} off and on in pairs of alternating order, "
          f"{args.repeat} timed runs each after {args.warmups} warm-up run(s) each:")
    print_table([{**r, "off": _seconds(r["off_s"]), "on": _seconds(r["on_s"]),
                  "equal": "equal" if r["results_equal"] else "DIFFER"} for r in rows],
                [("query", "query", ""), ("rows", "rows", "d"), ("off", "off (s), each run", ""),
                 ("on", "on (s), each run", ""), ("added", "added, median", "+.1%"),
                 ("added_cpu", "CPU added, median", "+.1%"), ("equal", "results", "")])
    print()
    print_table([_total_row("all queries, time", total["off_s"], total["on_s"], total),
                 _total_row("all queries, JVM CPU", cpu["off_cpu_s"], cpu["on_cpu_s"], cpu)],
                [("what", "total", ""), ("off", "off (s), each run", ""), ("on", "on (s), each run", ""),
                 ("added", "added, median", "+.1%"), ("runs", "added, each run", ""),
                 ("spread", "spread", ""), ("floor", "floor (off runs' spread)", ""), ("goal", "goal", "")])
    print("(JVM CPU: the CPU seconds of the session's JVM, driver and executor, during each run: what the JVM did, "
          "less sensitive than the time to other processes on the machine)")


def _print_coverage(agreement: dict) -> None:
    print()
    if not agreement["tasks"]:
        print("operators against run time: no task had timed operators")
        return
    print(f"operators against run time, over the {agreement['tasks']} tasks with timed operators: their exclusive "
          f"time summed is min {agreement['share_min']:.0%}, p5 {agreement['share_p5']:.0%}, median "
          f"{agreement['share_p50']:.0%}, p95 {agreement['share_p95']:.0%}, max {agreement['share_max']:.0%} of the "
          f"task's run time (Spark's executor run time, which also holds what no operator covers: deserializing the "
          f"task, writing its shuffle output, its result); over the run time by more than {ERRORS_ALLOWED} standard "
          f"errors: {agreement['over_run_time']} ({agreement['verdict']})")


def _total_row(what: str, off: list[float], on: list[float], verdict: dict) -> dict:
    floor = verdict["floor"]
    return {"what": what, "off": _seconds(off), "on": _seconds(on), "added": verdict["added"],
            "runs": _percent(verdict["added_runs"]),
            "spread": f"{verdict['added_min']:+.1%}..{verdict['added_max']:+.1%}",
            "floor": "unknown (one run)" if floor is None else f"{floor:.1%}",
            "goal": f"<= {verdict['goal']:.0%}: {verdict['verdict']}"}
