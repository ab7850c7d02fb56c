"""Every batch of the Python UDFs a worker runs, timed (spark.cloudprofiler.udfs), with no change to the UDFs.

`install` wraps two functions of pyspark.worker, the same in Spark 3.5 and 4.x: `read_command`, which unpickles each
UDF (its name is kept), and `read_udfs`, which returns the evaluation's function and its serializers. Per task the
function's output iterator, its input iterator (the deserializer's batches) and the socket reads under it are
timed, and so is the serializer's end: the records (udf_records) go into a channel of the task through the
executor's hand-off, a record per event, each costing one hand-off record (what a cp_trace record costs).

Batches, not rows: a pickled Python UDF (BatchEvalPython) is timed per batch of rows its serializer packs (100 by
default), around PySpark's batching, so that a row costs nothing more. Arrow evaluations (pandas and Arrow UDFs,
mapInPandas, mapInArrow, grouped and cogrouped maps) are timed per Arrow batch. Not timed: RDD functions, UDTFs and
Python data sources (no read_udfs), Spark 4's pipelined reader (SPARK_PIPELINED_UDF=1, input read by a thread).

A session that sets spark.cloudprofiler.udfs=false has its tasks' UDFs run untimed (its SQL executions' settings reach
their tasks as local properties). A failure of the timing never fails the UDF: that worker stops timing and says why
in one line of its executor's log.
"""
from __future__ import annotations

import functools
import os
import sys
from time import perf_counter_ns

from ..udf_records import (CHANNEL, END, ENDED, EVAL_TYPE_KEY, EVENT, IN_ENTER, IN_EXIT, KIND_BITS, NAMES_KEY,
                           OUT_ENTER, OUT_EXIT, START, UNKNOWN_ROWS, WAIT)

_off: list = []  # the failure that turned this worker's timing off, once there is one
_names: list = []  # the UDFs read_command unpickled for the evaluation being read


def _fail(failure: BaseException) -> None:
    if not _off:
        _off.append(failure)
        print(f"cloudprofiler: worker {os.getpid()} stops timing its Python UDFs: {type(failure).__name__}: "
              f"{failure}", file=sys.stderr, flush=True)


def install(worker=None) -> None:
    """Wrap pyspark.worker's read_command and read_udfs (`worker`: that module) in this process, once."""
    if worker is None:
        import pyspark.worker as worker
    if getattr(worker, "_cloudprofiler_udfs", False):
        return
    read_command, read_udfs = worker.read_command, worker.read_udfs

    def named_read_command(*args, **kwargs):
        command = read_command(*args, **kwargs)
        if isinstance(command, tuple) and len(command) == 2:  # a UDF's (function, return type)
            _names.append(getattr(command[0], "__name__", None) or type(command[0]).__name__)
        return command

    def timed_read_udfs(*args, **kwargs):
        _names.clear()
        began = perf_counter_ns()
        read = read_udfs(*args, **kwargs)
        if _off or os.environ.get("SPARK_PIPELINED_UDF") == "1":
            return read
        try:
            if _switched_off():
                return read
            eval_type = kwargs.get("eval_type", args[2] if len(args) > 2 else None)
            return Task(eval_type, perf_counter_ns() - began).wrap(*read)
        except Exception as e:  # noqa: BLE001 -- the evaluation runs untimed
            _fail(e)
            return read

    worker.read_command, worker.read_udfs = named_read_command, timed_read_udfs
    worker._cloudprofiler_udfs = True


@functools.cache
def _udfs_key() -> str:
    from .jar import options

    return options()["udfs"]


def _switched_off() -> bool:
    """Whether the task's session set spark.cloudprofiler.udfs=false: a SQL execution's session settings reach its
    tasks as local properties."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    value = ctx.getLocalProperty(_udfs_key()) if ctx is not None else None
    return value is not None and value.strip().lower() == "false"


def _rows(item, depth: int = 0) -> int:
    """The rows of an Arrow batch, a pandas object, or the first such in a list or tuple (a batch of pandas
    columns, (series, type) pairs, grouped batches); -1 where none is found."""
    rows = getattr(item, "num_rows", None)
    if rows is None:
        shape = getattr(item, "shape", None)
        rows = shape[0] if isinstance(shape, tuple) and shape else None
    if rows is None and depth < 3 and isinstance(item, (list, tuple)) and item:
        return _rows(item[0], depth + 1)
    return -1 if rows is None else int(rows)


def _count(batch) -> int:
    """The rows of a batch: `_rows`, else the length of a list or tuple (a batch of pickled rows: the JVM pickles an
    array, which unpickles as a tuple), else UNKNOWN_ROWS."""
    rows = _rows(batch)
    return rows if rows >= 0 else len(batch) if isinstance(batch, (list, tuple)) else UNKNOWN_ROWS


def _closed(tuple_id: int) -> None:
    pass


class Task:
    """The timing of one task's evaluation: its channel and the socket time waited since the last event."""

    def __init__(self, eval_type, setup_ns: int, channel=None):
        """`channel`: where the records go (`bench udfs`), else a new channel of the task."""
        from .python_trace import FAIL_ENV, task_channel

        if "udf-timing" in os.environ.get(FAIL_ENV, "").split(","):
            raise OSError(f"{FAIL_ENV}: a failure injected into the UDF timing")
        names = ", ".join(dict.fromkeys(_names)) or "?"
        self.channel = channel or task_channel(CHANNEL, "buffered", metadata={
            "spark.event": EVENT, NAMES_KEY: names, EVAL_TYPE_KEY: str(eval_type)})
        self._log = self.channel.log
        self.waited = 0
        self.event(START, setup_ns)

    def event(self, kind: int, value: int = 0) -> None:
        if _off:
            return
        try:
            if self.waited:
                self._log(self.waited << KIND_BITS | WAIT)
                self.waited = 0
            self._log(value << KIND_BITS | kind)
        except Exception as e:  # noqa: BLE001
            _fail(e)

    def wrap(self, func, profiler, deserializer, serializer):
        from pyspark.serializers import BatchedSerializer

        def inputs(load, rows):
            return lambda stream: _Batches(self, load(_Reads(self, stream)), IN_ENTER, IN_EXIT, rows)

        if isinstance(deserializer, BatchedSerializer):  # pickled rows: around the batches, not every row
            batched = serializer._batched  # a batch is a list (or, as the JVM pickles it, a tuple) of rows
            deserializer._load_stream_without_unbatching = inputs(deserializer._load_stream_without_unbatching, len)
            serializer._batched = lambda rows: _Batches(self, batched(rows), OUT_ENTER, OUT_EXIT, len)
            timed_func = func
        else:
            deserializer.load_stream = inputs(deserializer.load_stream, _count)

            def timed_func(split_index, iterator):
                return _Batches(self, func(split_index, iterator), OUT_ENTER, OUT_EXIT, _count)

        dump = serializer.dump_stream

        def dump_stream(iterator, stream):
            failed = 1
            try:
                dump(iterator, stream)
                failed = 0
            finally:
                self.event(END, failed)
                self._log = _closed  # the channel's C function must not run past its close
                try:
                    self.channel.close()
                except Exception as e:  # noqa: BLE001
                    _fail(e)

        serializer.dump_stream = dump_stream
        return timed_func, profiler, deserializer, serializer


class _Reads:
    """The input stream, each read timed: how long the worker waited for the JVM's bytes (and copied them)."""

    def __init__(self, task: Task, stream):
        self._task, self._stream = task, stream

    def read(self, *args):
        began = perf_counter_ns()
        data = self._stream.read(*args)
        self._task.waited += perf_counter_ns() - began
        return data

    def readinto(self, buffer):
        began = perf_counter_ns()
        n = self._stream.readinto(buffer)
        self._task.waited += perf_counter_ns() - began
        return n

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Batches:
    """An evaluation's input batches (IN_ENTER, IN_EXIT: each one's read and deserialization) or output batches
    (OUT_ENTER, OUT_EXIT: from the serializer's asking for one to its getting it), each `next` logged."""

    def __init__(self, task: Task, batches, enter: int, exit_: int, rows):
        self._event, self._batches, self._enter, self._exit, self._rows = task.event, iter(batches), enter, exit_, rows

    def __iter__(self):
        return self

    def __next__(self):
        self._event(self._enter)
        try:
            batch = next(self._batches)
        except StopIteration:
            self._event(self._exit, ENDED)
            raise
        self._event(self._exit, self._rows(batch))
        return batch

    def close(self):  # PySpark closes the output iterator at the end of the task
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()
