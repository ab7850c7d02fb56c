"""`cloudprofiler bench handlers`: ns per call of every handler from C (native driver) and from Python, and from C
again with channels opened by rules beside channels opened by handler (alternating runs)."""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from . import native_program

HANDLERS = [("null", ()), ("spc", (1_000_000,)), ("mpc", (1_000_000,)), ("buffered", ()), ("xoy", (2, 1024)),
            ("downsample", (64,)), ("firstlast", ()), ("identity", ())]


def add_arguments(parser) -> None:
    parser.add_argument("--iterations", type=int, default=20_000_000, help="calls per handler from C (default 20M)")
    parser.add_argument("--python-iterations", type=int, default=1_000_000, help="calls per handler from Python")
    parser.add_argument("--vectorized-size", type=int, default=10_000_000, help="ids per log_many call")
    parser.add_argument("--rules-runs", type=int, default=3,
                        help="runs of each side, alternating, of C channels opened by rules (a rules file followed) "
                             "and opened by handler (default 3; 0 skips it)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")


def c_rows(iterations: int, folder: str, *options: str, env: "dict | None" = None) -> list[dict]:
    out = subprocess.run([str(native_program("cp_bench")), "--json", "--iterations", str(iterations), "--dir", folder,
                          *options], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)


def rules_rows(iterations: int, runs: int, folder: str) -> "tuple[list[dict], dict]":
    """Per handler, ns per call from C of a channel opened by handler and of one opened by rules in a process that
    follows a rules file (CLOUDPROFILER_RULES, polled by the library's timer thread), in alternating runs; and the
    cost order of the runs opened by handler."""
    rules_file = Path(folder) / "bench.rules"
    rules_file.write_text("other=null\n")
    followed = {**os.environ, "CLOUDPROFILER_RULES": str(rules_file)}
    times: dict[str, dict[str, list[float]]] = {}
    for run in range(runs):
        for opened, env in (("direct", None), ("rules", followed)):
            for row in c_rows(iterations, f"{folder}/{opened}-{run}", "--open", opened, env=env):
                times.setdefault(row["handler"], {"direct": [], "rules": []})[opened].append(row["ns_per_call"])
    rows = [{"handler": handler, "caller": "c", **compared(sides["direct"], sides["rules"])}
            for handler, sides in times.items() if handler != "tsc-read"]
    return rows, cost_order({handler: sides["direct"] for handler, sides in times.items()})


# What each handler does per call orders their costs: nothing, buffering a record, writing it through.
COST_ORDER = ("null", "buffered", "identity")


def cost_order(runs: "dict[str, list[float]]", order: "tuple[str, ...]" = COST_ORDER) -> dict:
    """Whether the handlers' ns per call (each a list of runs) rise in `order`, judged pair by pair against the runs'
    spread (`compared`): "holds" when each is slower than the one before beyond the noise, "does not hold" when one
    is faster beyond it, else "within noise"."""
    verdicts = [compared(runs[a], runs[b])["verdict"] for a, b in zip(order, order[1:])]
    verdict = ("does not hold" if "faster" in verdicts else "holds" if set(verdicts) == {"slower"}
               else "within noise")
    return {"order": " < ".join(order), "medians_ns": [statistics.median(runs[h]) for h in order],
            "pairs": verdicts, "verdict": verdict}


def compared(direct: list[float], by_rules: list[float]) -> dict:
    """The medians of two sides' ns per call, their difference, and whether it is within the noise: the larger
    of the two sides' spreads (slowest minus fastest run)."""
    noise = max(max(direct) - min(direct), max(by_rules) - min(by_rules))
    difference = statistics.median(by_rules) - statistics.median(direct)
    verdict = "within noise" if abs(difference) <= noise else "slower" if difference > 0 else "faster"
    return {"direct_ns": statistics.median(direct), "rules_ns": statistics.median(by_rules),
            "direct_runs_ns": direct, "rules_runs_ns": by_rules, "difference_ns": difference, "noise_ns": noise,
            "verdict": verdict}


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

    if args.rules_runs == 1 or args.rules_runs < 0:
        raise SystemExit(f"--rules-runs {args.rules_runs}: expected 0 (skip) or at least 2, so that each side's "
                         "spread can be measured")
    folder = tempfile.mkdtemp(prefix="cp-bench-")
    try:
        rows = c_rows(args.iterations, folder)
        cp.start(folder)
        rows += python_rows(args.python_iterations, args.vectorized_size)
        cp.stop()
        by_rules, order = rules_rows(args.iterations, args.rules_runs, folder) if args.rules_runs else ([], None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps(rows + by_rules + ([order] if order else []), indent=1))
        return 0
    from ...console import print_table

    print_table([r for r in rows if "ns_per_call" in r],
                [("handler", "handler", ""), ("caller", "caller", ""), ("tsc_read", "tsc read", ""),
                 ("ns_per_call", "ns/call", ".2f"),
                 ("mrec_per_s", "M rec/s", ".2f")])
    if by_rules:
        print(f"\nC, opened by handler or by rules (a rules file followed): median of {args.rules_runs} alternating "
              "runs each; noise = the larger spread of a side")
        print_table(by_rules, [("handler", "handler", ""), ("direct_ns", "by handler ns/call", ".2f"),
                               ("rules_ns", "by rules ns/call", ".2f"), ("difference_ns", "difference", "+.2f"),
                               ("noise_ns", "noise", ".2f"), ("verdict", "", "")])
    if order:
        medians = ", ".join(f"{h} {m:.2f}" for h, m in zip(COST_ORDER, order["medians_ns"]))
        print(f"\ncost order {order['order']} (C, by handler, {args.rules_runs} runs each): {order['verdict']} "
              f"({medians} ns/call; pairs: {', '.join(order['pairs'])})")
    for r in rows:
        if "compression_ratio" in r:
            print(f"\nbuffered + ZSTD to disk (one compression thread): {r['sustained_mrec_per_s']:.2f} M records/s "
                  f"sustained, compression ratio {r['compression_ratio']:.2f}")
    return 0
