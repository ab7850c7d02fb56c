"""The report's Python UDFs section (spark.cloudprofiler.udfs): per UDF, where its workers' time went, in words (a
finding per UDF) and in a table, from udfs()'s rows summed per UDF on Spark."""
from __future__ import annotations

from html import escape

from ...udf_records import PARTS
from . import format as fmt

UDFS_SHOWN = 10  # the UDFs with the most worker time
UDFS_NAMED = 5  # ...of which this many get a finding
BOUNDARY_DOMINANT = 0.5  # moving data across the boundary this share of a UDF's worker time: a warning
BOUNDARY = ("transfer", "read", "serialize")  # the parts that move data between the JVM and the worker
FIRST_WAIT_NAMED_S = 0.1  # a wait for the first batch this long is named
# Spark's own SQL metrics of its Python nodes shown beside the parts (Spark 4.x: the task table's python_<m>_ms):
# running the workers (the JVM's whole wait on them, their start included), and of it executing Python code
SPARK_METRICS = ("total", "processing")
# each part, as a finding says where the time went
PART_WORDS = {"setup": "setting up (reading and unpickling its functions)",
              "wait": "waiting for its input from the JVM",
              "transfer": "waiting for the rest of each input batch (the JVM writing it)",
              "read": "reading (deserializing) its input", "function": "in the function",
              "serialize": "serializing its output"}


def gather(app, data) -> None:
    """data.udfs: a row per UDF (name and kind) of the UDFS_SHOWN with the most worker time: tasks, batches, rows,
    out_rows, each part's seconds, worker_s, task_s summed over its tasks, and the longest wait for a first batch."""
    from pyspark.sql import functions as F

    sums = [F.sum(c).alias(c) for c in ("batches", "out_batches", "rows", "out_rows", *(f"{p}_s" for p in PARTS),
                                         "worker_s", "task_s")]
    spark_sums = [(F.sum(f"python_{m}_ms") / 1e3).alias(f"spark_python_{m}_s") for m in SPARK_METRICS]
    spark_metrics = app.tasks().select("task_attempt_id", *(f"python_{m}_ms" for m in SPARK_METRICS))
    frame = (app.udfs().join(spark_metrics, "task_attempt_id", "left").groupBy("udf", "kind")
             .agg(F.count(F.lit(1)).alias("tasks"), *sums, F.max("first_wait_s").alias("max_first_wait_s"),
                  *spark_sums)
             .orderBy(F.desc("worker_s"), "udf").limit(UDFS_SHOWN))
    data.udfs = frame.toPandas()


def beside_spark_profiler(data, seconds: dict) -> None:
    """data.udfs gets `spark_profiler_s`: the cumulative seconds Spark's own UDF profiler measured in each UDF's
    functions (`seconds`, per function name: cloudprofiler.spark.udf_profiles), NaN for a UDF it did not profile."""
    frame = getattr(data, "udfs", None)
    if frame is None or frame.empty or not seconds:
        return
    found = [[seconds[name] for name in str(udf).split(", ") if name in seconds] for udf in frame["udf"]]
    data.udfs = frame.assign(spark_profiler_s=[sum(values) if values else float("nan") for values in found])


def _spark_metrics(row) -> tuple:
    """SPARK_METRICS' seconds summed over the UDF's tasks, each None where Spark gave none."""
    return tuple(fmt.number(getattr(row, f"spark_python_{m}_s", None)) for m in SPARK_METRICS)


def _profiled(row) -> "float | None":
    return fmt.number(getattr(row, "spark_profiler_s", None))


def _shares(row) -> dict:
    total = float(row.worker_s or 0.0)
    return {p: (float(getattr(row, f"{p}_s")) / total if total > 0 else 0.0) for p in PARTS}


def _batches(row) -> str:
    """'4 batches'; '10 batches in, 13 out' where they differ (an RDD's pickled batches, a grouped map's)."""
    out = getattr(row, "out_batches", row.batches)
    if out == row.batches:
        return f"{fmt.count(row.batches)} batches"
    return f"{fmt.count(row.batches)} batches in, {fmt.count(out)} out"


def sentence(row) -> str:
    """'the pandas UDF `score` spends 70% of its workers' time serializing its output, 25% in the function'."""
    shares = sorted(_shares(row).items(), key=lambda kv: -kv[1])
    first, second = shares[0], shares[1]
    text = (f"the {row.kind} `{row.udf}` spends {fmt.percent(first[1])} of its workers' time "
            f"({fmt.duration(row.worker_s * 1e9)} over {fmt.count(row.tasks)} tasks, {_batches(row)}) "
            f"{PART_WORDS[first[0]]}, {fmt.percent(second[1])} {PART_WORDS[second[0]]}")
    if row.max_first_wait_s >= FIRST_WAIT_NAMED_S:
        text += f"; a worker waited {fmt.duration(row.max_first_wait_s * 1e9)} for its first batch"
    spark_total, spark_code = _spark_metrics(row)
    if spark_total is not None:
        text += f"; Spark's own metrics of its tasks: {fmt.duration(spark_total * 1e9)} running Python workers"
        if spark_code is not None:
            text += (f", {fmt.duration(spark_code * 1e9)} of it executing Python code (the function part here: "
                     f"{fmt.duration(row.function_s * 1e9)})")
    profiled = _profiled(row)
    if profiled is not None:
        text += (f"; Spark's UDF profiler measured {fmt.duration(profiled * 1e9)} in its function, against "
                 f"{fmt.duration(row.function_s * 1e9)} in the function part here and "
                 f"{fmt.duration(row.worker_s * 1e9)} in all")
    return text[0].upper() + text[1:]


def findings(data, finding) -> list:
    """A finding per UDF of the UDFS_NAMED with the most worker time (`finding`: the Finding class): a warning where
    the BOUNDARY parts take BOUNDARY_DOMINANT of its time, else information."""
    frame = getattr(data, "udfs", None)
    if frame is None or frame.empty:
        return []
    span_s = float(data.summary.get("span_ns") or 0.0) / 1e9
    out = []
    for row in frame.head(UDFS_NAMED).itertuples():
        shares = _shares(row)
        boundary = sum(shares[p] for p in BOUNDARY)
        weight = row.worker_s / span_s if span_s > 0 else 0.0
        out.append(finding("warning" if boundary >= BOUNDARY_DOMINANT else "info", weight, sentence(row) + ".",
                           "python_udf"))
    return out


def section(data) -> str:
    """The HTML section: a row per UDF shown, each part's time with its share as a bar; empty without UDF rows."""
    frame = getattr(data, "udfs", None)
    if frame is None or frame.empty:
        return ""
    profiled = "spark_profiler_s" in frame and bool(frame["spark_profiler_s"].notna().any())
    metered = "spark_python_total_s" in frame and bool(frame["spark_python_total_s"].notna().any())
    head = "".join(f"<th>{escape(c)}</th>" for c in ("UDF", "kind", "tasks", "batches", "rows in", "rows out",
                                                      *PARTS, "worker time")
                   + (("Spark: running workers (executing code)",) if metered else ())
                   + (("Spark's UDF profiler",) if profiled else ()))
    body = []
    for row in frame.itertuples():
        shares = _shares(row)
        cells = [escape(str(row.udf)), escape(str(row.kind)), fmt.count(row.tasks), fmt.count(row.batches),
                 fmt.count(row.rows), fmt.count(row.out_rows)]
        cells += [f'<span class="bar" style="width:{shares[p] * 60:.1f}px"></span>'
                  f"{escape(fmt.duration(getattr(row, f'{p}_s') * 1e9))} ({fmt.percent(shares[p])})" for p in PARTS]
        cells.append(escape(fmt.duration(row.worker_s * 1e9)))
        if metered:
            total, code = _spark_metrics(row)
            cells.append(escape("-" if total is None else fmt.duration(total * 1e9)
                                + ("" if code is None else f" ({fmt.duration(code * 1e9)})")))
        if profiled:
            seconds = _profiled(row)
            cells.append(escape(fmt.duration(seconds * 1e9) if seconds is not None else "-"))
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    note = ("Each UDF's Python workers, summed over its tasks: setting up (unpickling the UDF), waiting for input from "
            "the JVM, the transfer of the rest of each input batch once its first bytes came (the JVM writing it: the "
            "worker off the CPU in its read), reading it, the function (with PySpark's conversions around it) and "
            "serializing the output back. "
            "The UDFs with the most worker time first."
            + (" Spark's own SQL metrics of the same tasks (Spark 4): the time its JVM ran the Python workers (its "
               "whole wait on them, their start included) and, in parentheses, the time they executed Python code."
               if metered else "")
            + (" Spark's UDF profiler (spark.sql.pyspark.udf.profiler=perf): cProfile's time in the UDF's functions, "
               "without the boundary around them." if profiled else ""))
    return (f'<section id="udfs"><h2>Python UDFs</h2><p class="note">{escape(note)}</p>'
            f'<div class="scroll"><table class="udfs"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            "</tbody></table></div></section>")
