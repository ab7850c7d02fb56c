"""The report's terminal summary: the findings, then the summary, stage, straggler, query, streaming and pipeline
tables."""
from __future__ import annotations

import shutil
import textwrap

from ...console import print_table
from . import format as fmt
from .data import SKETCH_NOTE
from .findings import Finding
from .queries import queries_notes
from .streaming import path_rows, queries as streaming_queries
from .tables import Table

MARKS = {"error": "!!", "warning": " !", "info": " -"}
STAGE_ROWS = 20  # the terminal shows this many stages; the page has them all
STRAGGLER_ROWS = 10  # ...this many stragglers
OPERATOR_ROWS = 25  # ...and this many operators of each query shown


def _print(table: Table, limit: "int | None" = None) -> None:
    columns = [(str(i), title, "") for i, title in enumerate(table.columns)]
    rows = [{str(i): cell.text for i, cell in enumerate(row)} for row in table.rows[:limit]]
    print_table(rows, columns)
    if limit is not None and len(table.rows) > limit:
        print(f"({len(table.rows) - limit} more in the HTML report)")


def print_summary(found: list[Finding], tables: dict[str, Table], data=None) -> None:
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    print("Findings")
    for f in found:
        print(textwrap.fill(f.text, width, initial_indent=f"{MARKS[f.severity]} ", subsequent_indent="   "))
    _print(tables["summary"])
    for key, title, limit in (("stages", "Stages", STAGE_ROWS), ("pipeline", "Pipeline", None)):
        if tables[key].rows:
            print(f"\n{title}")
            _print(tables[key], limit)
            if key == "pipeline":
                print(textwrap.fill(SKETCH_NOTE, width))
        if key == "stages" and tables.get("stragglers") and tables["stragglers"].rows:
            _print_stragglers(tables["stragglers"], width)
        if key == "stages" and data is not None:
            _print_queries(tables.get("queries") or [], queries_notes(data), width)
            print_streaming(data, width)


def _print_stragglers(table: Table, width: int) -> None:
    """A paragraph per straggler (its words are too long for a column of a table)."""
    print("\nStragglers")
    for row in table.rows[:STRAGGLER_ROWS]:
        stage, partition, executor, duration, ratio, why = (cell.text for cell in row)
        print(textwrap.fill(f"stage {stage}, partition {partition} on {executor}: {duration}, {ratio} the median"
                            + (f": {why}" if why != "-" else ""), width, initial_indent=" - ",
                            subsequent_indent="   "))
    if len(table.rows) > STRAGGLER_ROWS:
        print(f"({len(table.rows) - STRAGGLER_ROWS} more in the HTML report)")


def print_streaming(data, width: int) -> None:
    """Per streaming query shown: its batches and its records' latency from the source in words, and the operators
    they reach with their latency from it (the page adds each batch)."""
    shown = streaming_queries(data)
    if not shown:
        return
    print("\nStreaming queries")
    for _, _, title, words, reach in shown:
        print(textwrap.fill(f"{title}. {words.strip()}", width, initial_indent=" - ", subsequent_indent="   "))
        columns, rows = path_rows(data.source_lifetime, reach)
        if rows:
            print_table([dict(enumerate(row)) for row in rows], [(i, heading, "") for i, heading in enumerate(columns)])
    print("(each batch in the HTML report)")


def _print_queries(queries: list, notes: list[str], width: int) -> None:
    print("\nQueries")
    for line in notes:
        print(textwrap.fill(line, width))
    for title, task_s, table in queries:
        print(f"{title} (task time {fmt.duration(task_s * 1e9)})")
        _print(table, OPERATOR_ROWS)
