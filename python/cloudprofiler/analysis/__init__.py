"""The logs of a Spark application as Spark DataFrames, every TSC value on one time axis with its error bound.

    from cloudprofiler.analysis import open_application
    app = open_application("/tmp/my-logs/app-20261123-0001")     # any URI Spark reads; spark=... to bring a session
    app.tasks().orderBy("duration_ns", ascending=False).show()
    app.pipeline(["after-source", "after-join", "sink"]).show()

Without a session an embedded local one starts (`local_session`). Column documentation: the README, "Analysis".
"""
from typing import TYPE_CHECKING

from ..errors import NotAnApplicationError, UnknownChannelError

if TYPE_CHECKING:
    from .application import Application


def open_application(path, spark=None) -> "Application":
    """The application whose logs are in `path` (`<logDir>/<application id>`), read with `spark` (default: the
    embedded local session). A local path that is missing or not a folder raises NotAnApplicationError before any
    session starts."""
    from .application import Application, check_local_folder
    from .reader import local_path

    check_local_folder(str(path))
    if spark is None:
        from .jvm_start import folder_bytes
        from .session import local_session

        spark = local_session(files_bytes=folder_bytes(local_path(str(path))))
    return Application(str(path), spark)


def __getattr__(name: str):
    # Application and local_session load pandas and pyspark: resolved when asked for, so that the command line
    # (which imports this package for its `report` command) stays quick
    if name == "Application":
        from .application import Application

        return Application
    if name == "local_session":
        from .session import local_session

        return local_session
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Application", "NotAnApplicationError", "UnknownChannelError", "local_session", "open_application"]
