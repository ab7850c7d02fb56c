"""The serve transport: an emitter keeps its buckets until the reader commits them, and serves offset ranges.

This is what makes the Spark source exactly-once: Spark plans a micro-batch as an offset range per emitter,
its tasks fetch that range (again, after a failure or a restart from a checkpoint), and Spark commits the
range once the batch is done. The retention is the bounded queue of the generator: a bucket that finds it
full (the reader is too slow) is a drop, counted, and takes no offset. Latency is measured here too: a bucket
is processed when its offset is committed, so commit time minus emission time is its event-time latency.
"""
from __future__ import annotations

import collections
import json
import time

from . import wire
from .errors import GeneratorError

END_PILL_WAIT_S = 10  # after the last commit, how long the end pill stays served for the batch that reads it


class ServeTransport:
    """ROUTER socket plus retention ring; driven by the emitter's pacing loop (no thread of its own)."""

    def __init__(self, ctx, config, index: int, result, schema, clock: "dict | None"):
        import zmq

        self.zmq, self.config, self.index, self.result, self.clock = zmq, config, index, result, clock
        self.endpoint = config.endpoint(index)
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.bind(self.endpoint)
        self.schema = schema.serialize()
        self.bucket_tuples = config.effective_bucket_tuples()
        self.bound = config.effective_queue_buckets()
        self.ring: collections.deque = collections.deque()  # (header bytes, payload, wall ns, tuples) from `low`
        self.low = 0  # first retained offset == every offset below it is committed
        self.produced = 0  # next offset
        self.fetched = 0  # highest offset handed to a reader, plus one
        self.started = False
        self.data_end = None  # set at the end of the period: offsets below it hold data, data_end is the pill
        self.last_progress_ns = time.perf_counter_ns()
        # Offset 0 is a pill too: the reader's first batch (a Spark query's slow start: planning, code
        # generation, Python workers) reads it, and the emission starts only when the reader asks for more.
        start_pill = wire.Header(wire.PILL, index, 0, 0, 0, 0, time.time_ns())
        self.ring.append((start_pill.pack(), b"", start_pill.wall_ns, 0))
        self.produced = 1

    # --- pacing loop interface (see emitter.PushTransport) ---

    def wait_for_reader(self) -> None:
        deadline = time.perf_counter_ns() + self.config.timeout_s * 1e9
        while not self.started:
            if time.perf_counter_ns() > deadline:
                raise GeneratorError(f"no reader connected to {self.endpoint} within {self.config.timeout_s} s")
            self._serve(timeout_ms=50)

    def idle_until(self, deadline_ns: int) -> None:
        while True:
            remaining_ms = (deadline_ns - time.perf_counter_ns()) // 1_000_000
            if remaining_ms < 1:
                break
            self._serve(timeout_ms=remaining_ms)
        now = time.perf_counter_ns()
        if deadline_ns > now:
            time.sleep((deadline_ns - now) / 1e9)

    def offer(self, header: wire.Header, payload) -> bool:
        if self.produced - self.low >= self.bound:
            return False
        self.ring.append((header.pack(), payload, header.wall_ns, header.n))
        self.produced += 1
        self.result.emitted_tuples += header.n
        self.result.emitted_buckets += 1
        return True

    def pump(self, n: int) -> None:
        self._serve(timeout_ms=0)

    def backlog(self) -> int:
        return self.produced - self.low

    def finish(self, n: int, buckets_total: int, stamps) -> None:
        """Append the pill, then serve until the reader committed every data offset and fetched the pill (Spark
        reads it in the batch whose planning committed the last data: an emitter gone by then would fail that
        batch's tasks). A reader that never fetches the pill costs END_PILL_WAIT_S."""
        self.result.end_ns = time.perf_counter_ns()
        self.data_end = self.produced
        pill = wire.Header(wire.PILL, self.index, buckets_total, 0, 0, *stamps())
        self.ring.append((pill.pack(), b"", pill.wall_ns, 0))
        self.produced += 1
        drain_deadline = self.result.end_ns + self.config.drain_s * 1e9 if self.config.drain_s else None
        while self.low < self.data_end:
            if drain_deadline and time.perf_counter_ns() > drain_deadline:
                raise GeneratorError(f"the reader at {self.endpoint} left {self.data_end - self.low} buckets "
                                     f"unprocessed {self.config.drain_s} s after the period: it falls behind")
            if time.perf_counter_ns() - self.last_progress_ns > self.config.timeout_s * 1e9:
                raise GeneratorError(f"the reader at {self.endpoint} committed nothing for {self.config.timeout_s} s "
                                 f"({self.data_end - self.low} buckets never processed)")
            self._serve(timeout_ms=50)
        pill_deadline = time.perf_counter_ns() + END_PILL_WAIT_S * 1e9
        while self.fetched <= self.data_end and time.perf_counter_ns() < pill_deadline:
            self._serve(timeout_ms=50)

    def close(self, failed: bool) -> None:
        if failed:
            self.sock.setsockopt(self.zmq.LINGER, 0)
        self.sock.close()

    # --- requests ---

    def _serve(self, timeout_ms: int) -> None:
        if not self.sock.poll(timeout_ms, self.zmq.POLLIN):
            return
        while True:
            try:
                frames = self.sock.recv_multipart(flags=self.zmq.NOBLOCK, copy=False)
            except self.zmq.Again:
                return
            identity, body = frames[0], frames[-1].bytes
            try:
                request = json.loads(body)
                rid = request.get("rid")
                reply, data = self._handle(request)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                reply, data, rid = {"error": f"bad request {body[:80]!r}: {exc}"}, [], None
            reply["rid"] = rid
            self.sock.send_multipart([identity, json.dumps(reply).encode(), *data], copy=False)

    def _state(self) -> dict:
        r = self.result
        return {"emitter": self.index, "low": self.low, "latest": self._latest(), "bucket_tuples": self.bucket_tuples,
                "finished": self.data_end is not None, "emitted_tuples": r.emitted_tuples,
                "dropped_tuples": r.dropped_tuples, "committed_tuples": r.committed_tuples, "final": self._final()}

    def _final(self) -> int | None:
        """The offset after the pill once the pill is visible: a reader that has read up to it never asks this
        emitter again, which may then be gone (it stops once its pill was fetched, whatever other emitters of
        the same query still serve)."""
        return self.produced if self.data_end is not None and self.fetched >= self.data_end else None

    def _latest(self) -> int:
        # The pill becomes visible only once every data offset was fetched: it must be a batch of its own,
        # whose planning commits the batch that held the last data.
        final = self._final()
        return self.data_end if self.data_end is not None and final is None else self.produced

    def _handle(self, request: dict) -> tuple[dict, list]:
        op = request["op"]
        if op == wire.OP_INFO:
            return {**self._state(), "clock": self.clock}, [self.schema]
        if op == wire.OP_LATEST:
            self._progress()
            self.started = self.started or self.fetched > 0
            return self._state(), []
        if op == wire.OP_FETCH:
            first, end, most = int(request["from"]), int(request["to"]), int(request["max"])
            if first < self.low:
                return {"error": f"offsets {first}..{end} of {self.endpoint} are no longer retained (committed up "
                                 f"to {self.low}): it was committed already, by this reader or by another one "
                                 f"(each emitter serves one source of one query)"}, []
            if end > self.produced or first > end or most < 1:
                return {"error": f"bad fetch range {first}..{end} (max {most}) for {self.endpoint}, which holds "
                                 f"offsets {self.low}..{self.produced}"}, []
            self._progress()
            count = min(end - first, most)
            data = []
            for i in range(first - self.low, first - self.low + count):
                header, payload, _, _ = self.ring[i]
                data += (header, payload)
            self.fetched = max(self.fetched, first + count)
            return {"count": count}, data
        if op == wire.OP_COMMIT:
            upto = int(request["upto"])
            if upto > self.produced:
                return {"error": f"commit up to {upto} beyond the latest offset {self.produced} of {self.endpoint}"}, []
            self._progress()
            self._commit(upto)
            return {"low": self.low}, []
        return {"error": f"unknown op {op!r}; expected one of info, latest, fetch, commit"}, []

    def _progress(self) -> None:
        self.last_progress_ns = time.perf_counter_ns()

    def _commit(self, upto: int) -> None:
        now_wall = time.time_ns()
        since_start = (time.perf_counter_ns() - self.result.start_ns) / 1e9
        while self.low < upto:
            _, _, wall_ns, n = self.ring.popleft()
            self.low += 1
            if n:
                self.result.committed_tuples += n
                self.result.latency_samples.append((since_start, now_wall - wall_ns, n))

