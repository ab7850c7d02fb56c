"""Channels: named streams of (tuple id, TSC) records of this process."""
from __future__ import annotations

import enum
import errno
import warnings
from dataclasses import dataclass
from typing import Iterable, Mapping

from .errors import InvalidArgumentError
from . import _log_call
from .native import call, check, ffi, lib


class Handler(enum.IntEnum):
    """What a channel makes of a record (the paper's handlers, section 5.1)."""

    NULL = lib.CP_HANDLER_NULL
    IDENTITY = lib.CP_HANDLER_IDENTITY
    BUFFERED = lib.CP_HANDLER_BUFFERED
    SPC = lib.CP_HANDLER_SPC
    MPC = lib.CP_HANDLER_MPC
    DOWNSAMPLE = lib.CP_HANDLER_DOWNSAMPLE
    XOY = lib.CP_HANDLER_XOY
    FIRSTLAST = lib.CP_HANDLER_FIRSTLAST
    RET_START = lib.CP_HANDLER_RET_START
    RET_END = lib.CP_HANDLER_RET_END

    @property
    def param_count(self) -> int:
        return lib.cp_handler_param_count(self)

    def check(self, params: Iterable[int]) -> None:
        """Raise InvalidArgumentError, naming the bad value, unless a channel would open with these parameters."""
        params = [int(p) for p in params]
        call(lib.cp_handler_check, self, ffi.new("int64_t[]", params or [0]), len(params))

    @classmethod
    def parse(cls, value: "str | int | Handler") -> "Handler":
        if isinstance(value, Handler):
            return value
        if isinstance(value, str):
            out = ffi.new("cp_handler *")
            call(lib.cp_handler_from_name, value.strip().lower().encode(), out)
            return cls(out[0])
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(h.name.lower() for h in cls)
        raise InvalidArgumentError(errno.EINVAL, f"unknown handler {value!r}: expected one of {names}")


@dataclass(frozen=True)
class ChannelStats:
    logged: int
    kept: int
    written: int
    dropped: int
    after_close: int
    bytes_written: int


@dataclass(frozen=True)
class RetInfo:
    port: int  # ret_start: where acknowledgements arrive
    ack_path: "str | None"  # ret_start: the "<name>.ack" file (tuple id, TSC of arrival)
    rejected: int  # ret_start: datagrams that were not acknowledgements of this key
    send_failures: int  # ret_end: acknowledgements that could not be sent
    overflows: int  # ret_start: acknowledgements the kernel dropped (receive buffer full)


def log_chunks(log, handle, ids) -> None:
    """`log(handle, ids, n)` (cp_log_many and the like) for each contiguous chunk of `ids`."""
    for chunk in _as_int64_buffer(ids):
        if chunk.size:
            log(handle, ffi.from_buffer("int64_t[]", chunk), chunk.size)


def arrow_integer_dtype(type_):
    """numpy's dtype for the values of an Arrow integer type, byte for byte (an array's buffers read or made without
    pyarrow's conversions, which import pandas)."""
    import numpy as np
    import pyarrow as pa

    return np.dtype(("i" if pa.types.is_signed_integer(type_) else "u") + str(type_.bit_width // 8))


def _arrow_integers(ids, np):
    """A numpy view of an Arrow integer array without nulls, on its own buffer. Not `to_numpy`: pyarrow's conversion
    imports pandas (0.25-0.3 s), which a Python worker that starts for a task would pay at its first trace."""
    dtype = arrow_integer_dtype(ids.type)
    if not len(ids):
        return np.empty(0, dtype)
    return np.frombuffer(ids.buffers()[1], dtype, len(ids), ids.offset * dtype.itemsize)


def _as_int64_buffer(ids):
    """A contiguous int64 numpy view of `ids` without per-element Python work for numpy and pyarrow input."""
    import numpy as np

    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover
        pa = None
    if pa is not None and isinstance(ids, pa.ChunkedArray):
        return [_as_int64_buffer(chunk)[0] for chunk in ids.chunks]
    if pa is not None and isinstance(ids, pa.Array):
        if not pa.types.is_integer(ids.type):
            raise InvalidArgumentError(errno.EINVAL, f"log_many needs integer ids, got an Arrow array of {ids.type}")
        if ids.null_count:
            raise InvalidArgumentError(errno.EINVAL, f"log_many got {ids.null_count} null id(s)")
        ids = _arrow_integers(ids, np)
    array = np.asarray(ids)
    if array.dtype.kind not in "iu" and array.size:
        raise InvalidArgumentError(errno.EINVAL, f"log_many needs integer ids, got dtype {array.dtype}")
    if array.dtype.kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
        raise InvalidArgumentError(errno.EINVAL, "log_many got an id above the int64 range")
    return [np.ascontiguousarray(array.reshape(-1), dtype=np.int64)]


def open_with_metadata(metadata: "Mapping[str, str] | None", open_handle):
    """The handle `open_handle(keys, values, n, error)` returns for these metadata pairs as C strings; raises the
    library's error when it returns NULL."""
    metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
    keys = [ffi.new("char[]", k.encode()) for k in metadata]
    values = [ffi.new("char[]", v.encode()) for v in metadata.values()]
    error = ffi.new("cp_error *")
    handle = open_handle(ffi.new("char *[]", keys or [ffi.NULL]), ffi.new("char *[]", values or [ffi.NULL]),
                         len(metadata), error)
    if handle == ffi.NULL:
        check(error.code or errno.EIO, error)
    return handle


class ClosingHandle:
    """`with`, `closed`, and a warning when a handle still open is garbage-collected (then closed with
    `_release`, the library's close without its checks). `KIND` names the handle in the warning."""

    KIND = "channel"
    name: str
    _closed: bool

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if not self._closed:
            self.close()

    def __del__(self):
        if getattr(self, "_closed", True) is False:
            warnings.warn(f"{self.KIND} {self.name!r} was not closed; closing it now", ResourceWarning, stacklevel=2)
            self._closed = True
            self._release()


class Channel(ClosingHandle):
    """A channel of this process; log ids with `log` or `log_many`, then `close` (or use `with`)."""

    def __init__(
        self,
        name: str,
        handler: "str | int | Handler" = "buffered",
        params: Iterable[int] = (),
        metadata: Mapping[str, str] | None = None,
    ):
        handler = Handler.parse(handler)
        params = [int(p) for p in params]
        c_params = ffi.new("int64_t[]", params or [0])
        self._open(name, metadata, lambda *meta: lib.cp_channel_open(str(name).encode(), handler, c_params,
                                                                     len(params), *meta))

    @classmethod
    def by_rules(cls, name: str, metadata: Mapping[str, str] | None = None) -> "Channel":
        """A channel whose handler the rules in force choose by its name (`cloudprofiler.set_rules`), switching to
        a new file whenever new rules give it another handler."""
        channel = cls.__new__(cls)
        channel._open(name, metadata, lambda *meta: lib.cp_channel_open_by_rules(str(name).encode(), *meta))
        return channel

    def _open(self, name, metadata, open_handle) -> None:
        self.name = str(name)
        self._handle = open_with_metadata(metadata, open_handle)
        self._closed = False
        # Per record: one C call that keeps the GIL (see _log_call.c), without a Python frame.
        self.log = _log_call.bind(int(ffi.cast("uintptr_t", self._handle)))

    @property
    def handler(self) -> Handler:
        """The handler it logs with now (opened by rules: the one the rules chose last)."""
        return Handler(lib.cp_channel_handler(self._handle))

    @property
    def path(self) -> str:
        """Its file (opened by rules: the file of its current handler)."""
        return ffi.string(lib.cp_channel_path(self._handle)).decode()

    def log(self, tuple_id: int) -> None:  # replaced per instance by a C function bound to the channel
        lib.cp_log(self._handle, tuple_id)

    def log_many(self, ids) -> None:
        """Log every id of an integer array (numpy, pyarrow, or a sequence): one TSC per record."""
        log_chunks(lib.cp_log_many, self._handle, ids)

    def log_batch(self, ids) -> None:
        """Log every id of an integer array with one TSC, read once (per chunk of a chunked array): records that
        pass the point together, as an Arrow batch does, without a TSC read per record (16-25 ns on a VM)."""
        log_chunks(lib.cp_log_batch, self._handle, ids)

    def log_at(self, tuple_id: int, tsc: int) -> None:
        """Log a record whose TSC was read earlier (`cloudprofiler.tsc()`), as `log` would have logged it then."""
        lib.cp_log_at(self._handle, tuple_id, tsc)

    def parameterize(self, index: int, value: int) -> None:
        call(lib.cp_channel_parameterize, self._handle, index, value)

    def flush(self) -> None:
        call(lib.cp_channel_flush, self._handle)

    def close(self) -> None:
        """Flush and close; closing twice raises ClosedError."""
        self._closed = True
        call(lib.cp_channel_close, self._handle)

    @property
    def stats(self) -> ChannelStats:
        out = ffi.new("cp_channel_stats *")
        call(lib.cp_channel_stats_get, self._handle, out)
        return ChannelStats(out.logged, out.kept, out.written, out.dropped, out.after_close, out.bytes_written)

    @property
    def ret_info(self) -> RetInfo:
        """ret_start / ret_end channels: the listening port, the acknowledgement file and the counts."""
        out = ffi.new("cp_ret_info *")
        call(lib.cp_ret_info_get, self._handle, out)
        ack_path = ffi.string(lib.cp_channel_path(out.ack_channel)).decode() if out.ack_channel != ffi.NULL else None
        return RetInfo(out.port, ack_path, out.rejected, out.send_failures, out.overflows)

    def _release(self) -> None:
        lib.cp_channel_close(self._handle, ffi.NULL)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Channel {self.name!r} {self.handler.name.lower()} {state} {self.path}>"


def take_samples() -> "dict[str, tuple[int, list[int], list[int]]]":
    """The records this process's library kept for the live latency between trace points since the last take, by
    channel name: (the channel's level, tuple ids, TSCs), each record taken once (cp_channel_samples_take). The Spark
    plugin's executor takes its library's; a Python worker that logs to files of its own hands its to its executor
    (cloudprofiler.spark.worker.hand_samples_over)."""
    cap = lib.CP_SAMPLES_PER_CHANNEL * 64
    out, taken = ffi.new("cp_channel_sample[]", cap), {}
    while True:
        n = lib.cp_channel_samples_take(out, cap)
        for s in out[0:n]:
            _, ids, tscs = taken.setdefault(ffi.string(s.name).decode("utf-8", "replace"), (s.level, [], []))
            ids.append(s.id)
            tscs.append(s.tsc)
        if n < cap:
            return taken


def sample_level(tuple_id: int) -> int:
    """The level of a tuple id in the records the library keeps for the live latency between trace points
    (cp_sample_level: the trailing zero bits of splitmix64 of it): a channel at level L keeps the ids of level L or
    more, the same ids at every trace point and executor."""
    return lib.cp_sample_level(tuple_id)
