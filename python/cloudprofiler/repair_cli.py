"""`cloudprofiler repair <file|folder>...`: log files whose process was killed (no footer) made whole Arrow IPC files
up to their last complete batch, so that polars, DuckDB and pyarrow's file and dataset readers open them; the cut is
recorded in their footer (`closed: false`, cut.bytes, cut.batches). Files that have their end are left as they are.

    cloudprofiler repair /tmp/cloudprofiler-logs/app-20261122-0001
"""
from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="path",
                        help="a log file (.arrows) or a folder, whose .arrows files are repaired at every depth")


def run(args) -> int:
    import sys
    from pathlib import Path

    import pyarrow as pa

    from .logs import log_files, repair

    paths = [Path(p) for p in args.paths]
    for p in paths:  # every path checked before any file changes
        if not p.exists():
            print(f"cloudprofiler repair: {p} does not exist", file=sys.stderr)
            return 2
        if p.is_file() and p.suffix != ".arrows":
            print(f"cloudprofiler repair: {p} is not a log file (.arrows)", file=sys.stderr)
            return 2
    files = [f for p in paths for f in (log_files(p) if p.is_dir() else [p])]
    repaired = failed = 0
    for f in files:
        try:
            cut = repair(f)
        except (pa.ArrowInvalid, OSError) as exc:
            print(f"{f}: left as it is: {exc}", file=sys.stderr)
            failed += 1
            continue
        if cut is not None:
            repaired += 1
            print(f"{f}: repaired: {cut['cut.batches']} complete batches kept, {cut['cut.bytes']} bytes after them "
                  "left out")
    print(f"{len(files)} log files: {repaired} repaired, {len(files) - repaired - failed} whole already"
          + (f", {failed} could not be read" if failed else ""))
    return 1 if failed else 0
