"""Printing benchmark rows as an aligned table."""
from __future__ import annotations


def print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """columns: (key, title, format spec); missing values print as '-'."""
    cells = [[title for _, title, _ in columns]]
    for row in rows:
        cells.append([format(row[key], spec) if row.get(key) is not None else "-" for key, _, spec in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
