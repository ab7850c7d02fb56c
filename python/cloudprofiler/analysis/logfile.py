"""One log file or driver table decoded from its bytes by the core's reader (either Arrow IPC layout). A file cut
short keeps every complete batch; what follows the last one is counted as cut, never guessed at."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import pyarrow as pa

from ..logs import COUNTER_COLUMNS, CUT_KEYS, RECORD_COLUMNS, IncompleteLogWarning, log_metadata, read_log

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


def read_log_bytes(path: str, content) -> LogFile:
    """Decodes `content` (bytes or a pyarrow Buffer) of the file at `path` (used in messages only) with the core's
    reader; whether the file ended and whether it was cut come from the warning that reader gives a file without
    its end, which is not repeated here: the driver says it once per file (Catalog); or, for a file completed from
    what a killed process left (by the collector or `cloudprofiler repair`), from the cut its footer records."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IncompleteLogWarning)
        table = read_log(content, name=path)
    incomplete = [w.message for w in caught if isinstance(w.message, IncompleteLogWarning)]
    completed = (table.schema.metadata or {}).get(CUT_KEYS[0].encode())
    cut = any(w.cut for w in incomplete) or completed is not None  # a killed process's file, wherever it stopped
    return LogFile(path, table.schema, table.to_batches(), not incomplete and completed is None, cut)
