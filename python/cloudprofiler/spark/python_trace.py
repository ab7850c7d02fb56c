"""A pass-through trace point in Python workers: every batch's ids go to a native channel, one TSC per id."""
from __future__ import annotations

import atexit

_channels: dict = {}


def _channel(name: str, handler: str):
    """One channel per (worker process, name), closed when the worker exits."""
    import cloudprofiler as cp

    ch = _channels.get(name)
    if ch is None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        meta = {"spark.event": "python_trace"}
        if ctx is not None:
            meta.update({"spark.task_attempt_id": str(ctx.taskAttemptId()), "spark.stage_id": str(ctx.stageId()),
                         "spark.partition_id": str(ctx.partitionId())})
        ch = _channels[name] = cp.Channel(name, handler, metadata=meta)
    return ch


@atexit.register
def _close_all() -> None:
    for ch in _channels.values():
        if not ch.closed:
            ch.close()
    _channels.clear()


def trace_dataframe(df, channel: str, id_col: str, handler: str):
    if id_col not in df.columns:
        raise ValueError(f"trace: column {id_col!r} is not in the DataFrame (columns: {', '.join(df.columns)})")

    def log_batches(batches):
        ch = _channel(channel, handler)
        for batch in batches:
            ch.log_many(batch.column(id_col))
            yield batch
        ch.flush()

    return df.mapInArrow(log_batches, df.schema)
