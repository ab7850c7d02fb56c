"""The driver's checks of the plugin's options, made where the values are given (`cloudprofiler spark-conf`, the
builder helper) before any JVM starts: every spark.cloudprofiler.* key is an option or a trace channel's handler
or parameters (Config.read), each value is of its option's kind (the option table in the jar: Config.json), and
handlers, their parameters and rules pass the native library's own checks (cp_handler_check, cp_rules_check).
A bad value raises InvalidArgumentError with the driver's message: `<key>=<value> is invalid: <why>`."""
from __future__ import annotations

import errno
import os
import re

from ..errors import InvalidArgumentError
from .jar import option_table

PREFIX = "spark.cloudprofiler."
INTEGER = re.compile(r"[+-]?[0-9]+")  # Java's Integer.parseInt / Long.parseLong, less their non-ASCII digits
LONG_MAX = 2**63 - 1


def invalid(key: str, value: str, why: str) -> InvalidArgumentError:
    """The driver's message (Config.invalid)."""
    return InvalidArgumentError(errno.EINVAL, f"{key}={value} is invalid: {why}")


def check_conf(conf: dict) -> None:
    """Check the spark.cloudprofiler.* entries of `conf` (key -> text, as spark_conf makes them) as the driver does
    at start; other keys are left alone. Raises InvalidArgumentError naming the first bad key and value."""
    table = option_table()
    options = {o["key"]: o for o in table["options"]}
    ours = {k: str(v).strip() for k, v in conf.items() if k.startswith(PREFIX)}
    channels = {}  # name -> {"handler": key, "params": key}
    for key, value in ours.items():
        if key in options:
            _check_option(options[key], value)
            continue
        channel = _channel_of(table, key)
        if channel is None:
            near = [k for k in options if k.lower() == key.lower()]
            raise InvalidArgumentError(errno.EINVAL, f"{key} is not an option of cloudprofiler" + (
                f": did you mean {near[0]}?" if near else f": expected one of {', '.join(options)}, or "
                f"{table['channel_handler']} / .params"))
        channels.setdefault(channel[0], {})[channel[1]] = key
    task_handler, task_params = "spark.cloudprofiler.task.handler", "spark.cloudprofiler.task.params"
    check_handler(task_handler, ours.get(task_handler, options[task_handler]["default"]), task_params,
                  ours.get(task_params, ""))
    for keys in channels.values():
        if "handler" not in keys:
            handler_key = keys["params"][: -len("params")] + "handler"
            raise invalid(keys["params"], ours[keys["params"]], f"{handler_key} is not set")
        params_key = keys["handler"][: -len("handler")] + "params"
        check_handler(keys["handler"], ours[keys["handler"]], params_key, ours.get(params_key, ""))


def check_handler(handler_key: str, handler: str, params_key: str, params: str) -> None:
    """A handler and the text of its comma-separated parameters, as the driver checks a channel's
    (Config.HandlerOption.check: the native library's cp_handler_from_name and cp_handler_check)."""
    from ..native import call, ffi, lib

    values = parse_integers(params)
    if values is None:
        raise invalid(params_key, params, "expected comma-separated integers")
    number = ffi.new("cp_handler *")
    try:
        call(lib.cp_handler_from_name, handler.strip().encode(), number)
    except InvalidArgumentError as exc:
        raise invalid(handler_key, handler, str(exc)) from None
    try:
        call(lib.cp_handler_check, number[0], ffi.new("int64_t[]", values or [0]), len(values))
    except InvalidArgumentError as exc:
        raise invalid(params_key, params, str(exc)) from None


def check_rules(key: str, text: str, value: "str | None" = None) -> None:
    """Rules separated by new lines or ';' (spark.cloudprofiler.rules, `config set`), with the native library's
    check of cp_rules_set; the rules in force in this process stay. The message names `value` (default: the text)."""
    from ..native import call, lib

    try:
        call(lib.cp_rules_check, text.replace(";", "\n").encode())
    except InvalidArgumentError as exc:
        raise invalid(key, text if value is None else value, str(exc)) from None


def check_rules_file(key: str, value: str) -> None:
    """spark.cloudprofiler.rules.file where it is a file of this machine (no scheme, or file:): read as the driver
    reads it (JSON, whatever its name) and its rules checked. A path of another file system, or one missing here (it
    may exist where the driver runs), is left to the driver."""
    from urllib.parse import urlparse

    from ..rules import read_rules_file

    parsed = urlparse(value)
    path = parsed.path if parsed.scheme == "file" else value
    if parsed.scheme not in ("", "file") or not value or not os.path.isfile(path):
        return
    try:
        lines = read_rules_file(path, json_only=True)
    except InvalidArgumentError as exc:
        toml = " (the driver reads JSON; cps.builder(rules=pathlib.Path(file)) reads TOML)" if path.endswith(
            ".toml") else ""
        raise invalid(key, value, f"{exc}{toml}") from None
    check_rules(key, "\n".join(lines), value)


def parse_integers(text: str) -> "list[int] | None":
    """Comma-separated 64-bit integers (none for an empty text), as Config.parseLongs; None when a part is not one."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(INTEGER.fullmatch(part) and -LONG_MAX - 1 <= int(part) <= LONG_MAX for part in parts):
        return None
    return [int(part) for part in parts]


def _check_option(option: dict, value: str) -> None:
    key, kind = option["key"], option["kind"]
    if key == "spark.cloudprofiler.rules":
        check_rules(key, value)
    elif key == "spark.cloudprofiler.rules.file":
        check_rules_file(key, value)
    elif kind == "choice" and value not in option["choices"]:
        raise invalid(key, value, "expected " + option["expected"])
    elif kind == "integer" and value not in option["choices"]:
        low, high = option["min"], option["max"]
        n = int(value) if INTEGER.fullmatch(value) else None
        if n is None or (low is not None and n < low) or n > (LONG_MAX if high is None else high):
            raise invalid(key, value, "expected " + option["expected"])
    elif kind == "integers" and parse_integers(value) is None:
        raise invalid(key, value, "expected " + option["expected"])
    # "handler": checked with its parameters (check_conf); "text": anything


def _channel_of(table: dict, key: str) -> "tuple[str, str] | None":
    """(channel name, "handler" or "params") of a trace channel's key, else None."""
    start, _, _ = table["channel_handler"].partition("<name>")
    for what in ("handler", "params"):
        end = "." + what
        if key.startswith(start) and key.endswith(end) and len(key) > len(start) + len(end):
            return key[len(start): -len(end)], what
    return None
