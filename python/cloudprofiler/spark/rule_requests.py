"""The rules of a running application from outside it, through its log folder: the client of the driver's
RuleRequests (jvm-plugin). A request is written under another name and renamed to `rules-request.txt` in the
application's folder; the driver looks for it once a second, applies or refuses it, and answers in
`rules-result-<token>.txt`. Nothing listens on a port: only who can write the folder can change the rules."""
from __future__ import annotations

import errno
import os
import time
import uuid

from .. import tables
from ..errors import InvalidArgumentError

REQUEST = "rules-request.txt"  # RuleRequests.REQUEST
DEFAULT_TIMEOUT_S = 10.0


def set_app_rules(app_folder: str, text: str, timeout: float = DEFAULT_TIMEOUT_S) -> int:
    """Replace the rules of the application whose folder (`<logDir>/<app id>`, a path or a Hadoop-compatible URI
    that pyarrow opens) is `app_folder`; returns their new version. A bad rule raises InvalidArgumentError with the
    driver's message naming it (the rules in force stay); no answer within `timeout` raises TimeoutError."""
    kind, rest = _ask(app_folder, "set", text, timeout)
    if kind == "refused":
        raise InvalidArgumentError(errno.EINVAL, rest.strip())
    return int(rest)


def app_rules(app_folder: str, timeout: float = DEFAULT_TIMEOUT_S) -> tuple[int, list[str]]:
    """The version and the rules in force of the running application whose folder is `app_folder`."""
    _, rest = _ask(app_folder, "get", "", timeout)
    version, _, text = rest.partition("\n")
    return int(version), [line for line in text.splitlines() if line]


def check_app_folder(app_folder: str):
    """(file system, path) of an application's folder: a folder that is empty (its application has just started)
    or holds what the plugin writes there (.arrows files, directly or in its hosts' folders, rules requests and
    answers). Anything else raises InvalidArgumentError saying what it is: missing, a file, a log folder holding
    application folders (naming them), or a folder of other files."""
    import pyarrow.fs as pafs

    def bad(what: str) -> InvalidArgumentError:
        return InvalidArgumentError(errno.EINVAL, f"{app_folder} is no application folder (<logDir>/<app id>): "
                                                  f"{what}")

    fs, folder = pafs.FileSystem.from_uri(app_folder if "://" in app_folder else os.path.abspath(app_folder))
    kind = fs.get_file_info(folder).type
    if kind != pafs.FileType.Directory:
        raise bad("it does not exist" if kind == pafs.FileType.NotFound else "it is a file, not a folder")
    entries = fs.get_file_info(pafs.FileSelector(folder))
    for sub in [e for e in entries if e.type == pafs.FileType.Directory]:  # one level down: hosts' or apps' files
        entries += fs.get_file_info(pafs.FileSelector(sub.path))
    files = [e.path[len(folder):].strip("/") for e in entries if e.type == pafs.FileType.File]
    if not entries or any("/" not in f and (f.endswith(".arrows") or f.startswith(("rules-", ".rules-")))
                          for f in files):
        return fs, folder
    # the tables the plugin writes directly in an application's folder: a folder whose sub-folders hold them is a logDir
    app_tables = {t.file for t in tables.tables().values() if t.folder == tables.APPLICATION}
    apps = sorted({f.split("/")[0] for f in files if f.split("/")[-1] in app_tables and "/" in f})
    if apps:
        raise bad(f"it holds application folders ({', '.join(apps[:5])}{', ...' if len(apps) > 5 else ''}): give "
                  f"one of them, e.g. {app_folder.rstrip('/')}/{apps[-1]}")
    if not any(f.endswith(".arrows") for f in files):
        raise bad("it holds no file of the cloudprofiler plugin")
    return fs, folder


def _ask(app_folder: str, kind: str, text: str, timeout: float) -> tuple[str, str]:
    import pyarrow.fs as pafs

    fs, folder = check_app_folder(app_folder)
    token = uuid.uuid4().hex
    request, answer = f"{folder}/{REQUEST}", f"{folder}/rules-result-{token}.txt"
    deadline = time.monotonic() + timeout
    while fs.get_file_info(request).type != pafs.FileType.NotFound:  # another request waits for the driver
        _wait_until(deadline, app_folder, timeout)
    aside, body = f"{folder}/.rules-request-{token}.tmp", f"cloudprofiler-rules-request {token} {kind}\n{text}".encode()
    if isinstance(fs, pafs.LocalFileSystem):  # this user's only from its creation, never through a planted link
        with os.fdopen(os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
            out.write(body)
    else:
        with fs.open_output_stream(aside) as out:
            out.write(body)
    fs.move(aside, request)
    try:
        while fs.get_file_info(answer).type == pafs.FileType.NotFound:
            _wait_until(deadline, app_folder, timeout)
    except TimeoutError:
        _delete_if_ours(fs, request, token)  # a driver that starts reading later must not apply it then
        raise
    with fs.open_input_stream(answer) as f:
        reply = f.read().decode()
    fs.delete_file(answer)
    first, _, rest = reply.partition(" ")
    return first, rest


def _wait_until(deadline: float, app_folder: str, timeout: float) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(errno.ETIMEDOUT, f"no answer from the driver of {app_folder} within {timeout:g} s: the "
                                            "application does not run (any more), or its driver runs without the "
                                            "cloudprofiler plugin")
    time.sleep(0.05)


def _delete_if_ours(fs, request: str, token: str) -> None:
    try:
        with fs.open_input_stream(request) as f:
            ours = f.read(200).decode(errors="replace").split("\n", 1)[0].split(" ")[1:2] == [token]
        if ours:
            fs.delete_file(request)
    except (OSError, IndexError):  # the driver took it meanwhile
        pass
