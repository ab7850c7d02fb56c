"""The report's streaming section: per streaming query, its micro-batches (Spark's progress of each beside its tasks
and, where operators were timed, the operator that took longest; where its source logs its rows, their latency from
the source to the last operator they reach), and findings where a query's batches grew slower (with the operator whose
time grew most), where its records' latency from the source grew, or where it processed fewer rows per second than
arrived."""
from __future__ import annotations

from html import escape

import pandas as pd

from ..source_rows import (SINK, STATE_SAVE, WINDOW_END, latency_rows, reach_batches, source_moments, source_reach,
                           sources)
from . import format as fmt

MAX_BATCHES = 100_000  # batch rows gathered (a row per batch: a day of 1-second batches fits)
QUERIES_SHOWN = 5  # the streaming queries with the most batch time
BATCHES_SHOWN = 30  # each query's latest batches in its table
TREND_BATCHES = 10  # the latest batches compared with the first ones (batch 0 left out: it starts workers, compiles)
GREW = 1.5  # latest batches' median time over the first ones': "grew"...
GREW_MIN_MS = 100  # ...by this much at least
BEHIND_SHARE = 0.5  # more than this share of the latest batches processed slower than rows arrived...
BEHIND_BATCHES = 3  # ...of this many at least: "does not keep up"


def gather(app, data) -> None:
    """data.batches: a row per batch (streaming.batches) of the QUERIES_SHOWN with the most batch time;
    data.batch_trends: per query and operator position, the median exclusive seconds per batch in its first and
    latest batches (trend_windows), where operators were timed."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import functions as F

    # the records' latency from their source (one pass over them for both tables) beside the batches' own jobs: the
    # longest of the report's sections (the demo's: 3 s of its 12 s after the others were done), every query's, the
    # shown ones kept below
    with ThreadPoolExecutor(1, thread_name_prefix="cloudprofiler-report-latency") as pool:
        latency = pool.submit(latency_rows, app)
        batches = app.batches(latency=False).limit(MAX_BATCHES).toPandas()
        per_batch, lifetime = latency.result()
    if batches.empty:
        return
    total = batches.groupby("query_id")["trigger_execution_ms"].sum().sort_values(ascending=False)
    batches = batches[batches["query_id"].isin(total.index[:QUERIES_SHOWN])]
    data.batches = batches
    shown = set(batches["query_id"])
    data.source_latency = pd.DataFrame([r for r in per_batch if r["query_id"] in shown])
    data.source_lifetime = pd.DataFrame([r for r in lifetime if r["query_id"] in shown])
    # a query of fewer than 4 batches has none to compare, beside one that has
    windows = {query: trend for query, part in batches.groupby("query_id")
               if (trend := trend_windows(part))[0] is not None}
    compared = sorted({int(b) for first, latest in windows.values() for b in [*first["batch_id"], *latest["batch_id"]]})
    if not compared or batches["operators_s"].isna().all():
        return
    ops = (app.batch_operators(list(windows)).where(F.col("batch_id").isin(*compared))
           .select("query_id", "batch_id", "position", "operator", "exclusive_s").toPandas())
    rows = []
    for (query, position, operator), part in ops.groupby(["query_id", "position", "operator"]):
        first, latest = windows[query]
        rows.append({"query_id": query, "position": position, "operator": operator,
                     "first_s": part.loc[part["batch_id"].isin(first["batch_id"]), "exclusive_s"].median(),
                     "latest_s": part.loc[part["batch_id"].isin(latest["batch_id"]), "exclusive_s"].median()})
    data.batch_trends = pd.DataFrame(rows)


def trend_windows(batches: pd.DataFrame) -> tuple:
    """(first, latest): a query's first batches after batch 0 and its latest, TREND_BATCHES each at most and never
    overlapping; (None, None) for a query of fewer than 4 batches."""
    ordered = batches.sort_values(["trigger_start_ms", "batch_id"])
    n = len(ordered) - 1
    if n < 3:
        return None, None
    k = min(TREND_BATCHES, n // 2)
    return ordered.iloc[1:1 + k], ordered.iloc[-k:]


def _source_words(reach) -> str:
    return source_moments()[reach["source"]]


def _reach_words(reach, where: str = "") -> str:
    """The point a query's latency from its source is told to: the sink, or an operator and its place in the plan
    (past a stateful aggregation's shuffle, the end of the task that saved the record's key's state)."""
    if reach["operator"] == SINK:
        return "the sink (its batch's last task's end)"
    saved = ": its key's task's end" if str(reach["operator"]).endswith(STATE_SAVE) else ""
    return f"{reach['operator']} (operator {int(reach['position'])}{where}{saved})"


def _name(query: pd.DataFrame) -> str:
    name = query["query_name"].dropna()
    return f"`{name.iloc[0]}`" if len(name) else f"{query['query_id'].iloc[0][:8]}"


def _batches(frame: pd.DataFrame) -> str:
    ids = sorted(int(b) for b in frame["batch_id"])
    return f"batch {ids[0]}" if len(ids) == 1 else f"batches {ids[0]}-{ids[-1]}"


def findings(data, finding) -> list:
    """Per query: a warning where its latest batches took GREW x its first ones' median time (naming the operator
    whose median time grew most, where operators were timed), and one where in BEHIND_SHARE of its latest batches it
    processed fewer rows per second than arrived."""
    frame = getattr(data, "batches", None)
    if frame is None or frame.empty:
        return []
    trends = getattr(data, "batch_trends", pd.DataFrame())
    span_ms = float(data.summary.get("span_ns") or 0.0) / 1e6
    out = []
    for query_id, query in frame.groupby("query_id"):
        first, latest = trend_windows(query)
        if first is None:
            continue
        before, after = first["trigger_execution_ms"].median(), latest["trigger_execution_ms"].median()
        grew_most = _grew_most(trends, query_id)
        weight = float(query["trigger_execution_ms"].sum()) / span_ms if span_ms > 0 else 0.0
        if after >= GREW * before and after - before >= GREW_MIN_MS:
            text = (f"The streaming query {_name(query)}'s batches grew slower: from {fmt.duration(before * 1e6)} a "
                    f"batch ({_batches(first)}) to {fmt.duration(after * 1e6)} ({_batches(latest)})")
            out.append(finding("warning", weight, text + grew_most + ".", "streaming_slower"))
        reach = source_reach(data.source_lifetime, query_id)
        if reach is not None:
            out += _latency_grew(data, query, reach, first, latest, weight, finding, grew_most)
        results = _results_reach(data.source_lifetime, query_id, reach)
        if results is not None:
            out += _latency_grew(data, query, results, first, latest, weight, finding, grew_most)
        rates = latest.dropna(subset=["input_rows_per_second", "processed_rows_per_second"])
        rates = rates[rates["num_input_rows"] > 0]
        behind = rates[rates["processed_rows_per_second"] < rates["input_rows_per_second"]]
        if len(latest) >= BEHIND_BATCHES and len(behind) > BEHIND_SHARE * len(latest):
            out.append(finding("warning", weight, (
                f"The streaming query {_name(query)} does not keep up with its input: in {len(behind)} of its latest "
                f"{len(latest)} batches it processed fewer rows per second than arrived (median "
                f"{behind['processed_rows_per_second'].median():,.0f} against "
                f"{behind['input_rows_per_second'].median():,.0f})."), "streaming_behind"))
    return out


def _grew_most(trends: pd.DataFrame, query_id: str) -> str:
    """': <operator> (operator N of its plan) grew most, from X to Y a batch': the operator whose median exclusive
    time per batch grew most from the query's first batches to its latest ('' where operators were not timed)."""
    mine = trends[trends["query_id"] == query_id] if not trends.empty else trends
    if mine.empty:
        return ""
    top = mine.assign(grew=mine["latest_s"] - mine["first_s"]).sort_values("grew").iloc[-1]
    return (f": {top.operator} (operator {int(top.position)} of its plan) grew most, from "
            f"{fmt.duration(top.first_s * 1e9)} to {fmt.duration(top.latest_s * 1e9)} a batch")


def _latency_grew(data, query, reach, first, latest, weight, finding, grew_most: str) -> list:
    """A warning where the p99 of the records' latency from the source to the sink (or the operator they reach last)
    grew GREW x (and GREW_MIN_MS) from the query's first batches to its latest: a pipeline that does not keep up
    (Karimov et al.: a sustainable rate keeps latency from growing); with the operator whose time grew most. The same
    for a windowed aggregation's results from their window's end (`reach` of WINDOW_END): each window's result written
    ever later after it ended."""
    per_batch = reach_batches(data.source_latency, reach)
    before = per_batch[per_batch["batch_id"].isin(first["batch_id"])]["p99_ns"].median()
    after = per_batch[per_batch["batch_id"].isin(latest["batch_id"])]["p99_ns"].median()
    if not (after >= GREW * before and after - before >= GREW_MIN_MS * 1e6):
        return []
    grew = (f"their p99 from {_source_words(reach)} to {_reach_words(reach, ' of its plan')} grew from "
            f"{fmt.duration(before)} ({_batches(first)}) to {fmt.duration(after)} ({_batches(latest)})")
    if reach["source"] == WINDOW_END:
        return [finding("warning", weight, (
            f"The streaming query {_name(query)}'s windowed results were written later after their window's end: "
            f"{grew}, so each window's result waits longer: the query does not keep up with its input's "
            f"rate{grew_most}."), "streaming_latency")]
    return [finding("warning", weight, (
        f"The streaming query {_name(query)}'s records took longer from the source: {grew}, so records wait longer "
        f"for their batch: the query does not keep up with its input's rate{grew_most}."), "streaming_latency")]


COLUMNS = ("batch", "started", "input rows", "rows/s in", "rows/s processed", "batch time", "planning", "jobs",
           "commits", "tasks", "task time", "slowest operator", "event-time lag", "from the source, p50 / p99")


def section(data) -> str:
    """The HTML section: per query shown, its latest BATCHES_SHOWN batches; empty without streaming batches."""
    frame = getattr(data, "batches", None)
    if frame is None or frame.empty:
        return ""
    parts = ['<section id="streaming"><h2>Streaming queries</h2><p class="note">',
             escape("Each micro-batch as Spark's progress gives it (the batch's time from its trigger's start to its "
                    "commit; planning; its jobs; the offset and commit logs' writes) beside its tasks, and the "
                    "operator with the most exclusive time in the batch where operators were timed "
                    "(spark.cloudprofiler.operators). Started: seconds after the query's first batch. Event-time lag: "
                    "where the query has event times (a watermark), the age of its newest and oldest records at the "
                    "batch's commit, the driver's clock against the events'. From the source: with operator "
                    "timing's row sample, its sampled records' latency from their emission where the generator source "
                    "knows it, else from their event time below a watermark (the event's clock against the "
                    "executors': not bounded), else from their delivery to Spark, to the sink (the end of the batch's "
                    "last task, when its output is written; else to the last operator they reach), on the TSC, with "
                    "its error bound where it crosses hosts (source_latency()); per query, a table gives it to each "
                    "operator they reach over the query's life, in the order they pass them; past a stateful "
                    "aggregation's shuffle, to the end of the task that saved their key's state (StateStoreSave: its "
                    "key's task's end), before the batch's last. A windowed "
                    "aggregation's results: from their window's end to the sink, the latency the Yahoo streaming "
                    "benchmark measures."), "</p>"]
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    for query_id, query, title, words, reach in queries(data):
        start = query["trigger_start_ms"].min()
        slowest = query["trigger_execution_ms"].max()
        per_batch = reach_batches(data.source_latency, reach).set_index("batch_id") if reach is not None else None
        parts.append(f'<h3>{escape(title)}</h3><p class="note">{escape(words)}</p>')
        parts.append(_path_table(data.source_lifetime, reach))
        body = []
        for row in query.tail(BATCHES_SHOWN).itertuples():
            width = 60 * row.trigger_execution_ms / slowest if slowest else 0
            top = (f"{escape(str(row.top_operator))} ({escape(fmt.duration(row.top_operator_s * 1e9))})"
                   if isinstance(row.top_operator, str) else "-")
            cells = [str(int(row.batch_id)), f"{(row.trigger_start_ms - start) / 1e3:.1f} s",
                     fmt.count(row.num_input_rows), _rate(row.input_rows_per_second),
                     _rate(row.processed_rows_per_second),
                     f'<span class="bar" style="width:{width:.1f}px"></span>{_ms(row.trigger_execution_ms)}',
                     _ms(row.query_planning_ms), _ms(row.add_batch_ms),
                     _ms(_sum(row.wal_commit_ms, row.commit_offsets_ms)), fmt.count(row.tasks),
                     escape(fmt.duration(row.task_s * 1e9)) if row.task_s == row.task_s else "-", top,
                     _lag(row.event_lag_min_ms, row.event_lag_max_ms), _reach_cells(per_batch, row.batch_id)]
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        parts.append(f'<div class="scroll"><table class="batches"><thead><tr>{head}</tr></thead>'
                     f'<tbody>{"".join(body)}</tbody></table></div>')
    parts.append("</section>")
    return "".join(parts)


def queries(data) -> list:
    """Per query shown, the most batch time first: (query id, its batches in order, a title, its batches and its
    records' latency from the source in words, the source_reach() row that latency is told by, or None); [] without
    streaming batches. The page and the terminal both say these."""
    frame = getattr(data, "batches", None)
    if frame is None or frame.empty:
        return []
    out = []
    for query_id in frame.groupby("query_id")["trigger_execution_ms"].sum().sort_values(ascending=False).index:
        query = frame[frame["query_id"] == query_id].sort_values(["trigger_start_ms", "batch_id"])
        times = query["trigger_execution_ms"].astype(float)
        reach = source_reach(data.source_lifetime, query_id)
        title = (f"{_name(query)} · {fmt.count(len(query))} batches · {fmt.count(query['num_input_rows'].sum())} "
                 f"input rows · query {query_id}")
        words = (f"Batch time over the query's life: median {_plain_ms(times.median())}, p95 "
                 f"{_plain_ms(times.quantile(0.95))}, max {_plain_ms(times.max())}.{_lifetime_words(reach)}"
                 f"{_results_words(data.source_lifetime, query_id, reach)}")
        out.append((query_id, query, title, words, reach))
    return out


def path_rows(lifetime: pd.DataFrame, reach) -> tuple:
    """(columns, rows): the query run's sampled records from its source (the TSC `reach` tells it by) to each operator
    they reach and to the sink, over its life, as text: a row each, in the order the records pass them (the plan's,
    from its leaves: an operator's records may be more than the next one's, where a filter drops some, so their
    medians need not grow in that order); no rows where they reach fewer than two."""
    columns = (f"from {_source_words(reach)} to", "records", "p50", "p99", "max") if reach is not None else ()
    if reach is None:
        return columns, []
    mine = lifetime[(lifetime["query_id"] == reach["query_id"]) & (lifetime["run_id"] == reach["run_id"]) &
                    (lifetime["source"] == reach["source"])]
    mine = mine.sort_values("position", ascending=False)  # the sink, at position 0, last
    if len(mine) < 2:
        return columns, []
    return columns, [(_reach_words(row), fmt.count(row["rows"]), fmt.duration(row["p50_ns"]),
                      fmt.duration(row["p99_ns"]), fmt.duration(row["max_ns"])) for _, row in mine.iterrows()]


def _lifetime_words(reach) -> str:
    """The records' latency from the source over the query's life, in a sentence ('' where none was logged)."""
    if reach is None:
        return ""
    err = reach["err_max_ns"]
    bound = (" (the event's clock against the executors' wall clocks: not bounded)" if not sources()[reach["source"]]
             else f", bound up to {fmt.duration(err)}" if err else "")
    what = "windowed results" if reach["source"] == WINDOW_END else "records"
    return (f" Its {what} from {_source_words(reach)} to {_reach_words(reach)}, "
            f"{fmt.count(reach['rows'])} sampled in {fmt.count(reach['batches'])} "
            f"batches: p50 {fmt.duration(reach['p50_ns'])}, p99 {fmt.duration(reach['p99_ns'])}, max "
            f"{fmt.duration(reach['max_ns'])}{bound}.")


def _results_reach(lifetime: pd.DataFrame, query_id: str, reach):
    """source_reach() of a windowed aggregation's results (from their window's end), told beside the query's latency
    from the source `reach`; None where none was logged, or where `reach` is theirs already."""
    if reach is not None and reach["source"] == WINDOW_END:
        return None
    return source_reach(lifetime, query_id, kind=WINDOW_END)


def _results_words(lifetime: pd.DataFrame, query_id: str, reach) -> str:
    """The windowed results' latency (_results_reach) over the query's life, in a sentence ('' where there is none)."""
    results = _results_reach(lifetime, query_id, reach)
    return "" if results is None else _lifetime_words(results)


def _path_table(lifetime: pd.DataFrame, reach) -> str:
    """path_rows() as a table of the page; '' where it has no rows."""
    columns, rows = path_rows(lifetime, reach)
    if not rows:
        return ""
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    return (f'<div class="scroll"><table class="path"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            "</div>")


def _reach_cells(per_batch, batch_id) -> str:
    if per_batch is None or batch_id not in per_batch.index:
        return "-"
    row = per_batch.loc[batch_id]
    return escape(f"{fmt.duration(row['p50_ns'])} / {fmt.duration(row['p99_ns'])}")


def _plain_ms(value) -> str:
    return "-" if value is None or value != value else fmt.duration(float(value) * 1e6)


def _ms(value) -> str:
    return escape(_plain_ms(value))


def _lag(newest, oldest) -> str:
    """The batch's records' age in event time at its commit: 'newest to oldest'; '-' without event times."""
    if newest is None or newest != newest:
        return "-"
    return f"{_ms(newest)} to {_ms(oldest)}"


def _sum(*values):
    known = [v for v in values if v == v and v is not None]
    return sum(known) if known else None


def _rate(value) -> str:
    return "-" if value is None or value != value else f"{value:,.0f}"
