"""The report's terminal summary: the findings, then the summary, stage and pipeline tables."""
from __future__ import annotations

import shutil
import textwrap

from ...console import print_table
from .findings import Finding
from .tables import Table

MARKS = {"error": "!!", "warning": " !", "info": " -"}
STAGE_ROWS = 20  # the terminal shows this many stages; the page has them all


def _print(table: Table, limit: "int | None" = None) -> None:
    columns = [(str(i), title, "") for i, title in enumerate(table.columns)]
    rows = [{str(i): cell.text for i, cell in enumerate(row)} for row in table.rows[:limit]]
    print_table(rows, columns)
    if limit is not None and len(table.rows) > limit:
        print(f"({len(table.rows) - limit} more in the HTML report)")


def print_summary(found: list[Finding], tables: dict[str, Table]) -> None:
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    print("Findings")
    for f in found:
        print(textwrap.fill(f.text, width, initial_indent=f"{MARKS[f.severity]} ", subsequent_indent="   "))
    _print(tables["summary"])
    for key, title, limit in (("stages", "Stages", STAGE_ROWS), ("pipeline", "Pipeline", None)):
        if tables[key].rows:
            print(f"\n{title}")
            _print(tables[key], limit)
