"""How a bucket travels: a two-frame ZeroMQ message, a fixed header and one Arrow IPC record batch message.

Header: kind, emitter, bucket sequence, first tuple id, tuple count, emission TSC, emission wall clock (ns).
Every tuple of a bucket carries the bucket's emission stamp as its event time (the bucket is the unit of
pacing, so its tuples leave together). A poison pill (kind PILL) ends a measurement period and carries the
emitter's totals so the consumer can check emitted == received + dropped.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa

DATA = 1
PILL = 2
HEADER = struct.Struct("<BxxxIQQQQq")  # kind, emitter, seq, first_id, n, tsc, wall_ns
PILL_BODY = struct.Struct("<QQQQ")  # emitted tuples, emitted buckets, dropped tuples, dropped buckets


@dataclass(frozen=True)
class Header:
    kind: int
    emitter: int
    seq: int
    first_id: int
    n: int
    tsc: int
    wall_ns: int

    def pack(self) -> bytes:
        return HEADER.pack(self.kind, self.emitter, self.seq, self.first_id, self.n, self.tsc, self.wall_ns)

    @classmethod
    def unpack(cls, frame) -> "Header":
        return cls(*HEADER.unpack(bytes(frame)[: HEADER.size]))


@dataclass(frozen=True)
class Totals:
    emitted_tuples: int
    emitted_buckets: int
    dropped_tuples: int
    dropped_buckets: int

    def pack(self) -> bytes:
        return PILL_BODY.pack(self.emitted_tuples, self.emitted_buckets, self.dropped_tuples, self.dropped_buckets)

    @classmethod
    def unpack(cls, frame) -> "Totals":
        return cls(*PILL_BODY.unpack(bytes(frame)))


def encode_batch(batch: pa.RecordBatch) -> pa.Buffer:
    """One IPC record batch message (no schema): the reader pairs it with the workload's schema."""
    return batch.serialize()


def decode_batch(frame, schema: pa.Schema) -> pa.RecordBatch:
    """Zero-copy view of a received bucket as a record batch."""
    return pa.ipc.read_record_batch(pa.py_buffer(frame), schema)


# The serve transport's request-reply protocol (ZeroMQ DEALER reader -> ROUTER emitter). A request is one JSON
# frame {"op", "rid", ...}; a reply starts with one JSON frame echoing "rid" and carrying "error" on failure.
# Offsets count the buckets an emitter took into retention (dense: a dropped bucket takes no offset, its tuple
# ids are simply absent). The last offset of a finished period is a pill: a bucket of kind PILL and 0 tuples,
# so the reader plans one more batch and thereby commits the last data (paper 7.1, the poison pill).
# state, "clock" (whose TSC the headers' tsc is: clock.tsc_identity(); null where it is the monotonic clock in ns)
# and the Arrow schema of the payloads; does not start the emission
OP_INFO = "info"
OP_LATEST = "latest"  # state; the first one after offset 0 (a start pill) was fetched starts the emission
OP_FETCH = "fetch"  # {"from", "to", "max"}: up to "max" buckets from offset "from", as (header, payload) pairs
OP_COMMIT = "commit"  # {"upto"}: the reader processed every offset below "upto": retention may free them
