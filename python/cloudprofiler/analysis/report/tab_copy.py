"""The report's copy in its application's folder, which the Spark UI's Cloudprofiler tab offers for download (the
plugin's ReportDownload): the latest report of the application replaces the one before, in one rename."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ... import tables
from ...private_files import replace_privately
from ..reader import local_path


def place(app_folder: str, page: Path) -> "Path | None":
    """Copies `page` into `app_folder` under the name the tab looks for; returns the copy's path, or None where the
    folder is not this machine's (hdfs:, s3a:...) or not this user's own folder (a link, another user's: the tab
    would not serve it). The copy is this user's only (0600), made under a random name first, never through a link;
    an OSError (a full disk, a read-only folder) is raised."""
    folder = local_path(app_folder)
    try:
        st = None if folder is None else os.stat(folder, follow_symlinks=False)
    except OSError:
        return None
    if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None
    target = Path(folder, tables.files()["report"])
    with open(page, "rb") as src:
        replace_privately(target, lambda out: shutil.copyfileobj(src, out))
    return target
