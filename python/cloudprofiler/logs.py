"""Reading log files, with the channel's metadata decoded.

A closed log file is an Arrow IPC file: pyarrow, polars and DuckDB read it with no project code, and its footer
holds the final metadata. A file whose process was killed, or that is still being written, has no footer yet: it
is read as the stream of messages after the leading magic, up to its last complete batch, with a warning;
`repair` makes such a file whole, for the readers that need a footer.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, BinaryIO, Union

import pyarrow as pa
import pyarrow.ipc as ipc

from .private_files import replace_privately

FILE_MAGIC = b"ARROW1\0\0"  # the first 8 bytes of an Arrow IPC file; its last 6 are "ARROW1"
_JSON_KEYS = {"handler.params", "open.clock", "close.clock", "tsc.simulation", "switch.in", "switch.out"}
# in the footer of a file completed from the part a killed process left (the collector's CompleteBatches.java writes
# them, `repair` too): the bytes left out after its last complete batch, and the batches kept
CUT_KEYS = ("cut.bytes", "cut.batches")
_INT_KEYS = {
    "channel.number", "pid", "records.logged", "records.written", "records.dropped", "handoff.rejected_blocks",
    "handoff.rejected_files", "rules.segment", *CUT_KEYS,
}
_FLOAT_KEYS = {"tsc.hz", "tsc.hz_uncertainty"}
_BOOL_KEYS = {"closed", "tsc.invariant"}
# padded with spaces to a fixed width in the schema message at a file's start, which is rewritten in place
_PADDED_KEYS = {
    "handler.params", "close.clock", "records.logged", "records.written", "records.dropped", "handoff.rejected_blocks",
    "handoff.rejected_files", "closed", "switch.in", "switch.out",
}
RECORD_COLUMNS = ("tuple_id", "tsc")
COUNTER_COLUMNS = ("period_start_tsc", "count")

LogSource = Union[str, os.PathLike, bytes, bytearray, memoryview, pa.Buffer, BinaryIO]


class IncompleteLogWarning(UserWarning):
    """A log file read without its end: its process was killed, or still writes it.

    `file` names the file, `batches` is how many complete batches were read, `cut` is True when the file ends
    inside a batch (whose part is left out).
    """

    def __init__(self, message: str, file: str, batches: int, cut: bool):
        super().__init__(message)
        self.file = file
        self.batches = batches
        self.cut = cut


def _decode(key: str, value: str) -> Any:
    value = value.strip()
    if key in _JSON_KEYS:
        return json.loads(value)
    if key in _INT_KEYS:
        return int(value)
    if key in _FLOAT_KEYS:
        return float(value)
    if key in _BOOL_KEYS:
        return value == "true"
    return value


def _open(source: LogSource, name: str | None) -> tuple[pa.NativeFile, str]:
    """A random-access reader of the source, and the name messages give it."""
    if isinstance(source, (str, os.PathLike)):
        return pa.OSFile(os.fspath(source)), name or os.fspath(source)
    if isinstance(source, (bytes, bytearray, memoryview, pa.Buffer)):
        return pa.BufferReader(pa.py_buffer(source)), name or "<bytes>"
    if isinstance(source, pa.NativeFile) and source.seekable():  # read where needed: the footer, or the start
        return source, name or str(getattr(source, "path", "<file object>"))
    if hasattr(source, "read"):
        return pa.BufferReader(pa.py_buffer(source.read())), name or str(getattr(source, "name", "<file object>"))
    raise TypeError(f"cannot read a log from {type(source).__name__} {source!r:.60}: expected a path, bytes or a "
                    "binary file object")


def _file_reader(f: pa.NativeFile) -> ipc.RecordBatchFileReader | None:
    """The reader of a file that has its footer (a closed log file), else None."""
    size = f.size()
    if size < 2 * len(FILE_MAGIC) + 10 or f.read_at(6, size - 6) != FILE_MAGIC[:6]:
        return None
    try:
        return ipc.open_file(f)
    except pa.ArrowInvalid:  # a batch whose last bytes happen to read "ARROW1": no footer after all
        return None


def _stream_reader(f: pa.NativeFile, name: str) -> ipc.RecordBatchStreamReader:
    """The messages after the magic (from the start in a stream written by an earlier version)."""
    f.seek(len(FILE_MAGIC) if f.read_at(len(FILE_MAGIC), 0) == FILE_MAGIC else 0)
    try:
        return ipc.open_stream(f)
    except pa.ArrowInvalid as exc:
        raise pa.ArrowInvalid(f"{name} is not a log file: {exc}") from None


def unpadded(schema: pa.Schema) -> pa.Schema:
    """The schema with its padded metadata values (rewritten in place when the file closes) stripped."""
    raw = schema.metadata or {}
    return schema.with_metadata({k: v.rstrip() if k.decode() in _PADDED_KEYS else v for k, v in raw.items()})


def log_schema(source: LogSource, name: str | None = None) -> pa.Schema:
    """The schema of a log file, with its metadata: the footer's if the file has one, else its first message's."""
    f, name = _open(source, name)
    with f:
        reader = _file_reader(f)
        return reader.schema if reader is not None else _stream_reader(f, name).schema


def log_metadata(source: "pa.Table | pa.Schema | LogSource") -> dict[str, Any]:
    """The channel metadata of a log file (a path, bytes or a binary file object) or of a table read from one,
    values decoded to Python types."""
    schema = source if isinstance(source, pa.Schema) else source.schema if isinstance(source, pa.Table) else \
        log_schema(source)
    raw = schema.metadata or {}
    return {k.decode(): _decode(k.decode(), v.decode()) for k, v in raw.items()}


def read_log(source: LogSource, name: str | None = None) -> pa.Table:
    """One log file (or a table of the plugin's: cloudprofiler.tables) as a table: a path, bytes (e.g. the content
    of Spark's binaryFile source) or a binary file object; `name` names it in messages (default: the path, or the
    file object's name).

    A file without its footer (process killed, or still writing) is read up to its last complete batch with an
    IncompleteLogWarning, unless its metadata says it was closed.
    """
    f, name = _open(source, name)
    with f:
        reader = _file_reader(f)
        if reader is not None:
            return reader.read_all()
        reader = _stream_reader(f, name)
        schema = unpadded(reader.schema)
        batches, cut, _ = _complete_batches(reader, f)
    if cut is not None:
        message = f"{name}: ends inside a batch ({cut}); read its {len(batches)} complete batches"
        warnings.warn(IncompleteLogWarning(message, name, len(batches), True), stacklevel=2)
    elif (schema.metadata or {}).get(b"closed") == b"false":
        message = f"{name}: has no end (its process was killed, or still writes it); read its {len(batches)} batches"
        warnings.warn(IncompleteLogWarning(message, name, len(batches), False), stacklevel=2)
    return pa.Table.from_batches(batches, schema=schema)


def _complete_batches(reader: ipc.RecordBatchStreamReader, f: pa.NativeFile) -> tuple[list, Exception | None, int]:
    """The stream's batches up to its end or its first incomplete one; what stopped the reading there (None at the
    end); and the offset in `f` after the last complete one."""
    batches, end = [], f.tell()
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            return batches, None, end
        except (pa.ArrowInvalid, OSError) as exc:
            return batches, exc, end
        end = f.tell()


def repair(path: "str | os.PathLike") -> "dict[str, int] | None":
    """Makes a log file that has no end (its process was killed) a whole Arrow IPC file, which polars, DuckDB and
    pyarrow's file and dataset readers open: its complete batches, their compression kept, and a footer whose
    metadata says `closed: false` and the cut (CUT_KEYS). The new file replaces the old one in one rename, with its
    permissions. Returns the footer's cut keys, or None for a file that has its end already."""
    path = os.fspath(path)
    with pa.OSFile(path) as f:
        if _file_reader(f) is not None:
            return None
        reader = _stream_reader(f, path)
        batches, _, kept = _complete_batches(reader, f)
        size = f.size()
    schema = unpadded(reader.schema)
    cut = dict(zip(CUT_KEYS, (size - kept, len(batches))))
    metadata = {**(schema.metadata or {}), b"closed": b"false", **{k.encode(): str(v).encode() for k, v in cut.items()}}
    compressed = (schema.metadata or {}).get(b"compression") == b"zstd"
    options = ipc.IpcWriteOptions(compression="zstd" if compressed else None)

    def write(out):
        with ipc.new_file(out, schema.with_metadata(metadata), options=options) as w:
            for batch in batches:
                w.write_batch(batch)

    replace_privately(path, write, os.stat(path).st_mode & 0o777)
    return cut


def log_files(folder: "str | Path", recursive: bool = True) -> list[Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"log folder {folder} does not exist")
    return sorted(folder.rglob("*.arrows") if recursive else folder.glob("*.arrows"))


def read_log_dir(
    folder: "str | Path", channel: str | None = None, recursive: bool = True, kind: str = "records"
) -> pa.Table:
    """Every log file of one kind in a folder, concatenated, with columns channel, host, pid and file added.

    kind: "records" (tuple_id, tsc) or "counters" (period_start_tsc, count).
    """
    columns = {"records": RECORD_COLUMNS, "counters": COUNTER_COLUMNS}.get(kind)
    if columns is None:
        raise ValueError(f"kind={kind!r} is not one of records, counters")
    tables = []
    for path in log_files(folder, recursive):
        table = read_log(path)
        if tuple(table.column_names) != columns:
            continue
        meta = log_metadata(table)
        if channel is not None and meta.get("channel.name") != channel:
            continue
        n = table.num_rows
        table = table.replace_schema_metadata(None)
        for name, value, type_ in (
            ("channel", meta.get("channel.name", ""), pa.string()),
            ("host", meta.get("host", ""), pa.string()),
            ("pid", meta.get("pid", 0), pa.int64()),
            ("file", str(path), pa.string()),
        ):
            table = table.append_column(name, pa.array([value] * n, type_) if n else pa.array([], type_))
        tables.append(table)
    if not tables:
        schema = pa.schema(
            [(columns[0], pa.int64()), (columns[1], pa.int64()),
             ("channel", pa.string()), ("host", pa.string()), ("pid", pa.int64()), ("file", pa.string())]
        )
        return schema.empty_table()
    return pa.concat_tables(tables)
