"""What the runs of `cloudprofiler bench spark` logged, against what they must have: a run without the plugin
nothing, a job with task logging switched off no task record, a query without trace points no trace record, and
the runs with them every task and every traced row. Each check returns its problems, one sentence each (none: as
it must be)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from ... import tables
from ...calibration.spark import load_domains
from ...logs import log_files, log_metadata, read_log

TASK_CHANNELS = ("spark.task.start", "spark.task.end")


def channel_files(app: Path) -> dict[str, list[Path]]:
    """The application folder's log files by channel name (their schemas read, not their records); the driver's
    tables, which are no channel, left out."""
    out: dict[str, list[Path]] = {}
    for path in log_files(app):
        channel = log_metadata(path).get("channel.name")
        if channel is not None:
            out.setdefault(channel, []).append(path)
    return out


def run_problems(folder: Path, plugin: bool) -> list[str]:
    """A run's own log folder (its `spark.cloudprofiler.logDir`, set with or without the plugin): without the
    plugin it holds no file; with it, one application folder whose task records name every task attempt of its
    task table, and whose TSC domains (calibration on) place every executor that ran one."""
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []
    if not plugin:
        return [f"{folder}: the run without the plugin logged {len(files)} files ({files[0].name}, ...)"] if files \
            else []
    task_table = tables.file("tasks")
    apps = sorted({p.parent for p in files if p.name == task_table})
    if len(apps) != 1:
        return [f"{folder}: the run with the plugin left {len(apps)} application folders with {task_table}, "
                "expected 1"]
    return task_problems(apps[0], {None: True}) + domain_problems(apps[0])


def domain_problems(app: Path) -> list[str]:
    """The calibration's TSC domains of an application folder against its task table: every executor that ran a
    task has its domain (without it, its records would not translate into the reference clock)."""
    try:
        placed = set(load_domains(app).column("executor_id").to_pylist())
    except FileNotFoundError as e:
        return [str(e)]
    ran = set(read_log(app / tables.file("tasks")).column("executor_id").to_pylist())
    return [f"{app}: no TSC domain for executor {e}, which ran tasks" for e in sorted(ran - placed)]


def task_problems(app: Path, logged: dict) -> list[str]:
    """Spark's task table against the task records of an application folder: each attempt of the jobs of a job
    group in `logged` (None: jobs without a group) has one start and one end record if its value is True, none
    if False; every record names an attempt of the table."""
    task_table = tables.file("tasks")
    table = read_log(app / task_table).select(["task_attempt_id", "job_group"]).to_pylist()
    files = channel_files(app)
    counts = {c: Counter(i for f in files.get(c, []) for i in read_log(f).column("tuple_id").to_pylist())
              for c in TASK_CHANNELS}
    problems = []
    for group, expected in logged.items():
        ids = [r["task_attempt_id"] for r in table if r["job_group"] == group]
        jobs = f"the jobs of group {group}" if group else "the jobs without a group"
        if not ids:
            problems.append(f"{app}: {task_table} has no task of {jobs}")
        for channel, count in counts.items():
            wrong = [i for i in ids if count[i] != int(expected)]
            if wrong:
                problems.append(f"{app}: {len(wrong)} of the {len(ids)} tasks of {jobs} (task logging "
                                f"{'on' if expected else 'off'}) have {count[wrong[0]]} {channel} records (attempt "
                                f"{wrong[0]}), expected {int(expected)}")
    attempts = {r["task_attempt_id"] for r in table}
    for channel, count in counts.items():
        unknown = sorted(set(count) - attempts)
        if unknown:
            problems.append(f"{app}: {len(unknown)} {channel} records name no attempt of {task_table}: {unknown[:3]}")
    return problems


def record_problems(app: Path, expected: dict[str, tuple[int, int]]) -> dict[str, str]:
    """The records written to each trace channel of an application folder (from its files' metadata) against
    the (least, most) that `expected` allows; a channel of the folder that `expected` does not name may hold
    none. By channel, the problem."""
    written = {channel: sum(log_metadata(f).get("records.written", 0) for f in paths)
               for channel, paths in channel_files(app).items() if channel not in TASK_CHANNELS}
    problems = {}
    for channel in sorted(set(written) | set(expected)):
        least, most = expected.get(channel, (0, 0))
        if not least <= written.get(channel, 0) <= most:
            problems[channel] = (f"{app}: channel {channel} holds {written.get(channel, 0):,} records, expected "
                                 + (f"{least:,}" if least == most else f"{least:,} to {most:,}"))
    return problems
