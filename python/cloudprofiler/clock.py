"""TSC reads and clock readings of this host."""
from __future__ import annotations

import json
from dataclasses import dataclass

from .native import call, ffi, lib


@dataclass(frozen=True)
class ClockReading:
    """A TSC value paired with CLOCK_MONOTONIC_RAW and CLOCK_REALTIME; the TSC is within +-uncertainty_ticks."""

    tsc: int
    monotonic_raw_ns: int
    realtime_ns: int
    uncertainty_ticks: int
    cpu_id: int


@dataclass(frozen=True)
class TscFrequency:
    hz: float
    uncertainty_hz: float
    source: str  # "cpuid-0x15" or "calibrated"


def tsc() -> int:
    """The TSC now (ordered read)."""
    return lib.cp_tsc()


def tscp() -> tuple[int, int]:
    """(TSC, id of the CPU that read it)."""
    cpu = ffi.new("uint32_t *")
    value = lib.cp_tscp(cpu)
    return value, cpu[0]


def clock_read() -> ClockReading:
    out = ffi.new("cp_clock_reading *")
    call(lib.cp_clock_read, out)
    return ClockReading(out.tsc, out.monotonic_raw_ns, out.realtime_ns, out.uncertainty_ticks, out.cpu_id)


def tsc_frequency() -> TscFrequency:
    out = ffi.new("cp_tsc_frequency *")
    call(lib.cp_tsc_frequency_get, out)
    source = "cpuid-0x15" if out.source == lib.CP_FREQUENCY_CPUID else "calibrated"
    return TscFrequency(out.hz, out.uncertainty_hz, source)


def tsc_is_invariant() -> bool:
    return bool(lib.cp_tsc_is_invariant())


BOOT_ID = "/proc/sys/kernel/random/boot_id"


def tsc_identity() -> dict:
    """Whose TSC this process reads, in the terms its log files' metadata give (boot_id, tsc.simulation): processes
    of one boot id and one simulation (None: none) read one TSC. A process that stamps TSC values which another logs
    (the generator's emitters) states its clock with it."""
    try:
        with open(BOOT_ID) as f:
            boot = f.read().strip()
    except OSError:
        boot = "unknown"  # as the library's files say it
    return {"boot_id": boot, "simulation": json.loads(ffi.string(lib.cp_tsc_simulation()).decode())}
