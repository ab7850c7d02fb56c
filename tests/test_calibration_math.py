"""Translation and error bounds against synthetic truth: affine clocks with offsets of hours and skews of tens
of ppm, probes over asymmetric, jittery paths. Every true value must lie inside its reported bound."""
import numpy as np
import pytest

from cloudprofiler.calibration import Calibration, Probes, anchor_from_probes, durations

HZ = 2.0e9  # reference ticks per second


class Domain:
    """A TSC domain: its ticks as an affine function of true time (in reference ticks)."""

    def __init__(self, offset: int, skew_ppm: float):
        self.offset, self.rate = offset, 1.0 + skew_ppm * 1e-6

    def ticks(self, true_time):
        return np.floor(self.offset + np.asarray(true_time, dtype=np.float64) * self.rate).astype(np.int64)

    def true_time(self, ticks):  # the earliest true time at which the domain shows `ticks`
        return (np.asarray(ticks, dtype=np.float64) - self.offset) / self.rate


def probe_round(rng, a: Domain, b: Domain, t0: float, k: int, forward_us, backward_us, from_reference=True):
    """k probes starting at true time t0 (reference ticks), each with one-way delays drawn per direction."""
    start = t0 + np.arange(k) * 20e3  # 10 us apart
    out_delay = rng.uniform(*forward_us, size=k) * HZ / 1e6
    back_delay = rng.uniform(*backward_us, size=k) * HZ / 1e6
    init, answer = (a, b) if from_reference else (b, a)
    arrive = start + out_delay
    return Probes.of(init.ticks(start), answer.ticks(arrive), init.ticks(arrive + back_delay), from_reference)


def make_calibration(rng, a, b, times, method, asymmetric=True):
    rounds = []
    for i, t in enumerate(times):
        fwd, back = ((2, 9), (30, 80)) if asymmetric else ((3, 8), (3, 8))
        rounds.append(probe_round(rng, a, b, t, 100, fwd, back, from_reference=i % 2 == 0))
    return Calibration.from_rounds(rounds, method)


@pytest.mark.parametrize("method", ["minrtt", "minpair"])
def test_one_million_translated_values_are_all_inside_their_bounds(method):
    rng = np.random.default_rng(7)
    a, b = Domain(0, 0.0), Domain(3 * 3600 * int(HZ), -37.5)  # B booted hours earlier, runs 37.5 ppm slow
    cal = make_calibration(rng, a, b, [1e9, 60e9, 120e9], method)
    true = rng.uniform(1.01e9, 120e9, size=1_000_000)  # inside the calibrated span
    ticks = b.ticks(true)
    est, err, extrapolated = cal.translate(ticks)
    truth = a.ticks(b.true_time(ticks))  # the reference tick at the instant B showed `ticks`
    assert not extrapolated.any()
    assert np.all(np.abs(est - truth) <= err + 1)  # +1: the truth itself is floored to a tick
    assert err.max() < 90e-6 * HZ / 2 + 2  # never worse than half the slowest path's round trip


def test_minpair_is_no_wider_than_minrtt_and_asymmetry_never_breaks_containment():
    rng = np.random.default_rng(11)
    a, b = Domain(0, 0.0), Domain(-7 * 3600 * int(HZ), 52.0)
    times = [5e9, 65e9]
    wide = make_calibration(np.random.default_rng(1), a, b, times, "minrtt")
    tight = make_calibration(np.random.default_rng(1), a, b, times, "minpair")
    assert np.all(tight.err <= wide.err + 1e-9)
    assert tight.err.mean() < wide.err.mean()
    ticks = b.ticks(rng.uniform(5.01e9, 65e9, size=200_000))
    truth = a.ticks(b.true_time(ticks))
    for cal in (wide, tight):
        est, err, _ = cal.translate(ticks)
        assert np.all(np.abs(est - truth) <= err + 1)


def test_durations_pick_the_smallest_error_path_and_contain_the_truth():
    rng = np.random.default_rng(3)
    a, b, c = Domain(0, 0.0), Domain(2 * 3600 * int(HZ), 31.0), Domain(-5 * 3600 * int(HZ), -44.0)
    times = [1e9, 100e9]
    cals = {("A", "B"): make_calibration(rng, a, b, times, "minrtt"),
            ("A", "C"): make_calibration(rng, a, c, times, "minrtt"),
            ("B", "C"): make_calibration(rng, b, c, times, "minrtt")}
    n = 1_000_000
    t_start = rng.uniform(2e9, 90e9, size=n)
    t_end = t_start + rng.uniform(0, 5e6, size=n)  # up to 2.5 ms later
    cases = {("A", "A"): "trivial", ("B", "B"): "scenario1", ("A", "B"): "scenario2", ("B", "C"): "scenario3"}
    dom = {"A": a, "B": b, "C": c}
    for (s, e), expected in cases.items():
        start, end = dom[s].ticks(t_start), dom[e].ticks(t_end)
        truth = a.ticks(dom[e].true_time(end)) - a.ticks(dom[s].true_time(start))
        d = durations(s, start, e, end, "A", cals)
        assert np.all(np.abs(d.value - truth) <= d.error + 2), (s, e)
        assert set(d.method) == {expected}, (s, e)
    # Scenario 1 scales a short local duration: its bound is far below e (Table 2)
    d1 = durations("B", b.ticks(t_start), "B", b.ticks(t_end), "A", cals)
    assert d1.error.max() < cals[("A", "B")].err.min() / 10
    # Scenario 3 beats the baseline that translates both ends (2e)
    without_b_c = {k: v for k, v in cals.items() if k != ("B", "C")}
    base = durations("B", b.ticks(t_start), "C", c.ticks(t_end), "A", without_b_c)
    s3 = durations("B", b.ticks(t_start), "C", c.ticks(t_end), "A", cals)
    assert set(base.method) == {"baseline"} and s3.error.mean() < base.error.mean()


def test_values_outside_the_calibrated_span_are_flagged():
    rng = np.random.default_rng(5)
    a, b = Domain(0, 0.0), Domain(10**12, 20.0)
    cal = make_calibration(rng, a, b, [10e9, 20e9], "minrtt")
    _, err, flagged = cal.translate(b.ticks(np.array([15e9, 40e9])))
    assert list(flagged) == [False, True] and err[1] > err[0]


def test_bad_input_is_refused_with_the_value():
    with pytest.raises(ValueError, match="returns before it leaves"):
        Probes.of([10, 20], [5, 5], [15, 19])
    with pytest.raises(ValueError, match="at least two rounds"):
        Calibration([])
    with pytest.raises(ValueError, match="method='best'"):
        anchor_from_probes(Probes.of([1], [2], [3]), "best")
    unbounded = durations("A", [1], "Z", [2], "A", {})
    assert list(unbounded.method) == ["unbounded"] and np.isinf(unbounded.error).all() and unbounded.extrapolated.all()


def test_a_pair_calibration_that_stopped_gives_way_to_the_path_through_the_reference():
    rng = np.random.default_rng(9)
    a, b, c = Domain(0, 0.0), Domain(4 * 3600 * int(HZ), 18.0), Domain(-3 * 3600 * int(HZ), -26.0)
    cals = {("A", "B"): make_calibration(rng, a, b, [1e9, 100e9], "minpair"),
            ("A", "C"): make_calibration(rng, a, c, [1e9, 100e9], "minpair"),
            ("B", "C"): make_calibration(rng, b, c, [1e9, 40e9], "minpair"),  # the pair stopped answering at 40 s
            ("C", "B"): make_calibration(rng, c, b, [1e9, 40e9], "minpair")}
    t = np.array([20e9, 70e9])  # inside the pair's span, after it
    start, end = b.ticks(t), c.ticks(t + 1e6)
    truth = a.ticks(c.true_time(end)) - a.ticks(b.true_time(start))
    d = durations("B", start, "C", end, "A", cals)
    assert list(d.method) == ["scenario3", "baseline"] and not d.extrapolated.any()
    assert np.all(np.abs(d.value - truth) <= d.error + 2)
    # without the start's calibration to the reference, the pair in the other orientation carries the duration
    reverse = durations("B", start, "C", end, "A", {k: v for k, v in cals.items() if k != ("A", "B")})
    assert list(reverse.method) == ["scenario3", "scenario3"] and list(reverse.extrapolated) == [False, True]
    assert np.all(np.abs(reverse.value - truth) <= reverse.error + 2)


def rounds_with_one_descheduled(rng, a, b, times, bad, delay_us=(300, 500)):
    """Rounds of 100 probes over a 3-9 us path; in round `bad` the scheduler delayed every probe's answer."""
    return [probe_round(rng, a, b, t, 100, (3, 9), delay_us if i == bad else (3, 9)) for i, t in enumerate(times)]


@pytest.mark.parametrize("bad", [0, 2, 4])
def test_a_round_in_which_every_probe_was_delayed_does_not_widen_the_bounds_around_it(bad):
    rng = np.random.default_rng(5)
    a, b = Domain(0, 0.0), Domain(2 * 3600 * int(HZ), 23.0)
    times = [1e9 + i * 10e9 for i in range(5)]
    cal = Calibration.from_rounds(rounds_with_one_descheduled(rng, a, b, times, bad), "minrtt")
    assert cal.err[bad] > 100e-6 * HZ and np.all(np.delete(cal.err, bad) < 10e-6 * HZ)
    inner = bad not in (0, len(times) - 1)  # the first and last rounds bound the calibrated span: always used
    assert (bad in cal.used) != inner
    true = rng.uniform(times[0] + 1e6, times[-1], size=200_000)
    ticks = b.ticks(true)
    est, err, extrapolated = cal.translate(ticks)
    truth = a.ticks(b.true_time(ticks))
    assert not extrapolated.any() and np.all(np.abs(est - truth) <= err + 1)
    near = np.abs(true - times[bad]) < 1e9
    if inner:  # near the bad round the bound is the good rounds' (4.5 us at most), not its 150 us or more
        assert err[near].max() < 10e-6 * HZ
    else:  # a first or last round: the good rounds' line extended to it, at most 3 x 4.5 us there
        assert err[near].max() < 15e-6 * HZ and cal.interpolated()[2][cal.used.tolist().index(bad)] < cal.err[bad]


def test_an_anchor_that_contradicts_the_constant_rate_between_its_neighbours_is_kept():
    rng = np.random.default_rng(9)
    a = Domain(0, 0.0)
    times = [1e9, 11e9, 21e9]
    slow, fast = Domain(10**12, 0.0), Domain(10**12 - 200e-6 * 11e9, 200.0)  # B runs 200 ppm fast after 11 s
    rounds = [probe_round(rng, a, slow if t < 11e9 else fast, t, 100, (3, 9), (300, 500) if i == 1 else (3, 9))
              for i, t in enumerate(times)]
    cal = Calibration.from_rounds(rounds, "minrtt")
    # the middle anchor is wide, but the line from the first to the last misses it by the 1.1 ms the rate change
    # put between them: the rates were not constant, so translation keeps it
    assert list(cal.used) == [0, 1, 2]


def test_a_delayed_end_round_that_contradicts_the_line_of_the_good_ones_is_kept():
    rng = np.random.default_rng(11)
    a = Domain(0, 0.0)
    times = [1e9, 11e9, 21e9, 31e9]
    # B ran 300 ppm fast before 11 s: the line of the last three rounds, extended back to the first, misses it by
    # 3 ms, more than the first round's own 300-500 us: the rates were not constant, and its anchor stays
    fast, steady = Domain(10**12 - 300e-6 * 11e9, 300.0), Domain(10**12, 0.0)
    rounds = [probe_round(rng, a, fast if t < 11e9 else steady, t, 100, (300, 500) if i == 0 else (3, 9), (3, 9))
              for i, t in enumerate(times)]
    cal = Calibration.from_rounds(rounds, "minrtt")
    assert cal.interpolated()[2][0] == cal.err[0] and cal.interpolated()[1][0] == cal.ref[0]
    ticks = np.concatenate([fast.ticks(np.linspace(1e9, 11e9, 1000)), steady.ticks(np.linspace(11e9, 31e9, 1000))])
    truth = np.concatenate([np.linspace(1e9, 11e9, 1000), np.linspace(11e9, 31e9, 1000)])
    est, err, _ = cal.translate(ticks)
    assert np.all(np.abs(est - truth) <= err + 2)


def test_a_delayed_round_is_taken_again_and_the_best_kept():
    from cloudprofiler.calibration.probe import RETRIES, retaken_round

    def rounds_of(*rtts):
        taken = iter(rtts)
        calls = []

        def take():
            calls.append(1)
            rtt = next(taken)
            return Probes.of([0, 100], [50, 150], [rtt, 100 + 3 * rtt])

        return take, calls

    take, calls = rounds_of(400, 9, 12)
    assert retaken_round(take, best_rtt=10).rtt.min() == 9 and len(calls) == 2  # 400 > 4 x 10: taken again
    take, calls = rounds_of(39, 1)
    assert retaken_round(take, best_rtt=10).rtt.min() == 39 and len(calls) == 1  # within 4x: kept
    take, calls = rounds_of(500, 450, 480, 470, 1)
    assert retaken_round(take, best_rtt=10).rtt.min() == 450 and len(calls) == 1 + RETRIES  # bounded retries
    take, calls = rounds_of(400)
    assert retaken_round(take, best_rtt=np.inf).rtt.min() == 400  # nothing seen yet: nothing to compare with
