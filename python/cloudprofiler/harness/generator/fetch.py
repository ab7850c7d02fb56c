"""The reader side of the serve transport in Python: state, offset ranges as (header, Arrow record batch), commits.

The Spark source reads the same protocol in the JVM (the plugin jar's io.cloudprofiler.harness.source); this
client is for Python programs. Every wait is bounded: a request without a reply within `timeout_s` raises
TimeoutError naming the endpoint. Buckets are decoded zero-copy.
"""
from __future__ import annotations

import itertools
import json

import pyarrow as pa

from . import wire


class FetchError(RuntimeError):
    """The emitter refused a request (its reply names the reason)."""


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
