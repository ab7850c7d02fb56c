"""`cloudprofiler demo handlers`: log through every handler from several threads, then read the files back (no Spark;
a few seconds)."""
from __future__ import annotations

import tempfile
import threading
import time

HANDLERS = [("buffered", ()), ("identity", ()), ("spc", (1_000_000,)), ("mpc", (1_000_000,)), ("downsample", (100,)),
            ("xoy", (2, 1024)), ("firstlast", ()), ("null", ())]


def add_arguments(parser) -> None:
    parser.add_argument("--records", type=int, default=2_000_000, help="ids per handler (default 2M)")
    parser.add_argument("--threads", type=int, default=4, help="logging threads per channel (default 4)")
    parser.add_argument("--log-dir", default=None, help="log folder (default: a new temporary folder)")


def run(args) -> int:
    import numpy as np

    import cloudprofiler as cp

    if args.records < 1 or args.threads < 1:
        raise SystemExit(f"--records={args.records} and --threads={args.threads} must be at least 1")
    folder = cp.start(args.log_dir or tempfile.mkdtemp(prefix="cloudprofiler-demo-"), compression="zstd")
    freq = cp.tsc_frequency()
    print(f"TSC: {freq.hz / 1e9:.6f} GHz +- {freq.uncertainty_hz / 1e3:.1f} kHz ({freq.source}), "
          f"invariant: {cp.tsc_is_invariant()}")
    per_thread = np.array_split(np.arange(args.records, dtype=np.int64), args.threads)
    rows = []
    for handler, params in HANDLERS:
        ch = cp.Channel(f"demo-{handler}", handler, params)
        t0 = time.perf_counter()
        if handler == "spc":  # single writer by definition
            ch.log_many(np.arange(args.records, dtype=np.int64))
        else:
            workers = [threading.Thread(target=ch.log_many, args=(ids,)) for ids in per_thread]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        ch.close()
        elapsed = time.perf_counter() - t0
        table = cp.read_log(ch.path)
        table.validate(full=True)
        stats = ch.stats
        rows.append({"handler": handler, "logged": stats.logged, "rows": table.num_rows, "dropped": stats.dropped,
                     "bytes": stats.bytes_written, "ns": elapsed * 1e9 / stats.logged, "file": ch.path})
    from ..console import print_table

    print_table(rows, [("handler", "handler", ""), ("logged", "logged", ","), ("rows", "rows in file", ","),
                       ("dropped", "dropped", ","), ("bytes", "bytes", ","), ("ns", "ns/record", ".1f")])
    print(f"\n{len(rows)} Arrow IPC files in {folder} (read them with pyarrow, polars or cloudprofiler.read_log)")
    return 0
