"""The report as one self-contained HTML page: styles and figures inline, no script, nothing fetched.

Findings first, then the summary, then one section per figure (with its table where it has one), health last.
"""
from __future__ import annotations

import datetime as dt
from html import escape

from . import format as fmt
from .data import ReportData
from .findings import Finding
from .queries import QUERIES_CAPTION, queries_notes
from .stragglers import STRAGGLERS_CAPTION
from .streaming import section as streaming_section_html
from .udfs import section as udfs_section_html
from .plots import Plot
from .tables import Table

CSS = """
:root { --ink: #1f2328; --muted: #656d76; --line: #d8dee4; --error: #cc3311; --warning: #c98a00; --info: #4477aa; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f8fa; color: var(--ink); font: 14px/1.45 system-ui, -apple-system, "Segoe UI",
       "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 16px 20px 40px; }
header h1 { font-size: 20px; margin: 4px 0 2px; }
header p { margin: 0; color: var(--muted); }
nav { margin: 10px 0 4px; font-size: 13px; }
nav a { color: var(--info); text-decoration: none; margin-right: 14px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; margin: 14px 0; }
h2 { font-size: 16px; margin: 0 0 4px; }
p.caption, p.note { margin: 0 0 8px; color: var(--muted); font-size: 13px; }
p.note { color: var(--ink); }
ol.findings { margin: 4px 0; padding-left: 0; list-style: none; }
ol.findings li { padding: 5px 10px; margin: 4px 0; border-left: 4px solid var(--info); background: #f3f6fa; }
ol.findings li.error { border-color: var(--error); background: #fbeeeb; }
ol.findings li.warning { border-color: var(--warning); background: #fdf6e3; }
figure { margin: 4px 0 8px; }
figure svg { width: 100%; height: auto; display: block; }
.scroll { max-height: 380px; overflow: auto; }
.halves { display: flex; flex-wrap: wrap; gap: 0 48px; }
table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px 3px 0; text-align: right; border-bottom: 1px solid #eef1f4; white-space: nowrap; }
th { position: sticky; top: 0; background: #fff; color: var(--muted); font-weight: 600; }
th:first-child, td:first-child { text-align: left; }
table.summary td:last-child { text-align: left; white-space: normal; }
table.health td:last-child { text-align: left; white-space: normal; }
td.tree { text-align: left; white-space: pre; }
h3 { font-size: 14px; margin: 12px 0 2px; }
span.bar { display: inline-block; height: 9px; margin-right: 6px; background: var(--warning); vertical-align: middle; }
td.error { color: var(--error); font-weight: 600; } td.warning { color: var(--warning); font-weight: 600; }
"""


def _table(table: Table) -> str:
    if not table.rows:
        return ""
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns) if any(table.columns) else ""
    body = []
    for row in table.rows:
        cells = []
        for cell in row:
            value = f' data-value="{float(cell.value)!r}"' if cell.value is not None else ""
            css = f' class="{escape(cell.text)}"' if table.key == "health" and cell is row[0] else ""
            css = ' class="tree"' if table.key == "operators" and cell is row[0] else css
            bar = (f'<span class="bar" style="width:{max(min(cell.bar, 1.0), 0.0) * 60:.1f}px"></span>'
                   if cell.bar is not None else "")
            cells.append(f"<td{value}{css}>{bar}{escape(cell.text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="scroll"><table class="{table.key}">'
            + (f"<thead><tr>{head}</tr></thead>" if head else "") + "<tbody>" + "".join(body)
            + "</tbody></table></div>")


def _halves(table: Table) -> str:
    """A long two-column table as two tables side by side."""
    middle = (len(table.rows) + 1) // 2
    return "".join(_table(Table(table.key, table.columns, rows)) for rows in (table.rows[:middle],
                                                                               table.rows[middle:]))


def _plot(plot: Plot, table: "Table | None", stragglers: "Table | None" = None) -> str:
    parts = [f'<section id="{plot.key}"><h2>{escape(plot.title)}</h2>']
    if plot.note:
        parts.append(f'<p class="note">{escape(plot.note)}</p>')
    if plot.svg is not None:
        parts.append(f'<p class="caption">{escape(plot.caption)}</p>')
        parts.append(f'<figure class="plot" data-plot="{plot.key}">{plot.svg}</figure>')
    if table is not None:
        parts.append(_table(table))
    if stragglers is not None and stragglers.rows:
        parts.append(f'<h3 id="stragglers">Stragglers ({len(stragglers.rows)})</h3><p class="caption">'
                     f"{escape(STRAGGLERS_CAPTION)}</p>{_table(stragglers)}")
    parts.append("</section>")
    return "".join(parts)


def queries_section(data: ReportData, queries: list) -> str:
    """The Queries section: each query shown (tables.queries) with its operator tree, or why there is none."""
    parts = ['<section id="queries"><h2>Queries</h2>']
    for line in queries_notes(data):
        parts.append(f'<p class="note">{escape(line)}</p>')
    if queries:
        parts.append(f'<p class="caption">{escape(QUERIES_CAPTION)}</p>')
    for title, task_s, table in queries:
        parts.append(f"<h3>{escape(title)} &middot; task time {escape(fmt.duration(task_s * 1e9))}</h3>")
        parts.append(_table(table))
    parts.append("</section>")
    return "".join(parts)


def page(data: ReportData, found: list[Finding], plots: list[Plot], tables: dict[str, Table]) -> str:
    """The whole page; `tables` by key: summary, stages, pipeline, health, and queries (tables.queries)."""
    app_id = str(data.summary.get("app_id") or "application")
    made = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    shown_with = {"stages": "stages", "pipeline": "pipeline"}  # plot key -> the table drawn under it
    nav = [("findings", "Findings"), ("summary", "Summary")] + [(p.key, p.title.split(",")[0]) for p in plots]
    nav.insert(next((i + 1 for i, (key, _) in enumerate(nav) if key == "stages"), len(nav)), ("queries", "Queries"))
    queries = queries_section(data, tables.get("queries") or [])
    udfs = udfs_section_html(data)
    nav += [("udfs", "Python UDFs")] if udfs else []
    streaming = streaming_section_html(data)
    nav += [("streaming", "Streaming")] if streaming else []
    nav.append(("health", "Health"))
    findings = "".join(f'<li class="{f.severity}" data-kind="{f.kind}">{escape(f.text)}</li>' for f in found)
    health = tables["health"]
    return "".join([
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Cloudprofiler report: {escape(app_id)}</title><style>{CSS}</style></head><body><main>",
        f"<header><h1>Cloudprofiler report: {escape(app_id)}</h1>",
        f"<p>{escape(str(data.summary.get('path') or ''))} &middot; made {made}</p></header>",
        "<nav>" + "".join(f'<a href="#{key}">{escape(name)}</a>' for key, name in nav) + "</nav>",
        f'<section id="findings"><h2>Findings</h2><ol class="findings">{findings}</ol></section>',
        f'<section id="summary"><h2>Summary</h2><div class="halves">{_halves(tables["summary"])}</div></section>',
        *(_plot(p, tables.get(shown_with.get(p.key, "")), tables.get("stragglers") if p.key == "stages" else None)
          + (queries if p.key == "stages" else "") for p in plots),
        "" if any(p.key == "stages" for p in plots) else queries,
        udfs,
        streaming,
        '<section id="health"><h2>Health</h2>',
        _table(health) if health.rows else '<p class="note">No problem found in the logs.</p>',
        "</section></main></body></html>\n",
    ])
