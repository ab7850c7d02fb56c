"""Why a straggler took long, in words, from what was measured of it (a row of `Application.stragglers()`): more
records read than its stage's median, then the parts of its time that were measurably larger than its stage's,
largest first (time off the CPU, GC, waiting for shuffle blocks, scheduler delay, deserializing the task, the
operator whose own time exceeds its median most, a Python worker's start, a Python UDF's function), then spills.
The findings name the worst straggler of a stage with these words; the stages section lists every straggler kept."""
from __future__ import annotations

from ..stages import STRAGGLER_RATIO
from . import format as fmt
from .data import STRAGGLERS_KEPT

# A part of a straggler's time worth naming is this share of its duration; the parts compared with its stage's
# median task (off the CPU, an operator's own time, a Python worker's start, a UDF's function) must also be
# STRAGGLER_RATIO x the median's: what every task of the stage spends does not explain the one that took longer.
CAUSE_SHARE = 0.10
STRAGGLERS_CAPTION = (f"Successful task attempts over {STRAGGLER_RATIO}x their stage's median duration, the slowest "
                      f"first (at most {STRAGGLERS_KEPT}), with where their time went as far as it was measured: "
                      "Spark's metrics, and the operators' and Python UDFs' own time where they were timed.")
# parts of an attempt's time in Spark's metrics (ms), as they are named
TIME_CAUSES = (("jvm_gc_time_ms", "GC"), ("shuffle_fetch_wait_ms", "waiting for shuffle blocks"),
               ("scheduler_delay_ms", "scheduler delay"), ("executor_deserialize_time_ms", "deserializing the task"))


def metric(row, name: str) -> "float | None":
    """A value of the straggler's row, None where the row lacks it (no task table, no metrics from Spark, nothing
    timed)."""
    return fmt.number(getattr(row, name, None))


def causes(row) -> list[str]:
    """Where the straggler's time went, each part in words (empty where nothing measured explains it)."""
    found = []
    read, median_read = metric(row, "records_read"), metric(row, "median_records_read")
    if read and median_read and read >= STRAGGLER_RATIO * median_read:
        found.append(f"it read {read / median_read:.1f}x the median records ({fmt.count(read)} against "
                     f"{fmt.count(median_read)})")
    total = metric(row, "spark_duration_ms")
    timed = []  # (ms, words)
    for name, label in TIME_CAUSES:
        part = metric(row, name)
        if total and part and part / total >= CAUSE_SHARE:
            timed.append((part, f"{label} {fmt.percent(part / total)} of its time ({fmt.duration(part * 1e6)})"))
    off, median_off = metric(row, "off_cpu_ms"), metric(row, "median_off_cpu_ms")
    if _notable(off, median_off, total):
        timed.append((off, f"off the CPU {fmt.percent(off / total)} of its time ({fmt.duration(off * 1e6)}, the "
                           f"median task {fmt.duration(max(median_off or 0.0, 0.0) * 1e6)}: sleeping, IO, locks or "
                           "waiting on a Python worker)"))
    operator, probe = getattr(row, "top_operator", None), metric(row, "top_probe_id")
    own, median_own = _ms(metric(row, "top_operator_s")), _ms(metric(row, "top_operator_median_s"))
    if operator and _notable(own, median_own, total):
        timed.append((own, f"{operator} (operator {int(probe)}) {fmt.duration(own * 1e6)} of its own time "
                           f"against a median {fmt.duration((median_own or 0.0) * 1e6)}"))
    udf = getattr(row, "udf", None)
    start, median_start = _ms(metric(row, "udf_start_s")), _ms(metric(row, "udf_start_median_s"))
    if udf and _notable(start, median_start, total):
        timed.append((start, f"its Python worker began {fmt.duration(start * 1e6)} after the task's start (the "
                             f"median task {fmt.duration((median_start or 0.0) * 1e6)}: the first Python task on a "
                             "slot waits for its worker to start)"))
    function, median_function = _ms(metric(row, "udf_function_s")), _ms(metric(row, "udf_function_median_s"))
    if udf and _notable(function, median_function, total):
        timed.append((function, f"the Python UDF {udf} {fmt.duration(function * 1e6)} against a median "
                                f"{fmt.duration((median_function or 0.0) * 1e6)}"))
    found += [words for _, words in sorted(timed, key=lambda part: -part[0])]
    disk, memory = metric(row, "disk_spilled_bytes"), metric(row, "memory_spilled_bytes")
    if disk:
        found.append(f"it spilled {fmt.size(disk)} to disk ({fmt.size(memory or 0)} in memory)")
    return found


def _ms(seconds: "float | None") -> "float | None":
    return None if seconds is None else seconds * 1e3


def _notable(part: "float | None", median: "float | None", total: "float | None") -> bool:
    """A part (ms) that is CAUSE_SHARE of the straggler's time and STRAGGLER_RATIO x its stage's median part."""
    return bool(total and part and part / total >= CAUSE_SHARE and part >= STRAGGLER_RATIO * max(median or 0.0, 0.0))
