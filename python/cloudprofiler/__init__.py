"""Cloudprofiler for Spark: TSC-based latency logging with strict cross-node error bounds.

    import cloudprofiler as cp
    with cp.Channel("ingest", handler="buffered") as ch:
        ch.log_many(ids)
    table = cp.read_log(ch.path)
"""
from .channel import Channel, ChannelStats, Handler, sample_level, take_samples
from .clock import ClockReading, TscFrequency, clock_read, tsc, tsc_frequency, tsc_is_invariant, tscp
from .errors import (
    ClosedError,
    CloudProfilerError,
    InvalidArgumentError,
    LogFolderNotFoundError,
    LogFolderPermissionError,
    PeerRefusedError,
    PeerTimeoutError,
    UnsupportedError,
)
from .library import flush_all, start, stop
from .library import log_dir_in_use as log_dir
from .logs import IncompleteLogWarning, log_files, log_metadata, read_log, read_log_dir
from .rules import read_rules_file, rules, set_rules


def __getattr__(name: str):
    """`__version__`: the VERSION file, through the package's metadata, read when asked for. Reading it at import
    (importlib.metadata searches every entry of the path) cost a Python worker that starts for a task 30-50 ms."""
    if name == "__version__":
        from importlib.metadata import version

        return version("cloudprofiler")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Channel", "ChannelStats", "Handler", "sample_level", "take_samples", "ClockReading", "TscFrequency", "clock_read",
    "tsc", "tsc_frequency", "tsc_is_invariant", "tscp", "ClosedError", "CloudProfilerError", "InvalidArgumentError",
    "LogFolderNotFoundError", "LogFolderPermissionError", "PeerRefusedError", "PeerTimeoutError", "UnsupportedError",
    "flush_all", "start", "stop",
    "log_dir", "IncompleteLogWarning", "log_files", "log_metadata", "read_log", "read_log_dir",
    "read_rules_file", "rules", "set_rules",
]
