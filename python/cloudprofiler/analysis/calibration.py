"""Calibration quality: per pair of TSC domains, direction and round, the probes' MinRTT and the bound of the
anchor the translation uses, in nanoseconds."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CALIBRATION_DDL = ("domain_a string, domain_b string, direction string, round long, host_a string, host_b string, "
                   "probes long, min_rtt_ns double, bound_ns double, used boolean, t_ns double")


def calibration_rows(probes: "pa.Table | None", timebase) -> list:
    """Rows of CALIBRATION_DDL, computed on the driver from the probes table (small: a row per probe).
    min_rtt_ns: the smallest round trip of that direction's probes, in the sender's ns. bound_ns: the error of the
    anchor the round gives the pair (a, b) (both directions' probes together, the min-pair method; NaN for a pair
    with fewer than two rounds, which translation does not use), in a's ns. used: translation interpolates through
    this round's anchor (a round whose probes were all delayed is passed under, see calibration.translate).
    t_ns: when the round started."""
    if probes is None or probes.num_rows == 0:
        return []
    rows = []
    rtt = pc.subtract(probes.column("recv_tsc"), probes.column("send_tsc"))
    probes = probes.append_column("rtt", rtt)
    groups = probes.group_by(["domain_a", "domain_b", "direction", "round", "host_a", "host_b"]).aggregate(
        [("rtt", "min"), ("send_tsc", "min"), ("rtt", "count")])
    rounds = {}  # (a, b) -> its round numbers in order: one anchor each, in the same order
    for g in probes.group_by(["domain_a", "domain_b", "round"]).aggregate([]).to_pylist():
        rounds.setdefault((g["domain_a"], g["domain_b"]), []).append(g["round"])
    for g in groups.to_pylist():
        a, b = g["domain_a"], g["domain_b"]
        sender = a if g["direction"] == "a->b" else b
        cal = timebase.calibrations.get((a, b))
        index = sorted(rounds[(a, b)]).index(g["round"])
        bound = float(cal.err[index]) / timebase.hz_of(a) * 1e9 if cal is not None else np.nan
        used = cal is not None and index in cal.used
        t_ns = timebase.translate(sender, [g["send_tsc_min"]])[0][0]
        rows.append({"domain_a": a, "domain_b": b, "direction": g["direction"], "round": g["round"],
                     "host_a": g["host_a"], "host_b": g["host_b"], "probes": g["rtt_count"],
                     "min_rtt_ns": g["rtt_min"] / timebase.hz_of(sender) * 1e9, "bound_ns": bound, "used": used,
                     "t_ns": float(t_ns)})
    return sorted(rows, key=lambda r: (r["domain_a"], r["domain_b"], r["round"], r["direction"]))
