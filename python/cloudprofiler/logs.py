"""Reading log files: plain Arrow IPC streams, with the channel's metadata decoded."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

_JSON_KEYS = {"handler.params", "open.clock", "close.clock", "tsc.simulation"}
_INT_KEYS = {"channel.number", "pid", "records.logged", "records.written", "records.dropped"}
_FLOAT_KEYS = {"tsc.hz", "tsc.hz_uncertainty"}
_BOOL_KEYS = {"closed", "tsc.invariant"}
RECORD_COLUMNS = ("tuple_id", "tsc")
COUNTER_COLUMNS = ("period_start_tsc", "count")


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


def log_metadata(source: "pa.Table | pa.Schema | str | Path") -> dict[str, Any]:
    """The channel metadata of a log file (or of a table read from one), values decoded to Python types."""
    if isinstance(source, (str, Path)):
        with pa.OSFile(str(source)) as f:
            schema = ipc.open_stream(f).schema
    else:
        schema = source if isinstance(source, pa.Schema) else source.schema
    raw = schema.metadata or {}
    return {k.decode(): _decode(k.decode(), v.decode()) for k, v in raw.items()}


def read_batches(reader: ipc.RecordBatchStreamReader, name: str) -> tuple[list, bool]:
    """The complete batches of a stream, and whether an incomplete one followed (then a warning names `name`)."""
    batches = []
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            return batches, False
        except (pa.ArrowInvalid, OSError) as exc:
            warnings.warn(f"{name}: ends with an incomplete batch ({exc}); read the {len(batches)} complete ones")
            return batches, True


def read_log(path: "str | Path") -> pa.Table:
    """One log file as a table. A file cut short (process killed) is read up to its last complete batch."""
    path = Path(path)
    with pa.OSFile(str(path)) as f:
        reader = ipc.open_stream(f)
        batches, _ = read_batches(reader, str(path))
    return pa.Table.from_batches(batches, schema=reader.schema)


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
            [(columns[0], pa.int64() if kind == "records" else pa.uint64()), (columns[1], pa.uint64()),
             ("channel", pa.string()), ("host", pa.string()), ("pid", pa.int64()), ("file", pa.string())]
        )
        return schema.empty_table()
    return pa.concat_tables(tables)
