"""The application's one time axis: every TSC value of every domain as nanoseconds since the application's
reference start, in the reference domain (the driver's machine), with a strict error bound.

Built on the driver from the catalog's metadata and the calibration probes (small), then shipped to the tasks that
translate records (it pickles to a few arrays per calibrated pair). Choices, in order of preference:

- Reference domain: the one the calibration probes or the TSC domains name (the driver's machine); else the
  driver's own domain from the task table's metadata or the files of executor "driver" (local mode); else the
  domain of the file opened first (by wall clock): a folder without any of the driver's traces still gets one axis.
- Reference start (t_ns = 0): the driver plugin's clock at application start (`application.start.clock` in the
  task table's metadata, published while the application runs); else the earliest `open.clock` of the reference domain's
  files; else the earliest `open.clock` of any file translated into the reference. Every record lies after its
  file's `open.clock`, so t_ns >= 0 up to the bound.
- Wall clock: a (reference TSC, CLOCK_REALTIME) pair from the same readings places Spark's millisecond times on the
  axis (`t_ns_of_wall_ms`) and gives the start's date (`start_unix_ms`).
- TSC frequency: the reference domain's `tsc.hz` (the driver's, else the median of its files'); for another domain
  its files' median.
Values of a domain that no calibration relates to the reference are unbounded: t_ns NaN, err_ns inf.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from .. import tables
from ..calibration.translate import PATH, PATHS, durations, to_reference


def _clock(value) -> "dict | None":
    """A clock reading from metadata (decoded JSON, or the text of a key log_metadata does not decode)."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) and "tsc" in value else None


@dataclass
class Timebase:
    reference: str
    reference_source: str  # where the reference domain came from, in words
    calibrations: dict
    hz: float  # reference ticks per second (NaN where no file tells)
    start_tick: float
    wall: "tuple[float, float] | None"  # (reference tick, CLOCK_REALTIME ns) read together
    domain_hz: dict = field(default_factory=dict)  # domain -> (ticks per second, uncertainty)

    @classmethod
    def of(cls, catalog, calibrations: dict, calibration_reference: str = "") -> "Timebase":
        """From the catalog (placed) and calibrations_from_probes' result."""
        driver = catalog.table_metadata("tasks")
        reference, source = _reference(catalog, driver, calibration_reference)
        domain_hz = {}
        for domain in {f.domain for f in catalog.logs if f.domain}:
            rates = [(f.meta["tsc.hz"], f.meta.get("tsc.hz_uncertainty", 0.0)) for f in catalog.logs
                     if f.domain == domain and f.meta.get("tsc.hz")]
            if rates:
                domain_hz[domain] = (float(np.median([r[0] for r in rates])), max(r[1] for r in rates))
        start_clock = _clock(driver.get("application.start.clock"))
        if driver.get("tsc.domain") != reference:
            start_clock = None
        if start_clock is not None and driver.get("tsc.hz"):
            domain_hz[reference] = (float(driver["tsc.hz"]), domain_hz.get(reference, (0, 0.0))[1])
        if reference not in domain_hz:  # no file of the driver's: its rate through a calibrated domain's
            for domain, (hz, uncertainty) in sorted(domain_hz.items()):
                if (reference, domain) in calibrations:
                    rate = calibrations[(reference, domain)].rate_overall()[0]
                    domain_hz[reference] = (hz * rate, uncertainty * rate)
                    break
        hz = domain_hz.get(reference, (float("nan"), 0.0))[0]
        base = cls(reference, source, calibrations, hz, 0.0, None, domain_hz)
        opens = [(f.domain, _clock(f.meta.get("open.clock"))) for f in catalog.logs]
        opens = [(d, c) for d, c in opens if c is not None and d is not None]
        own = sorted((c for d, c in opens if d == reference), key=lambda c: c["tsc"])
        first = start_clock or (own[0] if own else None)
        if first is not None:
            base.start_tick = float(first["tsc"])
            base.wall = (float(first["tsc"]), float(first["realtime_ns"]))
        else:
            translated = [to_reference(d, [c["tsc"]], reference, calibrations) for d, c in opens]
            ticks = [t[0][0] for t in translated if t is not None]
            base.start_tick = float(min(ticks)) if ticks else 0.0
        return base

    @property
    def domains(self) -> list:
        """Every domain the axis knows (the reference and those of files), in a fixed order: domain_id indexes it."""
        return sorted(set(self.domain_hz) | {self.reference})

    def domain_id(self, domain: "str | None") -> int:
        return self.domains.index(domain) if domain in self.domains else -1

    def domain_name(self, domain_id: int) -> "str | None":
        return self.domains[domain_id] if 0 <= domain_id < len(self.domains) else None

    def translate(self, domain: "str | None", tsc) -> tuple:
        """Ticks of `domain` -> (t_ns, err_ns, extrapolated, unbounded), vectorized."""
        tsc = np.asarray(tsc, dtype=np.int64)
        known = None if domain is None else to_reference(domain, tsc, self.reference, self.calibrations)
        if known is None:
            n = tsc.shape
            return np.full(n, np.nan), np.full(n, np.inf), np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        est, err, extrapolated = known
        return (est - self.start_tick) / self.hz * 1e9, err / self.hz * 1e9, extrapolated, np.zeros(tsc.shape, bool)

    def jvm_axis(self) -> dict:
        """What `translate` needs, for the plugin's reader of log files (io.cloudprofiler.spark.analysis): the
        reference start and frequency, and per domain "reference" or its calibration's interpolation anchors; a
        domain left out is unbounded. Doubles travel as their IEEE bits (int64), exact."""
        domains = {self.reference: "reference"}
        for (reference, domain), cal in self.calibrations.items():
            if reference == self.reference and domain != self.reference:
                domains[domain] = _jvm_anchors(cal)
        return {"start_tick": ieee_bits(self.start_tick), "hz": ieee_bits(self.hz), "domains": domains}

    def jvm_durations(self) -> dict:
        """What `durations` needs, for the plugin's durations in the JVM (io.cloudprofiler.spark.analysis.Durations),
        domains by domain_id: the paths' codes, the reference and its frequency, every calibration between two of
        `domains` (in both orientations), each domain's own frequency. Doubles as their IEEE bits."""
        ids = {d: i for i, d in enumerate(self.domains)}
        calibrations = [{"x": ids[x], "y": ids[y], **_jvm_anchors(cal)} for (x, y), cal in
                        sorted(self.calibrations.items()) if x in ids and y in ids]
        local = [{"domain": ids[d], "hz": ieee_bits(hz), "uncertainty": ieee_bits(uncertainty)}
                 for d, (hz, uncertainty) in sorted(self.domain_hz.items())]
        return {"paths": list(PATHS), "hz": ieee_bits(self.hz), "reference": ids[self.reference], "domains": len(ids),
                "calibrations": calibrations, "local": local}

    def durations(self, start_domain: "str | None", start, end_domain: "str | None", end) -> tuple:
        """(duration_ns, err_ns, path, extrapolated, unbounded) from start (ticks of start_domain) to end, by the
        best path of `calibration.translate.durations` (path: its PATHS codes, int8). Where no calibration relates
        a domain to the reference, a duration with both ends in that domain takes the path "local": the domain's
        ticks over its own tsc.hz, bounded by that frequency's uncertainty; one across domains stays unbounded (NaN,
        inf)."""
        start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
        n = start.shape
        if start_domain is None or end_domain is None:
            return (np.full(n, np.nan), np.full(n, np.inf), np.full(n, PATH["unbounded"], dtype=np.int8),
                    np.zeros(n, dtype=bool), np.ones(n, dtype=bool))
        d = durations(start_domain, start, end_domain, end, self.reference, self.calibrations)
        value, error, path = d.value / self.hz * 1e9, d.error / self.hz * 1e9, d.path
        unbounded = np.isinf(d.error)
        if start_domain == end_domain and start_domain in self.domain_hz and unbounded.any():
            hz, uncertainty = self.domain_hz[start_domain]
            local = (end - start).astype(np.float64) / hz * 1e9
            error = np.where(unbounded, np.abs(local) * uncertainty / hz, error)
            value = np.where(unbounded, local, value)
            path = np.where(unbounded, PATH["local"], path).astype(np.int8)
            unbounded = np.zeros(n, dtype=bool)
        return value, error, path, d.extrapolated & ~unbounded, unbounded

    def hz_of(self, domain: str) -> float:
        """A domain's TSC frequency: its files' median, else the reference's over the calibration's rate."""
        if domain in self.domain_hz:
            return self.domain_hz[domain][0]
        cal = self.calibrations.get((self.reference, domain))
        return self.hz / cal.rate_overall()[0] if cal is not None else float("nan")

    def t_ns_of_wall_ms(self, ms):
        """Wall-clock milliseconds (Spark's launch and finish times) on the axis; NaN without a pairing. Exact to
        the wall clock's own steps (NTP adjusts it; the TSC does not)."""
        ms = np.asarray(ms, dtype=np.float64)
        if self.wall is None:
            return np.full(ms.shape, np.nan)
        tick, wall_ns = self.wall
        return ms * 1e6 - wall_ns + (tick - self.start_tick) / self.hz * 1e9

    @property
    def start_unix_ms(self) -> "int | None":
        if self.wall is None:
            return None
        tick, wall_ns = self.wall
        return int(round((wall_ns - (tick - self.start_tick) / self.hz * 1e9) / 1e6))


def _jvm_anchors(cal) -> dict:
    """A calibration's interpolation anchors and the span of its rounds (Calibration.covers), for the JVM."""
    other, ref, err = cal.interpolated()
    return {"other": other.tolist(), "ref": ieee_bits(ref), "err": ieee_bits(err), "first": int(cal.other[0]),
            "last": int(cal.other[-1])}


def ieee_bits(values):
    """float64 values (an array, or one) as the int64 of their IEEE bits."""
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def _reference(catalog, driver: dict, calibration_reference: str) -> tuple:
    named = [(calibration_reference, f"named by {tables.file('calibration')}"),
             (catalog.table_metadata("tsc_domains").get("reference.domain"), f"named by {tables.file('tsc_domains')}"),
             (driver.get("tsc.domain"), f"the driver's, from {tables.file('tasks')}")]
    for domain, source in named:
        if domain:
            return domain, source
    driver_files = sorted(f.domain for f in catalog.logs if f.executor_id == "driver" and f.domain)
    if driver_files:
        return driver_files[0], "the driver's, from its executor's files (local mode)"
    opened = sorted((_clock(f.meta.get("open.clock"))["realtime_ns"], f.domain) for f in catalog.logs
                    if f.domain and _clock(f.meta.get("open.clock")))
    if opened:
        return opened[0][1], "the domain of the file opened first (nothing of the driver's is in the folder)"
    return "", "none: no file has a TSC domain"
