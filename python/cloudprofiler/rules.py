"""Rules: which handler a channel opened by rules logs with, chosen by its name, changed while it runs.

One rule a line, `<pattern>=<handler>[:<param>...]` (e.g. `ysb.*=downsample:64`); the first rule whose glob pattern
matches a channel's name wins, buffered where none does. The library resolves and switches (native/include/
cloudprofiler.h, section Rules): this module only passes the text, and turns a rules file (JSON or TOML, one schema:
a list `rules` of tables with `pattern`, `handler` and optional integer `params`) into it.
"""
from __future__ import annotations

import errno
import json
import os
import tomllib
from pathlib import Path
from typing import Iterable

from .errors import InvalidArgumentError
from .native import call, ffi, lib

def set_rules(rules: str | Iterable[str] | os.PathLike) -> None:
    """Replace the rules in force (a text of lines, the lines, or the path of a rules file, see `read_rules_file`);
    every open channel opened by rules whose handler changes switches to a new file. A bad rule raises
    InvalidArgumentError naming it, and the rules in force stay."""
    call(lib.cp_rules_set, rules_text(rules).encode())


def rules() -> list[str]:
    """The rules in force, one string a rule, as they are applied."""
    size = lib.cp_rules_get(ffi.NULL, 0) + 1
    out = ffi.new("char[]", size)
    lib.cp_rules_get(out, size)
    return ffi.string(out).decode().splitlines()


def rules_text(rules: str | Iterable[str] | os.PathLike) -> str:
    """The rules as the library takes them, one a line: a text as it is, lines joined, a file read."""
    if isinstance(rules, os.PathLike):
        return "\n".join(read_rules_file(rules))
    return rules if isinstance(rules, str) else "\n".join(rules)


def read_rules_file(path: "str | os.PathLike", json_only: bool = False) -> list[str]:
    """The rules of a JSON (`.json`, or any name with json_only as the driver reads spark.cloudprofiler.rules.file)
    or TOML (any other name) file, one `pattern=handler[:param...]` string each, in their order::

        {"rules": [{"pattern": "ysb.*", "handler": "downsample", "params": [64]}, {"pattern": "*", "handler": "null"}]}

        [[rules]]
        pattern = "ysb.*"
        handler = "downsample"
        params = [64]

    A file that cannot be read or parsed, or an entry that is not such a table, raises InvalidArgumentError naming
    the file and the entry (rule i is line i of the text, as the library's messages count them)."""
    path = Path(path)
    as_json = json_only or path.suffix == ".json"
    try:
        raw = path.read_bytes()
        document = json.loads(raw) if as_json else tomllib.loads(raw.decode())
    except (OSError, UnicodeDecodeError, ValueError) as e:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise _bad(path, f"cannot be read as {'JSON' if as_json else 'TOML'}: {e}") from None
    entries = document.get("rules") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise _bad(path, "expected a list 'rules' of tables with 'pattern', 'handler' and optional 'params'")
    return [_rule_line(path, i, entry) for i, entry in enumerate(entries, 1)]


def _rule_line(path: Path, number: int, entry) -> str:
    def bad(problem: str) -> InvalidArgumentError:
        return _bad(path, f"rule {number} {json.dumps(entry, default=str)}: {problem}")

    if not isinstance(entry, dict):
        raise bad("expected a table with 'pattern', 'handler' and optional 'params'")
    unknown = sorted(set(entry) - {"pattern", "handler", "params"})
    if unknown:
        raise bad(f"unknown key(s) {', '.join(unknown)}: expected pattern, handler, params")
    pattern, handler, params = entry.get("pattern"), entry.get("handler"), entry.get("params", [])
    for key, value, reserved in (("pattern", pattern, "=;\n"), ("handler", handler, "=:;\n")):
        if not isinstance(value, str) or not value or any(c in value for c in reserved):
            raise bad(f"'{key}' must be a non-empty string without {' or '.join(map(repr, reserved))}")
    if not isinstance(params, list) or any(isinstance(p, bool) or not isinstance(p, int) for p in params):
        raise bad("'params' must be a list of integers")
    return "=".join((pattern, ":".join([handler, *map(str, params)])))


def _bad(path: Path, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(errno.EINVAL, f"rules file {path}: {problem}")
