"""`cloudprofiler bench ingest`: maximum sustainable rates, each searched several times in one run on this machine.

- the generator into a plain consumer on loopback (the generator's own limit);
- Spark ingestion through the cloudprofiler source (source straight into a noop sink);
- the YSB pipeline fed by the cloudprofiler source, next to the same pipeline fed by Spark's `rate` source.
Every side is judged by the same definition (`maxtput.Step.sustainable`). Spark runs in local mode with as many
cores as the machine has; the generator shares those cores. A figure that is no limit (the search's cap was
sustained, or nothing was) is printed as such and the command exits with status 1.
"""
from __future__ import annotations

import argparse
import json
import os

GOAL_GENERATOR_TPS = 20e6
GOAL_SPARK_INGEST_TPS = 4.7e6  # the paper's Spark ingest on seven cloud nodes
GOAL_SOURCE_VS_RATE = 0.8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="short steps, a coarse tolerance and one search each")
    parser.add_argument("--repeats", type=int, default=None, help="searches per figure (default 3, --quick 1)")
    parser.add_argument("--emitters", type=int, default=1, help="emitters for the generator-only search")
    parser.add_argument("--no-spark", action="store_true", help="only the generator into a plain consumer")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    from cloudprofiler.harness.generator.emitter import GeneratorConfig
    from cloudprofiler.harness.maxtput import RepeatedSearch, consumer_trial, search

    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1:
        print(f"cloudprofiler bench ingest: --repeats must be >= 1, got {repeats}")
        return 2
    step_s, tolerance = (1.0, 0.25) if args.quick else (2.0, 0.05)
    spark_step_s, spark_tolerance = (6.0, 0.25) if args.quick else (10.0, 0.1)

    def progress(label):
        if args.json:
            return lambda s: None
        return lambda s: print(f"  {label} at {s.rate:,.0f} tuples/s: achieved {s.achieved_tps:,.0f}, "
                               f"{'sustained' if s.sustainable else 'not sustained'}"
                               + (f" ({s.error})" if s.error else ""), flush=True)

    def repeated(label, trial, start, tol):
        return RepeatedSearch([search(trial, start=start, tolerance=tol, progress=progress(label))
                               for _ in range(repeats)])

    figures = {"generator": repeated("generator", consumer_trial(GeneratorConfig(emitters=args.emitters), step_s,
                                                                 min(0.5, step_s / 3)), 4e6, tolerance)}
    if not args.no_spark:
        from cloudprofiler.harness.trial import benchmark_session, generator_trial, rate_source_trial

        cores = os.cpu_count() or 2
        spark = benchmark_session(f"local[{cores}]")
        ours = GeneratorConfig(emitters=cores, timeout_s=30)
        warmup = spark_step_s / 3
        for key, trial, start in (
                ("spark_ingest_ours", generator_trial(spark, "ingest", ours, spark_step_s, warmup), 1e6),
                ("ysb_ours", generator_trial(spark, "ysb", ours, spark_step_s, warmup), 2e5),
                ("ysb_rate_source", rate_source_trial(spark, "ysb", spark_step_s, warmup, partitions=cores), 2e5)):
            figures[key] = repeated(key, trial, start, spark_tolerance)
        spark.stop()
    return _print(figures, repeats, args.json)


def _print(figures: dict, repeats: int, as_json: bool) -> int:
    from cloudprofiler.console import print_table

    ours, rate_source = figures.get("ysb_ours"), figures.get("ysb_rate_source")
    ratio = (ours.median_tps / rate_source.median_tps
             if ours and rate_source and not ours.problem and not rate_source.problem else None)
    problems = {key: f.problem for key, f in figures.items() if f.problem}
    if as_json:
        print(json.dumps({key: {"median_tps": f.median_tps, "min_tps": f.spread[0], "max_tps": f.spread[1],
                                "runs": [r.max_sustainable_tps for r in f.results], "problem": f.problem}
                          for key, f in figures.items()} | {"ysb_ours_vs_rate_source": ratio}, indent=2))
        return 1 if problems else 0
    labels = {"generator": ("generator -> plain consumer (loopback)", GOAL_GENERATOR_TPS),
              "spark_ingest_ours": ("Spark ingest, cloudprofiler source", GOAL_SPARK_INGEST_TPS),
              "ysb_ours": ("YSB on Spark, cloudprofiler source", None),
              "ysb_rate_source": ("YSB on Spark, rate source", None)}
    rows = []
    for key, figure in figures.items():
        what, goal = labels[key]
        low, high = figure.spread
        rows.append({"what": what, "value": "not a limit" if figure.problem else f"{figure.median_tps:,.0f}",
                     "spread": f"{low:,.0f} - {high:,.0f}", "goal": "" if goal is None else f"{goal:,.0f}"})
    if ours and rate_source:
        rows.append({"what": "YSB: cloudprofiler source / rate source", "spread": "",
                     "value": "not measured" if ratio is None else f"{ratio:.2f}", "goal": f">= {GOAL_SOURCE_VS_RATE}"})
    print_table(rows, [("what", "measurement", "s"), ("value", "max sustainable tuples/s, median", "s"),
                       ("spread", f"min - max of {repeats}", "s"), ("goal", "goal", "s")])
    for key, problem in problems.items():
        print(f"{labels[key][0]}: {problem}")
    return 1 if problems else 0
