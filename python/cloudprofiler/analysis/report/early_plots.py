"""The report's figures drawn while its sections gather: a thread draws each (plots.PLOTS) as soon as the sections
it draws are in."""
from __future__ import annotations

import queue
import sys
import threading

from .data import ReportData
from .plots import PLOTS, Plot

SWITCH_INTERVAL_S = 0.0005  # Python's thread switch interval while the figures draw beside the gather


class DrawnAsGathered:
    """A report's figures drawn in a thread of their own while its sections gather, each as soon as the sections it
    draws (PLOTS) are in: while the gather's Spark jobs keep the JVM busy, the report's Python is mostly idle, and a
    figure is a few tenths of a second of Python (matplotlib's layout and SVG). One thread draws them all, one at a
    time: matplotlib's settings (rc_context) are the process's. `plots()` waits for the last."""

    def __init__(self, data: ReportData):
        self._data, self._arrived = data, queue.Queue()
        self._plots: dict = {}
        self._failure: "BaseException | None" = None
        self._thread = threading.Thread(target=self._draw, name="cloudprofiler-report-plots", daemon=True)
        self._thread.start()

    def gathered(self, section: str) -> None:
        """A section is in (gathered, or left out where it failed: its figures then draw what the data holds)."""
        self._arrived.put(section)

    def plots(self) -> list[Plot]:
        """Every figure, in PLOTS' order, once the gather has ended (every section `gathered`); a figure whose
        sections never arrived is drawn here."""
        self._arrived.put(None)
        self._thread.join()
        if self._failure is not None:
            raise self._failure
        return [self._plots[draw] if draw in self._plots else draw(self._data) for draw, _ in PLOTS]

    def _draw(self) -> None:
        # a figure holds the GIL for Python's switch interval (5 ms) at a time, and each of the gather's threads
        # wakes from the JVM's answer (a Py4J call, hundreds a section) into that wait: switched every 0.5 ms while
        # the figures draw (the demo's report: a paired median of -2.8 s in 7 pairs, -3.5 to +0.5 s; at 5 ms, 3
        # pairs: +1.4, -5.3, -1.0 s)
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
        arrived = set()
        try:
            while True:
                section = self._arrived.get()
                if section is None:
                    return
                arrived.add(section)
                for draw, sections in PLOTS:
                    if draw not in self._plots and set(sections) <= arrived:
                        self._plots[draw] = draw(self._data)
        except BaseException as exc:  # noqa: BLE001 -- raised in plots(), as all_plots raises it
            self._failure = exc
        finally:
            sys.setswitchinterval(interval)
