"""The log-bucketed sketches the pipeline's hops are counted in, and the pairing of a hop's records by tuple id,
checked against answers computed directly."""
import numpy as np
import pandas as pd
import pytest

from cloudprofiler.analysis import sketch
from cloudprofiler.analysis.hops import HopSketches, _hop_rows, pairs


def _buckets(values):
    keys, counts = sketch.count_keys(values)
    return pd.DataFrame({"key": keys, "count": counts})


def test_quantiles_lie_within_the_relative_accuracy_of_the_value_at_their_rank():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.lognormal(9, 2, 50_000), -rng.lognormal(5, 1, 5_000), np.zeros(100), [0.4, -0.2]])
    qs = [0.0001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0]
    # the sketch of two halves added up is the sketch of the whole
    halves = pd.concat([_buckets(values[::2]), _buckets(values[1::2])])
    for q, found in zip(qs, sketch.quantiles(halves, qs)):
        exact = np.quantile(values, q, method="inverted_cdf")
        if abs(exact) < sketch.MIN_NS:
            assert found == 0
        else:
            assert abs(found - exact) <= sketch.RELATIVE_ACCURACY * abs(exact), (q, found, exact)
    assert sketch.quantiles(_buckets(np.array([])), [0.5]) == [None]


def test_every_value_is_within_the_accuracy_of_its_buckets_value():
    values = np.geomspace(sketch.MIN_NS, 1e12, 100_001)
    represented = sketch.values(sketch.keys(values))
    assert np.all(np.abs(represented - values) <= sketch.RELATIVE_ACCURACY * values * (1 + 1e-12))
    assert np.all(np.diff(sketch.keys(values)) >= 0)  # buckets keep the order of values


def test_rebinning_counts_each_bucket_once_in_the_bin_holding_its_value():
    values = np.array([1.0, 5.0, 5.0, 50.0, 500.0, 5000.0])
    counts = sketch.rebin(_buckets(values), np.array([1.0, 10.0, 100.0, 1000.0]))
    assert counts.tolist() == [3, 1, 2]  # 5,000 lies above the last edge: the last bin


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pairs_are_the_inner_join_of_the_ids_repeated_ones_included(seed):
    rng = np.random.default_rng(seed)
    left, right = np.sort(rng.integers(0, 300, 500)), np.sort(rng.integers(0, 300, 400))
    i, j = pairs(left, right)
    assert np.all(left[i] == right[j])
    joined = pd.DataFrame({"id": left, "i": np.arange(500)}).merge(pd.DataFrame({"id": right, "j": np.arange(400)}))
    assert sorted(zip(i.tolist(), j.tolist())) == sorted(zip(joined["i"], joined["j"]))


def test_a_hops_bounds_and_their_distribution_per_remote_from_two_partitions():
    inf = float("inf")
    parts = [  # (latency, bound, unbounded, remote) of the pairs two partitions met
        [(5.0, 11e3, False, True)] * 2 + [(7.0, inf, True, True), (1e3, 0.0, False, False)],
        [(6.0, 11e3, False, True), (8.0, 23e3, False, True), (9.0, inf, True, True), (2e3, 0.0, False, False),
         (3e3, 4.5, False, False)]]
    rows = []
    for part in parts:
        value, error, unbounded, remote = (np.array(column) for column in zip(*part))
        rows += _hop_rows(0, value, error, unbounded, remote)
    hops = HopSketches(["a", "b"], pd.DataFrame(rows))
    bounds = hops.bounds(0).sort_values("remote").to_dict("records")
    assert [{k: r[k] for k in ("remote", "count", "exact", "unbounded", "err_max_ns")} for r in bounds] == [
        {"remote": False, "count": 3, "exact": 2, "unbounded": 0, "err_max_ns": 4.5},
        {"remote": True, "count": 6, "exact": 0, "unbounded": 2, "err_max_ns": 23e3}]
    assert bounds[0]["err_p50_ns"] == 0 and bounds[1]["err_p50_ns"] == pytest.approx(11e3, rel=sketch.RELATIVE_ACCURACY)
    errors = hops.errors(0, 8)
    assert errors[["remote", "count"]].values.tolist() == [[False, 1], [True, 3], [True, 1]]
    for row in errors.itertuples():  # each bound lies in its bin, bins 1/8 decade wide
        value = 4.5 if not row.remote else (11e3 if row.count == 3 else 23e3)
        assert row.lo_ns <= value < row.hi_ns and row.hi_ns / row.lo_ns == pytest.approx(10 ** (1 / 8))
    statistics = hops.hop_statistics(0, [0.5])
    assert (statistics["count"], statistics["remote_count"], statistics["unbounded_count"]) == (7, 4, 2)
    assert statistics["min_ns"] == 5.0 and statistics["max_ns"] == 3e3
    assert statistics["mean_ns"] == pytest.approx((5 + 5 + 6 + 8 + 1e3 + 2e3 + 3e3) / 7)
    assert statistics["q"][0] == pytest.approx(8.0, rel=sketch.RELATIVE_ACCURACY)
    histogram = hops.histogram(0, 4)
    assert histogram["count"].sum() == 7 and histogram.groupby("remote")["count"].sum().to_dict() == {False: 3, True: 4}


def test_pairings_past_the_limit_name_the_id_repeated_most():
    left, right = np.sort(np.r_[np.arange(10), [7] * 50]), np.sort(np.r_[np.arange(10), [7] * 40])
    assert len(pairs(left, right)[0]) == 9 + 51 * 41
    with pytest.raises(ValueError, match=r"2,100 pairings of 60 and 50 records \(each record of tuple id 7 pairs "
                                         r"with 51\)"):
        pairs(left, right, max_pairs=1000)
