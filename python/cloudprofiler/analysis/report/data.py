"""What the report shows, gathered from an Application as small pandas frames.

Only aggregates come to the driver: quantiles, histograms, per-stage and per-hop rows. The one exception is the
task timeline, which draws attempts; past TIMELINE_CAP attempts it keeps every failed or retried attempt and a
uniform sample of the others, and says so (`tasks_total` beside `len(tasks)`).
"""
from __future__ import annotations

import math
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd

from ..operator_hops import hop_rows, row_prefixes
from ..pipeline import ordered_sketches, pipeline_rows
from . import streaming as streaming_section
from . import udfs as udfs_section
from ..sketch import RELATIVE_ACCURACY
from ...udf_records import CHANNEL as UDF_CHANNEL

TIMELINE_CAP = 20_000  # task attempts drawn on the timeline
STRAGGLERS_KEPT = 50  # the worst stragglers, by ratio
THROUGHPUT_POINTS = 150  # periods over the application's span (the period rounds to 1, 2 or 5 x 10^k ms)
ERROR_BINS_PER_DECADE = 8  # the error-bound distributions: fixed log bins
LATENCY_BINS = 60  # the latency densities: log bins over each hop's range

TASK_COLUMNS = ["task_attempt_id", "job_id", "stage_id", "stage_attempt", "partition", "attempt_number",
                "executor_id", "host", "status", "failure_reason", "launch_time_ms", "finish_time_ms",
                "launch_t_ns", "finish_t_ns", "start_t_ns", "end_t_ns", "duration_ns", "err_ns", "unbounded"]
REASON_CHARS = 400  # a failed section's reason, as the report shows it
QUERIES_SHOWN = 5  # the Queries section: the SQL executions with the most task time, each with its operator tree
STAGE_BOX_QUANTILES = {"p5_ns": 0.05, "p25_ns": 0.25, "p50_ns": 0.5, "p75_ns": 0.75, "p95_ns": 0.95}
# how the pipeline's quantiles are estimated, said beside them (the page's caption, the terminal's table)
SKETCH_NOTE = (f"A hop's percentiles and its bounds' are read from a sketch: within {RELATIVE_ACCURACY:.1%} of the "
               "true value, and never outside the exact min and max; counts, min, max and mean are exact.")


@dataclass
class ReportData:
    """Everything the findings, plots and tables read; small frames, built by `gather` or by hand (tests).

    Frames keep the analysis API's column names (see the contract in the README); those made here:
    - stage_durations: stage_id, stage_attempt, count, min_ns, p5_ns, p25_ns, p50_ns, p75_ns, p95_ns, max_ns,
      mean_ns (successful attempts with a TSC duration)
    - pipeline: pipeline()'s rows plus `pipeline` (0, 1, ...: the trace channels can form several pipelines)
    - hop_bounds: pipeline, hop, remote, count, exact (err_ns == 0), unbounded, err_p50_ns, err_max_ns (finite bounds)
    - hop_errors: pipeline, hop, remote, lo_ns, hi_ns, count (distribution of the finite, non-zero bounds)
    - latency_histograms: pipeline, hop plus latency_histogram()'s columns
    - queries: sql_execution_id, query_task_s, probes, exclusive_s (summed over its probes), description (its
      first job's description), shown: every SQL execution with timed operators, the most task time first
    - operators: operators()'s rows of the queries shown
    - operator_hops: operator_hops()'s rows of the queries shown (sampled rows from operator to operator)
    """
    summary: dict
    channels: pd.DataFrame = field(default_factory=pd.DataFrame)
    stages: pd.DataFrame = field(default_factory=pd.DataFrame)
    stage_durations: pd.DataFrame = field(default_factory=pd.DataFrame)
    stragglers: pd.DataFrame = field(default_factory=pd.DataFrame)
    stragglers_total: int = 0
    tasks: pd.DataFrame = field(default_factory=pd.DataFrame)
    tasks_total: int = 0
    pipeline: pd.DataFrame = field(default_factory=pd.DataFrame)
    hop_bounds: pd.DataFrame = field(default_factory=pd.DataFrame)
    hop_errors: pd.DataFrame = field(default_factory=pd.DataFrame)
    latency_histograms: pd.DataFrame = field(default_factory=pd.DataFrame)
    throughput: pd.DataFrame = field(default_factory=pd.DataFrame)
    throughput_period_ms: int = 1000
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)
    health: pd.DataFrame = field(default_factory=pd.DataFrame)
    queries: pd.DataFrame = field(default_factory=pd.DataFrame)
    operators: pd.DataFrame = field(default_factory=pd.DataFrame)
    operator_hops: pd.DataFrame = field(default_factory=pd.DataFrame)
    operators_timed: bool = False  # the folder holds the operator tables (spark.cloudprofiler.operators)
    streaming_executions_timed: int = 0  # of the SQL executions with timed operators, streaming micro-batches
    udfs: pd.DataFrame = field(default_factory=pd.DataFrame)  # a row per Python UDF (report.udfs.gather)
    batches: pd.DataFrame = field(default_factory=pd.DataFrame)  # a row per streaming micro-batch (report.streaming)
    batch_trends: pd.DataFrame = field(default_factory=pd.DataFrame)  # per query and operator: first, latest batches
    source_latency: pd.DataFrame = field(default_factory=pd.DataFrame)  # per batch: records' latency from the source
    source_lifetime: pd.DataFrame = field(default_factory=pd.DataFrame)  # the same over each query run's life

    @property
    def tasks_sampled(self) -> bool:
        return len(self.tasks) < self.tasks_total


def started(app) -> ReportData:
    """The report's data before any section is gathered: the application's summary."""
    return ReportData(summary=dict(app.summary()))


def gather(app, progress=None, data: "ReportData | None" = None, done=None) -> ReportData:
    """Ask the Application (cloudprofiler.analysis) for what the report shows. A section whose analysis fails (for
    example a hop whose ids repeat past what can be paired) is left empty and named in the health table and on
    stderr, and the other sections are still gathered. `progress`: called with a line as each section is done;
    `data`: the ReportData to fill (of `started`); `done`: called with each section's name as it is gathered or
    left out."""
    data = started(app) if data is None else data
    failures = {}
    said = threading.Lock()

    def run(chain: list) -> None:
        for name, fill in chain:
            try:
                fill(app, data)
                if progress is not None:
                    with said:
                        progress(f"the {name} section gathered")
            except Exception as exc:  # any failure of one section leaves the others to show
                reason = failure_reason(exc)
                print(f"cloudprofiler report: the {name} section is left out: {reason}", file=sys.stderr)
                failures[name] = {"kind": "report_section", "severity": "error", "subject": name, "count": 0,
                                  "message": f"the report's {name} section is left out: {reason}"}
            if done is not None:
                done(name)

    with ThreadPoolExecutor(GATHER_THREADS, thread_name_prefix="cloudprofiler-report") as pool:
        list(pool.map(run, CHAINS))
    failed = [failures[name] for name, _ in SECTIONS if name in failures]
    if failed:
        data.health = pd.concat([data.health, pd.DataFrame(failed)], ignore_index=True)
    return data


def failure_reason(exc: Exception) -> str:
    """What a failed analysis says, in one line: a Python worker's exception (its last 'SomeError: ...' line) or the
    first line of any other."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    reason = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    return reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 3] + "..."


def _health(app, data: ReportData) -> None:
    data.health = app.health().toPandas()


def _channels(app, data: ReportData) -> None:
    data.channels = app.channels().toPandas()


def _stages(app, data: ReportData) -> None:
    data.stages = app.stages().toPandas()
    data.stragglers_total = int(data.stages["stragglers"].sum()) if not data.stages.empty else 0


def _stragglers(app, data: ReportData) -> None:
    data.stragglers = app.stragglers().limit(STRAGGLERS_KEPT).toPandas()


def _timeline(app, data: ReportData) -> None:
    data.stage_durations = _stage_durations(app.tasks())
    data.tasks, data.tasks_total = _timeline_tasks(app.tasks())


def _calibration(app, data: ReportData) -> None:
    data.calibration = app.calibration().toPandas()


def _throughput(app, data: ReportData) -> None:
    data.throughput_period_ms = throughput_period_ms(data.summary.get("span_ns") or 0.0)
    data.throughput = app.throughput(period_ms=data.throughput_period_ms).toPandas()


def _pipeline(app, data: ReportData) -> None:
    trace = trace_channels(data.channels)
    if len(trace) < 2:
        return
    pipeline, sketches = _pipelines(app, trace)
    bounds, errors, densities = [], [], []
    for hop in hops_shown(pipeline).itertuples():  # with a single hop, end to end is that hop
        hops = sketches[hop.pipeline]
        bounds.append(hops.bounds(hop.hop).assign(pipeline=hop.pipeline, hop=hop.hop))
        errors.append(hops.errors(hop.hop, ERROR_BINS_PER_DECADE).assign(pipeline=hop.pipeline, hop=hop.hop))
        densities.append(hops.histogram(hop.hop, LATENCY_BINS).assign(pipeline=hop.pipeline, hop=hop.hop))
    data.pipeline = pipeline
    if bounds:
        data.hop_bounds = pd.concat(bounds, ignore_index=True)
        data.hop_errors = pd.concat(errors, ignore_index=True)
        data.latency_histograms = pd.concat(densities, ignore_index=True)


def _queries(app, data: ReportData) -> None:
    """The SQL executions with timed operators (a row each), and the operators of the QUERIES_SHOWN with the most
    task time; operators() is computed once (persisted) for both."""
    from pyspark.sql import functions as F

    data.operators_timed = bool(app.operators_timed)
    if not data.operators_timed:
        return
    # a streaming query's micro-batches are SQL executions too: the streaming section shows them per batch; the
    # others' ids first, in one small job, so that an application without any (the demo's) plans no operators()
    timed = app.operator_values().select("task_attempt_id").distinct()
    found = (app.task_table().where(F.col("sql_execution_id").isNotNull()).join(timed, "task_attempt_id", "left_semi")
             .groupBy("sql_execution_id").agg(F.max(F.col("streaming_batch_id").isNotNull()).alias("streaming"))
             .collect())
    executions = [r.sql_execution_id for r in found if not r.streaming]
    data.streaming_executions_timed = len(found) - len(executions)
    if not executions:
        return
    operators = app.operators(sql_execution_id=executions).persist()
    try:
        queries = (operators.groupBy("sql_execution_id")
                   .agg(F.max("query_task_s").alias("query_task_s"), F.count(F.lit(1)).alias("probes"),
                        F.sum("exclusive_s").alias("exclusive_s")).toPandas())
        if queries.empty:
            return
        queries = queries.sort_values(["query_task_s", "sql_execution_id"], ascending=[False, True],
                                      ignore_index=True, na_position="last")
        queries["shown"] = queries.index < QUERIES_SHOWN
        shown = [int(q) for q in queries.loc[queries["shown"], "sql_execution_id"]]
        described = (app.task_table().where(F.col("sql_execution_id").isin(shown))
                     .groupBy("sql_execution_id").agg(F.min_by("job_description", "job_id").alias("description"),
                                                      F.min_by("call_site", "job_id").alias("call_site"))
                     .toPandas())
        queries = queries.merge(described, on="sql_execution_id", how="left")
        data.queries = queries
        data.operators = operators.where(F.col("sql_execution_id").isin(shown)).toPandas()
    finally:
        operators.unpersist()


def _operator_hops(app, data: ReportData) -> None:
    """The sampled rows' latency from operator to operator in the queries shown (a section of its own: where it
    fails, the Queries section still draws its trees), their probes taken from `operators` rather than asked of
    Spark again."""
    if data.operators.empty:
        return
    plan = {int(r.probe_id): (None if pd.isna(r.parent_probe_id) else int(r.parent_probe_id),
                              r.operator, int(r.sql_execution_id)) for r in data.operators.itertuples()}
    data.operator_hops = pd.DataFrame(hop_rows(app, plan))  # no rows, no columns: the tables check .empty


# The report's sections in chains: a section that reads another's data comes after it in one (the pipeline's trace
# channels come from `channels`, the operators' hops from `queries`' operators). The chains run side by side in
# GATHER_THREADS threads, each section's Spark jobs beside the others': most of a short job's time is the driver's
# planning and its tasks' start, which another's jobs fill (the demo's report 2.2 to 2.7 s sooner of 24: README,
# "Measured again 2026-12-06 (evening)"). The stages section is three: its stragglers and timeline apart.
CHAINS = [[("health", _health)], [("stages", _stages)], [("stragglers", _stragglers)], [("timeline", _timeline)],
          [("channels", _channels), ("pipeline", _pipeline)],
          [("queries", _queries), ("operator hops", _operator_hops)], [("streaming", streaming_section.gather)],
          [("calibration", _calibration)], [("throughput", _throughput)], [("udfs", udfs_section.gather)]]
SECTIONS = [section for chain in CHAINS for section in chain]
GATHER_THREADS = 4


def _pipelines(app, trace: list) -> tuple[pd.DataFrame, list]:
    """The pipelines among the trace channels, and each one's HopSketches. The trace channels are chained in the
    order their tuples pass them (`ordered_sketches`); where a hop shares no tuple id (two jobs traced apart, or ids
    an aggregation replaced) the chain is cut, and each piece of two or more channels is a pipeline of its own, with
    its own end to end (read from every ordered pair's sketches: one more pass where the order did not take one)."""
    chain, pairs = ordered_sketches(app, trace)
    rows = pd.DataFrame(pipeline_rows(chain))
    hops = rows[rows["hop"] >= 0].sort_values("hop")
    pieces = [[hops["from_channel"].iloc[0]]]
    for hop in hops.itertuples():
        if hop.count:
            pieces[-1].append(hop.to_channel)
        else:
            pieces.append([hop.to_channel])
    pieces = [p for p in pieces if len(p) >= 2]
    if len(pieces) == 1 and len(pieces[0]) == len(hops) + 1:
        sketches = [chain]
    else:
        sketches = [pairs.chain(piece) for piece in pieces]
    if not sketches:
        return rows.iloc[0:0].assign(pipeline=pd.Series(dtype=int)), []
    frames = [rows if hops is chain else pd.DataFrame(pipeline_rows(hops)) for hops in sketches]
    return pd.concat([f.assign(pipeline=i) for i, f in enumerate(frames)], ignore_index=True), sketches


def trace_channels(channels: pd.DataFrame) -> list[str]:
    """The record channels of trace points (the pipeline's stages), i.e. not the plugin's own channels."""
    if channels.empty:
        return []
    # the plugin's task channels are no pipeline stage, nor are its operators' and sources' sampled rows, nor the
    # Python workers' UDF batches (their ids are events, not tuples: a hop to them pairs nothing)
    skipped = ("spark.task.", *row_prefixes())
    rows = channels[(channels["kind"] == "records") & ~channels["channel"].str.startswith(skipped)
                    & (channels["channel"] != UDF_CHANNEL)]
    return sorted(rows["channel"].unique())


def hops_shown(pipeline: pd.DataFrame) -> pd.DataFrame:
    """The pipelines' rows as the report shows them, pipeline by pipeline: end to end first, then the hops in
    order; with a single hop only that hop (the end-to-end row repeats it)."""
    shown = []
    for _, rows in pipeline.groupby("pipeline", sort=True):
        hops = rows[rows["hop"] >= 0].sort_values("hop")
        shown += [rows[rows["hop"] == -1], hops] if len(hops) >= 2 else [hops]
    return pd.concat(shown, ignore_index=True) if shown else pipeline


def of_hop(frame: pd.DataFrame, hop) -> pd.DataFrame:
    """The rows of a per-hop frame (hop_bounds, hop_errors, latency_histograms) that belong to `hop`, a row of
    hops_shown."""
    if frame.empty:
        return frame
    return frame[(frame["pipeline"] == hop.pipeline) & (frame["hop"] == hop.hop)]


def throughput_period_ms(span_ns: float) -> int:
    """A round period (1, 2 or 5 x 10^k ms, at least 1 ms) that gives about THROUGHPUT_POINTS points."""
    target = max(span_ns / 1e6 / THROUGHPUT_POINTS, 1.0)
    decade = 10 ** math.floor(math.log10(target))
    return int(min((m * decade for m in (1, 2, 5, 10)), key=lambda p: abs(math.log(p / target))))


def _stage_durations(tasks) -> pd.DataFrame:
    """Box-plot statistics of each stage's successful, bounded task durations (one pass on Spark)."""
    from pyspark.sql import functions as F

    quantiles = F.percentile_approx("duration_ns", list(STAGE_BOX_QUANTILES.values()), 10_000)
    timed = F.col("duration_ns").isNotNull() & ~F.isnan("duration_ns")  # unbounded: null or NaN
    rows = (tasks.where((F.col("status") == "SUCCESS") & timed)
            .groupBy("stage_id", "stage_attempt")
            .agg(F.count("*").alias("count"), F.min("duration_ns").alias("min_ns"), quantiles.alias("q"),
                 F.max("duration_ns").alias("max_ns"), F.mean("duration_ns").alias("mean_ns"))
            .toPandas())
    for i, name in enumerate(STAGE_BOX_QUANTILES):
        rows[name] = rows["q"].map(lambda q, i=i: float(q[i]))
    columns = ["stage_id", "stage_attempt", "count", "min_ns", *STAGE_BOX_QUANTILES, "max_ns", "mean_ns"]
    return rows[columns].sort_values(["stage_id", "stage_attempt"], ignore_index=True)


def _timeline_tasks(tasks) -> tuple[pd.DataFrame, int]:
    """The attempts the timeline draws: all of them up to TIMELINE_CAP, else every failed or retried one (up to
    half the cap) and a uniform sample of the others."""
    from pyspark.sql import functions as F

    tasks = tasks.select(*TASK_COLUMNS)
    first = tasks.limit(TIMELINE_CAP + 1).toPandas()
    if len(first) <= TIMELINE_CAP:
        return first, len(first)
    total = tasks.count()
    marked = (F.col("status") != "SUCCESS") | (F.col("attempt_number") > 0)
    kept = tasks.where(marked).limit(TIMELINE_CAP // 2).toPandas()
    rest = tasks.where(~marked)
    fraction = (TIMELINE_CAP - len(kept)) / max(total - len(kept), 1)
    sample = rest.sample(fraction=min(fraction, 1.0), seed=7).limit(TIMELINE_CAP - len(kept)).toPandas()
    return pd.concat([kept, sample], ignore_index=True), total
