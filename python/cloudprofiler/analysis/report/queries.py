"""The Queries section: each slow SQL execution's timed operators as a tree, from ReportData.operators.

A probe's parent is the probe of the operator that consumes its rows (parent_probe_id). With adaptive execution
each query stage's plan is instrumented apart, so a query's probes form a forest, a tree per stage; the tree of a
stage that writes a shuffle is drawn under the probe that reads it (an AQEShuffleRead, ShuffleQueryStage or Exchange
probe without children of its own, in a later stage) where the link is evident: the reader's rows equal the writer's
top rows and no other tree of an earlier stage has as many; or one reader and one such tree are left. Other trees
are listed after, the latest stage first.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from . import format as fmt

SHUFFLE_READS = ("AQEShuffleRead", "ShuffleQueryStage", "Exchange", "ShuffleExchange", "CustomShuffleReader")
PYTHON_OPERATORS = ("BatchEvalPython", "ArrowEvalPython", "FlatMapGroupsInPandas", "FlatMapGroupsInArrow",
                    "FlatMapCoGroupsInPandas", "FlatMapCoGroupsInArrow", "MapInPandas", "MapInArrow",
                    "PythonMapInArrow", "AggregateInPandas", "ArrowAggregatePython", "WindowInPandas",
                    "ArrowWindowPython", "FlatMapGroupsInPandasWithState", "PythonUDTF", "BatchEvalPythonUDTF",
                    "ArrowEvalPythonUDTF")
ROWS_NAMED = 1.5  # the slowest task's rows beside the median, named from this ratio (as a straggler's records)


@dataclass
class Node:
    row: object  # a row of operators() (a pandas itertuple)
    children: list = field(default_factory=list)
    via_shuffle: bool = False  # the top of an earlier stage's tree, drawn under the probe that reads its shuffle


def _id(value) -> "int | None":
    return None if value is None or value != value else int(value)


def forest(rows: pd.DataFrame) -> list[Node]:
    """The trees of one query's probes (rows of operators() with one sql_execution_id), roots in drawing order."""
    nodes = {int(r.probe_id): Node(r) for r in rows.sort_values("probe_id").itertuples()}
    roots = []
    for node in nodes.values():
        parent = _id(node.row.parent_probe_id)
        (nodes[parent].children if parent in nodes else roots).append(node)
    readers = sorted((n for n in nodes.values() if n.row.operator in SHUFFLE_READS and not n.children),
                     key=lambda n: (_stage(n), int(n.row.probe_id)))

    def writers_for(reader: Node) -> list:
        return [r for r in roots if not r.via_shuffle and r is not reader and _stage(r) < _stage(reader)
                and _root_of(reader, nodes) is not r]

    for reader in readers:
        same = [r for r in writers_for(reader) if r.row.rows == reader.row.rows]
        if len(same) == 1:
            _link(reader, same[0])
    left = [r for r in readers if not r.children]
    if len(left) == 1 and len(writers_for(left[0])) == 1:
        _link(left[0], writers_for(left[0])[0])
    return sorted((r for r in roots if not r.via_shuffle), key=lambda n: (-_stage(n), int(n.row.probe_id)))


def _stage(node: Node) -> float:
    return float("-inf") if node.row.stage_id != node.row.stage_id else float(node.row.stage_id)


def _root_of(node: Node, nodes: dict) -> Node:
    seen = set()
    while _id(node.row.parent_probe_id) in nodes and int(node.row.probe_id) not in seen:
        seen.add(int(node.row.probe_id))
        node = nodes[_id(node.row.parent_probe_id)]
    return node


def _link(reader: Node, writer: Node) -> None:
    writer.via_shuffle = True
    reader.children.append(writer)


def walk(roots: list[Node]):
    """(node, depth) in drawing order: each node before its children."""
    stack = [(root, 0) for root in reversed(roots)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        stack.extend((child, depth + 1) for child in reversed(node.children))


def operator_name(operator: str, probe_id) -> str:
    """How the findings name a probe's operator: 'SortMergeJoin (probe 7)', 'the Python UDF (BatchEvalPython,
    probe 4)'."""
    if operator in PYTHON_OPERATORS:
        return f"the Python UDF ({operator}, probe {int(probe_id)})"
    return f"{operator} (probe {int(probe_id)})"


def row_latency(hops: pd.DataFrame) -> str:
    """The sampled rows' latency into an operator from the one below it (rows of operator_hops() whose
    to_probe_id is the operator's probe), as its row in the tree shows it: 'p50 260 ns, p99 1.1 us (97 rows)'. The
    quantiles lie within the rows' exact min and max (the sketch's, hops.hop_statistics); with fewer than 100
    rows a p99 would be the max under another name, so the max is shown instead."""
    texts = []
    for hop in hops.sort_values("from_probe_id").itertuples():
        tail = ("p99 " + fmt.duration(hop.p99_ns)) if hop.rows >= 100 else ("max " + fmt.duration(hop.max_ns))
        text = f"p50 {fmt.duration(hop.p50_ns)}, {tail} ({fmt.count(hop.rows)} row{'s' * (hop.rows != 1)})"
        texts.append(text if len(hops) == 1 else f"{text} from probe {int(hop.from_probe_id)}")
    return "; ".join(texts) or "-"


def times(value) -> str:
    """A ratio as the findings write it: '14x', '2.5x'."""
    return f"{value:.0f}x" if value >= 10 else f"{value:.1f}x"


def query_title(query) -> str:
    """'SQL execution 12' and what names it: the job description the application gave it ('SQL execution 12: daily
    totals'), else the line of the application that ran it ('SQL execution 12 (collect at job.py:42)': PySpark's
    call site)."""
    text = f"SQL execution {int(query.sql_execution_id)}"
    description, call_site = (getattr(query, name, None) for name in ("description", "call_site"))
    if isinstance(description, str) and description:
        return f"{text}: {description}"
    return f"{text} ({call_site})" if isinstance(call_site, str) and call_site else text


def slowest_partition(row) -> str:
    """'partition 31: 14x the median rows' for the task where the probe took longest, where it had more than one."""
    if row.tasks < 2 or row.max_partition != row.max_partition:
        return "-"
    text = f"partition {int(row.max_partition)}"
    ratio = row_ratio(row)
    return text + (f": {times(ratio[0])} the median rows {ratio[1]}" if ratio and ratio[0] >= ROWS_NAMED else "")


def row_ratio(row) -> "tuple[float, str] | None":
    """(ratio to the median, 'produced' or 'read') of the rows at the probe's slowest task, the larger of the two."""
    found = []
    for value, median, verb in ((row.max_rows, row.median_rows, "produced"),
                                (row.max_rows_read, row.median_rows_read, "read")):
        if value == value and median == median and value is not None and median:
            found.append((float(value) / float(median), verb))
    return max(found) if found else None


def clipped_note(operators: pd.DataFrame) -> str:
    clipped = int(operators["clipped_tasks"].sum()) if not operators.empty else 0
    if not clipped:
        return ""
    return (f"{fmt.count(clipped)} per-task estimates of own time came out below 0 (sampling noise: the operator's "
            "time with its children estimated under its children's) and count as 0.")


OPERATORS_OFF = ("Operator timing was off: run with spark.cloudprofiler.operators=true (or spark.conf.set("
                 "\"spark.cloudprofiler.operators\", \"true\") before the queries) to time every SQL operator.")
QUERIES_CAPTION = ("Each operator under the one that consumes its rows (\u2514\u2550: the top of an earlier stage, "
                   "under the probe that reads its shuffle). Own time: the operator's time without its children's, "
                   "summed over its tasks, \u00b1 the standard error of its sampled estimate; share of query: own "
                   "time over the executor run time of the query's tasks; with children: its inclusive time; skew: "
                   "its slowest task's own time over the median task's. Row latency: the time a sampled row (1 in "
                   "spark.cloudprofiler.operators.rows.y) took from the operator under it in the tree to this one, "
                   "i.e. this operator's work on the row with one log call (a Python UDF's: from the row's reading to "
                   "its result, its batch's wait and the worker's round trip included); only along operators that "
                   "keep a row's identity (docs/operators.md).")


def queries_notes(data) -> list[str]:
    """The lines above the Queries section's trees: why there are none, how many queries are left out, clipping."""
    if not data.operators_timed:
        return [OPERATORS_OFF]
    if data.queries.empty and data.streaming_executions_timed:
        return [f"Operators were timed in {fmt.count(data.streaming_executions_timed)} micro-batches of streaming "
                "queries only, which the Streaming section shows per batch (app.batch_operators()): no other SQL "
                "execution has timed operators."]
    if data.queries.empty:
        return ["The operator tables hold no operator of a SQL execution with tasks in the task table."]
    notes = []
    left = int((~data.queries["shown"]).sum())
    if left:
        notes.append(f"The {int(data.queries['shown'].sum())} SQL executions with the most task time are shown; "
                     f"{left} more with timed operators {'are' if left > 1 else 'is'} left out.")
    clipped = clipped_note(data.operators)
    return notes + ([clipped] if clipped else [])
