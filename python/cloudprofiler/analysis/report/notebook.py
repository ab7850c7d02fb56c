"""The report's page as a notebook shows it: the path of the HTML file `render` wrote, which Jupyter and VS Code
draw inline (IPython's `_repr_html_`) as that page itself, in a frame.

A frame, because the page is a whole document whose styles (body, table, section...) would restyle the notebook
around it; its `srcdoc` holds the file's text, so the frame needs nothing served and the notebook keeps the report
when it is saved. One tag is added in the frame's copy: a base address of its own, without which the page's links
to its sections ("#stages") would point at the notebook's address and load the notebook inside the frame.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

FRAME_HEIGHT_PX = 720  # the page scrolls inside the frame: findings and summary show at once
FRAME_BASE = '<base href="about:srcdoc">'  # the frame's own address: "#section" links stay in the frame


class ReportPage(type(Path())):  # PosixPath or WindowsPath: Path itself cannot be subclassed before Python 3.12
    """The report's HTML file: a Path (str() is the path, as before), drawn inline by notebooks."""

    def framed(self) -> str:
        """The frame a notebook shows: the file's page, in full, as the frame's document."""
        page = self.read_text(encoding="utf-8").replace("<head>", "<head>" + FRAME_BASE, 1)
        return (f'<iframe class="cloudprofiler-report" title="Cloudprofiler report: {escape(self.name)}" '
                f'srcdoc="{escape(page, quote=True)}" style="width: 100%; height: {FRAME_HEIGHT_PX}px; border: 1px '
                f'solid #d8dee4; border-radius: 6px"></iframe><p style="font-size: 12px">{escape(str(self))}</p>')

    def _repr_html_(self) -> "str | None":
        # None (a file gone, or a path derived from this one that is no page) lets IPython show the plain repr
        try:
            return self.framed() if self.is_file() else None
        except (OSError, UnicodeDecodeError):
            return None
