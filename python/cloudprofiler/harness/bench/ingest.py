"""`cloudprofiler bench ingest`: maximum sustainable rates, searched in one run on this machine.

- the generator into a plain consumer on loopback (the generator's own limit);
- Spark ingestion through the cloudprofiler source (source straight into a noop sink);
- the YSB pipeline fed by the cloudprofiler source, next to the same pipeline fed by Spark's `rate` source.
Spark runs in local mode with as many cores as the machine has; the generator shares those cores.
"""
from __future__ import annotations

import argparse
import json
import os

GOAL_GENERATOR_TPS = 20e6
GOAL_SPARK_INGEST_TPS = 4.7e6  # the paper's Spark ingest on seven cloud nodes
GOAL_SOURCE_VS_RATE = 0.8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short steps and a coarse tolerance")
    parser.add_argument("--emitters", type=int, default=1, help="emitters for the generator-only search")
    parser.add_argument("--no-spark", action="store_true", help="only the generator into a plain consumer")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    from cloudprofiler.console import print_table
    from cloudprofiler.harness.generator.emitter import GeneratorConfig
    from cloudprofiler.harness.maxtput import consumer_trial, search

    step_s, tolerance = (1.0, 0.25) if args.quick else (2.0, 0.05)
    spark_step_s, spark_tolerance = (6.0, 0.25) if args.quick else (10.0, 0.1)

    def progress(label):
        if args.json:
            return lambda s: None
        return lambda s: print(f"  {label} at {s.rate:,.0f} tuples/s: "
                               f"{'sustained' if s.sustainable else 'not sustained'}"
                               + (f" ({s.error})" if s.error else ""), flush=True)

    figures = {"generator_max_tps": search(
        consumer_trial(GeneratorConfig(emitters=args.emitters), step_s, min(0.5, step_s / 3)), start=4e6,
        tolerance=tolerance, progress=progress("generator")).max_sustainable_tps,
        "spark_ingest_tps_ours": None, "ysb_sustainable_tps_ours": None, "ysb_sustainable_tps_rate_source": None}
    if not args.no_spark:
        from cloudprofiler.harness.trial import benchmark_session, generator_trial, rate_source_trial

        cores = os.cpu_count() or 2
        spark = benchmark_session(f"local[{cores}]")
        ours = GeneratorConfig(emitters=cores, timeout_s=30)
        warmup = spark_step_s / 3
        for key, trial, start in (
                ("spark_ingest_tps_ours", generator_trial(spark, "ingest", ours, spark_step_s, warmup), 1e6),
                ("ysb_sustainable_tps_ours", generator_trial(spark, "ysb", ours, spark_step_s, warmup), 2e5),
                ("ysb_sustainable_tps_rate_source",
                 rate_source_trial(spark, "ysb", spark_step_s, warmup, partitions=cores), 2e5)):
            figures[key] = search(trial, start=start, tolerance=spark_tolerance,
                                  progress=progress(key)).max_sustainable_tps
        spark.stop()
    ratio = (figures["ysb_sustainable_tps_ours"] / figures["ysb_sustainable_tps_rate_source"]
             if figures["ysb_sustainable_tps_ours"] and figures["ysb_sustainable_tps_rate_source"] else None)
    figures["ysb_ours_vs_rate_source"] = ratio
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    def rate(value):
        return None if value is None else f"{value:,.0f}"

    rows = [{"what": "generator -> plain consumer (loopback)", "value": rate(figures["generator_max_tps"]),
             "goal": rate(GOAL_GENERATOR_TPS)},
            {"what": "Spark ingest, cloudprofiler source", "value": rate(figures["spark_ingest_tps_ours"]),
             "goal": rate(GOAL_SPARK_INGEST_TPS)},
            {"what": "YSB on Spark, cloudprofiler source", "value": rate(figures["ysb_sustainable_tps_ours"]),
             "goal": ""},
            {"what": "YSB on Spark, rate source", "value": rate(figures["ysb_sustainable_tps_rate_source"]),
             "goal": ""},
            {"what": "YSB: cloudprofiler source / rate source", "value": None if ratio is None else f"{ratio:.2f}",
             "goal": f">= {GOAL_SOURCE_VS_RATE}"}]
    print_table(rows, [("what", "measurement", "s"), ("value", "max sustainable tuples/s", "s"), ("goal", "goal", "s")])
    return 0
