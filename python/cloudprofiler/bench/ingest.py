"""`cloudprofiler bench ingest`: the generator's own maximum sustainable rate into a plain consumer on loopback.

The Spark rows (YSB fed by the cloudprofiler source next to Spark's `rate` source) print '-' until the
streaming source lands; the JSON keys are present with null so consumers of the output do not change.
"""
from __future__ import annotations

import argparse
import json

GOAL_GENERATOR_TPS = 20e6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short steps and a coarse tolerance")
    parser.add_argument("--emitters", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    from cloudprofiler.bench.table import print_table
    from cloudprofiler.generator.emitter import GeneratorConfig
    from cloudprofiler.generator.maxtput import consumer_trial, search

    step_s, tolerance = (1.0, 0.25) if args.quick else (2.0, 0.05)
    progress = (lambda s: None) if args.json else (
        lambda s: print(f"  generator at {s.rate:,.0f} tuples/s: {'sustained' if s.sustainable else 'not sustained'}",
                        flush=True))
    result = search(consumer_trial(GeneratorConfig(emitters=args.emitters), step_s, min(0.5, step_s / 3)),
                    start=4e6, tolerance=tolerance, progress=progress)
    figures = {"generator_max_tps": result.max_sustainable_tps, "ysb_sustainable_tps_ours": None,
               "ysb_sustainable_tps_rate_source": None}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    rows = [{"what": "generator -> plain consumer (loopback)", "tps": figures["generator_max_tps"],
             "goal": GOAL_GENERATOR_TPS},
            {"what": "YSB on Spark, cloudprofiler source", "tps": None, "goal": 4.7e6},
            {"what": "YSB on Spark, rate source", "tps": None, "goal": None}]
    print_table(rows, [("what", "measurement", "s"), ("tps", "max sustainable tuples/s", ",.0f"),
                       ("goal", "goal", ",.0f")])
    return 0
