"""The report's copy in its application's folder, which the Spark UI's Cloudprofiler tab offers for download (the
plugin's ReportDownload): the latest report of the application replaces the one before, in one rename."""
from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path
from urllib.parse import urlparse

from ... import tables


def place(app_folder: str, page: Path) -> "Path | None":
    """Copies `page` into `app_folder` under the name the tab looks for; returns the copy's path, or None where the
    folder is not this machine's (hdfs:, s3a:...) or not this user's own folder (a link, another user's: the tab
    would not serve it). The copy is this user's only (0600), made under a random name first, never through a link;
    an OSError (a full disk, a read-only folder) is raised."""
    parsed = urlparse(app_folder)
    if parsed.scheme not in ("", "file"):
        return None
    folder = os.path.expanduser(parsed.path if parsed.scheme else app_folder)
    try:
        st = os.stat(folder, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None
    target = os.path.join(folder, tables.files()["report"])
    aside = os.path.join(folder, f".{tables.files()['report']}.{secrets.token_hex(8)}.tmp")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out, open(page, "rb") as src:
            shutil.copyfileobj(src, out)
        os.replace(aside, target)
    except BaseException:
        os.unlink(aside)
        raise
    return Path(target)
