"""The native probe responder and prober, as Python objects."""
from __future__ import annotations

import numpy as np

from ..native import call, ffi, lib
from .translate import Probes


class Responder:
    """Answers MinRTT probes on address:port (0: a free port) until closed."""

    def __init__(self, address: str = "0.0.0.0", port: int = 0, secret: bytes = b""):
        out = ffi.new("cp_responder **")
        call(lib.cp_responder_start, address.encode(), port, secret, len(secret), out)
        self._handle = out[0]
        self.address = address
        self.port = lib.cp_responder_port(self._handle)

    def counts(self) -> tuple[int, int]:
        """(answered, rejected) probes so far."""
        answered, rejected = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        lib.cp_responder_counts(self._handle, answered, rejected)
        return answered[0], rejected[0]

    def close(self) -> None:
        if self._handle != ffi.NULL:
            lib.cp_responder_stop(self._handle)
            self._handle = ffi.NULL

    def __enter__(self) -> "Responder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def probe(address: str, port: int, count: int = 100, timeout_ms: int = 200, spin: bool = True,
          secret: bytes = b"") -> Probes:
    """Send `count` probes to a responder; the answered ones as Probes initiated here (from_reference=True)."""
    out = ffi.new("cp_probe[]", max(count, 1))
    answered = ffi.new("uint32_t *")
    call(lib.cp_probe_peer, address.encode(), port, secret, len(secret), count, timeout_ms, int(spin), out,
         answered)
    raw = np.frombuffer(ffi.buffer(out, ffi.sizeof("cp_probe") * count),
                        dtype=[("send", "<u8"), ("remote", "<u8"), ("recv", "<u8"), ("rcpu", "<u4"), ("lcpu", "<u4")])
    ok = raw["recv"] != 0
    return Probes.of(raw["send"][ok].astype(np.int64), raw["remote"][ok].astype(np.int64),
                     raw["recv"][ok].astype(np.int64), True)
