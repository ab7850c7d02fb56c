"""How the report writes numbers and names, the same in the findings, the tables and the plots."""
from __future__ import annotations

import math

_UNITS = [(1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns")]


def duration(ns) -> str:
    """A duration in ns, in the largest unit that keeps it >= 1, with three significant digits: '11.8 ms'."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    if math.isinf(ns):
        return "unbounded"
    ns = float(f"{ns:.3g}")  # rounded first, so that 999.7 us reads "1 ms", not "1e+03 us"
    for scale, unit in _UNITS:
        if abs(ns) >= scale or unit == "ns":
            value = ns / scale
            return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def number(value) -> "float | None":
    """A value as a float; None where it is missing or NaN (a null or an unmeasured figure in a pandas row)."""
    return None if value is None or value != value else float(value)


def count(n) -> str:
    return "-" if n is None or n != n else f"{int(n):,}"


def size(n) -> str:
    """A number of bytes in the largest binary unit that keeps it >= 1: '12.3 MiB'."""
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def percent(fraction: float) -> str:
    if fraction is None or fraction != fraction:
        return "-"
    return f"{fraction * 100:.0f}%" if fraction >= 0.1 else f"{fraction * 100:.2g}%"


def hop(from_channel: str, to_channel: str) -> str:
    return f"{from_channel} -> {to_channel}"


def stage(stage_id, stage_attempt) -> str:
    return f"stage {int(stage_id)}" + (f" (attempt {int(stage_attempt)})" if int(stage_attempt) else "")


def executor(executor_id, host) -> str:
    return f"{'the driver' if executor_id == 'driver' else f'executor {executor_id}'}, host {host}"
