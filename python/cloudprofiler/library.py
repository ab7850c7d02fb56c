"""Start, flush and stop the library of this process."""
from __future__ import annotations

from .native import call, ffi, lib

_COMPRESSION = {"none": lib.CP_COMPRESSION_NONE, "zstd": lib.CP_COMPRESSION_ZSTD}
_FULL_POLICY = {"block": lib.CP_FULL_BLOCK, "drop": lib.CP_FULL_DROP}
_TSC_READ = {"ordered": lib.CP_TSC_ORDERED, "unordered": lib.CP_TSC_UNORDERED}


def _choice(name: str, value: str, table: dict) -> int:
    try:
        return table[value]
    except KeyError:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(table)}") from None


def start(
    log_dir: str | None = None,
    *,
    block_records: int | None = None,
    channel_blocks: int | None = None,
    compression: str = "none",
    compression_threads: int | None = None,
    zstd_level: int | None = None,
    full_policy: str = "block",
    flush_interval_ms: int | None = None,
    tsc_read: str = "ordered",
    roll_bytes: int | None = None,
) -> str:
    """Start the library with these options (optional: the first channel starts it with defaults).

    Returns the log folder in use. Raises if the library has already started. `roll_bytes`: a channel's file
    rolls into a new segment once it has passed this size (None: $CLOUDPROFILER_ROLL_BYTES, else 64 MiB; 0: never).
    """
    options = ffi.new("cp_options *")
    lib.cp_options_init(options)
    keep = []
    if log_dir is not None:
        keep.append(ffi.new("char[]", str(log_dir).encode()))
        options.log_dir = keep[-1]
    for name, value in (
        ("block_records", block_records),
        ("channel_blocks", channel_blocks),
        ("compression_threads", compression_threads),
        ("zstd_level", zstd_level),
        ("flush_interval_ms", flush_interval_ms),
    ):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < (-7 if name == "zstd_level" else 0):
                raise ValueError(f"{name}={value!r} is not a valid count")
            setattr(options, name, value)
    options.compression = _choice("compression", compression, _COMPRESSION)
    options.full_policy = _choice("full_policy", full_policy, _FULL_POLICY)
    options.tsc_read = _choice("tsc_read", tsc_read, _TSC_READ)
    if roll_bytes is not None:
        if isinstance(roll_bytes, bool) or not isinstance(roll_bytes, int) or roll_bytes < 0:
            raise ValueError(f"roll_bytes={roll_bytes!r} is not a valid size")
        options.roll_bytes = roll_bytes
    call(lib.cp_start, options)
    return log_dir_in_use()


def log_dir_in_use() -> str | None:
    path = lib.cp_log_dir()
    return ffi.string(path).decode() if path != ffi.NULL else None


def flush_all() -> None:
    """Every record logged so far by this process is in its file when this returns."""
    call(lib.cp_flush_all)


def stop() -> None:
    """Flush and close every channel and stop the library's threads (it restarts on the next open)."""
    lib.cp_stop()
