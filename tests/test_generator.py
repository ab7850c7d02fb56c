"""Generator against a real consumer over loopback TCP: rate accuracy, counted drops, dead consumer, bad input."""
import socket

import numpy as np
import pytest

from cloudprofiler.harness.generator.consumer import consume
from cloudprofiler.harness.generator.emitter import Generator, GeneratorConfig
from cloudprofiler.harness.generator.workloads import YSB_ADS, ZIPF_EXPONENT, make_buckets


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(capacity_tps=None, **kwargs):
    config = GeneratorConfig(port=free_port(), timeout_s=5, **kwargs)
    generator = Generator(config).start()
    report = consume([config.endpoint(i) for i in range(config.emitters)], timeout_s=15, capacity_tps=capacity_tps)
    return report, generator.join()


@pytest.mark.parametrize("rate,emitters", [(10_000, 1), (200_000, 2), (1_000_000, 1)])
def test_rate_within_one_percent_measured_by_receiver(rate, emitters):
    report, results = run_pair(rate=rate, emitters=emitters, duration_s=3)
    assert [r.error for r in results] == [None] * emitters
    assert report.dropped_tuples == 0
    assert report.received_tuples == report.emitted_tuples
    assert report.rate_tps(warmup_s=0.5) == pytest.approx(rate, rel=0.01)


def test_slow_consumer_drops_are_counted():
    report, results = run_pair(capacity_tps=50_000, rate=200_000, duration_s=2, queue_buckets=50)
    assert results[0].error is None
    assert report.dropped_tuples > 0
    assert report.emitted_tuples == report.received_tuples
    assert report.emitted_tuples + report.dropped_tuples == 400_000
    assert report.missing_buckets == results[0].dropped_buckets


def test_no_consumer_times_out_with_a_clear_message():
    config = GeneratorConfig(port=free_port(), timeout_s=1, rate=10_000, duration_s=5)
    (result,) = Generator(config).run()
    assert result.error == f"no consumer connected to {config.endpoint(0)} within 1 s"


def test_consumer_that_stops_reading_stops_the_generator():
    import zmq

    config = GeneratorConfig(port=free_port(), timeout_s=1, rate=100_000, duration_s=30, queue_buckets=50)
    generator = Generator(config).start()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, 1)
    sock.setsockopt(zmq.RCVBUF, 1 << 12)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(config.endpoint(0))
    sock.recv_multipart(copy=False)
    (result,) = generator.join()  # the consumer never reads again
    sock.close()
    ctx.term()
    assert result.error == f"the consumer at {config.endpoint(0)} took no bucket for 1 s; stopping"
    assert result.dropped_tuples > 0


@pytest.mark.parametrize("field,value,message", [
    ("workload", "tweets", "unknown workload 'tweets'"),
    ("rate", 0, "rate must be > 0 tuples/s, got 0"),
    ("rate", -5, "rate must be > 0 tuples/s, got -5"),
    ("distribution", "pareto", "unknown key distribution 'pareto'"),
    ("emitters", 0, "emitters must be >= 1, got 0"),
])
def test_bad_config_names_the_value(field, value, message):
    with pytest.raises(ValueError, match=message):
        Generator(GeneratorConfig(**{field: value}))


@pytest.mark.parametrize("distribution", ["uniform", "normal", "zipf"])
def test_workloads_are_seeded_and_in_range(distribution):
    a = make_buckets("ysb", 1000, 2, seed=7, distribution=distribution)
    b = make_buckets("ysb", 1000, 2, seed=7, distribution=distribution)
    assert a[0].equals(b[0]) and a[1].equals(b[1])
    ads = a[0].column("ad_id").to_numpy()
    assert ads.min() >= 0 and ads.max() < 1000
    geo = make_buckets("purchases", 1000, 1, seed=1, distribution=distribution)[0].column("geo").to_numpy()
    assert geo.min() >= 0 and geo.max() < 100


def test_key_distributions_have_their_shapes():
    """Uniform keys spread evenly, Zipf keys crowd on the smallest ones, normal keys around the middle."""
    keys = {d: make_buckets("ysb", 20_000, 1, seed=3, distribution=d)[0].column("ad_id").to_numpy()
            for d in ("uniform", "normal", "zipf")}
    share_of_key_0 = {d: float(np.mean(k == 0)) for d, k in keys.items()}
    assert share_of_key_0["zipf"] > 0.12 > 0.01 > share_of_key_0["uniform"]  # Zipf(1.2) on 1000 keys: P(0) = 23%
    assert abs(np.mean(keys["uniform"]) - 499.5) < 15 and np.std(keys["uniform"]) > 250
    middle = float(np.mean(np.abs(keys["normal"] - 500) < 250))
    assert middle > 0.6 and middle > float(np.mean(np.abs(keys["uniform"] - 500) < 250)) + 0.1


def zipf_shares(n: int, s: float) -> np.ndarray:
    """Zipf's law on n keys: key k (0-based) has share (k + 1)^-s / H(n, s)."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -s
    return weights / weights.sum()


def chi_square(keys: np.ndarray, shares: np.ndarray) -> float:
    """Pearson's statistic of the keys' counts against the shares they should follow."""
    expected = shares * keys.size
    assert expected.min() >= 5, "too few samples for the chi-square approximation"
    counts = np.bincount(keys, minlength=shares.size)
    return float(np.sum((counts - expected) ** 2 / expected))


def chi_square_critical(df: int, z: float = 5.0) -> float:
    """The chi-square quantile z standard deviations into the upper tail (Wilson-Hilferty): a right distribution
    exceeds it with probability 3e-7."""
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def test_uniform_and_zipf_keys_follow_their_own_law_and_not_the_other():
    """Known answers on 1000 ads: uniform gives every key 1/1000, Zipf(s) the top key 1/H(1000, s) (23% for
    s = 1.2); a chi-square over all keys accepts each distribution's own law and rejects the other's."""
    samples = 200_000
    keys = {d: make_buckets("ysb", samples, 1, seed=11, distribution=d)[0].column("ad_id").to_numpy()
            for d in ("uniform", "zipf")}
    shares = {"uniform": np.full(YSB_ADS, 1 / YSB_ADS), "zipf": zipf_shares(YSB_ADS, ZIPF_EXPONENT)}
    assert 0.22 < shares["zipf"][0] < 0.24
    for d in keys:
        top = shares[d][0]
        sigma = (top * (1 - top) / samples) ** 0.5
        assert abs(np.mean(keys[d] == 0) - top) < 5 * sigma, d
    critical = chi_square_critical(YSB_ADS - 1)
    for d, other in (("uniform", "zipf"), ("zipf", "uniform")):
        assert chi_square(keys[d], shares[d]) < critical, d
        assert chi_square(keys[d], shares[other]) > 10 * critical, (d, other)


def test_a_bucket_s_two_stamps_are_read_together_and_again_where_a_pause_split_them(monkeypatch):
    """A bucket's TSC and wall clock are read as one pair: the wall clock between two reads of the TSC, at their
    midpoint. A pause between the reads (the GIL passed to another thread, the thread preempted: milliseconds, which
    set a bucket's event time that far from its emission) widens the bracket, which is then read again."""
    from cloudprofiler.harness.generator import emitter

    ticks = iter([1_000, 5_001_000, 6_000_000, 6_000_020])  # a 5 ms pause within the first bracket (1 GHz ticks)
    walls = iter([111, 222])
    monkeypatch.setattr(emitter.time, "time_ns", lambda: next(walls))
    assert emitter._paired(lambda: next(ticks), 1e9)() == (6_000_010, 222)
    ticks = iter([7_000_000, 7_000_030])  # a narrow bracket: read once
    walls = iter([333])
    assert emitter._paired(lambda: next(ticks), 1e9)() == (7_000_015, 333)
    ticks = iter(range(0, 600_000, 100_000))  # every bracket wide: the narrowest of PAIR_TRIES
    walls = iter([1, 2, 3])
    assert emitter._paired(lambda: next(ticks), 1e9)() == (50_000, 1)
