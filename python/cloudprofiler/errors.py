"""The one place that turns a native error code into a Python exception."""
from __future__ import annotations

import errno


class CloudProfilerError(Exception):
    """A failure reported by libcloudprofiler; `code` is the errno value, the message is the library's."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class InvalidArgumentError(CloudProfilerError, ValueError):
    """A bad value: unknown handler, parameter out of range, bad option."""


class ClosedError(CloudProfilerError):
    """The channel is closed (or the handle is not a channel)."""


class LogFolderPermissionError(CloudProfilerError, PermissionError):
    """The log folder or file cannot be written."""


class LogFolderNotFoundError(CloudProfilerError, FileNotFoundError):
    """A part of the log folder's path does not exist and cannot be created."""


class PeerTimeoutError(CloudProfilerError, TimeoutError):
    """A network peer (a probe responder) did not answer in time."""


class PeerRefusedError(CloudProfilerError, ConnectionRefusedError):
    """A network peer's port refused the probes: no process listens there (any more)."""


class UnsupportedError(CloudProfilerError):
    """The platform or build lacks what was asked for (e.g. no invariant TSC)."""


_BY_CODE = {
    errno.EINVAL: InvalidArgumentError,
    errno.EBADF: ClosedError,
    errno.EACCES: LogFolderPermissionError,
    errno.EPERM: LogFolderPermissionError,
    errno.EROFS: LogFolderPermissionError,
    errno.ENOENT: LogFolderNotFoundError,
    errno.ENOTDIR: LogFolderNotFoundError,
    errno.ENOTSUP: UnsupportedError,
    errno.ETIMEDOUT: PeerTimeoutError,
    errno.ECONNREFUSED: PeerRefusedError,
}


def error_for(code: int, message: str) -> CloudProfilerError:
    return _BY_CODE.get(code, CloudProfilerError)(code, message or errno.errorcode.get(code, str(code)))


class NotAnApplicationError(CloudProfilerError, ValueError):
    """A path that holds no application's logs: missing, empty, or without any log file or driver table."""

    def __init__(self, path: str, reason: str):
        super().__init__(errno.EINVAL, f"{path} is not the log folder of an application ({reason}); expected "
                                       "<logDir>/<application id> as spark.cloudprofiler.logDir collects it")
        self.path = path


class UnknownChannelError(CloudProfilerError, ValueError):
    """A channel name that no log file of the application has."""

    def __init__(self, channel: str, known: "list[str]", kind: str = "", note: str = ""):
        kind = kind + " " if kind else ""
        super().__init__(errno.EINVAL, f"no {kind}channel {channel!r} in this application{note}; its {kind}"
                                       f"channels: {', '.join(sorted(known)) or 'none'}")
        self.channel = channel
