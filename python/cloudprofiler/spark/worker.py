"""Python workers log through their executor: into its buffers (hand-off channels into its inbox) or, where that
cannot be, into its folder, so that the executor collects their files with its own.

An executor names its folder in `<localDir>/executors/<its pid>`, and its inbox's folder in the file beside it with
the suffix `.inbox`; the Python workers it starts are its children (or, through PySpark's daemon, its
grandchildren), so a worker finds the names by walking up its parent processes. The helper passes `localDir` to
workers as CLOUDPROFILER_LOCAL_DIR.
"""
from __future__ import annotations

import itertools
import os
import stat
import sys
from pathlib import Path

from .jar import default, option_table, options

LOCAL_DIR_ENV = "CLOUDPROFILER_LOCAL_DIR"
RULES_ENV = "CLOUDPROFILER_RULES"  # read by the library as it starts
_ANCESTORS = 4  # worker -> daemon -> executor JVM, with room for a wrapping shell


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:  # "pid (comm) state ppid ...", comm may hold spaces and parentheses
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _trusted(path: Path, folder: bool) -> bool:
    """Whether `path` is this user's own file or folder, not a link: a name another user of the host wrote in a
    shared localDir is never followed. A folder must also be closed to other users' writes (its group's are the
    owner's choice), unless root owns it with the sticky bit (like /tmp: nobody else can rename this user's names
    in it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
        return False
    sticky = bool(st.st_mode & stat.S_ISVTX)
    if st.st_uid == os.geteuid():
        return not folder or sticky or not st.st_mode & stat.S_IWOTH
    return folder and st.st_uid == 0 and sticky


def _executor_name(local_dir: "str | None") -> "tuple[Path, str] | None":
    """The file in which the executor that started this Python worker names its folder, and that folder."""
    try:
        local_dir = Path(local_dir or os.environ.get(LOCAL_DIR_ENV) or default(options()["local_dir"]))
        names = local_dir / option_table()["executor_folders"]
    except FileNotFoundError:
        return None
    if not _trusted(names, folder=True):
        return None
    pid = os.getpid()
    for _ in range(_ANCESTORS):
        try:
            pid = _parent(pid)
            name = names / str(pid)
            if not os.path.lexists(name):
                continue
            if not _trusted(name, folder=False):
                return None
            folder = name.read_text().strip()
            return (name, folder) if folder else None
        except FileNotFoundError:
            continue
        except (OSError, ValueError, IndexError):
            return None
    return None


def executor_folder(local_dir: "str | None" = None) -> "str | None":
    """The local folder of the executor that started this Python worker, or None outside such a worker (or where
    the executor's plugin is not running, or this install has no plugin jar, whose option table says where
    executors name their folders). `local_dir`: the plugin's localDir, else CLOUDPROFILER_LOCAL_DIR, else the
    plugin's default."""
    found = _executor_name(local_dir)
    return found[1] if found else None


def start_in_executor_folder(local_dir: "str | None" = None) -> "str | None":
    """Start this process's library in its executor's folder, unless it has started already; returns the folder
    it logs to (None before the library starts, e.g. outside a Spark Python worker). Call it in a UDF before
    opening a `Channel`, so that the channel's file is collected with the executor's logs. The library follows
    the rules of its executor (the file the executor writes beside its folder's name), unless CLOUDPROFILER_RULES
    names another file."""
    import cloudprofiler as cp

    if cp.log_dir() is None:
        found = _executor_name(local_dir)
        if found is not None:
            name, folder = found
            os.environ.setdefault(RULES_ENV, str(name) + option_table()["rules_file_suffix"])
            cp.start(folder)
    return cp.log_dir()


_handed = itertools.count()
_samples_failed = False


def hand_samples_over() -> None:
    """Hands the records this worker's own library kept for the live latency between trace points (it logs to files
    of its own: no hand-off) to its executor, as a file of the executor's folder that the executor reads, checks and
    removes at its next collection (the plugin's WorkerSamples), sending them to the driver with its own. Nothing
    without a library of this process's started in an executor's folder, or without samples. A failure (a full
    disk) stops the hand-over for this worker, said in one line; the records stay in the files as ever: only the
    live figures miss them."""
    global _samples_failed
    if _samples_failed:
        return
    try:
        _hand_samples_over()
    except Exception as e:  # the user's task runs on
        _samples_failed = True
        print(f"cloudprofiler: worker {os.getpid()} hands its executor no samples for the live latency from now on: "
              f"{e}", file=sys.stderr, flush=True)


def _hand_samples_over() -> None:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    import cloudprofiler as cp
    from cloudprofiler import tables
    from cloudprofiler.private_files import replace_privately

    folder = cp.log_dir()
    taken = cp.take_samples() if folder is not None else {}
    if not taken:
        return
    table = tables.table("worker_samples")
    columns = {"channel": [], "level": [], "tuple_id": [], "tsc": []}
    for name, (level, ids, tscs) in taken.items():
        columns["channel"] += [name] * len(ids)
        columns["level"] += [level] * len(ids)
        columns["tuple_id"] += ids
        columns["tsc"] += [t if t < 2**63 else t - 2**64 for t in tscs]  # the TSC's bits, as int64 like the logs'

    batch = pa.RecordBatch.from_arrays([_arrow_column(columns[f.name], f.type) for f in table.schema],
                                       schema=table.schema)

    def write(out):
        with ipc.new_file(out, table.schema) as writer:
            writer.write_batch(batch)

    # whole, or not at all, when the executor reads it
    replace_privately(os.path.join(folder, f"{os.getpid()}-{next(_handed)}.{table.file}"), write)


def _arrow_column(values: list, type_):
    """An Arrow array of `values`, strings or integers of `type_`, on numpy buffers: pyarrow's conversion of Python
    lists (pa.array, pa.table) imports pandas, 0.2-0.3 s that a worker started for a task would pay at its end."""
    import numpy as np
    import pyarrow as pa

    from ..channel import arrow_integer_dtype

    if pa.types.is_string(type_):
        encoded = [v.encode() for v in values]
        offsets = np.zeros(len(encoded) + 1, np.int32)
        offsets[1:] = np.cumsum([len(e) for e in encoded], dtype=np.int64)
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    else:
        buffers = [None, pa.py_buffer(np.asarray(values, arrow_integer_dtype(type_)))]
    return pa.Array.from_buffers(type_, len(values), buffers)


def executor_inbox(local_dir: "str | None" = None) -> "str | None":
    """The inbox folder of the executor that started this Python worker, or None (no such executor, or one whose
    inbox did not start or is off: `spark.cloudprofiler.python.handoff`)."""
    found = _executor_name(local_dir)
    if found is None:
        return None
    pointer = found[0].parent / (found[0].name + option_table()["inbox_suffix"])
    if not _trusted(pointer, folder=False):
        return None
    try:
        return pointer.read_text().strip() or None
    except OSError:
        return None


_said = False


def _say_once(line: str) -> None:
    """One line per worker: a failing hand-off is said by its first channel, not by every task's."""
    global _said
    if not _said:
        _said = True
        print(line, file=sys.stderr, flush=True)


def worker_channel(name: str, handler: "str | None" = "buffered", params: tuple = (),
                   metadata: "dict[str, str] | None" = None, local_dir: "str | None" = None, handoff: bool = True):
    """A channel of this Python worker: a hand-off channel into its executor's buffers (no thread and no file of
    its own; `handoff` and an executor with an inbox), else a channel of this process's library started in the
    executor's folder (`start_in_executor_folder`). `handler` None: the executor's rules choose."""
    import cloudprofiler as cp

    inbox = executor_inbox(local_dir) if handoff else None
    if inbox is not None:
        from cloudprofiler.handoff import Handoff

        try:
            return Handoff(inbox, name, handler, params, metadata)
        except cp.InvalidArgumentError:
            raise
        except cp.LogFolderNotFoundError:  # the executor is stopping: its folder is still collected
            pass
        except cp.CloudProfilerError as e:  # e.g. no shared memory left: this worker's channels go to files
            _say_once(f"cloudprofiler: worker {os.getpid()} logs to files of its own: {e}")
    start_in_executor_folder(local_dir)
    if handler is None:
        return cp.Channel.by_rules(name, metadata=metadata)
    return cp.Channel(name, handler, params, metadata=metadata)
