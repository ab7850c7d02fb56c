"""The native probe responder and prober, as Python objects."""
from __future__ import annotations

import time
from typing import Callable

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


BURSTS, BURST_GAP_S = 10, 0.0005
# Every SLEEPING_BURST-th burst (the second, the fourth...) waits for its answers asleep rather than spinning. On a
# quiet machine spinning saves the wake-up (the round's MinRTT comes from a spinning burst: 8.7 us here against
# 16-20 us asleep); on a busy one a spinning prober uses up its share of the CPU and the scheduler then holds it back
# for milliseconds (8 spinning processes on 2 cores: whole rounds at 2-12 ms spinning, 16-35 us asleep).
SLEEPING_BURST = 2
# A round whose MinRTT is this many times the best one seen was delayed (the scheduler held the prober or the
# responder back for all of its probes): it is taken again, up to RETRIES times, and the best kept.
RETRY_FACTOR, RETRIES = 4.0, 3


def probe_round(address: str, port: int, count: int = 100, timeout_ms: int = 200, secret: bytes = b"",
                bursts: int = BURSTS) -> Probes:
    """`count` probes in `bursts` bursts BURST_GAP_S apart, every SLEEPING_BURST-th waiting asleep: a moment in which
    the machine holds either side back spoils one burst, not the round's smallest round trip."""
    sizes = [count // bursts + (i < count % bursts) for i in range(min(bursts, count))]
    parts = []
    for i, size in enumerate(sizes):
        if i:
            time.sleep(BURST_GAP_S)
        parts.append(probe(address, port, size, timeout_ms, i % SLEEPING_BURST != SLEEPING_BURST - 1, secret))
    return Probes.of(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("send", "remote", "recv")), True)


def retaken_round(take: Callable[[], Probes], best_rtt: float) -> Probes:
    """A round from `take()`, taken again while its MinRTT exceeds RETRY_FACTOR times `best_rtt` (the best MinRTT
    seen so far on this path, in ticks), at most RETRIES times; the round with the smallest MinRTT."""
    best = take()
    for _ in range(RETRIES):
        if best.rtt.min() <= RETRY_FACTOR * best_rtt:
            break
        again = take()
        if again.rtt.min() < best.rtt.min():
            best = again
    return best
