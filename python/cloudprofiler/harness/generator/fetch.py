"""The reader side of the serve transport: state, offset ranges as Arrow record batches, commits.

Every wait is bounded: a request without a reply within `timeout_s` raises TimeoutError naming the endpoint.
Buckets are decoded zero-copy and joined into record batches of about `batch_tuples` rows, each with the
tuple id, the emission time (event time) and the emission TSC added as columns, so Spark gets large Arrow
batches and never sees a Python row (the paper's object factory).
"""
from __future__ import annotations

import itertools
import json

import numpy as np
import pyarrow as pa

from . import wire

ID_COLUMN, EVENT_TIME_COLUMN, EMIT_TSC_COLUMN = "id", "event_time", "emit_tsc"
EXTRA_FIELDS = [pa.field(ID_COLUMN, pa.int64()), pa.field(EVENT_TIME_COLUMN, pa.timestamp("us", tz="UTC")),
                pa.field(EMIT_TSC_COLUMN, pa.int64())]
# Spark has no unsigned integers: such payload columns widen to the next signed type.
_WIDER = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}


class FetchError(RuntimeError):
    """The emitter refused a request (its reply names the reason)."""


def output_schema(payload_schema: pa.Schema) -> pa.Schema:
    """Payload columns (unsigned ones widened) followed by id, event_time and emit_tsc."""
    fields = [pa.field(f.name, _WIDER.get(f.type, f.type)) for f in payload_schema]
    return pa.schema(fields + EXTRA_FIELDS)


class EmitterClient:
    """One connection to one serve-mode emitter."""

    def __init__(self, endpoint: str, timeout_s: float = 30.0):
        import zmq

        if not timeout_s > 0:
            raise ValueError(f"timeout must be > 0 s, got {timeout_s}")
        self.zmq, self.endpoint, self.timeout_s = zmq, endpoint, timeout_s
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDTIMEO, int(timeout_s * 1000))
        try:
            self.sock.connect(endpoint)
        except zmq.ZMQError as exc:
            self.sock.close()
            raise ValueError(f"bad emitter endpoint {endpoint!r}: {exc}") from None
        self._rids = itertools.count()
        self._schema = None

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "EmitterClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, op: str, **fields) -> tuple[dict, list]:
        rid = next(self._rids)
        try:
            self.sock.send(json.dumps({"op": op, "rid": rid, **fields}).encode())
        except self.zmq.Again:
            raise TimeoutError(f"the emitter at {self.endpoint} took no request for {self.timeout_s} s") from None
        while True:  # replies to requests that timed out earlier are skipped by their id
            if not self.sock.poll(int(self.timeout_s * 1000), self.zmq.POLLIN):
                raise TimeoutError(f"no reply from the emitter at {self.endpoint} within {self.timeout_s} s "
                                   f"(is the generator running with --serve?)")
            frames = self.sock.recv_multipart(copy=False)
            reply = json.loads(frames[0].bytes)
            if reply.get("rid") == rid:
                break
        if "error" in reply:
            raise FetchError(reply["error"])
        return reply, frames[1:]

    def info(self) -> dict:
        reply, frames = self.request(wire.OP_INFO)
        self._schema = pa.ipc.read_schema(pa.py_buffer(frames[0].buffer))
        return reply

    @property
    def payload_schema(self) -> pa.Schema:
        if self._schema is None:
            self.info()
        return self._schema

    def latest(self) -> dict:
        return self.request(wire.OP_LATEST)[0]

    def commit(self, upto: int) -> None:
        self.request(wire.OP_COMMIT, upto=int(upto))

    def buckets(self, first: int, end: int, max_buckets: int = 256):
        """(header, record batch) for every data bucket of offsets [first, end); pills are skipped."""
        schema = self.payload_schema
        while first < end:
            reply, frames = self.request(wire.OP_FETCH, **{"from": first, "to": end, "max": max_buckets})
            for i in range(reply["count"]):
                header = wire.Header.unpack(frames[2 * i].buffer)
                if header.kind == wire.DATA:
                    yield header, wire.decode_batch(frames[2 * i + 1].buffer, schema)
            first += reply["count"]

    def batches(self, first: int, end: int, batch_tuples: int = 1 << 16, max_buckets: int = 256):
        """Record batches in `output_schema` for offsets [first, end), about `batch_tuples` rows each."""
        target = output_schema(self.payload_schema)
        pending: list = []
        rows = 0
        for header, batch in self.buckets(first, end, max_buckets):
            pending.append((header, batch))
            rows += header.n
            if rows >= batch_tuples:
                yield _join(pending, target)
                pending, rows = [], 0
        if pending:
            yield _join(pending, target)


def _join(buckets: list, target: pa.Schema) -> pa.RecordBatch:
    headers = [h for h, _ in buckets]
    counts = np.fromiter((h.n for h in headers), np.int64, len(headers))
    starts = np.cumsum(counts) - counts
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
    ids = np.repeat(np.fromiter((h.first_id for h in headers), np.int64, len(headers)), counts) + within
    wall_us = np.repeat(np.fromiter((h.wall_ns // 1000 for h in headers), np.int64, len(headers)), counts)
    tsc = np.repeat(np.fromiter((h.tsc for h in headers), np.uint64, len(headers)).view(np.int64), counts)
    joined = pa.concat_batches([b for _, b in buckets]) if len(buckets) > 1 else buckets[0][1]
    columns = [joined.column(i).cast(target.field(i).type) for i in range(joined.num_columns)]
    columns += [pa.array(ids), pa.array(wall_us, pa.int64()).view(target.field(EVENT_TIME_COLUMN).type),
                pa.array(tsc)]
    return pa.RecordBatch.from_arrays(columns, schema=target)
