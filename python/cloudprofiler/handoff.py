"""Hand-off channels: records this process logs into the buffers of another process's library (its inbox), which
writes them into its own files. The writer starts no thread and writes no file of its own (see the public header's
"Hand-off" section); a Spark executor is the inbox of its Python workers."""
from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Iterable, Mapping

from . import _log_call
from .channel import ClosingHandle, Handler, log_chunks, open_with_metadata
from .errors import ClosedError
from .native import call, check, ffi, lib, new_error

BLOCK_RECORDS = lib.CP_HANDOFF_BLOCK_RECORDS
WAIT_MS = lib.CP_HANDOFF_WAIT_MS


def inbox_start(folder: str) -> None:
    """Take the hand-off channels other processes of this host open in `folder` into channels of this process's
    library (started with defaults if it has not started). Raises if an inbox runs already."""
    call(lib.cp_inbox_start, str(folder).encode())


def inbox_folder() -> "str | None":
    """The folder of this process's inbox, or None."""
    path = lib.cp_inbox_dir()
    return ffi.string(path).decode() if path != ffi.NULL else None


@dataclass(frozen=True)
class HandoffStats:
    logged: int  # records published
    taken: int  # of them, taken by the inbox's owner so far
    dropped: int  # records that found no free block (the owner lagged for longer than WAIT_MS)


class Handoff(ClosingHandle):
    """A channel whose records the inbox in `folder` writes: the same `log`, `log_many`, `flush`, `close` and `with`
    as `Channel`. `handler` None: the owner's rules choose it by name. Returns once the owner has mapped its shared
    memory; raises `LogFolderNotFoundError` (a FileNotFoundError) when no live owner runs an inbox there,
    `PeerRefusedError` when the owner refused it (its log says why), `PeerTimeoutError` when it did not take it
    within WAIT_MS. `path`: the file in the inbox that names the memory ("/proc/<pid>/fd/<fd>")."""

    KIND = "hand-off channel"

    def __init__(self, folder: str, name: str, handler: "str | int | Handler | None" = "buffered",
                 params: Iterable[int] = (), metadata: Mapping[str, str] | None = None):
        self.name = str(name)
        params = [int(p) for p in params]
        c_handler = ffi.new("cp_handler *", Handler.parse(handler)) if handler is not None else ffi.NULL
        c_params = ffi.new("int64_t[]", params or [0])
        self._handle = open_with_metadata(metadata, lambda *meta: lib.cp_handoff_open(
            str(folder).encode(), self.name.encode(), c_handler, c_params, len(params), *meta))
        self._closed = False
        self.path = ffi.string(lib.cp_handoff_path(self._handle)).decode()
        self.log = _log_call.bind_handoff(int(ffi.cast("uintptr_t", self._handle)))

    def log(self, tuple_id: int) -> None:  # replaced per instance by a C function bound to the handle
        lib.cp_handoff_log(self._handle, tuple_id)

    def log_many(self, ids) -> None:
        """Log every id of an integer array (numpy, pyarrow, or a sequence): one TSC per record."""
        self._check_open()
        log_chunks(lib.cp_handoff_log_many, self._handle, ids)

    def log_batch(self, ids) -> None:
        """Log every id of an integer array with one TSC, read once (Channel.log_batch)."""
        self._check_open()
        log_chunks(lib.cp_handoff_log_batch, self._handle, ids)

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until the owner has taken every record logged so far (PeerTimeoutError after `timeout_s`)."""
        self._check_open()
        error = new_error()
        check(lib.cp_handoff_flush(self._handle, int(timeout_s * 1000), error), error)

    @property
    def stats(self) -> HandoffStats:
        self._check_open()
        out = ffi.new("cp_handoff_stats *")
        lib.cp_handoff_stats_get(self._handle, out)
        return HandoffStats(out.logged, out.taken, out.dropped)

    def close(self) -> None:
        """Hand the last records over (the owner takes them within milliseconds); closing twice raises."""
        self._check_open()
        self._closed = True
        self.log = self._closed_log
        lib.cp_handoff_close(self._handle)

    def _closed_log(self, tuple_id: int) -> None:
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(errno.EBADF, f"hand-off channel {self.name!r} is closed")

    def _release(self) -> None:
        lib.cp_handoff_close(self._handle)

    def __repr__(self) -> str:
        return f"<Handoff {self.name!r} {'closed' if self._closed else 'open'} {self.path}>"
