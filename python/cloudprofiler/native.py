"""Thin glue over the cffi module: load it once, check the version, turn return codes into exceptions."""
from __future__ import annotations

from .errors import error_for

try:
    from ._native import ffi, lib
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "cloudprofiler's native extension is not built: run `make build` (or `pip install .`) first"
    ) from exc

if lib.cp_version() // 100 != lib.CP_VERSION_NUMBER // 100:
    raise ImportError(
        f"libcloudprofiler {ffi.string(lib.cp_version_string()).decode()} (version number {lib.cp_version()}) "
        f"does not match the Python binding, built for version number {lib.CP_VERSION_NUMBER}: "
        "rebuild with `make build`"
    )


def new_error():
    return ffi.new("cp_error *")


def check(rc: int, error) -> None:
    """Raise the exception for a non-zero return code, with the library's message."""
    if rc:
        raise error_for(rc, ffi.string(error.message).decode(errors="replace"))


def call(fn, *args) -> None:
    """Call a library function whose last argument is a cp_error*, raising on failure."""
    error = new_error()
    check(fn(*args, error), error)
