"""What each handler keeps, checked against the ids and calls that went in."""
import threading

import numpy as np
import pytest

import cloudprofiler as cp


def records(channel):
    channel.close()
    return cp.read_log(channel.path)


def test_xoy_keeps_exactly_ids_with_id_mod_y_below_x(log_dir):
    ids = np.arange(-5000, 20000, dtype=np.int64)
    ch = cp.Channel("xoy", "xoy", (3, 1024))
    ch.log_many(ids)
    kept = records(ch).column("tuple_id").to_numpy()
    assert list(kept) == [i for i in ids if i % 1024 < 3]


def test_downsample_keeps_every_nth_call(log_dir):
    ch = cp.Channel("downsample", "downsample", (7,))
    for i in range(10000):
        ch.log(i * 3)
    assert list(records(ch).column("tuple_id").to_numpy()) == [i * 3 for i in range(0, 10000, 7)]


def test_first_last_keeps_the_first_and_the_last_record(log_dir):
    ch = cp.Channel("firstlast", "firstlast")
    ch.log_many(np.arange(100, 5000))
    table = records(ch)
    assert table.column("tuple_id").to_pylist() == [100, 4999]
    tsc = table.column("tsc").to_pylist()
    assert tsc[0] < tsc[1]


def test_identity_keeps_every_record_in_order(log_dir):
    ch = cp.Channel("identity", "identity")
    for i in range(5000):
        ch.log(i)
    table = records(ch)
    assert table.column("tuple_id").to_pylist() == list(range(5000))
    assert np.all(np.diff(table.column("tsc").to_numpy().astype(np.int64)) >= 0)


def test_null_writes_nothing_but_counts(log_dir):
    ch = cp.Channel("null", "null")
    ch.log_many(np.arange(1000))
    assert ch.stats.logged == 1000
    assert records(ch).num_rows == 0


@pytest.mark.parametrize("handler,threads", [("spc", 1), ("mpc", 4)])
def test_counters_sum_to_the_number_of_calls(log_dir, handler, threads):
    ch = cp.Channel(f"counter-{handler}", handler, (200_000,))  # 200 us periods
    per_thread = 300_000

    def work():
        ch.log_many(np.zeros(per_thread, dtype=np.int64))

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    table = records(ch)
    assert table.column_names == ["period_start_tsc", "count"]
    assert sum(table.column("count").to_pylist()) == threads * per_thread
    starts = table.column("period_start_tsc").to_numpy().astype(np.int64)
    assert np.all(np.diff(starts) > 0)


def test_parameterize_changes_what_xoy_keeps(log_dir):
    ch = cp.Channel("xoy-param", "xoy", (1, 10))
    ch.log_many(np.arange(20))
    ch.parameterize(0, 2)
    ch.log_many(np.arange(20, 40))
    assert records(ch).column("tuple_id").to_pylist() == [0, 10, 20, 21, 30, 31]
