"""Rules: which handler a channel opened by rules logs with, chosen by its name, changed while it runs.

One rule a line, `<pattern>=<handler>[:<param>...]` (e.g. `ysb.*=downsample:64`); the first rule whose glob pattern
matches a channel's name wins, buffered where none does. The library resolves and switches (native/include/
cloudprofiler.h, section Rules): this module only passes the text.
"""
from __future__ import annotations

from typing import Iterable

from .native import call, ffi, lib


def set_rules(rules: "str | Iterable[str]") -> None:
    """Replace the rules in force (a text of lines, or the lines); every open channel opened by rules whose handler
    changes switches to a new file. A bad rule raises InvalidArgumentError naming it, and the rules in force stay."""
    text = rules if isinstance(rules, str) else "\n".join(rules)
    call(lib.cp_rules_set, text.encode())


def rules() -> list[str]:
    """The rules in force, one string a rule, as they are applied."""
    size = lib.cp_rules_get(ffi.NULL, 0) + 1
    out = ffi.new("char[]", size)
    lib.cp_rules_get(out, size)
    return ffi.string(out).decode().splitlines()
