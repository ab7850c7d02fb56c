"""The logs of a Spark application as Spark DataFrames, every TSC value on one time axis with its error bound.

    from cloudprofiler.analysis import open_application
    app = open_application("/tmp/my-logs/app-20261123-0001")     # any URI Spark reads; spark=... to bring a session
    app.tasks().orderBy("duration_ns", ascending=False).show()
    app.pipeline(["after-source", "after-join", "sink"]).show()

Without a session an embedded local one starts (`local_session`). Column documentation: the README, "Analysis".
"""
from ..errors import NotAnApplicationError, UnknownChannelError
from .application import Application
from .session import local_session


def open_application(path, spark=None) -> Application:
    """The application whose logs are in `path` (`<logDir>/<application id>`), read with `spark` (default: the
    embedded local session)."""
    return Application(str(path), spark if spark is not None else local_session())


__all__ = ["Application", "NotAnApplicationError", "UnknownChannelError", "local_session", "open_application"]
