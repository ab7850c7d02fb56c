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

Which anchors a value is translated between: for a value between anchors j and m, the bound is the chord from
(other_j, err_j) to (other_m, err_m) evaluated at the value, so the smallest bound any pair gives is the lower
convex hull of the points (other, err). Translation interpolates between consecutive anchors of that hull: a round
whose probes were all delayed (a busy machine descheduled the prober) gives a wide anchor that the hull passes
under, and values near it take the bound of the good rounds around it. The constant-rate assumption then spans
the hull's edges; an anchor passed under must agree with that edge within both bounds, else the rates were not
constant there and the anchor is kept as a vertex, so a bound never rests on an assumption the rounds contradict.
The first and the last anchor bound the calibrated span and are always vertices; where one of them is wider than
the line through the two vertices next to it, extended to it, would be (a delayed first or last round), its place
takes that extended line's value and bound, (1 + d/D) err_j + (d/D) err_m at a distance d from the nearer vertex j
with the two D apart: the same constant-rate assumption, checked the same way (the extended line must pass inside
the delayed anchor's own bound, else the anchor stays). Interpolating to that point gives every value near it the
bound extrapolation from the good rounds gives, with no change to translation itself.

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
RATE_PRIOR = 1e-3  # before any rate is measured: two TSCs run at rates within 1000 ppm of each other


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


def _minrtt_anchor(p: Probes, rate: float, rate_err: float) -> Anchor:
    i = int(np.argmin(p.rtt))
    half = (p.recv[i] - p.send[i]) / 2.0
    if p.from_reference[i]:  # B's tick lies at A-time in [send, recv]
        return Anchor(int(p.remote[i]), float(p.send[i]) + half, half)
    # A's tick p.remote lies at B-time in [send, recv]: anchor B's midpoint at A's tick; half a round trip of B
    # ticks is at most half * (rate + rate_err) A ticks, and the midpoint's rounding half a B tick
    return Anchor(int(p.send[i] + (p.recv[i] - p.send[i]) // 2), float(p.remote[i]),
                  half * (rate + rate_err) + 0.5 * rate)


def anchor_from_probes(p: Probes, method: str = "minrtt", rate: float = 1.0, rate_err: float = 0.0) -> Anchor:
    """Summarize a round as an anchor; `rate` (A ticks per B tick) and its uncertainty matter for "minpair"
    and for probes initiated in B."""
    if method == "minrtt":
        return _minrtt_anchor(p, rate, rate_err)
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
    widen = rate_err * (np.abs(shift) + np.where(fwd, 0, p.recv - p.send))
    low, high = float(np.max(lo - widen)), float(np.min(hi + widen))
    if low > high:  # only possible when the rate is wrong beyond its stated uncertainty
        raise ValueError(f"min-pair intervals do not intersect ({low} > {high}): the rate {rate} is inconsistent")
    return Anchor(b0, (low + high) / 2.0, (high - low) / 2.0)


def _lower_hull(x: np.ndarray, y: np.ndarray, lo: int, hi: int) -> list[int]:
    """Indices lo..hi (x increasing) of the lower convex hull of the points (x, y), both ends included."""
    hull: list[int] = []
    for i in range(lo, hi + 1):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is not below the chord a -> i: drop it (cross product in floats: x are ticks up to 2^63)
            if (float(x[b] - x[a]) * (y[i] - y[a]) - float(x[i] - x[a]) * (y[b] - y[a])) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


def interpolation_anchors(other: np.ndarray, ref: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Indices of the anchors translation interpolates between (see the module's note): the lower hull of
    (other, err), plus every anchor that disagrees with the hull edge above it beyond both bounds."""
    kept = {0, len(other) - 1}
    while True:
        vertices = sorted(kept)
        hull = sorted({i for lo, hi in zip(vertices, vertices[1:]) for i in _lower_hull(other, err, lo, hi)})
        disagree = []
        for j, m in zip(hull, hull[1:]):
            for i in range(j + 1, m):
                lam = float(other[i] - other[j]) / float(other[m] - other[j])
                line = ref[j] + lam * (ref[m] - ref[j])
                if abs(ref[i] - line) > err[i] + (1 - lam) * err[j] + lam * err[m] + 2 * ROUNDING_TICKS:
                    disagree.append(i)
        if not disagree:
            return np.array(hull, dtype=np.int64)
        kept.update(hull, disagree)


def _extended_ends(other: np.ndarray, ref: np.ndarray, err: np.ndarray) -> tuple:
    """The interpolation anchors with a delayed first or last one replaced by the line of the two vertices next to
    it, extended to its tick (see the module's note); the arrays are copies. Each end is judged on the rounds as
    measured: with three vertices the last end's line would otherwise run through the first end's replacement."""
    extended_ref, extended_err = ref.copy(), err.copy()
    if len(other) < 3:
        return other, extended_ref, extended_err
    for end, j, m in ((0, 1, 2), (-1, -2, -3)):
        lam = float(other[end] - other[j]) / float(other[m] - other[j])  # < 0: beyond j, away from m
        line = ref[j] + lam * (ref[m] - ref[j])
        width = (1 - lam) * err[j] - lam * err[m] + ROUNDING_TICKS
        if width < err[end] and abs(line - ref[end]) <= width + err[end] + 2 * ROUNDING_TICKS:
            extended_ref[end], extended_err[end] = line, width
    return other, extended_ref, extended_err


class Calibration:
    """The relation of domain B to the reference A: anchors over time (one per round, `other`/`ref`/`err`),
    translation piecewise-linear between the anchors of `used` (see the module's note)."""

    def __init__(self, anchors: list[Anchor]):
        if len(anchors) < 2:
            raise ValueError(f"a calibration needs at least two rounds, got {len(anchors)}")
        anchors = sorted(anchors, key=lambda a: a.other)
        if any(b.other <= a.other for a, b in zip(anchors, anchors[1:])):
            raise ValueError("two rounds have the same B tick: rounds must be apart in time")
        self.other = np.array([a.other for a in anchors], dtype=np.int64)
        self.ref = np.array([a.ref for a in anchors], dtype=np.float64)
        self.err = np.array([a.err for a in anchors], dtype=np.float64)
        self.used = interpolation_anchors(self.other, self.ref, self.err)
        self._other, self._ref, self._err = _extended_ends(self.other[self.used], self.ref[self.used],
                                                           self.err[self.used])

    @classmethod
    def from_rounds(cls, rounds: list[Probes], method: str = "minrtt") -> "Calibration":
        """Anchors from every round. Probes initiated in B need the rate: MinRTT anchors under RATE_PRIOR give a
        first one, MinRTT anchors under that rate the final "minrtt" calibration, whose rate "minpair" uses."""
        coarse = cls([anchor_from_probes(r, "minrtt", 1.0, RATE_PRIOR) for r in rounds])
        rate, rate_err = coarse.rate_overall()
        fine = cls([anchor_from_probes(r, "minrtt", rate, rate_err) for r in rounds])
        if method == "minrtt":
            return fine
        rate, rate_err = fine.rate_overall()
        return cls([anchor_from_probes(r, method, rate, rate_err) for r in rounds])

    def interpolated(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The anchors translation interpolates between (`used`): other (int64), ref, err (float64)."""
        return self._other, self._ref, self._err

    def rate_overall(self) -> tuple[float, float]:
        """Ratio between the first and last anchors and its uncertainty (Eq. 2)."""
        span = float(self.other[-1] - self.other[0])
        return (self.ref[-1] - self.ref[0]) / span, (self.err[-1] + self.err[0]) / span

    def _segment(self, values: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(self._other, values, side="right") - 1, 0, len(self._other) - 2)

    def translate(self, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """B ticks -> (A estimate, error bound, extrapolated flag), vectorized (Eq. 4)."""
        values = np.asarray(values, dtype=np.int64)
        k = self._segment(values)
        oj, om = self._other[k], self._other[k + 1]
        span = (om - oj).astype(np.float64)
        lam = (values - oj).astype(np.float64) / span  # integer difference first
        rate = (self._ref[k + 1] - self._ref[k]) / span
        est = self._ref[k] + rate * (values - oj).astype(np.float64)
        err = np.abs(1.0 - lam) * self._err[k] + np.abs(lam) * self._err[k + 1] + ROUNDING_TICKS
        return est, err, (lam < 0) | (lam > 1)

    def covers(self, values) -> np.ndarray:
        """Whether each B tick lies inside the calibrated span (first to last anchor)."""
        values = np.asarray(values, dtype=np.int64)
        return (values >= self.other[0]) & (values <= self.other[-1])

    def scale(self, start, end) -> tuple[np.ndarray, np.ndarray]:
        """Scenario 1: a duration measured in B (start and end in B) in A ticks, with its error bound
        d * (err_j + err_m) / D (the paper's 2 d e / D with e = max)."""
        start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
        k = self._segment(start)
        span = (self._other[k + 1] - self._other[k]).astype(np.float64)
        rate = (self._ref[k + 1] - self._ref[k]) / span
        d = (end - start).astype(np.float64)
        return rate * d, np.abs(d) * (self._err[k] + self._err[k + 1]) / span + ROUNDING_TICKS


# A duration's path, as a small number per duration (names of millions of durations cost more than the durations):
# "local" is the analysis's (a domain no calibration relates to the reference, over its own frequency: Timebase)
PATHS = ("unbounded", "trivial", "scenario1", "scenario2", "scenario3", "baseline", "local")
PATH = {name: np.int8(code) for code, name in enumerate(PATHS)}
_PATH_NAMES = np.array(PATHS, dtype=object)


def path_names(codes: np.ndarray) -> np.ndarray:
    """The names of PATHS codes (an object array)."""
    return _PATH_NAMES[codes]


def _paths(n, name: str) -> np.ndarray:
    return np.full(n, PATH[name], dtype=np.int8)


@dataclass(frozen=True)
class Duration:
    value: np.ndarray  # reference ticks (NaN where unbounded)
    error: np.ndarray  # the true duration lies in value +- error (inf where no calibration relates the ends)
    path: np.ndarray  # per duration, a PATHS code: trivial, scenario1, scenario2, scenario3, baseline, unbounded
    extrapolated: np.ndarray  # a value outside a calibrated span was used, or the duration is unbounded

    @property
    def method(self) -> np.ndarray:
        """The paths' names."""
        return path_names(self.path)


def _best(candidates: list[Duration]) -> Duration:
    """Per duration, the first of: bounded before unbounded, inside the calibrated spans before extrapolated, the
    smaller bound."""
    best = candidates[0]
    for c in candidates[1:]:
        b_inf, c_inf = np.isinf(best.error), np.isinf(c.error)
        better = (b_inf & ~c_inf) | (b_inf == c_inf) & (
            (best.extrapolated & ~c.extrapolated) | (best.extrapolated == c.extrapolated) & (c.error < best.error))
        best = Duration(*(np.where(better, new, old) for new, old in zip(
            (c.value, c.error, c.path, c.extrapolated), (best.value, best.error, best.path, best.extrapolated))))
    return best


def _scenario3(ref_x: "Calibration", x_y: "Calibration", x, y, x_is_start: bool) -> Duration:
    """A duration between x (domain X) and y (domain Y): y translated into X (Scenario 2), the local duration
    scaled into the reference with X's calibration (Scenario 1), Eq. 8."""
    y_in_x, e_xy, flag = x_y.translate(y)
    local = y_in_x - x.astype(np.float64) if x_is_start else x.astype(np.float64) - y_in_x
    k = ref_x._segment(x)
    span = (ref_x._other[k + 1] - ref_x._other[k]).astype(np.float64)
    rate = (ref_x._ref[k + 1] - ref_x._ref[k]) / span
    # |r d - r' d'| <= r |d - d'| + |d'| |r - r'|, with |d'| <= |d| + e_xy
    err = (np.abs(local) + e_xy) * (ref_x._err[k] + ref_x._err[k + 1]) / span + rate * e_xy + ROUNDING_TICKS
    return Duration(rate * local, err, _paths(x.shape, "scenario3"), flag | ~ref_x.covers(x))


def to_reference(domain: str, values, reference: str, calibrations: dict[tuple[str, str], Calibration]):
    """Ticks of `domain` -> (reference estimate, error bound, extrapolated flag), as Calibration.translate; exact in
    the reference itself; None where no calibration relates the domain to the reference."""
    values = np.asarray(values, dtype=np.int64)
    if domain == reference:
        return values.astype(np.float64), np.zeros(values.shape), np.zeros(values.shape, dtype=bool)
    cal = calibrations.get((reference, domain))
    return None if cal is None else cal.translate(values)


def durations(start_domain: str, start, end_domain: str, end, reference: str,
              calibrations: dict[tuple[str, str], Calibration]) -> Duration:
    """Durations from (start_domain, start) to (end_domain, end) in reference ticks, by the best path.

    calibrations[(X, Y)] relates domain Y to domain X as its reference (Y's ticks -> X's ticks). Paths: trivial and
    Scenario 1 (both ends in one domain), Scenario 2 (one end in the reference); between two non-reference domains
    the baseline through the reference (both ends translated, 2e) and Scenario 3 through a calibration of the pair
    in either orientation (one end translated into the other's domain, the local duration scaled with that
    domain's calibration to the reference). Each duration takes the best path (see _best); where no calibration
    relates its ends it is unbounded: value NaN, error inf, method "unbounded", flagged.
    """
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    n = start.shape
    paths = [Duration(np.full(n, np.nan), np.full(n, np.inf), _paths(n, "unbounded"), np.ones(n, dtype=bool))]
    if start_domain == end_domain == reference:
        paths.append(Duration((end - start).astype(np.float64), np.zeros(n), _paths(n, "trivial"),
                              np.zeros(n, dtype=bool)))
    elif start_domain == end_domain:
        cal = calibrations.get((reference, start_domain))
        if cal is not None:
            v, e = cal.scale(start, end)
            paths.append(Duration(v, e, _paths(n, "scenario1"), ~cal.covers(start)))
    else:
        s, t = (to_reference(d, v, reference, calibrations) for d, v in ((start_domain, start), (end_domain, end)))
        if s is not None and t is not None:
            one_is_reference = reference in (start_domain, end_domain)
            paths.append(Duration(t[0] - s[0], s[1] + t[1], _paths(n, "scenario2" if one_is_reference else "baseline"),
                                  s[2] | t[2]))
        for x, y, x_values, y_values, x_is_start in ((start_domain, end_domain, start, end, True),
                                                     (end_domain, start_domain, end, start, False)):
            if reference not in (x, y) and (reference, x) in calibrations and (x, y) in calibrations:
                paths.append(_scenario3(calibrations[(reference, x)], calibrations[(x, y)], x_values, y_values,
                                        x_is_start))
    return _best(paths)
