"""A pass-through trace point in Python workers: every batch's ids go to a native channel, one TSC per id."""
from __future__ import annotations

import atexit

from .jar import channel_key, options

_channels: dict = {}


def worker_channel(name: str, handler: str = "buffered", params: tuple = (), local_dir: "str | None" = None):
    """One channel per (worker process, name), in the folder of the executor that started the worker (see
    worker.py), closed when the worker exits."""
    import cloudprofiler as cp

    ch = _channels.get(name)
    if ch is None:
        from pyspark import TaskContext

        from .worker import start_in_executor_folder

        start_in_executor_folder(local_dir)

        ctx = TaskContext.get()
        meta = {"spark.event": "python_trace"}
        if ctx is not None:
            meta.update({"spark.task_attempt_id": str(ctx.taskAttemptId()), "spark.stage_id": str(ctx.stageId()),
                         "spark.partition_id": str(ctx.partitionId())})
        ch = _channels[name] = cp.Channel(name, handler, params, metadata=meta)
    return ch


@atexit.register
def _close_all() -> None:
    for ch in _channels.values():
        if not ch.closed:
            ch.close()
    _channels.clear()


def configured_handler(conf, channel: str) -> tuple[str, tuple]:
    """The handler and parameters of `channel` in a Spark configuration (`spark.cloudprofiler.channel.<name>.*`,
    checked by the plugin at start), else buffered."""
    handler = conf.get(channel_key(channel, "handler"), None)
    params = conf.get(channel_key(channel, "params"), None) or ""
    if handler is None:
        return "buffered", ()
    return handler.strip(), tuple(int(p) for p in params.split(",") if p.strip())


def trace_dataframe(df, channel: str, id_col: str, handler: "str | None", params):
    if id_col not in df.columns:
        raise ValueError(f"trace: column {id_col!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    conf = df.sparkSession.conf
    local_dir = conf.get(options()["local_dir"], None)  # where the executors name their folders
    if handler is None:
        handler, params = configured_handler(conf, channel)
    params = tuple(int(p) for p in params)
    import cloudprofiler as cp

    try:  # a bad handler fails here, on the driver, not in a worker
        cp.Handler.parse(handler).check(params)
    except cp.InvalidArgumentError as e:
        raise ValueError(f"trace({channel!r}): {e}") from None

    def log_batches(batches):
        ch = worker_channel(channel, handler, params, local_dir)
        for batch in batches:
            ch.log_many(batch.column(id_col))
            yield batch
        ch.flush()

    return df.mapInArrow(log_batches, df.schema)
