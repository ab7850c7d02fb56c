"""`cloudprofiler spark-conf`: the spark-submit flags that enable the plugin."""
from __future__ import annotations

import argparse

from . import spark_conf, submit_flags
from .jar import option_table, options, python_name


def add_arguments(parser) -> None:
    try:
        table = option_table()["options"]
    except FileNotFoundError:  # no plugin jar in this install: `run` says so
        table = []
    for option in table:
        name = python_name(option["key"])
        parser.add_argument("--" + name.replace("_", "-"), dest=name, default=None,
                            help=f"sets {option['key']}: {option['expected']} "
                                 f"(default: {option['default'] or 'empty'})")
    parser.add_argument("--master", default=None,
                        help="the application's master: with a local one (local[N], local-cluster[...]) executors "
                             "read the jar in place (local:) instead of fetching it from the driver")
    parser.add_argument("--channel", action="append", default=[], type=_channel, metavar="NAME=HANDLER[:P,...]",
                        help="handler of a trace channel, e.g. after-join=downsample:64 (repeatable)")


def _channel(text: str) -> tuple:
    name, sep, spec = text.partition("=")
    handler, _, params = spec.partition(":")
    try:
        values = [int(p) for p in params.split(",") if p.strip()]
    except ValueError:
        values = None
    if not sep or not name or not handler or values is None:
        raise argparse.ArgumentTypeError(f"expected NAME=HANDLER[:P,...], got {text!r}")
    return name, (handler, *values)


def run(args) -> int:
    values = {name: getattr(args, name) for name in options()}
    print(submit_flags(spark_conf(dict(args.channel), args.master, **values)))
    return 0
