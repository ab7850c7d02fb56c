"""`cloudprofiler maxtput`: the highest rate a pipeline sustains, with a table, a JSON/Arrow record and a plot."""
from __future__ import annotations

import argparse
import os

TARGETS = ("consumer", "spark")
SOURCES = ("cloudprofiler", "rate")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="consumer", choices=TARGETS,
                        help="consumer: the generator into a plain consumer (its own limit, or --capacity); "
                             "spark: a Structured Streaming pipeline in a local Spark session")
    parser.add_argument("--pipeline", default="ysb", help="spark: ingest, ysb, aggregation or join (default ysb)")
    parser.add_argument("--source", default="cloudprofiler", choices=SOURCES,
                        help="spark: feed the pipeline from the generator (cloudprofiler) or Spark's rate source")
    parser.add_argument("--master", default="local[2]", help="spark: master URL (default local[2])")
    parser.add_argument("--trace", action="store_true",
                        help="spark: trace points after each operator (per-operator latency in --log-dir)")
    parser.add_argument("--log-dir", default=None, help="spark: where the plugin and trace points write their logs")
    parser.add_argument("--capacity", type=float, default=None,
                        help="make the consumer process at most this many tuples/s (a known limit)")
    parser.add_argument("--workload", default="ysb")
    parser.add_argument("--emitters", type=int, default=1)
    parser.add_argument("--start", type=float, default=100_000, help="first rate tried, tuples/s")
    parser.add_argument("--max-rate", type=float, default=1e9)
    parser.add_argument("--tolerance", type=float, default=0.02, help="relative width of the final bracket")
    parser.add_argument("--step-duration", type=float, default=3.0, help="seconds per rate")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds cut from the start of each step")
    parser.add_argument("--out", default="maxtput", help="directory for maxtput.json, maxtput.arrow, maxtput.svg")


def run(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from .generator.emitter import GeneratorConfig
    from .maxtput import consumer_trial, search

    # Spark's planning and Python workers answer in seconds, not milliseconds: give each request 30 s there.
    template = GeneratorConfig(workload=args.workload, emitters=args.emitters,
                               timeout_s=30.0 if args.target == "spark" else 5.0)
    try:
        template.validate()
        trial = (_spark_trial(args, template) if args.target == "spark"
                 else consumer_trial(template, args.step_duration, args.warmup, args.capacity))
        header = f"{'rate':>12} {'achieved':>12} {'emitted':>10} {'received':>10} {'dropped':>8} {'queue/s':>9} " \
                 f"{'p50 ms':>8} {'p99 ms':>8} {'lat ms/s':>8}  ok"
        print(header, flush=True)
        result = search(trial, args.start, args.tolerance, args.max_rate, progress=_print_step)
    except ValueError as exc:
        print(f"cloudprofiler maxtput: {exc}")
        return 2
    if result.problem:
        print(f"no maximum sustainable rate: {result.problem}")
    else:
        print(f"maximum sustainable rate: {result.max_sustainable_tps:,.0f} tuples/s "
              f"(tolerance {args.tolerance:.0%})")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "maxtput.json"), "w") as f:
        f.write(result.to_json())
    with pa.OSFile(os.path.join(args.out, "maxtput.arrow"), "wb") as sink:
        table = result.to_arrow()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    _plot(result, os.path.join(args.out, "maxtput.svg"))
    print(f"record written to {args.out}/maxtput.json and {args.out}/maxtput.arrow")
    return 1 if result.problem else 0


def _spark_trial(args, template):
    from cloudprofiler.harness.pipelines import pipeline
    from cloudprofiler.harness.trial import benchmark_session, generator_trial, rate_source_trial

    pipeline(args.pipeline)  # a bad name fails here, before Spark starts
    spark = benchmark_session(args.master, args.log_dir)
    if args.source == "rate":
        return rate_source_trial(spark, args.pipeline, args.step_duration, args.warmup, trace=args.trace)
    return generator_trial(spark, args.pipeline, template, args.step_duration, args.warmup, trace=args.trace)


def _print_step(step) -> None:
    print(f"{step.rate:>12,.0f} {step.achieved_tps:>12,.0f} {step.emitted:>10} {step.received:>10} {step.dropped:>8} "
          f"{step.queue_slope_tps:>9.0f} {step.latency_p50_ms:>8.2f} {step.latency_p99_ms:>8.2f} "
          f"{step.latency_slope_ms_per_s:>8.2f}  {'yes' if step.sustainable else 'no'}"
          + (f"  ({step.error})" if step.error else ""), flush=True)


def _plot(result, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib for maxtput.svg)")
        return
    steps = sorted(result.steps, key=lambda s: s.rate)
    fig, ax = plt.subplots()
    ax.plot([s.rate for s in steps], [s.latency_p99_ms for s in steps], "o-", label="latency p99 (ms)")
    ax.plot([s.rate for s in steps], [s.latency_p50_ms for s in steps], "o-", label="latency p50 (ms)")
    ax.axvline(result.max_sustainable_tps, linestyle="--", label="max sustainable")
    ax.set_xlabel("rate (tuples/s)")
    ax.set_yscale("log")
    ax.legend()
    fig.savefig(path)
    print(f"plot written to {path}")
