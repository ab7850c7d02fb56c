"""How the embedded analysis session's JVM starts: from an archive of the classes it loaded before, and with the
compiler its folder's size calls for.

A cold Spark driver spends seconds loading and verifying the same few thousand classes on every start (on a 2-core
VM: 7.7 s to a session, 4.5 s from an archive of them). The JVM maps such an archive (class data sharing,
`-XX:SharedArchiveFile`) instead. A session that finds none asks its JVM to write one as it exits
(`-XX:ArchiveClassesAtExit`: about 10 s after the analysis, while the user goes on); the next start checks it in a
JVM of its own, since a file its writer left cut short (killed while it wrote) makes the JVM that maps it crash,
and moves it in place. The archive is code the JVM runs: it is made and used only in this user's own folder
(ARCHIVE_FOLDER: 0700, not a link, this user's) as a regular file of this user that no other may write.
CLOUDPROFILER_CLASS_ARCHIVE=off leaves it out; the JVM cannot make one where Spark's conf folder holds files
(SPARK_CONF_DIR with a spark-defaults.conf, say: a folder on the class path).

An analysis of a small folder spends its time in Spark's planning and first runs of many short queries, which the
JVM's quick compiler (C1) serves better than its optimizing one (C2) with the profiling C2 needs first; a big
folder's time goes to loops over records, which C2 makes faster. Below QUICK_COMPILER_BYTES of files the JVM keeps
to C1 (QUICK_COMPILER). Settings the caller gives in spark.driver.extraJavaOptions come after these, so
theirs win.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from ..private_files import CACHE_ROOT

ARCHIVE_FOLDER = Path(CACHE_ROOT) / "jvm"
SWITCH = "CLOUDPROFILER_CLASS_ARCHIVE"  # "off": no archive
# below this many bytes of log files the JVM compiles with C1 only: measured 2026-12-02 on a 2-core VM, the
# demo's folder (52 MB) reported in 22 s against 30 s, 10 M records (155 MB) in 22 s against 28 s, 100 M records
# (1.5 GB) in 64.7 s against 65.0 s
QUICK_COMPILER_BYTES = 1 << 30
# C1 alone reserves 48 MB for compiled code, which a long session of many queries fills (the JVM then stops
# compiling and fails method handles): the tiered JVM's 240 MB
QUICK_COMPILER = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # an archive the JVM cannot use is left aside without a word
CHECK_TIMEOUT_S = 60


def folder_bytes(path: "str | None") -> "int | None":
    """The bytes of the files under a local folder (links not followed), None for another file system's."""
    if path is None or not os.path.isdir(path):
        return None
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def options(files_bytes: "int | None") -> "tuple[list[str], Path | None]":
    """The driver JVM's options for an analysis of `files_bytes` of log files (None: unknown), and the file its JVM
    writes its classes to as it exits where no archive is there yet (None otherwise): `started` then names the
    JVM beside it. None of them where this process's JVM runs already (PySpark starts one per process)."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        return [], None
    quick = files_bytes is not None and files_bytes < QUICK_COMPILER_BYTES
    compiler = QUICK_COMPILER if quick else []
    if os.environ.get(SWITCH, "").strip().lower() == "off":
        return compiler, None
    try:
        archived, part = _archive_options()
    except Exception as exc:  # the archive only saves time: the session starts without it
        print(f"cloudprofiler: no class archive: {exc}", file=sys.stderr)
        return compiler, None
    return [*archived, *compiler], part


def _archive_options() -> "tuple[list[str], Path | None]":
    from pyspark.find_spark_home import _find_spark_home

    spark_home = Path(_find_spark_home())
    if not _classes_archivable(spark_home):
        return [], None
    folder = _own_folder(ARCHIVE_FOLDER.expanduser())
    if folder is None or any(c.isspace() or c in "\"'" for c in str(folder)):
        return [], None
    key = _key(spark_home)
    archive = folder / f"spark-{key}.jsa"
    _promote(folder, key, archive)
    if _usable(archive):
        return [f"-XX:SharedArchiveFile={archive}", *QUIET], None
    part = folder / f"spark-{key}-{secrets.token_hex(6)}.part"
    return [f"-XX:ArchiveClassesAtExit={part}", *QUIET], part


def started(part: "Path | None", spark) -> None:
    """Names the JVM of `spark` (its pid, class path and home) that writes `part` as it exits, for the next start
    to check."""
    if part is None:
        return
    from pyspark import SparkContext

    try:
        system = spark.sparkContext._jvm.System
        text = (f"{SparkContext._gateway.proc.pid}\n{system.getProperty('java.home')}\n"
                f"{system.getProperty('java.class.path')}\n")
        fd = os.open(_sidecar(part), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
    except Exception as exc:  # its part is removed once an hour old
        print(f"cloudprofiler: no class archive for the next analysis: {exc}", file=sys.stderr)


def _sidecar(part: Path) -> Path:
    return part.with_suffix(".jvm")


def _own_folder(folder: Path) -> "Path | None":
    """`folder`, made 0700 where missing; None (saying why) where it is a link, another user's or open to others."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        st = os.lstat(folder)
    except OSError as exc:
        print(f"cloudprofiler: no class archive: {exc}", file=sys.stderr)
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        print(f"cloudprofiler: no class archive: {folder} is not a folder of this user's only (mode "
              f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}, a link: {stat.S_ISLNK(st.st_mode)})",
              file=sys.stderr)
        return None
    return folder


def _usable(path: Path) -> bool:
    """A regular file (not a link) of this user's that no other user may write."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _classes_archivable(spark_home: Path) -> bool:
    """Whether the JVM can archive the driver's classes: it archives none where a folder on its class path holds
    files, and Spark's launcher puts its conf folder there (SPARK_CONF_DIR, else conf/ of Spark's home, which
    PySpark's package does not have)."""
    conf = Path(os.environ.get("SPARK_CONF_DIR") or spark_home / "conf")
    try:
        return not conf.is_dir() or not any(os.scandir(conf))
    except OSError:
        return False


def _key(spark_home: Path) -> str:
    """What the archive is valid for: the java the launcher runs and the driver's class path (Spark's jars and conf
    folder). The JVM checks the archive against its class path itself; the key makes a new one for a new Spark or
    Java rather than keep one it refuses."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java")
    parts = [os.path.realpath(java), os.environ.get("SPARK_CONF_DIR", ""), str(spark_home)]
    for path in [Path(os.path.realpath(java)), *sorted((spark_home / "jars").glob("*.jar"))]:
        try:
            st = path.stat()
            parts.append(f"{path.name} {st.st_size} {st.st_mtime_ns}")
        except OSError:
            parts.append(path.name)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _promote(folder: Path, key: str, archive: Path) -> None:
    """Moves in place an archive a JVM of an earlier start finished (the one whose name its JVM file gives has
    exited and a JVM of the same home and class path maps it: a cut one crashes that JVM, not this process), or
    removes it; archives of other keys go once this key's is in place, and parts whose JVM file is missing (their
    writer never started) once an hour old."""
    for part in folder.glob(f"spark-{key}-*.part"):
        sidecar = _sidecar(part)
        try:
            pid, java_home, class_path = sidecar.read_text().split("\n")[:3]
        except (OSError, ValueError):
            if _age_s(part) > 3600:
                _remove(part)
            continue
        if _writing(int(pid), part):
            continue
        if not archive.exists() and _usable(part) and _loads(part, java_home, class_path):
            try:
                os.chmod(part, 0o400)
                os.replace(part, archive)
            except FileNotFoundError:  # another start moved it meanwhile
                pass
        _remove(part)
        _remove(sidecar)
    if archive.exists():
        for other in folder.glob("spark-*.jsa"):
            if other != archive:
                _remove(other)


def _writing(pid: int, part: Path) -> bool:
    """Whether process `pid` runs with `part` on its command line: the JVM that writes it has not exited."""
    try:
        return str(part).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _loads(part: Path, java_home: str, class_path: str) -> bool:
    java = os.path.join(java_home, "bin", "java")
    try:
        done = subprocess.run([java, f"-XX:SharedArchiveFile={part}", "-Xshare:on", "-XX:ErrorFile=/dev/null",
                               "-XX:-CreateCoredumpOnCrash", *QUIET, "-cp", class_path, "-version"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=CHECK_TIMEOUT_S, cwd=part.parent)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _age_s(path: Path) -> float:
    import time

    try:
        return time.time() - os.lstat(path).st_mtime
    except OSError:
        return 0.0


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
