"""`cloudprofiler generate`: run the emitters at a fixed rate until the period ends, then print their totals."""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default="ysb", help="ysb or purchases (default ysb)")
    parser.add_argument("--rate", type=float, default=100_000, help="tuples per second, all emitters (default 1e5)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of emission (default 10)")
    parser.add_argument("--emitters", type=int, default=1, help="emitter processes (default 1)")
    parser.add_argument("--host", default="127.0.0.1", help="address the emitters bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5555, help="emitter i binds port + i (default 5555)")
    parser.add_argument("--distribution", default="uniform", help="key distribution: uniform, normal, zipf")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bucket-tuples", type=int, default=0, help="tuples per bucket (default: 1 ms of tuples)")
    parser.add_argument("--queue-buckets", type=int, default=0, help="queue bound per emitter (default: 1 s)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds without a consumer before stopping")
    parser.add_argument("--serve", action="store_true",
                        help="keep buckets until the reader commits them and serve offset ranges (the Spark source "
                             "format('cloudprofiler-generator')); default: push to a plain consumer")
    parser.add_argument("--json", action="store_true", help="print the totals as JSON")


def run(args: argparse.Namespace) -> int:
    from .emitter import Generator, GeneratorConfig

    config = GeneratorConfig(args.workload, args.rate, args.duration, args.emitters, args.host, args.port,
                             args.distribution, args.seed, args.bucket_tuples, queue_buckets=args.queue_buckets,
                             timeout_s=args.timeout, transport="serve" if args.serve else "push")
    try:
        generator = Generator(config)
    except ValueError as exc:
        print(f"cloudprofiler generate: {exc}", file=sys.stderr)
        return 2
    print(f"emitting {config.rate:,.0f} tuples/s of {config.workload} for {config.duration_s} s from "
          f"{', '.join(config.endpoint(i) for i in range(config.emitters))}", flush=True)
    results = generator.run()
    rows = [{"emitter": r.emitter, "emitted_tuples": r.emitted_tuples, "dropped_tuples": r.dropped_tuples,
             "dropped_buckets": r.dropped_buckets, "achieved_tps": round(r.achieved_tps, 1), "error": r.error}
            for r in results]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print("  ".join(f"{k}={v}" for k, v in row.items()))
    return 1 if any(r.error for r in results) else 0
