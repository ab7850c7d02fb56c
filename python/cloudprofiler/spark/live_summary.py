"""A running application's compact summary in a notebook, refreshed while cells run: `cps.live(spark)`.

It shows what the driver has at hand without a Spark job of its own (the user's jobs keep the executors): Spark's
progress of the stages running now (its status tracker), and the task table the plugin publishes into the
application's folder at each collection interval: attempts finished and failed, and for the stages with the most
task time the median and slowest task and the stragglers so far, by Spark's task times (launch to finish; the TSC
durations with their bounds come from the analysis: `cps.report(spark)`), and the log files collected so far.

A daemon thread updates one IPython display (a display id) at each interval. It stops on `.stop()`, when the
session stops (after a last look at the final task table), or at its first failure, which the display states in one
line: nothing it does raises into the user's cells. Bounded: the task table is read incrementally (the batches
published since the last look; the plugin only appends to it), keeping 8 bytes per successful task attempt for the
medians (8 MB for a million attempts) and a few numbers per stage.
"""
from __future__ import annotations

import datetime as dt
import errno
import numbers
import os
import threading
import warnings
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np

from ..analysis.report import format as fmt
from .. import tables
from ..errors import InvalidArgumentError
from .connect import is_connect
from .jar import default, options

# Spark's progress is fresh at any time; the task table changes at the collection interval (15 s by default)
INTERVAL_S = (0.5, 5.0)  # the refresh: the application's collection interval, within these bounds
STAGES_SHOWN = 4  # the stages with the most task time so far (a report's analysis on the session adds many small)
RUNNING_SHOWN = 4  # the running stages
STRAGGLER_RATIO = 1.5  # as the analysis (stages.STRAGGLER_RATIO): Spark's own speculation threshold
TASK_COLUMNS = ["stage_id", "stage_attempt", "partition", "executor_id", "launch_time_ms", "finish_time_ms",
                "status"]
_LIVE: dict[str, "LiveSummary"] = {}  # the summary shown per application: a new one stops the one before


@dataclass
class _Stage:
    durations: list = field(default_factory=list)  # numpy arrays of successful attempts' times (ms)
    failed: int = 0
    total_ms: float = 0.0  # task time of its successful attempts
    slowest_ms: float = -1.0
    slowest: str = ""  # "partition 7 on executor 2"

    def median_ms(self) -> float:
        return float(np.median(np.concatenate(self.durations))) if self.durations else float("nan")

    def stragglers(self) -> int:
        if not self.durations:
            return 0
        times = np.concatenate(self.durations)
        self.durations = [times]  # one array from here on
        return int((times > STRAGGLER_RATIO * np.median(times)).sum())


class TaskTable:
    """The task table of a running application, read as it grows: the batches the driver published since the last
    `read` (it rewrites the file whole at each interval, the earlier batches unchanged, and renames it into place)."""

    def __init__(self, path: Path):
        self.path = path
        self.batches = 0
        self.finished = 0
        self.stages: dict[tuple, _Stage] = {}

    def read(self) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        if not self.path.is_file():
            return
        with pa.memory_map(str(self.path)) as source:
            reader = ipc.open_file(source)
            if reader.num_record_batches < self.batches:  # a table that started over: read it again
                self.__init__(self.path)
            for i in range(self.batches, reader.num_record_batches):
                self._add(reader.get_batch(i).select(TASK_COLUMNS).to_pandas())
            self.batches = reader.num_record_batches

    def _add(self, rows) -> None:
        self.finished += len(rows)
        rows = rows.assign(ms=rows["finish_time_ms"] - rows["launch_time_ms"])
        for key, part in rows.groupby(["stage_id", "stage_attempt"], sort=False):
            stage = self.stages.setdefault((int(key[0]), int(key[1])), _Stage())
            done = part[part["status"] == "SUCCESS"]
            stage.failed += len(part) - len(done)
            if not done.empty:
                stage.durations.append(done["ms"].to_numpy(np.float64))
                stage.total_ms += float(done["ms"].sum())
                worst = done.loc[done["ms"].idxmax()]
                if worst["ms"] > stage.slowest_ms:
                    stage.slowest_ms = float(worst["ms"])
                    stage.slowest = f"partition {int(worst['partition'])} on executor {worst['executor_id']}"


@dataclass
class Snapshot:
    """What the display shows at one moment."""

    app_id: str
    updated: str  # HH:MM:SS
    interval_s: float
    running: "list | None" = None  # (stage, attempt, name, done, total, active, failed); None: not known
    running_more: int = 0
    finished: int = 0  # task attempts in the task table so far
    failed: int = 0
    # (stage, attempt, tasks, failed, median ms, slowest ms, where, stragglers)
    stages: list = field(default_factory=list)
    files: "tuple[int, int] | None" = None  # log files collected so far and their bytes
    notes: list = field(default_factory=list)
    stopped: str = ""  # why the summary stopped, when it has

    def lines(self) -> list[str]:
        state = f"stopped at {self.updated}: {self.stopped}" if self.stopped else \
            f"updated {self.updated}, every {self.interval_s:g} s"
        lines = [f"Cloudprofiler · {self.app_id} · {state}"]
        for stage, attempt, name, done, total, active, failed in self.running or []:
            lines.append(f"running: {fmt.stage(stage, attempt)} ({name}): {done:,} of {total:,} tasks done, "
                         f"{active:,} running" + (f", {failed:,} failed" if failed else ""))
        if self.running_more:
            lines.append(f"running: {self.running_more} more stages")
        if self.running == [] and not self.stopped:
            lines.append("running: no stage")
        lines.append(f"task attempts finished: {fmt.count(self.finished)}" +
                     (f", {fmt.count(self.failed)} failed" if self.failed else ""))
        for stage, attempt, tasks, failed, median, slowest, where, stragglers in self.stages:
            lines.append(f"{fmt.stage(stage, attempt)}: {fmt.count(tasks)} task{'s' if tasks > 1 else ''}"
                         + (f" and {fmt.count(failed)} failed attempt{'s' if failed > 1 else ''}" if failed else "")
                         + f", median {fmt.duration(median * 1e6)}, slowest {fmt.duration(slowest * 1e6)} ({where})"
                         + (f", {stragglers} straggler{'s' if stragglers > 1 else ''} (over "
                            f"{STRAGGLER_RATIO:g}x the median)" if stragglers else ""))
        if self.files is not None:
            lines.append(f"log files collected: {fmt.count(self.files[0])} ({fmt.size(self.files[1])})")
        return lines + self.notes

    def _repr_html_(self) -> str:
        head, *rest = self.lines()
        colour = "#656d76" if self.stopped else "#4477aa"
        return (f'<div class="cloudprofiler-live" style="font: 13px/1.5 system-ui, sans-serif; border-left: 4px '
                f'solid {colour}; padding: 2px 10px"><b>{escape(head)}</b>'
                + "".join(f"<div>{escape(line)}</div>" for line in rest) + "</div>")

    def __repr__(self) -> str:
        return "\n".join(self.lines())


class LiveSummary:
    """The summary of one application, shown in one display and refreshed by a daemon thread (see the module)."""

    def __init__(self, spark, folder: str, interval_s: float):
        self.spark = spark
        self.folder = folder
        self.interval_s = interval_s
        self.app_id = folder.rstrip("/").rsplit("/", 1)[-1]
        local = folder[len("file:"):] if folder.startswith("file:") else folder
        self.local = None if "://" in folder else Path(local)
        self.table = TaskTable(self.local / tables.file("tasks")) if self.local is not None else None
        self.handle = None
        self.last: "Snapshot | None" = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cloudprofiler-live-{self.app_id}", daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> "LiveSummary":
        from IPython.display import display

        self.handle = display(self._guarded(), display_id=True)
        if not self.last.stopped:
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop refreshing; the display keeps the last numbers, marked stopped."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=10)
        elif self.last is not None and not self.last.stopped:
            self._show(self._finished("stopped"))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            snapshot = self._guarded()
            self._show(snapshot)
            if snapshot.stopped:
                return
        self._show(self._finished("stopped"))

    def _guarded(self) -> Snapshot:
        """A snapshot, or the last one marked stopped with the reason: the session's end or the first failure."""
        try:
            if self._session_stopped():
                return self._finished("the session stopped")
            self.last = self.snapshot()
            return self.last
        except Exception as exc:  # the display says it; the user's cells never see it
            reason = "the session stopped" if self._session_stopped() else f"{type(exc).__name__}: {exc}"
            return self._finished(reason.splitlines()[0][:300])

    def _finished(self, reason: str) -> Snapshot:
        try:
            last = self.snapshot(progress=False)  # the final task table, written as the session stops
        except Exception:
            last = self.last or Snapshot(self.app_id, "", self.interval_s)
        last.stopped, last.running, last.running_more = reason, [], 0
        last.updated = dt.datetime.now().strftime("%H:%M:%S")
        self.last = last
        return last

    def _show(self, snapshot: Snapshot) -> None:
        try:
            self.handle.update(snapshot)
        except Exception:  # a display gone (kernel shutting down): nothing left to show it on
            self._stop.set()

    def _session_stopped(self) -> bool:
        return not is_connect(self.spark) and self.spark.sparkContext._jsc is None

    def snapshot(self, progress: bool = True) -> Snapshot:
        shot = Snapshot(self.app_id, dt.datetime.now().strftime("%H:%M:%S"), self.interval_s)
        if progress and not is_connect(self.spark):
            self._progress(shot)
        elif progress:
            shot.notes.append("(a Spark Connect client has no view of Spark's progress: the task table only)")
        if self.table is None:
            shot.notes.append(f"(the folder {self.folder} is not on this machine's file system: progress only)")
            return shot
        self.table.read()
        shot.finished = self.table.finished
        shot.failed = sum(s.failed for s in self.table.stages.values())
        timed = [key for key, s in self.table.stages.items() if s.durations]
        for key in sorted(sorted(timed, key=lambda k: -self.table.stages[k].total_ms)[:STAGES_SHOWN]):
            s = self.table.stages[key]
            tasks = sum(len(d) for d in s.durations)
            shot.stages.append((*key, tasks, s.failed, s.median_ms(), s.slowest_ms, s.slowest, s.stragglers()))
        shot.files = _files(self.local)
        return shot

    def _progress(self, shot: Snapshot) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        running = [info for info in (tracker.getStageInfo(i) for i in sorted(tracker.getActiveStageIds()))
                   if info is not None]
        shot.running = [(i.stageId, i.currentAttemptId, i.name, i.numCompletedTasks, i.numTasks, i.numActiveTasks,
                         i.numFailedTasks) for i in running[:RUNNING_SHOWN]]
        shot.running_more = max(len(running) - RUNNING_SHOWN, 0)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<cloudprofiler live summary of {self.app_id}, every {self.interval_s:g} s: {state}>"


def _files(folder: Path) -> "tuple[int, int]":
    """Log files (.arrows) in the application's folder and its executors' folders, and their bytes."""
    count = size = 0
    task_table = tables.file("tasks")
    for entry in os.scandir(folder) if folder.is_dir() else ():
        entries = os.scandir(entry.path) if entry.is_dir() else [entry]
        for item in entries:
            if item.name.endswith(".arrows") and item.is_file() and item.name != task_table:
                count, size = count + 1, size + item.stat().st_size
    return count, size


def interval_of(spark, interval_s=None) -> float:
    """The refresh interval: `interval_s` (a number > 0), else the application's collection interval within
    INTERVAL_S (0, only at shutdown: the longest)."""
    if interval_s is not None:
        if isinstance(interval_s, bool) or not isinstance(interval_s, numbers.Real) or not 0 < interval_s < 86400:
            raise InvalidArgumentError(errno.EINVAL, f"live(interval_s={interval_s!r}): seconds between refreshes, "
                                                     "a number > 0 and < 86400")
        return float(interval_s)
    key = options()["collect_interval_seconds"]
    value = (spark.conf.get(key, None) if is_connect(spark) else spark.sparkContext._conf.get(key, None)) \
        or default(key)
    seconds = float(value)
    return min(max(seconds, INTERVAL_S[0]), INTERVAL_S[1]) if seconds > 0 else INTERVAL_S[1]


def live(spark, folder: str, interval_s=None) -> "LiveSummary | None":
    """Show the summary of `spark`'s application (its log folder `folder`) in this notebook, refreshed every
    `interval_s`; a summary shown before for the same application stops. Outside IPython, a warning says so and
    nothing is shown (None)."""
    interval = interval_of(spark, interval_s)
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        warnings.warn("cloudprofiler: live() shows its summary in a notebook (IPython): here it shows nothing; "
                      "cps.report(spark) writes the report", stacklevel=3)
        return None
    summary = LiveSummary(spark, folder, interval)
    previous = _LIVE.pop(summary.app_id, None)
    if previous is not None:
        previous.stop()
    _LIVE[summary.app_id] = summary
    return summary.start()
