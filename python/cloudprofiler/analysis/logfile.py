"""One log file or driver table decoded from its bytes, in either Arrow IPC layout: the stream (a schema, record
batches, an end-of-stream marker) or the file format (magic, the same stream, a footer). A file cut short keeps
every complete batch; what follows the last one is counted as cut, never guessed at."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.ipc as ipc

from ..logs import COUNTER_COLUMNS, RECORD_COLUMNS, log_metadata, read_batches

FILE_MAGIC = b"ARROW1\0\0"  # the file format's leading magic (6 bytes and 2 of padding)
END_OF_STREAM = b"\xff\xff\xff\xff\0\0\0\0"
# int64 everywhere: Spark has no unsigned types, and a TSC stays below 2^63 for centuries
COLUMN_TYPES = {"tuple_id": pa.int64(), "tsc": pa.int64(), "period_start_tsc": pa.int64(), "count": pa.int64()}


def kind_of(schema: pa.Schema) -> str:
    """records (tuple_id, tsc), counters (period_start_tsc, count) or table (a driver table, anything else)."""
    names = tuple(schema.names)
    return "records" if names == RECORD_COLUMNS else "counters" if names == COUNTER_COLUMNS else "table"


@dataclass
class LogFile:
    """schema (with the channel's metadata), the complete batches, whether the file ended properly (an
    end-of-stream marker or a footer) and whether bytes of an incomplete batch follow the last complete one."""

    path: str
    schema: pa.Schema
    batches: list
    ended: bool
    cut: bool

    @property
    def kind(self) -> str:
        return kind_of(self.schema)

    @property
    def metadata(self) -> dict:
        return log_metadata(self.schema)

    @property
    def rows(self) -> int:
        return sum(b.num_rows for b in self.batches)

    def columns(self, batch: pa.RecordBatch) -> list:
        """The batch's two columns of a records or counters file as int64 (older files wrote uint64)."""
        return [batch.column(i).cast(COLUMN_TYPES[name]) for i, name in enumerate(self.schema.names)]

    def table(self) -> pa.Table:
        return pa.Table.from_batches(self.batches, schema=self.schema)


def _read_stream(path: str, buffer: pa.Buffer) -> LogFile:
    reader = ipc.open_stream(pa.BufferReader(buffer))
    batches, cut = read_batches(reader, path)
    ended = not cut and buffer.size >= 8 and buffer[buffer.size - 8:].to_pybytes() == END_OF_STREAM
    return LogFile(path, reader.schema, batches, ended, cut)


def read_log_bytes(path: str, content) -> LogFile:
    """Decodes `content` (bytes or a pyarrow Buffer) of the file at `path` (used in messages only)."""
    buffer = content if isinstance(content, pa.Buffer) else pa.py_buffer(content)
    if buffer.size >= len(FILE_MAGIC) and buffer[: len(FILE_MAGIC)].to_pybytes() == FILE_MAGIC:
        try:
            reader = ipc.open_file(pa.BufferReader(buffer))
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
            return LogFile(path, reader.schema, batches, True, False)
        except (pa.ArrowInvalid, OSError):  # no footer yet (still open) or cut: the stream inside still reads
            return _read_stream(path, buffer[len(FILE_MAGIC):])
    return _read_stream(path, buffer)
