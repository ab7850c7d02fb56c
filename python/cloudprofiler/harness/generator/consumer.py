"""A plain consumer of the generator: counts tuples, gaps and event-time latency per bucket.

It can be given a capacity (tuples/s) to play a system under test with a known limit; the search must find
that limit. The achieved rate is measured here, on the receiving side, after a warm-up cut.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import wire


@dataclass
class ConsumerReport:
    received_tuples: int = 0
    received_buckets: int = 0
    missing_buckets: int = 0  # sequence gaps: buckets the emitters counted as dropped
    totals: dict = field(default_factory=dict)  # emitter -> wire.Totals from its pill
    recv_ns: list = field(default_factory=list)  # per bucket: receive time (perf_counter ns)
    tuples: list = field(default_factory=list)  # per bucket: tuple count
    emitter: list = field(default_factory=list)  # per bucket: emitter index
    latency_ns: list = field(default_factory=list)  # per bucket: receive wall clock - emission wall clock

    @property
    def emitted_tuples(self) -> int:
        return sum(t.emitted_tuples for t in self.totals.values())

    @property
    def dropped_tuples(self) -> int:
        return sum(t.dropped_tuples for t in self.totals.values())

    def rate_tps(self, warmup_s: float = 0.0) -> float:
        """Sum over emitters of tuples per second between the first bucket after the warm-up and the last.

        Per emitter, because emitters start and end at slightly different moments."""
        t_all, n_all, e_all = np.asarray(self.recv_ns), np.asarray(self.tuples), np.asarray(self.emitter)
        return sum(_rate(t_all[e_all == e], n_all[e_all == e], warmup_s) for e in np.unique(e_all))

    def latency_trend(self, warmup_s: float = 0.0) -> tuple[float, float, float]:
        """(p50 ms, p99 ms, slope of latency in ms per s of run) after the warm-up."""
        if not self.latency_ns:
            return 0.0, 0.0, 0.0
        t = (np.asarray(self.recv_ns) - self.recv_ns[0]) / 1e9
        lat = np.asarray(self.latency_ns) / 1e6
        keep = t >= warmup_s if t[-1] > warmup_s else np.ones_like(t, dtype=bool)
        t, lat = t[keep], lat[keep]
        slope = float(np.polyfit(t, lat, 1)[0]) if len(t) > 2 and t[-1] > t[0] else 0.0
        return float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), slope


def _rate(t: np.ndarray, n: np.ndarray, warmup_s: float) -> float:
    if len(t) < 3:
        return 0.0
    first = int(np.searchsorted(t, t[0] + warmup_s * 1e9))
    if first >= len(t) - 1:
        first = 0
    return float(n[first + 1:].sum() / ((t[-1] - t[first]) / 1e9))


def consume(endpoints: list[str], timeout_s: float = 5.0, capacity_tps: float | None = None) -> ConsumerReport:
    """Receive until every emitter sent its pill; a silence longer than `timeout_s` raises TimeoutError."""
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, 2)
    sock.setsockopt(zmq.RCVBUF, 1 << 18)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout_s * 1000))
    report = ConsumerReport()
    next_seq: dict[int, int] = {}
    first_ns = None
    try:
        for endpoint in endpoints:
            sock.connect(endpoint)
        while len(report.totals) < len(endpoints):
            try:
                frames = sock.recv_multipart(copy=False)
            except zmq.Again:
                raise TimeoutError(
                    f"no bucket from {', '.join(endpoints)} for {timeout_s} s "
                    f"({len(report.totals)} of {len(endpoints)} emitters finished)") from None
            now = time.perf_counter_ns()
            header = wire.Header.unpack(frames[0].buffer)
            if header.kind == wire.PILL:  # its seq is the number of buckets the emitter made
                report.missing_buckets += header.seq - next_seq.get(header.emitter, 0)
                report.totals[header.emitter] = wire.Totals.unpack(frames[1].buffer)
                continue
            report.missing_buckets += header.seq - next_seq.get(header.emitter, 0)
            next_seq[header.emitter] = header.seq + 1
            report.received_tuples += header.n
            report.received_buckets += 1
            report.recv_ns.append(now)
            report.tuples.append(header.n)
            report.emitter.append(header.emitter)
            report.latency_ns.append(time.time_ns() - header.wall_ns)
            if capacity_tps:
                first_ns = first_ns or now
                due = first_ns + report.received_tuples / capacity_tps * 1e9
                if due > now:
                    time.sleep((due - now) / 1e9)
    finally:
        sock.close()
        ctx.term()
    return report
