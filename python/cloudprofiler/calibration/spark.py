"""TSC values of a Spark application's logs in the driver's reference domain, with error bounds.

The plugin writes `calibration.arrows` (every probe of every round between the driver's machine and each other
TSC domain) into the application folder, and tags each executor file with its `tsc.domain`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ..logs import log_files, log_metadata, read_log
from .translate import Calibration, Probes


def load_calibrations(app_folder: "str | Path", method: str = "minpair") -> tuple[str, dict[str, Calibration]]:
    """(reference domain, calibration of every other domain that has at least two rounds)."""
    path = Path(app_folder) / "calibration.arrows"
    if not path.exists():
        return "", {}
    with pa.OSFile(str(path)) as f:
        table = ipc.open_stream(f).read_all()
    reference = (table.schema.metadata or {}).get(b"reference.domain", b"").decode()
    out = {}
    for domain in set(table.column("domain").to_pylist()):
        rows = table.filter(pa.compute.equal(table.column("domain"), domain))
        rounds = []
        for number in sorted(set(rows.column("round").to_pylist())):
            r = rows.filter(pa.compute.equal(rows.column("round"), number))
            rounds.append(Probes.of(r.column("send_tsc").to_numpy(), r.column("remote_tsc").to_numpy(),
                                    r.column("recv_tsc").to_numpy()))
        if len(rounds) >= 2:
            out[domain] = Calibration.from_rounds(rounds, method)
    return reference, out


def records_in_reference(app_folder: "str | Path", channel: str, method: str = "minpair") -> pa.Table:
    """Every record of `channel` in the application folder, with columns tsc_ref, tsc_err (reference ticks)
    and extrapolated added. Raises for a file whose domain has no calibration: its values are unbounded."""
    reference, calibrations = load_calibrations(app_folder, method)
    tables = []
    for path in log_files(app_folder):
        meta = log_metadata(path)
        if meta.get("channel.name") != channel:
            continue
        table = read_log(path).replace_schema_metadata(None)
        tsc = table.column("tsc").to_numpy().astype(np.int64)
        domain = meta.get("tsc.domain", "")
        if domain == reference or not reference and not calibrations:
            est, err, flag = tsc.astype(np.float64), np.zeros(tsc.size), np.zeros(tsc.size, dtype=bool)
        elif domain in calibrations:
            est, err, flag = calibrations[domain].translate(tsc)
        else:
            raise ValueError(f"{path}: TSC domain {domain!r} has no calibration with two rounds; its values cannot "
                             "be related to the reference")
        tables.append(table.append_column("tsc_ref", pa.array(est)).append_column("tsc_err", pa.array(err))
                      .append_column("extrapolated", pa.array(flag)).append_column("domain", pa.array([domain] * tsc.size, pa.string())))
    if not tables:
        raise FileNotFoundError(f"no log files of channel {channel!r} in {app_folder}")
    return pa.concat_tables(tables)
