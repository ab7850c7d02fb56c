"""`cloudprofiler bench handlers`: ns per call of every handler from C (native driver) and from Python."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HANDLERS = [("null", ()), ("spc", (1_000_000,)), ("mpc", (1_000_000,)), ("buffered", ()), ("xoy", (2, 1024)),
            ("downsample", (64,)), ("firstlast", ()), ("identity", ())]


def add_arguments(parser) -> None:
    parser.add_argument("--iterations", type=int, default=20_000_000, help="calls per handler from C (default 20M)")
    parser.add_argument("--python-iterations", type=int, default=1_000_000, help="calls per handler from Python")
    parser.add_argument("--vectorized-size", type=int, default=10_000_000, help="ids per log_many call")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")


def _driver() -> Path:
    here = Path(__file__).resolve().parents[2]  # the package: cloudprofiler/harness/bench/handlers.py
    for candidate in (here / "_lib" / "cp_bench", here.parent.parent / "native" / "build" / "cp_bench"):
        if candidate.exists():
            return candidate
    raise SystemExit("cp_bench is not built: run `make build`")


def c_rows(iterations: int, folder: str) -> list[dict]:
    out = subprocess.run([str(_driver()), "--json", "--iterations", str(iterations), "--dir", folder],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def python_rows(iterations: int, vector_size: int) -> list[dict]:
    import numpy as np

    import cloudprofiler as cp

    rows = []
    ids = np.arange(vector_size, dtype=np.int64)
    for handler, params in HANDLERS:
        n = iterations // 10 if handler == "identity" else iterations
        with cp.Channel("bench-py", handler, params) as ch:
            log = ch.log
            for i in range(1000):
                log(i)
            t0 = time.perf_counter()
            for i in range(n):
                log(i)
            ns = (time.perf_counter() - t0) * 1e9 / n
        rows.append({"handler": handler, "caller": "python", "tsc_read": "ordered", "ns_per_call": ns,
                     "mrec_per_s": 1e3 / ns})
        with cp.Channel("bench-py-vec", handler, params) as ch:
            size = vector_size // 10 if handler == "identity" else vector_size
            ch.log_many(ids[:1000])
            t0 = time.perf_counter()
            ch.log_many(ids[:size])
            ns = (time.perf_counter() - t0) * 1e9 / size
        rows.append({"handler": handler, "caller": "python-vectorized", "tsc_read": "ordered", "ns_per_call": ns,
                     "mrec_per_s": 1e3 / ns})
    return rows


def run(args) -> int:
    import cloudprofiler as cp

    folder = tempfile.mkdtemp(prefix="cp-bench-")
    try:
        rows = c_rows(args.iterations, folder)
        cp.start(folder)
        rows += python_rows(args.python_iterations, args.vectorized_size)
        cp.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from ...console import print_table

    print_table([r for r in rows if "ns_per_call" in r],
                [("handler", "handler", ""), ("caller", "caller", ""), ("tsc_read", "tsc read", ""),
                 ("ns_per_call", "ns/call", ".2f"),
                 ("mrec_per_s", "M rec/s", ".2f")])
    for r in rows:
        if "compression_ratio" in r:
            print(f"\nbuffered + ZSTD to disk (one compression thread): {r['sustained_mrec_per_s']:.2f} M records/s "
                  f"sustained, compression ratio {r['compression_ratio']:.2f}")
    return 0
