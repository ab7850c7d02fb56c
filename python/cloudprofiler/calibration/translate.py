"""TSC translation between domains with strict error bounds.

Terms. The reference domain is A; another domain is B. A probe initiated in A reads A's TSC when it leaves
(`send`), B's TSC when B answers (`remote`) and A's TSC when the answer returns (`recv`); B's reading happened
at an A-time inside [send, recv]. A probe initiated in B is the mirror image. A round is the probes of one
exchange; an anchor summarizes a round as "B tick `other` happened at A-time `ref` +- `err`".

Two anchors j < m give the ratio r = (ref_m - ref_j) / (other_m - other_j) (Eq. 2) and the translation
c^A = ref_j + r (c^B - other_j) (Eq. 4). Assumption: between two anchors both TSCs run at constant rates
(invariant TSC). Then for a value between the anchors (lambda in [0, 1]) the error is at most
(1 - lambda) err_j + lambda err_m <= max(err_j, err_m) = e (the paper's result); outside, the same formula with
|1 - lambda| and |lambda| applies and grows, and the value is flagged as extrapolated.

Anchors come from one of two summaries of a round:
- "minrtt": the probe with the smallest round trip; err = RTT_min / 2 (the paper's MinRTT).
- "minpair": the intersection of every probe's interval, after moving each probe to the round's first B tick
  with the rate; the lower bound comes from one probe and the upper from another, so the width is at most
  RTT_min and usually smaller. It needs a rate (from MinRTT anchors of two rounds) and widens the interval by
  the rate's uncertainty times the distance moved, so it stays strict.

Arithmetic: TSC values are int64; differences to an anchor are taken in integers first (exact), then scaled in
float64 (relative error 2^-53: below 0.002 ticks for differences up to 2^43 ticks, i.e. over an hour at 2 GHz).
Every bound is widened by ROUNDING_TICKS to cover that and the anchors' own float rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROUNDING_TICKS = 1.0


@dataclass(frozen=True)
class Probes:
    """The probes of one round between the reference domain A and a domain B.

    send, recv: initiator's TSC at departure and return; remote: the answering side's TSC.
    from_reference: True where A initiated (send/recv are A ticks, remote a B tick), False where B did.
    """

    send: np.ndarray
    remote: np.ndarray
    recv: np.ndarray
    from_reference: np.ndarray

    @classmethod
    def of(cls, send, remote, recv, from_reference=True) -> "Probes":
        send, remote, recv = (np.asarray(v, dtype=np.int64) for v in (send, remote, recv))
        direction = np.broadcast_to(np.asarray(from_reference, dtype=bool), send.shape).copy()
        if not (send.shape == remote.shape == recv.shape) or send.size == 0:
            raise ValueError(f"probes need equally long, non-empty send/remote/recv arrays, got {send.shape}, "
                             f"{remote.shape}, {recv.shape}")
        if np.any(recv < send):
            bad = int(np.argmax(recv < send))
            raise ValueError(f"probe {bad} returns before it leaves (send={send[bad]}, recv={recv[bad]})")
        return cls(send, remote, recv, direction)

    @property
    def rtt(self) -> np.ndarray:
        return self.recv - self.send


@dataclass(frozen=True)
class Anchor:
    """B tick `other` happened at A-time within [ref - err, ref + err]."""

    other: int
    ref: float
    err: float


def _minrtt_anchor(p: Probes, rate: float) -> Anchor:
    i = int(np.argmin(p.rtt))
    half = (p.recv[i] - p.send[i]) / 2.0
    if p.from_reference[i]:  # B's tick lies at A-time in [send, recv]
        return Anchor(int(p.remote[i]), float(p.send[i]) + half, half)
    # A's tick p.remote lies at B-time in [send, recv]: anchor B's midpoint at A's tick
    return Anchor(int(p.send[i] + (p.recv[i] - p.send[i]) // 2), float(p.remote[i]),
                  half * rate + 0.5 * rate)


def anchor_from_probes(p: Probes, method: str = "minrtt", rate: float = 1.0, rate_err: float = 0.0) -> Anchor:
    """Summarize a round as an anchor; `rate` (A ticks per B tick) and its uncertainty matter for "minpair"
    and for probes initiated in B."""
    if method == "minrtt":
        return _minrtt_anchor(p, rate)
    if method != "minpair":
        raise ValueError(f"method={method!r} is not one of minrtt, minpair")
    # Every probe as an interval of A-time at one B tick b0, moved there with the rate.
    fwd = p.from_reference
    b_tick = np.where(fwd, p.remote, p.send).astype(np.int64)  # a B tick of each probe
    b0 = int(b_tick[int(np.argmin(p.rtt))])
    shift = (b_tick - b0).astype(np.float64)
    # forward: B's tick at A-time in [send, recv]; backward: A's tick `remote` at B-time in [send, recv],
    # so B's tick `send` is at A-time in [remote - rate*(recv-send), remote]
    lo = np.where(fwd, p.send, p.remote - rate * (p.recv - p.send)) - rate * shift
    hi = np.where(fwd, p.recv, p.remote) - rate * shift
    widen = rate_err * np.abs(shift)
    low, high = float(np.max(lo - widen)), float(np.min(hi + widen))
    if low > high:  # only possible when the rate is wrong beyond its stated uncertainty
        raise ValueError(f"min-pair intervals do not intersect ({low} > {high}): the rate {rate} is inconsistent")
    return Anchor(b0, (low + high) / 2.0, (high - low) / 2.0)


class Calibration:
    """The relation of domain B to the reference A: anchors over time, piecewise-linear between them."""

    def __init__(self, anchors: list[Anchor]):
        if len(anchors) < 2:
            raise ValueError(f"a calibration needs at least two rounds, got {len(anchors)}")
        anchors = sorted(anchors, key=lambda a: a.other)
        if any(b.other <= a.other for a, b in zip(anchors, anchors[1:])):
            raise ValueError("two rounds have the same B tick: rounds must be apart in time")
        self.other = np.array([a.other for a in anchors], dtype=np.int64)
        self.ref = np.array([a.ref for a in anchors], dtype=np.float64)
        self.err = np.array([a.err for a in anchors], dtype=np.float64)

    @classmethod
    def from_rounds(cls, rounds: list[Probes], method: str = "minrtt") -> "Calibration":
        """Anchors from every round; "minpair" first derives the rates from MinRTT anchors."""
        coarse = cls([anchor_from_probes(r) for r in rounds])
        if method == "minrtt":
            return coarse
        rate, rate_err = coarse.rate_overall()
        return cls([anchor_from_probes(r, method, rate, rate_err) for r in rounds])

    def rate_overall(self) -> tuple[float, float]:
        """Ratio between the first and last anchors and its uncertainty (Eq. 2)."""
        span = float(self.other[-1] - self.other[0])
        return (self.ref[-1] - self.ref[0]) / span, (self.err[-1] + self.err[0]) / span

    def _segment(self, values: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(self.other, values, side="right") - 1, 0, len(self.other) - 2)

    def translate(self, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """B ticks -> (A estimate, error bound, extrapolated flag), vectorized (Eq. 4)."""
        values = np.asarray(values, dtype=np.int64)
        k = self._segment(values)
        oj, om = self.other[k], self.other[k + 1]
        span = (om - oj).astype(np.float64)
        lam = (values - oj).astype(np.float64) / span  # integer difference first
        rate = (self.ref[k + 1] - self.ref[k]) / span
        est = self.ref[k] + rate * (values - oj).astype(np.float64)
        err = np.abs(1.0 - lam) * self.err[k] + np.abs(lam) * self.err[k + 1] + ROUNDING_TICKS
        return est, err, (lam < 0) | (lam > 1)

    def scale(self, start, end) -> tuple[np.ndarray, np.ndarray]:
        """Scenario 1: a duration measured in B (start and end in B) in A ticks, with its error bound
        d * (err_j + err_m) / D (the paper's 2 d e / D with e = max)."""
        start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
        k = self._segment(start)
        span = (self.other[k + 1] - self.other[k]).astype(np.float64)
        rate = (self.ref[k + 1] - self.ref[k]) / span
        d = (end - start).astype(np.float64)
        return rate * d, np.abs(d) * (self.err[k] + self.err[k + 1]) / span + ROUNDING_TICKS


@dataclass(frozen=True)
class Duration:
    value: np.ndarray  # reference ticks
    error: np.ndarray  # the true duration lies in value +- error
    method: np.ndarray  # per duration: trivial, scenario1, scenario2, scenario3, baseline
    extrapolated: np.ndarray


def durations(start_domain: str, start, end_domain: str, end, reference: str,
              calibrations: dict[tuple[str, str], Calibration]) -> Duration:
    """Durations from (start_domain, start) to (end_domain, end) in reference ticks, by the smallest-error path.

    calibrations[(X, Y)] relates domain Y to domain X as its reference (Y's ticks -> X's ticks); calibrations to
    the reference are required for non-reference domains, a calibration between the two non-reference domains
    enables Scenario 3.
    """
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    n = start.shape
    flag = np.zeros(n, dtype=bool)

    def to_ref(domain, values):
        if domain == reference:
            return values.astype(np.float64), np.zeros(n), flag
        if (reference, domain) not in calibrations:
            raise KeyError(f"no calibration between {reference} and {domain}: their durations are unbounded")
        return calibrations[(reference, domain)].translate(values)

    if start_domain == end_domain:
        if start_domain == reference:
            return Duration((end - start).astype(np.float64), np.zeros(n), np.full(n, "trivial"), flag)
        v, e = calibrations[(reference, start_domain)].scale(start, end)
        return Duration(v, e, np.full(n, "scenario1"), flag)
    if reference in (start_domain, end_domain):
        s, es, xs = to_ref(start_domain, start)
        t, et, xt = to_ref(end_domain, end)
        return Duration(t - s, es + et, np.full(n, "scenario2"), xs | xt)
    # Two non-reference domains: the baseline translates both; Scenario 3 translates the end into the start's
    # domain, then scales the duration (Eq. 8). Each duration takes the smaller bound.
    s, es, xs = to_ref(start_domain, start)
    t, et, xt = to_ref(end_domain, end)
    base_v, base_e, base_x = t - s, es + et, xs | xt
    pair = calibrations.get((start_domain, end_domain))
    if pair is None:
        return Duration(base_v, base_e, np.full(n, "baseline"), base_x)
    end_in_start, e_bc, x_bc = pair.translate(end)
    local = end_in_start - start.astype(np.float64)
    cal = calibrations[(reference, start_domain)]
    k = cal._segment(start)
    span = (cal.other[k + 1] - cal.other[k]).astype(np.float64)
    rate = (cal.ref[k + 1] - cal.ref[k]) / span
    s3_v = rate * local
    # |r d - r' d'| <= r |d - d'| + |d'| |r - r'|, with |d'| <= |d| + e_bc
    s3_e = (np.abs(local) + e_bc) * (cal.err[k] + cal.err[k + 1]) / span + rate * e_bc + ROUNDING_TICKS
    use = s3_e < base_e
    return Duration(np.where(use, s3_v, base_v), np.where(use, s3_e, base_e),
                    np.where(use, "scenario3", "baseline"), np.where(use, x_bc | xs, base_x))
