"""The batches of the Python UDFs a worker runs, counted and timed (spark.cloudprofiler.udfs), with no change to the
UDFs.

`install` wraps three functions of pyspark.worker, the same in Spark 3.5 and 4.x: `read_command`, which unpickles each
UDF (its name is kept; a UDTF's, its class's; a Python data source's read, its source's) and an RDD's evaluation (its
function and serializers, timed there: the user's functions it holds name it), and `read_udfs` and `read_udtf`, which
return the evaluation's function and its serializers. Per task every
input and output batch is counted, and the cycles of some are timed (udf_records: the first EXACT output batches,
then 1 in SAMPLE_EVERY at random): the function's output iterator, its input iterator (the deserializer's batches)
with the wait for each input batch's first bytes, and the serializer's end. The records go into a channel of the
task through the executor's hand-off, each costing one hand-off record (what a cp_trace record costs). A cycle runs
no Python of ours: a step of two iterators that count (`_udf_timing`, in C: a Python generator there cost 2% of a
cheap batch), which in a timed cycle read the clocks and log its records themselves (timed cycles in Python cost
about 9 us each, most of the 2% budget); an untimed cycle logs no record and reads no clock. The deserializer reads
the worker's stream itself (a Python wrapper of the stream that timed its reads cost 1%). Why: at a batch of 100
pickled rows through `v + 1` (the cheapest a batch gets, `bench udfs`) a cycle in Python costs a tenth of the batch's
own time.

Batches, not rows: a pickled Python UDF (BatchEvalPython) is counted and timed per batch of rows its serializer packs
(100 by default), around PySpark's batching, so that a row costs nothing more. Arrow evaluations (pandas and Arrow
UDFs, mapInPandas, mapInArrow, grouped and cogrouped maps, Python data sources' reads, Arrow UDTFs) per Arrow batch; a
pickled UDTF per batch of its input rows, its output rows being its results. An RDD's functions per batch its
serializers pickle (PySpark's auto-sized batches), or per item where its input is not pickled (text lines), its
output rows unknown where it is written unpickled (a shuffle's map side packs its records itself). Where Spark 4's
pipelined reader deserializes the input in a thread of its own (SPARK_PIPELINED_UDF=1), ahead of the function, the
input is counted in that thread and a cycle's read is the function's wait for what it queued (a pickled evaluation's
rows one by one): the input not hidden behind the function, with no wait or transfer apart.

A session that sets spark.cloudprofiler.udfs=false has its tasks' UDFs run untimed (its SQL executions' settings reach
their tasks as local properties). A failure of the timing never fails the UDF: that worker stops timing and says why
in one line of its executor's log.
"""
from __future__ import annotations

import functools
import os
import sys
from time import perf_counter_ns

from .. import _udf_timing
from ..udf_records import (CHANNEL, COGROUPED, DATA_SOURCE, END, ENDED, EVAL_TYPE_KEY, EVENT, EXACT, FORMAT, FORMAT_KEY,
                           IN_BATCHES, IN_ENTER, IN_EXIT, IN_ROWS, KIND_BITS, KIND_KEY, NAMES_KEY, NON_UDF,
                           OUT_BATCHES, OUT_ENTER, OUT_EXIT, OUT_ROWS, SAMPLE_EVERY, START, TABLE_UDF, TRANSFER,
                           UNKNOWN_ROWS, UNTIMED, WAIT)
# the kinds _udf_timing logs, in the order it takes them
TIMED_KINDS = (OUT_ENTER, OUT_EXIT, UNTIMED, IN_ENTER, IN_EXIT, WAIT, TRANSFER)
PIPELINED_ENV = "SPARK_PIPELINED_UDF"  # "1": PySpark's pipelined reader (Spark 4) reads the input in a thread
# PySpark's read of a Python data source (pyspark.sql.worker.plan_data_source_read): its module and name, which it sets
DATA_SOURCE_READ = ("pyspark.sql.worker.plan_data_source_read", "data_source_read_func")

_off: list = []  # the failure that turned this worker's timing off, once there is one
_names: list = []  # the UDFs read_command unpickled for the evaluation being read
_sources: list = []  # of them, PySpark's reads of Python data sources (by the sources' names)


def _fail(failure: BaseException) -> None:
    if not _off:
        _off.append(failure)
        print(f"cloudprofiler: worker {os.getpid()} stops timing its Python UDFs: {type(failure).__name__}: "
              f"{failure}", file=sys.stderr, flush=True)


def install(worker=None) -> None:
    """Wrap pyspark.worker's read_command, read_udfs and read_udtf (`worker`: that module) in this process, once."""
    if worker is None:
        import pyspark.worker as worker
    if getattr(worker, "_cloudprofiler_udfs", False):
        return
    read_command, read_udfs, read_udtf = worker.read_command, worker.read_udfs, worker.read_udtf

    def named_read_command(*args, **kwargs):
        began = perf_counter_ns()
        command = read_command(*args, **kwargs)
        if isinstance(command, tuple) and len(command) == 4 and callable(command[0]):
            # an RDD's evaluation (function, profiler, deserializer, serializer), which read_udfs does not read
            _names[:] = _function_names(command[0])
            _sources.clear()
            return _timed(command, NON_UDF, began)
        if isinstance(command, tuple) and len(command) == 2:  # a UDF's (function, return type)
            source = _data_source_name(command[0])
            if source is not None:
                _sources.append(source)
            _names.append(source or getattr(command[0], "__name__", None) or type(command[0]).__name__)
        elif isinstance(command, type):  # a UDTF's handler class
            _names.append(command.__name__)
        return command

    def timed(read_evaluation):
        """read_udfs or read_udtf (the same arguments up to the eval type, the same four things returned), timed."""
        def timed_read(*args, **kwargs):
            _names.clear()
            _sources.clear()
            began = perf_counter_ns()
            read = read_evaluation(*args, **kwargs)
            return _timed(read, kwargs.get("eval_type", args[2] if len(args) > 2 else None), began)

        return timed_read

    worker.read_command, worker.read_udfs, worker.read_udtf = named_read_command, timed(read_udfs), timed(read_udtf)
    worker._cloudprofiler_udfs = True


def _timed(read: tuple, eval_type, began: int) -> tuple:
    """The evaluation `read` (function, profiler, deserializer, serializer; its reading began at `began`), timed,
    unless the timing is off in this worker or for the task."""
    if _off:
        return read
    try:
        if _switched_off():
            return read
        return Task(eval_type, perf_counter_ns() - began).wrap(*read)
    except Exception as e:  # noqa: BLE001 -- the evaluation runs untimed
        _fail(e)
        return read


def _function_names(function, most: int = 64) -> list:
    """The user's functions an RDD's pipelined function holds (PySpark wraps each map, filter, mapPartitions... in
    functions of its own, which hold the user's in their closures), in the order found: the functions not of
    pyspark's modules, searched through closures and partials; ["RDD"] where none is found."""
    found, seen, queue = [], set(), [function]
    while queue and len(seen) < most:
        f = queue.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        inner = getattr(f, "func", None)  # functools.partial
        if inner is not None and not hasattr(f, "__code__"):
            queue.append(inner)
            continue
        if not hasattr(f, "__code__"):
            continue
        if not (getattr(f, "__module__", None) or "").startswith("pyspark"):
            found.append(f.__name__)
            continue
        for cell in f.__closure__ or ():
            try:
                queue.append(cell.cell_contents)
            except ValueError:  # a cell not yet filled
                pass
    return list(dict.fromkeys(found)) or ["RDD"]


def _data_source_name(function) -> "str | None":
    """Where `function` is PySpark's read of a Python data source (its `data_source_read_func`, which holds the data
    source in its closure), the source's name as `format()` takes it; else None."""
    if getattr(function, "__module__", None) != DATA_SOURCE_READ[0] or function.__name__ != DATA_SOURCE_READ[1]:
        return None
    free = dict(zip(function.__code__.co_freevars, (c.cell_contents for c in function.__closure__ or ())))
    source = free.get("data_source")
    try:
        return f"{source.name()}" if source is not None else None
    except Exception:  # noqa: BLE001 -- the user's name(): the function's own name then
        return None


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


def _results(batch) -> int:
    """The rows of a pickled UDTF's batch of output items, each the tuple of one input row's results."""
    return sum(len(item) for item in batch)


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


def _cogroup_rows(item) -> int:
    """The rows of a cogrouped map's input item, both sides of its key: each side a list of Arrow batches (Spark 4)
    or of pandas columns (Spark 3.5); UNKNOWN_ROWS where it is not such a pair."""
    if not isinstance(item, tuple) or len(item) != 2:
        return UNKNOWN_ROWS
    rows = 0
    for side in item:
        batches = [getattr(b, "num_rows", None) for b in side] if isinstance(side, list) else [None]
        side_rows = sum(batches) if None not in batches else _rows(side)
        if side_rows < 0:
            return UNKNOWN_ROWS
        rows += side_rows
    return rows


def _unknown_rows(item) -> int:
    return UNKNOWN_ROWS


class _PickledBatches:
    """An RDD's output batches as its batching serializer pickles them (its inner serializer's `dumps`, called once a
    batch), counted as the C iterators count; a timed cycle ends (OUT_EXIT) as the batch's pickling begins, and the
    next begins (the timing's cycle) once it is pickled. Its write to the worker's buffered stream falls into that
    next cycle's function part. A Python call a batch: the batches grow to 64 kB of pickles (PySpark's
    auto-batching)."""

    def __init__(self, task: "Task", dumps):
        self.task, self._dumps = task, dumps
        self.batches = self.rows = 0

    def __call__(self, batch):
        rows = len(batch) if isinstance(batch, (list, tuple)) else UNKNOWN_ROWS
        timing = self.task.timing
        if timing.timed:
            self.task.event(OUT_EXIT, rows)
        pickled = self._dumps(batch)
        self.batches += 1
        self.rows += max(rows, 0)
        if timing.timed or self.batches == timing.next:
            timing.cycle(self.batches)
        return pickled

    def ended(self) -> None:
        """The function's output ended (the serializer found no more)."""
        if self.task.timing.timed:
            self.task.event(OUT_EXIT, ENDED)


def _yields_lazy_groups(deserializer) -> bool:
    """Whether `deserializer` yields each group as an iterator of its Arrow batches that the function reads as it goes
    (Spark 4's group serializer, of grouped maps, aggregations and windows; Spark 3.5's yields each group read)."""
    try:
        from pyspark.sql.pandas.serializers import ArrowStreamGroupSerializer
    except ImportError:
        return False
    return isinstance(deserializer, ArrowStreamGroupSerializer)


class _LazyGroups:
    """A grouped evaluation's groups where each is an iterator of its Arrow batches (`_yields_lazy_groups`): each
    group's batches counted and, in a timed cycle, their reads timed as the input's are, as the function asks for them.
    A Python step a group; only the group being read is kept, the counts of those before it added up."""

    def __init__(self, groups, rows_of, timing):
        self._groups, self._rows_of, self._timing = groups, rows_of, timing
        self._batches = self._rows = 0
        self._current = None

    def __iter__(self):
        for group in self._groups:
            self._fold()
            self._current = _udf_timing.counted(group, self._rows_of, self._timing, False)
            yield self._current
        self._fold()

    def _fold(self) -> None:
        if self._current is not None:
            self._batches += self._current.batches
            self._rows += self._current.rows
            self._current = None

    @property
    def batches(self) -> int:
        return self._batches + (self._current.batches if self._current is not None else 0)

    @property
    def rows(self) -> int:
        return self._rows + (self._current.rows if self._current is not None else 0)


class Task:
    """The timing of one task's evaluation: its channel, its timing (`_udf_timing`: which cycles are timed, and their
    records) and its counted iterators."""

    def __init__(self, eval_type, setup_ns: int, channel=None):
        """`channel`: where the records go (`bench udfs`), else a new channel of the task."""
        from pyspark import TaskContext

        from .python_trace import FAIL_ENV, task_channel

        if "udf-timing" in os.environ.get(FAIL_ENV, "").split(","):
            raise OSError(f"{FAIL_ENV}: a failure injected into the UDF timing")
        self.eval_type = eval_type
        names = ", ".join(dict.fromkeys(_names)) or "?"
        metadata = {"spark.event": EVENT, NAMES_KEY: names, EVAL_TYPE_KEY: str(eval_type), FORMAT_KEY: FORMAT}
        if _sources:
            metadata[KIND_KEY] = DATA_SOURCE
        self.channel = channel or task_channel(CHANNEL, "buffered", metadata=metadata)
        self._log = self.channel.log
        ctx = TaskContext.get()
        seed = ctx.partitionId() if ctx is not None else 0  # a run again draws the same
        def timing():
            return _udf_timing.timing(self._log, _fail, seed, EXACT, SAMPLE_EVERY, KIND_BITS, TIMED_KINDS, ENDED)

        self.timing = timing()
        # PySpark's pipelined reader (PIPELINED_ENV) deserializes the input in a thread of its own, ahead of the
        # function: the input is counted there, on a timing of its own that no cycle times (it reads no clock and
        # logs nothing), and the function's reads of what that thread queued are timed in the cycle, as reads
        self.pipelined = os.environ.get(PIPELINED_ENV) == "1"
        self._counting = timing() if self.pipelined else self.timing
        # a read from the queue waits off the CPU for that thread, not for the JVM's transfer: it is all read
        self.timing.transfers = int(not self.pipelined)
        self._inputs, self._outputs = [], []  # the counted iterators (one each, unless PySpark reads again)
        self.event(START, setup_ns)

    def event(self, kind: int, value: int = 0) -> None:
        if _off or self.timing.off:  # the timing's flag, the C iterators' too: off once it failed or the task ended
            return
        try:
            self._log(value << KIND_BITS | kind)
        except Exception as e:  # noqa: BLE001
            self.timing.off = 1
            _fail(e)

    def _input(self, batches, rows_of):
        """The deserializer's batches, each counted; in a timed cycle, each one's read and deserialization logged
        (IN_ENTER, WAIT, TRANSFER, IN_EXIT), but where the pipelined reader's thread reads them (counted only)."""
        counted = _udf_timing.counted(batches, rows_of, self._counting, False)
        self._inputs.append(counted)
        return counted

    def _queued(self, items, rows_of):
        """What the pipelined reader queued for the function (its batches, or a pickled evaluation's rows one by one),
        in a timed cycle each one's wait logged as a read (IN_ENTER, IN_EXIT); counted by `_input` already."""
        return _udf_timing.counted(items, rows_of, self.timing, False)

    def _output(self, batches, rows_of):
        """The function's output batches as the serializer asks for them, each counted; a timed cycle logged from the
        asking (OUT_ENTER) to the batch's arrival (OUT_EXIT), an untimed one not at all: no clock read."""
        counted = _udf_timing.counted(batches, rows_of, self.timing, True)
        self._outputs.append(counted)
        return counted

    def wrap(self, func, profiler, deserializer, serializer):
        from pyspark.serializers import BatchedSerializer

        lazy_groups = _yields_lazy_groups(deserializer)

        def inputs(load, rows):
            def load_stream(stream):
                if not self.pipelined:  # the pipelined reader's thread reads the stream: no peek from this one
                    self.timing.peek = getattr(stream, "peek", None)
                if lazy_groups:
                    groups = _LazyGroups(load(stream), rows, self._counting)
                    self._inputs.append(groups)
                    return iter(groups)
                return self._input(load(stream), rows)

            return load_stream

        rdd, pickled_rows = self.eval_type == NON_UDF, isinstance(deserializer, BatchedSerializer)
        pickled = None  # an RDD's output batches as its serializer pickles them
        timed_func = func
        # the rows of an input item: Arrow batches (a cogrouped map's: both sides of a key), an RDD's items one by one
        # (text lines, pairs of a zip: each a row; None)
        rows_in = None if rdd else _cogroup_rows if self.eval_type in COGROUPED else _count
        if pickled_rows:  # around the batches, not every row
            deserializer._load_stream_without_unbatching = inputs(deserializer._load_stream_without_unbatching, len)
        else:
            deserializer.load_stream = inputs(deserializer.load_stream, rows_in)
        if rdd and isinstance(serializer, BatchedSerializer):
            # PySpark's batching serializers (auto-sized batches by default) pickle each batch with their inner
            # serializer's dumps: the output's batches are counted and timed there
            pickled = serializer.serializer.dumps = _PickledBatches(self, serializer.serializer.dumps)
            self._outputs.append(pickled)
        elif pickled_rows and not rdd:
            batched = serializer._batched  # a batch is a list (or, as the JVM pickles it, a tuple) of rows
            # a pickled UDTF's output item is the tuple of one input row's results
            results = _results if self.eval_type == TABLE_UDF else len
            serializer._batched = lambda rows: self._output(batched(rows), results)
        else:  # Arrow batches; an RDD's output written as it is (a shuffle's packed records: rows not known)
            rows_of = _unknown_rows if rdd else _count

            def timed_func(split_index, iterator):
                return self._output(func(split_index, iterator), rows_of)

        if self.pipelined:  # the function reads from the reader's queue: batches, or a pickled evaluation's rows
            queued_rows = None if pickled_rows else rows_in  # None: each item a row
            inner = timed_func

            def timed_func(split_index, iterator):
                return inner(split_index, self._queued(iterator, queued_rows))

        dump = serializer.dump_stream

        def dump_stream(iterator, stream):
            failed = 1
            try:
                if pickled is not None:
                    self.timing.cycle(0)
                dump(iterator, stream)
                if pickled is not None:
                    pickled.ended()
                failed = 0
            finally:
                self.end(failed)

        serializer.dump_stream = dump_stream
        return timed_func, profiler, deserializer, serializer

    def end(self, failed: int) -> None:
        """The task's counts and its END, then the channel closed."""
        for (batches, rows), side in (((IN_BATCHES, IN_ROWS), self._inputs), ((OUT_BATCHES, OUT_ROWS), self._outputs)):
            self.event(batches, sum(counted.batches for counted in side))
            self.event(rows, sum(counted.rows for counted in side))
        self.event(END, failed)
        # the channel's C function must not run past its close, from Python or from C
        self.timing.off = self._counting.off = 1
        try:
            self.channel.close()
        except Exception as e:  # noqa: BLE001
            _fail(e)
