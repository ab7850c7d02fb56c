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
    parser.add_argument("--channel", action="append", default=[], type=_channel, metavar="NAME=HANDLER[:P...]",
                        help="handler of a trace channel, its parameters separated by ':' as in rules, e.g. "
                             "after-join=downsample:64 or sample=xoy:1:8 (repeatable)")


def _channel(text: str) -> tuple:
    """NAME=HANDLER[:P...], the syntax of a rule (parameters separated by ':')."""
    name, sep, spec = text.partition("=")
    handler, *params = spec.split(":")
    if not sep or not name.strip() or not handler.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=HANDLER[:P...], got {text!r}")
    values = []
    for param in params:
        try:
            values.append(int(param.strip()))
        except ValueError:
            hint = " (parameters are separated by ':', as in rules)" if "," in param else ""
            raise argparse.ArgumentTypeError(f"{text!r}: parameter {param.strip()!r} is not an integer{hint}; "
                                             "expected NAME=HANDLER[:P...]") from None
    return name.strip(), (handler.strip(), *values)


def run(args) -> int:
    import sys

    from ..errors import InvalidArgumentError

    values = {name: getattr(args, name) for name in options()}
    try:
        flags = submit_flags(spark_conf(dict(args.channel), args.master, **values))
    except InvalidArgumentError as exc:  # the driver's check, made here: the message names the key and the value
        print(f"cloudprofiler spark-conf: {exc}", file=sys.stderr)
        return 2
    print(flags)
    return 0
