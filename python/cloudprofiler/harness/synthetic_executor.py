"""One executor of a synthetic Spark application (see cloudprofiler.harness.synthetic), as a process of its own.

The folder maker starts it with CLOUDPROFILER_SIMULATE_TSC set to its host's clock and in a UTS namespace of its
own, where it takes the simulated host's name first thing: the native library then reads that TSC domain and that
host name, and writes and names the files as it would on that host. It logs what the plugin's executor logs: the
task channels at the start and end of every task (metadata as CloudProfilerExecutorPlugin sets it) and, for the
tuples of each task, the pipeline's trace points (as cp_trace opens them, TraceExpression), a chunk of ids at a
time with a known delay before each point.

Protocol, one JSON document a line: argv[1] holds the settings; the process answers {"pid": ..., "host": ...}
once its library has started; each stdin line is a stage's tasks for it, answered with their launch and finish
times (ms since the epoch, as Spark's task table has them); "stop" closes every channel and ends the process.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time

import numpy as np

COUNTER_PERIOD_NS = 10_000_000


def _wait(ns: float) -> None:
    """Waits `ns` nanoseconds: a spin for short waits (a sleep overshoots them), a sleep for long ones."""
    if ns > 1_000_000:
        time.sleep(ns / 1e9)
        return
    deadline = time.perf_counter_ns() + int(ns)
    while time.perf_counter_ns() < deadline:
        pass


class Executor:
    def __init__(self, settings: dict):
        import cloudprofiler as cp

        self.cp = cp
        self.points = settings["points"]
        self.chunk = settings["chunk"]
        self.rng = np.random.default_rng(settings["seed"])
        self.counter_name = settings["counter"]
        self.meta = {"spark.app_id": settings["app_id"], "spark.executor_id": settings["executor_id"],
                     "spark.host": settings["host"], "tsc.domain": settings["domain"],
                     "tsc.domain.check": settings["check"]}
        cp.start(settings["folder"], compression=settings["compression"])
        self.channels: dict[str, "cp.Channel"] = {}

    def channel(self, name: str, event: str, handler: str = "buffered", params=()) -> "object":
        """Opens a channel at its first use, with the plugin's metadata: task channels at the first task, with the
        executor's identity and TSC domain; trace channels (cp_trace) at the first row that passes them, with only
        their event (the analysis finds their domain through their process)."""
        if name not in self.channels:
            meta = {**self.meta, "spark.event": event} if event.startswith("task_") else {"spark.event": event}
            self.channels[name] = self.cp.Channel(name, handler, params, metadata=meta)
        return self.channels[name]

    def run(self, task: dict) -> dict:
        launch_ms = time.time_ns() // 1_000_000
        end = self.channel("spark.task.end", "task_end")  # both open before the first task starts, as the plugin's
        self.channel("spark.task.start", "task_start").log(task["id"])
        ids = np.arange(task["first"], task["stop"], task["step"], dtype=np.int64)
        points = [self.points[i] for i in task["points"]]
        chunks = range(0, ids.size, self.chunk)
        for lo in chunks:
            chunk = ids[lo:lo + self.chunk]
            for k, point in enumerate(points):
                if k and point["median_us"] > 0:
                    _wait(point["median_us"] * 1e3 * np.exp(point["sigma"] * self.rng.standard_normal()))
                self.channel(point["channel"], "sql_trace").log_many(chunk)
            if task["counts"] and self.counter_name:
                self.channel(self.counter_name, "sql_trace", "mpc", (COUNTER_PERIOD_NS,)).log_many(chunk)
            if task["delay_ms"]:  # a slow node: each chunk waits its share
                _wait(task["delay_ms"] * 1e6 / len(chunks))
        end.log(task["id"])
        return {"id": task["id"], "launch_ms": launch_ms, "finish_ms": time.time_ns() // 1_000_000}

    def stop(self) -> None:
        for ch in self.channels.values():
            ch.close()
        self.cp.stop()


def main(argv: list[str]) -> int:
    settings = json.loads(argv[1])
    socket.sethostname(settings["host"])  # before the library starts: it names the files after the host
    executor = Executor(settings)
    print(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}), flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            break
        print(json.dumps([executor.run(task) for task in json.loads(line)]), flush=True)
    executor.stop()
    print(json.dumps({"stopped": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
