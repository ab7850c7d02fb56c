"""Files this user writes on a host that others share, as the plugin's Java (io.cloudprofiler.PrivateFiles) writes
them: made under a random name beside their target, exclusively and never through a link, then renamed over it."""
from __future__ import annotations

import os
import secrets
from typing import BinaryIO, Callable

# this user's cache of what the tools make once and reuse (TPC-H data, the analysis JVM's class archive)
CACHE_ROOT = "~/.cache/cloudprofiler"


def replace_privately(path: "str | os.PathLike", write: Callable[[BinaryIO], None], mode: int = 0o600) -> None:
    """Writes `path` whole with `write(file)`: into a file of a random name beside it, created exclusively with
    `mode` (this user's only by default), then renamed over `path` in one step, so that a reader finds the old file
    or the new one whole, never a part. The file made aside goes again on any failure."""
    folder, name = os.path.split(os.fspath(path))
    aside = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.replace(aside, path)
    except BaseException:
        os.unlink(aside)
        raise
