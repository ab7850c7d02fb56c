"""A pass-through trace point in Python workers: every batch's ids go to a native channel, one TSC per id."""
from __future__ import annotations

import os
import sys

from .jar import channel_key, default, options

# the tests' injected failures: "python-trace" fails every trace point's log, "udf-timing" the UDF timing's start
FAIL_ENV = "CLOUDPROFILER_TEST_FAIL"


def _fault_point() -> None:
    if "python-trace" in os.environ.get(FAIL_ENV, "").split(","):
        raise OSError(f"{FAIL_ENV}: a failure injected into the trace point")


def _say_unlogged(channel: str, unlogged: int, failure: Exception) -> None:
    """One line per task whose trace point failed: how many of its rows passed through unlogged, and why."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    task = ctx.taskAttemptId() if ctx is not None else "?"
    print(f"cloudprofiler: trace point {channel!r} of task {task} could not log {unlogged} rows, which passed "
          f"through unlogged: {type(failure).__name__}: {failure}", file=sys.stderr, flush=True)


def task_channel(name: str, handler: "str | None" = "buffered", params: tuple = (), local_dir: "str | None" = None,
                 handoff: bool = True, metadata: "dict[str, str] | None" = None):
    """A channel of its own for the task this Python worker runs (see worker.worker_channel: into the executor's
    buffers, else into a file in its folder); the caller closes it at the end of the task's partition.

    A channel per task rather than per worker: a worker is reused across tasks and killed without running atexit,
    so only a channel closed at the end of its task is complete (a file with its footer, which polars,
    pyarrow.dataset and DuckDB read), and its `spark.task_attempt_id` names the one task that wrote it. `handler`
    None: the channel follows the rules of the executor (`cps.set_rules`). `metadata`: more of it, or other than the
    trace point's `spark.event`."""
    from pyspark import TaskContext

    from .worker import worker_channel

    ctx = TaskContext.get()
    meta = {"spark.event": "python_trace", **(metadata or {})}
    if ctx is not None:
        meta.update({"spark.task_attempt_id": str(ctx.taskAttemptId()), "spark.stage_id": str(ctx.stageId()),
                     "spark.partition_id": str(ctx.partitionId())})
    return worker_channel(name, handler, params, meta, local_dir, handoff)


def configured_handler(conf, channel: str) -> tuple["str | None", tuple]:
    """The handler and parameters of `channel` in a Spark configuration (`spark.cloudprofiler.channel.<name>.*`,
    checked by the plugin at start), else None: the rules choose."""
    handler = conf.get(channel_key(channel, "handler"), None)
    params = conf.get(channel_key(channel, "params"), None) or ""
    if handler is None:
        return None, ()
    return handler.strip(), tuple(int(p) for p in params.split(",") if p.strip())


def trace_dataframe(df, channel: str, id_col: str, handler: "str | None", params):
    if id_col not in df.columns:
        raise ValueError(f"trace: column {id_col!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    conf = df.sparkSession.conf
    local_dir = conf.get(options()["local_dir"], None)  # where the executors name their folders
    handoff_key = options()["python_handoff"]
    handoff = conf.get(handoff_key, default(handoff_key)).strip().lower() != "false"
    if handler is None:
        handler, params = configured_handler(conf, channel)
    params = tuple(int(p) for p in params)
    import cloudprofiler as cp

    from .worker import hand_samples_over

    try:  # a bad handler fails here, on the driver, not in a worker
        if handler is not None:
            cp.Handler.parse(handler).check(params)
    except cp.InvalidArgumentError as e:
        raise ValueError(f"trace({channel!r}): {e}") from None

    def log_batches(batches):
        ch, unlogged, failure = None, 0, None
        try:
            ch = task_channel(channel, handler, params, local_dir, handoff)
        except Exception as e:  # a library or IO failure never fails the user's task: the rows pass unlogged
            failure = e
        try:
            for batch in batches:
                if ch is not None and failure is None:
                    try:
                        _fault_point()
                        ch.log_batch(batch.column(id_col))  # the batch passes here whole: one TSC
                    except Exception as e:
                        failure = e
                if failure is not None:
                    unlogged += batch.num_rows
                yield batch
        finally:
            try:
                if ch is not None:
                    ch.close()
            except Exception as e:
                failure = failure or e
            if isinstance(ch, cp.Channel):  # a library of this worker's own: its samples to its executor
                hand_samples_over()
            if failure is not None:
                _say_unlogged(channel, unlogged, failure)

    return df.mapInArrow(log_batches, df.schema)
